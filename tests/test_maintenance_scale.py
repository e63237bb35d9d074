"""Periodic maintenance that costs what changed, not the partition count (issue 18).

- The offsets checkpoints (``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
  ``replication-offset-checkpoint``) are rewritten only when one of their rows changed, in
  Kafka's text format, and a kill -9 restart recovers from them.
- The log cleaner looks only at the compacted logs, from an index kept up to date on topic
  creation, deletion and config changes: a topic switched to ``cleanup.policy=compact`` by
  IncrementalAlterConfigs gets cleaned.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from kafkawire.tools.testing import BrokerProcess
from log.checkpoint import read_offsets_checkpoint
from log.manager import LogManager
from log.partition_log import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
)
from protocol.records import iter_headers
from tests.batchutil import build_batch
from tests.test_storage_clients import consume_all, create, name, produce, wait_for

NOW = 1_700_000_000_000
NAMES = (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT)


def append(log, n: int = 1) -> None:  # type: ignore[no-untyped-def]
    buf = build_batch([NOW] * n)
    log.append(buf, iter_headers(buf), leader_epoch=0, now_ms=NOW)


def _stamp(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_ino, st.st_mtime_ns


def test_checkpoints_rewritten_only_after_a_change(tmp_path: Path) -> None:
    mgr = LogManager.open(tmp_path, NOW)
    a = mgr.create("orders", 0, NOW)
    b = mgr.create("orders", 1, NOW)
    mgr.checkpoint()  # the first write of each file
    counts = {n: mgr.checkpoint_stats(n) for n in NAMES}
    stamps = {n: _stamp(tmp_path / n) for n in NAMES}
    mgr.checkpoint()  # nothing changed: nothing written (the file is the same inode)
    assert {n: mgr.checkpoint_stats(n) for n in NAMES} == counts
    assert {n: _stamp(tmp_path / n) for n in NAMES} == stamps

    append(a, 3)  # the log end moves: none of the three values does yet
    mgr.checkpoint()
    assert {n: _stamp(tmp_path / n) for n in NAMES} == stamps
    a.update_high_watermark(3)
    mgr.checkpoint()
    assert _stamp(tmp_path / REPLICATION_OFFSET_CHECKPOINT) != stamps[REPLICATION_OFFSET_CHECKPOINT]
    assert read_offsets_checkpoint(tmp_path / REPLICATION_OFFSET_CHECKPOINT) == {
        ("orders", 0): 3, ("orders", 1): 0}
    # the recovery point moves with an fsync
    a.flush()
    mgr.checkpoint_recovery_points()
    assert read_offsets_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT) == {
        ("orders", 0): 3, ("orders", 1): 0}
    # a log start above the first segment's base is listed, and a deleted partition leaves
    a.delete_records_before(2)
    mgr.delete("orders", 1)
    mgr.checkpoint()
    assert read_offsets_checkpoint(tmp_path / LOG_START_OFFSET_CHECKPOINT) == {("orders", 0): 2}
    assert read_offsets_checkpoint(tmp_path / REPLICATION_OFFSET_CHECKPOINT) == {("orders", 0): 3}
    assert b.closed
    counts = {n: mgr.checkpoint_stats(n) for n in NAMES}
    mgr.checkpoint()
    assert {n: mgr.checkpoint_stats(n) for n in NAMES} == counts
    mgr.close()


def test_checkpoint_is_kafkas_format(tmp_path: Path) -> None:
    """Version line 0, the entry count, then ``topic partition offset`` rows (Kafka's
    ``CheckpointFile``); the topic names keep their dots and dashes."""
    mgr = LogManager.open(tmp_path, NOW)
    logs = [mgr.create(t, p, NOW) for t, p in (("a.b-c", 0), ("a.b-c", 7), ("x", 2))]
    for log, n in zip(logs, (2, 5, 1), strict=True):
        append(log, n)
        log.update_high_watermark(log.log_end_offset)
    mgr.checkpoint_high_watermarks()
    text = (tmp_path / REPLICATION_OFFSET_CHECKPOINT).read_bytes()
    lines = text.decode().split("\n")
    assert lines[:2] == ["0", "3"] and lines[-1] == "" and len(lines) == 6
    assert sorted(lines[2:5]) == ["a.b-c 0 2", "a.b-c 7 5", "x 2 1"]
    assert not (tmp_path / (REPLICATION_OFFSET_CHECKPOINT + ".tmp")).exists()
    for log in logs:
        mgr.delete(log.topic, log.partition)
    mgr.checkpoint_high_watermarks()
    assert (tmp_path / REPLICATION_OFFSET_CHECKPOINT).read_bytes() == b"0\n0\n"
    mgr.close()


def test_kill9_restart_recovers_from_the_checkpoints(tmp_path: Path) -> None:
    """A broker checkpointing every 200 ms: the files follow the produced records, stay
    untouched while nothing changes, and a kill -9 restart serves every record again."""
    overrides = {n: "200" for n in ("log.flush.offset.checkpoint.interval.ms",
                                    "log.flush.start.offset.checkpoint.interval.ms",
                                    "replica.high.watermark.checkpoint.interval.ms")}
    bp = BrokerProcess(tmp_path / "data", overrides=overrides).start()
    try:
        bs, t = bp.bootstrap, name("ck")
        create(bs, t)
        produce(bs, t, [(b"k", f"v{i}".encode()) for i in range(20)])
        hw_file = bp.data_dir / REPLICATION_OFFSET_CHECKPOINT
        wait_for(lambda: (read_offsets_checkpoint(hw_file) or {}).get((t, 0)) == 20, 30,
                 "the high watermark in replication-offset-checkpoint")
        # idle: the files are not rewritten (a new inode at each rewrite: tmp file + rename)
        time.sleep(0.5)  # the coordinator's writes settle (group-less producer: none expected)
        before = {n: _stamp(bp.data_dir / n) for n in NAMES}
        time.sleep(1.5)  # several checkpoint intervals
        assert {n: _stamp(bp.data_dir / n) for n in NAMES} == before
        bp.kill()
        bp.start()
        got = consume_all(bs := bp.bootstrap, t)
        assert [v for _o, _k, v in got] == [f"v{i}".encode() for i in range(20)]
        produce(bs, t, [(b"k", b"after")])
        wait_for(lambda: (read_offsets_checkpoint(hw_file) or {}).get((t, 0)) == 21, 30,
                 "the checkpoint after the restart")
    finally:
        bp.close()


def test_topic_switched_to_compact_gets_cleaned(tmp_path: Path) -> None:
    bp = BrokerProcess(tmp_path / "data", overrides={"log.cleaner.backoff.ms": "200"}).start()
    try:
        bs, t = bp.bootstrap, name("sw")
        create(bs, t, **{"segment.ms": "100"})  # cleanup.policy=delete
        for rnd in range(3):
            produce(bs, t, [(f"k{i}".encode(), f"r{rnd}".encode()) for i in range(5)])
        admin = AdminClient({"bootstrap.servers": bs})
        res = ConfigResource(ResourceType.TOPIC, t, incremental_configs=[
            ConfigEntry("cleanup.policy", "compact",
                        incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("min.cleanable.dirty.ratio", "0.01",
                        incremental_operation=AlterConfigOpType.SET),
        ])
        for fut in admin.incremental_alter_configs([res]).values():
            fut.result(30)
        time.sleep(0.3)  # past segment.ms: the next record rolls the segment
        produce(bs, t, [(b"tail", b"1")])

        def latest_only() -> bool:
            keys = [k for _o, k, _v in consume_all(bs, t)]
            return len(keys) == len(set(keys))

        wait_for(latest_only, 60, "the switched topic to be cleaned")
        by_key = {k: v for _o, k, v in consume_all(bs, t)}
        assert by_key == {**{f"k{i}".encode(): b"r2" for i in range(5)}, b"tail": b"1"}
        cp = read_offsets_checkpoint(bp.data_dir / "cleaner-offset-checkpoint")
        assert cp is not None and cp.get((t, 0), 0) > 0
    finally:
        bp.close()


def test_metadata_writes_of_more_than_10000_records_are_split(tmp_path: Path) -> None:
    """Fencing or registering a broker that leads 100,000 partitions writes a
    PartitionChangeRecord for each (megabytes): as Kafka's controller, they go in batches of
    at most 10,000 records, under the metadata log's max.message.bytes (8 MiB, Kafka's
    KafkaRaftClient.MAX_BATCH_SIZE_BYTES), and replay in full after a restart."""
    import uuid as uuid_mod

    from kafkawire.metadata.quorum import MAX_RECORDS_PER_BATCH, MetadataQuorum
    from kafkawire.replication.purgatory import AppendNotifier
    from kafkawire.replication.replica_manager import ReplicaManager
    from protocol._generated.partition_change_record import PartitionChangeRecord
    from protocol._generated.partition_record import PartitionRecord
    from protocol._generated.topic_record import TopicRecord
    from protocol.records import iter_headers as headers

    tid = uuid_mod.uuid4()
    n = 25_000

    def quorum() -> MetadataQuorum:
        rm = ReplicaManager(LogManager.open(tmp_path, NOW), 1, AppendNotifier())
        q = MetadataQuorum(rm, 1, lambda: NOW)
        q.load()
        assert q.is_active
        return q

    q = quorum()
    q.append_sync([TopicRecord(name="big", topic_id=tid)])
    for i in range(0, n, 5000):  # as CreateTopics would (at most 10,000 per request)
        q.append_sync([PartitionRecord(partition_id=p, topic_id=tid, replicas=[1], isr=[1],
                                       leader=1, leader_epoch=0, partition_epoch=0)
                       for p in range(i, i + 5000)])
    start = q.log.log_end_offset if q.log is not None else 0
    q.append_sync([PartitionChangeRecord(partition_id=p, topic_id=tid, leader=-1, isr=[1])
                   for p in range(n)])  # 1.4 MB of records: over the 1 MiB default
    assert all(p.leader == -1 for p in q.image.topics["big"].partitions.values())
    assert q.log is not None
    data = q.log.read(start, 1 << 30).read_bytes()
    sizes = [h.last_offset_delta + 1 for _pos, h in headers(data)]
    assert sum(sizes) == n and max(sizes) == MAX_RECORDS_PER_BATCH and len(sizes) == 3
    q.replicas.logs.close()
    again = quorum()  # replayed from the log
    parts = again.image.topics["big"].partitions
    assert len(parts) == n and all(p.leader == -1 for p in parts.values())
    again.replicas.logs.close()
