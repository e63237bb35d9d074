"""PartitionLog behaviour: reads, rolls, limits, truncation, retention, flush, recovery."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import pytest

from log.config import LogConfig
from log.partition_log import PartitionLog
from log.segment import LogSegment
from protocol.errors import ErrorCode, KafkaError
from protocol.primitives import Writer
from protocol.records import iter_headers
from tests.batchutil import build_batch, split_batches

NOW = 1_700_000_000_000


def append(log: PartitionLog, n: int = 1, value_size: int = 10, ts: int = NOW, epoch: int = 0) -> tuple[int, int]:
    buf = build_batch([ts] * n, value_size=value_size)
    info = log.append(buf, iter_headers(buf), leader_epoch=epoch, now_ms=NOW)
    return info.first_offset, info.last_offset


def offsets_of(data: bytes) -> list[tuple[int, int]]:
    return [(h.base_offset, h.last_offset) for _, h in iter_headers(data)]


def expect_error(code: ErrorCode, fn, *args, **kw) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(KafkaError) as ei:
        fn(*args, **kw)
    assert ei.value.code == code


@pytest.fixture
def log(tmp_path: Path):  # type: ignore[no-untyped-def]
    lg = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=1000, index_interval_bytes=100), NOW)
    yield lg
    if not lg.closed:
        lg.close()


# -- read -----------------------------------------------------------------------------------------

def test_read_returns_batch_containing_offset(log: PartitionLog) -> None:
    for _ in range(20):
        append(log, 5)
    for off in range(0, 100):
        res = log.read(off, 1)
        got = offsets_of(res.read_bytes())
        assert len(got) == 1 and got[0][0] <= off <= got[0][1]
        assert res.first_offset == got[0][0]


def test_read_limits(log: PartitionLog) -> None:
    sizes = []
    for i in range(10):
        buf = build_batch([NOW] * 2, value_size=10 + i * 5)
        sizes.append(len(buf))
        log.append(buf, iter_headers(buf), leader_epoch=0, now_ms=NOW)
    # whole batches up to max_bytes
    res = log.read(0, sizes[0] + sizes[1] + sizes[2] - 1)
    assert offsets_of(res.read_bytes()) == [(0, 1), (2, 3)]
    # KIP-74: a first batch larger than max_bytes is returned whole
    res = log.read(4, 10)
    assert offsets_of(res.read_bytes()) == [(4, 5)] and res.size == sizes[2]
    assert log.read(4, 10, min_one_message=False).ranges == []
    # exclusive upper bound (high watermark / LSO)
    assert offsets_of(log.read(0, 10**6, max_offset=6).read_bytes()) == [(0, 1), (2, 3), (4, 5)]
    assert offsets_of(log.read(0, 10**6, max_offset=5).read_bytes()) == [(0, 1), (2, 3)]
    assert log.read(6, 10**6, max_offset=6).ranges == []
    # at the log end: empty, beyond or below the log: OFFSET_OUT_OF_RANGE
    assert log.read(20, 100).size == 0
    expect_error(ErrorCode.OFFSET_OUT_OF_RANGE, log.read, 21, 100)
    expect_error(ErrorCode.OFFSET_OUT_OF_RANGE, log.read, -1, 100)


def test_read_spans_segments_and_sendfile(log: PartitionLog) -> None:
    batches = []
    for _ in range(30):
        buf = build_batch([NOW] * 3, value_size=30)
        log.append(buf, iter_headers(buf), leader_epoch=0, now_ms=NOW)
        batches.append(bytes(buf))
    assert len(log.segments) > 3
    res = log.read(0, 10**6)
    assert len(res.ranges) == len(log.segments)
    assert res.read_bytes() == b"".join(batches)
    # ranges are ready for os.sendfile; the result is a protocol "External" (has .size)
    w = Writer()
    w.records(res)
    assert w.total_size() == 4 + res.size
    a, b = socket.socketpair()
    try:
        received = bytearray()
        for r in res.ranges:
            pos, left = r.position, r.length
            while left:
                sent = os.sendfile(a.fileno(), r.fd, pos, left)  # small: fits the socket buffer
                pos += sent
                left -= sent
        a.shutdown(socket.SHUT_WR)
        while chunk := b.recv(1 << 16):
            received += chunk
    finally:
        a.close()
        b.close()
    assert bytes(received) == b"".join(batches)


def test_read_survives_segment_deletion(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=500, retention_bytes=0), NOW)
    for _ in range(20):
        append(log, 2, value_size=40)
    res = log.read(0, 10**6)
    expected = res.read_bytes()
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments(NOW) > 0
    assert not (tmp_path / "t-0" / "00000000000000000000.log").exists()
    assert res.read_bytes() == expected  # descriptors held by the result stay valid
    log.close()


def test_fd_cache_is_bounded(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=300, open_segment_files_max=3), NOW)
    for _ in range(60):
        append(log, 1, value_size=100)
    assert len(log.segments) > 10
    for off in range(0, 60):
        log.read(off, 10)
    open_count = sum(1 for s in log.local_segments if s.is_open)
    assert open_count <= 4  # 3 cached + the active segment
    log.close()


# -- append limits and rolls ----------------------------------------------------------------------

def test_append_limits(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(max_message_bytes=200, segment_bytes=400), NOW)
    big = build_batch([NOW] * 3, value_size=100)
    expect_error(ErrorCode.MESSAGE_TOO_LARGE, log.append, big, iter_headers(big), leader_epoch=0, now_ms=NOW)
    three = build_batch([NOW], value_size=100) * 3
    expect_error(
        ErrorCode.RECORD_LIST_TOO_LARGE, log.append, three, iter_headers(three), leader_epoch=0, now_ms=NOW
    )
    assert log.log_end_offset == 0 and log.size_bytes == 0
    with pytest.raises(ValueError):
        log.append(bytearray(), [], leader_epoch=0, now_ms=NOW)
    log.close()


def test_multi_batch_append_assigns_consecutive_offsets(log: PartitionLog) -> None:
    buf = build_batch([NOW] * 2) + build_batch([NOW] * 3) + build_batch([NOW])
    info = log.append(buf, iter_headers(buf), leader_epoch=2, now_ms=NOW)
    assert (info.first_offset, info.last_offset) == (0, 5)
    assert offsets_of(bytes(buf)) == [(0, 1), (2, 4), (5, 5)]
    assert all(h.partition_leader_epoch == 2 for _, h in iter_headers(buf))
    assert log.read(0, 10**6).read_bytes() == bytes(buf)


def test_roll_by_size(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=1000), NOW)
    for _ in range(30):
        append(log, 1, value_size=100)
    assert all(s.size_bytes <= 1000 for s in log.segments)
    assert len(log.segments) >= 5
    log.close()


def test_roll_by_time(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_ms=1000), NOW)
    append(log, ts=NOW)
    append(log, ts=NOW + 1000)
    assert len(log.segments) == 1
    append(log, ts=NOW + 1001)  # the first batch of the segment is now more than 1000 ms older
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.close()


def test_roll_when_index_full(tmp_path: Path) -> None:
    # 24 bytes: 3 offset entries, 2 time entries
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(index_interval_bytes=0, segment_index_bytes=24), NOW)
    for i in range(10):
        append(log, ts=NOW + i)
    assert len(log.segments) > 2
    for seg in log.local_segments:
        assert seg.time_index.entries <= 3 and seg.offset_index.entries <= 3
    log.close()


def test_roll_on_relative_offset_overflow(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(), NOW)
    append(log)
    seg = log.local_segments.active
    assert not log._appender.should_roll(seg, 10, NOW, seg.base_offset + 2**31 - 1, NOW)
    assert log._appender.should_roll(seg, 10, NOW, seg.base_offset + 2**31, NOW)
    log.close()


def test_explicit_roll(log: PartitionLog) -> None:
    log.roll()
    assert len(log.segments) == 1  # empty active segment: no-op
    append(log, 3)
    log.roll()
    assert [s.base_offset for s in log.segments] == [0, 3]
    assert (log.dir / "00000000000000000003.snapshot").exists()


# -- truncation, deletion, retention --------------------------------------------------------------

def test_truncate_mid_batch(log: PartitionLog) -> None:
    for _ in range(10):
        append(log, 4)
    log.update_high_watermark(40)
    log.truncate_to(22)  # batch 20..23 goes entirely
    assert log.log_end_offset == 20 and log.high_watermark == 20
    assert offsets_of(log.read(16, 10**6).read_bytes()) == [(16, 19)]
    assert append(log, 1) == (20, 20)
    log.truncate_to(0)
    assert log.log_end_offset == 0 and log.size_bytes == 0


def test_truncate_fully_and_start_at(log: PartitionLog) -> None:
    append(log, 5)
    log.truncate_fully_and_start_at(1000)
    assert (log.log_start_offset, log.log_end_offset) == (1000, 1000)
    assert append(log, 2) == (1000, 1001)
    assert [s.base_offset for s in log.segments] == [1000]


def test_delete_records(log: PartitionLog) -> None:
    for _ in range(40):
        append(log, 3)
    expect_error(ErrorCode.OFFSET_OUT_OF_RANGE, log.delete_records_before, 10)  # above HW (0)
    log.update_high_watermark(120)
    n_segments = len(log.segments)
    assert log.delete_records_before(61) == 61
    assert log.log_start_offset == 61
    assert len(log.segments) < n_segments
    assert log.segments[0].base_offset <= 61
    expect_error(ErrorCode.OFFSET_OUT_OF_RANGE, log.read, 60, 100)
    # the batch containing the log start offset is still returned whole
    assert offsets_of(log.read(61, 1).read_bytes()) == [(60, 62)]
    assert log.delete_records_before(10) == 61  # never moves backwards


def test_retention_by_size_and_time(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=600, retention_bytes=1500, retention_ms=-1)
    log = PartitionLog.open(tmp_path / "t-0", config, NOW)
    for i in range(30):
        append(log, 2, value_size=50, ts=NOW + i)
    assert log.delete_old_segments(NOW) == 0  # nothing is below the high watermark yet
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments(NOW) > 0
    assert log.size_bytes <= 1500 + 600
    assert log.log_start_offset == log.segments[0].base_offset
    log.close()

    config = LogConfig(segment_bytes=600, retention_ms=1000)
    log = PartitionLog.open(tmp_path / "t-1", config, NOW)
    for i in range(30):
        append(log, 2, value_size=50, ts=NOW + i * 100)
    log.update_high_watermark(log.log_end_offset)
    deleted = log.delete_old_segments(NOW + 2000)
    assert deleted > 0
    # remaining segments all hold a timestamp newer than now - retention
    assert all(s.max_timestamp >= NOW + 1000 for s in log.segments if s.size_bytes)
    # everything expired: the log is emptied but keeps its offsets
    leo = log.log_end_offset
    log.delete_old_segments(NOW + 10**9)
    assert log.log_start_offset == leo == log.log_end_offset
    assert append(log) == (leo, leo)
    log.close()


# -- flush / recovery -----------------------------------------------------------------------------

def test_flush_from_another_thread(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=5000), NOW)
    stop = threading.Event()
    errors: list[BaseException] = []

    def flusher() -> None:
        try:
            while not stop.is_set():
                log.flush()
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    t = threading.Thread(target=flusher)
    t.start()
    try:
        for _ in range(500):
            append(log, 2, value_size=50)
    finally:
        stop.set()
        t.join()
    assert not errors
    log.flush()
    assert log.recovery_point == log.log_end_offset == 1000
    assert not log.dirty
    log.close()


def test_flush_job_split(log: PartitionLog) -> None:
    append(log, 3)
    job = log.prepare_flush()
    append(log, 2)  # appended while the job runs: not covered
    job.run()
    log.complete_flush(job)
    assert log.recovery_point == 3
    log.truncate_to(1)
    job = log.prepare_flush()
    job.run()
    log.complete_flush(job)
    assert log.recovery_point == 0  # the earlier batch was truncated
    log.flush()
    # a flush that started before a truncation never advances the recovery point
    append(log, 4)
    log.flush()
    assert log.recovery_point == 4
    job = log.prepare_flush()
    append(log, 2)
    log.truncate_to(2)  # the batch 0..3 goes: the log is empty again
    append(log, 6)
    job.run()
    log.complete_flush(job)
    assert log.recovery_point == 0
    log.flush()
    assert log.recovery_point == 6 and not log.dirty


def test_torn_tail_is_truncated(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(), NOW)
    for _ in range(5):
        append(log, 2)
    path = log.segments[-1].path
    full = path.read_bytes()
    del log
    os.truncate(path, len(full) - 7)  # tear the last batch
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(), NOW, clean_shutdown=False)
    assert log.log_end_offset == 8
    assert path.read_bytes() == full[: len(split_batches(full)[0]) * 4]
    assert append(log, 1) == (8, 8)
    log.close()


def test_garbage_after_valid_batches(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(), NOW)
    for _ in range(3):
        append(log, 1)
    path = log.segments[-1].path
    good = path.read_bytes()
    del log
    with open(path, "ab") as f:
        f.write(b"\x00" * 100)  # e.g. zero-filled blocks after a crash
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(), NOW, clean_shutdown=False)
    assert log.log_end_offset == 3 and path.read_bytes() == good
    log.close()


def test_clean_open_does_not_scan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = LogConfig(segment_bytes=2000, index_interval_bytes=200)
    log = PartitionLog.open(tmp_path / "t-0", config, NOW)
    for _ in range(200):
        append(log, 2, value_size=30)
    leo = log.log_end_offset
    log.close()
    scanned: list[int] = []
    real_scan = LogSegment.scan

    def counting_scan(self: LogSegment, start: int = 0, end: int | None = None):  # type: ignore[no-untyped-def]
        for item in real_scan(self, start, end):
            scanned.append(self.base_offset)
            yield item

    def no(*a: object, **k: object) -> None:
        raise AssertionError("clean open must not rebuild")

    monkeypatch.setattr(LogSegment, "scan", counting_scan)
    monkeypatch.setattr(LogSegment, "recover", no)
    monkeypatch.setattr(LogSegment, "rebuild_indexes", no)
    log = PartitionLog.open(tmp_path / "t-0", config, NOW, clean_shutdown=True)
    assert log.log_end_offset == leo
    assert len(scanned) < 20  # only the tail of the last segment
    log.close()


def test_leader_epochs(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(), NOW)
    append(log, 3, epoch=1)
    append(log, 2, epoch=1)
    append(log, 2, epoch=4)
    assert log.leader_epochs.entries() == [(1, 0), (4, 5)]
    assert log.epoch_for_offset(4) == 1 and log.epoch_for_offset(6) == 4
    assert log.end_offset_for_epoch(4) == (4, 7)
    assert log.end_offset_for_epoch(2) == (1, 5)
    assert log.end_offset_for_epoch(0) == (0, 0)
    assert log.end_offset_for_epoch(9) == (-1, -1)
    text = (tmp_path / "t-0" / "leader-epoch-checkpoint").read_text()
    assert text == "0\n2\n1 0\n4 5\n"
    log.truncate_to(5)
    assert log.leader_epochs.entries() == [(1, 0)]
    log.close()


def test_becoming_leader_writes_the_epoch_checkpoint_for_the_next_flush(tmp_path: Path) -> None:
    """assign_leader_epoch writes the file at the first append after it (in place, no
    fsync) and the next flush fsyncs it; a torn copy found by an unclean open is rebuilt from
    every batch, also below the recovery point (which alone is otherwise trusted)."""
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(), NOW)
    assert log.assign_leader_epoch(1, 0)
    path = tmp_path / "t-0" / "leader-epoch-checkpoint"
    assert not path.exists()  # an entry at the log end: every open drops it again
    append(log, 3, epoch=1)
    assert path.read_text() == "0\n1\n1 0\n"
    assert path in log.prepare_flush().paths  # the flush fsyncs it
    assert log.assign_leader_epoch(4, log.log_end_offset)
    assert not log.assign_leader_epoch(4, log.log_end_offset)  # the same epoch: unchanged
    append(log, 2, epoch=4)
    leo = log.log_end_offset
    log.flush()
    log.close()
    path.write_text("0\n2\n1 0\n4")  # torn: the last entry half written
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(), NOW, clean_shutdown=False,
                            recovery_point=leo)
    assert log.leader_epochs.entries() == [(1, 0), (4, 3)]
    log.close()
    assert path.read_text() == "0\n2\n1 0\n4 3\n"
