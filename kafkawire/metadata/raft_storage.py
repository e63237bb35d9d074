"""The durable parts a metadata ``RaftNode`` runs on: the log with its ``.checkpoint``
snapshots, and the ``quorum-state`` file.

``MetadataRaftLog`` is ``PartitionRaftLog`` (``__cluster_metadata-0`` segments) plus the
snapshot side of ``kraft.raft.log.RaftLog`` over the partition's ``SnapshotStore``
(``kafkawire/metadata/snapshots.py``): the latest snapshot id, chunked reads for a
FetchSnapshot answer, and installing one a follower received (checked, made a
``.checkpoint``, the log restarted at its end offset). Snapshots are written by the metadata
quorum from its image (``create_snapshot`` is not how this driver takes them).

``QuorumStateFile`` keeps the election state in ``quorum-state`` as Kafka writes it
(``kraft/quorum_state.py``: version 0 with the static voters, version 1 for ``kraft.version``
1), replaced atomically and fsynced before a vote or candidacy leaves.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

from kafkawire.metadata.snapshots import SnapshotStore
from kraft.quorum_state import (
    QuorumState,
    QuorumStateError,
    decode_quorum_state,
    encode_quorum_state,
)
from kraft.raft.log import SnapshotId as RaftSnapshotId
from kraft.raft.partition_log import PartitionRaftLog
from kraft.raft.state import ElectionState
from kraft.raft.voters import VOTERS_RECORD_VERSION
from kraft.snapshot import SnapshotError
from kraft.snapshot import SnapshotId as FileSnapshotId
from log.checkpoint import fsync_dir
from log.partition_log import PartitionLog
from protocol._generated.voters_record import VotersRecord
from protocol.records import ControlType, decode_batch_records, iter_headers

log = logging.getLogger("kafkawire.metadata")


def voters_records_in(data: bytes) -> list[VotersRecord]:
    """The VotersRecords (KIP-853) in the control batches of whole batches ``data``."""
    out: list[VotersRecord] = []
    for pos, h in iter_headers(data):
        if not h.is_control:
            continue
        _hdr, records = decode_batch_records(data, pos)
        for r in records:
            key = r.key or b""
            if len(key) >= 4 and int.from_bytes(key[2:4], "big") == ControlType.KRAFT_VOTERS:
                out.append(VotersRecord.decode(r.value or b"", VOTERS_RECORD_VERSION))
    return out


class MetadataRaftLog(PartitionRaftLog):
    def __init__(self, plog: PartitionLog, clock: Callable[[], int],
                 snapshots: SnapshotStore,
                 on_installed: Callable[[FileSnapshotId], None] | None = None,
                 on_voters: Callable[[VotersRecord], None] | None = None) -> None:
        super().__init__(plog, clock)
        self.snapshots = snapshots
        #: told after a snapshot from the leader replaced the log (the image reloads from it)
        self.on_installed = on_installed
        #: told of every VotersRecord appended (its endpoints say where the voters listen)
        self.on_voters = on_voters
        #: set by the running driver: ``flush`` (called by the node inside ``handle`` and
        #: ``poll``) leaves the fsync to the driver, which runs ``flush_now`` off the event
        #: loop before it polls the node again (so before the next Fetch reports the offset)
        self.defer_flush = False

    def flush(self) -> None:
        if not self.defer_flush:
            super().flush()

    def flush_now(self) -> None:
        super().flush()

    def append(self, data: bytes) -> None:
        super().append(data)
        if self.on_voters is not None:
            for rec in voters_records_in(data):
                self.on_voters(rec)

    def last_epoch(self) -> int:
        """The epoch of the last batch; with no batch since the snapshot the log starts at
        (a snapshot just installed), that snapshot's epoch."""
        if self.plog.leader_epochs.latest_epoch() is None:
            sid = self.latest_snapshot_id()
            if sid is not None:
                return sid.epoch
        return super().last_epoch()

    def latest_snapshot_id(self) -> RaftSnapshotId | None:
        ids = [s for s in self.snapshots.snapshot_ids() if s.offset >= self.start_offset]
        if not ids:
            return None
        return RaftSnapshotId(ids[-1].offset, ids[-1].epoch)

    def read_snapshot(self, sid: RaftSnapshotId, position: int,
                      max_bytes: int) -> tuple[bytes, int]:
        fsid = FileSnapshotId(sid.end_offset, sid.epoch)
        try:
            size = self.snapshots.size(fsid)
            chunk = max(0, min(max_bytes, size - position))
            return self.snapshots.read_chunk(fsid, position, chunk), size
        except FileNotFoundError:
            raise KeyError(sid) from None

    def create_snapshot(self, end_offset: int) -> RaftSnapshotId | None:
        return None  # the metadata quorum writes snapshots of its image

    def install_snapshot(self, sid: RaftSnapshotId, data: bytes) -> None:
        """A whole snapshot from the leader: a bad one is refused (the follower asks again)."""
        fsid = FileSnapshotId(sid.end_offset, sid.epoch)
        part = self.snapshots.dir / (fsid.file_name + ".part")
        part.unlink(missing_ok=True)
        self.snapshots.append_part(fsid, 0, data)
        try:
            self.snapshots.freeze(fsid)
        except SnapshotError as e:
            log.error("refusing snapshot %s from the leader: %s", fsid.file_name, e)
            raise
        self.restart_at(sid.end_offset)
        for old in self.snapshots.snapshot_ids():
            if old < fsid:
                self.snapshots.delete(old)
        log.info("installed metadata snapshot %s from the leader", fsid.file_name)
        if self.on_installed is not None:
            self.on_installed(fsid)


class QuorumStateFile:
    """``quorum-state`` (Kafka's JSON), the ``QuorumStateStore`` of a RaftNode."""

    def __init__(self, path: Path, static_voters: tuple[int, ...], data_version: int) -> None:
        self.path = path
        self.static_voters = static_voters
        self.data_version = data_version
        self._last: ElectionState | None = None
        self._loaded = False

    def read(self) -> ElectionState | None:
        if not self._loaded:
            self._loaded = True
            if self.path.exists():
                try:
                    qs = decode_quorum_state(self.path.read_text())
                    self._last = ElectionState(max(qs.leader_epoch, 0), qs.leader_id,
                                               qs.voted_id)
                except (QuorumStateError, OSError) as e:
                    log.warning("ignoring unreadable %s: %s", self.path, e)
        return self._last

    def write(self, state: ElectionState) -> None:
        # Kafka writes an elected leader without the vote (withElectedLeader): once a leader
        # is known in an epoch no vote is granted in it, so the vote need not be kept.
        voted = -1 if state.leader_id >= 0 else state.voted_id
        qs = QuorumState(leader_id=state.leader_id, leader_epoch=state.epoch,
                         voted_id=voted, current_voters=self.static_voters,
                         data_version=self.data_version)
        write_file_atomically(self.path, encode_quorum_state(qs).encode())
        self._last = state
        self._loaded = True


def write_file_atomically(path: Path, data: bytes) -> None:
    """``<path>.tmp``, fsync, rename over ``path``, fsync the directory."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)
