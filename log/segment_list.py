"""The local segments of one partition log, and the only owner of them.

``SegmentList`` keeps the segments in offset order (the last one, the *active* segment, takes
appends) and is the one place that adds, removes or replaces a segment: roll, delete the
oldest (retention, DeleteRecords), truncate (followers), reset (a follower starting over), and
the cleaner's replacement. The jobs of the log (``log.log_append``, ``log.log_read``,
``log.log_retention``, ``log.log_swap``, ``log.log_recovery``, ``log.log_flush``) are handed
this object and look segments up through it: by offset (``index_of``, ``from_offset``,
``between``), by timestamp (``for_timestamp``), by iteration.

It also keeps the small cache of open segment files of the log (the active segment's file is
always open; a few recently read ones stay open, up to ``open_segment_files_max``).

Tiered storage (KIP-405, next): a remote segment list, of segments in an object store that
each carry a base offset, an end offset, a max timestamp and their leader epochs, sits below
this one with the same lookups (by offset, by timestamp, delete below an offset); a read
below this list's first offset is answered from it (see ``log.log_read.SegmentReader``).
"""

from __future__ import annotations

import bisect
import os
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from log.config import LogConfig
from log.log_state import DirSync
from log.segment import LogSegment

__all__ = ["SegmentList", "SegmentInfo", "largest_timestamp"]


class SegmentInfo(NamedTuple):
    base_offset: int
    size_bytes: int
    max_timestamp: int
    path: Path


def largest_timestamp(seg: LogSegment) -> int:
    """Kafka's ``LogSegment.largestTimestamp``: the max batch timestamp, else the file's
    modification time."""
    if seg.max_timestamp >= 0:
        return seg.max_timestamp
    try:
        return os.stat(seg.log_path).st_mtime_ns // 1_000_000
    except FileNotFoundError:
        return 0


