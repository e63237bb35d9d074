"""The state of one partition's log and what every job on it shares (see ``partition_log``).

``LogCore`` holds the segments, offsets, producer state, leader epoch cache and flush
bookkeeping of a partition log, and the operations several jobs need: segment rolling and
producer snapshots, the small cache of open segment files, producer state replay, flushing and
closing. ``PartitionLog`` adds the jobs, one module each: ``log_recovery`` (opening),
``log_append``, ``log_read``, ``log_retention`` (truncation, DeleteRecords, retention) and
``log_swap`` (the cleaner's results). The design and the threading rules are in
``log.partition_log``'s docstring.
"""

from __future__ import annotations

import bisect
import logging
import os
import re
import shutil
import struct
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, cast

from log import _records
from log.checkpoint import CorruptCheckpointError, fsync_dir, read_offsets_checkpoint
from log.config import LogConfig
from log.leader_epoch import LeaderEpochCache
from log.producer_state import (
    CompletedTxn,
    CorruptSnapshotError,
    ProducerStateManager,
    read_snapshot,
    snapshot_file_name,
    write_snapshot,
)
from log.segment import LogSegment, SegmentFile
from log.txn_index import AbortedTxn
from protocol.records import LOG_OVERHEAD

__all__ = ["LogCore", "AppendInfo", "ReadResult", "FileRange", "FlushJob", "OffsetAndTimestamp", "SegmentInfo", "CLEAN_SHUTDOWN_FILE", "RECOVERY_POINT_CHECKPOINT", "LOG_START_OFFSET_CHECKPOINT", "REPLICATION_OFFSET_CHECKPOINT", "CLEANED_SUFFIX", "SWAP_SUFFIX", "parse_partition_dir_name", "partition_dir_name", "parse_log_dir_name", "suffixed_dir_name", "FUTURE_DIR_SUFFIX", "DELETE_DIR_SUFFIX", "STRAY_DIR_SUFFIX"]

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
_STRAY_SUFFIXES = (".tmp", ".deleted", CLEANED_SUFFIX, SWAP_SUFFIX)
_OFFSET_LENGTH_EPOCH = struct.Struct(">qii")
logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from log.partition_log import PartitionLog


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir_name(name: str) -> tuple[str, int] | None:
    """``<topic>-<partition>``: the partition follows the LAST '-' (topics may contain '-')."""
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit() or not part.isascii():
        return None
    return topic, int(part)


#: Kafka's suffixes of a partition directory that is not (yet, or any more) the partition's log:
#: ``<topic>-<partition>.<32 hex digits><suffix>`` (``UnifiedLog.logDirNameWithSuffix``)
FUTURE_DIR_SUFFIX = "-future"
DELETE_DIR_SUFFIX = "-delete"
STRAY_DIR_SUFFIX = "-stray"
_SUFFIXED = re.compile(r"^(.+)\.([0-9a-f]{32})(-future|-delete|-stray)$")


def suffixed_dir_name(topic: str, partition: int, unique_id: str, suffix: str) -> str:
    """``<topic>-<partition>.<unique id><suffix>`` (suffix ``-future`` etc.; the caller makes
    the id: 32 hex digits, a random UUID's as Kafka's)."""
    return f"{partition_dir_name(topic, partition)}.{unique_id}{suffix}"


def parse_log_dir_name(name: str) -> tuple[tuple[str, int], str] | None:
    """((topic, partition), suffix) of a partition directory, with or without a Kafka suffix
    (suffix "" for the partition's current log)."""
    m = _SUFFIXED.match(name)
    if m is not None:
        tp = parse_partition_dir_name(m.group(1))
        return (tp, m.group(3)) if tp is not None else None
    tp = parse_partition_dir_name(name)
    return (tp, "") if tp is not None else None


class AppendInfo(NamedTuple):
    first_offset: int
    last_offset: int
    #: the LogAppendTime given to the batches, -1 for CreateTime (for a duplicate: as Kafka,
    #: the stored timestamp of the original batch)
    log_append_time_ms: int
    log_start_offset: int
    #: True when the batch duplicated an earlier one: nothing was written
    duplicate: bool = False
    max_timestamp: int = -1
    size_bytes: int = 0
    completed_txns: tuple[CompletedTxn, ...] = ()


