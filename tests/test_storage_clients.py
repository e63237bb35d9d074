"""Retention, DeleteRecords, compaction, flush policy and corruption handling as stock clients
(confluent-kafka / librdkafka, kafka-python) see them, against a real broker process.

The broker runs with short background intervals (retention check, cleaner backoff, no initial
task delay) so that what Kafka does within minutes happens here within seconds; every wait is
bounded and generous.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from kafkawire.tools.testing import BrokerProcess
from log.checkpoint import read_offsets_checkpoint

FAST = {
    "log.retention.check.interval.ms": "300",
    "log.initial.task.delay.ms": "0",
    "log.cleaner.backoff.ms": "200",
}


@pytest.fixture(scope="module")
def fast_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    bp = BrokerProcess(tmp_path_factory.mktemp("st") / "data", overrides=FAST).start()
    try:
        yield bp
    finally:
        bp.close()


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create(bootstrap: str, topic: str, partitions: int = 1, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1, config=configs)]
    )
    fut[topic].result(30)


def produce(
    bootstrap: str,
    topic: str,
    records: list[tuple[bytes | None, bytes | None]],
    *,
    timestamp: int | None = None,
    **conf: Any,
) -> list[KafkaError | None]:
    # one record per batch unless asked otherwise: segment sizes then follow the records
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 1, **conf})
    errors: list[KafkaError | None] = []
    for k, v in records:
        kw: dict[str, Any] = {"partition": 0}
        if timestamp is not None:
            kw["timestamp"] = timestamp
        p.produce(topic, key=k, value=v, on_delivery=lambda err, _m: errors.append(err), **kw)
        p.poll(0)
    assert p.flush(30) == 0
    return errors


def consume_all(
    bootstrap: str, topic: str, *, start: int = OFFSET_BEGINNING, timeout_s: float = 10
) -> list[tuple[int, bytes | None, bytes | None]]:
    c = Consumer({
        "bootstrap.servers": bootstrap, "group.id": name("g"), "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    })
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        c.assign([TopicPartition(topic, 0, start)])
        out: list[tuple[int, bytes | None, bytes | None]] = []
        deadline = time.monotonic() + timeout_s
        while (not out or out[-1][0] < high - 1) and time.monotonic() < deadline and high > low:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                raise KafkaException(m.error())
            out.append((m.offset(), m.key(), m.value()))
        return out
    finally:
        c.close()


def watermarks(bootstrap: str, topic: str) -> tuple[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": name("w")})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return int(low), int(high)
    finally:
        c.close()


def wait_for(check: Callable[[], bool], timeout_s: float = 30.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def delete_records(bootstrap: str, topic: str, offset: int) -> Any:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futs = admin.delete_records([TopicPartition(topic, 0, offset)], request_timeout=20)
    return next(iter(futs.values())).result(30)


# ---------------------------------------------------------------------------------------------
# DeleteRecords


def test_delete_records_confluent(fast_broker: BrokerProcess) -> None:
    bs = fast_broker.bootstrap
    t = name("dr")
    create(bs, t, **{"internal.segment.bytes": "1024"})
    produce(bs, t, [(None, f"v{i}".encode()) for i in range(40)])
    assert delete_records(bs, t, 15).low_watermark == 15
    assert watermarks(bs, t) == (15, 40)
    assert [o for o, _k, _v in consume_all(bs, t)] == list(range(15, 40))
    # below the current start: nothing changes, the answer is the current low watermark
    assert delete_records(bs, t, 3).low_watermark == 15
    # beyond the high watermark: OFFSET_OUT_OF_RANGE
    with pytest.raises(KafkaException) as e:
        delete_records(bs, t, 41)
    assert e.value.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE
    # OFFSET_END (-1) means the high watermark: everything goes
    assert delete_records(bs, t, OFFSET_END).low_watermark == 40
    assert watermarks(bs, t) == (40, 40)
    produce(bs, t, [(None, b"after")])
    assert consume_all(bs, t) == [(40, None, b"after")]


def test_delete_records_kafka_python_and_out_of_range_fetch(fast_broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP
    from kafka.admin import KafkaAdminClient
    from kafka.errors import OffsetOutOfRangeError, PolicyViolationError

    bs = fast_broker.bootstrap
    t = name("drk")
    create(bs, t, **{"internal.segment.bytes": "2048"})
    produce(bs, t, [(None, f"v{i}".encode()) for i in range(30)])
    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        res = admin.delete_records({KTP(t, 0): 12})
        assert res[KTP(t, 0)]["low_watermark"] == 12
        with pytest.raises(OffsetOutOfRangeError):
            admin.delete_records({KTP(t, 0): 99})
        compact = name("drc")
        create(bs, compact, **{"cleanup.policy": "compact"})
        produce(bs, compact, [(b"k", b"v")])
        with pytest.raises(PolicyViolationError):
            admin.delete_records({KTP(compact, 0): 1})
    finally:
        admin.close()
    # ListOffsets earliest and a fetch below the start agree with the new start
    c = KafkaConsumer(bootstrap_servers=bs, auto_offset_reset="none", enable_auto_commit=False)
    try:
        tp = KTP(t, 0)
        assert c.beginning_offsets([tp])[tp] == 12
        c.assign([tp])
        c.seek(tp, 5)
        with pytest.raises(OffsetOutOfRangeError):
            for _ in range(20):
                c.poll(timeout_ms=500)
    finally:
        c.close()


def test_log_start_offset_survives_restarts(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "d", overrides=FAST) as b:
        t = name("drr")
        create(b.bootstrap, t, **{"internal.segment.bytes": "100000"})
        produce(b.bootstrap, t, [(None, f"v{i}".encode()) for i in range(20)])
        delete_records(b.bootstrap, t, 7)  # inside the first (only) segment
        b.restart(kill=True)
        assert watermarks(b.bootstrap, t) == (7, 20)
        b.restart()
        assert watermarks(b.bootstrap, t) == (7, 20)
        start = read_offsets_checkpoint(b.data_dir / "log-start-offset-checkpoint")
        assert start is not None and start[(t, 0)] == 7


# ---------------------------------------------------------------------------------------------
# retention


def test_retention_by_time(fast_broker: BrokerProcess) -> None:
    bs = fast_broker.bootstrap
    t = name("rt")
    create(bs, t, **{"retention.ms": "60000", "internal.segment.bytes": "1024"})
    old = int(time.time() * 1000) - 3_600_000  # an hour ago: past retention.ms
    produce(bs, t, [(None, f"old{i}".encode()) for i in range(30)], timestamp=old)
    produce(bs, t, [(None, f"new{i}".encode()) for i in range(5)])
    # every segment whose newest record is old goes; the ones with new records stay
    wait_for(lambda: watermarks(bs, t)[0] > 0, what="retention by time")
    got = consume_all(bs, t)
    assert [v for _o, _k, v in got][-5:] == [f"new{i}".encode() for i in range(5)]
    assert all(v is not None and (v.startswith(b"new") or v.startswith(b"old")) for _o, _k, v in got)
    low, high = watermarks(bs, t)
    assert got[0][0] == low and high == 35


def test_retention_of_everything_keeps_the_end_offset(fast_broker: BrokerProcess) -> None:
    bs = fast_broker.bootstrap
    t = name("rta")
    create(bs, t, **{"retention.ms": "1000"})
    produce(bs, t, [(None, b"x")] * 10, timestamp=int(time.time() * 1000) - 60_000)
    wait_for(lambda: watermarks(bs, t) == (10, 10), what="all segments deleted")
    produce(bs, t, [(None, b"y")])
    assert consume_all(bs, t) == [(10, None, b"y")]


def test_retention_by_size(fast_broker: BrokerProcess) -> None:
    bs = fast_broker.bootstrap
    t = name("rs")
    create(bs, t, **{"retention.bytes": "3000", "internal.segment.bytes": "1000"})
    produce(bs, t, [(None, b"x" * 100) for _ in range(60)])
    wait_for(lambda: watermarks(bs, t)[0] > 0, what="retention by size")
    got = consume_all(bs, t)
    assert got[-1][0] == 59

    # what is left fits in retention.bytes plus the active segment (a retention pass that
    # ran while the records were still arriving deleted only part of the excess; the next
    # pass deletes the rest)
    def total() -> int:
        return sum(p.stat().st_size for p in (fast_broker.data_dir / f"{t}-0").glob("*.log"))

    wait_for(lambda: total() <= 3000 + 1000, what="the log within retention.bytes")


def test_segment_ms_rolls(fast_broker: BrokerProcess) -> None:
    bs = fast_broker.bootstrap
    t = name("roll")
    create(bs, t, **{"segment.ms": "200"})
    for i in range(4):
        produce(bs, t, [(None, f"v{i}".encode())])
        time.sleep(0.35)
    segs = sorted((fast_broker.data_dir / f"{t}-0").glob("*.log"))
    assert len(segs) >= 3
    assert [o for o, _k, _v in consume_all(bs, t)] == [0, 1, 2, 3]


# ---------------------------------------------------------------------------------------------
# compaction

COMPACT = {
    "cleanup.policy": "compact",
    "segment.ms": "100",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "100",
}


def test_compaction_keeps_latest_per_key(fast_broker: BrokerProcess) -> None:
    bs = fast_broker.bootstrap
    t = name("cmp")
    create(bs, t, **COMPACT)
    for rnd in range(5):
        produce(bs, t, [(f"k{i}".encode(), f"r{rnd}".encode()) for i in range(10)],
                **{"compression.type": ["none", "gzip", "snappy", "lz4", "zstd"][rnd]})
    produce(bs, t, [(b"k3", None)])  # a tombstone
    time.sleep(0.3)
    produce(bs, t, [(b"tail", b"1")])  # rolls the segment: the rest becomes cleanable

    def latest_only() -> bool:
        got = consume_all(bs, t)
        keys = [k for _o, k, _v in got]
        return len(keys) == len(set(keys))

    wait_for(latest_only, 60, "compaction")
    got = consume_all(bs, t)
    by_key = {k: v for _o, k, v in got}
    assert by_key == {
        **{f"k{i}".encode(): b"r4" for i in range(10) if i != 3},
        b"k3": None,
        b"tail": b"1",
    } or by_key == {**{f"k{i}".encode(): b"r4" for i in range(10) if i != 3}, b"tail": b"1"}
    assert [o for o, _k, _v in got] == sorted(o for o, _k, _v in got)
    # kafka-python reads the compacted log (offset gaps) the same way
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    c = KafkaConsumer(bootstrap_servers=bs, auto_offset_reset="earliest", enable_auto_commit=False,
                      consumer_timeout_ms=3000)
    c.assign([KTP(t, 0)])
    seen = [(m.offset, m.key, m.value) for m in c]
    c.close()
    assert seen[: len(got)] == got[: len(seen)] and len(seen) >= len(got) - 1
    # the tombstone disappears after delete.retention.ms once the log is cleaned again
    time.sleep(0.3)
    produce(bs, t, [(b"k0", b"r5")])
    time.sleep(0.3)
    produce(bs, t, [(b"tail", b"2")])
    wait_for(lambda: b"k3" not in {k for _o, k, _v in consume_all(bs, t)}, 60, "tombstone gone")
    assert (fast_broker.data_dir / "cleaner-offset-checkpoint").exists()
    cp = read_offsets_checkpoint(fast_broker.data_dir / "cleaner-offset-checkpoint")
    assert cp is not None and cp.get((t, 0), 0) > 0


def test_keyless_records_refused_on_compacted_topics(fast_broker: BrokerProcess) -> None:
    bs = fast_broker.bootstrap
    for policy in ("compact", "compact,delete"):
        t = name("nokey")
        create(bs, t, **{"cleanup.policy": policy})
        errs = produce(bs, t, [(None, b"no key")], **{"retries": 0})
        assert errs[0] is not None and errs[0].code() == KafkaError.INVALID_RECORD
        assert produce(bs, t, [(b"k", b"with key")]) == [None]
    # kafka-python gets the same error (and the broker's record error message)
    from kafka import KafkaProducer
    from kafka.errors import InvalidRecordError

    t = name("nokey")
    create(bs, t, **{"cleanup.policy": "compact"})
    kp = KafkaProducer(bootstrap_servers=bs, retries=0, compression_type="lz4")
    try:
        with pytest.raises(InvalidRecordError):
            kp.send(t, value=b"x", partition=0).get(timeout=30)
        assert kp.send(t, key=b"k", value=b"x", partition=0).get(timeout=30).offset == 0
    finally:
        kp.close()
    # a delete-only topic takes keyless records as before
    t = name("keyok")
    create(bs, t)
    assert produce(bs, t, [(None, b"fine")]) == [None]


def test_compact_delete_topics_also_expire(fast_broker: BrokerProcess) -> None:
    bs = fast_broker.bootstrap
    t = name("cd")
    create(bs, t, **{**COMPACT, "cleanup.policy": "compact,delete", "retention.ms": "60000"})
    produce(bs, t, [(f"k{i}".encode(), b"old") for i in range(5)],
            timestamp=int(time.time() * 1000) - 3_600_000)
    time.sleep(0.3)
    produce(bs, t, [(b"new", b"1")])
    wait_for(lambda: watermarks(bs, t)[0] >= 5, 60, "compact,delete retention")
    assert consume_all(bs, t) == [(5, b"new", b"1")]


# ---------------------------------------------------------------------------------------------
# durability


def test_flush_messages_moves_the_recovery_point(tmp_path: Path) -> None:
    overrides = {**FAST, "log.flush.offset.checkpoint.interval.ms": "200"}
    with BrokerProcess(tmp_path / "d", overrides=overrides) as b:
        t = name("fm")
        create(b.bootstrap, t, **{"flush.messages": "1"})
        lazy = name("lazy")
        create(b.bootstrap, lazy)
        produce(b.bootstrap, t, [(None, b"x")] * 5)
        produce(b.bootstrap, lazy, [(None, b"x")] * 5)

        def checkpointed() -> dict[tuple[str, int], int]:
            return read_offsets_checkpoint(b.data_dir / "recovery-point-offset-checkpoint") or {}

        wait_for(lambda: checkpointed().get((t, 0)) == 5, 20, "recovery point checkpoint")
        # the default policy never forces an fsync: the recovery point stays behind
        assert checkpointed().get((lazy, 0), 0) == 0


def test_flush_ms_flushes_in_the_background(tmp_path: Path) -> None:
    overrides = {**FAST, "log.flush.offset.checkpoint.interval.ms": "200"}
    with BrokerProcess(tmp_path / "d", overrides=overrides) as b:
        t = name("fms")
        create(b.bootstrap, t, **{"flush.ms": "100"})
        produce(b.bootstrap, t, [(None, b"x")] * 3)
        wait_for(
            lambda: (read_offsets_checkpoint(b.data_dir / "recovery-point-offset-checkpoint")
                     or {}).get((t, 0)) == 3,
            20, "flush.ms",
        )


def test_flush_ms_set_later_takes_effect(tmp_path: Path) -> None:
    """flush.ms altered on an existing topic reaches the background flusher (which caches
    the logs with a finite flush.ms)."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    overrides = {**FAST, "log.flush.offset.checkpoint.interval.ms": "200"}
    with BrokerProcess(tmp_path / "d", overrides=overrides) as b:
        t = name("fms-later")
        create(b.bootstrap, t)
        produce(b.bootstrap, t, [(None, b"x")] * 3)

        def point() -> int:
            cp = read_offsets_checkpoint(b.data_dir / "recovery-point-offset-checkpoint")
            return (cp or {}).get((t, 0), 0)

        time.sleep(1.0)  # several checkpoint intervals: nothing flushes this log yet
        assert point() == 0
        res = ConfigResource("TOPIC", t, incremental_configs=[
            ConfigEntry("flush.ms", "100", incremental_operation=AlterConfigOpType.SET)])
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.incremental_alter_configs([res])[res].result(30)
        wait_for(lambda: point() == 3, 20, "flush.ms set later")


