"""log: layer 1, segmented partition logs on local disk (synchronous file I/O only).

Kafka's on-disk layout (segments, sparse offset/time indexes, producer snapshots, leader epoch
and offset checkpoints) so Kafka's tools can read it; see ``partition_log`` for the design of
the append / read hot paths, recovery, retention and flushing (split by job into ``log_core``,
``log_recovery``, ``log_append``, ``log_read``, ``log_retention``, ``log_swap``),
``producer_state`` for idempotence, ``cleaner`` for compaction, ``manager`` for the log
directory, and ``replica`` for the partition-state layer (Kafka's ``Partition``: roles, ISR,
the high watermark and its waiters) through which everything above ``log/`` uses a log. Time is always
passed in (``now_ms``); nothing here reads a clock, opens a socket or starts a thread.
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
