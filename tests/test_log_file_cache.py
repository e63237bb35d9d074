"""Idle partitions hold no descriptor: ``log/file_cache.py`` keeps at most ``log.open.files.max``
segment and index handles open, and recovers from running out of descriptors."""

from __future__ import annotations

import os
import resource
from collections.abc import Iterator
from pathlib import Path

import pytest

from log.config import LogConfig
from log.file_cache import FILE_CACHE
from log.manager import LogManager
from protocol.records import iter_headers
from tests.batchutil import build_batch

NOW = 1_700_000_000_000


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def small_cache() -> Iterator[int]:
    before = FILE_CACHE.max_open
    FILE_CACHE.configure(16)
    try:
        yield 16
    finally:
        FILE_CACHE.configure(before)


def _append(mgr: LogManager, topic: str, p: int, value: bytes) -> None:
    buf = build_batch([NOW], records=[(None, value)])
    mgr.logs[(topic, p)].append(buf, iter_headers(buf), leader_epoch=0, now_ms=NOW)


def _read(mgr: LogManager, topic: str, p: int) -> bytes:
    return mgr.logs[(topic, p)].read(0, 1 << 20).read_bytes()


def test_descriptors_stay_bounded_over_many_partitions(tmp_path: Path, small_cache: int) -> None:
    base = open_fds()
    mgr = LogManager.open(tmp_path, NOW, default_config=LogConfig(segment_bytes=4096))
    n = 400
    for p in range(n):
        mgr.create("t", p, NOW)
        for i in range(3):  # a few batches, rolling some segments
            _append(mgr, "t", p, b"v%d-%d" % (p, i) * 200)
        assert open_fds() - base <= small_cache + 4
    for p in range(n):
        data = _read(mgr, "t", p)
        assert b"v%d-2" % p in data and b"v%d-0" % p in data
        assert open_fds() - base <= small_cache + 4
    assert FILE_CACHE.evictions > 0
    mgr.close()
    assert open_fds() - base <= small_cache + 4
    mgr = LogManager.open(tmp_path, NOW, default_config=LogConfig(segment_bytes=4096))
    assert open_fds() - base <= small_cache + 4
    for p in range(0, n, 7):
        assert b"v%d-2" % p in _read(mgr, "t", p)
        _append(mgr, "t", p, b"after")
    mgr.close()


def test_out_of_descriptors_drops_cached_handles(tmp_path: Path) -> None:
    """With the cache larger than the process may open, ``EMFILE`` makes the cache give
    handles back (and shrink) instead of failing the appends."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    before = FILE_CACHE.max_open
    FILE_CACHE.configure(10_000)
    mgr = LogManager.open(tmp_path, NOW)
    for p in range(100):
        mgr.create("t", p, NOW)
        _append(mgr, "t", p, b"first")
    mgr.close()
    mgr = LogManager.open(tmp_path, NOW)
    FILE_CACHE.drop_oldest(len(FILE_CACHE))  # no handle open now
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (open_fds() + 40, hard))
        for p in range(100):  # up to 3 handles per partition: far beyond 40
            _append(mgr, "t", p, b"x" * 5000)
        for p in range(100):
            assert b"x" * 5000 in _read(mgr, "t", p)
        assert FILE_CACHE.max_open < 40
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        FILE_CACHE.configure(before)
        mgr.close()
