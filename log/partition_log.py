"""One partition's log: a directory of segments, the producer state, the leader epoch cache.

Layout (as Kafka's, so ``kafka-dump-log`` and friends read it)::

    <log dir>/<topic>-<partition>/
        00000000000000000000.log         concatenated v2 record batches
        00000000000000000000.index       offset index, 8-byte entries
        00000000000000000000.timeindex   time index, 12-byte entries
        00000000000000000000.txnindex    aborted transactions closed in this segment
        00000000000000001234.snapshot    producer state just before offset 1234
        leader-epoch-checkpoint          epoch -> first offset

Hot paths (see ARCHITECTURE.md section 3):

* ``append`` takes the client's buffer and the already parsed batch headers, assigns offsets by
  patching baseOffset / partitionLeaderEpoch in place (both outside the CRC), applies
  LogAppendTime header-only, checks the idempotent producer state and writes the bytes verbatim
  with one ``os.writev``. No loop over records, one Python loop over batches.
* ``read`` returns file ranges for ``os.sendfile``, located with the sparse offset index and a
  short forward scan of batch headers; a range always starts at the batch that CONTAINS the
  fetch offset and ends at a batch boundary.

Durability: writes go to the page cache. ``flush`` (= ``prepare_flush``, ``FlushJob.run``,
``complete_flush``) fsyncs what changed and then advances ``recovery_point``, the offset below
which everything is known durable. Opening after an unclean shutdown rescans every
segment from the one holding the recovery point: each batch is checked (header sanity and
CRC-32C), the file is cut at the first bad one, later segments are dropped, indexes are
rebuilt. A clean open reads only index summaries and the tail of the last segment.

Data that was on disk when the log was opened and that recovery did not scan (everything after
a clean shutdown, the segments below the recovery point otherwise) is CRC-checked the first
time ``read`` returns it; a bad batch is logged once and never returned (CORRUPT_MESSAGE when a
read starts at it). Appended and recovered bytes are known good and go straight to sendfile.

Retention (``delete_old_segments``) and DeleteRecords (``delete_records_before``) delete whole
segments and move the log start offset; the log cleaner (``log.cleaner``) rewrites closed
segments and ``replace_segments`` swaps each result in, crash-safely (``swap_steps``;
``_complete_swaps`` finishes an interrupted swap at open).

Threads (layer 1 has no locks and starts none): every method is meant for ONE thread, the
broker's event loop, except ``flush`` / ``prepare_flush`` / ``FlushJob.run`` /
``complete_flush``, which one worker thread may run while that thread keeps appending. This is
safe without a lock because each piece of state shared with the flusher has a single writer
(CPython's GIL makes the individual reads and writes atomic):

* segments carry a ``version`` that only the appending thread bumps and a ``synced_version``
  that only the flusher sets to the version it read before its fsyncs;
* the flusher reads the log end offset BEFORE collecting segments, so everything below that
  offset was written before it looked and is covered by its fsyncs;
* files created since the last flush (snapshots) are handed over through a deque; directory
  changes are a version pair like the segments';
* ``recovery_point`` is computed from ``(flushed offset, generation)`` (written by the flusher)
  and a floor written by truncation, which bumps the generation: a flush that began before a
  truncation can never move the recovery point past data that the truncation replaced.

Closing the log while a flush runs is not supported (stop the flusher first).
"""

from __future__ import annotations

import bisect
import logging
import os
import shutil
import struct
from collections import OrderedDict, deque
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import crc32c as _crc32c

from log import _records
from log.checkpoint import CorruptCheckpointError, fsync_dir, read_offsets_checkpoint
from log.config import LogConfig
from log.leader_epoch import LeaderEpochCache
from log.producer_state import (
    SNAPSHOT_SUFFIX,
    CompletedTxn,
    CorruptSnapshotError,
    ProducerAppend,
    ProducerStateManager,
    read_snapshot,
    snapshot_file_name,
    write_snapshot,
)
from log.segment import (
    INDEX_SUFFIX,
    INT32_MAX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    CorruptBatch,
    LogSegment,
    SegmentFile,
    scan_file,
    segment_file_name,
)
from log.txn_index import TXN_INDEX_SUFFIX, AbortedTxn, CorruptTxnIndexError
from protocol.errors import ErrorCode, KafkaError
from protocol.records import (
    LOG_OVERHEAD,
    MAGIC_V2,
    BatchHeader,
    crc_ok,
    set_max_timestamp_log_append,
)

