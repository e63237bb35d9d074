"""LogManager: directory naming, checkpoints, clean shutdown marker, recovery on restart."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from log.checkpoint import read_offsets_checkpoint
from log.config import LogConfig
from log.manager import LogManager
from log.partition_log import CLEAN_SHUTDOWN_FILE, parse_partition_dir_name
from log.segment import LogSegment
from protocol.errors import ErrorCode, KafkaError
from protocol.records import iter_headers
from tests.batchutil import build_batch

NOW = 1_700_000_000_000


def append(log, n: int = 1) -> None:  # type: ignore[no-untyped-def]
    buf = build_batch([NOW] * n)
    log.append(buf, iter_headers(buf), leader_epoch=0, now_ms=NOW)


def test_parse_dir_names() -> None:
    assert parse_partition_dir_name("orders-0") == ("orders", 0)
    assert parse_partition_dir_name("my-topic.v2-17") == ("my-topic.v2", 17)
    assert parse_partition_dir_name("__consumer_offsets-49") == ("__consumer_offsets", 49)
    assert parse_partition_dir_name("a--1") == ("a-", 1)
    for bad in ("orders", "orders-", "-3", "orders-x", "orders-1a", "orders-١"):
        assert parse_partition_dir_name(bad) is None


def test_lifecycle(tmp_path: Path) -> None:
    mgr = LogManager.open(tmp_path, NOW)
    assert not mgr.had_clean_shutdown
    a = mgr.create("my-topic.v2", 0, NOW)
    b = mgr.create("my-topic.v2", 11, NOW)
    c = mgr.create("other", 3, NOW)
    with pytest.raises(KafkaError) as ei:
        mgr.create("other", 3, NOW)
    assert ei.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
    with pytest.raises(KafkaError):
        mgr.create("bad/name", 0, NOW)
    for log, n in ((a, 3), (b, 5), (c, 1)):
        for _ in range(n):
            append(log, 2)
        log.update_high_watermark(log.log_end_offset)
    c.delete_records_before(1)
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == [
        "my-topic.v2-0",
        "my-topic.v2-11",
        "other-3",
    ]
    mgr.flush_all()
    mgr.close()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert read_offsets_checkpoint(tmp_path / "recovery-point-offset-checkpoint") == {
        ("my-topic.v2", 0): 6,
        ("my-topic.v2", 11): 10,
        ("other", 3): 2,
    }
    assert read_offsets_checkpoint(tmp_path / "log-start-offset-checkpoint") == {("other", 3): 1}
    assert read_offsets_checkpoint(tmp_path / "replication-offset-checkpoint") == {
        ("my-topic.v2", 0): 6,
        ("my-topic.v2", 11): 10,
        ("other", 3): 2,
    }

    mgr = LogManager.open(tmp_path, NOW)
    assert mgr.had_clean_shutdown
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()  # a crash from now on is detected
    assert {tp: log.log_end_offset for tp, log in mgr} == {
        ("my-topic.v2", 0): 6,
        ("my-topic.v2", 11): 10,
        ("other", 3): 2,
    }
    other = mgr.get("other", 3)
    assert other is not None and other.log_start_offset == 1 and other.high_watermark == 2
    assert mgr.delete("other", 3)
    assert not (tmp_path / "other-3").exists()
    assert not mgr.delete("other", 3)
    mgr.close()


def test_unclean_restart_recovers_from_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = LogConfig(segment_bytes=500)
    mgr = LogManager.open(tmp_path, NOW, default_config=config)
    log = mgr.create("t", 0, NOW)
    for _ in range(20):
        append(log, 2)
    log.flush()
    mgr.checkpoint()
    rp = log.recovery_point
    for _ in range(3):
        append(log, 2)
    active = log.segments[-1].path
    del log, mgr  # crash: no close, no marker
    os.truncate(active, os.path.getsize(active) - 3)

    recovered: list[int] = []
    real = LogSegment.recover

    def spy(self: LogSegment, min_offset: int, limit_offset: int | None = None):  # type: ignore[no-untyped-def]
        recovered.append(self.base_offset)
        return real(self, min_offset, limit_offset)

    monkeypatch.setattr(LogSegment, "recover", spy)
    mgr = LogManager.open(tmp_path, NOW, default_config=config)
    assert not mgr.had_clean_shutdown
    log = mgr.get("t", 0)
    assert log is not None
    assert log.log_end_offset == 44  # the torn last batch is gone
    # only segments from the one holding the recovery point were rescanned
    assert recovered and min(recovered) == max(s.base_offset for s in log.segments if s.base_offset <= rp)
    mgr.close()


def test_stray_directories(tmp_path: Path) -> None:
    (tmp_path / "t-0.0123abcd-delete").mkdir()
    (tmp_path / "t-1-future").mkdir()
    (tmp_path / "not a partition").mkdir()
    (tmp_path / "meta.properties").write_text("x")
    mgr = LogManager.open(tmp_path, NOW)
    assert len(mgr) == 0
    assert not (tmp_path / "t-0.0123abcd-delete").exists()
    assert (tmp_path / "t-1-future").exists()
    mgr.close()


def test_per_topic_config(tmp_path: Path) -> None:
    small = LogConfig(segment_bytes=300)
    mgr = LogManager.open(tmp_path, NOW, config_for=lambda t: small if t == "small" else LogConfig())
    s = mgr.get_or_create("small", 0, NOW)
    big = mgr.get_or_create("big", 0, NOW)
    assert mgr.get_or_create("small", 0, NOW) is s
    for _ in range(10):
        append(s, 3)
        append(big, 3)
    assert len(s.segments) > 1 and len(big.segments) == 1
    mgr.close()


def test_many_logs_close_and_recover_with_one_syncfs(tmp_path: Path) -> None:
    """Closing (and recovering after a crash) more logs than SYNCFS_MIN_LOGS makes them
    durable with one syncfs: the recovery points, the data and the clean marker are all there."""
    from log import manager as manager_mod

    calls: list[Path] = []
    real = manager_mod.syncfs

    def counting(path: Path) -> None:
        calls.append(path)
        real(path)

    manager_mod.syncfs = counting
    try:
        n = manager_mod.SYNCFS_MIN_LOGS + 8
        mgr = LogManager.open(tmp_path, NOW)
        for p in range(n):
            log = mgr.create("t", p, NOW)
            log.assign_leader_epoch(2, 0)
            append(log, 1 + p % 3)
        mgr.close()
        assert calls == [tmp_path]
        rps = read_offsets_checkpoint(tmp_path / "recovery-point-offset-checkpoint")
        assert rps == {("t", p): 1 + p % 3 for p in range(n)}
        assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
        mgr = LogManager.open(tmp_path, NOW)
        for p in range(n):
            assert mgr.get("t", p).leader_epochs.entries() == [(2, 0)]
        # a crash: no marker, recovery points at 0, every log is recovered, then one syncfs
        calls.clear()
        os.unlink(tmp_path / "recovery-point-offset-checkpoint")
        mgr2 = LogManager.open(tmp_path, NOW)
        assert calls == [tmp_path]
        assert all(mgr2.get("t", p).log_end_offset == 1 + p % 3 for p in range(n))
        assert not any(log.recovered_unsynced for _, log in mgr2)
    finally:
        manager_mod.syncfs = real