class SegmentList:
    """The segments of one partition directory, oldest first; never empty once loaded.

    ``config`` is the log's (a config change replaces it here, and every job reads it here);
    ``now_ms`` is the latest time a caller passed in (appends, retention), the creation time
    of segments made by calls that take none (truncation). ``closed``: the log was closed or
    detached, its segments no longer take writes."""

    def __init__(self, dir: Path, config: LogConfig, now_ms: int, dir_sync: DirSync,
                 segments: list[LogSegment] | None = None) -> None:
        self.dir = dir
        self.config = config
        self.now_ms = now_ms
        self.closed = False
        self._dir_sync = dir_sync
        self._segments: list[LogSegment] = list(segments or [])
        self._bases = [s.base_offset for s in self._segments]
        self._lru: OrderedDict[int, LogSegment] = OrderedDict()

    # -- lookups ---------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._segments)

    def __iter__(self) -> Iterator[LogSegment]:
        return iter(self._segments)

    def __getitem__(self, i: int) -> LogSegment:
        return self._segments[i]

    @property
    def active(self) -> LogSegment:
        return self._segments[-1]

    @property
    def first(self) -> LogSegment:
        return self._segments[0]

    def snapshot(self) -> list[LogSegment]:
        """A copy of the list (safe to take on the flusher thread)."""
        return list(self._segments)

    def index_of(self, offset: int) -> int:
        """The position of the segment holding ``offset`` (the first segment below it)."""
        return max(0, bisect.bisect_right(self._bases, offset) - 1)

    def next_base(self, i: int) -> int | None:
        """The base offset of the segment after position ``i``, None after the active one."""
        return self._bases[i + 1] if i + 1 < len(self._bases) else None

    def from_offset(self, offset: int) -> list[LogSegment]:
        """The segment holding ``offset`` and all later ones."""
        return self._segments[self.index_of(offset) :]

    def between(self, lo: int, hi: int) -> list[LogSegment]:
        """Kafka's ``logSegments(from, to)``: from the segment holding ``lo`` (or the first)
        through the last segment starting below ``hi``."""
        return self._segments[self.index_of(lo) : bisect.bisect_left(self._bases, hi)]

    def non_active_from(self, offset: int) -> list[LogSegment]:
        """The segment holding ``offset`` and the later ones, except the active segment."""
        return self._segments[self.index_of(offset) : -1]

    def for_timestamp(self, timestamp: int, start_offset: int) -> Iterator[LogSegment]:
        """Oldest first, the segments that may hold a record with a timestamp at or above
        ``timestamp`` at or after ``start_offset`` (their max timestamp reaches it and they do
        not end below ``start_offset``)."""
        segments = self._segments
        for i, seg in enumerate(segments):
            if seg.max_timestamp < timestamp:
                continue
            if i + 1 < len(segments) and segments[i + 1].base_offset <= start_offset:
                continue
            yield seg

    @property
    def base_offset(self) -> int:
        return self._segments[0].base_offset

    @property
    def active_base_offset(self) -> int:
        return self._segments[-1].base_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    def max_timestamp(self) -> int:
        return max((s.max_timestamp for s in self._segments), default=-1)

    def infos(self) -> list[SegmentInfo]:
        return [SegmentInfo(s.base_offset, s.size, s.max_timestamp, s.log_path)
                for s in self._segments]

    def first_batch_timestamp(self, seg: LogSegment) -> int:
        """The first batch's max timestamp (Kafka's rolling-based timestamp), -1 if none."""
        if seg.rolling_base_timestamp is None:
            h = seg.first_header() if seg.size else None
            seg.rolling_base_timestamp = h.max_timestamp if h is not None else None
            self.touch(seg)
        ts = seg.rolling_base_timestamp
        return -1 if ts is None else ts

    # -- open files --------------------------------------------------------------------------------
    def touch(self, seg: LogSegment) -> None:
        """Keep ``seg``'s file among the few open ones (the active segment is always open)."""
        segments = self._segments
        if segments and seg is segments[-1]:
            return
        lru = self._lru
        lru[seg.base_offset] = seg
        lru.move_to_end(seg.base_offset)
        while len(lru) > self.config.open_segment_files_max:
            _, old = lru.popitem(last=False)
            if old is not segments[-1]:
                old.release()

    def forget(self, seg: LogSegment) -> None:
        if self._lru.get(seg.base_offset) is seg:
            del self._lru[seg.base_offset]

    def release_inactive(self) -> None:
        """Drop the handles and indexes of every segment but the active one (after opening)."""
        for seg in self._segments[:-1]:
            seg.release()

    def release_all(self) -> None:
        for seg in self._segments:
            seg.release()

    def close(self) -> None:
        """No more writes: the file cache forgets the segments (their files stay open until
        ``release_all``, for the last flush)."""
        self._lru.clear()
        self.closed = True

    def detach(self) -> None:
        """Drop every handle and index and mark the list closed, leaving the files as they are."""
        for seg in self._segments:
            seg.offset_index.close_writer()
            seg.time_index.close_writer()
            seg.release()
        self.close()

    # -- changes -----------------------------------------------------------------------------------
    def roll(self, offset: int, now_ms: int) -> LogSegment:
        """Finish the active segment and start a new one at ``offset`` (the log end offset);
        the active segment itself when it is empty."""
        active = self._segments[-1]
        if active.size == 0:
            return active
        active.finalize()
        seg = LogSegment.create(self.dir, offset, self.config, now_ms)
        seg.open_for_append()
        self._segments.append(seg)
        self._bases.append(offset)
        self._dir_sync.changed()
        self.touch(active)
        return seg

    def delete_oldest(self, count: int) -> list[LogSegment]:
        """Delete the ``count`` oldest segments (never all: the caller rolls first); returns them."""
        if count >= len(self._segments):
            raise ValueError("the active segment is never deleted: roll first")
        doomed = self._segments[:count]
        del self._segments[:count]
        del self._bases[:count]
        for seg in doomed:
            self.forget(seg)
            seg.delete_files()
        if doomed:
            self._dir_sync.changed()
        return doomed

    def delete_below(self, offset: int) -> list[LogSegment]:
        """Delete the segments that lie entirely below ``offset`` (the next one starts at or
        below it); the active segment stays. Returns them."""
        count = max(0, bisect.bisect_right(self._bases, offset) - 1)
        return self.delete_oldest(count)

    def truncate_to(self, offset: int) -> int:
        """Drop the batch holding ``offset`` and everything after it: later segments are
        deleted (the first one stays), the last one kept is cut. Returns the offset after the
        last batch kept (its base offset when it is left empty)."""
        segments = self._segments
        while len(segments) > 1 and segments[-1].base_offset > offset:
            seg = segments.pop()
            self._bases.pop()
            self.forget(seg)
            seg.delete_files()
            self._dir_sync.changed()
        active = segments[-1]
        self.forget(active)
        active.truncate_to(offset)
        active.open_for_append()
        nxt = active.read_next_offset()
        return nxt if nxt is not None else active.base_offset

    def reset(self, offset: int, now_ms: int) -> LogSegment:
        """Delete every segment; one empty segment starts at ``offset``."""
        for seg in self._segments:
            self.forget(seg)
            seg.delete_files()
        seg = LogSegment.create(self.dir, offset, self.config, now_ms)
        seg.open_for_append()
        self._segments = [seg]
        self._bases = [offset]
        self._dir_sync.changed()
        return seg

    def position_of(self, run: list[LogSegment]) -> int:
        """Where the consecutive segments ``run`` sit in the list, -1 when they are not (all)
        there any more."""
        segments = self._segments
        i = next((k for k, seg in enumerate(segments) if seg is run[0]), -1)
        if i < 0 or not all(a is b for a, b in zip(segments[i : i + len(run)], run, strict=False)):
            return -1
        return i if i + len(run) <= len(segments) else -1

    def replace(self, i: int, count: int, new: LogSegment) -> None:
        """The ``count`` segments from position ``i`` are now ``new`` (the cleaner's swap; the
        caller has dealt with their files)."""
        for seg in self._segments[i : i + count]:
            self.forget(seg)
        self._segments[i : i + count] = [new]
        self._bases[i : i + count] = [new.base_offset]
        self._dir_sync.changed()
