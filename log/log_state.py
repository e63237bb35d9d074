"""The small state objects the jobs of one partition log share (see ``log.partition_log``).

``LogOffsets``: log start, log end, high watermark and the parts of the recovery point (the
offset a flush made durable with its truncation generation, and the floor a truncation left).
``DirSync``: which changes of the partition directory and which newly written files are not
durable yet. Each field has one writer; the threading rules are in ``log.partition_log``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from pathlib import Path

__all__ = ["LogOffsets", "DirSync"]


class LogOffsets:
    """The offsets of one partition log.

    ``end`` (the log end offset) is a plain field, moved by appends and truncation. Every
    change of ``start``, ``hw`` or the recovery point's parts calls ``listener`` (the log
    manager keeps its checkpoints' dirty sets with it), so a checkpoint rewrites only what
    changed. ``generation`` is bumped by every truncation: a flush planned against an older
    one may not move the recovery point."""

    __slots__ = ("end", "_start", "_hw", "generation", "_flushed", "_rp_floor", "listener")

    def __init__(self) -> None:
        self.end = 0
        self._start = 0
        self._hw = 0
        self.generation = 0
        self._flushed = (0, 0)  # (offset made durable, generation it was made in): flusher
        self._rp_floor = 0  # the recovery point right after the last truncation
        self.listener: Callable[[], None] | None = None

    def changed(self) -> None:
        if self.listener is not None:
            self.listener()

    @property
    def start(self) -> int:
        return self._start

    @start.setter
    def start(self, value: int) -> None:
        if value != self._start:
            self._start = value
            self.changed()

    @property
    def hw(self) -> int:
        return self._hw

    @hw.setter
    def hw(self, value: int) -> None:
        if value != self._hw:
            self._hw = value
            self.changed()

    @property
    def flushed(self) -> tuple[int, int]:
        return self._flushed

    @flushed.setter
    def flushed(self, value: tuple[int, int]) -> None:
        if value != self._flushed:
            self._flushed = value
            self.changed()

    @property
    def rp_floor(self) -> int:
        return self._rp_floor

    @rp_floor.setter
    def rp_floor(self, value: int) -> None:
        if value != self._rp_floor:
            self._rp_floor = value
            self.changed()

    @property
    def recovery_point(self) -> int:
        """Everything below this offset is durable (fsynced)."""
        off, gen = self._flushed
        return off if gen == self.generation else self._rp_floor

    def clamp_hw(self, offset: int) -> int:
        """Set the high watermark within [start, end]; returns the value kept."""
        self.hw = max(self._start, min(offset, self.end))
        return self._hw

    def flushed_to(self, end_offset: int, generation: int) -> None:
        """A flush that began at ``generation`` made everything below ``end_offset`` durable."""
        if generation != self.generation:
            return  # truncated meanwhile: the flushed bytes may no longer be the log's
        off, gen = self._flushed
        previous = off if gen == generation else self._rp_floor
        self.flushed = (max(previous, end_offset), generation)

    def begin_truncation(self) -> None:
        """Before truncating: freeze the recovery point, then invalidate running flushes."""
        self.rp_floor = min(self.recovery_point, self.end)
        self.generation += 1
        self.changed()

    def clamp_to_end(self) -> None:
        """After a truncation moved ``end`` down: nothing may lie above it."""
        end = self.end
        self.start = min(self._start, end)
        self.hw = min(self._hw, end)
        self.rp_floor = min(self._rp_floor, end)


class DirSync:
    """What of the partition directory is not durable yet: ``version`` is bumped (owning
    thread) at every change of its entries, ``synced_version`` is the version a flush or a
    ``syncfs`` made durable; ``unsynced_paths`` are files written without an fsync since,
    handed to the next flush (a deque: the flusher pops while the owner appends)."""

    __slots__ = ("dir", "version", "synced_version", "unsynced_paths", "parent_unsynced")

    def __init__(self, dir: Path) -> None:
        self.dir = dir
        self.version = 0
        self.synced_version = 0
        self.unsynced_paths: deque[Path] = deque()
        #: a new log whose creation left the log directory's entry for it to the first flush
        #: (``PartitionLog.defer_parent_sync``)
        self.parent_unsynced = False

    def changed(self) -> None:
        """An entry of the directory was created, deleted or renamed."""
        self.version += 1

    def wrote(self, path: Path) -> None:
        """``path`` was written (created or replaced) without an fsync."""
        self.unsynced_paths.append(path)
        self.version += 1

    def mark_synced(self, version: int) -> None:
        if version > self.synced_version:
            self.synced_version = version

    def take_unsynced(self) -> list[Path]:
        """The files written since the last call (flusher thread)."""
        out: list[Path] = []
        paths = self.unsynced_paths
        while True:
            try:
                out.append(paths.popleft())
            except IndexError:
                return out