def _corrupt_middle_of_first_segment(data_dir: Path, topic: str, where: str = "crc") -> None:
    """Damage the batch holding the middle of the first segment: its last byte (covered by the
    CRC), or the low byte of its base offset (not covered: found by its neighbours' offsets)."""
    seg = sorted((data_dir / f"{topic}-0").glob("*.log"))[0]
    raw = bytearray(seg.read_bytes())
    from protocol.records import iter_headers

    for pos, h in iter_headers(bytes(seg.read_bytes())):
        if pos <= len(raw) // 2 < pos + h.size:
            raw[pos + h.size - 1 if where == "crc" else pos + 7] ^= 0xFF
            break
    seg.write_bytes(bytes(raw))


@pytest.mark.parametrize("where", ["crc", "base_offset"])
def test_corrupt_batch_below_recovery_point_is_never_served(tmp_path: Path, where: str) -> None:
    with BrokerProcess(tmp_path / "d", overrides=FAST) as b:
        t = name("corrupt")
        create(b.bootstrap, t)
        produce(b.bootstrap, t, [(None, f"value-{i}".encode()) for i in range(40)])
        b.stop()  # clean: the restart trusts the files and does not scan them
        _corrupt_middle_of_first_segment(b.data_dir, t, where)
        b.start()
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": name("g"),
                      "enable.auto.commit": False, "check.crcs": False})
        got: list[bytes] = []
        errors: list[KafkaError] = []
        try:
            c.assign([TopicPartition(t, 0, OFFSET_BEGINNING)])
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not errors:
                m = c.poll(0.5)
                if m is None:
                    continue
                if m.error():
                    errors.append(m.error())
                else:
                    got.append(m.value())
        finally:
            c.close()
        # the batches before the damaged one are served, the damaged one never is
        assert got == [f"value-{i}".encode() for i in range(len(got))]
        assert len(got) < 40
        assert errors and errors[0].code() == KafkaError.INVALID_MSG, errors  # CORRUPT_MESSAGE (2)
        assert "corrupt record batch" in b.log_path.read_text(errors="replace")


