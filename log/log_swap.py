"""Swapping the log cleaner's result in for the segments it was made from, crash-safely.

The cleaner (``log.cleaner``) writes ``<base>.{index,timeindex,log}.cleaned`` next to the log
and hands a ``CleanedSegment`` to ``PartitionLog.replace_segments`` on the owning thread;
``SegmentSwap`` renames the files in durable steps and updates the segment list. An open
finishes a swap a crash interrupted (``log.log_recovery``).
"""

from __future__ import annotations

import os
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path

from log.checkpoint import fsync_dir
from log.layout import SWAP_SUFFIX
from log.log_state import LogOffsets
from log.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, LogSegment, segment_file_name
from log.segment_list import SegmentList

__all__ = ["CleanedSegment", "SegmentSwap"]


@dataclass
class CleanedSegment:
    """A cleaned segment written next to the log as ``<base>.{log,index,timeindex}.cleaned``."""

    base_offset: int
    sources: list[LogSegment]
    generation: int
    size: int
    paths: list[Path] = field(default_factory=list)  # log last


class SegmentSwap:
    """The cleaner's swaps into one log's segment list."""

    def __init__(self, segments: SegmentList, offsets: LogOffsets) -> None:
        self._segments = segments
        self._offsets = offsets

    def swap_steps(self, cleaned: CleanedSegment) -> Generator[str, None, bool]:
        """``PartitionLog.swap_steps``."""
        segments = self._segments
        sources = cleaned.sources
        i = segments.position_of(sources)
        ok = (
            not segments.closed
            and cleaned.generation == self._offsets.generation
            and i >= 0
            and i + len(sources) < len(segments)  # never the active segment
        )
        if not ok:
            for p in cleaned.paths:
                _unlink(p)
            return False
        base = cleaned.base_offset
        dir = segments.dir
        # aborted-transaction entries of the replaced segments, read before any is deleted
        carried = [t for seg in sources for t in seg.txn_index.entries()]
        finals = [
            dir / segment_file_name(base, suffix)
            for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, LOG_SUFFIX)
        ]
        swaps = [p.with_name(p.name + SWAP_SUFFIX) for p in finals]
        for src, dst in zip(cleaned.paths, swaps, strict=True):
            os.replace(src, dst)
        fsync_dir(dir)
        yield "committed"
        for seg in sources[1:]:
            segments.forget(seg)
            seg.delete_files()
        yield "replaced segments deleted"
        for src, dst in zip(swaps, finals, strict=True):
            os.replace(src, dst)
        fsync_dir(dir)
        yield "renamed"
        first = sources[0]
        segments.forget(first)
        first.release()
        new = LogSegment(dir, base, segments.config, segments.now_ms)
        if not new.load(trust_indexes=True):
            new.rebuild_indexes()
        new.synced_version = new.version  # written and fsynced by the cleaner
        # The cleaned segment keeps the entries whose ABORT marker it kept (Kafka's cleaner
        # carries those over); a crash before this point rebuilds the index in recovery.
        markers = {h.base_offset for _, h in new.scan(0) if h.is_control}
        new.txn_index.rewrite([t for t in carried if t.last_offset in markers])
        segments.replace(i, len(sources), new)
        return True


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
