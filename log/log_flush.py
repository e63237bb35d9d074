"""Flushing a partition log: what needs an fsync (``prepare``, owning or flusher thread), the
fsyncs themselves (``FlushJob.run``, a worker thread) and the recovery point they move
(``complete``). The rules that make this safe without a lock are in ``log.partition_log``."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from log.checkpoint import fsync_dir
from log.log_state import DirSync, LogOffsets
from log.segment import LogSegment
from log.segment_list import SegmentList

__all__ = ["FlushJob", "LogFlush"]


@dataclass(slots=True)
class FlushJob:
    """The fsync work of one flush. ``run`` may execute on a worker thread."""

    end_offset: int
    generation: int
    segments: list[tuple[LogSegment, int]] = field(default_factory=list)  # (segment, version)
    paths: list[Path] = field(default_factory=list)
    dir: Path | None = None
    dir_version: int = 0
    owner: DirSync | None = None
    #: the log directory holding a new partition directory (``DirSync.parent_unsynced``)
    parent: Path | None = None

    def run(self) -> None:
        for seg, version in self.segments:
            f = seg.file_for_sync()
            if f is not None:
                os.fsync(f.fd)
            seg.fsync_indexes()
            if version > seg.synced_version:
                seg.synced_version = version
        for p in self.paths:
            try:
                fd = os.open(p, os.O_RDONLY)
            except FileNotFoundError:
                continue
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        if self.dir is not None:
            try:
                fsync_dir(self.dir)
            except FileNotFoundError:
                return
            if self.owner is not None:
                self.owner.mark_synced(self.dir_version)
        if self.parent is not None:
            try:
                fsync_dir(self.parent)
            except FileNotFoundError:
                return


class LogFlush:
    """The flush bookkeeping of one log, over its segments, offsets and directory state."""

    def __init__(self, segments: SegmentList, offsets: LogOffsets, dir_sync: DirSync) -> None:
        self._segments = segments
        self._offsets = offsets
        self._dir_sync = dir_sync

    def prepare(self) -> FlushJob:
        """Collect what needs an fsync. Safe on the flusher thread."""
        offsets = self._offsets
        job = FlushJob(offsets.end, offsets.generation, owner=self._dir_sync)  # the end FIRST
        for seg in self._segments.snapshot():
            version = seg.version
            if version != seg.synced_version:
                job.segments.append((seg, version))
        ds = self._dir_sync
        job.paths.extend(ds.take_unsynced())
        dir_version = ds.version
        if dir_version != ds.synced_version:
            job.dir = ds.dir
            job.dir_version = dir_version
        if ds.parent_unsynced:
            ds.parent_unsynced = False
            job.dir = ds.dir
            job.parent = ds.dir.parent
        return job

    def complete(self, job: FlushJob) -> None:
        """Record a finished FlushJob: advance the recovery point."""
        self._offsets.flushed_to(job.end_offset, job.generation)

    @property
    def dirty(self) -> bool:
        offsets = self._offsets
        return offsets.recovery_point < offsets.end or any(
            s.version != s.synced_version for s in self._segments
        )
