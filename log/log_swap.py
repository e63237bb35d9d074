"""Swapping the log cleaner's result in for the segments it was made from, crash-safely.

Part of ``PartitionLog`` (see ``log.partition_log`` for the design; ``log.log_core`` holds
the state every part shares).
"""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import TYPE_CHECKING

from log.checkpoint import fsync_dir
from log.log_core import SWAP_SUFFIX, LogCore, _unlink
from log.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, LogSegment, segment_file_name

if TYPE_CHECKING:
    from log.cleaner import CleanedSegment  # header bytes [0, 16): outside the CRC

__all__ = ["LogSwap"]


class LogSwap(LogCore):
    def replace_segments(self, cleaned: CleanedSegment) -> bool:
        """Swap the log cleaner's ``cleaned`` segment in for the segments it was made from.

        Returns False, deleting the cleaned files, when the log changed meanwhile (one of those
        segments deleted, a truncation, the log closed). The swap is crash-safe, in the steps
        of :meth:`swap_steps`; ``_complete_swaps`` finishes an interrupted one at open.
        """
        steps = self.swap_steps(cleaned)
        while True:
            try:
                next(steps)
            except StopIteration as done:
                return bool(done.value)

    def swap_steps(self, cleaned: CleanedSegment) -> Generator[str, None, bool]:
        """The swap one durable step at a time (tests stop it midway to simulate a crash):

        1. ``.index.cleaned``, ``.timeindex.cleaned``, then ``.log.cleaned`` are renamed to
           ``.swap`` and the directory fsynced: the ``.log.swap`` rename is the commit point;
        2. the replaced segments other than the first are deleted;
        3. the ``.swap`` files are renamed over the first one's files, the directory fsynced;
        4. the in-memory segment list is updated.

        Readers holding the old files' descriptors keep reading them until they are done.
        """
        sources = cleaned.sources
        segments = self._segments
        i = next((k for k, seg in enumerate(segments) if seg is sources[0]), -1)
        ok = (
            not self._closed
            and cleaned.generation == self._generation
            and i >= 0
            and i + len(sources) < len(segments)  # never the active segment
            and all(a is b for a, b in zip(segments[i : i + len(sources)], sources, strict=True))
        )
        if not ok:
            for p in cleaned.paths:
                _unlink(p)
            return False
        base = cleaned.base_offset
        # aborted-transaction entries of the replaced segments, read before any is deleted
        carried = [t for seg in sources for t in seg.txn_index.entries()]
        finals = [
            self.dir / segment_file_name(base, suffix)
            for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, LOG_SUFFIX)
        ]
        swaps = [p.with_name(p.name + SWAP_SUFFIX) for p in finals]
        for src, dst in zip(cleaned.paths, swaps, strict=True):
            os.replace(src, dst)
        fsync_dir(self.dir)
        yield "committed"
        for seg in sources[1:]:
            self._forget(seg)
            seg.delete_files()
        yield "replaced segments deleted"
        for src, dst in zip(swaps, finals, strict=True):
            os.replace(src, dst)
        fsync_dir(self.dir)
        yield "renamed"
        first = sources[0]
        self._forget(first)
        first.release()
        new = LogSegment(self.dir, base, self.config, self._now_ms)
        if not new.load(trust_indexes=True):
            new.rebuild_indexes()
        new.synced_version = new.version  # written and fsynced by the cleaner
        # The cleaned segment keeps the entries whose ABORT marker it kept (Kafka's cleaner
        # carries those over); a crash before this point rebuilds the index in recovery.
        markers = {h.base_offset for _, h in new.scan(0) if h.is_control}
        new.txn_index.rewrite([t for t in carried if t.last_offset in markers])
        self._segments[i : i + len(sources)] = [new]
        self._bases[i : i + len(sources)] = [base]
        self._dir_version += 1
        return True
