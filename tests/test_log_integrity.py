"""Byte flips in a closed segment: every read gives the right data or CORRUPT_MESSAGE, never a
silent skip (records under wrong offsets) or a stall (an empty read below the high watermark).

Each byte of a batch header and body is flipped in turn, in the first, a middle and the last
batch of a closed segment; the log is reopened cleanly (no scan: reads check what they return)
and uncleanly (recovery checks everything and truncates at the damage), and a consumer reads
from offset 0 the way clients do (next fetch at the last offset returned + 1).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from log.config import LogConfig
from log.partition_log import PartitionLog
from protocol.errors import ErrorCode, KafkaError
from protocol.records import crc_ok, iter_headers
from tests.batchutil import build_batch

NOW = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=1200, index_interval_bytes=300)


def _build(dir: Path) -> dict[int, bytes]:
    """A log of three segments or more; returns base offset -> stored batch bytes."""
    log = PartitionLog.open(dir, CONFIG, NOW)
    for i in range(18):
        buf = build_batch([NOW + i] * 10, value_size=8)
        log.append(buf, iter_headers(buf), leader_epoch=0, now_ms=NOW)
    assert len(log.segments) >= 3
    log.close()
    stored: dict[int, bytes] = {}
    for seg in sorted(dir.glob("*.log")):
        data = seg.read_bytes()
        for pos, h in iter_headers(data):
            stored[h.base_offset] = data[pos : pos + h.size]
    return stored


def _consume(log: PartitionLog, max_bytes: int) -> tuple[list[bytes], bool]:
    """(batches served in order, whether a read failed with CORRUPT_MESSAGE)."""
    offset, served = 0, []
    while offset < log.high_watermark:
        try:
            res = log.read(offset, max_bytes)
        except KafkaError as e:
            assert e.code == ErrorCode.CORRUPT_MESSAGE, e
            return served, True
        data = res.read_bytes()
        batches = iter_headers(data)
        assert batches, f"stall: an empty read at offset {offset} below {log.high_watermark}"
        for pos, h in batches:
            served.append(data[pos : pos + h.size])
        h = batches[-1][1]
        offset = h.base_offset + h.last_offset_delta + 1
    return served, False


def _check_served(served: list[bytes], stored: dict[int, bytes]) -> None:
    """Served batches are stored batches, contiguous from offset 0 (the leader epoch field,
    outside the CRC and not used for positions, may differ)."""
    expected = 0
    for b in served:
        [(_, h)] = iter_headers(b)
        assert h.base_offset == expected, f"skip: served offset {h.base_offset}, expected {expected}"
        assert crc_ok(b, 0, len(b))
        original = stored[h.base_offset]
        assert b[:12] + b[16:] == original[:12] + original[16:]
        expected = h.base_offset + h.last_offset_delta + 1


@pytest.mark.parametrize("which", [
    pytest.param("first", marks=pytest.mark.slow), "middle", pytest.param("last", marks=pytest.mark.slow),
])
def test_byte_flips_in_a_closed_segment(tmp_path: Path, which: str) -> None:
    pristine = tmp_path / "pristine" / "t-0"
    stored = _build(pristine)
    dir = tmp_path / "work" / "t-0"
    seg_name = sorted(p.name for p in pristine.glob("*.log"))[1]  # a closed middle segment
    original = (pristine / seg_name).read_bytes()
    batches = iter_headers(original)
    pos, h = {"first": batches[0], "middle": batches[len(batches) // 2], "last": batches[-1]}[which]
    corrupt_reads = 0
    for i in range(pos, pos + h.size):
        damaged = bytearray(original)
        damaged[i] ^= 0xFF
        for clean in (True, False):
            for max_bytes in (150, 1 << 20) if clean else (1 << 20,):
                shutil.rmtree(dir.parent, ignore_errors=True)
                shutil.copytree(pristine.parent, dir.parent)
                (dir / seg_name).write_bytes(bytes(damaged))
                log = PartitionLog.open(dir, CONFIG, NOW, clean_shutdown=clean, recovery_point=0)
                served, corrupt = _consume(log, max_bytes)
                leo = log.log_end_offset
                log.close()
                _check_served(served, stored)
                if clean:
                    corrupt_reads += corrupt
                    if not corrupt:  # only a flip of the leader epoch may go unnoticed
                        assert pos + 12 <= i < pos + 16, f"flip at byte {i - pos} served as good"
                else:  # recovery cut the log at (or before) the damaged batch
                    assert not corrupt
                    if not pos + 12 <= i < pos + 16:
                        assert leo <= h.base_offset, f"flip at byte {i - pos}: log end {leo}"
    assert corrupt_reads == (h.size - 4) * 2
