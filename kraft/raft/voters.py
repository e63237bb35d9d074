"""KIP-853 dynamic voters: the voter set lives in the log as VotersRecord control records.

The set in force is the one in the latest VotersRecord on the replica's log, committed or not
(the static ``controller.quorum.voters`` set before any), and it reverts when a truncation
removes that record. The leader changes it one voter at a time (AddRaftVoter, RemoveRaftVoter)
and only once it has committed an entry of its own epoch, so any two consecutive sets share a
majority; the answer to the admin client waits until the record is committed.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from kraft.raft import messages as m
from protocol._generated.add_raft_voter_request import AddRaftVoterRequest
from protocol._generated.add_raft_voter_response import AddRaftVoterResponse
from protocol._generated.k_raft_version_record import KRaftVersionRecord
from protocol._generated.remove_raft_voter_request import RemoveRaftVoterRequest
from protocol._generated.remove_raft_voter_response import RemoveRaftVoterResponse
from protocol._generated.voters_record import VotersRecord
from protocol.errors import ErrorCode
from protocol.primitives import ZERO_UUID
from protocol.records import (
    ControlType,
    SimpleRecord,
    build_batch,
    decode_batch_records,
    encode_control_key,
    iter_headers,
)

VOTERS_RECORD_VERSION = 0
KRAFT_VERSION_MIN, KRAFT_VERSION_MAX = 0, 1


def voters_batch(record: VotersRecord, base_offset: int, epoch: int, now_ms: int) -> bytes:
    """A control batch holding one VotersRecord (Kafka's KRAFT_VOTERS control type)."""
    rec = VotersRecord(version_=VOTERS_RECORD_VERSION, voters=sorted(
        record.voters, key=lambda v: v.voter_id))
    value = SimpleRecord(encode_control_key(ControlType.KRAFT_VOTERS),
                         rec.encode(VOTERS_RECORD_VERSION), (), now_ms)
    return build_batch([value], base_offset=base_offset, is_control=True,
                       partition_leader_epoch=epoch)


def epoch_start_records(history: VoterHistory, kraft_version: int, node_id: int,
                        listeners: list[tuple[str, str, int]], now_ms: int) -> list[SimpleRecord]:
    """What a new leader writes after its LeaderChange (Kafka's start-of-epoch control
    records): with kraft.version 1, a KRaftVersionRecord and the VotersRecord in force when no
    VotersRecord was ever written to the log (the bootstrap checkpoint's voters, so that a
    replica that never read the checkpoint learns them) or when its own entry's endpoints
    differ from ``listeners`` (then with its entry updated)."""
    if kraft_version < 1 or not history.entries:
        return []
    record = history.current_record
    own = next((v for v in record.voters if v.voter_id == node_id), None)
    moved = own is not None and bool(listeners) and [
        (e.name, e.host, int(e.port)) for e in own.endpoints] != listeners
    if history.in_log() and not moved:
        return []
    if own is not None and moved:
        f = own.k_raft_version_feature
        record = with_voter(record, voter_entry(node_id, own.voter_directory_id, listeners,
                                                f.min_supported_version, f.max_supported_version))
    version = KRaftVersionRecord(version_=0, k_raft_version=kraft_version)
    return [SimpleRecord(encode_control_key(ControlType.KRAFT_VERSION), version.encode(0), (),
                         now_ms),
            SimpleRecord(encode_control_key(ControlType.KRAFT_VOTERS),
                         record.encode(VOTERS_RECORD_VERSION), (), now_ms)]


def voter_entry(voter_id: int, directory_id: uuid.UUID, endpoints: list[tuple[str, str, int]],
                kraft_min: int = KRAFT_VERSION_MIN,
                kraft_max: int = KRAFT_VERSION_MAX) -> VotersRecord.Voter:
    """One voter of a VotersRecord: its replica key, endpoints (listener name, host, port) and
    supported kraft.version range."""
    return VotersRecord.Voter(
        voter_id=voter_id, voter_directory_id=directory_id,
        endpoints=[VotersRecord.Endpoint(name=n, host=h, port=p) for n, h, p in endpoints],
        k_raft_version_feature=VotersRecord.KRaftVersionFeature(
            min_supported_version=kraft_min, max_supported_version=kraft_max))


def ids_record(voters: frozenset[int]) -> VotersRecord:
    """A VotersRecord of bare ids (a static set with no endpoints known)."""
    return VotersRecord(version_=VOTERS_RECORD_VERSION,
                        voters=[voter_entry(v, ZERO_UUID, []) for v in sorted(voters)])


def with_voter(record: VotersRecord, voter: VotersRecord.Voter) -> VotersRecord:
    """``record`` with ``voter`` added, or replacing the voter of the same id."""
    others = [v for v in record.voters if v.voter_id != voter.voter_id]
    return VotersRecord(version_=VOTERS_RECORD_VERSION,
                        voters=sorted([*others, voter], key=lambda v: v.voter_id))


def without_voter(record: VotersRecord, voter_id: int) -> VotersRecord:
    return VotersRecord(version_=VOTERS_RECORD_VERSION,
                        voters=[v for v in record.voters if v.voter_id != voter_id])


def endpoints_of(record: VotersRecord | None, voter_id: int) -> list[tuple[str, str, int]] | None:
    """(name, host, port) of ``voter_id``'s endpoints in ``record``; None if it is no voter."""
    for v in record.voters if record is not None else ():
        if v.voter_id == voter_id:
            return [(e.name, e.host, int(e.port)) for e in v.endpoints]
    return None


def voter_records_in(data: bytes) -> list[tuple[int, VotersRecord]]:
    """(offset, record) of every VotersRecord in whole batches ``data`` (control batches only
    are decoded, so this stays cheap on the data path)."""
    out: list[tuple[int, VotersRecord]] = []
    for pos, h in iter_headers(data):
        if not h.is_control:
            continue
        _hdr, records = decode_batch_records(data, pos)
        for r in records:
            key = r.key or b""
            if len(key) >= 4 and int.from_bytes(key[2:4], "big") == ControlType.KRAFT_VOTERS:
                out.append((r.offset, VotersRecord.decode(r.value or b"", VOTERS_RECORD_VERSION)))
    return out


def voter_sets_in(data: bytes) -> list[tuple[int, frozenset[int]]]:
    """(offset, voter ids) of every VotersRecord in whole batches ``data``."""
    return [(off, frozenset(v.voter_id for v in rec.voters))
            for off, rec in voter_records_in(data)]


@dataclass(slots=True)
class PendingChange:
    """A voter change appended by the leader, answered when the high watermark passes it."""

    msg: m.RaftMessage
    offset: int
    remove: bool


class VoterHistory:
    """The VotersRecords found in the log, by offset, over the static set."""

    def __init__(self, static: frozenset[int]) -> None:
        self.static = static
        #: (offset, record, its voter ids), oldest first
        self.entries: list[tuple[int, VotersRecord, frozenset[int]]] = []

    @property
    def current(self) -> frozenset[int]:
        return self.entries[-1][2] if self.entries else self.static

    @property
    def current_record(self) -> VotersRecord:
        """The record in force at the end of the log (bare ids for a static set)."""
        return self.entries[-1][1] if self.entries else ids_record(self.static)

    def record_at(self, end_offset: int) -> VotersRecord | None:
        """The VotersRecord in force for the log before ``end_offset`` (a snapshot's), if any."""
        found = None
        for offset, record, _ids in self.entries:
            if offset >= end_offset:
                break
            found = record
        return found

    def last_offset(self) -> int:
        return self.entries[-1][0] if self.entries else -1

    def add_from(self, data: bytes) -> None:
        for offset, record in voter_records_in(data):
            if offset > self.last_offset():
                self._add(offset, record)

    def _add(self, offset: int, record: VotersRecord) -> None:
        self.entries.append((offset, record, frozenset(v.voter_id for v in record.voters)))

    def truncate(self, end_offset: int) -> None:
        while self.entries and self.entries[-1][0] >= end_offset:
            self.entries.pop()

    def reset(self, snapshot_records: list[tuple[int, VotersRecord]], end_offset: int) -> None:
        """After loading or installing the snapshot ending at ``end_offset``: what it holds is
        all there is (its record counts as at ``end_offset - 1``, -1 for the bootstrap one)."""
        self.entries = []
        for _offset, record in snapshot_records[-1:]:
            self._add(end_offset - 1, record)

    def in_log(self) -> bool:
        """Whether a VotersRecord was ever written to the log (not only the bootstrap
        checkpoint's, Kafka's offset -1)."""
        return any(offset >= 0 for offset, _r, _ids in self.entries)


def add_voter_response(error: int, message: str | None = None) -> AddRaftVoterResponse:
    return AddRaftVoterResponse(error_code=error, error_message=message)


def remove_voter_response(error: int, message: str | None = None) -> RemoveRaftVoterResponse:
    return RemoveRaftVoterResponse(error_code=error, error_message=message)


def change_error(node_voters: frozenset[int], req: AddRaftVoterRequest | RemoveRaftVoterRequest,
                 pending: bool, established: bool, caught_up: bool) -> tuple[int, str | None]:
    """Kafka's refusals for a voter change, in its order (NONE when the change may go ahead)."""
    add = isinstance(req, AddRaftVoterRequest)
    if pending:
        return ErrorCode.REQUEST_TIMED_OUT, "another voter change is in progress"
    if not established:
        return ErrorCode.REQUEST_TIMED_OUT, "the leader has not committed in its epoch yet"
    if add and req.voter_id in node_voters:
        return ErrorCode.DUPLICATE_VOTER, f"{req.voter_id} is already a voter"
    if not add and req.voter_id not in node_voters:
        return ErrorCode.VOTER_NOT_FOUND, f"{req.voter_id} is not a voter"
    if not add and len(node_voters) == 1:
        return ErrorCode.INVALID_REQUEST, "cannot remove the last voter"
    if add and not caught_up:
        return ErrorCode.REQUEST_TIMED_OUT, f"{req.voter_id} has not caught up with the leader"
    return ErrorCode.NONE, None
