"""Elections: Vote (with KIP-996 pre-vote), BeginQuorumEpoch, EndQuorumEpoch, and the timers of
the Unattached, Prospective, Candidate and Resigned states.

Who grants a vote for epoch E to candidate C (whose log ends at (last epoch, end offset)):
* never when E is below our epoch (FENCED_LEADER_EPOCH), nor when C's log is behind ours;
* a real vote for a higher epoch first moves us to Unattached(E); then we grant when we have
  neither a leader nor a vote for someone else in E, and the grant is written down before the
  answer leaves;
* a pre-vote changes nothing here; we say yes unless we are the leader or a follower that still
  hears from its leader, so a replica cut off from a healthy quorum cannot win.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kraft.raft import messages as m
from kraft.raft import replication
from kraft.raft.state import RaftState
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kraft.raft.node import Inflight, RaftNode

NONE = ErrorCode.NONE


def handle_request(node: RaftNode, now_ms: int, msg: m.RaftMessage) -> m.RaftResponse | None:
    body = msg.body
    if isinstance(body, m.VoteRequest):
        return _vote(node, now_ms, body)
    if isinstance(body, m.BeginQuorumEpochRequest):
        return _begin_epoch(node, now_ms, body)
    if isinstance(body, m.EndQuorumEpochRequest):
        return _end_epoch(node, now_ms, body)
    return None


def _log_ok(node: RaftNode, last_epoch: int, end_offset: int) -> bool:
    return (last_epoch, end_offset) >= (node.log.last_epoch(), node.log.end_offset)


def _vote(node: RaftNode, now_ms: int, req: m.VoteRequest) -> m.VoteResponse:
    if req.cluster_id is not None and req.cluster_id != node.cluster_id:
        return m.vote_response(ErrorCode.INCONSISTENT_CLUSTER_ID)
    p = m.only_partition(list(req.topics))
    if not isinstance(p, m.VoteRequest.PartitionData) or req.topics[0].topic_name != m.METADATA_TOPIC:
        return m.vote_response(ErrorCode.INVALID_REQUEST)
    if req.voter_id >= 0 and req.voter_id != node.node_id:
        return m.vote_response(NONE, ErrorCode.INVALID_VOTER_KEY, node.leader_id, node.epoch)
    cand, epoch = p.replica_id, p.replica_epoch
    # A static quorum (no VotersRecord) refuses strangers; with KIP-853 voter records we may
    # lag behind the candidate's set, so the candidate counts only its own voters' answers.
    static = node.kraft_version == 0
    if static and (not node.is_voter or cand not in node.voters):
        return m.vote_response(NONE, ErrorCode.INCONSISTENT_VOTER_SET, node.leader_id, node.epoch)
    if epoch < node.epoch:
        return m.vote_response(NONE, ErrorCode.FENCED_LEADER_EPOCH, node.leader_id, node.epoch)
    log_ok = _log_ok(node, p.last_offset_epoch, p.last_offset)
    if p.pre_vote:
        # A follower still hearing from its leader says no; one that came back to its leader
        # after a lost pre-vote and has not fetched since says yes (KIP-996).
        hears_leader = node.state == RaftState.FOLLOWER and node.fetched_from_leader
        granted = log_ok and node.state != RaftState.LEADER and not hears_leader
        if epoch == node.epoch and node.state == RaftState.RESIGNED:
            granted = False
        return m.vote_response(NONE, NONE, node.leader_id, node.epoch, granted)
    if epoch > node.epoch:
        node.become_unattached(now_ms, epoch)
    granted = False
    if node.voted_id == cand:
        granted = True  # a repeated request: the same answer
    elif (log_ok and node.voted_id < 0 and node.leader_id < 0
          and node.state in (RaftState.UNATTACHED, RaftState.PROSPECTIVE)):
        # Record the vote (durably) and give the candidate a full election timeout.
        node.become_unattached(now_ms, node.epoch, voted_id=cand)
        granted = True
    return m.vote_response(NONE, NONE, node.leader_id, node.epoch, granted)


def _begin_epoch(node: RaftNode, now_ms: int,
                 req: m.BeginQuorumEpochRequest) -> m.BeginQuorumEpochResponse:
    if req.cluster_id is not None and req.cluster_id != node.cluster_id:
        return m.begin_epoch_response(ErrorCode.INCONSISTENT_CLUSTER_ID)
    p = m.only_partition(list(req.topics))
    if not isinstance(p, m.BeginQuorumEpochRequest.PartitionData):
        return m.begin_epoch_response(ErrorCode.INVALID_REQUEST)
    if req.voter_id >= 0 and req.voter_id != node.node_id:
        return m.begin_epoch_response(NONE, ErrorCode.INVALID_VOTER_KEY, node.leader_id, node.epoch)
    if p.leader_epoch < node.epoch:
        return m.begin_epoch_response(NONE, ErrorCode.FENCED_LEADER_EPOCH, node.leader_id,
                                      node.epoch)
    if p.leader_id == node.node_id or p.leader_id < 0:
        return m.begin_epoch_response(NONE, ErrorCode.INVALID_REQUEST, node.leader_id, node.epoch)
    node.observe_leader(now_ms, p.leader_epoch, p.leader_id)
    return m.begin_epoch_response(NONE, NONE, node.leader_id, node.epoch)


def _end_epoch(node: RaftNode, now_ms: int,
               req: m.EndQuorumEpochRequest) -> m.EndQuorumEpochResponse:
    if req.cluster_id is not None and req.cluster_id != node.cluster_id:
        return m.end_epoch_response(ErrorCode.INCONSISTENT_CLUSTER_ID)
    p = m.only_partition(list(req.topics))
    if not isinstance(p, m.EndQuorumEpochRequest.PartitionData):
        return m.end_epoch_response(ErrorCode.INVALID_REQUEST)
    if p.leader_epoch < node.epoch:
        return m.end_epoch_response(NONE, ErrorCode.FENCED_LEADER_EPOCH, node.leader_id,
                                    node.epoch)
    node.observe_leader(now_ms, p.leader_epoch, p.leader_id)
    if (node.epoch == p.leader_epoch and node.leader_id == p.leader_id
            and node.state == RaftState.FOLLOWER and node.is_voter):
        # The leader is leaving: the best-placed successors start their election first.
        successors = [c.candidate_id for c in p.preferred_candidates] or list(
            p.preferred_successors)
        pos = successors.index(node.node_id) if node.node_id in successors else len(successors)
        wait = min(node.config.election_backoff_max_ms,
                   m_backoff(pos, node.config.election_backoff_max_ms))
        node.timer_ms = min(node.timer_ms, now_ms + wait)
    return m.end_epoch_response(NONE, NONE, node.leader_id, node.epoch)


def m_backoff(position: int, max_ms: int) -> int:
    """Strict exponential backoff by rank in the successor list: 0, 50, 100, 200, ... ms."""
    if position <= 0:
        return 0
    return min(max_ms, 50 << min(position - 1, 16))


# -- responses ---------------------------------------------------------------------------------
def handle_response(node: RaftNode, now_ms: int, msg: m.RaftMessage, sent: Inflight) -> bool:
    body = msg.body
    if isinstance(body, m.VoteResponse):
        _on_vote(node, now_ms, msg.src, body, sent)
    elif isinstance(body, (m.BeginQuorumEpochResponse, m.EndQuorumEpochResponse)):
        _on_epoch_ack(node, now_ms, msg.src, body)
    else:
        return False
    return True


def _on_vote(node: RaftNode, now_ms: int, src: int, resp: m.VoteResponse, sent: Inflight) -> None:
    p = m.only_partition(list(resp.topics))
    if resp.error_code or not isinstance(p, m.VoteResponse.PartitionData):
        return
    if node.observe_leader(now_ms, p.leader_epoch, p.leader_id):
        return
    want = RaftState.PROSPECTIVE if sent.pre_vote else RaftState.CANDIDATE
    if node.state != want or sent.epoch != node.epoch or sent.round != node.vote_round:
        return
    if p.error_code != NONE:
        return
    node.votes[src] = bool(p.vote_granted)
    granted, rejected = node.voted_majority()
    if granted >= node.majority:
        if want == RaftState.PROSPECTIVE:
            node.become_candidate(now_ms)
        else:
            node.become_leader(now_ms)
    elif rejected > len(node.voters) - node.majority and node.backoff_until_ms < 0:
        node.backoff_until_ms = now_ms + node.election_backoff_ms()


def _on_epoch_ack(node: RaftNode, now_ms: int, src: int,
                  resp: m.BeginQuorumEpochResponse | m.EndQuorumEpochResponse) -> None:
    p = m.only_partition(list(resp.topics))
    if resp.error_code or not isinstance(p, (m.BeginQuorumEpochResponse.PartitionData,
                                             m.EndQuorumEpochResponse.PartitionData)):
        return
    epoch, leader, err = p.leader_epoch, p.leader_id, p.error_code
    if node.observe_leader(now_ms, epoch, leader):
        return
    if err == NONE and epoch == node.epoch:
        if isinstance(resp, m.BeginQuorumEpochResponse) and node.leader is not None:
            node.leader.progress(src).begin_acked = True
        elif isinstance(resp, m.EndQuorumEpochResponse):
            node.end_epoch_sent.add(src)


# -- timers --------------------------------------------------------------------------------
def poll_election(node: RaftNode, now_ms: int) -> None:
    """Unattached (voter), Prospective, Candidate and Resigned."""
    state = node.state
    if not node.is_voter:  # removed from the voter set (KIP-853): only observe from now on
        node.become_unattached(now_ms, node.epoch + (state == RaftState.RESIGNED))
        return
    if state == RaftState.RESIGNED:
        if now_ms >= node.timer_ms:
            node.become_unattached(now_ms, node.epoch + 1)
            return
        _send_end_epoch(node, now_ms)
        return
    if state == RaftState.UNATTACHED:
        if now_ms >= node.timer_ms:
            node.become_prospective(now_ms)
        else:
            return
    lost = 0 <= node.backoff_until_ms <= now_ms
    if node.state == RaftState.PROSPECTIVE and (now_ms >= node.timer_ms or lost):
        # A lost pre-vote: back to the leader we knew (its voters still follow it), else
        # wait for the next election timeout as Unattached (KIP-996).
        if node.leader_id >= 0:
            node.become_follower(now_ms, node.epoch, node.leader_id)
        else:
            node.become_unattached(now_ms, node.epoch, node.voted_id)
        return
    if node.state == RaftState.CANDIDATE and (now_ms >= node.timer_ms or lost):
        node.become_prospective(now_ms)  # a lost or timed-out election: pre-vote again
    if node.state in (RaftState.PROSPECTIVE, RaftState.CANDIDATE) and node.backoff_until_ms < 0:
        _request_votes(node, now_ms)


def _request_votes(node: RaftNode, now_ms: int) -> None:
    pre = node.state == RaftState.PROSPECTIVE
    epoch = node.epoch + 1 if pre else node.epoch
    for v in sorted(node.voters):
        if v == node.node_id or v in node.votes or node.has_inflight(v, m.VoteRequest):
            continue
        req = m.vote_request(node.cluster_id, v, node.node_id, epoch, node.log.last_epoch(),
                             node.log.end_offset, pre)
        node.send(now_ms, v, req, round=node.vote_round, pre_vote=pre)


def _send_end_epoch(node: RaftNode, now_ms: int) -> None:
    successors = replication.successors(node)
    for v in sorted(node.voters):
        if v == node.node_id or v in node.end_epoch_sent or node.has_inflight(
                v, m.EndQuorumEpochRequest):
            continue
        node.send(now_ms, v, m.end_epoch_request(node.cluster_id, node.node_id, node.epoch,
                                                 successors))