__all__ = [
    "PartitionLog",
    "AppendInfo",
    "ReadResult",
    "FileRange",
    "FlushJob",
    "OffsetAndTimestamp",
    "SegmentInfo",
    "CLEAN_SHUTDOWN_FILE",
    "RECOVERY_POINT_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
    "parse_partition_dir_name",
    "partition_dir_name",
]

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
    from log.cleaner import CleanedSegment  # header bytes [0, 16): outside the CRC


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir_name(name: str) -> tuple[str, int] | None:
    """``<topic>-<partition>``: the partition follows the LAST '-' (topics may contain '-')."""
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit() or not part.isascii():
        return None
    return topic, int(part)


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
    owner: PartitionLog | None = None

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


class PartitionLog:
    """The log of one partition. Create with :meth:`open`."""

    def __init__(self, dir: Path, config: LogConfig, now_ms: int) -> None:
        self.dir = dir
        parsed = parse_partition_dir_name(dir.name)
        self.topic, self.partition = parsed if parsed else (dir.name, -1)
        self.config = config
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._leo = 0
        self.log_start_offset = 0
        self._hw = 0
        self.producer_state = ProducerStateManager(config.producer_id_expiration_ms)
        self.leader_epochs = LeaderEpochCache(None)
        self._lru: OrderedDict[int, LogSegment] = OrderedDict()
        self._now_ms = now_ms
        # flush bookkeeping (see the module docstring for who writes what)
        self._generation = 0  # bumped by truncation
        self._flushed = (0, 0)  # (offset made durable, generation it was made in)
        self._rp_floor = 0  # recovery point right after the last truncation
        self._unsynced_paths: deque[Path] = deque()
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

    # ---------------------------------------------------------------------------------------
    # opening and recovery
    # ---------------------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        dir: Path | str,
        config: LogConfig | None = None,
        now_ms: int = 0,
        *,
        clean_shutdown: bool | None = None,
        recovery_point: int | None = None,
        log_start_offset: int | None = None,
        high_watermark: int | None = None,
    ) -> PartitionLog:
        """Open (creating if needed) the partition directory ``dir``.

        Unspecified ``clean_shutdown`` / ``recovery_point`` / ``log_start_offset`` /
        ``high_watermark`` are read from the parent log dir like Kafka does (the
        ``.kafka_cleanshutdown`` marker and the checkpoint files); missing information means
        the safe choice (unclean, recover from the start, HW = log end offset).
        """
        path = Path(dir)
        path.mkdir(parents=True, exist_ok=True)
        log = cls(path, config or LogConfig(), now_ms)
        parent = path.parent
        if clean_shutdown is None:
            clean_shutdown = (parent / CLEAN_SHUTDOWN_FILE).exists()
        key = (log.topic, log.partition)
        if recovery_point is None:
            recovery_point = _checkpointed(parent / RECOVERY_POINT_CHECKPOINT, key)
        if log_start_offset is None:
            log_start_offset = _checkpointed(parent / LOG_START_OFFSET_CHECKPOINT, key)
        if high_watermark is None:
            high_watermark = _checkpointed(parent / REPLICATION_OFFSET_CHECKPOINT, key)
        log._load(
            clean_shutdown,
            recovery_point if recovery_point is not None else (None if clean_shutdown else 0),
            log_start_offset,
            high_watermark,
        )
        return log

    def _load(
        self,
        clean: bool,
        recovery_point: int | None,
        log_start_offset: int | None,
        high_watermark: int | None,
    ) -> None:
        config, now_ms = self.config, self._now_ms
        swapped = self._complete_swaps()
        bases: list[int] = []
        index_files: list[tuple[int, Path]] = []
        for entry in os.scandir(self.dir):
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

        segments = [LogSegment(self.dir, b, config, now_ms) for b in bases]
        recovered_from: int | None = None
        if segments:
            if clean:
                start_i = len(segments)  # nothing to recover
            else:
                rp = recovery_point if recovery_point is not None else 0
                start_i = max(0, bisect.bisect_right(bases, rp) - 1)
            if swapped:  # a segment swapped in at start-up is checked like unflushed data
                start_i = min(start_i, bisect.bisect_left(bases, min(swapped)))
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
        else:
            first = max(log_start_offset or 0, 0)
            segments = [LogSegment.create(self.dir, first, config, now_ms)]
            self._dir_version += 1
        self._segments = segments
        self._bases = [s.base_offset for s in segments]

        active = segments[-1]
        nxt = active.read_next_offset()
        self._leo = nxt if nxt is not None else active.base_offset
        active.open_for_append()

        start = max(log_start_offset or 0, segments[0].base_offset)
        self.log_start_offset = min(start, self._leo)

        # leader epochs: the checkpoint, trimmed to the log; recovered range rebuilt from headers
        self.leader_epochs = LeaderEpochCache.load(self.dir)
        epochs = self.leader_epochs
        epochs.truncate_from_end(self._leo, persist=False)
        if recovered_from is not None:
            for _, h in self._headers_from(recovered_from):
                latest = epochs.latest_epoch()
                if h.partition_leader_epoch >= 0 and (latest is None or h.partition_leader_epoch > latest):
                    epochs.assign(h.partition_leader_epoch, h.base_offset, persist=False)
        epochs.truncate_from_start(self.log_start_offset, persist=False)
        epochs.flush()

        # The aborted-transaction index needs the producer state as of each segment's start, so
        # it is rebuilt while the producer state is replayed: from the first recovered segment,
        # or from the first segment whose .txnindex is unreadable.
        txn_from = recovered_from
        for seg in self._segments:
            if txn_from is not None and seg.base_offset >= txn_from:
                break
            try:
                seg.txn_index.entries()
            except CorruptTxnIndexError:
                txn_from = seg.base_offset
        self._load_producer_state(txn_from)

        if recovered_from is not None:
            # make the recovered state (cut files, rebuilt indexes) durable before trusting it
            for seg in self._segments:
                if seg.base_offset >= recovered_from:
                    os.fsync(seg.file().fd)
                    seg.fsync_indexes()
                    seg.synced_version = seg.version
            fsync_dir(self.dir)
        for seg in self._segments[:-1]:
            seg.release()
        self._dir_synced_version = self._dir_version
        self._flushed = (self._leo, self._generation)
        hw = self._leo if high_watermark is None else high_watermark
        self._hw = max(self.log_start_offset, min(hw, self._leo))

    def _complete_swaps(self) -> list[int]:
        """Finish a segment replacement (log cleaner) interrupted by a crash.

        ``<base>.log.swap`` exists only once the cleaned segment is complete and fsynced (its
        rename is the commit point, see :meth:`replace_segments`): delete the segments it
        replaces (base offsets in [base, its next offset)) and rename it into place. Its
        indexes are rebuilt by the recovery that follows. Without a ``.log.swap`` the old
        segments are intact and the leftovers (``.cleaned``, index ``.swap``) are deleted by
        the caller. Returns the base offsets of the swapped-in segments.
        """
        swaps: list[int] = []
        for entry in os.scandir(self.dir):
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

    # ---------------------------------------------------------------------------------------
    # properties
    # ---------------------------------------------------------------------------------------
    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def high_watermark(self) -> int:
        return self._hw

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

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions with data in [fetch_offset, upper_bound): a marker at or after
        ``fetch_offset`` and a first offset below ``upper_bound`` (Kafka's
        ``collectAbortedTransactions``), from the segment holding ``fetch_offset`` on."""
        out: list[AbortedTxn] = []
        for seg in self._segments[self._segment_index(fetch_offset) :]:
            found, complete = seg.txn_index.collect(fetch_offset, upper_bound)
            out += found
            if complete:
                break
        return out

    def fetch_upper_bound(self, result: ReadResult) -> int:
        """The upper bound Kafka uses to list aborted transactions for a read: the offset of
        the first offset-index entry at or past the end of the bytes read, else the next
        segment's base offset, else the log end offset."""
        if result.end is None:
            return result.first_offset if result.first_offset >= 0 else self._leo
        base, end_pos = result.end
        i = self._segment_index(base)
        seg = self._segments[i]
        if seg.base_offset == base:
            found = seg.offset_index.first_at_or_after_position(end_pos)
            if found is not None:
                return found
        return self._segments[i + 1].base_offset if i + 1 < len(self._segments) else self._leo

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
    def active_segment_base_offset(self) -> int:
        return self._segments[-1].base_offset

    @property
    def generation(self) -> int:
        """Bumped by every truncation: work planned against an older one is stale."""
        return self._generation

    def segments_between(self, lo: int, hi: int) -> list[LogSegment]:
        """Kafka's ``logSegments(from, to)``: from the segment holding ``lo`` (or the first)
        through the last segment starting below ``hi``."""
        i = max(0, bisect.bisect_right(self._bases, lo) - 1)
        j = bisect.bisect_left(self._bases, hi)
        return self._segments[i:j]

    def non_active_segments_from(self, offset: int) -> list[LogSegment]:
        """The segment holding ``offset`` and the later ones, except the active segment."""
        i = max(0, bisect.bisect_right(self._bases, offset) - 1)
        return self._segments[i:-1]

    def segment_largest_timestamp(self, seg: LogSegment) -> int:
        """Kafka's ``LogSegment.largestTimestamp``: the max batch timestamp, else the file's
        modification time."""
        return _largest_timestamp(seg)

    def first_batch_timestamp(self, seg: LogSegment) -> int:
        """The first batch's max timestamp (Kafka's rolling-based timestamp), -1 if none."""
        if seg.rolling_base_timestamp is None:
            h = seg.first_header() if seg.size else None
            seg.rolling_base_timestamp = h.max_timestamp if h is not None else None
            if seg is not self._segments[-1]:
                self._touch(seg)
        ts = seg.rolling_base_timestamp
        return -1 if ts is None else ts

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

    # ---------------------------------------------------------------------------------------
    # append
    # ---------------------------------------------------------------------------------------
    def append(
        self,
        buf: bytearray | memoryview,
        batches: list[tuple[int, BatchHeader]],
        *,
        leader_epoch: int,
        now_ms: int,
        log_append_time: bool | None = None,
        coordinator: bool = False,
    ) -> AppendInfo:
        """Append the batches at the given positions of ``buf`` (framing and CRC checked by
        the caller). Offsets, leader epoch and (LogAppendTime) timestamps are patched into
        ``buf`` in place. ``log_append_time`` None means the topic's
        ``message.timestamp.type``. Raises KafkaError for rejected appends.

        ``coordinator``: the batches come from a coordinator of this node (Kafka's
        ``AppendOrigin.COORDINATOR``): transactional batches carry a producer id and epoch but
        no sequence, so sequence validation and duplicate detection are skipped."""
        if not batches:
            raise ValueError("append needs at least one batch")
        return self._append(buf, batches, leader_epoch, now_ms, log_append_time, coordinator)

    def _append(
        self,
        buf: bytearray | memoryview,
        batches: list[tuple[int, BatchHeader]],
        leader_epoch: int,
        now_ms: int,
        log_append_time: bool | None,
        coordinator: bool = False,
    ) -> AppendInfo:
        if self._closed:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "log is closed")
        self._now_ms = now_ms
        config = self.config
        use_lat = config.log_append_time if log_append_time is None else log_append_time
        ps = self.producer_state

        total = 0
        for _pos, h in batches:
            size = h.batch_length + LOG_OVERHEAD
            if h.magic != MAGIC_V2:
                raise KafkaError(ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, "only magic 2 batches")
            if size > config.max_message_bytes:
                raise KafkaError(
                    ErrorCode.MESSAGE_TOO_LARGE,
                    f"batch of {size} bytes exceeds max.message.bytes {config.max_message_bytes}",
                )
            if h.last_offset_delta < 0 or h.records_count != h.last_offset_delta + 1:
                raise KafkaError(ErrorCode.INVALID_RECORD, "inconsistent batch offset range")
            if h.producer_id >= 0 and h.base_sequence < 0 and not h.is_control and not coordinator:
                raise KafkaError(ErrorCode.INVALID_RECORD, "idempotent batch without a sequence")
            total += size
        if total > config.segment_bytes:
            raise KafkaError(
                ErrorCode.RECORD_LIST_TOO_LARGE,
                f"{total} bytes exceed segment.bytes {config.segment_bytes}",
            )

        # Duplicates of one of the producer's last 5 batches: answer with the original offsets.
        for _pos, h in batches:
            if h.producer_id >= 0 and not h.is_control and not coordinator:
                dup = ps.find_duplicate(h)
                if dup is not None:
                    return AppendInfo(
                        dup.first_offset,
                        dup.last_offset,
                        dup.timestamp_ms,
                        self.log_start_offset,
                        duplicate=True,
                        max_timestamp=dup.timestamp_ms,
                    )

        # Assign offsets (in memory first) and validate producer state.
        view = buf if isinstance(buf, memoryview) else memoryview(buf)
        next_offset = self._leo
        first_offset = next_offset
        final: list[BatchHeader] = []
        pa: ProducerAppend | None = None
        max_ts = -1
        for pos, h in batches:
            nh = BatchHeader(
                next_offset,
                h.batch_length,
                leader_epoch,
                h.magic,
                h.crc,
                h.attributes,
                h.last_offset_delta,
                h.base_timestamp,
                now_ms if use_lat else h.max_timestamp,
                h.producer_id,
                h.producer_epoch,
                h.base_sequence,
                h.records_count,
            )
            if nh.producer_id >= 0:
                if pa is None:
                    pa = ps.prepare(validate=not coordinator)
                if nh.is_control:
                    size = h.batch_length + LOG_OVERHEAD
                    pa.add_control_batch(nh, *_control_or_none(view[pos : pos + size]))
                else:
                    pa.add_data_batch(nh)
            next_offset += h.last_offset_delta + 1
            if nh.max_timestamp > max_ts:
                max_ts = nh.max_timestamp
            final.append(nh)
        last_offset = next_offset - 1

        active = self._segments[-1]
        if self._should_roll(active, total, final[0].max_timestamp, max_ts, last_offset, now_ms):
            active = self._roll_now(now_ms)

        # Patch the headers in place (header-only; the CRC is recomputed only for LogAppendTime).
        chunks: list[memoryview] = []
        run_start = run_end = -1
        for (pos, h), nh in zip(batches, final, strict=True):
            size = h.batch_length + LOG_OVERHEAD
            # baseOffset, batchLength (unchanged) and partitionLeaderEpoch in one call
            _OFFSET_LENGTH_EPOCH.pack_into(view, pos, nh.base_offset, h.batch_length, leader_epoch)
            if use_lat:
                set_max_timestamp_log_append(view, pos, size, now_ms)
            if pos == run_end:
                run_end += size
            else:
                if run_end > run_start:
                    chunks.append(view[run_start:run_end])
                run_start, run_end = pos, pos + size
        chunks.append(view[run_start:run_end])

        try:
            active.write(chunks, final)
        except OSError as exc:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"write failed: {exc}") from exc
        self._leo = next_offset
        if pa is not None:
            ps.commit(pa, next_offset)
            for txn in pa.completed_txns:
                if txn.is_aborted:
                    active.txn_index.append(_aborted(txn, ps))
        else:
            ps.map_end_offset = next_offset
        latest = self.leader_epochs.latest_epoch()
        if leader_epoch >= 0 and (latest is None or leader_epoch > latest):
            self.leader_epochs.assign(leader_epoch, first_offset)
        return AppendInfo(
            first_offset,
            last_offset,
            now_ms if use_lat else -1,
            self.log_start_offset,
            max_timestamp=max_ts,
            size_bytes=total,
            completed_txns=tuple(pa.completed_txns) if pa is not None else (),
        )

    def _should_roll(
        self,
        seg: LogSegment,
        size: int,
        first_ts: int,
        max_ts: int,
        last_offset: int,
        now_ms: int,
    ) -> bool:
        if seg.size == 0:
            return False
        if seg.size > self.config.segment_bytes - size:
            return True
        base_ts = seg.rolling_base_timestamp
        waited = max_ts - base_ts if base_ts is not None and base_ts >= 0 else now_ms - seg.created_ms
        if waited > self.config.segment_ms - self._roll_jitter_ms(seg):
            return True
        if seg.indexes_full():
            return True
        return last_offset - seg.base_offset > INT32_MAX

    def _roll_jitter_ms(self, seg: LogSegment) -> int:
        """``segment.jitter.ms``: Kafka draws a random share per segment; ours is a hash of the
        partition and base offset (reproducible, and layer 1 has no unseeded randomness)."""
        jitter = self.config.segment_jitter_ms
        if jitter <= 0:
            return 0
        h = _crc32c.crc32c(f"{self.dir.name}/{seg.base_offset}".encode())
        return int(h % min(jitter, self.config.segment_ms))

    # ---------------------------------------------------------------------------------------
    # roll
    # ---------------------------------------------------------------------------------------
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
            self.roll_listener(self)
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

    # ---------------------------------------------------------------------------------------
    # read
    # ---------------------------------------------------------------------------------------
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

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_message: bool = True,
    ) -> ReadResult:
        """Whole batches starting with the one that contains ``fetch_offset``.

        At most ``max_bytes`` in total, except that the first batch is returned whole even if
        larger when ``min_one_message`` (KIP-74). Only batches whose last offset is below
        ``max_offset`` (exclusive bound, e.g. the high watermark or LSO) are returned. Raises
        KafkaError(OFFSET_OUT_OF_RANGE) outside [log start offset, log end offset].
        """
        leo = self._leo
        if fetch_offset < self.log_start_offset or fetch_offset > leo:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"offset {fetch_offset} outside [{self.log_start_offset}, {leo}]",
            )
        result = ReadResult([], 0, -1, self.log_start_offset, leo, self._hw)
        limit = leo if max_offset is None else min(max_offset, leo)
        if fetch_offset >= limit:
            return result
        segments = self._segments
        n = len(segments)
        i = self._segment_index(fetch_offset)
        target = fetch_offset
        total = 0
        while i < n:
            seg = segments[i]
            self._touch(seg)
            found = seg.translate(max(target, seg.base_offset))
            if found is None:
                if seg.unverified_end:  # a gap, or a damaged header that stopped the scan?
                    start = seg.offset_index.lookup(max(target, seg.base_offset))[1]
                    good, bad = seg.verify_range(start, seg.size, self._next_base(i))
                    if bad is not None:
                        self._corrupt(seg, bad, fatal=total == 0)
                        break
                i += 1
                continue
            pos, h = found
            if pos < seg.unverified_end:  # before trusting its offsets: is the header sound?
                size = h.batch_length + LOG_OVERHEAD
                good, bad = seg.verify_range(pos, pos + size, self._next_base(i))
                if bad is not None and bad.position < pos and h.base_offset <= max(
                    target, seg.base_offset
                ):  # damage before a batch that holds the offset asked for: serve from it
                    good, bad = seg.verify_range(pos, pos + size, self._next_base(i),
                                                 anchor=False)
                if bad is not None and good <= pos:
                    self._corrupt(seg, bad, fatal=total == 0)
                    break
            if h.base_offset + h.last_offset_delta >= limit:
                break
            if result.first_offset < 0:
                result.first_offset = h.base_offset
            # the end of what may be returned from this segment
            if limit == leo and i == n - 1:
                end_pos = seg.size
            elif i + 1 < n and limit >= segments[i + 1].base_offset:
                end_pos = seg.size
            else:
                bound = seg.translate(limit, pos)
                end_pos = bound[0] if bound is not None else seg.size
            budget = max_bytes - total
            if end_pos - pos <= budget:
                end = end_pos
            else:
                end = seg.boundary_at_or_before(pos + budget, pos)
                if end == pos:
                    if total == 0 and min_one_message:
                        end = pos + h.batch_length + LOG_OVERHEAD
                    else:
                        break
            if pos < seg.unverified_end:  # data from before this open: CRC-check it first
                good, bad = seg.verify_range(pos, end, self._next_base(i), anchor=False)
                if bad is not None:
                    self._corrupt(seg, bad, fatal=total == 0 and good <= pos)
                    if good <= pos:
                        break
                    end = good
            result.ranges.append(FileRange(seg.file(), pos, end - pos))
            result.end = (seg.base_offset, end)
            total += end - pos
            if end < seg.size:
                break
            i += 1
            target = segments[i].base_offset if i < n else leo
        result.size = total
        return result

    def _corrupt(self, seg: LogSegment, bad: CorruptBatch, *, fatal: bool) -> None:
        """A batch that fails its CRC or header check: report it once, never serve it.
        ``fatal``: nothing could be read before it, so the read fails with CORRUPT_MESSAGE."""
        key = (seg.base_offset, bad.position)
        if key not in self._reported_corrupt:
            self._reported_corrupt.add(key)
            logger.error(
                "%s: corrupt record batch in segment %s at position %d (base offset %s): %s. "
                "It is below the recovery point (or the log was closed cleanly), so it was not "
                "checked at start-up; fetches stop before it and fail with CORRUPT_MESSAGE "
                "when they start at it. DeleteRecords past it, or restoring the partition from "
                "a replica, makes the partition readable again.",
                self.dir.name, seg.log_path.name, bad.position,
                bad.base_offset if bad.base_offset >= 0 else "unknown", bad.reason,
            )
        if fatal:
            raise KafkaError(
                ErrorCode.CORRUPT_MESSAGE,
                f"corrupt record batch in {self.dir.name} segment {seg.base_offset} at position "
                f"{bad.position}: {bad.reason}",
            )

    # ---------------------------------------------------------------------------------------
    # timestamps (ListOffsets)
    # ---------------------------------------------------------------------------------------
    def offset_for_timestamp(
        self, timestamp: int, *, max_offset: int | None = None
    ) -> OffsetAndTimestamp | None:
        """KIP-79: the earliest offset whose record timestamp is >= ``timestamp``, with that
        record's timestamp; None when there is none (below ``max_offset`` if given)."""
        start = self.log_start_offset
        segments = self._segments
        for i, seg in enumerate(segments):
            if seg.max_timestamp < timestamp:
                continue
            if i + 1 < len(segments) and segments[i + 1].base_offset <= start:
                continue
            self._touch(seg)
            found = self._search_segment(seg, timestamp, start, max_offset)
            if found is not None:
                if found.offset < 0:  # passed max_offset
                    return None
                return found
        return None

    def _search_segment(
        self, seg: LogSegment, timestamp: int, start: int, max_offset: int | None
    ) -> OffsetAndTimestamp | None:
        _, entry_offset = seg.time_index.lookup(timestamp)
        pos = seg.offset_index.lookup(max(entry_offset, start))[1]
        for p, h in seg.scan(pos):
            last = h.base_offset + h.last_offset_delta
            if last < start:
                continue
            if max_offset is not None and h.base_offset >= max_offset:
                return OffsetAndTimestamp(-1, -1)
            if h.max_timestamp < timestamp:
                continue
            data = seg.file().pread(h.batch_length + LOG_OVERHEAD, p)
            if len(data) < h.batch_length + LOG_OVERHEAD or not crc_ok(data, 0, len(data)):
                raise KafkaError(
                    ErrorCode.CORRUPT_MESSAGE, f"corrupt record batch at offset {h.base_offset}"
                )
            try:
                records = _records.record_timestamps(data)
            except (ValueError, IndexError, OSError, RuntimeError) as exc:
                raise KafkaError(
                    ErrorCode.CORRUPT_MESSAGE, f"cannot decode batch at offset {h.base_offset}: {exc}"
                ) from exc
            for off, ts in records:
                if ts >= timestamp and off >= start:
                    if max_offset is not None and off >= max_offset:
                        return OffsetAndTimestamp(-1, -1)
                    return OffsetAndTimestamp(off, ts)
        return None

    def max_timestamp(self, *, max_offset: int | None = None) -> OffsetAndTimestamp | None:
        """ListOffsets -3 (KIP-734): the first record with the largest timestamp."""
        best = max((s.max_timestamp for s in self._segments), default=-1)
        if best < 0:
            return None
        return self.offset_for_timestamp(best, max_offset=max_offset)

    # ---------------------------------------------------------------------------------------
    # flush
    # ---------------------------------------------------------------------------------------
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
        return job

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

    # ---------------------------------------------------------------------------------------
    # truncation and deletion
    # ---------------------------------------------------------------------------------------
    def truncate_to(self, offset: int) -> None:
        """Drop everything from the batch containing ``offset`` onwards (follower truncation).

        The log end offset becomes the next offset after the last batch kept (or the active
        segment's base offset when it is empty), as a restart would derive it, but never less
        than the log start offset (a compaction gap can hold the start)."""
        if offset >= self._leo:
            return
        if offset < self.log_start_offset:
            self._truncate_fully(offset)
            return
        self._bump_generation()
        while len(self._segments) > 1 and self._segments[-1].base_offset > offset:
            self._drop_last_segment()
        active = self._segments[-1]
        self._forget(active)
        active.truncate_to(offset)
        active.open_for_append()
        nxt = active.read_next_offset()
        self._leo = max(nxt if nxt is not None else active.base_offset, self.log_start_offset)
        self._after_truncation()

    def _drop_last_segment(self) -> None:
        seg = self._segments.pop()
        self._bases.pop()
        self._forget(seg)
        seg.delete_files()
        self._dir_version += 1

    def _after_truncation(self) -> None:
        leo = self._leo
        self.log_start_offset = min(self.log_start_offset, leo)
        self._hw = min(self._hw, leo)
        self._rp_floor = min(self._rp_floor, leo)
        self.leader_epochs.truncate_from_end(leo)
        self.producer_state.clear(self._segments[0].base_offset)
        self._load_producer_state()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete all data; the log restarts empty at ``offset``."""
        self._truncate_fully(offset)

    def _bump_generation(self) -> None:
        """Before truncating: freeze the recovery point, then invalidate running flushes."""
        self._rp_floor = min(self.recovery_point, self._leo)
        self._generation += 1

    def _truncate_fully(self, offset: int) -> None:
        self._bump_generation()
        for seg in self._segments:
            self._forget(seg)
            seg.delete_files()
        for off in list(self._snapshots):
            self._delete_snapshot(off)
        seg = LogSegment.create(self.dir, offset, self.config, self._now_ms)
        seg.open_for_append()
        self._segments = [seg]
        self._bases = [offset]
        self._leo = self.log_start_offset = self._hw = offset
        self._rp_floor = min(self._rp_floor, offset)
        self._dir_version += 1
        self.producer_state.clear(offset)
        self.leader_epochs.clear()

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to ``offset`` (<= high watermark) and
        delete segments entirely below it. Returns the new log start offset."""
        if offset > self._hw or offset < 0:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"offset {offset} is above the high watermark {self._hw}",
            )
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self.leader_epochs.truncate_from_start(offset)
            self._delete_segments_while(
                lambda seg, nxt: nxt is not None and nxt.base_offset <= self.log_start_offset
            )
        return self.log_start_offset

    def delete_old_segments(self, now_ms: int) -> int:
        """Retention (Kafka's ``deleteOldSegments``). Returns how many segments were deleted.

        Always: segments entirely below the log start offset (DeleteRecords). With
        ``cleanup.policy`` containing ``delete`` also, oldest first, the segments beyond
        ``retention.bytes`` and those whose largest timestamp is older than ``retention.ms``.
        Never a segment reaching past the high watermark, never the empty active segment; when
        every segment goes, a new empty one is rolled first so the log keeps its end offset.
        """
        self._now_ms = now_ms
        deleted = self._delete_segments_while(
            lambda seg, nxt: nxt is not None and nxt.base_offset <= self.log_start_offset
        )
        if not self.config.delete:
            return deleted
        retention_bytes = self.config.retention_bytes
        if retention_bytes >= 0:
            diff = sum(s.size for s in self._segments) - retention_bytes

            def over_size(seg: LogSegment, nxt: LogSegment | None) -> bool:
                nonlocal diff
                if diff - seg.size >= 0:
                    diff -= seg.size
                    return True
                return False

            if diff > 0:
                deleted += self._delete_segments_while(over_size)
        retention_ms = self.config.retention_ms
        if retention_ms >= 0:
            deleted += self._delete_segments_while(
                lambda seg, nxt: now_ms - _largest_timestamp(seg) > retention_ms
            )
        return deleted

    def _delete_segments_while(
        self, predicate: Callable[[LogSegment, LogSegment | None], bool]
    ) -> int:
        segments = self._segments
        count = 0
        for i, seg in enumerate(segments):
            nxt = segments[i + 1] if i + 1 < len(segments) else None
            upper = nxt.base_offset if nxt is not None else self._leo
            if upper > self._hw or (nxt is None and seg.size == 0) or not predicate(seg, nxt):
                break
            count += 1
        if not count:
            return 0
        if count == len(segments):
            self._roll_now(self._now_ms)
        doomed = self._segments[:count]
        del self._segments[:count]
        del self._bases[:count]
        for seg in doomed:
            self._forget(seg)
            seg.delete_files()
            self._delete_snapshot(seg.base_offset)
        self._dir_version += 1
        new_start = max(self.log_start_offset, self._segments[0].base_offset)
        if new_start != self.log_start_offset:
            self.log_start_offset = new_start
            self.leader_epochs.truncate_from_start(new_start)
        self._hw = max(self._hw, self.log_start_offset)
        return count

    # ---------------------------------------------------------------------------------------
    # compaction: swapping a cleaned segment in
    # ---------------------------------------------------------------------------------------
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

    def expire_producers(self, now_ms: int) -> list[int]:
        """Forget producers idle longer than ``producer.id.expiration.ms``."""
        return self.producer_state.remove_expired(now_ms)

    # ---------------------------------------------------------------------------------------
    # close / delete
    # ---------------------------------------------------------------------------------------
    def close(self) -> None:
        """Write clean state: final time index entry, producer snapshot, fsync everything."""
        if self._closed:
            return
        active = self._segments[-1]
        active.finalize()
        self._take_snapshot(self._leo, sync=True)
        job = self.prepare_flush()
        job.dir = self.dir
        job.run()
        self.complete_flush(job)
        self.leader_epochs.flush()
        for seg in self._segments:
            seg.release()
        self._lru.clear()
        self._closed = True

    def delete(self) -> None:
        """Remove the partition directory and everything in it."""
        for seg in self._segments:
            seg.offset_index.close_writer()
            seg.time_index.close_writer()
            seg.release()
        self._lru.clear()
        self._closed = True
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


# -- helpers --------------------------------------------------------------------------------------

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
