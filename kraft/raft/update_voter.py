"""KIP-853 UpdateRaftVoter (API 82): a voter tells the leader its current endpoints and the
kraft.version range it supports, when they differ from its entry in the VotersRecord (a voter
restarted with other listeners).

The leader (``handle_update``) checks as Kafka's leader does, in Kafka's order: the cluster id
(INCONSISTENT_CLUSTER_ID), the leader epoch (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH,
NOT_LEADER_OR_FOLLOWER), a voter change in flight or a leader that has not committed in its
epoch (REQUEST_TIMED_OUT), a supported range that excludes the kraft.version in force, a
zero directory id or endpoints without the leader's controller listener (INVALID_REQUEST), a
replica key that is no voter (VOTER_NOT_FOUND; an entry with the zero directory id, as a
static set's, matches any directory id of that voter). Then it appends a VotersRecord with that
voter's new entry and answers at once (the record commits as any other). With kraft.version
0 (a static quorum) there is no VotersRecord to change: the answer is NONE and nothing is
written.

The voter side (``maybe_send``): a voter following a leader, caught up with the high
watermark it last heard, whose own entry in the VotersRecord has other endpoints or another
kraft.version range than its configuration (``RaftConfig.listeners``), sends UpdateRaftVoter
to the leader, again after ``request_timeout_ms`` while its entry still differs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kraft.raft import messages as m
from kraft.raft.state import RaftState
from kraft.raft.voters import (
    KRAFT_VERSION_MAX,
    KRAFT_VERSION_MIN,
    endpoints_of,
    voter_entry,
    voters_batch,
    with_voter,
)
from protocol._generated.voters_record import VotersRecord
from protocol.errors import ErrorCode
from protocol.primitives import ZERO_UUID

if TYPE_CHECKING:
    from kraft.raft.node import RaftNode

NONE = ErrorCode.NONE
R = m.UpdateRaftVoterResponse


def _answer(node: RaftNode, error: int) -> m.UpdateRaftVoterResponse:
    leader = R.CurrentLeader(leader_id=node.leader_id, leader_epoch=node.epoch, host="", port=-1)
    names = [n for n, _h, _p in node.config.listeners[:1]]
    for name, host, port in endpoints_of(node.history.current_record, node.leader_id) or []:
        if not names or name.upper() == names[0].upper():
            leader.host, leader.port = host, port
            break
    return R(error_code=error, current_leader=leader)


def _entry(node: RaftNode, voter_id: int) -> VotersRecord.Voter | None:
    for v in node.history.current_record.voters:
        if v.voter_id == voter_id:
            return v
    return None


def handle_update(node: RaftNode, now_ms: int,
                  req: m.UpdateRaftVoterRequest) -> m.UpdateRaftVoterResponse:
    from kraft.raft.replication import leader_epoch_error
    if req.cluster_id is not None and req.cluster_id != node.cluster_id:
        return _answer(node, ErrorCode.INCONSISTENT_CLUSTER_ID)
    err = leader_epoch_error(node, req.current_leader_epoch)
    ls = node.leader
    if err != NONE or ls is None:
        return _answer(node, err or ErrorCode.NOT_LEADER_OR_FOLLOWER)
    version = node.kraft_version
    if version < 1:
        return _answer(node, NONE)
    if (ls.pending_change is not None or node.history.last_offset() >= node.high_watermark
            or node.high_watermark <= ls.epoch_start_offset):
        return _answer(node, ErrorCode.REQUEST_TIMED_OUT)
    feature = req.k_raft_version_feature
    if not feature.min_supported_version <= version <= feature.max_supported_version:
        return _answer(node, ErrorCode.INVALID_REQUEST)
    names = {li.name.upper() for li in req.listeners}
    own = node.config.listeners[:1]
    if (req.voter_id < 0 or req.voter_directory_id == ZERO_UUID or not names
            or (own and own[0][0].upper() not in names)):
        return _answer(node, ErrorCode.INVALID_REQUEST)
    old = _entry(node, req.voter_id)
    if old is None or old.voter_directory_id not in (req.voter_directory_id, ZERO_UUID):
        return _answer(node, ErrorCode.VOTER_NOT_FOUND)
    record = with_voter(node.history.current_record, voter_entry(
        req.voter_id, req.voter_directory_id,
        [(li.name, li.host, int(li.port)) for li in req.listeners],
        feature.min_supported_version, feature.max_supported_version))
    data = voters_batch(record, node.log.end_offset, node.epoch, now_ms)
    node.log.append(data)
    node.log_appended(now_ms, data)
    return _answer(node, NONE)


def _differs(entry: VotersRecord.Voter, listeners: list[tuple[str, str, int]]) -> bool:
    have = [(e.name, e.host, int(e.port)) for e in entry.endpoints]
    f = entry.k_raft_version_feature
    return have != listeners or (f.min_supported_version, f.max_supported_version) != (
        KRAFT_VERSION_MIN, KRAFT_VERSION_MAX)


def maybe_send(node: RaftNode, now_ms: int) -> None:
    """A caught-up voter whose VotersRecord entry is out of date asks the leader to update it."""
    listeners = list(node.config.listeners)
    if (node.kraft_version < 1 or not listeners or node.state != RaftState.FOLLOWER
            or not node.fetched_from_leader or node.log.end_offset < node.high_watermark
            or now_ms < node.update_voter_next_ms
            or node.has_inflight(node.leader_id, m.UpdateRaftVoterRequest)):
        return
    entry = _entry(node, node.node_id)
    if entry is None or not _differs(entry, listeners):
        return
    Q = m.UpdateRaftVoterRequest
    node.update_voter_next_ms = now_ms + node.config.request_timeout_ms
    node.send(now_ms, node.leader_id, Q(
        cluster_id=node.cluster_id, current_leader_epoch=node.epoch, voter_id=node.node_id,
        voter_directory_id=entry.voter_directory_id,
        listeners=[Q.Listener(name=n, host=h, port=p) for n, h, p in listeners],
        k_raft_version_feature=Q.KRaftVersionFeature(min_supported_version=KRAFT_VERSION_MIN,
                                                     max_supported_version=KRAFT_VERSION_MAX)))
