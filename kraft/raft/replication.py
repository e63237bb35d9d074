"""Replication: Fetch (with the follower's replica state and diverging-epoch truncation),
FetchSnapshot, DescribeQuorum, and the leader's view of every replica.

The leader answers a Fetch for (fetch offset, last fetched epoch) only once that pair is on its
own log; otherwise it names the point where the logs part (diverging epoch: the largest epoch
<= the follower's and where it ends) and the follower truncates there, or, when the offset is
below the leader's log start, the snapshot to fetch instead. A voter's fetch offset is its
match offset; the high watermark is the offset a majority of voters have reached, counted only
once it passes the start of the leader's epoch (the LeaderChange record), so entries of older
epochs commit only through an entry of the current one. Followers append the leader's batches
as they are, flush before fetching again, and take min(leader's high watermark, own end).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kraft.raft import messages as m
from kraft.raft.log import SnapshotId
from kraft.raft.state import RaftState
from kraft.raft.voters import (
    PendingChange,
    add_voter_response,
    change_error,
    epoch_start_records,
    remove_voter_response,
    voter_entry,
    voters_batch,
    with_voter,
    without_voter,
)
from protocol._generated.leader_change_message import LeaderChangeMessage
from protocol.errors import ErrorCode
from protocol.records import (
    ControlType,
    SimpleRecord,
    build_batch,
    crc_ok,
    encode_control_key,
    iter_headers,
)

if TYPE_CHECKING:
    from kraft.raft.node import Inflight, RaftNode

NONE = ErrorCode.NONE
LEADER_CHANGE_VERSION = 0


@dataclass(slots=True)
class ReplicaProgress:
    end_offset: int = -1
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    begin_acked: bool = False


@dataclass(slots=True)
class ParkedFetch:
    msg: m.RaftMessage
    fetch_offset: int
    high_watermark: int
    deadline_ms: int


@dataclass(slots=True)
class SnapshotFetch:
    sid: SnapshotId
    leader_id: int
    epoch: int
    data: bytearray = field(default_factory=bytearray)


class LeaderState:
    def __init__(self, node: RaftNode, now_ms: int) -> None:
        self.epoch_start_offset = node.log.end_offset
        self.voters = {v: ReplicaProgress() for v in node.voters}
        self.observers: dict[int, ReplicaProgress] = {}
        self.parked: list[ParkedFetch] = []
        self.check_quorum_timeout_ms = node.config.check_quorum_timeout_ms
        self.check_quorum_deadline_ms = now_ms + self.check_quorum_timeout_ms
        self.fetched_since_check: set[int] = {node.node_id}
        self.pending_change: PendingChange | None = None

    def progress(self, replica_id: int) -> ReplicaProgress:
        if replica_id in self.voters:
            return self.voters[replica_id]
        return self.observers.setdefault(replica_id, ReplicaProgress())

    def next_deadline_ms(self) -> int:
        deadlines = [self.check_quorum_deadline_ms] + [p.deadline_ms for p in self.parked]
        return min(deadlines)


def start_leadership(node: RaftNode, now_ms: int, granted: list[int]) -> None:
    """Open the epoch with a LeaderChange control record and tell the voters."""
    node.leader = LeaderState(node, now_ms)
    msg = LeaderChangeMessage(
        version_=LEADER_CHANGE_VERSION, leader_id=node.node_id,
        voters=[LeaderChangeMessage.Voter(voter_id=v) for v in sorted(node.voters)],
        granting_voters=[LeaderChangeMessage.Voter(voter_id=v) for v in granted])
    record = SimpleRecord(encode_control_key(ControlType.LEADER_CHANGE),
                          msg.encode(LEADER_CHANGE_VERSION), (), now_ms)
    data = build_batch([record, *epoch_start_records(
        node.history, node.kraft_version, node.node_id, list(node.config.listeners), now_ms)],
                       base_offset=node.log.end_offset, is_control=True,
                       partition_leader_epoch=node.epoch)
    node.log.append(data)
    node.log_appended(now_ms, data)
    sync_voters(node)
    _update_high_watermark(node, now_ms)


def sync_voters(node: RaftNode) -> None:
    """Follow a voter-set change in the leader's replica table (observers <-> voters)."""
    ls = node.leader
    assert ls is not None
    now = node.voters
    for v in [v for v in ls.voters if v not in now]:
        ls.observers[v] = ls.voters.pop(v)
    for v in now:
        if v not in ls.voters:
            ls.voters[v] = ls.observers.pop(v) if v in ls.observers else ReplicaProgress()


