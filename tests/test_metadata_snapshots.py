"""Metadata snapshots (``<offset>-<epoch>.checkpoint``) and ``quorum-state``, as Kafka writes them.

Pure codecs first (round trips, refusals of truncated and corrupt files, the quorum-state JSON
of both versions), then a real broker process: snapshots taken by Kafka's thresholds, read by
Kafka's own ``kafka-dump-log --cluster-metadata-decoder`` and ``kafka-metadata-shell
--snapshot``, loaded on restart (snapshot + the log after it), the log cleaned behind them, and a
truncated newest snapshot refused or skipped.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkawire.tools.testing import BrokerProcess
from kraft.image import MetadataImage, apply
from kraft.image_writer import image_records
from kraft.quorum_state import (
    QuorumState,
    QuorumStateError,
    decode_quorum_state,
    encode_quorum_state,
)
from kraft.snapshot import SnapshotError, SnapshotId, decode_snapshot, encode_snapshot
from protocol._generated.broker_registration_change_record import BrokerRegistrationChangeRecord
from protocol._generated.client_quota_record import ClientQuotaRecord
from protocol._generated.config_record import ConfigRecord
from protocol._generated.feature_level_record import FeatureLevelRecord
from protocol._generated.fence_broker_record import FenceBrokerRecord
from protocol._generated.partition_change_record import PartitionChangeRecord
from protocol._generated.partition_record import PartitionRecord
from protocol._generated.producer_ids_record import ProducerIdsRecord
from protocol._generated.register_broker_record import RegisterBrokerRecord
from protocol._generated.remove_topic_record import RemoveTopicRecord
from protocol._generated.remove_user_scram_credential_record import (
    RemoveUserScramCredentialRecord,
)
from protocol._generated.topic_record import TopicRecord
from protocol._generated.unfence_broker_record import UnfenceBrokerRecord
from protocol._generated.unregister_broker_record import UnregisterBrokerRecord
from protocol._generated.user_scram_credential_record import UserScramCredentialRecord
from protocol._generated.voters_record import VotersRecord

CACHE = Path(os.environ.get("KAFKAWIRE_CACHE", Path.home() / ".cache" / "kafkawire"))
LIBS = CACHE / "kafka-4.3.1" / "libs"
JVM = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xmx256m", "-Djava.awt.headless=true"]


def _records(n_topics: int, parts: int) -> list[object]:
    out: list[object] = [
        FeatureLevelRecord(name="metadata.version", feature_level=30),
        FeatureLevelRecord(name="group.version", feature_level=0),
        RegisterBrokerRecord(
            broker_id=1, incarnation_id=uuid.UUID(int=7), broker_epoch=3,
            end_points=[RegisterBrokerRecord.BrokerEndpoint(
                name="PLAINTEXT", host="h", port=9092, security_protocol=0)],
            features=[], rack="r1", fenced=False, in_controlled_shutdown=False, log_dirs=[]),
        ProducerIdsRecord(broker_id=1, broker_epoch=3, next_producer_id=2000),
        ClientQuotaRecord(entity=[ClientQuotaRecord.EntityData(entity_type="user",
                                                               entity_name=None)],
                          key="producer_byte_rate", value=1024.0, remove=False),
        UserScramCredentialRecord(name="alice", mechanism=1, salt=b"s", stored_key=b"k",
                                  server_key=b"v", iterations=4096),
        ConfigRecord(resource_type=4, resource_name="", name="min.insync.replicas", value="1"),
    ]
    for t in range(n_topics):
        tid = uuid.UUID(int=t + 1)
        out.append(TopicRecord(name=f"t{t}", topic_id=tid))
        out.append(ConfigRecord(resource_type=2, resource_name=f"t{t}", name="retention.ms",
                                value=str(1000 + t)))
        for p in range(parts):
            out.append(PartitionRecord(partition_id=p, topic_id=tid, replicas=[1], isr=[1],
                                       leader=1, leader_epoch=0, partition_epoch=0,
                                       directories=[uuid.UUID(int=0)]))
        out.append(PartitionChangeRecord(partition_id=0, topic_id=tid, leader=1))
    return out


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 6), st.integers(1, 4), st.integers(0, 1), st.integers(200, 4000))
def test_image_snapshot_round_trip(n_topics: int, parts: int, kraft_version: int,
                                   batch_bytes: int) -> None:
    img = apply(MetadataImage(), _records(n_topics, parts), 41, 3)
    sid = SnapshotId(42, 3)
    voters = VotersRecord(version_=0, voters=[VotersRecord.Voter(
        voter_id=1, voter_directory_id=uuid.UUID(int=5), endpoints=[
            VotersRecord.Endpoint(name="CONTROLLER", host="127.0.0.1", port=9093)],
        k_raft_version_feature=VotersRecord.KRaftVersionFeature(
            min_supported_version=0, max_supported_version=1))])
    data = encode_snapshot(image_records(img), sid, last_contained_log_timestamp=99,
                           now_ms=100, kraft_version=kraft_version, voters=voters,
                           max_batch_bytes=batch_bytes)
    got = decode_snapshot(data, sid)
    assert got.last_contained_log_timestamp == 99
    assert got.kraft_version == kraft_version
    assert (got.voters is not None) == (kraft_version == 1)
    assert apply(MetadataImage(), got.records, 41, 3) == img
    # every cut short of the whole file is refused, never half-loaded
    for cut in {1, 12, 61, len(data) // 2, len(data) - 75, len(data) - 1}:
        with pytest.raises(SnapshotError):
            decode_snapshot(data[:cut], sid)


# Any history of metadata records: the snapshot of the image it built replays to that image.
_TOPICS = [uuid.UUID(int=i + 1) for i in range(4)]


def _op(draw: st.DrawFn) -> list[object]:
    kind = draw(st.sampled_from(["topic", "remove", "change", "config", "feature", "broker",
                                 "fence", "unregister", "regchange", "pid", "quota", "scram",
                                 "unscram"]))
    tid = draw(st.sampled_from(_TOPICS))
    ids = st.lists(st.integers(0, 4), max_size=3)
    if kind == "topic":
        n = draw(st.integers(1, 3))
        return [TopicRecord(name=f"t{tid.int}", topic_id=tid)] + [
            PartitionRecord(partition_id=p, topic_id=tid, replicas=[1, 2], isr=[1],
                            leader=1, leader_epoch=0, partition_epoch=0,
                            directories=[uuid.UUID(int=0)] * 2) for p in range(n)]
    if kind == "remove":
        return [RemoveTopicRecord(topic_id=tid)]
    if kind == "change":
        return [PartitionChangeRecord(
            partition_id=0, topic_id=tid, isr=draw(st.none() | ids),
            leader=draw(st.sampled_from([-2, -1, 1, 2])), replicas=draw(st.none() | ids),
            eligible_leader_replicas=draw(st.none() | ids), last_known_elr=draw(st.none() | ids))]
    if kind == "config":
        return [ConfigRecord(resource_type=draw(st.sampled_from([2, 4])),
                             resource_name=draw(st.sampled_from(["", f"t{tid.int}"])),
                             name=draw(st.sampled_from(["retention.ms", "cleanup.policy"])),
                             value=draw(st.none() | st.sampled_from(["1", "compact"])))]
    if kind == "feature":
        return [FeatureLevelRecord(name=draw(st.sampled_from(
            ["group.version", "x.version", "eligible.leader.replicas.version"])),
            feature_level=draw(st.integers(0, 2)))]
    broker = draw(st.integers(1, 3))
    if kind == "broker":
        return [RegisterBrokerRecord(
            broker_id=broker, incarnation_id=uuid.UUID(int=broker), broker_epoch=draw(
                st.integers(0, 99)), end_points=[RegisterBrokerRecord.BrokerEndpoint(
                    name="PLAINTEXT", host="h", port=9000 + broker, security_protocol=0)],
            features=[RegisterBrokerRecord.BrokerFeature(
                name="metadata.version", min_supported_version=7, max_supported_version=30)],
            rack=draw(st.none() | st.just("r")), fenced=draw(st.booleans()),
            in_controlled_shutdown=False, log_dirs=[])]
    if kind == "fence":
        cls = draw(st.sampled_from([FenceBrokerRecord, UnfenceBrokerRecord]))
        return [cls(id=broker, epoch=1)]
    if kind == "unregister":
        return [UnregisterBrokerRecord(broker_id=broker, broker_epoch=1)]
    if kind == "regchange":
        return [BrokerRegistrationChangeRecord(
            broker_id=broker, broker_epoch=1, fenced=draw(st.sampled_from([-1, 0, 1])),
            in_controlled_shutdown=draw(st.sampled_from([0, 1])))]
    if kind == "pid":
        return [ProducerIdsRecord(broker_id=1, broker_epoch=1,
                                  next_producer_id=draw(st.integers(0, 10**6)))]
    if kind == "quota":
        return [ClientQuotaRecord(
            entity=[ClientQuotaRecord.EntityData(entity_type="user",
                                                 entity_name=draw(st.none() | st.just("u")))],
            key="producer_byte_rate", value=draw(st.floats(0, 1e6)), remove=draw(st.booleans()))]
    user = draw(st.sampled_from(["alice", "bob"]))
    if kind == "scram":
        return [UserScramCredentialRecord(name=user, mechanism=draw(st.sampled_from([1, 2])),
                                          salt=b"s", stored_key=b"k", server_key=b"v",
                                          iterations=4096)]
    return [RemoveUserScramCredentialRecord(name=user, mechanism=draw(st.sampled_from([1, 2])))]


@st.composite
def _history(draw: st.DrawFn) -> list[object]:
    out: list[object] = []
    for _ in range(draw(st.integers(0, 30))):
        recs = _op(draw)
        if isinstance(recs[0], PartitionChangeRecord):
            # only a partition that exists can change (the controller never writes others)
            img = apply(MetadataImage(), out, 0, 0)
            if recs[0].topic_id not in img.topics_by_id:  # type: ignore[attr-defined]
                continue
        out += recs
    return out


@settings(max_examples=150, deadline=None)
@given(_history())
def test_any_history_snapshots_to_the_same_image(history: list[object]) -> None:
    img = apply(MetadataImage(), history, len(history) - 1, 2)
    sid = SnapshotId(len(history), 2)
    data = encode_snapshot(image_records(img), sid, last_contained_log_timestamp=0, now_ms=0)
    assert apply(MetadataImage(), decode_snapshot(data, sid).records, len(history) - 1, 2) == img


def _elr_image(level: int | None) -> MetadataImage:
    """A partition with ELR [2] and LastKnownElr [3] written while ELR was on, then the
    feature at ``level`` (None: left on)."""
    tid = uuid.UUID(int=9)
    recs: list[object] = [
        FeatureLevelRecord(name="eligible.leader.replicas.version", feature_level=1),
        TopicRecord(name="e", topic_id=tid),
        PartitionRecord(partition_id=0, topic_id=tid, replicas=[1, 2, 3], isr=[1], leader=1,
                        leader_epoch=4, partition_epoch=7, directories=[uuid.UUID(int=0)] * 3,
                        eligible_leader_replicas=[2], last_known_elr=[3])]
    if level is not None:
        recs.append(FeatureLevelRecord(name="eligible.leader.replicas.version",
                                       feature_level=level))
    return apply(MetadataImage(), recs, len(recs) - 1, 1)


@pytest.mark.parametrize("level", [None, 0])
def test_snapshot_writes_elr_only_with_the_feature_on(level: int | None) -> None:
    """KIP-966: PartitionRecord's ELR and LastKnownElr (tagged fields) are in a snapshot only
    with eligible.leader.replicas.version >= 1, as Kafka's PartitionRegistration.toRecord;
    a downgrade to 0 drops them from the image too (no partition epoch moves), so the image
    reloaded from the snapshot is the same image either way."""
    img = _elr_image(level)
    p = img.topics["e"].partitions[0]
    on = level is None
    assert (p.eligible_leader_replicas, p.last_known_elr) == (((2,), (3,)) if on else ((), ()))
    assert p.partition_epoch == 7 and p.leader_epoch == 4
    sid = SnapshotId(img.offset + 1, 1)
    got = decode_snapshot(encode_snapshot(image_records(img), sid, last_contained_log_timestamp=0,
                                          now_ms=0), sid).records
    rec = next(r for r in got if isinstance(r, PartitionRecord))
    assert (rec.eligible_leader_replicas, rec.last_known_elr) == (([2], [3]) if on
                                                                   else (None, None))
    assert apply(MetadataImage(), got, img.offset, 1) == img


def test_corrupt_snapshot_refused() -> None:
    sid = SnapshotId(10, 1)
    data = bytearray(encode_snapshot(_records(2, 2), sid, last_contained_log_timestamp=1,
                                     now_ms=2))
    data[120] ^= 0xFF  # inside the first data batch: its CRC no longer matches
    with pytest.raises(SnapshotError, match="corrupt batch"):
        decode_snapshot(bytes(data), sid)
    with pytest.raises(SnapshotError):
        decode_snapshot(b"", sid)


def test_snapshot_file_names() -> None:
    sid = SnapshotId(36, 1)
    assert sid.file_name == "00000000000000000036-0000000001.checkpoint"
    assert SnapshotId.parse(sid.file_name) == sid
    assert SnapshotId.parse(sid.file_name + ".part") is None
    assert SnapshotId.parse("00000000000000000000.log") is None


def test_quorum_state_as_kafka_writes_it() -> None:
    # Kafka 4.3.1's files, static quorum (kraft.version 0) and dynamic (kraft.version 1)
    v0 = ('{"clusterId":"","leaderId":1,"leaderEpoch":1,"votedId":-1,"appliedOffset":0,'
          '"currentVoters":[{"voterId":1}],"data_version":0}')
    state = decode_quorum_state(v0)
    assert state == QuorumState(leader_id=1, leader_epoch=1, current_voters=(1,))
    assert encode_quorum_state(state) == v0
    # what Kafka 4.3.1 wrote as the leader of a --standalone quorum
    v1_leader = ('{"leaderId":1,"leaderEpoch":1,"votedId":-1,"votedDirectoryId":'
                 '"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}')
    assert encode_quorum_state(decode_quorum_state(v1_leader)) == v1_leader
    assert decode_quorum_state(v1_leader) == QuorumState(leader_id=1, leader_epoch=1,
                                                         data_version=1)
    v1 = ('{"leaderId":2,"leaderEpoch":7,"votedId":3,"votedDirectoryId":'
          '"xKCH2DHfTqeTtlxvkCDkgw","data_version":1}')
    state = decode_quorum_state(v1)
    assert state.voted_id == 3 and state.data_version == 1
    assert str(state.voted_directory_id) == "c4a087d8-31df-4ea7-93b6-5c6f9020e483"
    assert encode_quorum_state(state) == v1
    for bad in ("", "[]", '{"data_version":7}', '{"data_version":0,"leaderEpoch":"x"}'):
        with pytest.raises(QuorumStateError):
            decode_quorum_state(bad)


# ---- a real broker ----------------------------------------------------------------------


def _java(main: str, *args: str) -> str:
    p = subprocess.run(["java", *JVM, "-cp", f"{LIBS}/*", main, *args],
                       capture_output=True, text=True, timeout=180)
    out = "\n".join(ln for ln in (p.stdout + p.stderr).splitlines() if "SLF4J" not in ln)
    assert p.returncode == 0, out
    return out


def _need_java(shell: bool = False) -> None:
    if shutil.which("java") is None or not any(LIBS.glob("kafka-clients*")):
        pytest.skip("java or the Kafka 4.3.1 jars are not available")
    if shell and not any(LIBS.glob("kafka-shell-*")):
        pytest.skip("kafka-shell jar missing (python -m compat_tests.kafka_dist fetch --force)")


def _wait(cond: object, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


def _snapshots(meta: Path) -> list[Path]:
    return sorted(meta.glob("*.checkpoint"))


def _create_topics(bootstrap: str, names: list[str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(n, 2, 1, config={"retention.ms": "123456"})
                                  for n in names]).values():
        f.result(60)


def _topics(bootstrap: str) -> set[str]:
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30)
    return set(md.topics)


SNAP = {
    "metadata.log.max.record.bytes.between.snapshots": "700",
    "internal.metadata.log.segment.bytes": "1500",
    "metadata.max.retention.bytes": "5000",
}


def test_snapshots_taken_read_by_kafka_tools_and_loaded(tmp_path: Path) -> None:
    _need_java()
    data = tmp_path / "data"
    meta = data / "__cluster_metadata-0"
    names = [f"snap-{i}" for i in range(12)]
    with BrokerProcess(data, overrides=SNAP) as b:
        _create_topics(b.bootstrap, names[:6])
        _wait(lambda: len(_snapshots(meta)) >= 1)
        for name in names[6:]:
            _create_topics(b.bootstrap, [name])
        first = _snapshots(meta)[0]
        _wait(lambda: first not in _snapshots(meta))  # retention dropped the oldest
        segments = sorted(meta.glob("*.log"))
        assert segments[0].name != "00000000000000000000.log"  # the log was cleaned too
    latest = _snapshots(meta)[-1]
    assert (latest.stat().st_mode & 0o777) == 0o400
    out = _java("org.apache.kafka.tools.DumpLogSegments", "--cluster-metadata-decoder",
                "--files", str(latest))
    offset, epoch = latest.name.removesuffix(".checkpoint").split("-")
    assert f"Snapshot end offset: {int(offset)}, epoch: {int(epoch)}" in out
    assert "SnapshotHeader" in out and "SnapshotFooter" in out
    assert '"type":"TOPIC_RECORD"' in out and "snap-0" in out
    assert "isvalid: false" not in out
    if any(LIBS.glob("kafka-shell-*")):
        shell = _java("org.apache.kafka.shell.MetadataShell", "--snapshot", str(latest),
                      "ls", "/image/topics/byName")
        assert "snap-0" in shell.split()
    with BrokerProcess(data, overrides=SNAP) as b:  # snapshot + the log after it
        assert set(names) <= _topics(b.bootstrap)


def _truncate(snap: Path) -> None:
    os.chmod(snap, 0o600)
    snap.write_bytes(snap.read_bytes()[:-40])


def test_truncated_snapshot_skipped_or_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    meta = data / "__cluster_metadata-0"
    overrides = {"metadata.log.max.record.bytes.between.snapshots": "700"}
    with BrokerProcess(data, overrides=overrides) as b:
        _create_topics(b.bootstrap, ["keep-a", "keep-b"])
        _wait(lambda: len(_snapshots(meta)) >= 1)
        _create_topics(b.bootstrap, ["keep-c"])
    _truncate(_snapshots(meta)[-1])
    # a crash while writing or deleting leaves these: removed on start, never loaded
    part = meta / "00000000000000099999-0000000009.checkpoint.part"
    gone = meta / "00000000000000000001-0000000001.checkpoint.deleted"
    part.write_bytes(b"half a snapshot")
    gone.write_bytes(b"x")
    # the log still holds what the snapshot covers: the bad file is skipped
    with BrokerProcess(data, overrides=overrides) as b:
        assert {"keep-a", "keep-b", "keep-c"} <= _topics(b.bootstrap)
    assert "is unusable" in b.log_path.read_text(errors="replace")
    assert not part.exists() and not gone.exists()


def test_corrupt_snapshot_without_log_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    meta = data / "__cluster_metadata-0"
    with BrokerProcess(data, overrides=SNAP) as b:
        for i in range(12):
            _create_topics(b.bootstrap, [f"gone-{i}"])
        _wait(lambda: not (meta / "00000000000000000000.log").exists())
    for snap in _snapshots(meta):
        _truncate(snap)
    proc = subprocess.run(
        BrokerProcess(data, overrides=SNAP).command(), capture_output=True, text=True,
        timeout=120, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
    )
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("kafkawire:")]
    assert len(lines) == 1 and "cannot load the metadata" in lines[0], proc.stderr
    assert ".checkpoint" in lines[0]


def test_snapshot_by_interval(tmp_path: Path) -> None:
    data = tmp_path / "data"
    meta = data / "__cluster_metadata-0"
    with BrokerProcess(data, overrides={"metadata.log.max.snapshot.interval.ms": "1500"}) as b:
        _wait(lambda: len(_snapshots(meta)) >= 1)  # the start-up records, one interval on
        first = _snapshots(meta)[-1]
        time.sleep(2)  # an interval without new records: no new snapshot
        assert _snapshots(meta)[-1] == first
        _create_topics(b.bootstrap, ["by-time"])
        _wait(lambda: _snapshots(meta)[-1] != first)
    newest = _snapshots(meta)[-1]
    sid = SnapshotId.parse(newest.name)
    assert sid is not None
    got = decode_snapshot(newest.read_bytes(), sid)
    assert "by-time" in {getattr(r, "name", None) for r in got.records}


GOLDEN = Path(__file__).parent / "golden" / "metadata"


def test_reads_kafkas_own_snapshots() -> None:
    sid = SnapshotId(36, 1)
    got = decode_snapshot((GOLDEN / sid.file_name).read_bytes(), sid)
    assert got.kraft_version == 0 and got.voters is None
    assert got.last_contained_log_timestamp == 1795608338075
    img = apply(MetadataImage(), got.records, 35, 1)
    topic = img.topics["gold-a"]
    assert sorted(topic.partitions) == [0, 1, 2]
    assert img.topic_config("gold-a") == {"retention.ms": "1234"}
    assert img.features["metadata.version"] == 30 and 1 in img.brokers
    # our image writer rebuilds the same image from it
    assert apply(MetadataImage(), image_records(img), 35, 1) == img
    dyn = decode_snapshot((GOLDEN / SnapshotId(0, 0).file_name).read_bytes(), SnapshotId(0, 0))
    assert dyn.kraft_version == 1 and dyn.records == [] and dyn.voters is not None
    assert [(v.voter_id, [(e.name, e.host, e.port) for e in v.endpoints])
            for v in dyn.voters.voters] == [(1, [("CONTROLLER", "127.0.0.1", 19093)])]
    boot = decode_snapshot((GOLDEN / "bootstrap.checkpoint").read_bytes(), SnapshotId(0, 0))
    assert [r.name for r in boot.records][:2] == ["metadata.version",
                                                   "eligible.leader.replicas.version"]
    # and every cut of Kafka's file is refused
    data = (GOLDEN / sid.file_name).read_bytes()
    for cut in (len(data) - 1, len(data) - 75, 83, 10):
        with pytest.raises(SnapshotError):
            decode_snapshot(data[:cut], sid)


def test_snapshot_ahead_of_the_log(tmp_path: Path) -> None:
    """The log lost everything the newest snapshot covers (as a follower that received a
    snapshot): the log restarts at the snapshot's end offset, the image comes from it."""
    data = tmp_path / "data"
    meta = data / "__cluster_metadata-0"
    overrides = {"metadata.log.max.record.bytes.between.snapshots": "700"}
    with BrokerProcess(data, overrides=overrides) as b:
        _create_topics(b.bootstrap, ["ahead-a", "ahead-b"])
        _wait(lambda: len(_snapshots(meta)) >= 1)
    newest = SnapshotId.parse(_snapshots(meta)[-1].name)
    assert newest is not None
    for f in meta.iterdir():
        if f.suffix in (".log", ".index", ".timeindex", ".snapshot") or f.name.startswith(
                "leader-epoch"):
            f.unlink()
    with BrokerProcess(data, overrides=overrides) as b:
        assert {"ahead-a", "ahead-b"} <= _topics(b.bootstrap)
    segments = sorted(meta.glob("*.log"))
    assert int(segments[0].name.split(".")[0]) == newest.offset


