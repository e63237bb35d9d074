"""The log and the state file a Raft replica needs, as small interfaces, plus in-memory versions.

The replica appends and reads whole record batches (Kafka's v2 format, so what it reads goes on
the wire in a Fetch answer unchanged). Offsets are assigned by the leader; a follower appends
the leader's batches as they are. ``flush`` makes everything appended durable; a crash loses
what was not flushed (``MemoryRaftLog.crash`` does that in the simulation). A snapshot holds
the state up to its ``end_offset`` (exclusive); installing one replaces the log below it.

The durable implementations (``__cluster_metadata-0`` segments, ``.checkpoint`` files, the
``quorum-state`` file) live with the metadata log in kafkawire/; these in-memory ones serve the
simulation and the tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Protocol

from kraft.raft.state import ElectionState
from protocol.records import iter_headers


class SnapshotId(NamedTuple):
    end_offset: int
    epoch: int


class EpochEnd(NamedTuple):
    """The largest local epoch <= the one asked for, and the offset where it ends (-1, -1 if none)."""

    epoch: int
    end_offset: int


UNDEFINED_EPOCH_END = EpochEnd(-1, -1)


class RaftLog(Protocol):
    @property
    def start_offset(self) -> int: ...
    @property
    def end_offset(self) -> int: ...
    @property
    def flushed_end_offset(self) -> int: ...
    def last_epoch(self) -> int: ...
    def append(self, data: bytes) -> None: ...
    def truncate_to(self, offset: int) -> None: ...
    def read(self, offset: int, max_bytes: int) -> bytes: ...
    def end_offset_for_epoch(self, epoch: int) -> EpochEnd: ...
    def flush(self) -> None: ...
    def latest_snapshot_id(self) -> SnapshotId | None: ...
    def read_snapshot(self, sid: SnapshotId, position: int, max_bytes: int) -> tuple[bytes, int]: ...
    def create_snapshot(self, end_offset: int) -> SnapshotId | None: ...
    def install_snapshot(self, sid: SnapshotId, data: bytes) -> None: ...


class QuorumStateStore(Protocol):
    def read(self) -> ElectionState | None: ...
    def write(self, state: ElectionState) -> None: ...


class LogError(Exception):
    """A batch that does not continue the log (our bug or a peer's: the caller decides)."""


@dataclass(slots=True)
class _Batch:
    base_offset: int
    next_offset: int
    epoch: int
    data: bytes


class MemoryRaftLog:
    """Batches in a list; epochs kept as Kafka's leader-epoch cache: (epoch, start offset)."""

    def __init__(self) -> None:
        self._batches: list[_Batch] = []
        self._epochs: list[tuple[int, int]] = []
        self._start = 0
        self._flushed = 0
        self._snapshot: tuple[SnapshotId, bytes] | None = None
        self.version = 0  # bumped on every change (lets checkers skip an unchanged log)

    @property
    def start_offset(self) -> int:
        return self._start

    @property
    def end_offset(self) -> int:
        return self._batches[-1].next_offset if self._batches else self._start

    @property
    def flushed_end_offset(self) -> int:
        return self._flushed

    def last_epoch(self) -> int:
        if self._batches:
            return self._batches[-1].epoch
        return self._snapshot[0].epoch if self._snapshot else 0

    def batches(self) -> list[tuple[int, int, int, bytes]]:
        """(base offset, next offset, epoch, bytes) of every batch (for checks)."""
        return [(b.base_offset, b.next_offset, b.epoch, b.data) for b in self._batches]

    def snapshot(self) -> tuple[SnapshotId, bytes] | None:
        return self._snapshot

    def append(self, data: bytes) -> None:
        self.version += 1
        headers = iter_headers(data)
        if not headers or sum(h.size for _, h in headers) != len(data):
            raise LogError("append needs whole record batches")
        for pos, h in headers:
            if h.base_offset != self.end_offset:
                raise LogError(f"batch at {h.base_offset} does not continue the log at {self.end_offset}")
            if h.partition_leader_epoch < self.last_epoch():
                raise LogError(f"batch epoch {h.partition_leader_epoch} below {self.last_epoch()}")
            if not self._epochs or self._epochs[-1][0] < h.partition_leader_epoch:
                self._epochs.append((h.partition_leader_epoch, h.base_offset))
            self._batches.append(_Batch(h.base_offset, h.next_offset, h.partition_leader_epoch,
                                        bytes(data[pos:pos + h.size])))

    def truncate_to(self, offset: int) -> None:
        """Drop every batch that ends after ``offset`` (whole batches, as Kafka does)."""
        self.version += 1
        while self._batches and self._batches[-1].next_offset > offset:
            self._batches.pop()
        end = self.end_offset
        base = self._snapshot[0].epoch if self._snapshot else None
        self._epochs = [(e, s) for e, s in self._epochs
                        if s < end or (s == self._start and e == base)]
        self._flushed = min(self._flushed, end)

    def read(self, offset: int, max_bytes: int) -> bytes:
        """Whole batches from the one holding ``offset``; at least one batch when there is one."""
        out = bytearray()
        for b in self._batches:
            if b.next_offset <= offset:
                continue
            if out and len(out) + len(b.data) > max_bytes:
                break
            out += b.data
        return bytes(out)

    def end_offset_for_epoch(self, epoch: int) -> EpochEnd:
        found = -1
        for i, (e, _start) in enumerate(self._epochs):
            if e > epoch:
                break
            found = i
        if found < 0:
            return UNDEFINED_EPOCH_END
        nxt = self._epochs[found + 1][1] if found + 1 < len(self._epochs) else self.end_offset
        return EpochEnd(self._epochs[found][0], nxt)

    def flush(self) -> None:
        self.version += 1
        self._flushed = self.end_offset

    def crash(self) -> None:
        """Lose everything appended since the last flush."""
        self.truncate_to(self._flushed)

    def latest_snapshot_id(self) -> SnapshotId | None:
        return self._snapshot[0] if self._snapshot else None

    def read_snapshot(self, sid: SnapshotId, position: int, max_bytes: int) -> tuple[bytes, int]:
        if self._snapshot is None or self._snapshot[0] != sid:
            raise KeyError(sid)
        data = self._snapshot[1]
        return data[position:position + max_bytes], len(data)

    def create_snapshot(self, end_offset: int) -> SnapshotId | None:
        """Snapshot the flushed prefix up to the last batch boundary <= end_offset; drop it."""
        self.version += 1
        keep = [b for b in self._batches if b.next_offset <= min(end_offset, self._flushed)]
        if not keep:
            return None
        last = keep[-1]
        sid = SnapshotId(last.next_offset, last.epoch)
        prefix = self._snapshot[1] if self._snapshot else b""
        self._snapshot = (sid, prefix + b"".join(b.data for b in keep))
        self._batches = self._batches[len(keep):]
        self._start = sid.end_offset
        self._epochs = [(sid.epoch, self._start)] + [e for e in self._epochs if e[1] >= self._start
                                                     and e[0] > sid.epoch]
        return sid

    def install_snapshot(self, sid: SnapshotId, data: bytes) -> None:
        """Replace the whole log by the snapshot (a follower that fell behind the leader's start)."""
        self.version += 1
        self._snapshot = (sid, data)
        self._batches = []
        self._start = sid.end_offset
        self._epochs = [(sid.epoch, self._start)]
        self._flushed = self._start


class MemoryQuorumStateStore:
    """A durable-on-write election state (Kafka writes quorum-state with an fsync)."""

    def __init__(self) -> None:
        self.state: ElectionState | None = None
        self.writes = 0

    def read(self) -> ElectionState | None:
        return self.state

    def write(self, state: ElectionState) -> None:
        self.state = state
        self.writes += 1