def leave_leadership(node: RaftNode, now_ms: int) -> None:
    ls = node.leader
    node.leader = None
    if ls is None:
        return
    if ls.pending_change is not None:
        change = ls.pending_change
        answer = (remove_voter_response if change.remove else add_voter_response)(
            ErrorCode.NOT_LEADER_OR_FOLLOWER, "the leader changed before the change committed")
        node.respond(change.msg, answer)
    for parked in ls.parked:  # answer them rather than leave them to time out
        part = m.fetch_part(ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, node.epoch)
        node.respond(parked.msg, m.fetch_response(NONE, part))


def successors(node: RaftNode) -> list[int]:
    """Voters ordered by how far they have fetched (best first): who should lead next."""
    ls = node.leader
    others = [v for v in sorted(node.voters) if v != node.node_id]
    if ls is None:
        return others
    return sorted(others, key=lambda v: -ls.progress(v).end_offset)


def _update_high_watermark(node: RaftNode, now_ms: int) -> None:
    ls = node.leader
    assert ls is not None
    if node.node_id in ls.voters:  # a leader removing itself leads until that commits
        ls.voters[node.node_id].end_offset = node.log.flushed_end_offset
    ends = sorted((p.end_offset for p in ls.voters.values()), reverse=True)
    candidate = ends[node.majority - 1]
    if candidate > ls.epoch_start_offset and candidate > node.high_watermark:
        node.high_watermark = candidate


def poll_leader(node: RaftNode, now_ms: int) -> None:
    ls = node.leader
    assert ls is not None
    if node.log.flushed_end_offset < node.log.end_offset:
        node.log.flush()  # group commit: everything appended since the last poll
    _update_high_watermark(node, now_ms)
    change = ls.pending_change
    if change is not None and node.high_watermark > change.offset:
        ls.pending_change = None
        node.respond(change.msg, (remove_voter_response if change.remove
                                  else add_voter_response)(NONE))
        if not node.is_voter:
            node.resign(now_ms)  # we removed ourselves; the others elect among themselves
            return
    if len(ls.fetched_since_check & node.voters) >= node.majority:
        ls.check_quorum_deadline_ms = now_ms + ls.check_quorum_timeout_ms
        ls.fetched_since_check = {node.node_id}
    elif now_ms >= ls.check_quorum_deadline_ms:
        node.resign(now_ms)  # a majority stopped fetching: we may be cut off
        return
    for v, p in ls.voters.items():
        if v == node.node_id or p.begin_acked or p.last_fetch_ms >= 0:
            continue
        if not node.has_inflight(v, m.BeginQuorumEpochRequest):
            node.send(now_ms, v, m.begin_epoch_request(node.cluster_id, v, node.node_id,
                                                       node.epoch))
    still: list[ParkedFetch] = []
    for parked in ls.parked:
        if (node.log.end_offset > parked.fetch_offset or node.high_watermark > parked.high_watermark
                or now_ms >= parked.deadline_ms):
            node.respond(parked.msg, _records_answer(node, parked.fetch_offset))
        else:
            still.append(parked)
    ls.parked = still