class FileRange(NamedTuple):
    """``length`` bytes at ``position`` of ``file``; keep the object alive while sending."""

    file: SegmentFile
    position: int
    length: int

    @property
    def fd(self) -> int:
        return self.file.fd

    @property
    def size(self) -> int:
        return self.length


@dataclass(slots=True)
class ReadResult:
    """Whole batches as file ranges. ``size`` makes it a ``protocol.primitives.External``."""

    ranges: list[FileRange]
    size: int
    first_offset: int  # base offset of the first batch returned, -1 when empty
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    #: where the read ended: (base offset of the last segment read, end position in it)
    end: tuple[int, int] | None = None

    def read_bytes(self) -> bytes:
        """The bytes themselves (tests, and transports without sendfile)."""
        out = bytearray()
        for r in self.ranges:
            pos, left = r.position, r.length
            while left:
                chunk = os.pread(r.fd, left, pos)
                if not chunk:
                    raise OSError(f"segment {r.file.path} shorter than expected")
                out += chunk
                pos += len(chunk)
                left -= len(chunk)
        return bytes(out)


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int


class SegmentInfo(NamedTuple):
    base_offset: int
    size_bytes: int
    max_timestamp: int
    path: Path


@dataclass(slots=True)
class FlushJob:
    """The fsync work of one flush. ``run`` may execute on a worker thread."""

    end_offset: int
    generation: int
    segments: list[tuple[LogSegment, int]] = field(default_factory=list)  # (segment, version)
    paths: list[Path] = field(default_factory=list)
    dir: Path | None = None
    dir_version: int = 0
    owner: LogCore | None = None
    #: the log directory holding a new partition directory (``defer_parent_sync``)
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
            if self.owner is not None and self.dir_version > self.owner._dir_synced_version:
                self.owner._dir_synced_version = self.dir_version
        if self.parent is not None:
            try:
                fsync_dir(self.parent)
            except FileNotFoundError:
                return



