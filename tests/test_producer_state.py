"""Idempotent producer state: duplicates, gaps, epochs, wrap-around, persistence."""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c
import pytest

from log.config import LogConfig
from log.partition_log import PartitionLog
from log.producer_state import (
    BatchMetadata,
    ProducerStateEntry,
    ProducerStateManager,
    decode_snapshot,
    encode_snapshot,
)
from protocol.errors import ErrorCode, KafkaError
from protocol.records import iter_headers
from tests.batchutil import build_batch, control_batch

NOW = 1_700_000_000_000
PID = 77
INT32_MAX = 2**31 - 1


def open_log(path: Path, **kw: int) -> PartitionLog:
    return PartitionLog.open(path / "t-0", LogConfig(**kw), NOW)  # type: ignore[arg-type]


def produce(
    log: PartitionLog,
    seq: int,
    n: int = 1,
    *,
    pid: int = PID,
    epoch: int = 0,
    transactional: bool = False,
    now: int = NOW,
):  # type: ignore[no-untyped-def]
    buf = build_batch(
        [now] * n,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=transactional,
    )
    return log.append(buf, iter_headers(buf), leader_epoch=0, now_ms=now)


def expect_error(code: ErrorCode, fn, *args, **kw) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(KafkaError) as ei:
        fn(*args, **kw)
    assert ei.value.code == code


def test_duplicates_return_original_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    originals = []
    seq = 0
    for n in (1, 3, 2, 4, 1, 2):
        info = produce(log, seq, n)
        originals.append((seq, n, info.first_offset, info.last_offset))
        seq += n
    leo = log.log_end_offset
    size = log.size_bytes
    # the last 5 batches are remembered: retries get the original offsets, nothing is written
    for s, n, first, last in originals[1:]:
        info = produce(log, s, n)
        assert info.duplicate
        assert (info.first_offset, info.last_offset) == (first, last)
    assert log.log_end_offset == leo and log.size_bytes == size
    # the sixth most recent is out of the window
    s, n, _, _ = originals[0]
    expect_error(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, produce, log, s, n)
    # a retry with a different sequence range is not a duplicate
    expect_error(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, produce, log, originals[-1][0], 1)
    log.close()