# -- requests --------------------------------------------------------------------------------
def handle_request(node: RaftNode, now_ms: int, msg: m.RaftMessage) -> m.RaftResponse | None:
    body = msg.body
    if isinstance(body, m.FetchRequest):
        return _fetch(node, now_ms, msg, body)
    if isinstance(body, m.FetchSnapshotRequest):
        return _fetch_snapshot(node, body)
    if isinstance(body, m.DescribeQuorumRequest):
        return describe_quorum(node, now_ms)
    if isinstance(body, (m.AddRaftVoterRequest, m.RemoveRaftVoterRequest)):
        return _voter_change(node, now_ms, msg, body)
    if isinstance(body, m.UpdateRaftVoterRequest):
        from kraft.raft.update_voter import handle_update
        return handle_update(node, now_ms, body)
    raise AssertionError(f"no handler for {type(body).__name__}")


def leader_epoch_error(node: RaftNode, epoch: int) -> int:
    """Kafka's checks for a request only the leader serves, in Kafka's order."""
    if epoch < node.epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if epoch > node.epoch:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    if node.state != RaftState.LEADER:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return NONE


def _fetch(node: RaftNode, now_ms: int, msg: m.RaftMessage,
           req: m.FetchRequest) -> m.FetchResponse | None:
    if req.cluster_id is not None and req.cluster_id != node.cluster_id:
        return m.fetch_response(ErrorCode.INCONSISTENT_CLUSTER_ID)
    p = m.fetch_partition(req)
    if p is None:
        return m.fetch_response(ErrorCode.INVALID_REQUEST)
    err = leader_epoch_error(node, p.current_leader_epoch)
    if err != NONE:
        return m.fetch_response(NONE, m.fetch_part(err, node.leader_id, node.epoch))
    if p.fetch_offset < 0 or p.last_fetched_epoch < 0 or p.last_fetched_epoch > node.epoch:
        return m.fetch_response(ErrorCode.INVALID_REQUEST)
    part = _validate_position(node, p.fetch_offset, p.last_fetched_epoch)
    if part is not None:
        return m.fetch_response(NONE, part)
    ls = node.leader
    assert ls is not None
    rid = m.fetch_replica_id(req)
    if rid >= 0:
        prog = ls.progress(rid)
        prog.end_offset = p.fetch_offset
        prog.last_fetch_ms = now_ms
        if p.fetch_offset >= node.log.end_offset:
            prog.last_caught_up_ms = now_ms
        if rid in node.voters:
            ls.fetched_since_check.add(rid)
        _update_high_watermark(node, now_ms)
    # Park only a Fetch with nothing to tell: no records, and a high watermark the fetcher
    # already knows. A follower whose Fetch just moved the high watermark (or that missed an
    # earlier move) is answered at once, as Kafka's leader does (KIP-1166: the fetcher sends
    # its high watermark from Fetch v18; before that it is unknown and the Fetch waits).
    if (p.fetch_offset >= node.log.end_offset and req.max_wait_ms > 0
            and p.high_watermark >= node.high_watermark):
        wait = min(req.max_wait_ms, node.config.fetch_max_wait_ms)
        ls.parked.append(ParkedFetch(msg, p.fetch_offset, node.high_watermark, now_ms + wait))
        return None
    return _records_answer(node, p.fetch_offset)