class LogCore:
    """The state of one partition log; see ``PartitionLog`` (create logs with its ``open``)."""

    def __init__(self, dir: Path, config: LogConfig, now_ms: int) -> None:
        self.dir = dir
        parsed = parse_log_dir_name(dir.name)
        self.topic, self.partition = parsed[0] if parsed else (dir.name, -1)
        self.config = config
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._leo = 0
        #: called (owning thread) when the high watermark, log start offset or recovery point
        #: may have changed: the log manager keeps its checkpoints' dirty sets with it
        self.offsets_listener: Callable[[LogCore], None] | None = None
        self._log_start_offset = 0
        self._hw_value = 0
        self.producer_state = ProducerStateManager(config.producer_id_expiration_ms)
        self.leader_epochs = LeaderEpochCache(None)
        self._lru: OrderedDict[int, LogSegment] = OrderedDict()
        self._now_ms = now_ms
        # flush bookkeeping (see the module docstring for who writes what)
        self._generation = 0  # bumped by truncation
        self._flushed_value = (0, 0)  # (offset made durable, generation it was made in)
        self._rp_floor_value = 0  # recovery point right after the last truncation
        self._unsynced_paths: deque[Path] = deque()
        #: the epoch cache holds an entry not written to its file yet (assign_leader_epoch)
        self._epochs_unwritten = False
        #: the log directory's entry for this log is not fsynced yet (``defer_parent_sync``)
        self._parent_unsynced = False
        #: first offset recovery rewrote, while that is not fsynced yet (``_load``)
        self._recovered_from: int | None = None
        self._dir_version = 0
        self._dir_synced_version = 0
        self._snapshots: set[int] = set()
        self._closed = False
        self._reported_corrupt: set[tuple[int, int]] = set()
        #: called (on the owning thread) after every roll; the broker uses it to fsync the
        #: finished segment soon, as Kafka does, so the recovery point keeps up.
        self.roll_listener: Callable[[PartitionLog], None] | None = None
        #: wall-clock time of the last completed flush, kept by the broker's flusher
        self.last_flush_ms = now_ms

    @property
    def log_end_offset(self) -> int:
        return self._leo

    # The four fields the offset checkpoints are made of: every assignment tells the listener,
    # so a checkpoint rewrites only what changed (and nothing when nothing did).
    def _offsets_changed(self) -> None:
        if self.offsets_listener is not None:
            self.offsets_listener(self)

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @log_start_offset.setter
    def log_start_offset(self, value: int) -> None:
        if value != self._log_start_offset:
            self._log_start_offset = value
            self._offsets_changed()

    @property
    def _hw(self) -> int:
        return self._hw_value

    @_hw.setter
    def _hw(self, value: int) -> None:
        if value != self._hw_value:
            self._hw_value = value
            self._offsets_changed()

    @property
    def _flushed(self) -> tuple[int, int]:
        return self._flushed_value

    @_flushed.setter
    def _flushed(self, value: tuple[int, int]) -> None:
        if value != self._flushed_value:
            self._flushed_value = value
            self._offsets_changed()

    @property
    def _rp_floor(self) -> int:
        return self._rp_floor_value

    @_rp_floor.setter
    def _rp_floor(self, value: int) -> None:
        if value != self._rp_floor_value:
            self._rp_floor_value = value
            self._offsets_changed()

    @property
    def high_watermark(self) -> int:
        return self._hw_value

    @property
    def recovery_point(self) -> int:
        """Everything below this offset is durable (fsynced)."""
        off, gen = self._flushed
        return off if gen == self._generation else self._rp_floor

    @property
    def last_stable_offset(self) -> int:
        """The high watermark, or the first offset of the oldest open transaction if lower.

        (Kafka also holds the LSO below a transaction whose marker is not yet below the high
        watermark; a single replica moves the high watermark with every append, markers
        included, so that case does not arise here.)"""
        first = self.producer_state.first_undecided_offset()
        return self._hw if first is None else min(first, self._hw)

    @property
    def unflushed_messages(self) -> int:
        """Offsets appended but not yet covered by a flush (Kafka's ``unflushedMessages``)."""
        return self._leo - self.recovery_point

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def segments(self) -> list[SegmentInfo]:
        return [SegmentInfo(s.base_offset, s.size, s.max_timestamp, s.log_path) for s in self._segments]

    @property
    def first_segment_base_offset(self) -> int:
        return self._segments[0].base_offset

    @property
    def active_segment_base_offset(self) -> int:
        return self._segments[-1].base_offset

    @property
    def generation(self) -> int:
        """Bumped by every truncation: work planned against an older one is stale."""
        return self._generation

    @property
    def closed(self) -> bool:
        return self._closed

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark (clamped to [log start, log end]); returns the value kept."""
        self._hw = max(self.log_start_offset, min(offset, self._leo))
        return self._hw

    def epoch_for_offset(self, offset: int) -> int | None:
        return self.leader_epochs.epoch_for_offset(offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch answer: (epoch, end offset), (-1, -1) when unknown."""
        return self.leader_epochs.end_offset_for(epoch, self._leo)

    def roll(self, now_ms: int | None = None) -> None:
        """Start a new segment at the log end offset (no-op if the active one is empty)."""
        self._roll_now(self._now_ms if now_ms is None else now_ms)

    def _roll_now(self, now_ms: int) -> LogSegment:
        active = self._segments[-1]
        if active.size == 0:
            return active
        active.finalize()
        self._take_snapshot(self._leo, sync=False)
        seg = LogSegment.create(self.dir, self._leo, self.config, now_ms)
        seg.open_for_append()
        self._segments.append(seg)
        self._bases.append(seg.base_offset)
        self._dir_version += 1
        self._touch(active)
        if self.roll_listener is not None:
            self.roll_listener(cast("PartitionLog", self))
        return seg

    def _take_snapshot(self, offset: int, *, sync: bool) -> None:
        if offset in self._snapshots:
            return
        path = self.dir / snapshot_file_name(offset)
        write_snapshot(path, self.producer_state.producers.values(), sync=sync)
        self._snapshots.add(offset)
        self._dir_version += 1
        if not sync:
            self._unsynced_paths.append(path)

    def _delete_snapshot(self, offset: int) -> None:
        self._snapshots.discard(offset)
        _unlink(self.dir / snapshot_file_name(offset))

    def _touch(self, seg: LogSegment) -> None:
        """Keep ``seg``'s file among the few open ones (the active segment is always open)."""
        if self._segments and seg is self._segments[-1]:
            return
        lru = self._lru
        lru[seg.base_offset] = seg
        lru.move_to_end(seg.base_offset)
        while len(lru) > self.config.open_segment_files_max:
            _, old = lru.popitem(last=False)
            if old is not self._segments[-1]:
                old.release()

    def _forget(self, seg: LogSegment) -> None:
        if self._lru.get(seg.base_offset) is seg:
            del self._lru[seg.base_offset]

    def _next_base(self, i: int) -> int | None:
        return self._segments[i + 1].base_offset if i + 1 < len(self._segments) else None

    def _segment_index(self, offset: int) -> int:
        return max(0, bisect.bisect_right(self._bases, offset) - 1)

    def _load_producer_state(self, rebuild_txn_index_from: int | None = None) -> None:
        """Producer state from the latest usable snapshot plus the batches after it. With
        ``rebuild_txn_index_from``, the .txnindex of the segments from that offset on is
        rebuilt on the way (snapshots after it are not trusted)."""
        ps = self.producer_state
        leo = self._leo
        limit = leo if rebuild_txn_index_from is None else min(leo, rebuild_txn_index_from)
        for off in sorted(self._snapshots):
            if off > limit:
                self._delete_snapshot(off)
        loaded_at: int | None = None
        for off in sorted(self._snapshots, reverse=True):
            try:
                entries = read_snapshot(self.dir / snapshot_file_name(off))
            except (CorruptSnapshotError, OSError):
                self._delete_snapshot(off)
                continue
            ps.load_entries(entries, off)
            loaded_at = off
            break
        first_base = self._segments[0].base_offset
        if loaded_at is None or loaded_at < first_base:
            if loaded_at is None:
                ps.clear(first_base)
            loaded_at = first_base
        if rebuild_txn_index_from is not None:
            for seg in self._segments:
                if seg.base_offset >= rebuild_txn_index_from:
                    seg.txn_index.reset()
        self._replay_producers(loaded_at, rebuild_txn_index_from)
        ps.map_end_offset = leo
        ps.remove_expired(self._now_ms)

    def _replay_producers(self, offset: int, txn_index_from: int | None = None) -> None:
        ps = self.producer_state
        i = max(0, bisect.bisect_right(self._bases, offset) - 1)
        for seg in self._segments[i:]:
            start = seg.offset_index.lookup(offset)[1] if seg.base_offset <= offset else 0
            index_aborts = txn_index_from is not None and seg.base_offset >= txn_index_from
            for pos, h in seg.scan(start):
                if h.base_offset + h.last_offset_delta < offset:
                    continue
                control = None
                if h.is_control and h.producer_id >= 0:
                    control = _control_of(seg.file().pread(h.batch_length + LOG_OVERHEAD, pos))
                completed = ps.replay(h, control)
                if completed is not None and completed.is_aborted and index_aborts:
                    seg.txn_index.append(_aborted(completed, ps))
            if seg is not self._segments[-1]:
                seg.release()

    def prepare_flush(self) -> FlushJob:
        """Collect what needs an fsync. Safe on the flusher thread (see module docstring)."""
        job = FlushJob(self._leo, self._generation, owner=self)  # the end offset FIRST
        for seg in list(self._segments):
            version = seg.version
            if version != seg.synced_version:
                job.segments.append((seg, version))
        paths = self._unsynced_paths
        while True:
            try:
                job.paths.append(paths.popleft())
            except IndexError:
                break
        dir_version = self._dir_version
        if dir_version != self._dir_synced_version:
            job.dir = self.dir
            job.dir_version = dir_version
        if self._parent_unsynced:
            self._parent_unsynced = False
            job.dir = self.dir
            job.parent = self.dir.parent
        return job

    def defer_parent_sync(self) -> None:
        """A new log whose creation did not fsync the log directory holding it: its first
        flush (a worker thread's, ``kafkawire.log_flusher``) makes the directory entry durable
        with the rest, instead of an fsync on the event loop at creation."""
        self._parent_unsynced = True

    def mark_dir_synced(self, dir_version: int) -> None:
        """The directory's entries up to ``dir_version`` were made durable (``syncfs``)."""
        if dir_version > self._dir_synced_version:
            self._dir_synced_version = dir_version

    def complete_flush(self, job: FlushJob) -> None:
        """Record a finished FlushJob: advance ``recovery_point``."""
        if job.generation != self._generation:
            return  # truncated meanwhile: the flushed bytes may no longer be the log's
        off, gen = self._flushed
        previous = off if gen == job.generation else self._rp_floor
        self._flushed = (max(previous, job.end_offset), job.generation)

    def flush(self) -> None:
        """fsync everything written so far. One worker thread may call this while the owning
        thread appends (see the module docstring)."""
        job = self.prepare_flush()
        job.run()
        self.complete_flush(job)

    @property
    def dirty(self) -> bool:
        return self.recovery_point < self._leo or any(
            s.version != s.synced_version for s in self._segments
        )

    def expire_producers(self, now_ms: int) -> list[int]:
        """Forget producers idle longer than ``producer.id.expiration.ms``."""
        return self.producer_state.remove_expired(now_ms)

    def assign_leader_epoch(self, epoch: int, start_offset: int) -> bool:
        """A new leader epoch starts at ``start_offset`` (becoming leader). The checkpoint is
        written at the first append after it (in place) and fsynced by the next flush, or
        written by the close. Kafka writes and fsyncs it at once, but an entry that starts at
        the log end is dropped again by every open (``truncate_from_end``, Kafka's too), so
        until a batch follows it there is nothing worth a write; a torn file reads as corrupt
        and is rebuilt from the batches. True when the cache changed."""
        changed = self.leader_epochs.assign(epoch, start_offset, persist=False)
        if changed:
            self._epochs_unwritten = True
        return changed

    def _flush_epochs_lazily(self) -> None:
        self._epochs_unwritten = False
        if self.leader_epochs.flush(sync=False) and self.leader_epochs.path is not None:
            self._unsynced_paths.append(self.leader_epochs.path)
            self._dir_version += 1

    def close(self) -> None:
        """Write clean state: final time index entry, producer snapshot, fsync everything."""
        job = self.close_unsynced()
        if job is not None:
            job.run()
            self.complete_flush(job)
            self.release_files()

    def close_unsynced(self) -> FlushJob | None:
        """:meth:`close` without the fsyncs: everything is written and the returned job
        names what must be made durable. The caller runs it, or makes the whole file system
        durable at once (``syncfs``: one call for thousands of logs), then passes it to
        :meth:`complete_flush` and calls :meth:`release_files`. None when already closed."""
        if self._closed:
            return None
        active = self._segments[-1]
        active.finalize()
        self._take_snapshot(self._leo, sync=False)
        self._flush_epochs_lazily()
        job = self.prepare_flush()
        job.dir = self.dir
        self._lru.clear()
        self._closed = True
        return job

    def release_files(self) -> None:
        """Drop the handles and indexes a closed log still holds (after its last flush)."""
        for seg in self._segments:
            seg.release()

    def detach(self) -> None:
        """Drop every handle and index and mark the log closed, leaving its files as they are
        (the directory is about to be renamed away and deleted: a replaced replica)."""
        for seg in self._segments:
            seg.offset_index.close_writer()
            seg.time_index.close_writer()
            seg.release()
        self._lru.clear()
        self._closed = True

    def delete(self) -> None:
        """Remove the partition directory and everything in it."""
        self.detach()
        shutil.rmtree(self.dir, ignore_errors=True)
        try:
            fsync_dir(self.dir.parent)
        except FileNotFoundError:
            pass

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self.dir.name}, start={self.log_start_offset}, "
            f"leo={self._leo}, hw={self._hw}, segments={len(self._segments)})"
        )


# -- helpers ---------------------------------------------------------------------------------------

def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _checkpointed(path: Path, key: tuple[str, int]) -> int | None:
    try:
        offsets = read_offsets_checkpoint(path)
    except CorruptCheckpointError:
        return None
    return None if offsets is None else offsets.get(key)


def _largest_timestamp(seg: LogSegment) -> int:
    if seg.max_timestamp >= 0:
        return seg.max_timestamp
    try:
        return os.stat(seg.log_path).st_mtime_ns // 1_000_000
    except FileNotFoundError:
        return 0


def _aborted(txn: CompletedTxn, ps: ProducerStateManager) -> AbortedTxn:
    """The .txnindex entry of an aborted transaction whose marker was just applied to ``ps``."""
    return AbortedTxn(
        txn.producer_id, txn.first_offset, txn.last_offset, ps.last_stable_offset_after(txn)
    )


def _control_of(data: bytes) -> tuple[int, int] | None:
    try:
        return _records.control_record(data)
    except (ValueError, IndexError, OSError, RuntimeError):
        return None


def _control_or_none(view: memoryview) -> tuple[int | None, int | None]:
    info = _control_of(bytes(view))
    if info is None:
        return None, None
    return info

