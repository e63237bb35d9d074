"""One partition's log: a directory of segments, the producer state, the leader epoch cache.

Layout (as Kafka's, so ``kafka-dump-log`` and friends read it)::

    <log dir>/<topic>-<partition>/
        00000000000000000000.log         concatenated v2 record batches
        00000000000000000000.index       offset index, 8-byte entries
        00000000000000000000.timeindex   time index, 12-byte entries
        00000000000000000000.txnindex    aborted transactions closed in this segment
        00000000000000001234.snapshot    producer state just before offset 1234
        leader-epoch-checkpoint          epoch -> first offset

The class is split by job, one module each, over the shared state in ``log.log_core``
(``LogCore``: segments, offsets, producer state, epochs, flush bookkeeping, rolling, closing):
``log.log_recovery`` (opening and recovery), ``log.log_append`` (leader and follower appends),
``log.log_read`` (reads, aborted transactions, timestamp lookups), ``log.log_retention``
(truncation, DeleteRecords, retention) and ``log.log_swap`` (the cleaner's results). Nothing
outside ``log/`` appends, reads or moves the high watermark directly: the partition-state layer
(``log.replica.Partition``) does, for every handler and coordinator.

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

from pathlib import Path

from log.config import LogConfig
from log.log_append import LogAppend
from log.log_core import (
    CLEAN_SHUTDOWN_FILE,
    CLEANED_SUFFIX,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    SWAP_SUFFIX,
    AppendInfo,
    FileRange,
    FlushJob,
    OffsetAndTimestamp,
    ReadResult,
    SegmentInfo,
    _checkpointed,
    parse_partition_dir_name,
    partition_dir_name,
)
from log.log_read import LogRead
from log.log_recovery import LogRecovery
from log.log_retention import LogRetention
from log.log_swap import LogSwap

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


class PartitionLog(LogRecovery, LogAppend, LogRead, LogRetention, LogSwap):
    """The log of one partition. Create with :meth:`open`.

    One job per part: ``LogRecovery`` (opening), ``LogAppend``, ``LogRead``, ``LogRetention``
    (truncation, DeleteRecords, retention), ``LogSwap`` (the cleaner's results), all over the
    state in ``LogCore``."""

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
            defer_sync,
        )
        return log
