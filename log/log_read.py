"""Reading a partition log: whole batches as file ranges for sendfile, aborted transactions for
read_committed, timestamp lookups for ListOffsets, segment views for the cleaner.

Part of ``PartitionLog`` (see ``log.partition_log`` for the design; ``log.log_core`` holds
the state every part shares).
"""

from __future__ import annotations

import bisect

from log import _records
from log.log_core import (
    FileRange,
    LogCore,
    OffsetAndTimestamp,
    ReadResult,
    _largest_timestamp,
    logger,
)
from log.segment import CorruptBatch, LogSegment
from log.txn_index import AbortedTxn
from protocol.errors import ErrorCode, KafkaError
from protocol.records import LOG_OVERHEAD, BatchHeader, crc_ok

__all__ = ["LogRead"]


class LogRead(LogCore):
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
            end = _fit(seg, pos, h, self._end_position(i, pos, limit), max_bytes - total,
                       total == 0 and min_one_message)
            if end == pos:
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

    def _end_position(self, i: int, pos: int, limit: int) -> int:
        """Where the batches below ``limit`` end in segment ``i``, reading from ``pos``."""
        segments = self._segments
        seg = segments[i]
        if limit == self._leo and i == len(segments) - 1:
            return seg.size
        if i + 1 < len(segments) and limit >= segments[i + 1].base_offset:
            return seg.size
        bound = seg.translate(limit, pos)
        return bound[0] if bound is not None else seg.size

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


def _fit(seg: LogSegment, pos: int, h: BatchHeader, end_pos: int, budget: int,
         whole_first: bool) -> int:
    """The end of the whole batches from ``pos`` that fit in ``budget`` bytes (up to
    ``end_pos``); ``pos`` when none does, unless ``whole_first``: then the first batch whole
    (KIP-74)."""
    if end_pos - pos <= budget:
        return end_pos
    end = seg.boundary_at_or_before(pos + budget, pos)
    if end == pos and whole_first:
        end = pos + h.batch_length + LOG_OVERHEAD
    return end
