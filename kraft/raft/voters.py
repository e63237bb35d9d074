"""KIP-853 dynamic voters: the voter set lives in the log as VotersRecord control records.

The set in force is the one in the latest VotersRecord on the replica's log, committed or not
(the static ``controller.quorum.voters`` set before any), and it reverts when a truncation
removes that record. The leader changes it one voter at a time (AddRaftVoter, RemoveRaftVoter)
and only once it has committed an entry of its own epoch, so any two consecutive sets share a
majority; the answer to the admin client waits until the record is committed.
"""

from __future__ import annotations

from dataclasses import dataclass

from kraft.raft import messages as m
from protocol._generated.add_raft_voter_request import AddRaftVoterRequest
from protocol._generated.add_raft_voter_response import AddRaftVoterResponse
from protocol._generated.remove_raft_voter_request import RemoveRaftVoterRequest
from protocol._generated.remove_raft_voter_response import RemoveRaftVoterResponse
from protocol._generated.voters_record import VotersRecord
from protocol.errors import ErrorCode
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


def voters_batch(voters: frozenset[int], base_offset: int, epoch: int, now_ms: int) -> bytes:
    """A control batch holding one VotersRecord (Kafka's KRAFT_VOTERS control type)."""
    rec = VotersRecord(version_=VOTERS_RECORD_VERSION, voters=[
        VotersRecord.Voter(voter_id=v, k_raft_version_feature=VotersRecord.KRaftVersionFeature(
            min_supported_version=KRAFT_VERSION_MIN, max_supported_version=KRAFT_VERSION_MAX))
        for v in sorted(voters)])
    record = SimpleRecord(encode_control_key(ControlType.KRAFT_VOTERS),
                          rec.encode(VOTERS_RECORD_VERSION), (), now_ms)
    return build_batch([record], base_offset=base_offset, is_control=True,
                       partition_leader_epoch=epoch)


def voter_sets_in(data: bytes) -> list[tuple[int, frozenset[int]]]:
    """(offset, voter set) of every VotersRecord in whole batches ``data`` (control batches only
    are decoded, so this stays cheap on the data path)."""
    out: list[tuple[int, frozenset[int]]] = []
    for pos, h in iter_headers(data):
        if not h.is_control:
            continue
        _hdr, records = decode_batch_records(data, pos)
        for r in records:
            key = r.key or b""
            if len(key) >= 4 and int.from_bytes(key[2:4], "big") == ControlType.KRAFT_VOTERS:
                rec = VotersRecord.decode(r.value or b"", VOTERS_RECORD_VERSION)
                out.append((r.offset, frozenset(v.voter_id for v in rec.voters)))
    return out


@dataclass(slots=True)
class PendingChange:
    """A voter change appended by the leader, answered when the high watermark passes it."""

    msg: m.RaftMessage
    offset: int
    remove: bool


class VoterHistory:
    """The voter sets found in the log, by offset, over the static set."""

    def __init__(self, static: frozenset[int]) -> None:
        self.static = static
        self.sets: list[tuple[int, frozenset[int]]] = []

    @property
    def current(self) -> frozenset[int]:
        return self.sets[-1][1] if self.sets else self.static

    def last_offset(self) -> int:
        return self.sets[-1][0] if self.sets else -1

    def add_from(self, data: bytes) -> None:
        for offset, voters in voter_sets_in(data):
            if offset > self.last_offset():
                self.sets.append((offset, voters))

    def truncate(self, end_offset: int) -> None:
        while self.sets and self.sets[-1][0] >= end_offset:
            self.sets.pop()

    def reset(self, snapshot_sets: list[tuple[int, frozenset[int]]]) -> None:
        """After installing a snapshot: what it holds is all there is."""
        self.sets = list(snapshot_sets[-1:])


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
