"""The producer state of one partition log on disk: its snapshot files, and the state rebuilt
from the latest usable snapshot plus the batch headers after it (with the aborted-transaction
index of the replayed segments, when recovery asks for it).

The state itself (``log.producer_state.ProducerStateManager``) is what appends check and
update; ``ProducerLog`` keeps the files that let an open skip most of the replay. A snapshot
``<offset>.snapshot`` holds the state just before ``offset``; one is taken at every roll and at
the close.
"""

from __future__ import annotations

import os
from pathlib import Path

from log import _records
from log.log_state import DirSync
from log.producer_state import (
    CompletedTxn,
    CorruptSnapshotError,
    ProducerStateManager,
    read_snapshot,
    snapshot_file_name,
    write_snapshot,
)
from log.segment_list import SegmentList
from log.txn_index import AbortedTxn
from protocol.records import LOG_OVERHEAD

__all__ = ["ProducerLog", "aborted_entry", "control_of", "control_or_none"]


class ProducerLog:
    """The producer state of a partition log and the offsets of its snapshot files."""

    def __init__(self, dir: Path, state: ProducerStateManager, dir_sync: DirSync) -> None:
        self.dir = dir
        self.state = state
        self.snapshots: set[int] = set()
        self._dir_sync = dir_sync

    def take_snapshot(self, offset: int, *, sync: bool = False) -> None:
        """Write the state as of ``offset`` (unless a snapshot there exists); without ``sync``
        the next flush fsyncs it."""
        if offset in self.snapshots:
            return
        path = self.dir / snapshot_file_name(offset)
        write_snapshot(path, self.state.producers.values(), sync=sync)
        self.snapshots.add(offset)
        if sync:
            self._dir_sync.changed()
        else:
            self._dir_sync.wrote(path)

    def delete_snapshot(self, offset: int) -> None:
        self.snapshots.discard(offset)
        try:
            os.unlink(self.dir / snapshot_file_name(offset))
        except FileNotFoundError:
            pass

    def delete_all_snapshots(self) -> None:
        for off in list(self.snapshots):
            self.delete_snapshot(off)

    def load(self, segments: SegmentList, end_offset: int, now_ms: int,
             rebuild_txn_index_from: int | None = None) -> None:
        """The state from the latest usable snapshot plus the batches after it. With
        ``rebuild_txn_index_from``, the .txnindex of the segments from that offset on is
        rebuilt on the way (snapshots after it are not trusted)."""
        ps = self.state
        limit = end_offset if rebuild_txn_index_from is None else min(end_offset, rebuild_txn_index_from)
        for off in sorted(self.snapshots):
            if off > limit:
                self.delete_snapshot(off)
        loaded_at: int | None = None
        for off in sorted(self.snapshots, reverse=True):
            try:
                entries = read_snapshot(self.dir / snapshot_file_name(off))
            except (CorruptSnapshotError, OSError):
                self.delete_snapshot(off)
                continue
            ps.load_entries(entries, off)
            loaded_at = off
            break
        first_base = segments.base_offset
        if loaded_at is None or loaded_at < first_base:
            if loaded_at is None:
                ps.clear(first_base)
            loaded_at = first_base
        if rebuild_txn_index_from is not None:
            for seg in segments:
                if seg.base_offset >= rebuild_txn_index_from:
                    seg.txn_index.reset()
        self._replay(segments, loaded_at, rebuild_txn_index_from)
        ps.map_end_offset = end_offset
        ps.remove_expired(now_ms)

    def reload(self, segments: SegmentList, end_offset: int, now_ms: int) -> None:
        """After a truncation: the state as of the new end (from a snapshot below it)."""
        self.state.clear(segments.base_offset)
        self.load(segments, end_offset, now_ms)

    def _replay(self, segments: SegmentList, offset: int, txn_index_from: int | None) -> None:
        ps = self.state
        active = segments.active
        for seg in segments.from_offset(offset):
            start = seg.offset_index.lookup(offset)[1] if seg.base_offset <= offset else 0
            index_aborts = txn_index_from is not None and seg.base_offset >= txn_index_from
            for pos, h in seg.scan(start):
                if h.base_offset + h.last_offset_delta < offset:
                    continue
                control = None
                if h.is_control and h.producer_id >= 0:
                    control = control_of(seg.file().pread(h.batch_length + LOG_OVERHEAD, pos))
                completed = ps.replay(h, control)
                if completed is not None and completed.is_aborted and index_aborts:
                    seg.txn_index.append(aborted_entry(completed, ps))
            if seg is not active:
                seg.release()


def aborted_entry(txn: CompletedTxn, ps: ProducerStateManager) -> AbortedTxn:
    """The .txnindex entry of an aborted transaction whose marker was just applied to ``ps``."""
    return AbortedTxn(
        txn.producer_id, txn.first_offset, txn.last_offset, ps.last_stable_offset_after(txn)
    )


def control_of(data: bytes) -> tuple[int, int] | None:
    """(control type, coordinator epoch) of a control batch's record; None if unreadable."""
    try:
        return _records.control_record(data)
    except (ValueError, IndexError, OSError, RuntimeError):
        return None


def control_or_none(view: memoryview) -> tuple[int | None, int | None]:
    info = control_of(bytes(view))
    if info is None:
        return None, None
    return info