def test_gap_and_unknown_producer(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    # an unknown producer id is accepted at any sequence (Kafka >= 2.5, KIP-360)
    info = produce(log, 42, 2)
    assert info.first_offset == 0
    expect_error(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, produce, log, 45)  # gap
    expect_error(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, produce, log, 43)  # overlap
    assert produce(log, 44).first_offset == 2
    log.close()


def test_epochs(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    produce(log, 0, 3, epoch=5)
    expect_error(ErrorCode.INVALID_PRODUCER_EPOCH, produce, log, 3, epoch=4)
    # a new epoch must start at sequence 0
    expect_error(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, produce, log, 3, epoch=6)
    info = produce(log, 0, 1, epoch=6)
    assert info.first_offset == 3
    # the old epoch's batches no longer count as duplicates after the bump
    expect_error(ErrorCode.INVALID_PRODUCER_EPOCH, produce, log, 0, 3, epoch=5)
    assert produce(log, 1, epoch=6).first_offset == 4
    log.close()


def test_sequence_wraps_at_int32(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    produce(log, INT32_MAX - 5, 3)  # unknown producer: any sequence
    produce(log, INT32_MAX - 2, 3)  # ... up to INT32_MAX
    info = produce(log, 0, 2)  # 0 follows 2147483647
    assert info.first_offset == 6
    # a batch spanning the wrap: 2147483646, 2147483647, 0, 1
    log2 = open_log(tmp_path / "b")
    produce(log2, INT32_MAX - 1, 1)
    produce(log2, INT32_MAX, 3)  # last sequence wraps to 1
    assert produce(log2, 2).first_offset == 4
    dup = produce(log2, INT32_MAX, 3)
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (1, 3)
    expect_error(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, produce, log2, 1)
    log.close()
    log2.close()


def test_non_idempotent_batches_skip_checks(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for _ in range(3):
        buf = build_batch([NOW] * 2)
        info = log.append(buf, iter_headers(buf), leader_epoch=0, now_ms=NOW)
        assert not info.duplicate
    assert log.log_end_offset == 6
    assert log.producer_state.producers == {}
    log.close()


def test_failed_append_changes_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    produce(log, 0)
    good = build_batch([NOW], producer_id=PID, producer_epoch=0, base_sequence=1)
    bad = build_batch([NOW], producer_id=PID, producer_epoch=0, base_sequence=7)
    buf = good + bad
    expect_error(
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
        log.append,
        buf,
        iter_headers(buf),
        leader_epoch=0,
        now_ms=NOW,
    )
    assert log.log_end_offset == 1
    assert log.producer_state.producers[PID].last_seq == 0
    assert produce(log, 1).first_offset == 1
    log.close()


def test_transactions(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    produce(log, 0, 2, transactional=True)
    assert log.producer_state.producers[PID].current_txn_first_offset == 0
    assert log.producer_state.first_undecided_offset() == 0
    expect_error(ErrorCode.INVALID_TXN_STATE, produce, log, 2)
    produce(log, 2, 1, transactional=True)
    marker = control_batch(producer_id=PID, producer_epoch=0, commit=True, coordinator_epoch=3)
    info = log.append(marker, iter_headers(marker), leader_epoch=0, now_ms=NOW)
    assert info.completed_txns and info.completed_txns[0].first_offset == 0
    assert info.completed_txns[0].last_offset == 3 and not info.completed_txns[0].is_aborted
    entry = log.producer_state.producers[PID]
    assert entry.current_txn_first_offset is None and entry.coordinator_epoch == 3
    # a marker from an older coordinator is fenced
    stale = control_batch(producer_id=PID, producer_epoch=0, commit=False, coordinator_epoch=2)
    expect_error(
        ErrorCode.TRANSACTION_COORDINATOR_FENCED,
        log.append,
        stale,
        iter_headers(stale),
        leader_epoch=0,
        now_ms=NOW,
    )
    # the transaction state survives a crash (rebuilt from the log, markers decoded)
    produce(log, 3, 1, transactional=True)
    del log
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(), NOW, clean_shutdown=False)
    entry = log.producer_state.producers[PID]
    assert entry.current_txn_first_offset == 4 and entry.coordinator_epoch == 3
    log.close()


def _five_batches(log: PartitionLog) -> list[tuple[int, int, int, int]]:
    out = []
    seq = 0
    for n in (2, 1, 3, 1, 2, 1):
        info = produce(log, seq, n)
        out.append((seq, n, info.first_offset, info.last_offset))
        seq += n
    return out[1:]


def test_state_restored_after_clean_reopen(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=400)
    recent = _five_batches(log)
    log.close()
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=400), NOW, clean_shutdown=True)
    for s, n, first, last in recent:
        info = produce(log, s, n)
        assert info.duplicate and (info.first_offset, info.last_offset) == (first, last)
    assert produce(log, 10).first_offset == 10
    log.close()


def test_state_restored_after_crash(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=400)
    recent = _five_batches(log)
    log.flush()
    del log  # no close: no snapshot at the end offset, no clean marker
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=400), NOW, clean_shutdown=False)
    for s, n, first, last in recent:
        info = produce(log, s, n)
        assert info.duplicate and (info.first_offset, info.last_offset) == (first, last)
    expect_error(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, produce, log, 11)
    assert produce(log, 10).first_offset == 10
    log.close()


def test_state_after_truncation(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=300)
    for seq in range(10):
        produce(log, seq)
    log.truncate_to(6)
    assert log.log_end_offset == 6
    assert log.producer_state.producers[PID].last_seq == 5
    assert produce(log, 6).first_offset == 6
    log.close()


def test_expiry(tmp_path: Path) -> None:
    log = open_log(tmp_path, producer_id_expiration_ms=1000)
    produce(log, 0, now=NOW)
    produce(log, 0, pid=PID + 1, transactional=True, now=NOW)
    assert log.expire_producers(NOW + 999) == []
    assert log.expire_producers(NOW + 1000) == [PID]  # the open transaction keeps PID+1
    assert set(log.producer_state.producers) == {PID + 1}
    # an expired producer is unknown again: any sequence is accepted
    assert produce(log, 17, now=NOW + 1000).first_offset == 2
    log.close()
    # expiry also applies when loading a snapshot
    log = PartitionLog.open(
        tmp_path / "t-0", LogConfig(producer_id_expiration_ms=1000), NOW + 5000, clean_shutdown=True
    )
    assert set(log.producer_state.producers) == {PID + 1}
    log.close()


