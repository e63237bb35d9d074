"""Opening a partition log: completion of an interrupted segment swap, the segments opened
(trusted ones by their indexes, the rest recovered batch by batch), the leader epoch cache
and the producer state rebuilt, the offsets set. ``LogLoader.load`` returns the pieces a
``PartitionLog`` is composed of (``LoadedLog``); ``sync_recovered`` makes what recovery
rewrote durable.
"""

from __future__ import annotations

import bisect
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from log.checkpoint import fsync_dir
from log.config import LogConfig
from log.layout import STRAY_SUFFIXES, SWAP_SUFFIX
from log.leader_epoch import LeaderEpochCache
from log.log_state import DirSync, LogOffsets
from log.producer_log import ProducerLog
from log.producer_state import SNAPSHOT_SUFFIX, ProducerStateManager
from log.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    scan_file,
    segment_file_name,
)
from log.segment_list import SegmentList
from log.txn_index import TXN_INDEX_SUFFIX, CorruptTxnIndexError
from protocol.records import BatchHeader

__all__ = ["LogLoader", "LoadedLog", "sync_recovered"]

logger = logging.getLogger(__name__)


@dataclass
class LoadedLog:
    """What an open found: the parts a ``PartitionLog`` is made of."""

    segments: SegmentList
    offsets: LogOffsets
    dir_sync: DirSync
    epochs: LeaderEpochCache
    producers: ProducerLog
    #: the first offset recovery rewrote while that is not fsynced yet (``defer_sync``)
    recovered_from: int | None


