"""Shrinking a partition log: truncation (followers, recovery), DeleteRecords and retention by
size and time. Segments go whole, through the segment list; the log start offset, the high
watermark, the leader epochs and the producer state follow."""

from __future__ import annotations

from collections.abc import Callable

from log.leader_epoch import LeaderEpochCache
from log.log_state import LogOffsets
from log.producer_log import ProducerLog
from log.segment import LogSegment
from log.segment_list import SegmentList, largest_timestamp
from protocol.errors import ErrorCode, KafkaError

__all__ = ["LogRetention"]


class LogRetention:
    """Truncation, DeleteRecords and retention of one log. ``roll(now_ms)`` is the log's roll
    (retention that deletes every segment rolls a new one first)."""

    def __init__(self, segments: SegmentList, offsets: LogOffsets, producers: ProducerLog,
                 epochs: LeaderEpochCache, roll: Callable[[int], LogSegment]) -> None:
        self._segments = segments
        self._offsets = offsets
        self._producers = producers
        self._epochs = epochs
        self._roll = roll

    def truncate_to(self, offset: int) -> None:
        """``PartitionLog.truncate_to``."""
        offsets = self._offsets
        if offset >= offsets.end:
            # as Kafka: no data to drop, but an epoch entry at the log end (a leader that
            # assigned its epoch and then wrote nothing) would conflict with the new leader's
            self._epochs.truncate_from_end(offsets.end)
            return
        if offset < offsets.start:
            self.truncate_fully(offset)
            return
        offsets.begin_truncation()
        segments = self._segments
        offsets.end = max(segments.truncate_to(offset), offsets.start)
        offsets.clamp_to_end()
        self._epochs.truncate_from_end(offsets.end)
        self._producers.reload(segments, offsets.end, segments.now_ms)

    def truncate_fully(self, offset: int) -> None:
        """Delete all data; the log restarts empty at ``offset``."""
        offsets = self._offsets
        offsets.begin_truncation()
        segments = self._segments
        self._producers.delete_all_snapshots()
        segments.reset(offset, segments.now_ms)
        offsets.end = offsets.start = offsets.hw = offset
        offsets.rp_floor = min(offsets.rp_floor, offset)
        self._producers.state.clear(offset)
        self._epochs.clear()

    def delete_records_before(self, offset: int) -> int:
        """``PartitionLog.delete_records_before``."""
        offsets = self._offsets
        if offset > offsets.hw or offset < 0:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"offset {offset} is above the high watermark {offsets.hw}",
            )
        if offset > offsets.start:
            offsets.start = offset
            self._epochs.truncate_from_start(offset)
            self._delete_below_start()
        return offsets.start

    def delete_old_segments(self, now_ms: int) -> int:
        """``PartitionLog.delete_old_segments``."""
        segments = self._segments
        segments.now_ms = now_ms
        deleted = self._delete_below_start()
        config = segments.config
        if not config.delete:
            return deleted
        retention_bytes = config.retention_bytes
        if retention_bytes >= 0:
            diff = segments.size_bytes - retention_bytes

            def over_size(seg: LogSegment) -> bool:
                nonlocal diff
                if diff - seg.size >= 0:
                    diff -= seg.size
                    return True
                return False

            if diff > 0:
                deleted += self._delete_oldest_while(over_size)
        retention_ms = config.retention_ms
        if retention_ms >= 0:
            deleted += self._delete_oldest_while(
                lambda seg: now_ms - largest_timestamp(seg) > retention_ms
            )
        return deleted

    def _delete_below_start(self) -> int:
        """The segments entirely below the log start offset (DeleteRecords, a start moved by
        a follower); they never reach past the high watermark."""
        return self._deleted(self._segments.delete_below(self._offsets.start))

    def _delete_oldest_while(self, predicate: Callable[[LogSegment], bool]) -> int:
        """Oldest first, the segments the predicate picks, up to the first it does not, never
        one reaching past the high watermark, never the empty active segment."""
        segments = self._segments
        offsets = self._offsets
        count = 0
        for i, seg in enumerate(segments):
            nxt = segments.next_base(i)
            upper = nxt if nxt is not None else offsets.end
            if upper > offsets.hw or (nxt is None and seg.size == 0) or not predicate(seg):
                break
            count += 1
        if not count:
            return 0
        if count == len(segments):
            self._roll(segments.now_ms)  # the log keeps its end offset
        return self._deleted(segments.delete_oldest(count))

    def _deleted(self, doomed: list[LogSegment]) -> int:
        """After segments were deleted: their snapshots go, the log start offset follows."""
        if not doomed:
            return 0
        for seg in doomed:
            self._producers.delete_snapshot(seg.base_offset)
        offsets = self._offsets
        offsets.changed()  # the first segment changed (log-start-offset-checkpoint)
        new_start = max(offsets.start, self._segments.base_offset)
        if new_start != offsets.start:
            offsets.start = new_start
            self._epochs.truncate_from_start(new_start)
        offsets.hw = max(offsets.hw, offsets.start)
        return len(doomed)
