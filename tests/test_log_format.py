"""On-disk files are in Kafka's formats (checked byte by byte)."""

from __future__ import annotations

import struct
from pathlib import Path

from log.config import LogConfig
from log.partition_log import PartitionLog
from protocol.records import crc_ok, iter_headers
from tests.batchutil import build_batch

NOW = 1_700_000_000_000


def _fill(path: Path, config: LogConfig, n: int = 120) -> tuple[PartitionLog, list[bytes]]:
    log = PartitionLog.open(path, config, NOW)
    written = []
    for i in range(n):
        buf = build_batch([NOW + (i * 37) % 101 for _ in range(1 + i % 3)], value_size=20 + i % 50)
        log.append(buf, iter_headers(buf), leader_epoch=3, now_ms=NOW)
        written.append(bytes(buf))
    return log, written


def test_file_names_and_log_contents(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=2048, index_interval_bytes=256)
    log, written = _fill(tmp_path / "my.topic-with-dashes-12", config)
    log.close()
    d = tmp_path / "my.topic-with-dashes-12"
    logs = sorted(d.glob("*.log"))
    assert len(logs) > 3
    for p in logs:
        assert len(p.stem) == 20 and p.stem.isdigit()
        assert (d / (p.stem + ".index")).exists() and (d / (p.stem + ".timeindex")).exists()
    # .log files are the batches back to back, exactly as appended (patched headers included)
    assert b"".join(p.read_bytes() for p in logs) == b"".join(written)
    # each segment starts with the batch at its base offset, every batch has a valid CRC
    for p in logs:
        data = p.read_bytes()
        hs = iter_headers(data)
        assert hs[0][1].base_offset == int(p.stem)
        assert sum(h.size for _, h in hs) == len(data)
        assert all(crc_ok(data, pos, h.size) and h.partition_leader_epoch == 3 for pos, h in hs)


def test_offset_index_entries(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=4096, index_interval_bytes=300)
    log, _ = _fill(tmp_path / "t-0", config)
    log.close()
    d = tmp_path / "t-0"
    total_entries = 0
    for p in sorted(d.glob("*.log")):
        base = int(p.stem)
        data = p.read_bytes()
        by_pos = {pos: h for pos, h in iter_headers(data)}
        raw = (d / (p.stem + ".index")).read_bytes()
        assert len(raw) % 8 == 0
        prev = (-1, -1)
        bytes_since = 0
        expected = []
        for pos, h in iter_headers(data):
            if bytes_since > 300:
                expected.append((h.last_offset - base, pos))
                bytes_since = 0
            bytes_since += h.size
        entries = [struct.unpack_from(">ii", raw, i) for i in range(0, len(raw), 8)]
        assert entries == expected  # Kafka's rule: an entry once more than the interval passed
        for rel, pos in entries:
            assert rel > prev[0] and pos > prev[1]
            # int32 relative offset of the batch's LAST offset, int32 position of the batch
            assert by_pos[pos].last_offset == base + rel
            prev = (rel, pos)
        total_entries += len(entries)
    assert total_entries > 10


def test_time_index_entries(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=4096, index_interval_bytes=300)
    log, _ = _fill(tmp_path / "t-0", config)
    log.close()
    d = tmp_path / "t-0"
    for p in sorted(d.glob("*.log")):
        base = int(p.stem)
        hs = iter_headers(p.read_bytes())
        raw = (d / (p.stem + ".timeindex")).read_bytes()
        assert len(raw) % 12 == 0 and raw
        entries = [struct.unpack_from(">qi", raw, i) for i in range(0, len(raw), 12)]
        for (t1, _), (t2, _) in zip(entries, entries[1:], strict=False):
            assert t2 > t1
        for ts, rel in entries:
            # (int64 max timestamp so far, int32 relative offset of the batch that reached it)
            upto = [h for _, h in hs if h.last_offset <= base + rel]
            assert max(h.max_timestamp for h in upto) == ts
            assert any(h.last_offset == base + rel and h.max_timestamp == ts for h in upto)
        # the last entry holds the segment's largest timestamp (written at roll / close)
        assert entries[-1][0] == max(h.max_timestamp for _, h in hs)


def test_rebuilt_indexes_match_written_ones(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=4096, index_interval_bytes=300)
    log, _ = _fill(tmp_path / "t-0", config)
    log.close()
    d = tmp_path / "t-0"
    before = {p.name: p.read_bytes() for p in d.iterdir() if p.suffix in (".index", ".timeindex")}
    for name in before:
        (d / name).unlink()
    log = PartitionLog.open(d, config, NOW, clean_shutdown=True)
    log.close()
    after = {p.name: p.read_bytes() for p in d.iterdir() if p.suffix in (".index", ".timeindex")}
    assert after == before


def test_checkpoint_text_format(tmp_path: Path) -> None:
    from log.checkpoint import read_offsets_checkpoint, write_offsets_checkpoint

    path = tmp_path / "recovery-point-offset-checkpoint"
    write_offsets_checkpoint(path, {("b-topic", 1): 7, ("a.topic-x", 0): 12})
    assert path.read_text() == "0\n2\na.topic-x 0 12\nb-topic 1 7\n"
    assert read_offsets_checkpoint(path) == {("b-topic", 1): 7, ("a.topic-x", 0): 12}
    assert read_offsets_checkpoint(tmp_path / "missing") is None


def _names(d: Path) -> set[str]:
    return {p.name for p in d.iterdir() if p.name.endswith((".log", ".index", ".timeindex"))}


def test_index_files_come_with_the_first_batch(tmp_path: Path) -> None:
    """A new segment's .index/.timeindex are created with its first batch: an unwritten
    partition holds only its .log, across clean and unclean reopens; once written it has the
    layout Kafka's tools read, and reads find the data after a reopen."""
    d = tmp_path / "lazy-0"
    config = LogConfig(segment_bytes=4096, index_interval_bytes=256)
    log = PartitionLog.open(d, config, NOW)
    seg = "00000000000000000000"
    assert _names(d) == {f"{seg}.log"}
    log.close()
    for clean in (True, False):  # an empty segment without index files opens as empty
        log = PartitionLog.open(d, config, NOW, clean_shutdown=clean, recovery_point=0)
        assert (log.log_end_offset, _names(d)) == (0, {f"{seg}.log"})
        log.close()
    log = PartitionLog.open(d, config, NOW)
    buf = build_batch([NOW] * 3, value_size=100)
    log.append(buf, iter_headers(buf), leader_epoch=1, now_ms=NOW)
    assert _names(d) == {f"{seg}.log", f"{seg}.index", f"{seg}.timeindex"}
    written = [bytes(buf)]
    while len(log.segments) < 3:  # rolled segments get theirs with their first batch too
        buf = build_batch([NOW] * 3, value_size=300)
        log.append(buf, iter_headers(buf), leader_epoch=1, now_ms=NOW)
        written.append(bytes(buf))
    for s in log.segments:
        stem = Path(s.path).stem
        assert {f"{stem}.index", f"{stem}.timeindex"} <= _names(d)
    log.close()
    for clean in (True, False):
        log = PartitionLog.open(d, config, NOW, clean_shutdown=clean, recovery_point=0)
        assert log.log_end_offset == 3 * len(written)
        got = log.read(0, 1 << 20).read_bytes()
        assert got == b"".join(written)
        log.close()
