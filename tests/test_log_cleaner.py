"""The log cleaner on a PartitionLog (no broker): Kafka's compaction semantics."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from log.cleaner import CleaningTask, LogToClean, clean_log, grab_filthiest, log_to_clean
from log.config import LogConfig
from log.partition_log import PartitionLog
from protocol.errors import ErrorCode, KafkaError
from protocol.records import (
    DELETE_HORIZON_BIT,
    Record,
    crc_ok,
    decode_batch_records,
    iter_headers,
)
from tests.batchutil import build_batch, control_batch

NOW = 1_700_000_000_000
DAY = 86_400_000


def compacted(tmp_path: Path, **kw: object) -> PartitionLog:
    cfg = LogConfig(
        segment_bytes=int(kw.pop("segment_bytes", 600)),  # type: ignore[call-overload]
        cleanup_policy=str(kw.pop("cleanup_policy", "compact")),
        min_cleanable_dirty_ratio=float(kw.pop("ratio", 0.01)),  # type: ignore[arg-type]
        **kw,  # type: ignore[arg-type]
    )
    return PartitionLog.open(tmp_path / "c-0", cfg, NOW)


def put(
    log: PartitionLog,
    pairs: list[tuple[bytes | None, bytes | None]],
    *,
    ts: int = NOW,
    codec: int = 0,
    **kw: object,
) -> tuple[int, int]:
    buf = build_batch([ts] * len(pairs), records=pairs, compression=codec, **kw)  # type: ignore[arg-type]
    info = log.append(buf, iter_headers(buf), leader_epoch=0, now_ms=ts)
    log.update_high_watermark(log.log_end_offset)
    return info.first_offset, info.last_offset


def contents(log: PartitionLog) -> list[Record]:
    data = log.read(log.log_start_offset, 1 << 30).read_bytes()
    out: list[Record] = []
    for pos, h in iter_headers(data):
        assert crc_ok(data, pos, h.size)
        if h.is_control:
            continue
        out.extend(decode_batch_records(data, pos)[1])
    return out


def kv(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for r in contents(log)]


def clean(log: PartitionLog, now: int = NOW, checkpoint: int | None = None) -> int:
    ltc, _ = log_to_clean(("c", 0), log, checkpoint, now)
    end, _stats = clean_log(ltc, now, 1 << 20)
    return end


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_latest_value_per_key_survives(tmp_path: Path, codec: int) -> None:
    log = compacted(tmp_path)
    for round_ in range(6):
        put(log, [(f"k{i}".encode(), f"v{round_}-{i}".encode()) for i in range(4)], codec=codec)
    log.roll()
    put(log, [(b"k0", b"head")], codec=codec)  # the active segment is never cleaned
    leo = log.log_end_offset
    end = clean(log)
    assert end == log.active_segment_base_offset
    got = kv(log)
    # k0's v5-0 stays: the active segment (k0=head) is outside the cleaned range, as in Kafka
    assert [(k, v) for _o, k, v in got] == [
        (b"k0", b"v5-0"), (b"k1", b"v5-1"), (b"k2", b"v5-2"), (b"k3", b"v5-3"), (b"k0", b"head"),
    ]
    # offsets are preserved, the log end offset too, and batches keep their codec
    assert [o for o, _k, _v in got] == [20, 21, 22, 23, 24]
    assert log.log_end_offset == leo
    data = log.read(0, 1 << 30).read_bytes()
    assert {h.attributes & 7 for _p, h in iter_headers(data) if h.records_count} == {codec}
    # reading from an offset that was compacted away gives the next surviving batch
    res = log.read(3, 1 << 20)
    assert res.first_offset >= 3


def test_tombstones_kept_until_delete_horizon(tmp_path: Path) -> None:
    log = compacted(tmp_path, delete_retention_ms=DAY)
    put(log, [(b"a", b"1"), (b"b", b"1")])
    put(log, [(b"a", None)])  # tombstone for a
    log.roll()
    put(log, [(b"c", b"x")])
    clean(log, NOW)
    assert [(k, v) for _o, k, v in kv(log)] == [(b"b", b"1"), (b"a", None), (b"c", b"x")]
    # the batch holding the tombstone now carries a delete horizon (KIP-534)
    data = log.read(0, 1 << 20).read_bytes()
    hs = [h for _p, h in iter_headers(data)]
    tomb = next(h for h in hs if h.base_offset == 2)
    assert tomb.attributes & DELETE_HORIZON_BIT and tomb.base_timestamp == NOW + DAY
    # a later cleaning before the horizon keeps it; after the horizon it is gone
    put(log, [(b"d", b"y")])
    log.roll()
    put(log, [(b"e", b"z")])
    clean(log, NOW + DAY - 1, checkpoint=3)
    assert (b"a", None) in [(k, v) for _o, k, v in kv(log)]
    put(log, [(b"f", b"w")])
    log.roll()
    put(log, [(b"g", b"z")])
    clean(log, NOW + DAY + 1, checkpoint=5)
    assert (b"a", None) not in [(k, v) for _o, k, v in kv(log)]
    assert {k for _o, k, _v in kv(log)} == {b"b", b"c", b"d", b"e", b"f", b"g"}


def test_keyless_records_are_removed(tmp_path: Path) -> None:
    log = compacted(tmp_path)
    put(log, [(None, b"x"), (b"k", b"1"), (None, b"y")])
    log.roll()
    put(log, [(b"z", b"1")])
    clean(log)
    assert [(k, v) for _o, k, v in kv(log)] == [(b"k", b"1"), (b"z", b"1")]


def test_aborted_transactions_dropped_and_markers_kept_until_safe(tmp_path: Path) -> None:
    log = compacted(tmp_path, delete_retention_ms=1000, segment_bytes=100_000)
    pid_a, pid_c = 7, 8
    put(log, [(b"a", b"aborted")], producer_id=pid_a, producer_epoch=0, base_sequence=0,
        transactional=True)
    put(log, [(b"c", b"committed")], producer_id=pid_c, producer_epoch=0, base_sequence=0,
        transactional=True)
    for buf in (control_batch(producer_id=pid_a, producer_epoch=0, commit=False, ts=NOW),
                control_batch(producer_id=pid_c, producer_epoch=0, commit=True, ts=NOW)):
        log.append(buf, iter_headers(buf), leader_epoch=0, now_ms=NOW)
    put(log, [(b"c", b"newer")])
    n = 0

    def next_round(now: int) -> list[tuple[int, int, bool, bool]]:
        nonlocal n
        put(log, [(f"x{n}".encode(), b"1")])
        log.roll()
        put(log, [(f"y{n}".encode(), b"1")])
        n += 1
        clean(log, now)
        data = log.read(0, 1 << 20).read_bytes()
        # (offset, records, is a marker, has a delete horizon) of the first four batches
        return [
            (h.base_offset, h.records_count, h.is_control, bool(h.attributes & DELETE_HORIZON_BIT))
            for _p, h in iter_headers(data) if h.base_offset < 4
        ]

    # round 1: the aborted record goes; the producers' last batches stay, empty, to keep their
    # sequence numbers; both markers saw a batch of their transaction: kept, no horizon
    assert next_round(NOW) == [(0, 0, False, False), (1, 0, False, False),
                               (2, 1, True, False), (3, 1, True, False)]
    assert (b"a", b"aborted") not in [(k, v) for _o, k, v in kv(log)]
    # once the producers are gone (expired), their empty batches go too
    log.expire_producers(NOW + 30 * DAY)
    assert next_round(NOW) == [(2, 1, True, False), (3, 1, True, False)]
    # next round: the markers' transactions are empty: they get a delete horizon
    assert next_round(NOW) == [(2, 1, True, True), (3, 1, True, True)]
    # before the horizon they stay, after it they are removed
    assert next_round(NOW + 999) == [(2, 1, True, True), (3, 1, True, True)]
    assert next_round(NOW + 1001) == []
    assert (b"c", b"newer") in [(k, v) for _o, k, v in kv(log)]


def test_idempotent_producer_continues_after_cleaning(tmp_path: Path) -> None:
    log = compacted(tmp_path)
    pid = 99
    seq = 0
    for i in range(5):
        put(log, [(b"k", f"v{i}".encode())], producer_id=pid, producer_epoch=0, base_sequence=seq)
        seq += 1
    log.roll()
    put(log, [(b"other", b"1")])
    clean(log)
    assert [(k, v) for _o, k, v in kv(log)] == [(b"k", b"v4"), (b"other", b"1")]
    # a duplicate of the last batch is still recognized, the next sequence still accepted
    buf = build_batch([NOW], records=[(b"k", b"v4")], producer_id=pid, producer_epoch=0,
                      base_sequence=4)
    info = log.append(buf, iter_headers(buf), leader_epoch=0, now_ms=NOW)
    assert info.duplicate and info.first_offset == 4
    put(log, [(b"k", b"v5")], producer_id=pid, producer_epoch=0, base_sequence=5)
    # and after a restart (producer state rebuilt from the cleaned log) as well
    log.close()
    log = PartitionLog.open(log.dir, log.config, NOW, clean_shutdown=False, recovery_point=0)
    with pytest.raises(KafkaError) as e:
        put(log, [(b"k", b"gap")], producer_id=pid, producer_epoch=0, base_sequence=9)
    assert e.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    put(log, [(b"k", b"v6")], producer_id=pid, producer_epoch=0, base_sequence=6)


def test_dirty_ratio_and_lags_choose_the_log(tmp_path: Path) -> None:
    log = compacted(tmp_path, ratio=0.5)
    for i in range(10):
        put(log, [(b"k", str(i).encode())])
    log.roll()
    put(log, [(b"k", b"x")])
    ltc, _ = grab_filthiest([(("c", 0), log)], {}, NOW)
    assert ltc is not None and ltc.cleanable_ratio == 1.0
    end = clean(log)
    # everything below the active segment is clean now: nothing to do
    ltc2, _ = grab_filthiest([(("c", 0), log)], {("c", 0): end}, NOW)
    assert ltc2 is None
    # min.compaction.lag.ms keeps recent segments dirty
    log2 = compacted(tmp_path / "lag", min_compaction_lag_ms=60_000)
    put(log2, [(b"k", b"1")], ts=NOW)
    log2.roll()
    put(log2, [(b"k", b"2")], ts=NOW)
    assert grab_filthiest([(("c", 0), log2)], {}, NOW + 1000)[0] is None
    assert grab_filthiest([(("c", 0), log2)], {}, NOW + 61_000)[0] is not None
    # max.compaction.lag.ms forces a clean below the dirty ratio
    log3 = compacted(tmp_path / "maxlag", ratio=0.99, max_compaction_lag_ms=60_000)
    put(log3, [(b"a", b"1")], ts=NOW)
    log3.roll()
    put(log3, [(b"b", b"1")], ts=NOW)
    log3.roll()
    put(log3, [(b"c", b"1")], ts=NOW)
    first = clean(log3)  # now everything before the active segment is clean
    put(log3, [(b"a", b"2")], ts=NOW + 1)
    log3.roll()
    put(log3, [(b"x", b"2")], ts=NOW + 1)
    ltc3, _ = log_to_clean(("c", 0), log3, first, NOW + 2)
    assert ltc3.cleanable_ratio < 0.99 and not ltc3.need_compaction_now
    ltc4, _ = log_to_clean(("c", 0), log3, first, NOW + 120_000)
    assert ltc4.need_compaction_now
    assert grab_filthiest([(("c", 0), log3)], {("c", 0): first}, NOW + 120_000)[0] is not None


def test_swap_is_crash_safe(tmp_path: Path) -> None:
    """Stop the swap after each durable step, reopen: the log is old or new, never mixed."""
    for stop_after in range(4):
        d = tmp_path / f"s{stop_after}"
        log = compacted(d, segment_bytes=300)
        for i in range(12):
            put(log, [(f"k{i % 3}".encode(), f"v{i}".encode())])
        put(log, [(b"tail", b"t")])
        log.roll()
        put(log, [(b"head", b"h")])
        before = kv(log)
        ltc, _ = log_to_clean(("c", 0), log, None, NOW)
        task = CleaningTask(ltc, NOW, 1 << 20)
        task.build_offset_map()
        groups = task.groups()
        assert len(groups) >= 1
        cleaned = task.clean_group(groups[0])
        steps = log.swap_steps(cleaned)
        for _ in range(stop_after):
            next(steps)
        expected_after = stop_after >= 1  # the .log.swap rename commits
        del steps
        rp = log.recovery_point
        dir_ = log.dir
        cfg = log.config
        del log  # kill -9
        log = PartitionLog.open(dir_, cfg, NOW, clean_shutdown=False, recovery_point=rp)
        after = kv(log)
        assert not [p for p in os.listdir(dir_) if p.endswith((".cleaned", ".swap"))]
        # every surviving record is the one at that offset before; latest values all there
        before_by_offset = {o: (k, v) for o, k, v in before}
        assert all(before_by_offset[o] == (k, v) for o, k, v in after)
        latest = {k: (o, v) for o, k, v in before}
        assert {k: (o, v) for o, k, v in after} == latest
        if expected_after:
            assert len(after) < len(before)
        else:
            assert after == before
        log.close()


def test_corrupt_batch_stops_cleaning(tmp_path: Path) -> None:
    from log.cleaner import CleanerError

    log = compacted(tmp_path)
    for i in range(6):
        put(log, [(b"k", str(i).encode())])
    log.roll()
    put(log, [(b"k", b"x")])
    first = log.segments[0].path
    data = bytearray(first.read_bytes())
    data[63] ^= 0xFF  # inside the first batch's records (CRC-covered)
    first.write_bytes(bytes(data))
    ltc: LogToClean
    ltc, _ = log_to_clean(("c", 0), log, None, NOW)
    with pytest.raises(CleanerError, match="CRC"):
        clean_log(ltc, NOW, 1 << 20)
    assert not [p for p in os.listdir(log.dir) if p.endswith(".cleaned")]
