"""Shrinking a partition log: truncation (followers, recovery), DeleteRecords and retention by size
and time.

Part of ``PartitionLog`` (see ``log.partition_log`` for the design; ``log.log_core`` holds
the state every part shares).
"""

from __future__ import annotations

from collections.abc import Callable

from log.log_core import LogCore, _largest_timestamp
from log.segment import LogSegment
from protocol.errors import ErrorCode, KafkaError

__all__ = ["LogRetention"]


class LogRetention(LogCore):
    def truncate_to(self, offset: int) -> None:
        """Drop everything from the batch containing ``offset`` onwards (follower truncation).

        The log end offset becomes the next offset after the last batch kept (or the active
        segment's base offset when it is empty), as a restart would derive it, but never less
        than the log start offset (a compaction gap can hold the start)."""
        if offset >= self._leo:
            # as Kafka: no data to drop, but an epoch entry at the log end (a leader that
            # assigned its epoch and then wrote nothing) would conflict with the new leader's
            self.leader_epochs.truncate_from_end(self._leo)
            return
        if offset < self.log_start_offset:
            self._truncate_fully(offset)
            return
        self._bump_generation()
        while len(self._segments) > 1 and self._segments[-1].base_offset > offset:
            self._drop_last_segment()
        active = self._segments[-1]
        self._forget(active)
        active.truncate_to(offset)
        active.open_for_append()
        nxt = active.read_next_offset()
        self._leo = max(nxt if nxt is not None else active.base_offset, self.log_start_offset)
        self._after_truncation()

    def _drop_last_segment(self) -> None:
        seg = self._segments.pop()
        self._bases.pop()
        self._forget(seg)
        seg.delete_files()
        self._dir_version += 1

    def _after_truncation(self) -> None:
        leo = self._leo
        self.log_start_offset = min(self.log_start_offset, leo)
        self._hw = min(self._hw, leo)
        self._rp_floor = min(self._rp_floor, leo)
        self.leader_epochs.truncate_from_end(leo)
        self.producer_state.clear(self._segments[0].base_offset)
        self._load_producer_state()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete all data; the log restarts empty at ``offset``."""
        self._truncate_fully(offset)

    def _bump_generation(self) -> None:
        """Before truncating: freeze the recovery point, then invalidate running flushes."""
        self._rp_floor = min(self.recovery_point, self._leo)
        self._generation += 1
        self._offsets_changed()

    def _truncate_fully(self, offset: int) -> None:
        self._bump_generation()
        for seg in self._segments:
            self._forget(seg)
            seg.delete_files()
        for off in list(self._snapshots):
            self._delete_snapshot(off)
        seg = LogSegment.create(self.dir, offset, self.config, self._now_ms)
        seg.open_for_append()
        self._segments = [seg]
        self._bases = [offset]
        self._leo = self.log_start_offset = self._hw = offset
        self._rp_floor = min(self._rp_floor, offset)
        self._dir_version += 1
        self.producer_state.clear(offset)
        self.leader_epochs.clear()

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to ``offset`` (<= high watermark) and
        delete segments entirely below it. Returns the new log start offset."""
        if offset > self._hw or offset < 0:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"offset {offset} is above the high watermark {self._hw}",
            )
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self.leader_epochs.truncate_from_start(offset)
            self._delete_segments_while(
                lambda seg, nxt: nxt is not None and nxt.base_offset <= self.log_start_offset
            )
        return self.log_start_offset

    def delete_old_segments(self, now_ms: int) -> int:
        """Retention (Kafka's ``deleteOldSegments``). Returns how many segments were deleted.

        Always: segments entirely below the log start offset (DeleteRecords). With
        ``cleanup.policy`` containing ``delete`` also, oldest first, the segments beyond
        ``retention.bytes`` and those whose largest timestamp is older than ``retention.ms``.
        Never a segment reaching past the high watermark, never the empty active segment; when
        every segment goes, a new empty one is rolled first so the log keeps its end offset.
        """
        self._now_ms = now_ms
        deleted = self._delete_segments_while(
            lambda seg, nxt: nxt is not None and nxt.base_offset <= self.log_start_offset
        )
        if not self.config.delete:
            return deleted
        retention_bytes = self.config.retention_bytes
        if retention_bytes >= 0:
            diff = sum(s.size for s in self._segments) - retention_bytes

            def over_size(seg: LogSegment, nxt: LogSegment | None) -> bool:
                nonlocal diff
                if diff - seg.size >= 0:
                    diff -= seg.size
                    return True
                return False

            if diff > 0:
                deleted += self._delete_segments_while(over_size)
        retention_ms = self.config.retention_ms
        if retention_ms >= 0:
            deleted += self._delete_segments_while(
                lambda seg, nxt: now_ms - _largest_timestamp(seg) > retention_ms
            )
        return deleted

    def _delete_segments_while(
        self, predicate: Callable[[LogSegment, LogSegment | None], bool]
    ) -> int:
        segments = self._segments
        count = 0
        for i, seg in enumerate(segments):
            nxt = segments[i + 1] if i + 1 < len(segments) else None
            upper = nxt.base_offset if nxt is not None else self._leo
            if upper > self._hw or (nxt is None and seg.size == 0) or not predicate(seg, nxt):
                break
            count += 1
        if not count:
            return 0
        if count == len(segments):
            self._roll_now(self._now_ms)
        doomed = self._segments[:count]
        del self._segments[:count]
        del self._bases[:count]
        for seg in doomed:
            self._forget(seg)
            seg.delete_files()
            self._delete_snapshot(seg.base_offset)
        self._dir_version += 1
        self._offsets_changed()  # the first segment changed (log-start-offset-checkpoint)
        new_start = max(self.log_start_offset, self._segments[0].base_offset)
        if new_start != self.log_start_offset:
            self.log_start_offset = new_start
            self.leader_epochs.truncate_from_start(new_start)
        self._hw = max(self._hw, self.log_start_offset)
        return count
