"""Copying a partition log into its future replica (Kafka's ``ReplicaAlterLogDirsThread``).

A replica moves to another log directory through a *future* log there
(``<topic>-<partition>.<id>-future``, see ``log.dirs``) that follows the current log as a
follower follows its leader: whole batches read from the current log (file ranges, as a Fetch
reads them) are appended verbatim with :meth:`PartitionLog.append_as_follower` (the leader's
offsets, epochs and producer state kept; one step per batch header, never per record). The
read (:meth:`LogCopy.plan`) runs on the owning thread; reading the bytes and appending them
(:meth:`LogCopy.apply`) touch only the future log and the descriptors the read holds, so they
may run on a worker thread while the owner keeps appending to the current log.

Before each chunk the future is aligned with the current log, as Kafka's thread does through
OffsetForLeaderEpoch: a log start offset that moved up (retention, DeleteRecords) is followed,
and a truncation of the current log (a follower's) cuts the future where their epochs agree.
"""

from __future__ import annotations

from log.partition_log import PartitionLog, ReadResult
from protocol.records import iter_headers

__all__ = ["LogCopy", "COPY_CHUNK_BYTES"]

#: bytes read from the current log per step (Kafka's thread fetches ``replica.fetch.max.bytes``,
#: 1 MiB by default); a larger first batch is copied whole
COPY_CHUNK_BYTES = 1 << 20


class LogCopy:
    """The copy of one current log into ``future``."""

    def __init__(self, future: PartitionLog) -> None:
        self.future = future
        self._generation: int | None = None
        #: bytes copied so far (the throttle counts them)
        self.bytes_copied = 0

    def lag(self, source: PartitionLog) -> int:
        """Offsets the future is behind (DescribeLogDirs' ``offset_lag`` of a future replica)."""
        return max(0, source.log_end_offset - self.future.log_end_offset)

    def caught_up(self, source: PartitionLog) -> bool:
        return self.future.log_end_offset == source.log_end_offset and not self._stale(source)

    def _stale(self, source: PartitionLog) -> bool:
        return self._generation is not None and source.generation != self._generation

    def plan(self, source: PartitionLog, max_bytes: int = COPY_CHUNK_BYTES) -> ReadResult | None:
        """Align the future with ``source``, then the next batches to copy (None: none). Owning
        thread only."""
        f = self.future
        if self._stale(source) or f.log_end_offset > source.log_end_offset:
            self._realign(source)
        self._generation = source.generation
        start = source.log_start_offset
        if start > f.log_end_offset:
            f.truncate_fully_and_start_at(start)
        elif start > f.log_start_offset:
            f.update_high_watermark(start)
            f.delete_records_before(start)
        f.update_high_watermark(source.high_watermark)
        if f.log_end_offset >= source.log_end_offset:
            return None
        result = source.read(f.log_end_offset, max_bytes)
        return result if result.size else None

    def _realign(self, source: PartitionLog) -> None:
        """The current log was truncated since the last chunk: cut the future where the two
        agree (the end of the future's latest epoch in the current log)."""
        f = self.future
        target = min(f.log_end_offset, source.log_end_offset)
        latest = f.leader_epochs.latest_epoch()
        if latest is not None:
            epoch, end = source.end_offset_for_epoch(latest)
            target = min(target, end) if epoch >= 0 else source.log_start_offset
        if target < f.log_end_offset:
            if target <= f.log_start_offset:
                f.truncate_fully_and_start_at(source.log_start_offset)
            else:
                f.truncate_to(target)

    def apply(self, result: ReadResult, now_ms: int) -> int:
        """Append the batches ``result`` names to the future (any one thread; nothing else may
        touch the future meanwhile). Returns the bytes copied."""
        buf = bytearray(result.read_bytes())
        leo = self.future.log_end_offset
        batches = [(pos, h) for pos, h in iter_headers(buf) if h.base_offset >= leo]
        if batches:
            self.future.append_as_follower(buf, batches, now_ms=now_ms)
        self.bytes_copied += len(buf)
        return len(buf)
