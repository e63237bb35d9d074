"""RaftLog over a real ``PartitionLog`` (``__cluster_metadata-0``): the durable log a driver
gives RaftNode. Kafka's segment layout, indexes and leader-epoch checkpoint, so
``kafka-dump-log`` reads it.

Appends keep the offsets the Raft leader assigned (they continue the log exactly) and the
epoch of each batch: batches of several epochs are appended one epoch-run at a time, since
``PartitionLog.append`` stamps one leader epoch on what it appends. ``flush`` is the fsync;
``flushed_end_offset`` is the partition's recovery point. Snapshots (``.checkpoint`` files)
belong to the metadata snapshot store and are not part of this adapter yet.
"""

from __future__ import annotations

from collections.abc import Callable

from kraft.raft.log import UNDEFINED_EPOCH_END, EpochEnd, LogError, SnapshotId
from log.partition_log import PartitionLog
from protocol.records import iter_headers

READ_ALL_BYTES = 1 << 62


class PartitionRaftLog:
    def __init__(self, plog: PartitionLog, clock: Callable[[], int]) -> None:
        self.plog = plog
        self.clock = clock

    @property
    def start_offset(self) -> int:
        return int(self.plog.log_start_offset)

    @property
    def end_offset(self) -> int:
        return int(self.plog.log_end_offset)

    @property
    def flushed_end_offset(self) -> int:
        return min(int(self.plog.recovery_point), self.end_offset)

    def last_epoch(self) -> int:
        latest = self.plog.leader_epochs.latest_epoch()
        return 0 if latest is None else int(latest)

    def append(self, data: bytes) -> None:
        buf = bytearray(data)
        headers = iter_headers(buf)
        if not headers or sum(h.size for _, h in headers) != len(buf):
            raise LogError("append needs whole record batches")
        expected = self.end_offset
        for _pos, h in headers:
            if h.base_offset != expected:
                raise LogError(f"batch at {h.base_offset} does not continue the log at {expected}")
            expected = h.next_offset
        start = 0
        for i, (_pos, h) in enumerate(headers):
            if i + 1 == len(headers) or headers[i + 1][1].partition_leader_epoch != (
                    h.partition_leader_epoch):
                run = headers[start:i + 1]
                epoch = run[0][1].partition_leader_epoch
                if epoch < self.last_epoch():
                    raise LogError(f"batch epoch {epoch} below {self.last_epoch()}")
                self.plog.append(buf, run, leader_epoch=epoch, now_ms=self.clock(),
                                 log_append_time=False)
                start = i + 1

    def truncate_to(self, offset: int) -> None:
        self.plog.truncate_to(offset)

    def restart_at(self, offset: int) -> None:
        """Drop the whole log and start it empty at ``offset`` (a snapshot from the leader
        replaced everything before it)."""
        self.plog.truncate_fully_and_start_at(offset)

    def read(self, offset: int, max_bytes: int) -> bytes:
        if offset >= self.end_offset:
            return b""
        offset = max(offset, self.start_offset)
        return self.plog.read(offset, max_bytes, min_one_message=True).read_bytes()

    def end_offset_for_epoch(self, epoch: int) -> EpochEnd:
        found, end = self.plog.end_offset_for_epoch(epoch)
        latest = self.plog.leader_epochs.latest_epoch()
        if found < 0 and latest is not None and epoch > latest:
            return EpochEnd(int(latest), self.end_offset)  # Kafka: unknown; Raft: ours ends here
        if found < 0:
            return UNDEFINED_EPOCH_END
        if found == epoch and end == self.start_offset and epoch < self._first_epoch():
            return UNDEFINED_EPOCH_END  # Kafka answers (epoch, first start) below the first
        return EpochEnd(int(found), int(end))

    def _first_epoch(self) -> int:
        entries = self.plog.leader_epochs.entries()
        return int(entries[0][0]) if entries else -1

    def flush(self) -> None:
        self.plog.flush()

    def latest_snapshot_id(self) -> SnapshotId | None:
        return None

    def read_snapshot(self, sid: SnapshotId, position: int, max_bytes: int) -> tuple[bytes, int]:
        raise KeyError(sid)

    def create_snapshot(self, end_offset: int) -> SnapshotId | None:
        return None

    def install_snapshot(self, sid: SnapshotId, data: bytes) -> None:
        raise NotImplementedError("metadata snapshots (.checkpoint files) are not wired in yet")
