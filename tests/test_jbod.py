"""JBOD (issue 18): several directories in ``log.dirs`` with partitions in all of them, each
directory with its own meta.properties and checkpoints; one failing directory goes offline
(KAFKA_STORAGE_ERROR for its partitions) while the others keep serving; restarts find every
partition. Real broker processes and confluent-kafka clients."""

from __future__ import annotations

import subprocess
import urllib.request
from pathlib import Path
from typing import Any

from kafkawire.storage.format import read_meta
from kafkawire.tools.testing import BrokerProcess
from log.checkpoint import read_offsets_checkpoint
from protocol._generated.alter_replica_log_dirs_request import AlterReplicaLogDirsRequest
from protocol._generated.describe_log_dirs_request import DescribeLogDirsRequest
from protocol.errors import ErrorCode
from tests.conftest import RawClient
from tests.test_limits import _consume_all, _fill, creatable, create, uname


def _partitions_in(d: Path, topic: str) -> set[int]:
    return {int(p.name.rsplit("-", 1)[1]) for p in d.iterdir()
            if p.is_dir() and p.name.rsplit("-", 1)[0] == topic}


def _describe(bootstrap: str) -> dict[str, tuple[int, dict[str, set[int]]]]:
    """DescribeLogDirs v4: log dir -> (error code, topic -> partitions)."""
    raw = RawClient(bootstrap)
    try:
        req = DescribeLogDirsRequest()
        req.topics = None  # every partition
        resp = raw.request(req, 4)
    finally:
        raw.close()
    return {r.log_dir: (r.error_code, {t.name: {p.partition_index for p in t.partitions}
                                       for t in r.topics}) for r in resp.results}


def _value(tag: str, topic: str, i: int) -> bytes:
    """8 KiB and more: a full directory refuses it (a smaller one may fit the last page)."""
    return f"{tag}-{topic}-{i}-".encode() + b"x" * 8192


def _produce(bootstrap: str, topic: str, partitions: list[int], tag: str) -> dict[int, Any]:
    """One record to each partition (no retries); partition -> delivery error or None."""
    from confluent_kafka import Producer

    out: dict[int, Any] = {}
    p = Producer({"bootstrap.servers": bootstrap, "retries": 0, "message.timeout.ms": 30000,
                  "enable.idempotence": False, "linger.ms": 5})
    for i in partitions:
        p.produce(topic, value=_value(tag, topic, i), partition=i,
                  on_delivery=lambda err, m, i=i: out.__setitem__(i, err))
    p.flush(90)
    return out


def _new_topic(bootstrap: str, prefix: str, partitions: int) -> str:
    raw = RawClient(bootstrap)
    try:
        topic = uname(prefix)
        assert create(raw, creatable(topic, partitions)).topics[0].error_code == 0
    finally:
        raw.close()
    return topic


def _codes(errors: dict[int, Any]) -> dict[int, int]:
    return {i: (0 if e is None else e.code()) for i, e in errors.items()}


def test_partitions_live_in_every_directory_and_come_back(tmp_path: Path) -> None:
    dirs = [tmp_path / f"d{k}" for k in range(3)]
    bp = BrokerProcess(dirs[0], overrides={"log.dirs": ",".join(map(str, dirs))})
    bp.start()
    try:
        topic = _new_topic(bp.bootstrap, "jb", 6)
        # the directory with the fewest partitions gets the next one
        assert [_partitions_in(d, topic) for d in dirs] == [{0, 3}, {1, 4}, {2, 5}]
        metas = [read_meta(d / "meta.properties") for d in dirs]
        assert len({m["directory.id"] for m in metas}) == 3
        assert len({m["cluster.id"] for m in metas}) == 1
        assert _codes(_produce(bp.bootstrap, topic, list(range(6)), "one")) == dict.fromkeys(
            range(6), 0)
        described = _describe(bp.bootstrap)
        assert list(described) == [str(d.resolve()) for d in dirs]
        for k, d in enumerate(dirs):
            assert described[str(d.resolve())] == (0, {topic: {k, k + 3}})
        assert bp.stop() == 0
        for k, d in enumerate(dirs):  # each directory has its own checkpoints and marker
            assert (d / ".kafka_cleanshutdown").exists()
            points = read_offsets_checkpoint(d / "recovery-point-offset-checkpoint") or {}
            assert {p for t, p in points if t == topic} == {k, k + 3}
        bp.start()
        assert _codes(_produce(bp.bootstrap, topic, list(range(6)), "two")) == dict.fromkeys(
            range(6), 0)
        bp.kill()
        bp.start(timeout_s=120)
        got = _consume_all(bp.bootstrap, [topic], 6, want_per_partition=2)
        for i in range(6):
            assert got[(topic, i)][:2] == [_value("one", topic, i), _value("two", topic, i)]
        assert "Traceback" not in bp.log()
    finally:
        bp.close()


def _offline_replicas(bp: BrokerProcess) -> float:
    with urllib.request.urlopen(bp.metrics_url + "/metrics", timeout=30) as r:
        text = r.read().decode()
    line = next(x for x in text.splitlines()
                if x.startswith("kafka_server_replicamanager_offlinereplicacount "))
    return float(line.split()[1])


