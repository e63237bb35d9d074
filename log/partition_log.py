"""One partition's log: a directory of segments, the producer state, the leader epoch cache.

Layout (as Kafka's, so ``kafka-dump-log`` and friends read it)::

    <log dir>/<topic>-<partition>/
        00000000000000000000.log         concatenated v2 record batches
        00000000000000000000.index       offset index, 8-byte entries
        00000000000000000000.timeindex   time index, 12-byte entries
        00000000000000000000.txnindex    aborted transactions closed in this segment
        00000000000000001234.snapshot    producer state just before offset 1234
        leader-epoch-checkpoint          epoch -> first offset

``PartitionLog`` is a facade over parts that each own one thing, composed at open:

* ``log.segment_list.SegmentList`` alone owns the segments (roll, lookup by offset and by
  timestamp, delete the oldest or below an offset, truncate, the cleaner's replacement);
* small state objects (``log.log_state``): ``LogOffsets`` (log start, log end, high watermark,
  the recovery point's parts) and ``DirSync`` (directory changes not yet durable); the
  ``LeaderEpochCache``; ``log.producer_log.ProducerLog`` (producer state and its snapshots);
* the jobs, each handed only the parts it uses: ``log.log_recovery.LogLoader`` (opening),
  ``log.log_append.LogAppender``, ``log.log_read.LogReader``, ``log.log_retention.LogRetention``
  (truncation, DeleteRecords, retention), ``log.log_swap.SegmentSwap`` (the cleaner's
  results), ``log.log_flush.LogFlush`` (flush bookkeeping).

Nothing outside ``log/`` appends, reads or moves the high watermark directly: the
partition-state layer (``log.replica.Partition``) does, for every handler and coordinator.

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
segments and ``replace_segments`` swaps each result in, crash-safely (``swap_steps``; an open
finishes an interrupted swap).

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
  changes are a version pair like the segments' (``DirSync``);
* ``recovery_point`` is computed from ``(flushed offset, generation)`` (written by the flusher)
  and a floor written by truncation, which bumps the generation: a flush that began before a
  truncation can never move the recovery point past data that the truncation replaced.

Closing the log while a flush runs is not supported (stop the flusher first).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Generator
from pathlib import Path

from log.checkpoint import CorruptCheckpointError, fsync_dir, read_offsets_checkpoint
from log.config import LogConfig
from log.layout import (
    CLEAN_SHUTDOWN_FILE,
    CLEANED_SUFFIX,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    SWAP_SUFFIX,
    parse_log_dir_name,
    parse_partition_dir_name,
    partition_dir_name,
)
from log.log_append import AppendInfo, LogAppender
from log.log_flush import FlushJob, LogFlush
from log.log_read import FileRange, LogReader, OffsetAndTimestamp, ReadResult
from log.log_recovery import LoadedLog, LogLoader, sync_recovered
from log.log_retention import LogRetention
from log.log_swap import CleanedSegment, SegmentSwap
from log.segment import LogSegment
from log.segment_list import SegmentInfo, SegmentList, largest_timestamp
from log.txn_index import AbortedTxn
from protocol.records import BatchHeader

__all__ = [
    "CLEANED_SUFFIX",
    "SWAP_SUFFIX",
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


class PartitionLog:
    """The log of one partition. Create with :meth:`open`."""

    def __init__(self, dir: Path, loaded: LoadedLog) -> None:
        self.dir = dir
        parsed = parse_log_dir_name(dir.name)
        self.topic, self.partition = parsed[0] if parsed else (dir.name, -1)
        #: the local segments (with tiered storage, a remote list will sit below them)
        self.local_segments: SegmentList = loaded.segments
        segments = loaded.segments
        offsets = self._offsets = loaded.offsets
        dir_sync = self._dir_sync = loaded.dir_sync
        self.leader_epochs = loaded.epochs
        self._producers = loaded.producers
        self.producer_state = loaded.producers.state
        self._recovered_from = loaded.recovered_from
        self._offsets_listener: Callable[[PartitionLog], None] | None = None
        #: called (on the owning thread) after every roll; the broker uses it to fsync the
        #: finished segment soon, as Kafka does, so the recovery point keeps up.
        self.roll_listener: Callable[[PartitionLog], None] | None = None
        #: wall-clock time of the last completed flush, kept by the broker's flusher
        self.last_flush_ms = segments.now_ms
        self._appender = LogAppender(segments, offsets, self._producers, self.leader_epochs,
                                     dir_sync, self._roll)
        self._reader = LogReader(segments, offsets)
        self._retention = LogRetention(segments, offsets, self._producers, self.leader_epochs,
                                       self._roll)
        self._swap = SegmentSwap(segments, offsets)
        self._flush = LogFlush(segments, offsets, dir_sync)

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
        defer_sync: bool = False,
    ) -> PartitionLog:
        """Open (creating if needed) the partition directory ``dir``.

        ``defer_sync``: after a recovery the caller makes the rewritten files durable
        (``recovered_unsynced``, ``sync_recovered``), one ``syncfs`` for many logs.

        Unspecified ``clean_shutdown`` / ``recovery_point`` / ``log_start_offset`` /
        ``high_watermark`` are read from the parent log dir like Kafka does (the
        ``.kafka_cleanshutdown`` marker and the checkpoint files); missing information means
        the safe choice (unclean, recover from the start, HW = log end offset).
        """
        path = Path(dir)
        path.mkdir(parents=True, exist_ok=True)
        parent = path.parent
        if clean_shutdown is None:
            clean_shutdown = (parent / CLEAN_SHUTDOWN_FILE).exists()
        parsed = parse_log_dir_name(path.name)
        key = parsed[0] if parsed else (path.name, -1)
        if recovery_point is None:
            recovery_point = _checkpointed(parent / RECOVERY_POINT_CHECKPOINT, key)
        if log_start_offset is None:
            log_start_offset = _checkpointed(parent / LOG_START_OFFSET_CHECKPOINT, key)
        if high_watermark is None:
            high_watermark = _checkpointed(parent / REPLICATION_OFFSET_CHECKPOINT, key)
        loaded = LogLoader(path, config or LogConfig(), now_ms).load(
            clean_shutdown,
            recovery_point if recovery_point is not None else (None if clean_shutdown else 0),
            log_start_offset,
            high_watermark,
            defer_sync,
        )
        return cls(path, loaded)

    # -- state -----------------------------------------------------------------------------------
    @property
    def config(self) -> LogConfig:
        return self.local_segments.config

    @config.setter
    def config(self, config: LogConfig) -> None:
        self.local_segments.config = config

    @property
    def offsets_listener(self) -> Callable[[PartitionLog], None] | None:
        """Called (owning thread) when the high watermark, log start offset or recovery point
        may have changed: the log manager keeps its checkpoints' dirty sets with it."""
        return self._offsets_listener

    @offsets_listener.setter
    def offsets_listener(self, listener: Callable[[PartitionLog], None] | None) -> None:
        self._offsets_listener = listener
        self._offsets.listener = None if listener is None else (lambda: listener(self))

    @property
    def log_end_offset(self) -> int:
        return self._offsets.end

    @property
    def log_start_offset(self) -> int:
        return self._offsets.start

    @property
    def high_watermark(self) -> int:
        return self._offsets.hw

    @property
    def recovery_point(self) -> int:
        """Everything below this offset is durable (fsynced)."""
        return self._offsets.recovery_point

    @property
    def last_stable_offset(self) -> int:
        """The high watermark, or the first offset of the oldest open transaction if lower.

        (Kafka also holds the LSO below a transaction whose marker is not yet below the high
        watermark; a single replica moves the high watermark with every append, markers
        included, so that case does not arise here.)"""
        first = self.producer_state.first_undecided_offset()
        hw = self._offsets.hw
        return hw if first is None else min(first, hw)

    @property
    def unflushed_messages(self) -> int:
        """Offsets appended but not yet covered by a flush (Kafka's ``unflushedMessages``)."""
        return self._offsets.end - self._offsets.recovery_point

    @property
    def size_bytes(self) -> int:
        return self.local_segments.size_bytes

    @property
    def segments(self) -> list[SegmentInfo]:
        return self.local_segments.infos()

    @property
    def first_segment_base_offset(self) -> int:
        return self.local_segments.base_offset

    @property
    def active_segment_base_offset(self) -> int:
        return self.local_segments.active_base_offset

    @property
    def generation(self) -> int:
        """Bumped by every truncation: work planned against an older one is stale."""
        return self._offsets.generation

    @property
    def closed(self) -> bool:
        return self.local_segments.closed

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark (clamped to [log start, log end]); returns the value kept."""
        return self._offsets.clamp_hw(offset)

    def epoch_for_offset(self, offset: int) -> int | None:
        return self.leader_epochs.epoch_for_offset(offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch answer: (epoch, end offset), (-1, -1) when unknown."""
        return self.leader_epochs.end_offset_for(epoch, self._offsets.end)

    def assign_leader_epoch(self, epoch: int, start_offset: int) -> bool:
        """A new leader epoch starts at ``start_offset`` (becoming leader). The checkpoint is
        written at the first append after it (in place) and fsynced by the next flush, or
        written by the close. Kafka writes and fsyncs it at once, but an entry that starts at
        the log end is dropped again by every open (``truncate_from_end``, Kafka's too), so
        until a batch follows it there is nothing worth a write; a torn file reads as corrupt
        and is rebuilt from the batches. True when the cache changed."""
        changed = self.leader_epochs.assign(epoch, start_offset, persist=False)
        if changed:
            self._appender.epochs_unwritten = True
        return changed

    def expire_producers(self, now_ms: int) -> list[int]:
        """Forget producers idle longer than ``producer.id.expiration.ms``."""
        return self.producer_state.remove_expired(now_ms)

    # -- appends ---------------------------------------------------------------------------------
    def append(
        self,
        buf: bytearray | memoryview,
        batches: list[tuple[int, BatchHeader]],
        *,
        leader_epoch: int,
        now_ms: int,
        log_append_time: bool | None = None,
        coordinator: bool = False,
        marker_transaction_version: int = 0,
    ) -> AppendInfo:
        """Append the batches at the given positions of ``buf`` (framing and CRC checked by
        the caller). Offsets, leader epoch and (LogAppendTime) timestamps are patched into
        ``buf`` in place. ``log_append_time`` None means the topic's
        ``message.timestamp.type``. Raises KafkaError for rejected appends.

        ``coordinator``: the batches come from a coordinator of this node (Kafka's
        ``AppendOrigin.COORDINATOR``): transactional batches carry a producer id and epoch but
        no sequence, so sequence validation and duplicate detection are skipped.

        ``marker_transaction_version``: the transaction version of the markers among the
        batches (WriteTxnMarkers v2); 2 requires a marker's epoch to be newer than the
        producer's (``ProducerAppend.add_control_batch``)."""
        if not batches:
            raise ValueError("append needs at least one batch")
        return self._appender.append(buf, batches, leader_epoch, now_ms, log_append_time,
                                     coordinator, marker_transaction_version)

    def append_as_follower(
        self, buf: bytearray | memoryview, batches: list[tuple[int, BatchHeader]], *, now_ms: int
    ) -> AppendInfo:
        """Replication (Kafka's ``appendAsFollower``): the batches are the leader's, written
        verbatim with the leader's offsets, leader epochs and timestamps. The producer state
        follows them without validation (the leader validated them) and the leader epoch cache
        learns each new epoch from the batch headers. Offsets must not go back: the first
        batch starts at or after the log end offset (the follower truncates first)."""
        if not batches:
            raise ValueError("append needs at least one batch")
        return self._appender.append_as_follower(buf, batches, now_ms)

    def roll(self, now_ms: int | None = None) -> None:
        """Start a new segment at the log end offset (no-op if the active one is empty)."""
        self._roll(self.local_segments.now_ms if now_ms is None else now_ms)

    def _roll(self, now_ms: int) -> LogSegment:
        segments = self.local_segments
        if segments.active.size == 0:
            return segments.active
        self._producers.take_snapshot(self._offsets.end)
        seg = segments.roll(self._offsets.end, now_ms)
        if self.roll_listener is not None:
            self.roll_listener(self)
        return seg

    # -- reads -----------------------------------------------------------------------------------
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
        return self._reader.read(fetch_offset, max_bytes, max_offset, min_one_message)

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions with data in [fetch_offset, upper_bound): a marker at or after
        ``fetch_offset`` and a first offset below ``upper_bound`` (Kafka's
        ``collectAbortedTransactions``), from the segment holding ``fetch_offset`` on."""
        return self._reader.aborted_transactions(fetch_offset, upper_bound)

    def fetch_upper_bound(self, result: ReadResult) -> int:
        """The upper bound Kafka uses to list aborted transactions for a read: the offset of
        the first offset-index entry at or past the end of the bytes read, else the next
        segment's base offset, else the log end offset."""
        return self._reader.fetch_upper_bound(result)

    def offset_for_timestamp(
        self, timestamp: int, *, max_offset: int | None = None
    ) -> OffsetAndTimestamp | None:
        """KIP-79: the earliest offset whose record timestamp is >= ``timestamp``, with that
        record's timestamp; None when there is none (below ``max_offset`` if given)."""
        return self._reader.offset_for_timestamp(timestamp, self._offsets.start, max_offset)

    def max_timestamp(self, *, max_offset: int | None = None) -> OffsetAndTimestamp | None:
        """ListOffsets -3 (KIP-734): the first record with the largest timestamp."""
        best = self.local_segments.max_timestamp()
        if best < 0:
            return None
        return self.offset_for_timestamp(best, max_offset=max_offset)

    # -- segment views for the cleaner -----------------------------------------------------------
    def segments_between(self, lo: int, hi: int) -> list[LogSegment]:
        """Kafka's ``logSegments(from, to)``: from the segment holding ``lo`` (or the first)
        through the last segment starting below ``hi``."""
        return self.local_segments.between(lo, hi)

    def non_active_segments_from(self, offset: int) -> list[LogSegment]:
        """The segment holding ``offset`` and the later ones, except the active segment."""
        return self.local_segments.non_active_from(offset)

    def segment_largest_timestamp(self, seg: LogSegment) -> int:
        """Kafka's ``LogSegment.largestTimestamp``: the max batch timestamp, else the file's
        modification time."""
        return largest_timestamp(seg)

    def first_batch_timestamp(self, seg: LogSegment) -> int:
        """The first batch's max timestamp (Kafka's rolling-based timestamp), -1 if none."""
        return self.local_segments.first_batch_timestamp(seg)

    def replace_segments(self, cleaned: CleanedSegment) -> bool:
        """Swap the log cleaner's ``cleaned`` segment in for the segments it was made from.

        Returns False, deleting the cleaned files, when the log changed meanwhile (one of those
        segments deleted, a truncation, the log closed). The swap is crash-safe, in the steps
        of :meth:`swap_steps`; an open finishes an interrupted one.
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
        return self._swap.swap_steps(cleaned)

    # -- shrinking -------------------------------------------------------------------------------
    def truncate_to(self, offset: int) -> None:
        """Drop everything from the batch containing ``offset`` onwards (follower truncation).

        The log end offset becomes the next offset after the last batch kept (or the active
        segment's base offset when it is empty), as a restart would derive it, but never less
        than the log start offset (a compaction gap can hold the start)."""
        self._retention.truncate_to(offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete all data; the log restarts empty at ``offset``."""
        self._retention.truncate_fully(offset)

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to ``offset`` (<= high watermark) and
        delete segments entirely below it. Returns the new log start offset."""
        return self._retention.delete_records_before(offset)

    def delete_old_segments(self, now_ms: int) -> int:
        """Retention (Kafka's ``deleteOldSegments``). Returns how many segments were deleted.

        Always: segments entirely below the log start offset (DeleteRecords). With
        ``cleanup.policy`` containing ``delete`` also, oldest first, the segments beyond
        ``retention.bytes`` and those whose largest timestamp is older than ``retention.ms``.
        Never a segment reaching past the high watermark, never the empty active segment; when
        every segment goes, a new empty one is rolled first so the log keeps its end offset.
        """
        return self._retention.delete_old_segments(now_ms)

    # -- durability ------------------------------------------------------------------------------
    def prepare_flush(self) -> FlushJob:
        """Collect what needs an fsync. Safe on the flusher thread (see module docstring)."""
        return self._flush.prepare()

    def complete_flush(self, job: FlushJob) -> None:
        """Record a finished FlushJob: advance ``recovery_point``."""
        self._flush.complete(job)

    def flush(self) -> None:
        """fsync everything written so far. One worker thread may call this while the owning
        thread appends (see the module docstring)."""
        job = self._flush.prepare()
        job.run()
        self._flush.complete(job)

    def defer_parent_sync(self) -> None:
        """A new log whose creation did not fsync the log directory holding it: its first
        flush (a worker thread's, ``kafkawire.log_flusher``) makes the directory entry durable
        with the rest, instead of an fsync on the event loop at creation (issue 27)."""
        self._dir_sync.parent_unsynced = True

    def mark_dir_synced(self, dir_version: int) -> None:
        """The directory's entries up to ``dir_version`` were made durable (``syncfs``)."""
        self._dir_sync.mark_synced(dir_version)

    @property
    def dirty(self) -> bool:
        return self._flush.dirty

    @property
    def recovered_unsynced(self) -> bool:
        """Recovery rewrote files that were not fsynced yet (``defer_sync``)."""
        return self._recovered_from is not None

    def sync_recovered(self, *, fsync: bool = True) -> None:
        """Make the recovered state (cut files, rebuilt indexes) durable before trusting it
        (``fsync=False``: the caller did, with a ``syncfs``)."""
        if self._recovered_from is not None and fsync:
            sync_recovered(self.local_segments, self._recovered_from)
        self._recovered_from = None

    # -- closing ---------------------------------------------------------------------------------
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
        segments = self.local_segments
        if segments.closed:
            return None
        segments.active.finalize()
        self._producers.take_snapshot(self._offsets.end)
        self._appender.write_epochs()
        job = self._flush.prepare()
        job.dir = self.dir
        segments.close()
        return job

    def release_files(self) -> None:
        """Drop the handles and indexes a closed log still holds (after its last flush)."""
        self.local_segments.release_all()

    def detach(self) -> None:
        """Drop every handle and index and mark the log closed, leaving its files as they are
        (the directory is about to be renamed away and deleted: a replaced replica)."""
        self.local_segments.detach()

    def delete(self) -> None:
        """Remove the partition directory and everything in it."""
        self.detach()
        shutil.rmtree(self.dir, ignore_errors=True)
        try:
            fsync_dir(self.dir.parent)
        except FileNotFoundError:
            pass

    def __repr__(self) -> str:
        o = self._offsets
        return (
            f"PartitionLog({self.dir.name}, start={o.start}, leo={o.end}, hw={o.hw}, "
            f"segments={len(self.local_segments)})"
        )


def _checkpointed(path: Path, key: tuple[str, int]) -> int | None:
    try:
        offsets = read_offsets_checkpoint(path)
    except CorruptCheckpointError:
        return None
    return None if offsets is None else offsets.get(key)