def test_snapshot_is_kafka_format(tmp_path: Path) -> None:
    entries = [
        ProducerStateEntry(
            5,
            2,
            [BatchMetadata(s + 1, 100 + s, 1, NOW + s) for s in range(0, 10, 2)],
            coordinator_epoch=7,
            current_txn_first_offset=None,
            last_timestamp_ms=NOW + 8,
        ),
        ProducerStateEntry(9, 0, [], coordinator_epoch=-1, current_txn_first_offset=44, last_timestamp_ms=NOW),
    ]
    data = encode_snapshot(entries)
    version, crc = struct.unpack_from(">hI", data, 0)
    assert version == 1
    assert crc == crc32c.crc32c(data[6:])  # CRC-32C over everything after the crc field
    (count,) = struct.unpack_from(">i", data, 6)
    assert count == 2
    fields = struct.unpack_from(">qhiqiqiq", data, 10)
    # producer_id, epoch, last_sequence, last_offset, offset_delta, timestamp, coord epoch, txn
    assert fields == (5, 2, 9, 108, 1, NOW + 8, 7, -1)
    fields = struct.unpack_from(">qhiqiqiq", data, 10 + 46)
    assert fields == (9, 0, -1, -1, 0, NOW, -1, 44)
    back = {e.producer_id: e for e in decode_snapshot(data)}
    assert back[5].batches == entries[0].batches
    assert back[9].current_txn_first_offset == 44 and back[9].batches == []
    # a Kafka-written snapshot (no extension) decodes too
    kafka_only = bytearray(data[: 10 + 2 * 46])
    struct.pack_into(">I", kafka_only, 2, crc32c.crc32c(bytes(kafka_only[6:])))
    back = {e.producer_id: e for e in decode_snapshot(bytes(kafka_only))}
    assert back[5].batches == entries[0].batches[-1:]


def test_corrupt_snapshot_is_ignored(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    produce(log, 0, 3)
    log.close()
    snaps = sorted((tmp_path / "t-0").glob("*.snapshot"))
    assert snaps
    raw = bytearray(snaps[-1].read_bytes())
    raw[-1] ^= 0xFF
    snaps[-1].write_bytes(bytes(raw))
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(), NOW, clean_shutdown=True)
    assert log.producer_state.producers[PID].last_seq == 2  # rebuilt from the log
    assert produce(log, 0, 3).duplicate
    log.close()


def test_manager_prepare_commit_is_staged() -> None:
    psm = ProducerStateManager()
    buf = build_batch([NOW], producer_id=1, producer_epoch=0, base_sequence=0)
    (_, h), = iter_headers(buf)
    pa = psm.prepare()
    pa.add_data_batch(h)
    assert psm.producers == {}
    psm.commit(pa, 1)
    assert psm.producers[1].last_seq == 0 and psm.map_end_offset == 1


def test_a_coordinator_write_of_an_aborted_epoch_is_fenced(tmp_path: Path) -> None:
    """The group coordinator's TxnOffsetCommit batches (no sequence) skip the sequence checks
    but not the epoch's, as Kafka's AppendOrigin.COORDINATOR: after the transaction
    coordinator aborted epoch 143 (an ABORT marker of the bumped epoch 145), a late write of
    epoch 143 would open a transaction no marker ever closes (a consumer group stuck on
    UNSTABLE_OFFSET_COMMIT); it is refused with INVALID_PRODUCER_EPOCH."""
    log = open_log(tmp_path)

    def write(buf: bytearray):  # type: ignore[no-untyped-def]
        return log.append(buf, iter_headers(buf), leader_epoch=0, now_ms=NOW, coordinator=True)

    def offsets(epoch: int) -> bytearray:
        return build_batch([NOW], producer_id=PID, producer_epoch=epoch, base_sequence=-1,
                           transactional=True)

    write(offsets(143))
    write(control_batch(producer_id=PID, producer_epoch=145, commit=False, coordinator_epoch=26))
    assert log.producer_state.first_undecided_offset() is None
    expect_error(ErrorCode.INVALID_PRODUCER_EPOCH, write, offsets(143))
    assert log.producer_state.first_undecided_offset() is None
    assert log.log_end_offset == 2
    write(offsets(146))  # the producer's next epoch: no sequence asked of a coordinator write
    assert log.producer_state.first_undecided_offset() == 2
    log.close()
