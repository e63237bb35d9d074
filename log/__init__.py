"""log: layer 1, segmented partition logs on local disk (synchronous file I/O only).

Kafka's on-disk layout, so Kafka's tools read it. Time is always passed in (``now_ms``);
nothing here reads a clock, opens a socket or starts a thread. The modules, by owner:

- ``partition_log``: ``PartitionLog``, the facade of one partition's log, composed at open.
- ``segment_list``: ``SegmentList``, the only owner of a log's segments (roll, lookups, delete).
- ``segment``: ``LogSegment``, one segment's ``.log`` file and its indexes; batch checks.
- ``log_state``: ``LogOffsets`` and ``DirSync``, the small state the jobs of a log share.
- ``log_recovery``: ``LogLoader``, opening a log (recovery, interrupted swaps, epochs).
- ``log_append``: ``LogAppender``, leader and follower appends and the roll decision.
- ``log_read``: ``LogReader``, reads as file ranges, the read interface ``SegmentReader``.
- ``log_retention``: ``LogRetention``, truncation, DeleteRecords and retention.
- ``log_swap``: ``SegmentSwap``, the cleaner's result swapped in crash-safely.
- ``log_flush``: ``LogFlush`` and ``FlushJob``, what an fsync covers, the recovery point.
- ``producer_log``: ``ProducerLog``, producer snapshots and the state replayed at open.
- ``producer_state``: idempotent / transactional producer state and its snapshot format.
- ``leader_epoch``: the leader epoch cache and its checkpoint file.
- ``index``, ``txn_index``: the offset and time indexes, the aborted-transaction index.
- ``_records``: record-level decoding the log needs (control records, timestamps, scans).
- ``file_cache``: the process-wide cache of open segment files.
- ``checkpoint``, ``offsets_checkpoint``: Kafka's checkpoint files, incrementally rewritten.
- ``layout``: the names in a log directory (partition dirs, markers, checkpoints, suffixes).
- ``config``: ``LogConfig``, a topic's log settings.
- ``cleaner``: compaction (choosing a log, the offset map, rewriting segments).
- ``manager``: ``LogManager``, the logs of one log directory (open, create, checkpoints).
- ``dirs``: ``LogDirs``, JBOD: several log directories, failures, future replicas.
- ``log_move``: ``LogCopy``, copying a log into its future replica in another directory.
- ``replica``: ``Partition``, the partition-state layer (roles, ISR, high watermark,
  waiters) through which everything above ``log/`` uses a log.
"""

from log.config import LogConfig, TimestampType
from log.manager import LogManager
from log.partition_log import (
    AppendInfo,
    FileRange,
    FlushJob,
    OffsetAndTimestamp,
    PartitionLog,
    ReadResult,
    SegmentInfo,
)
from log.producer_state import ProducerStateManager

__all__ = [
    "AppendInfo",
    "FileRange",
    "FlushJob",
    "LogConfig",
    "LogManager",
    "OffsetAndTimestamp",
    "PartitionLog",
    "ProducerStateManager",
    "ReadResult",
    "SegmentInfo",
    "TimestampType",
]