def test_corrupt_batch_above_recovery_point_is_truncated(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "d", overrides=FAST) as b:
        t = name("corrupt2")
        create(b.bootstrap, t)
        produce(b.bootstrap, t, [(None, f"value-{i}".encode()) for i in range(40)])
        b.kill()  # unclean, and nothing was fsynced: recovery scans the whole partition
        for f in ("recovery-point-offset-checkpoint", ".kafka_cleanshutdown"):
            (b.data_dir / f).unlink(missing_ok=True)
        _corrupt_middle_of_first_segment(b.data_dir, t)
        b.start()
        low, high = watermarks(b.bootstrap, t)
        assert low == 0 and 0 < high < 40
        assert [v for _o, _k, v in consume_all(b.bootstrap, t)] == [
            f"value-{i}".encode() for i in range(high)
        ]
        assert "found invalid data" in b.log_path.read_text(errors="replace")


def test_stale_files_of_an_interrupted_cleaning_are_ignored(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "d", overrides=FAST) as b:
        t = name("stale")
        create(b.bootstrap, t, **{"cleanup.policy": "compact"})
        produce(b.bootstrap, t, [(b"k", b"v")])
        b.stop()
        d = b.data_dir / f"{t}-0"
        (d / "00000000000000000000.log.cleaned").write_bytes(b"garbage")
        (d / "00000000000000000000.index.swap").write_bytes(b"")
        b.start()
        assert consume_all(b.bootstrap, t) == [(0, b"k", b"v")]
        assert not [p for p in os.listdir(d) if p.endswith((".cleaned", ".swap"))]


