"""Appending to a partition log: as leader (offsets, leader epoch and LogAppendTime patched into
the client's bytes, producer state validated) and as follower (the leader's batches verbatim),
and segment rolling.

Part of ``PartitionLog`` (see ``log.partition_log`` for the design; ``log.log_core`` holds
the state every part shares).
"""

from __future__ import annotations

import crc32c as _crc32c

from log.log_core import _OFFSET_LENGTH_EPOCH, AppendInfo, LogCore, _aborted, _control_or_none
from log.producer_state import ProducerAppend
from log.segment import INT32_MAX, LogSegment
from protocol.errors import ErrorCode, KafkaError
from protocol.records import LOG_OVERHEAD, MAGIC_V2, BatchHeader, set_max_timestamp_log_append

__all__ = ["LogAppend"]


class LogAppend(LogCore):
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
        return self._append(buf, batches, leader_epoch, now_ms, log_append_time, coordinator,
                            marker_transaction_version)

    def _check_batches(self, batches: list[tuple[int, BatchHeader]], coordinator: bool) -> int:
        """Batch-level checks (magic, sizes, offset range, sequence); returns the total size."""
        config = self.config
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

    def _append(
        self,
        buf: bytearray | memoryview,
        batches: list[tuple[int, BatchHeader]],
        leader_epoch: int,
        now_ms: int,
        log_append_time: bool | None,
        coordinator: bool = False,
        marker_transaction_version: int = 0,
    ) -> AppendInfo:
        if self._closed:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "log is closed")
        self._now_ms = now_ms
        config = self.config
        use_lat = config.log_append_time if log_append_time is None else log_append_time
        total = self._check_batches(batches, coordinator)

        if not coordinator:
            dup = self._duplicate_of(batches)
            if dup is not None:
                return dup

        view = buf if isinstance(buf, memoryview) else memoryview(buf)
        first_offset = self._leo
        final, pa, max_ts = self._assign_offsets(
            view, batches, leader_epoch, now_ms if use_lat else None, coordinator,
            marker_transaction_version,
        )
        next_offset = final[-1].base_offset + final[-1].last_offset_delta + 1
        last_offset = next_offset - 1

        active = self._segments[-1]
        if self._should_roll(active, total, final[0].max_timestamp, max_ts, last_offset, now_ms):
            active = self._roll_now(now_ms)

        # Patch the headers in place (header-only; the CRC is recomputed only for LogAppendTime).
        for (pos, h), nh in zip(batches, final, strict=True):
            # baseOffset, batchLength (unchanged) and partitionLeaderEpoch in one call
            _OFFSET_LENGTH_EPOCH.pack_into(view, pos, nh.base_offset, h.batch_length, leader_epoch)
            if use_lat:
                set_max_timestamp_log_append(view, pos, h.batch_length + LOG_OVERHEAD, now_ms)
        self._write_and_commit(active, _contiguous_runs(view, batches), final, pa, next_offset)
        latest = self.leader_epochs.latest_epoch()
        if leader_epoch >= 0 and (latest is None or leader_epoch > latest):
            self.leader_epochs.assign(leader_epoch, first_offset)
        return AppendInfo(
            first_offset,
            last_offset,
            now_ms if use_lat else -1,
            self.log_start_offset,
            max_timestamp=max_ts,
            size_bytes=total,
            completed_txns=tuple(pa.completed_txns) if pa is not None else (),
        )

    def _duplicate_of(self, batches: list[tuple[int, BatchHeader]]) -> AppendInfo | None:
        """A duplicate of one of its producer's last 5 batches is answered with the original
        offsets (and nothing is written)."""
        ps = self.producer_state
        for _pos, h in batches:
            if h.producer_id >= 0 and not h.is_control:
                dup = ps.find_duplicate(h)
                if dup is not None:
                    return AppendInfo(
                        dup.first_offset,
                        dup.last_offset,
                        dup.timestamp_ms,
                        self.log_start_offset,
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
        ps = self.producer_state
        next_offset = self._leo
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
                    pa.add_control_batch(nh, *_control_or_none(view[pos : pos + size]),
                                         marker_transaction_version)
                else:
                    pa.add_data_batch(nh)
            next_offset += h.last_offset_delta + 1
            if nh.max_timestamp > max_ts:
                max_ts = nh.max_timestamp
            final.append(nh)
        return final, pa, max_ts

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
        if self._closed:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "log is closed")
        self._now_ms = now_ms
        if len(batches) > 1 and _size(batches) > self.config.segment_bytes:
            return self._append_as_follower_in_parts(buf, batches, now_ms)
        total = self._check_batches(batches, coordinator=True)
        expected = self._leo
        max_ts = -1
        headers: list[BatchHeader] = []
        for _pos, h in batches:
            if h.base_offset < expected:
                raise KafkaError(
                    ErrorCode.INVALID_RECORD,
                    f"replicated batch at offset {h.base_offset} is below {expected} "
                    f"(log end offset {self._leo})",
                )
            expected = h.base_offset + h.last_offset_delta + 1
            max_ts = max(max_ts, h.max_timestamp)
            headers.append(h)
        view = buf if isinstance(buf, memoryview) else memoryview(buf)
        ps = self.producer_state
        pa = ps.prepare(validate=False)
        for pos, h in batches:
            if h.producer_id >= 0:
                if h.is_control:
                    size = h.batch_length + LOG_OVERHEAD
                    pa.add_control_batch(h, *_control_or_none(view[pos : pos + size]))
                else:
                    pa.add_data_batch(h)
        first_offset, last_offset = headers[0].base_offset, expected - 1
        active = self._segments[-1]
        if self._should_roll(active, total, headers[0].max_timestamp, max_ts, last_offset, now_ms):
            active = self._roll_now(now_ms)
        self._write_and_commit(active, _contiguous_runs(view, batches), headers, pa, expected)
        epochs = self.leader_epochs
        changed = False
        for h in headers:  # as Kafka: each batch's epoch, replacing entries it contradicts
            if h.partition_leader_epoch >= 0:
                changed |= epochs.assign(h.partition_leader_epoch, h.base_offset, persist=False)
        if changed:
            # Written in place now and fsynced by the next flush, as a leader's new epoch
            # (``assign_leader_epoch``): not two fsyncs on the event loop per new epoch. A
            # crash recovers the unflushed range, whose batches rebuild these entries.
            self._flush_epochs_lazily()
        return AppendInfo(
            first_offset, last_offset, -1, self.log_start_offset, max_timestamp=max_ts,
            size_bytes=total, completed_txns=tuple(pa.completed_txns),
        )

    def _append_as_follower_in_parts(
        self, buf: bytearray | memoryview, batches: list[tuple[int, BatchHeader]], now_ms: int
    ) -> AppendInfo:
        """A fetch answer larger than ``segment.bytes`` (many small batches of a topic with a
        small segment size): appended in runs that each fit a segment, rolling between them,
        rather than refused (which would stall the follower on the same answer forever)."""
        limit = self.config.segment_bytes
        parts: list[list[tuple[int, BatchHeader]]] = [[]]
        size = 0
        for pos, h in batches:
            n = h.batch_length + LOG_OVERHEAD
            if parts[-1] and size + n > limit:
                parts.append([])
                size = 0
            parts[-1].append((pos, h))
            size += n
        infos = [self.append_as_follower(buf, part, now_ms=now_ms) for part in parts]
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
        self._leo = next_offset
        ps = self.producer_state
        if pa is not None:
            ps.commit(pa, next_offset)
            for txn in pa.completed_txns:
                if txn.is_aborted:
                    active.txn_index.append(_aborted(txn, ps))
        else:
            ps.map_end_offset = next_offset
        if self._epochs_unwritten:  # the first batch after becoming leader
            self._flush_epochs_lazily()

    def _should_roll(
        self,
        seg: LogSegment,
        size: int,
        first_ts: int,
        max_ts: int,
        last_offset: int,
        now_ms: int,
    ) -> bool:
        if seg.size == 0:
            return False
        if seg.size > self.config.segment_bytes - size:
            return True
        base_ts = seg.rolling_base_timestamp
        waited = max_ts - base_ts if base_ts is not None and base_ts >= 0 else now_ms - seg.created_ms
        if waited > self.config.segment_ms - self._roll_jitter_ms(seg):
            return True
        if seg.indexes_full():
            return True
        return last_offset - seg.base_offset > INT32_MAX

    def _roll_jitter_ms(self, seg: LogSegment) -> int:
        """``segment.jitter.ms``: Kafka draws a random share per segment; ours is a hash of the
        partition and base offset (reproducible, and layer 1 has no unseeded randomness)."""
        jitter = self.config.segment_jitter_ms
        if jitter <= 0:
            return 0
        h = _crc32c.crc32c(f"{self.dir.name}/{seg.base_offset}".encode())
        return int(h % min(jitter, self.config.segment_ms))


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
