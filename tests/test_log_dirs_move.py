"""Moving a partition log between log directories at the storage layer (``log.dirs``,
``log.log_move``): the copy into the future log follows appends, retention and truncation of
the current log; the swap leaves exactly one log; every crash point of the swap leaves a state
the next open turns into exactly one complete log."""

from __future__ import annotations

import os
from pathlib import Path

from log.config import LogConfig
from log.dirs import LogDirs
from log.log_move import LogCopy
from log.partition_log import PartitionLog
from protocol.records import iter_headers
from tests.batchutil import build_batch

NOW = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=4096, index_interval_bytes=256)
UID = "0" * 32


def _open(tmp: Path) -> tuple[LogDirs, Path, Path]:
    d1, d2 = tmp / "d1", tmp / "d2"
    return LogDirs.open([d1, d2], NOW, default_config=CONFIG), d1, d2


def _append(log: PartitionLog, n: int, epoch: int = 1) -> None:
    for _ in range(n):
        buf = build_batch([NOW] * 2, value_size=150)
        log.append(buf, iter_headers(buf), leader_epoch=epoch, now_ms=NOW)


def _copy_all(copy: LogCopy, source: PartitionLog) -> None:
    while (result := copy.plan(source, 1000)) is not None:
        copy.apply(result, NOW)


def _contents(log: PartitionLog) -> bytes:
    return log.read(log.log_start_offset, 1 << 24).read_bytes()


def _names(d: Path, prefix: str) -> set[str]:
    return {p.name for p in d.iterdir() if p.name.startswith(prefix)}


def test_copy_follows_appends_retention_and_truncation(tmp_path: Path) -> None:
    dirs, d1, d2 = _open(tmp_path)
    log = dirs.create("t", 0, NOW)  # d1: the first of the fewest
    _append(log, 30)
    log.update_high_watermark(log.log_end_offset)
    future = dirs.create_future("t", 0, dirs.managers[1], UID, NOW)
    assert _names(d2, "t-0") == {f"t-0.{UID}-future"}
    copy = LogCopy(future)
    _copy_all(copy, log)
    assert copy.caught_up(log) and _contents(future) == _contents(log)
    _append(log, 5, epoch=2)  # appends meanwhile
    log.update_high_watermark(log.log_end_offset)
    log.delete_records_before(20)  # the current log's start moves up
    assert not copy.caught_up(log)
    _copy_all(copy, log)
    assert future.log_start_offset == 20 and _contents(future) == _contents(log)
    assert future.leader_epochs.entries() == log.leader_epochs.entries()
    log.truncate_to(60)  # a follower's truncation: the future is cut where they agree
    _append(log, 3, epoch=3)
    _copy_all(copy, log)
    assert copy.caught_up(log) and _contents(future) == _contents(log)
    dirs.close()


def test_swap_leaves_one_log_in_the_destination(tmp_path: Path) -> None:
    dirs, d1, d2 = _open(tmp_path)
    log = dirs.create("t", 0, NOW)
    _append(log, 40)
    log.update_high_watermark(log.log_end_offset)
    before = _contents(log)
    copy = LogCopy(dirs.create_future("t", 0, dirs.managers[1], UID, NOW))
    _copy_all(copy, log)
    new, gone = dirs.swap_future("t", 0, "1" * 32, NOW)
    assert log.closed and gone.name == f"t-0.{'1' * 32}-delete" and gone.parent == d1
    assert dirs.get("t", 0) is new and dirs.manager_of("t", 0) is dirs.managers[1]
    assert new.dir == d2 / "t-0" and _contents(new) == before
    assert new.high_watermark == new.log_end_offset == 80
    assert not dirs.futures
    dirs.close()
    dirs, d1, d2 = _open(tmp_path)  # the -delete directory goes at the next start
    assert _names(d1, "t-0") == set() and _names(d2, "t-0") == {"t-0"}
    assert _contents(dirs.get("t", 0)) == before  # type: ignore[arg-type]
    dirs.close()


def test_every_crash_point_of_a_move_leaves_one_complete_log(tmp_path: Path) -> None:
    """Crash images (the process gone, files as they were): during the copy (resumed), after
    the current log was renamed away (the complete future renamed in), after both renames."""
    for point in ("copying", "current renamed", "both renamed"):
        root = tmp_path / point.replace(" ", "_")
        dirs, d1, d2 = _open(root)
        log = dirs.create("t", 0, NOW)
        _append(log, 40)
        log.update_high_watermark(log.log_end_offset)
        log.flush()
        want = _contents(log)
        future = dirs.create_future("t", 0, dirs.managers[1], UID, NOW)
        copy = LogCopy(future)
        if point == "copying":
            copy.apply(copy.plan(log, 1500), NOW)  # type: ignore[arg-type]
            future.flush()
        else:
            _copy_all(copy, log)
            future.close()
            os.rename(log.dir, d1 / f"t-0.{'2' * 32}-delete")
            if point == "both renamed":
                os.rename(future.dir, d2 / "t-0")
        # no close: as after a kill -9 (nothing more is written)
        dirs, d1, d2 = _open(root)
        where = dirs.manager_of("t", 0)
        if point == "copying":
            assert where is dirs.managers[0] and "t" in {tp[0] for tp in dirs.futures}
            resumed = dirs.futures[("t", 0)][1]
            assert 0 < resumed.log_end_offset < 80  # resumed from where the copy was
            copy = LogCopy(resumed)
            _copy_all(copy, dirs.get("t", 0))  # type: ignore[arg-type]
            dirs.swap_future("t", 0, "3" * 32, NOW)
        assert dirs.manager_of("t", 0) is dirs.managers[1], point
        assert _contents(dirs.get("t", 0)) == want, point  # type: ignore[arg-type]
        dirs.close()
        dirs, d1, d2 = _open(root)
        assert _names(d1, "t-0") == set() and _names(d2, "t-0") == {"t-0"}, point
        dirs.close()
