"""Time index, offset_for_timestamp (KIP-79) and max_timestamp (ListOffsets -3, KIP-734)."""

from __future__ import annotations

from pathlib import Path

import pytest

from log.config import LogConfig, TimestampType
from log.partition_log import PartitionLog
from protocol.records import crc_ok, iter_headers
from tests.batchutil import build_batch

NOW = 1_700_000_000_000


def append(log: PartitionLog, timestamps: list[int], **kw: object) -> tuple[int, int]:
    buf = build_batch(timestamps, **kw)  # type: ignore[arg-type]
    info = log.append(buf, iter_headers(buf), leader_epoch=0, now_ms=NOW)
    return info.first_offset, info.last_offset


def brute_force(batches: list[list[int]], target: int, start: int = 0) -> tuple[int, int] | None:
    off = 0
    for ts_list in batches:
        for ts in ts_list:
            if ts >= target and off >= start:
                return (off, ts)
            off += 1
    return None


def test_empty_log(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(), NOW)
    assert log.offset_for_timestamp(0) is None
    assert log.max_timestamp() is None
    log.close()


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_kip79_semantics(tmp_path: Path, codec: int) -> None:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(), NOW)
    batches = [[100, 105, 110], [108, 120, 130], [90, 95], [140]]
    for b in batches:
        append(log, b, compression=codec)
    # before the first timestamp -> the first offset
    assert tuple(log.offset_for_timestamp(0)) == (0, 100)  # type: ignore[arg-type]
    # exact match
    assert tuple(log.offset_for_timestamp(105)) == (1, 105)  # type: ignore[arg-type]
    # between records, within a batch
    assert tuple(log.offset_for_timestamp(111)) == (4, 120)  # type: ignore[arg-type]
    # the earliest offset, not the smallest timestamp: 106 -> offset 2 (110) beats offset 3 (108)
    assert tuple(log.offset_for_timestamp(106)) == (2, 110)  # type: ignore[arg-type]
    # after the last timestamp -> none
    assert log.offset_for_timestamp(141) is None
    assert tuple(log.offset_for_timestamp(140)) == (8, 140)  # type: ignore[arg-type]
    # bounded by e.g. the high watermark (exclusive)
    assert log.offset_for_timestamp(140, max_offset=8) is None
    assert tuple(log.offset_for_timestamp(131, max_offset=9)) == (8, 140)  # type: ignore[arg-type]
    for t in range(80, 150):
        found = log.offset_for_timestamp(t)
        assert (tuple(found) if found else None) == brute_force(batches, t)
    assert tuple(log.max_timestamp()) == (8, 140)  # type: ignore[arg-type]
    log.close()


def test_raw_snappy(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(), NOW)
    append(log, [10, 20, 30], compression=2, xerial=False)
    assert tuple(log.offset_for_timestamp(15)) == (1, 20)  # type: ignore[arg-type]
    log.close()


def test_many_segments_uses_time_index(tmp_path: Path) -> None:
    import random

    rng = random.Random(7)
    config = LogConfig(segment_bytes=2000, index_interval_bytes=150)
    log = PartitionLog.open(tmp_path / "t-0", config, NOW)
    batches = []
    base = 1000
    for _ in range(300):
        n = rng.randint(1, 4)
        ts = [base + rng.randint(-50, 50) for _ in range(n)]
        base += rng.randint(0, 20)
        batches.append(ts)
        append(log, ts, compression=rng.choice([0, 0, 3]))
    assert len(log.segments) > 10

    def check(lg: PartitionLog, start: int = 0) -> None:
        for t in range(900, base + 80, 7):
            found = lg.offset_for_timestamp(t)
            assert (tuple(found) if found else None) == brute_force(batches, t, start), t
        best = max(max(b) for b in batches)
        assert tuple(lg.max_timestamp()) == brute_force(batches, best, start)  # type: ignore[arg-type]

    check(log)
    log.close()
    log = PartitionLog.open(tmp_path / "t-0", config, NOW, clean_shutdown=True)
    check(log)
    # the log start offset hides earlier records, even inside a batch
    log.update_high_watermark(log.log_end_offset)
    start = log.delete_records_before(123)
    assert start == 123
    check(log, 123)
    log.close()


def test_max_timestamp_first_of_ties(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=200), NOW)
    append(log, [5, 9, 7])
    append(log, [9, 9])
    append(log, [3])
    assert tuple(log.max_timestamp()) == (1, 9)  # type: ignore[arg-type]
    log.close()


def test_log_append_time(tmp_path: Path) -> None:
    config = LogConfig(message_timestamp_type=TimestampType.LOG_APPEND_TIME)
    log = PartitionLog.open(tmp_path / "t-0", config, NOW)
    buf = build_batch([1, 2, 3])
    info = log.append(buf, iter_headers(buf), leader_epoch=4, now_ms=NOW + 5)
    assert info.log_append_time_ms == NOW + 5
    # header rewritten in the caller's buffer, CRC still valid
    (_, h), = iter_headers(buf)
    assert h.log_append_time and h.max_timestamp == NOW + 5 and h.partition_leader_epoch == 4
    assert crc_ok(buf, 0, h.size)
    data = log.read(0, 10_000).read_bytes()
    assert data == bytes(buf)
    # every record carries the append time: the first offset of the batch
    assert tuple(log.offset_for_timestamp(0)) == (0, NOW + 5)  # type: ignore[arg-type]
    assert tuple(log.max_timestamp()) == (0, NOW + 5)  # type: ignore[arg-type]
    # CreateTime topics report -1
    log2 = PartitionLog.open(tmp_path / "t-1", LogConfig(), NOW)
    buf = build_batch([1, 2])
    assert log2.append(buf, iter_headers(buf), leader_epoch=0, now_ms=NOW).log_append_time_ms == -1
    # the caller may override per append
    buf = build_batch([1, 2])
    info = log2.append(buf, iter_headers(buf), leader_epoch=0, now_ms=NOW, log_append_time=True)
    assert info.log_append_time_ms == NOW
    log.close()
    log2.close()


def test_time_index_entries(tmp_path: Path) -> None:
    """Time index: strictly increasing timestamps, each pointing at the batch where it was reached."""
    import struct

    config = LogConfig(index_interval_bytes=0, segment_bytes=10_000)
    log = PartitionLog.open(tmp_path / "t-0", config, NOW)
    for ts in ([10], [30], [20], [40, 35], [40], [50]):
        append(log, ts)
    log.close()
    raw = (tmp_path / "t-0" / "00000000000000000000.timeindex").read_bytes()
    entries = [struct.unpack_from(">qi", raw, i) for i in range(0, len(raw), 12)]
    # with interval 0 every batch after the first is indexed, carrying the max timestamp so far
    # (updated before the entry is written, as Kafka does); [20] and the second [40] add nothing
    assert entries == [(30, 1), (40, 4), (50, 6)]