def test_lost_quorum_state_never_moves_the_epoch_back(tmp_path: Path) -> None:
    data = tmp_path / "data"
    qs = data / "__cluster_metadata-0" / "quorum-state"
    with BrokerProcess(data) as b:
        b.restart()
    assert decode_quorum_state(qs.read_text()).leader_epoch == 2
    qs.unlink()  # the records of epoch 2 are in the log
    with BrokerProcess(data):
        pass
    assert decode_quorum_state(qs.read_text()).leader_epoch == 3


def test_snapshot_sent_in_chunks(tmp_path: Path) -> None:
    """FetchSnapshot's storage: the leader's chunks assemble into the same snapshot."""
    from kafkawire.metadata.snapshots import SnapshotStore

    src, dst = SnapshotStore(tmp_path / "leader"), SnapshotStore(tmp_path / "follower")
    src.dir.mkdir()
    dst.dir.mkdir()
    img = apply(MetadataImage(), _records(5, 3), 99, 4)
    sid = SnapshotId(100, 4)
    src.write(sid, encode_snapshot(image_records(img), sid, last_contained_log_timestamp=1,
                                   now_ms=2))
    pos = 0
    while chunk := src.read_chunk(sid, pos, 97):
        with pytest.raises(ValueError):
            dst.append_part(sid, pos + 1, chunk)  # out of order: refused
        pos = dst.append_part(sid, pos, chunk)
    assert pos == src.size(sid)
    got = dst.freeze(sid)
    assert apply(MetadataImage(), got.records, 99, 4) == img
    assert dst.snapshot_ids() == [sid] and (dst.path(sid).stat().st_mode & 0o777) == 0o400
    # a transfer cut short is refused and dropped
    other = SnapshotId(200, 4)
    dst.append_part(other, 0, src.read_chunk(sid, 0, src.size(sid) - 10))
    with pytest.raises(SnapshotError):
        dst.freeze(other)
    assert dst.snapshot_ids() == [sid] and not list(dst.dir.glob("*.part"))
