"""The bounded set of open file descriptors that logs keep between uses.

A partition costs no descriptor while it is idle: segment files (``.log``) and the index
writers (``.index``, ``.timeindex``) are opened when first needed and kept in one process-wide
least-recently-used set of at most ``log.open.files.max`` handles (our own config key: Kafka
keeps every ``.log`` open and maps the indexes, which is why it needs about one descriptor per
segment). Touching a handle makes it the most recent; going over the limit drops the least
recent one.

A handle is an :class:`OpenFile`, which closes its descriptor when its last reference goes
away. Dropping a handle from the cache only drops the cache's reference: a fetch that holds one
(for ``os.sendfile``) keeps the descriptor valid until it is done, so eviction never closes a
descriptor under a reader, and a descriptor number is never reused while someone sends from it.
The number of open descriptors is therefore the cached handles plus those held by requests in
progress.

Running out anyway (``EMFILE``/``ENFILE``, e.g. a low ``ulimit -n`` or many connections): an
open through :func:`open_fd` drops the older half of the cached handles, lowers the cache's
size to what it held then (so other files, sockets and checkpoints find descriptors again) and
tries once more; if that fails too, the ``OSError`` propagates and the request that needed the
file gets KAFKA_STORAGE_ERROR. Nothing else stops.

Threads: the cache is used by the broker's event loop and, for files of their own, by worker
threads (the log cleaner). Every step is a single ``OrderedDict`` operation, atomic under the
GIL, and tolerates a concurrent removal, so no lock is needed (layer 1 has none).
"""

from __future__ import annotations

import errno
import logging
import os
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

__all__ = [
    "OpenFile",
    "HandleOwner",
    "FileCache",
    "FILE_CACHE",
    "LOG_OPEN_FILES_MAX_DEFAULT",
    "open_file",
]

logger = logging.getLogger(__name__)

#: Default of ``log.open.files.max``: handles kept open between uses, over all logs.
LOG_OPEN_FILES_MAX_DEFAULT = 256

_OUT_OF_DESCRIPTORS = (errno.EMFILE, errno.ENFILE)


class OpenFile:
    """An open file. The descriptor closes when the last reference is dropped.

    Keep the object (not just ``fd``) alive while using the descriptor.
    """

    __slots__ = ("fd", "path")

    def __init__(self, path: Path, flags: int) -> None:
        self.path = path
        self.fd = -1
        self.fd = open_fd(path, flags)

    def pread(self, n: int, pos: int) -> bytes:
        return os.pread(self.fd, n, pos)

    def close(self, _close: Callable[[int], None] = os.close) -> None:
        """Close now (the owner is sure nobody else uses the descriptor)."""
        fd = self.fd
        if fd >= 0:
            self.fd = -1
            try:
                _close(fd)
            except OSError:
                pass

    def __del__(self) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path.name}, fd={self.fd})"


class HandleOwner(Protocol):
    def drop_handle(self) -> None:
        """Forget the cached handle (the cache evicted it)."""


class FileCache:
    """LRU of the objects that hold an open handle, at most ``max_open`` of them."""

    def __init__(self, max_open: int = LOG_OPEN_FILES_MAX_DEFAULT) -> None:
        if max_open < 1:
            raise ValueError("log.open.files.max must be at least 1")
        self.max_open = max_open
        self._owners: OrderedDict[int, HandleOwner] = OrderedDict()
        #: handles dropped to make room (for tests and metrics)
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._owners)

    def configure(self, max_open: int) -> None:
        if max_open < 1:
            raise ValueError("log.open.files.max must be at least 1")
        self.max_open = max_open
        self._shrink(max_open)

    def touch(self, owner: HandleOwner) -> None:
        """``owner`` holds (or is about to hold) a handle and just used it."""
        owners = self._owners
        key = id(owner)
        owners[key] = owner
        try:
            owners.move_to_end(key)
        except KeyError:  # removed by another thread meanwhile: add it again
            owners[key] = owner
        if len(owners) > self.max_open:
            self._shrink(self.max_open)

    def forget(self, owner: HandleOwner) -> None:
        """``owner`` closed its handle itself."""
        self._owners.pop(id(owner), None)

    def drop_oldest(self, n: int) -> int:
        """Drop the ``n`` least recently used handles; returns how many were dropped."""
        return self._shrink(max(0, len(self._owners) - n))

    def _shrink(self, keep: int) -> int:
        dropped = 0
        owners = self._owners
        while len(owners) > keep:
            try:
                _, owner = owners.popitem(last=False)
            except KeyError:
                break
            owner.drop_handle()
            dropped += 1
        self.evictions += dropped
        return dropped


#: The process-wide cache used by every log (the broker sets its size from its config).
FILE_CACHE = FileCache()


def open_fd(path: Path | str, flags: int, mode: int = 0o644) -> int:
    """``os.open``; when the process is out of descriptors, drop half of the cached handles
    and try once more (then the OSError propagates)."""
    try:
        return os.open(path, flags, mode)
    except OSError as exc:
        if exc.errno not in _OUT_OF_DESCRIPTORS or not len(FILE_CACHE):
            raise
    cache = FILE_CACHE
    keep = max(1, len(cache) // 2)
    if keep < cache.max_open:
        logger.warning(
            "out of file descriptors opening %s: log.open.files.max lowered from %d to %d "
            "(raise the open-file limit, ulimit -n, to keep more files open)",
            path, cache.max_open, keep,
        )
        cache.configure(keep)
    return os.open(path, flags, mode)


def open_file(path: Path, flags: int) -> OpenFile:
    return OpenFile(path, flags)
