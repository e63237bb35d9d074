"""One offsets checkpoint file of a log directory, rewritten only when something in it changed.

``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint`` and
``replication-offset-checkpoint`` list one ``topic partition offset`` row per partition (Kafka's
text format: a version line ``0``, the row count, the rows). Kafka rebuilds each file from every
partition at each interval; with 100,000 partitions that is 100,000 rows every few seconds, and
building them in Python holds the GIL (the event loop) for seconds.

Here each file keeps its rows as last written and a set of the partitions that may have changed
since: the log manager adds a partition when its log is created, opened, moved or deleted, and
each log reports every change of its high watermark, log start offset or recovery point
(``PartitionLog.offsets_listener``). :meth:`OffsetsCheckpoint.prepare` recomputes only those rows and
returns None when none differs, so an idle broker writes nothing and a busy one pays for the
partitions that moved plus one join of the rows. The rows keep their insertion order (Kafka's
files are not sorted either: it writes a map's iteration order).

Owning thread (the event loop) for ``prepare``; the bytes it returns may be written from any
thread, and ``failed`` (after a failed write) makes the next ``prepare`` rewrite the file.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from log.checkpoint import CHECKPOINT_VERSION

if TYPE_CHECKING:
    from log.partition_log import PartitionLog

__all__ = ["OffsetsCheckpoint"]

TopicPartition = tuple[str, int]


class OffsetsCheckpoint:
    """The rows of one offsets checkpoint file and the partitions changed since its last write."""

    def __init__(self, name: str, value_of: Callable[[PartitionLog], int | None]) -> None:
        self.name = name
        #: a log's offset in this file, None to leave it out
        self.value_of = value_of
        self.rows: dict[TopicPartition, str] = {}
        #: partitions whose row may differ from ``rows``
        self.dirty: set[TopicPartition] = set()
        #: the file must be written at the next prepare (nothing written yet, or a write failed)
        self.stale = True
        #: texts prepared (tests and metrics: a write per change, none while idle)
        self.prepared = 0

    def prepare(self, logs: Mapping[TopicPartition, PartitionLog]) -> bytes | None:
        """The file's new content, or None when it would be what was last written."""
        dirty, changed = self.take()
        changed = self.update(logs, dirty) or changed
        return self.render() if changed else None

    def take(self) -> tuple[list[TopicPartition], bool]:
        """The partitions changed since the last take, and whether the file must be written
        whatever they hold (:meth:`update` them, then :meth:`render` if anything changed;
        a caller that stops halfway gives the rest back with :meth:`give_back`)."""
        dirty, self.dirty = self.dirty, set()
        stale, self.stale = self.stale, False
        return list(dirty), stale

    def give_back(self, tps: list[TopicPartition], stale: bool) -> None:
        self.dirty.update(tps)
        self.stale = self.stale or stale

    def update(self, logs: Mapping[TopicPartition, PartitionLog],
               tps: list[TopicPartition]) -> bool:
        """Recompute the rows of ``tps``; True if one of them differs from the file's."""
        changed = False
        rows = self.rows
        for tp in tps:
            log = logs.get(tp)
            value = self.value_of(log) if log is not None else None
            if value is None:
                changed = rows.pop(tp, None) is not None or changed
                continue
            row = f"{tp[0]} {tp[1]} {value}"
            if rows.get(tp) != row:
                rows[tp] = row
                changed = True
        return changed

    def render(self) -> bytes:
        """The file's text from the current rows."""
        self.prepared += 1
        rows = self.rows
        head = f"{CHECKPOINT_VERSION}\n{len(rows)}\n"
        body = "\n".join(rows.values())
        return (head + body + "\n" if rows else head).encode("utf-8")

    def failed(self) -> None:
        """The last prepared text was not written: write the file again at the next prepare."""
        self.stale = True
