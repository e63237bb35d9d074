"""Opening a partition log: recovery of an unclean shutdown, completion of an interrupted segment
swap, the leader epoch cache rebuilt from batch headers.

Part of ``PartitionLog`` (see ``log.partition_log`` for the design; ``log.log_core`` holds
the state every part shares).
"""

from __future__ import annotations

import bisect
import os
from pathlib import Path

from log.checkpoint import fsync_dir
from log.leader_epoch import LeaderEpochCache
from log.log_core import _STRAY_SUFFIXES, SWAP_SUFFIX, LogCore, _unlink, logger
from log.producer_state import SNAPSHOT_SUFFIX
from log.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    scan_file,
    segment_file_name,
)
from log.txn_index import TXN_INDEX_SUFFIX, CorruptTxnIndexError
from protocol.records import BatchHeader

__all__ = ["LogRecovery"]


class LogRecovery(LogCore):
    def _load(
        self,
        clean: bool,
        recovery_point: int | None,
        log_start_offset: int | None,
        high_watermark: int | None,
        defer_sync: bool = False,
    ) -> None:
        """``defer_sync``: what recovery rewrote is not fsynced here; the caller makes it
        durable before serving (:meth:`sync_recovered`, or one ``syncfs`` for many logs) when
        :attr:`recovered_unsynced` is set."""
        listing = list(os.scandir(self.dir))  # one listing for both, unless a swap changes it
        swapped = self._complete_swaps(listing)
        bases = self._scan_dir(None if swapped else listing)
        segments, recovered_from = self._open_segments(bases, clean, recovery_point, swapped)
        if not segments:
            first = max(log_start_offset or 0, 0)
            segments = [LogSegment.create(self.dir, first, self.config, self._now_ms)]
            self._dir_version += 1
        self._segments = segments
        self._bases = [s.base_offset for s in segments]

        active = segments[-1]
        nxt = active.read_next_offset()
        self._leo = nxt if nxt is not None else active.base_offset
        active.open_for_append()

        start = max(log_start_offset or 0, segments[0].base_offset)
        self.log_start_offset = min(start, self._leo)
        self._load_epochs(recovered_from)
        self._load_producer_state(self._txn_index_rebuild_from(recovered_from))
        if recovered_from is not None:
            self._recovered_from = recovered_from
            self._mark_recovered_synced()
            if not defer_sync:
                self.sync_recovered()
        for seg in self._segments[:-1]:
            seg.release()
        self._dir_synced_version = self._dir_version
        self._flushed = (self._leo, self._generation)
        hw = self._leo if high_watermark is None else high_watermark
        self._hw = max(self.log_start_offset, min(hw, self._leo))

    @property
    def recovered_unsynced(self) -> bool:
        """Recovery rewrote files that were not fsynced yet (``defer_sync``)."""
        return self._recovered_from is not None

    def sync_recovered(self, *, fsync: bool = True) -> None:
        """Make the recovered state (cut files, rebuilt indexes) durable before trusting it
        (``fsync=False``: the caller did, with a ``syncfs``)."""
        recovered_from = self._recovered_from
        if recovered_from is None or not fsync:
            self._recovered_from = None
            return
        for seg in self._segments:
            if seg.base_offset >= recovered_from:
                os.fsync(seg.file().fd)
                seg.fsync_indexes()
        fsync_dir(self.dir)
        self._recovered_from = None

    def _mark_recovered_synced(self) -> None:
        for seg in self._segments:
            if self._recovered_from is not None and seg.base_offset >= self._recovered_from:
                seg.mark_synced(seg.version)

    def _scan_dir(self, listing: list[os.DirEntry[str]] | None = None) -> list[int]:
        """The base offsets of the segments in the directory (sorted); deletes leftovers
        (stray temporary files, indexes without a log file) and notes the snapshots."""
        bases: list[int] = []
        index_files: list[tuple[int, Path]] = []
        for entry in listing if listing is not None else os.scandir(self.dir):
            name = entry.name
            if name.endswith(_STRAY_SUFFIXES):
                _unlink(Path(entry.path))
                continue
            stem, dot, suffix = name.partition(".")
            if not dot or not stem.isdigit() or len(stem) != 20:
                continue
            if "." + suffix == LOG_SUFFIX:
                bases.append(int(stem))
            elif "." + suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                index_files.append((int(stem), Path(entry.path)))
            elif "." + suffix == SNAPSHOT_SUFFIX:
                self._snapshots.add(int(stem))
        bases.sort()
        known = set(bases)
        for base, p in index_files:  # indexes without a log file are leftovers
            if base not in known:
                _unlink(p)
        return bases

    def _open_segments(
        self, bases: list[int], clean: bool, recovery_point: int | None, swapped: list[int]
    ) -> tuple[list[LogSegment], int | None]:
        """Open the segments: trusted ones by their indexes, the rest (from the one holding the
        recovery point, or a swapped-in one) recovered batch by batch, cutting at the first bad
        batch and dropping the later segments. Returns them and where recovery started."""
        segments = [LogSegment(self.dir, b, self.config, self._now_ms) for b in bases]
        if not segments:
            return segments, None
        if clean:
            start_i = len(segments)  # nothing to recover
        else:
            rp = recovery_point if recovery_point is not None else 0
            start_i = max(0, bisect.bisect_right(bases, rp) - 1)
        if swapped:  # a segment swapped in at start-up is checked like unflushed data
            start_i = min(start_i, bisect.bisect_left(bases, min(swapped)))
        recovered_from: int | None = None
        for i, seg in enumerate(segments):
            if i < start_i:
                if not seg.load(trust_indexes=True):
                    seg.rebuild_indexes()
                seg.mark_unverified()
                continue
            if recovered_from is None:
                recovered_from = seg.base_offset
            result = seg.recover(seg.base_offset, bases[i + 1] if i + 1 < len(bases) else None)
            if result.truncated_bytes:
                later = segments[i + 1 :]
                logger.warning(
                    "%s: found invalid data in segment %s during recovery: %s; truncated "
                    "%d byte(s) from there%s",
                    self.dir.name, seg.log_path.name, result.reason, result.truncated_bytes,
                    f" and deleted {len(later)} later segment(s)" if later else "",
                )
                for seg_later in later:
                    seg_later.delete_files()
                del segments[i + 1 :]
                break
        return segments, recovered_from

    def _load_epochs(self, recovered_from: int | None) -> None:
        """Leader epochs: the checkpoint, trimmed to the log; the recovered range rebuilt from
        the batch headers."""
        self.leader_epochs = LeaderEpochCache.load(self.dir)
        epochs = self.leader_epochs
        epochs.truncate_from_end(self._leo, persist=False)
        if epochs.corrupt:  # torn by a crash (written in place, see assign_leader_epoch)
            logger.warning("%s: leader-epoch-checkpoint is corrupt; rebuilding it from the "
                           "batches", self.dir.name)
            recovered_from = self.log_start_offset
        if recovered_from is not None:
            for _, h in self._headers_from(recovered_from):
                latest = epochs.latest_epoch()
                if h.partition_leader_epoch >= 0 and (latest is None or h.partition_leader_epoch > latest):
                    epochs.assign(h.partition_leader_epoch, h.base_offset, persist=False)
        epochs.truncate_from_start(self.log_start_offset, persist=False)
        # not written here: what was dropped or rebuilt is dropped or rebuilt the same way at
        # the next open; the next leadership or the close writes the file

    def _txn_index_rebuild_from(self, recovered_from: int | None) -> int | None:
        """The aborted-transaction index needs the producer state as of each segment's start,
        so it is rebuilt while the producer state is replayed: from the first recovered
        segment, or from the first segment whose .txnindex is unreadable."""
        txn_from = recovered_from
        for seg in self._segments:
            if txn_from is not None and seg.base_offset >= txn_from:
                break
            try:
                seg.txn_index.entries()
            except CorruptTxnIndexError:
                txn_from = seg.base_offset
        return txn_from

    def _complete_swaps(self, listing: list[os.DirEntry[str]]) -> list[int]:
        """Finish a segment replacement (log cleaner) interrupted by a crash.

        ``<base>.log.swap`` exists only once the cleaned segment is complete and fsynced (its
        rename is the commit point, see :meth:`replace_segments`): delete the segments it
        replaces (base offsets in [base, its next offset)) and rename it into place. Its
        indexes are rebuilt by the recovery that follows. Without a ``.log.swap`` the old
        segments are intact and the leftovers (``.cleaned``, index ``.swap``) are deleted by
        the caller. Returns the base offsets of the swapped-in segments.
        """
        swaps: list[int] = []
        for entry in listing:
            name = entry.name
            if name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
                stem = name[: -len(LOG_SUFFIX + SWAP_SUFFIX)]
                if stem.isdigit() and len(stem) == 20:
                    swaps.append(int(stem))
        if not swaps:
            return []
        swaps.sort()
        for base in swaps:
            swap_path = self.dir / (segment_file_name(base, LOG_SUFFIX) + SWAP_SUFFIX)
            fd = os.open(swap_path, os.O_RDONLY)
            try:
                end = base
                for _pos, h in scan_file(fd, 0, os.fstat(fd).st_size):
                    end = h.base_offset + h.last_offset_delta + 1
            finally:
                os.close(fd)
            logger.warning(
                "%s: completing an interrupted segment swap: %s replaces offsets [%d, %d)",
                self.dir.name, swap_path.name, base, end,
            )
            for entry in list(os.scandir(self.dir)):
                stem, dot, suffix = entry.name.partition(".")
                if not (dot and stem.isdigit() and len(stem) == 20) or suffix.endswith("swap"):
                    continue
                if base <= int(stem) < max(end, base + 1) and "." + suffix != SNAPSHOT_SUFFIX:
                    _unlink(Path(entry.path))
            for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                _unlink(self.dir / (segment_file_name(base, suffix) + SWAP_SUFFIX))
            os.replace(swap_path, self.dir / segment_file_name(base, LOG_SUFFIX))
        fsync_dir(self.dir)
        return swaps

    def _headers_from(self, offset: int) -> list[tuple[LogSegment, BatchHeader]]:
        """Headers of all batches whose last offset is >= ``offset`` (recovery only)."""
        out: list[tuple[LogSegment, BatchHeader]] = []
        i = max(0, bisect.bisect_right(self._bases, offset) - 1)
        for seg in self._segments[i:]:
            start = seg.offset_index.lookup(offset)[1] if seg.base_offset <= offset else 0
            for _pos, h in seg.scan(start):
                if h.base_offset + h.last_offset_delta >= offset:
                    out.append((seg, h))
        return out
