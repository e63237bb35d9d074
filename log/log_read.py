"""Reading a partition log: whole batches as file ranges for sendfile, aborted transactions for
read_committed, timestamp lookups for ListOffsets.

Hot path (ARCHITECTURE.md section 3): a read locates the batch holding the fetch offset with
the sparse offset index and a short scan of batch headers and returns file ranges that start
and end at batch boundaries; no record is looked at. Data that was on disk when the log was
opened and that recovery did not scan is CRC-checked the first time a read returns it
(``LogSegment.verify_range``); a bad batch is reported once and never served.

The read interface (``SegmentReader``) is what a list of segments answers. ``LogReader`` is
the local list's; with tiered storage (KIP-405) a remote segment list implements it too, and
``LogReader.read`` sends a fetch below the local list's ``start_offset`` there.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from log import _records
from log.log_state import LogOffsets
from log.segment import CorruptBatch, LogSegment, SegmentFile
from log.segment_list import SegmentList
from log.txn_index import AbortedTxn
from protocol.errors import ErrorCode, KafkaError
from protocol.records import LOG_OVERHEAD, BatchHeader, crc_ok

__all__ = ["FileRange", "ReadResult", "OffsetAndTimestamp", "SegmentReader", "LogReader"]

logger = logging.getLogger(__name__)


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


class SegmentReader(Protocol):
    """What a list of segments answers (the local one now, a remote one with tiered storage)."""

    @property
    def start_offset(self) -> int:
        """The first offset the list holds."""
        ...

    def read_batches(self, result: ReadResult, fetch_offset: int, max_bytes: int, limit: int,
                     min_one_message: bool) -> None:
        """Add to ``result`` the whole batches from the one holding ``fetch_offset``, below
        ``limit``, within ``max_bytes`` (the first one whole if ``min_one_message``)."""
        ...

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        ...

    def offset_for_timestamp(self, timestamp: int, start: int,
                             max_offset: int | None) -> OffsetAndTimestamp | None:
        ...


class LogReader:
    """The reads of one log, over its local segments (a ``SegmentReader``)."""

    def __init__(self, segments: SegmentList, offsets: LogOffsets) -> None:
        self._segments = segments
        self._offsets = offsets
        self._reported_corrupt: set[tuple[int, int]] = set()

    @property
    def start_offset(self) -> int:
        return self._segments.base_offset

    def read(self, fetch_offset: int, max_bytes: int, max_offset: int | None,
             min_one_message: bool) -> ReadResult:
        """``PartitionLog.read``."""
        offsets = self._offsets
        leo = offsets.end
        if fetch_offset < offsets.start or fetch_offset > leo:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"offset {fetch_offset} outside [{offsets.start}, {leo}]",
            )
        result = ReadResult([], 0, -1, offsets.start, leo, offsets.hw)
        limit = leo if max_offset is None else min(max_offset, leo)
        if fetch_offset < limit:
            self.read_batches(result, fetch_offset, max_bytes, limit, min_one_message)
        return result

    def read_batches(self, result: ReadResult, fetch_offset: int, max_bytes: int, limit: int,
                     min_one_message: bool) -> None:
        segments = self._segments
        n = len(segments)
        i = segments.index_of(fetch_offset)
        target = fetch_offset
        total = 0
        while i < n:
            seg = segments[i]
            segments.touch(seg)
            found = seg.translate(max(target, seg.base_offset))
            if found is None:
                if seg.unverified_end and self._gap_corrupt(seg, i, target, fatal=total == 0):
                    break
                i += 1
                continue
            pos, h = found
            if pos < seg.unverified_end and not self._header_sound(seg, i, pos, h, target,
                                                                   fatal=total == 0):
                break
            if h.base_offset + h.last_offset_delta >= limit:
                break
            if result.first_offset < 0:
                result.first_offset = h.base_offset
            end = _fit(seg, pos, h, self._end_position(seg, i, n, pos, limit), max_bytes - total,
                       total == 0 and min_one_message)
            if end > pos and pos < seg.unverified_end:  # from before this open: CRC-check it
                end = self._verified_end(seg, i, pos, end, fatal=total == 0)
            if end <= pos:
                break
            result.ranges.append(FileRange(seg.file(), pos, end - pos))
            result.end = (seg.base_offset, end)
            total += end - pos
            if end < seg.size:
                break
            i += 1
            target = segments[i].base_offset if i < n else self._offsets.end
        result.size = total

    def _gap_corrupt(self, seg: LogSegment, i: int, target: int, *, fatal: bool) -> bool:
        """No batch at or after ``target`` in ``seg``: a gap, or a damaged header that stopped
        the scan? True (reported) for the latter."""
        start = seg.offset_index.lookup(max(target, seg.base_offset))[1]
        _good, bad = seg.verify_range(start, seg.size, self._segments.next_base(i))
        if bad is None:
            return False
        self._corrupt(seg, bad, fatal=fatal)
        return True

    def _header_sound(self, seg: LogSegment, i: int, pos: int, h: BatchHeader, target: int, *,
                      fatal: bool) -> bool:
        """Before trusting the offsets of an unchecked batch: is its header sound?"""
        size = h.batch_length + LOG_OVERHEAD
        next_base = self._segments.next_base(i)
        good, bad = seg.verify_range(pos, pos + size, next_base)
        if bad is not None and bad.position < pos and h.base_offset <= max(target, seg.base_offset):
            # damage before a batch that holds the offset asked for: serve from it
            good, bad = seg.verify_range(pos, pos + size, next_base, anchor=False)
        if bad is not None and good <= pos:
            self._corrupt(seg, bad, fatal=fatal)
            return False
        return True

    def _verified_end(self, seg: LogSegment, i: int, pos: int, end: int, *, fatal: bool) -> int:
        """Where the good batches of [pos, end) end (``pos`` or less: none is good)."""
        good, bad = seg.verify_range(pos, end, self._segments.next_base(i), anchor=False)
        if bad is None:
            return end
        self._corrupt(seg, bad, fatal=fatal and good <= pos)
        return good

    def _end_position(self, seg: LogSegment, i: int, n: int, pos: int, limit: int) -> int:
        """Where the batches below ``limit`` end in ``seg`` (position ``i`` of ``n``), reading
        from ``pos``."""
        if i == n - 1:
            if limit == self._offsets.end:
                return seg.size
        elif limit >= self._segments[i + 1].base_offset:
            return seg.size
        bound = seg.translate(limit, pos)
        return bound[0] if bound is not None else seg.size

    def _corrupt(self, seg: LogSegment, bad: CorruptBatch, *, fatal: bool) -> None:
        """A batch that fails its CRC or header check: report it once, never serve it.
        ``fatal``: nothing could be read before it, so the read fails with CORRUPT_MESSAGE."""
        key = (seg.base_offset, bad.position)
        name = self._segments.dir.name
        if key not in self._reported_corrupt:
            self._reported_corrupt.add(key)
            logger.error(
                "%s: corrupt record batch in segment %s at position %d (base offset %s): %s. "
                "It is below the recovery point (or the log was closed cleanly), so it was not "
                "checked at start-up; fetches stop before it and fail with CORRUPT_MESSAGE "
                "when they start at it. DeleteRecords past it, or restoring the partition from "
                "a replica, makes the partition readable again.",
                name, seg.log_path.name, bad.position,
                bad.base_offset if bad.base_offset >= 0 else "unknown", bad.reason,
            )
        if fatal:
            raise KafkaError(
                ErrorCode.CORRUPT_MESSAGE,
                f"corrupt record batch in {name} segment {seg.base_offset} at position "
                f"{bad.position}: {bad.reason}",
            )

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """``PartitionLog.aborted_transactions``."""
        out: list[AbortedTxn] = []
        for seg in self._segments.from_offset(fetch_offset):
            found, complete = seg.txn_index.collect(fetch_offset, upper_bound)
            out += found
            if complete:
                break
        return out

    def fetch_upper_bound(self, result: ReadResult) -> int:
        """``PartitionLog.fetch_upper_bound``."""
        if result.end is None:
            return result.first_offset if result.first_offset >= 0 else self._offsets.end
        base, end_pos = result.end
        segments = self._segments
        i = segments.index_of(base)
        seg = segments[i]
        if seg.base_offset == base:
            found = seg.offset_index.first_at_or_after_position(end_pos)
            if found is not None:
                return found
        nxt = segments.next_base(i)
        return nxt if nxt is not None else self._offsets.end

    def offset_for_timestamp(self, timestamp: int, start: int,
                             max_offset: int | None) -> OffsetAndTimestamp | None:
        """``PartitionLog.offset_for_timestamp`` from ``start`` (the log start offset) on."""
        segments = self._segments
        for seg in segments.for_timestamp(timestamp, start):
            segments.touch(seg)
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
            if h.base_offset + h.last_offset_delta < start:
                continue
            if max_offset is not None and h.base_offset >= max_offset:
                return OffsetAndTimestamp(-1, -1)
            if h.max_timestamp < timestamp:
                continue
            for off, ts in _record_timestamps(seg, p, h):
                if ts >= timestamp and off >= start:
                    if max_offset is not None and off >= max_offset:
                        return OffsetAndTimestamp(-1, -1)
                    return OffsetAndTimestamp(off, ts)
        return None


def _record_timestamps(seg: LogSegment, pos: int, h: BatchHeader) -> list[tuple[int, int]]:
    """(offset, timestamp) of each record of the batch at ``pos`` (ListOffsets only)."""
    size = h.batch_length + LOG_OVERHEAD
    data = seg.file().pread(size, pos)
    if len(data) < size or not crc_ok(data, 0, len(data)):
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"corrupt record batch at offset {h.base_offset}")
    try:
        return _records.record_timestamps(data)
    except (ValueError, IndexError, OSError, RuntimeError) as exc:
        raise KafkaError(
            ErrorCode.CORRUPT_MESSAGE, f"cannot decode batch at offset {h.base_offset}: {exc}"
        ) from exc


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
