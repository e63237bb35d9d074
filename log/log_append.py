"""Appending to a partition log: as leader (offsets, leader epoch and LogAppendTime patched into
the client's bytes, producer state validated) and as follower (the leader's batches verbatim),
rolling the active segment when it is full or old.

Hot path (ARCHITECTURE.md section 3): one Python loop over the batches, never over records;
the bytes are written with one ``os.writev``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import NamedTuple

import crc32c as _crc32c

from log.leader_epoch import LeaderEpochCache
from log.log_state import DirSync, LogOffsets
from log.producer_log import ProducerLog, aborted_entry, control_or_none
from log.producer_state import CompletedTxn, ProducerAppend
from log.segment import INT32_MAX, LogSegment
from log.segment_list import SegmentList
from protocol.errors import ErrorCode, KafkaError
from protocol.records import LOG_OVERHEAD, MAGIC_V2, BatchHeader, set_max_timestamp_log_append

__all__ = ["AppendInfo", "LogAppender"]

_OFFSET_LENGTH_EPOCH = struct.Struct(">qii")


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


class LogAppender:
    """The appends of one log. ``roll(now_ms)`` is the log's roll (producer snapshot, new
    segment, roll listener); ``epochs_unwritten``: the epoch cache holds an entry not written
    to its file yet, written with the next append (``PartitionLog.assign_leader_epoch``)."""

    def __init__(self, segments: SegmentList, offsets: LogOffsets, producers: ProducerLog,
                 epochs: LeaderEpochCache, dir_sync: DirSync,
                 roll: Callable[[int], LogSegment]) -> None:
        self._segments = segments
        self._offsets = offsets
        self._producers = producers
        self._epochs = epochs
        self._dir_sync = dir_sync
        self._roll = roll
        self.epochs_unwritten = False

    def append(
        self,
        buf: bytearray | memoryview,
        batches: list[tuple[int, BatchHeader]],
        leader_epoch: int,
        now_ms: int,
        log_append_time: bool | None,
        coordinator: bool = False,
        marker_transaction_version: int = 0,
    ) -> AppendInfo:
        """``PartitionLog.append``: a leader's append."""
        segments = self._segments
        if segments.closed:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "log is closed")
        segments.now_ms = now_ms
        use_lat = segments.config.log_append_time if log_append_time is None else log_append_time
        total = self._check_batches(batches, coordinator)

        if not coordinator:
            dup = self._duplicate_of(batches)
            if dup is not None:
                return dup

        view = buf if isinstance(buf, memoryview) else memoryview(buf)
        first_offset = self._offsets.end
        final, pa, max_ts = self._assign_offsets(
            view, batches, leader_epoch, now_ms if use_lat else None, coordinator,
            marker_transaction_version,
        )
        next_offset = final[-1].base_offset + final[-1].last_offset_delta + 1
        last_offset = next_offset - 1

        active = segments.active
        if self.should_roll(active, total, max_ts, last_offset, now_ms):
            active = self._roll(now_ms)

        # Patch the headers in place (header-only; the CRC is recomputed only for LogAppendTime).
        for (pos, h), nh in zip(batches, final, strict=True):
            # baseOffset, batchLength (unchanged) and partitionLeaderEpoch in one call
            _OFFSET_LENGTH_EPOCH.pack_into(view, pos, nh.base_offset, h.batch_length, leader_epoch)
            if use_lat:
                set_max_timestamp_log_append(view, pos, h.batch_length + LOG_OVERHEAD, now_ms)
        self._write_and_commit(active, _contiguous_runs(view, batches), final, pa, next_offset)
        epochs = self._epochs
        latest = epochs.latest_epoch()
        if leader_epoch >= 0 and (latest is None or leader_epoch > latest):
            epochs.assign(leader_epoch, first_offset)
        return AppendInfo(
            first_offset,
            last_offset,
            now_ms if use_lat else -1,
            self._offsets.start,
            max_timestamp=max_ts,
            size_bytes=total,
            completed_txns=tuple(pa.completed_txns) if pa is not None else (),
        )

    def _check_batches(self, batches: list[tuple[int, BatchHeader]], coordinator: bool) -> int:
        """Batch-level checks (magic, sizes, offset range, sequence); returns the total size."""
        config = self._segments.config
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
        return total

    def _duplicate_of(self, batches: list[tuple[int, BatchHeader]]) -> AppendInfo | None:
        """A duplicate of one of its producer's last 5 batches is answered with the original
        offsets (and nothing is written)."""
        ps = self._producers.state
        for _pos, h in batches:
            if h.producer_id >= 0 and not h.is_control:
                dup = ps.find_duplicate(h)
                if dup is not None:
                    return AppendInfo(
                        dup.first_offset,
                        dup.last_offset,
                        dup.timestamp_ms,
                        self._offsets.start,
                        duplicate=True,
                        max_timestamp=dup.timestamp_ms,
                    )
        return None

    def _assign_offsets(
        self,
        view: memoryview,
        batches: list[tuple[int, BatchHeader]],
        leader_epoch: int,
        log_append_time_ms: int | None,
        coordinator: bool,
        marker_transaction_version: int = 0,
    ) -> tuple[list[BatchHeader], ProducerAppend | None, int]:
        """The batches' final headers (offsets from the log end, this leader epoch, the
        LogAppendTime when given), checked against the producer state in memory. Returns them,
        the staged producer state and the largest timestamp."""
        ps = self._producers.state
        next_offset = self._offsets.end
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
                h.max_timestamp if log_append_time_ms is None else log_append_time_ms,
                h.producer_id,
                h.producer_epoch,
                h.base_sequence,
                h.records_count,
            )
            if nh.producer_id >= 0:
                if pa is None:
                    # a coordinator's write (TxnOffsetCommit, its markers) skips the sequence
                    # checks but not the epoch's: a TxnOffsetCommit of an epoch the coordinator
                    # already aborted would open a transaction no marker closes (Kafka's
                    # AppendOrigin.COORDINATOR: INVALID_PRODUCER_EPOCH)
                    pa = ps.prepare(validate=not coordinator, validate_epoch=True)
                if nh.is_control:
                    size = h.batch_length + LOG_OVERHEAD
                    pa.add_control_batch(nh, *control_or_none(view[pos : pos + size]),
                                         marker_transaction_version)
                else:
                    pa.add_data_batch(nh)
            next_offset += h.last_offset_delta + 1
            if nh.max_timestamp > max_ts:
                max_ts = nh.max_timestamp
            final.append(nh)
        return final, pa, max_ts

    def append_as_follower(
        self, buf: bytearray | memoryview, batches: list[tuple[int, BatchHeader]], now_ms: int
    ) -> AppendInfo:
        """``PartitionLog.append_as_follower``: the leader's batches, verbatim."""
        segments = self._segments
        if segments.closed:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "log is closed")
        segments.now_ms = now_ms
        if len(batches) > 1 and _size(batches) > segments.config.segment_bytes:
            return self._append_as_follower_in_parts(buf, batches, now_ms)
        total = self._check_batches(batches, coordinator=True)
        expected = self._offsets.end
        max_ts = -1
        for _pos, h in batches:
            if h.base_offset < expected:
                raise KafkaError(
                    ErrorCode.INVALID_RECORD,
                    f"replicated batch at offset {h.base_offset} is below {expected} "
                    f"(log end offset {self._offsets.end})",
                )
            expected = h.base_offset + h.last_offset_delta + 1
            max_ts = max(max_ts, h.max_timestamp)
        headers = [h for _pos, h in batches]
        view = buf if isinstance(buf, memoryview) else memoryview(buf)
        pa = self._producers.state.prepare(validate=False)
        for pos, h in batches:
            if h.producer_id >= 0:
                if h.is_control:
                    size = h.batch_length + LOG_OVERHEAD
                    pa.add_control_batch(h, *control_or_none(view[pos : pos + size]))
                else:
                    pa.add_data_batch(h)
        first_offset, last_offset = headers[0].base_offset, expected - 1
        active = segments.active
        if self.should_roll(active, total, max_ts, last_offset, now_ms):
            active = self._roll(now_ms)
        self._write_and_commit(active, _contiguous_runs(view, batches), headers, pa, expected)
        epochs = self._epochs
        changed = False
        for h in headers:  # as Kafka: each batch's epoch, replacing entries it contradicts
            if h.partition_leader_epoch >= 0:
                changed |= epochs.assign(h.partition_leader_epoch, h.base_offset, persist=False)
        if changed:
            # Written in place now and fsynced by the next flush, as a leader's new epoch
            # (``write_epochs``): not two fsyncs on the event loop per new epoch (issue 27). A
            # crash recovers the unflushed range, whose batches rebuild these entries.
            self.write_epochs()
        return AppendInfo(
            first_offset, last_offset, -1, self._offsets.start, max_timestamp=max_ts,
            size_bytes=total, completed_txns=tuple(pa.completed_txns),
        )

    def _append_as_follower_in_parts(
        self, buf: bytearray | memoryview, batches: list[tuple[int, BatchHeader]], now_ms: int
    ) -> AppendInfo:
        """A fetch answer larger than ``segment.bytes`` (many small batches of a topic with a
        small segment size): appended in runs that each fit a segment, rolling between them,
        rather than refused (which would stall the follower on the same answer forever)."""
        limit = self._segments.config.segment_bytes
        parts: list[list[tuple[int, BatchHeader]]] = [[]]
        size = 0
        for pos, h in batches:
            n = h.batch_length + LOG_OVERHEAD
            if parts[-1] and size + n > limit:
                parts.append([])
                size = 0
            parts[-1].append((pos, h))
            size += n
        infos = [self.append_as_follower(buf, part, now_ms) for part in parts]
        first, last = infos[0], infos[-1]
        return AppendInfo(
            first.first_offset, last.last_offset, -1, last.log_start_offset,
            max_timestamp=max(i.max_timestamp for i in infos),
            size_bytes=sum(i.size_bytes for i in infos),
            completed_txns=tuple(t for i in infos for t in i.completed_txns),
        )

    def _write_and_commit(
        self,
        active: LogSegment,
        chunks: list[memoryview],
        headers: list[BatchHeader],
        pa: ProducerAppend | None,
        next_offset: int,
    ) -> None:
        """Write the batches' bytes, then move the log end offset and the producer state."""
        try:
            active.write(chunks, headers)
        except OSError as exc:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"write failed: {exc}") from exc
        self._offsets.end = next_offset
        ps = self._producers.state
        if pa is not None:
            ps.commit(pa, next_offset)
            for txn in pa.completed_txns:
                if txn.is_aborted:
                    active.txn_index.append(aborted_entry(txn, ps))
        else:
            ps.map_end_offset = next_offset
        if self.epochs_unwritten:  # the first batch after becoming leader
            self.write_epochs()

    def write_epochs(self) -> None:
        """Write the epoch cache's file if it changed, without an fsync (the next flush's)."""
        self.epochs_unwritten = False
        epochs = self._epochs
        if epochs.flush(sync=False) and epochs.path is not None:
            self._dir_sync.wrote(epochs.path)

    def should_roll(self, seg: LogSegment, size: int, max_ts: int, last_offset: int,
                    now_ms: int) -> bool:
        """Whether ``size`` more bytes, up to ``last_offset`` with timestamps up to ``max_ts``,
        go to a new segment rather than ``seg`` (Kafka's ``shouldRoll``)."""
        if seg.size == 0:
            return False
        config = self._segments.config
        if seg.size > config.segment_bytes - size:
            return True
        base_ts = seg.rolling_base_timestamp
        waited = max_ts - base_ts if base_ts is not None and base_ts >= 0 else now_ms - seg.created_ms
        if waited > config.segment_ms - self._roll_jitter_ms(seg):
            return True
        if seg.indexes_full():
            return True
        return last_offset - seg.base_offset > INT32_MAX

    def _roll_jitter_ms(self, seg: LogSegment) -> int:
        """``segment.jitter.ms``: Kafka draws a random share per segment; ours is a hash of the
        partition and base offset (reproducible, and layer 1 has no unseeded randomness)."""
        config = self._segments.config
        jitter = config.segment_jitter_ms
        if jitter <= 0:
            return 0
        h = _crc32c.crc32c(f"{self._segments.dir.name}/{seg.base_offset}".encode())
        return int(h % min(jitter, config.segment_ms))


def _contiguous_runs(view: memoryview, batches: list[tuple[int, BatchHeader]]) -> list[memoryview]:
    """The batches' bytes as few slices as possible (adjacent batches share one)."""
    chunks: list[memoryview] = []
    run_start = run_end = -1
    for pos, h in batches:
        size = h.batch_length + LOG_OVERHEAD
        if pos == run_end:
            run_end += size
        else:
            if run_end > run_start:
                chunks.append(view[run_start:run_end])
            run_start, run_end = pos, pos + size
    chunks.append(view[run_start:run_end])
    return chunks


def _size(batches: list[tuple[int, BatchHeader]]) -> int:
    return sum(h.batch_length + LOG_OVERHEAD for _pos, h in batches)