def _voter_change(node: RaftNode, now_ms: int, msg: m.RaftMessage,
                  req: m.AddRaftVoterRequest | m.RemoveRaftVoterRequest
                  ) -> m.AddRaftVoterResponse | m.RemoveRaftVoterResponse | None:
    """KIP-853 AddRaftVoter / RemoveRaftVoter on the leader: one change at a time, written as
    a VotersRecord, answered once committed."""
    remove = isinstance(req, m.RemoveRaftVoterRequest)
    answer = remove_voter_response if remove else add_voter_response
    if req.cluster_id is not None and req.cluster_id != node.cluster_id:
        return answer(ErrorCode.INCONSISTENT_CLUSTER_ID)
    ls = node.leader
    if ls is None:
        return answer(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    if node.kraft_version < 1:
        return answer(ErrorCode.UNSUPPORTED_VERSION, "Cluster doesn't support "
                      f"{'removing' if remove else 'adding'} voter because the kraft.version "
                      "feature is 0")
    prog = ls.observers.get(req.voter_id)
    caught_up = prog is not None and prog.end_offset >= node.high_watermark and (
        now_ms - prog.last_fetch_ms <= node.config.fetch_timeout_ms)
    pending = ls.pending_change is not None or node.history.last_offset() >= node.high_watermark
    established = node.high_watermark > ls.epoch_start_offset
    err, text = change_error(node.voters, req, pending, established, caught_up)
    if err != NONE:
        return answer(err, text)
    record = node.history.current_record
    if isinstance(req, m.RemoveRaftVoterRequest):
        record = without_voter(record, req.voter_id)
    else:
        record = with_voter(record, voter_entry(
            req.voter_id, req.voter_directory_id,
            [(li.name, li.host, int(li.port)) for li in req.listeners]))
    offset = node.log.end_offset
    data = voters_batch(record, offset, node.epoch, now_ms)
    node.log.append(data)
    node.log_appended(now_ms, data)
    ls.pending_change = PendingChange(msg, offset, remove)
    return None


def _validate_position(node: RaftNode, offset: int,
                       last_epoch: int) -> m.FetchResponse.PartitionData | None:
    """None when (offset, last_epoch) is on our log; else a diverging-epoch or snapshot answer."""
    log = node.log
    snap = log.latest_snapshot_id()
    part = m.fetch_part(NONE, node.node_id, node.epoch, node.high_watermark, log.start_offset)
    if offset < log.start_offset or (snap is not None and offset == log.start_offset
                                     and last_epoch != snap.epoch):
        if snap is None:
            raise AssertionError("log start above zero without a snapshot")
        part.snapshot_id = m.FetchResponse.SnapshotId(end_offset=snap.end_offset, epoch=snap.epoch)
        return part
    if offset == 0 or (snap is not None and offset == snap.end_offset):
        return None
    found = log.end_offset_for_epoch(last_epoch)
    if found.epoch == last_epoch and offset <= found.end_offset:
        return None
    if found.epoch < 0 and snap is not None:
        part.snapshot_id = m.FetchResponse.SnapshotId(end_offset=snap.end_offset, epoch=snap.epoch)
        return part
    end = min(found.end_offset, offset) if found.epoch >= 0 else 0
    part.diverging_epoch = m.FetchResponse.EpochEndOffset(epoch=found.epoch, end_offset=end)
    return part


def _records_answer(node: RaftNode, offset: int) -> m.FetchResponse:
    records = node.log.read(offset, node.config.fetch_max_bytes)
    return m.fetch_response(NONE, m.fetch_part(NONE, node.node_id, node.epoch,
                                               node.high_watermark, node.log.start_offset,
                                               records))


def _fetch_snapshot(node: RaftNode, req: m.FetchSnapshotRequest) -> m.FetchSnapshotResponse:
    R = m.FetchSnapshotResponse
    if req.cluster_id is not None and req.cluster_id != node.cluster_id:
        return R(error_code=ErrorCode.INCONSISTENT_CLUSTER_ID)
    p = m.only_partition(list(req.topics))
    if not isinstance(p, m.FetchSnapshotRequest.PartitionSnapshot) or p.snapshot_id is None:
        return R(error_code=ErrorCode.INVALID_REQUEST)
    out = R.PartitionSnapshot(index=m.METADATA_PARTITION, current_leader=R.LeaderIdAndEpoch(
        leader_id=node.leader_id, leader_epoch=node.epoch), snapshot_id=R.SnapshotId(
        end_offset=p.snapshot_id.end_offset, epoch=p.snapshot_id.epoch))
    out.error_code = leader_epoch_error(node, p.current_leader_epoch)
    if out.error_code == NONE:
        sid = SnapshotId(p.snapshot_id.end_offset, p.snapshot_id.epoch)
        try:
            chunk, size = node.log.read_snapshot(sid, max(p.position, 0),
                                                 min(req.max_bytes, node.config.snapshot_chunk_bytes))
        except KeyError:
            out.error_code = ErrorCode.SNAPSHOT_NOT_FOUND
        else:
            if p.position < 0 or p.position > size:
                out.error_code = ErrorCode.POSITION_OUT_OF_RANGE
            else:
                out.size, out.position, out.unaligned_records = size, p.position, chunk
    return R(error_code=NONE, topics=[R.TopicSnapshot(name=m.METADATA_TOPIC, partitions=[out])])


def describe_quorum(node: RaftNode, now_ms: int) -> m.DescribeQuorumResponse:
    R = m.DescribeQuorumResponse
    part = R.PartitionData(partition_index=m.METADATA_PARTITION, leader_id=node.leader_id,
                           leader_epoch=node.epoch, high_watermark=node.high_watermark)
    ls = node.leader
    if ls is None:
        part.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
    else:
        def state(rid: int, p: ReplicaProgress) -> m.DescribeQuorumResponse.ReplicaState:
            own = rid == node.node_id
            return R.ReplicaState(
                replica_id=rid, log_end_offset=node.log.end_offset if own else p.end_offset,
                last_fetch_timestamp=now_ms if own else p.last_fetch_ms,
                last_caught_up_timestamp=now_ms if own else p.last_caught_up_ms)
        part.current_voters = [state(v, p) for v, p in sorted(ls.voters.items())]
        part.observers = [state(o, p) for o, p in sorted(ls.observers.items())]
    return R(error_code=NONE, topics=[R.TopicData(topic_name=m.METADATA_TOPIC,
                                                  partitions=[part])])


# -- the follower side -------------------------------------------------------------------------
def poll_follower(node: RaftNode, now_ms: int) -> None:
    """Follower (voter or observer) and observer Unattached: fetch, or time out."""
    if node.state == RaftState.FOLLOWER and now_ms >= node.timer_ms:
        if node.is_voter:
            node.become_prospective(now_ms)
            from kraft.raft.election import poll_election
            poll_election(node, now_ms)
            return
        node.become_unattached(now_ms, node.epoch)  # observers look for the leader again
    if node.is_voter:
        from kraft.raft.update_voter import maybe_send
        maybe_send(node, now_ms)
    if now_ms < node.fetch_backoff_until_ms:
        return
    if any(f.kind in (m.FetchRequest, m.FetchSnapshotRequest) for f in node.inflight.values()):
        return
    if node.state == RaftState.FOLLOWER:
        dst = node.leader_id
    else:
        dst = node.rng.choice(sorted(node.voters))  # bootstrap: any voter names the leader
    sf = node.snapshot_fetch
    if sf is not None and sf.leader_id == dst and sf.epoch == node.epoch:
        node.send(now_ms, dst, _snapshot_request(node, sf))
        return
    log = node.log
    node.send(now_ms, dst, m.fetch_request(
        node.cluster_id, node.node_id, node.epoch, log.end_offset, log.last_epoch(),
        log.start_offset, node.config.fetch_max_wait_ms, node.config.fetch_max_bytes,
        node.high_watermark))


def _snapshot_request(node: RaftNode, sf: SnapshotFetch) -> m.FetchSnapshotRequest:
    Q = m.FetchSnapshotRequest
    part = Q.PartitionSnapshot(partition=m.METADATA_PARTITION, current_leader_epoch=sf.epoch,
                               snapshot_id=Q.SnapshotId(end_offset=sf.sid.end_offset,
                                                        epoch=sf.sid.epoch),
                               position=len(sf.data))
    return Q(cluster_id=node.cluster_id, replica_id=node.node_id,
             max_bytes=node.config.snapshot_chunk_bytes,
             topics=[Q.TopicSnapshot(name=m.METADATA_TOPIC, partitions=[part])])


def handle_response(node: RaftNode, now_ms: int, msg: m.RaftMessage, sent: Inflight) -> None:
    body = msg.body
    if isinstance(body, m.FetchResponse):
        _on_fetch(node, now_ms, msg.src, body, sent)
    elif isinstance(body, m.FetchSnapshotResponse):
        _on_fetch_snapshot(node, now_ms, msg.src, body, sent)


def _backoff(node: RaftNode, now_ms: int) -> None:
    node.fetch_backoff_until_ms = now_ms + node.config.retry_backoff_ms


def _on_fetch(node: RaftNode, now_ms: int, src: int, resp: m.FetchResponse,
              sent: Inflight) -> None:
    if resp.error_code or len(resp.responses) != 1 or len(resp.responses[0].partitions) != 1:
        _backoff(node, now_ms)
        return
    p = resp.responses[0].partitions[0]
    cl = p.current_leader
    if cl is not None and cl.leader_epoch >= 0:
        node.observe_leader(now_ms, cl.leader_epoch, cl.leader_id)
    if p.error_code != NONE:
        _backoff(node, now_ms)
        return
    if not (node.state == RaftState.FOLLOWER and node.leader_id == src
            and node.epoch == sent.epoch):
        return
    node.timer_ms = now_ms + node.config.fetch_timeout_ms
    node.fetched_from_leader = True
    div = p.diverging_epoch
    if div is not None and div.end_offset >= 0:
        local = node.log.end_offset_for_epoch(div.epoch)
        # No local epoch <= the leader's: all we have is newer than what the leader keeps.
        end = node.log.start_offset if local.epoch < 0 else local.end_offset
        target = min(end, div.end_offset)
        node.log.truncate_to(max(target, 0))
        node.log_truncated(now_ms)
        return
    snap = p.snapshot_id
    if snap is not None and snap.end_offset >= 0:
        node.snapshot_fetch = SnapshotFetch(SnapshotId(snap.end_offset, snap.epoch), src,
                                            node.epoch)
        return
    data = bytes(p.records) if p.records else b""
    if data:
        # Whole batches from the one holding our end offset; skip what we already have.
        leo = node.log.end_offset
        headers = [(pos, h) for pos, h in iter_headers(data) if h.next_offset > leo]
        if not headers or headers[0][1].base_offset != leo:
            _backoff(node, now_ms)  # not the continuation of our log: ask again
            return
        if not all(crc_ok(data, pos, h.size) for pos, h in headers):
            _backoff(node, now_ms)
            return
        new = data[headers[0][0]:headers[-1][0] + headers[-1][1].size]
        node.log.append(new)
        node.log.flush()
        node.log_appended(now_ms, new)
    hw = min(p.high_watermark, node.log.end_offset)
    if hw > node.high_watermark:
        node.high_watermark = hw


def _on_fetch_snapshot(node: RaftNode, now_ms: int, src: int, resp: m.FetchSnapshotResponse,
                       sent: Inflight) -> None:
    p = m.only_partition(list(resp.topics))
    if resp.error_code or not isinstance(p, m.FetchSnapshotResponse.PartitionSnapshot):
        _backoff(node, now_ms)
        return
    cl = p.current_leader
    if cl is not None and cl.leader_epoch >= 0 and node.observe_leader(
            now_ms, cl.leader_epoch, cl.leader_id):
        return
    sf = node.snapshot_fetch
    if p.error_code != NONE or sf is None or sf.leader_id != src or sf.epoch != node.epoch:
        if p.error_code == ErrorCode.SNAPSHOT_NOT_FOUND:
            node.snapshot_fetch = None  # the leader moved on: fetch again to learn its latest
        _backoff(node, now_ms)
        return
    node.timer_ms = now_ms + node.config.fetch_timeout_ms
    chunk = bytes(p.unaligned_records) if p.unaligned_records else b""
    if p.position != len(sf.data) or len(sf.data) + len(chunk) > p.size:
        return
    sf.data += chunk
    if len(sf.data) == p.size:
        node.log.install_snapshot(sf.sid, bytes(sf.data))
        node.snapshot_installed(now_ms, bytes(sf.data), sf.sid.end_offset)
        node.snapshot_fetch = None
        if sf.sid.end_offset > node.high_watermark:
            node.high_watermark = sf.sid.end_offset
