"""The names in a log directory, as Kafka's: partition directories (with their ``-future`` /
``-delete`` / ``-stray`` forms), the marker and checkpoint files, temporary suffixes."""

from __future__ import annotations

import re

__all__ = [
    "CLEAN_SHUTDOWN_FILE",
    "RECOVERY_POINT_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
    "CLEANED_SUFFIX",
    "SWAP_SUFFIX",
    "STRAY_SUFFIXES",
    "FUTURE_DIR_SUFFIX",
    "DELETE_DIR_SUFFIX",
    "STRAY_DIR_SUFFIX",
    "partition_dir_name",
    "parse_partition_dir_name",
    "suffixed_dir_name",
    "parse_log_dir_name",
]

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"

#: the log cleaner's output before its swap, and the swap's own names (``log.log_swap``)
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
#: files in a partition directory that an open deletes (left over by a crash)
STRAY_SUFFIXES = (".tmp", ".deleted", CLEANED_SUFFIX, SWAP_SUFFIX)

#: Kafka's suffixes of a partition directory that is not (yet, or any more) the partition's log:
#: ``<topic>-<partition>.<32 hex digits><suffix>`` (``UnifiedLog.logDirNameWithSuffix``)
FUTURE_DIR_SUFFIX = "-future"
DELETE_DIR_SUFFIX = "-delete"
STRAY_DIR_SUFFIX = "-stray"
_SUFFIXED = re.compile(r"^(.+)\.([0-9a-f]{32})(-future|-delete|-stray)$")


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir_name(name: str) -> tuple[str, int] | None:
    """``<topic>-<partition>``: the partition follows the LAST '-' (topics may contain '-')."""
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit() or not part.isascii():
        return None
    return topic, int(part)


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