def _move(bootstrap: str, path: Path, topic: str, partition: int) -> int:
    R = AlterReplicaLogDirsRequest  # noqa: N806
    raw = RawClient(bootstrap)
    try:
        r = raw.request(R(dirs=[R.AlterReplicaLogDir(path=str(path), topics=[
            R.AlterReplicaLogDirTopic(name=topic, partitions=[partition])])]), 2)
    finally:
        raw.close()
    return int(r.results[0].partitions[0].error_code)


def test_a_full_directory_goes_offline_alone(tmp_path: Path, small_disk: Path) -> None:
    d1, d2 = tmp_path / "d1", small_disk / "data"
    bp = BrokerProcess(d1, overrides={"log.dirs": f"{d1},{d2}"},
                       log_file=tmp_path / "broker.log")
    bp.start()
    try:
        t = _new_topic(bp.bootstrap, "full", 2)
        assert (_partitions_in(d1, t), _partitions_in(d2, t)) == ({0}, {1})
        assert _codes(_produce(bp.bootstrap, t, [0, 1], "one")) == {0: 0, 1: 0}
        assert _move(bp.bootstrap, d1, t, 0) == ErrorCode.NONE  # already there
        assert _move(bp.bootstrap, d2, t, 1) == ErrorCode.NONE
        _fill(small_disk / "filler")
        codes = _codes(_produce(bp.bootstrap, t, [1, 0], "two"))
        assert codes == {1: ErrorCode.KAFKA_STORAGE_ERROR, 0: 0}, codes
        # the other directory keeps serving: produce, fetch, and new partitions go there
        assert _codes(_produce(bp.bootstrap, t, [0], "three")) == {0: 0}
        u = _new_topic(bp.bootstrap, "after", 2)
        assert _partitions_in(d1, u) == {0, 1}
        assert _codes(_produce(bp.bootstrap, u, [0, 1], "one")) == {0: 0, 1: 0}
        got = _consume_all(bp.bootstrap, [t], 1, want_per_partition=3)
        assert got[(t, 0)] == [_value(tag, t, 0) for tag in ("one", "two", "three")]
        described = _describe(bp.bootstrap)
        code, held = described[str(d1.resolve())]
        assert (code, held[t], held[u]) == (0, {0}, {0, 1})
        assert held["__consumer_offsets"] == set(range(50))  # made after d2 failed
        assert described[str(d2.resolve())] == (ErrorCode.KAFKA_STORAGE_ERROR, {})
        assert _move(bp.bootstrap, d2, t, 1) == ErrorCode.KAFKA_STORAGE_ERROR
        assert _offline_replicas(bp) == 1
        log = bp.log()
        assert log.count("is offline after an I/O error") == 1, log
        assert f"log directory {d2} is offline" in log
        assert bp.stop(timeout_s=60) == 0
        assert "Traceback" not in bp.log()
        # space again: a restart recovers the directory and serves what was acknowledged
        (small_disk / "filler").unlink()
        bp.start(timeout_s=120)
        assert _codes(_produce(bp.bootstrap, t, [0, 1], "four")) == {0: 0, 1: 0}
        got = _consume_all(bp.bootstrap, [t], 2, want_per_partition=2)
        assert got[(t, 1)] == [_value("one", t, 1), _value("four", t, 1)]
        assert got[(t, 0)][:2] == [_value("one", t, 0), _value("two", t, 0)]
        assert "Traceback" not in bp.log()
    finally:
        bp.close()


def test_a_lost_directory_leaves_its_partitions_offline(tmp_path: Path) -> None:
    """A directory that comes back empty (a replaced disk): formatted anew, as Kafka does, and
    the partitions it held are reported offline instead of starting empty elsewhere; the
    others serve. With the disk back, every partition is found again."""
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    bp = BrokerProcess(d1, overrides={"log.dirs": f"{d1},{d2}"})
    bp.start()
    try:
        t = _new_topic(bp.bootstrap, "lost", 2)
        assert _codes(_produce(bp.bootstrap, t, [0, 1], "one")) == {0: 0, 1: 0}
        assert bp.stop() == 0
        d2.rename(tmp_path / "d2-away")
        bp.start()
        codes = _codes(_produce(bp.bootstrap, t, [0, 1], "two"))
        assert codes == {0: 0, 1: ErrorCode.KAFKA_STORAGE_ERROR}, codes
        assert _partitions_in(d2, t) == set() and (d2 / "meta.properties").exists()
        assert "partitions missing from every log directory" in bp.log()
        assert bp.stop() == 0
        subprocess.run(["rm", "-rf", str(d2)], check=True)
        (tmp_path / "d2-away").rename(d2)
        bp.start()
        assert _codes(_produce(bp.bootstrap, t, [1], "three")) == {1: 0}
        got = _consume_all(bp.bootstrap, [t], 2, want_per_partition=2)
        assert got[(t, 0)] == [_value("one", t, 0), _value("two", t, 0)]
        assert got[(t, 1)] == [_value("one", t, 1), _value("three", t, 1)]
        assert "Traceback" not in bp.log()
    finally:
        bp.close()