class LogLoader:
    """Opens the partition directory ``dir``."""

    def __init__(self, dir: Path, config: LogConfig, now_ms: int) -> None:
        self.dir = dir
        self.config = config
        self.now_ms = now_ms

    def load(
        self,
        clean: bool,
        recovery_point: int | None,
        log_start_offset: int | None,
        high_watermark: int | None,
        defer_sync: bool = False,
    ) -> LoadedLog:
        """``defer_sync``: what recovery rewrote is not fsynced here; the caller makes it
        durable before serving (``sync_recovered``, or one ``syncfs`` for many logs)."""
        dir_sync = DirSync(self.dir)
        producers = ProducerLog(
            self.dir, ProducerStateManager(self.config.producer_id_expiration_ms), dir_sync)
        listing = list(os.scandir(self.dir))  # one listing for both, unless a swap changes it
        swapped = self._complete_swaps(listing)
        bases = self._scan_dir(None if swapped else listing, producers.snapshots)
        found, recovered_from = self._open_segments(bases, clean, recovery_point, swapped)
        if not found:
            found = [LogSegment.create(self.dir, max(log_start_offset or 0, 0), self.config,
                                       self.now_ms)]
            dir_sync.changed()
        segments = SegmentList(self.dir, self.config, self.now_ms, dir_sync, found)
        offsets = LogOffsets()
        active = segments.active
        nxt = active.read_next_offset()
        offsets.end = nxt if nxt is not None else active.base_offset
        active.open_for_append()
        offsets.start = min(max(log_start_offset or 0, segments.base_offset), offsets.end)
        epochs = self._load_epochs(segments, offsets, recovered_from)
        producers.load(segments, offsets.end, self.now_ms,
                       _txn_index_rebuild_from(segments, recovered_from))
        if recovered_from is not None:
            _mark_recovered_synced(segments, recovered_from)
            if not defer_sync:
                sync_recovered(segments, recovered_from)
                recovered_from = None
        segments.release_inactive()
        dir_sync.synced_version = dir_sync.version
        offsets.flushed = (offsets.end, offsets.generation)
        hw = offsets.end if high_watermark is None else high_watermark
        offsets.hw = max(offsets.start, min(hw, offsets.end))
        return LoadedLog(segments, offsets, dir_sync, epochs, producers, recovered_from)

    def _scan_dir(self, listing: list[os.DirEntry[str]] | None, snapshots: set[int]) -> list[int]:
        """The base offsets of the segments in the directory (sorted); deletes leftovers
        (stray temporary files, indexes without a log file) and notes the snapshots."""
        bases: list[int] = []
        index_files: list[tuple[int, Path]] = []
        for entry in listing if listing is not None else os.scandir(self.dir):
            name = entry.name
            if name.endswith(STRAY_SUFFIXES):
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
                snapshots.add(int(stem))
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
        segments = [LogSegment(self.dir, b, self.config, self.now_ms) for b in bases]
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

    def _load_epochs(self, segments: SegmentList, offsets: LogOffsets,
                     recovered_from: int | None) -> LeaderEpochCache:
        """Leader epochs: the checkpoint, trimmed to the log; the recovered range rebuilt from
        the batch headers."""
        epochs = LeaderEpochCache.load(self.dir)
        epochs.truncate_from_end(offsets.end, persist=False)
        if epochs.corrupt:  # torn by a crash (written in place, see assign_leader_epoch)
            logger.warning("%s: leader-epoch-checkpoint is corrupt; rebuilding it from the "
                           "batches", self.dir.name)
            recovered_from = offsets.start
        if recovered_from is not None:
            for h in _headers_from(segments, recovered_from):
                latest = epochs.latest_epoch()
                if h.partition_leader_epoch >= 0 and (latest is None or h.partition_leader_epoch > latest):
                    epochs.assign(h.partition_leader_epoch, h.base_offset, persist=False)
        epochs.truncate_from_start(offsets.start, persist=False)
        # not written here: what was dropped or rebuilt is dropped or rebuilt the same way at
        # the next open; the next leadership or the close writes the file
        return epochs

    def _complete_swaps(self, listing: list[os.DirEntry[str]]) -> list[int]:
        """Finish a segment replacement (log cleaner) interrupted by a crash.

        ``<base>.log.swap`` exists only once the cleaned segment is complete and fsynced (its
        rename is the commit point, see ``log.log_swap``): delete the segments it replaces
        (base offsets in [base, its next offset)) and rename it into place. Its indexes are
        rebuilt by the recovery that follows. Without a ``.log.swap`` the old segments are
        intact and the leftovers (``.cleaned``, index ``.swap``) are deleted by the caller.
        Returns the base offsets of the swapped-in segments.
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
            self._complete_swap(base)
        fsync_dir(self.dir)
        return swaps

    def _complete_swap(self, base: int) -> None:
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


def sync_recovered(segments: SegmentList, recovered_from: int) -> None:
    """fsync what recovery rewrote (cut files, rebuilt indexes) from ``recovered_from`` on."""
    for seg in segments:
        if seg.base_offset >= recovered_from:
            os.fsync(seg.file().fd)
            seg.fsync_indexes()
    fsync_dir(segments.dir)


def _mark_recovered_synced(segments: SegmentList, recovered_from: int) -> None:
    for seg in segments:
        if seg.base_offset >= recovered_from:
            seg.mark_synced(seg.version)


def _txn_index_rebuild_from(segments: SegmentList, recovered_from: int | None) -> int | None:
    """The aborted-transaction index needs the producer state as of each segment's start, so
    it is rebuilt while the producer state is replayed: from the first recovered segment, or
    from the first segment whose .txnindex is unreadable."""
    txn_from = recovered_from
    for seg in segments:
        if txn_from is not None and seg.base_offset >= txn_from:
            break
        try:
            seg.txn_index.entries()
        except CorruptTxnIndexError:
            txn_from = seg.base_offset
    return txn_from


def _headers_from(segments: SegmentList, offset: int) -> list[BatchHeader]:
    """Headers of all batches whose last offset is >= ``offset`` (recovery only)."""
    out: list[BatchHeader] = []
    for seg in segments.from_offset(offset):
        start = seg.offset_index.lookup(offset)[1] if seg.base_offset <= offset else 0
        for _pos, h in seg.scan(start):
            if h.base_offset + h.last_offset_delta >= offset:
                out.append(h)
    return out


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