def test_segment_bytes_below_one_mebibyte_is_refused(fast_broker: BrokerProcess) -> None:
    """Kafka 4 requires segment.bytes >= 1 MiB; internal.segment.bytes (internal, unlisted)
    is how its tests get small segments, and kafkawire's too."""
    admin = AdminClient({"bootstrap.servers": fast_broker.bootstrap})
    t = name("segsize")
    fut = admin.create_topics([NewTopic(t, 1, 1, config={"segment.bytes": "1000"})])[t]
    with pytest.raises(KafkaException) as e:
        fut.result(30)
    assert e.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert "Value must be at least 1048576" in e.value.args[0].str()
    create(fast_broker.bootstrap, t, **{"internal.segment.bytes": "1000"})
    from confluent_kafka.admin import ConfigResource

    [f] = admin.describe_configs([ConfigResource("topic", t)]).values()
    cfg = f.result(30)
    assert "internal.segment.bytes" not in cfg and cfg["segment.bytes"].value == "1073741824"


def test_cleaner_disabled_retention_still_applies(tmp_path: Path) -> None:
    """log.cleaner.enable=false: no compaction, and retention covers compact,delete topics."""
    with BrokerProcess(tmp_path / "d", overrides={**FAST, "log.cleaner.enable": "false"}) as b:
        t = name("nocl")
        create(b.bootstrap, t, **{**COMPACT, "cleanup.policy": "compact,delete",
                                  "retention.ms": "60000"})
        produce(b.bootstrap, t, [(b"k", b"old")] * 3,
                timestamp=int(time.time() * 1000) - 3_600_000)
        time.sleep(0.3)
        produce(b.bootstrap, t, [(b"k", b"new1"), (b"k", b"new2")])
        wait_for(lambda: watermarks(b.bootstrap, t)[0] == 3, 30, "retention")
        time.sleep(1.0)
        # both new records stay: nothing compacts them
        assert [v for _o, _k, v in consume_all(b.bootstrap, t)] == [b"new1", b"new2"]
        assert "cleaned" not in b.log_path.read_text(errors="replace")
