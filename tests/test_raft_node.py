"""RaftNode on its own: the errors Kafka answers (stale epoch, unknown voter, other cluster),
elections, diverging-epoch truncation, DescribeQuorum, and the transition table.

Messages go through the generated codecs at their wire versions, as a driver would send them.
"""

from __future__ import annotations

import random
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.raft import messages as m
from kraft.raft.config import RaftConfig
from kraft.raft.log import MemoryQuorumStateStore, MemoryRaftLog
from kraft.raft.node import NotLeaderError, RaftNode
from kraft.raft.state import TRANSITIONS, ElectionState, RaftState, check_transition
from kraft.raft.voters import VoterHistory, endpoints_of, epoch_start_records, voter_entry
from protocol._generated.voters_record import VotersRecord
from protocol.errors import ErrorCode
from protocol.records import ControlType, SimpleRecord, build_batch

CLUSTER = "raft-unit-cluster-id0"


def make(node_id: int, voters: set[int], log: MemoryRaftLog | None = None,
         state: ElectionState | None = None) -> RaftNode:
    store = MemoryQuorumStateStore()
    if state is not None:
        store.write(state)
    return RaftNode(node_id, frozenset(voters), CLUSTER, log or MemoryRaftLog(), store,
                    random.Random(node_id), 0)


def ask(node: RaftNode, now: int, body: m.RaftRequest, src: int = 99) -> m.RaftResponse:
    """Deliver one request (through the codecs) and return the node's answer."""
    node.handle(now, m.RaftMessage(src, node.node_id, 7, m.wire_round_trip(body)))
    out, _ = node.poll(now)
    answers = [x for x in out if x.correlation_id == 7 and x.dst == src]
    assert len(answers) == 1, out
    body_out = m.wire_round_trip(answers[0].body)
    assert not isinstance(body_out, m.REQUEST_TYPES)
    return body_out


def run(nodes: dict[int, RaftNode], until: int, now: int = 0) -> int:
    """Deliver everything at once (no faults) and poll by deadline until ``until``."""
    pending: list[m.RaftMessage] = []
    while now <= until:
        for n in nodes.values():
            out, _ = n.poll(now)
            pending += out
        while pending:
            msg = pending.pop(0)
            if msg.dst not in nodes:
                continue  # a node that is down
            nodes[msg.dst].handle(now, m.RaftMessage(msg.src, msg.dst, msg.correlation_id,
                                                     m.wire_round_trip(msg.body)))
            out, _ = nodes[msg.dst].poll(now)
            pending += out
        now += 10
    return now


def batch(base: int, epoch: int, n: int = 1) -> bytes:
    return build_batch([SimpleRecord(None, b"x", (), 0)] * n, base_offset=base,
                       partition_leader_epoch=epoch)


def test_a_lone_voter_leads_at_once_and_commits_what_it_flushes() -> None:
    node = make(1, {1})
    node.poll(0)
    assert node.is_leader and node.epoch == 1
    off = node.append(5, [b"a", b"b"])
    assert node.high_watermark <= off
    node.poll(6)
    assert node.high_watermark == off + 1 == node.log.end_offset


def test_three_voters_elect_one_leader_and_replicate() -> None:
    nodes = {i: make(i, {1, 2, 3}) for i in (1, 2, 3)}
    now = run(nodes, 5_000)
    leaders = [n for n in nodes.values() if n.is_leader]
    assert len(leaders) == 1
    leader = leaders[0]
    assert {n.epoch for n in nodes.values()} == {leader.epoch}
    assert all(n.leader_id == leader.node_id for n in nodes.values())
    off = leader.append(now, [b"x"])
    run(nodes, now + 1_000, now)
    assert all(n.high_watermark > off for n in nodes.values())
    assert all(n.store.read() == n.election_state() for n in nodes.values())


def test_append_on_a_follower_is_refused() -> None:
    with pytest.raises(NotLeaderError):
        make(2, {1, 2, 3}).append(0, [b"x"])


def test_vote_errors_as_kafka_answers_them() -> None:
    node = make(2, {1, 2, 3}, state=ElectionState(epoch=5))
    other = m.vote_request("another-cluster", 2, 1, 6, 0, 0, False)
    other.cluster_id = "another-cluster"
    assert ask(node, 0, other).error_code == ErrorCode.INCONSISTENT_CLUSTER_ID

    def part(req: m.VoteRequest) -> m.VoteResponse.PartitionData:
        resp = ask(node, 0, req)
        assert isinstance(resp, m.VoteResponse) and resp.error_code == 0
        p = resp.topics[0].partitions[0]
        return p
    stale = part(m.vote_request(CLUSTER, 2, 1, 4, 0, 0, False))
    assert stale.error_code == ErrorCode.FENCED_LEADER_EPOCH and stale.leader_epoch == 5
    assert not stale.vote_granted
    stranger = part(m.vote_request(CLUSTER, 2, 42, 6, 0, 0, False))
    assert stranger.error_code == ErrorCode.INCONSISTENT_VOTER_SET
    wrong_key = part(m.vote_request(CLUSTER, 3, 1, 6, 0, 0, False))
    assert wrong_key.error_code == ErrorCode.INVALID_VOTER_KEY
    assert node.epoch == 5 and node.voted_id == -1  # none of these changed our state


def test_one_vote_per_epoch_and_only_for_a_log_at_least_as_long() -> None:
    log = MemoryRaftLog()
    log.append(batch(0, 3, 2))
    log.flush()
    node = make(2, {1, 2, 3}, log=log, state=ElectionState(epoch=3))

    def vote(cand: int, epoch: int, last_epoch: int, end: int, pre: bool = False) -> bool:
        resp = ask(node, 0, m.vote_request(CLUSTER, 2, cand, epoch, last_epoch, end, pre))
        assert isinstance(resp, m.VoteResponse)
        return bool(resp.topics[0].partitions[0].vote_granted)
    assert not vote(1, 4, 3, 1)            # shorter log
    assert node.epoch == 4                 # ... but the higher epoch was taken
    assert vote(1, 4, 3, 2)
    assert node.store.read() == ElectionState(4, -1, 1)  # durable before the answer
    assert vote(1, 4, 3, 2)                # the same question, the same answer
    assert not vote(3, 4, 3, 5)            # already voted in epoch 4
    assert vote(3, 5, 3, 2, pre=True)      # a pre-vote ...
    assert node.epoch == 4 and node.voted_id == 1  # ... changes nothing


def test_fetch_errors_as_kafka_answers_them() -> None:
    nodes = {i: make(i, {1, 2, 3}) for i in (1, 2, 3)}
    run(nodes, 5_000)
    leader = next(n for n in nodes.values() if n.is_leader)
    follower = next(n for n in nodes.values() if not n.is_leader)
    e = leader.epoch

    def fetch(node: RaftNode, epoch: int, cluster: str = CLUSTER,
              offset: int = 0, last_epoch: int = 0) -> m.FetchResponse:
        req = m.fetch_request(cluster, 3, epoch, offset, last_epoch, 0, 0, 1 << 20)
        resp = ask(node, 6_000, req, src=3)
        assert isinstance(resp, m.FetchResponse)
        return resp
    assert fetch(leader, e, "another").error_code == ErrorCode.INCONSISTENT_CLUSTER_ID
    for node, epoch, err in ((leader, e - 1, ErrorCode.FENCED_LEADER_EPOCH),
                             (leader, e + 1, ErrorCode.UNKNOWN_LEADER_EPOCH),
                             (follower, e, ErrorCode.NOT_LEADER_OR_FOLLOWER)):
        p = fetch(node, epoch).responses[0].partitions[0]
        assert p.error_code == err
        assert p.current_leader is not None
        assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (leader.node_id, e)
    ok = fetch(leader, e).responses[0].partitions[0]
    assert ok.error_code == 0 and ok.records and ok.high_watermark >= 0
    assert leader.is_leader and leader.epoch == e  # the quorum kept its state


def test_diverging_epoch_truncates_the_follower() -> None:
    """The leader has epoch 1 to offset 3 then epoch 3; a follower has epoch 2 from offset 3
    (written by a leader of epoch 2 that the new leader never heard from)."""
    llog = MemoryRaftLog()
    llog.append(batch(0, 1, 3) + batch(3, 3, 2))
    llog.flush()
    leader = make(1, {1, 2, 3}, llog, ElectionState(3, -1, 1))
    flog = MemoryRaftLog()
    flog.append(batch(0, 1, 3) + batch(3, 2, 4))
    flog.flush()
    follower = make(2, {1, 2, 3}, flog, ElectionState(3, 1, -1))
    nodes = {1: leader, 2: follower, 3: make(3, {1, 2, 3}, state=ElectionState(3, -1, 1))}
    leader.become_prospective(0)
    leader.become_candidate(0)
    assert leader.epoch == 4
    run(nodes, 3_000)
    assert leader.is_leader
    assert flog.batches()[:3] == llog.batches()[:3]
    assert [e for _, _, e, _ in flog.batches()] == [e for _, _, e, _ in llog.batches()]
    assert follower.high_watermark == leader.high_watermark == llog.end_offset


def test_describe_quorum_names_voters_observers_and_lags() -> None:
    nodes = {i: make(i, {1, 2, 3}) for i in (1, 2, 3, 4)}  # 4 observes
    now = run(nodes, 5_000)
    leader = next(n for n in nodes.values() if n.is_leader)
    resp = ask(leader, now, m.DescribeQuorumRequest(topics=[m.DescribeQuorumRequest.TopicData(
        topic_name=m.METADATA_TOPIC, partitions=[
            m.DescribeQuorumRequest.PartitionData(partition_index=0)])]))
    assert isinstance(resp, m.DescribeQuorumResponse)
    p = resp.topics[0].partitions[0]
    assert p.error_code == 0 and p.leader_id == leader.node_id
    assert [v.replica_id for v in p.current_voters] == [1, 2, 3]
    assert [o.replica_id for o in p.observers] == [4]
    assert all(v.log_end_offset == leader.log.end_offset for v in p.current_voters)
    follower = next(n for n in nodes.values() if not n.is_leader)
    resp = ask(follower, now, m.DescribeQuorumRequest(topics=[
        m.DescribeQuorumRequest.TopicData(topic_name=m.METADATA_TOPIC, partitions=[
            m.DescribeQuorumRequest.PartitionData(partition_index=0)])]))
    assert isinstance(resp, m.DescribeQuorumResponse)
    assert resp.topics[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_a_leader_restarts_resigned_and_never_votes_in_its_own_epoch() -> None:
    node = make(1, {1, 2, 3}, state=ElectionState(4, 1, 1))
    assert node.state == RaftState.RESIGNED and node.epoch == 4
    resp = ask(node, 0, m.vote_request(CLUSTER, 1, 2, 4, 9, 9, False))
    assert isinstance(resp, m.VoteResponse)
    assert not resp.topics[0].partitions[0].vote_granted


def test_the_transition_table() -> None:
    for old in RaftState:
        for new in RaftState:
            if new in TRANSITIONS[old]:
                check_transition(old, new, is_voter=True)
            else:
                with pytest.raises(AssertionError):
                    check_transition(old, new, is_voter=True)
    with pytest.raises(AssertionError):
        check_transition(RaftState.UNATTACHED, RaftState.PROSPECTIVE, is_voter=False)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 3)), min_size=1, max_size=12),
       st.integers(0, 12), st.integers(0, 12), st.integers(0, 6))
def test_end_offset_for_epoch_matches_a_model(steps: list[tuple[int, int]], snap_at: int,
                                              trunc_at: int, ask_epoch: int) -> None:
    """MemoryRaftLog's epoch cache against a list of per-offset epochs, across a snapshot
    and a truncation."""
    log = MemoryRaftLog()
    epochs: list[int] = []
    epoch = 0
    for bump, count in steps:
        epoch += bump
        log.append(batch(len(epochs), epoch, count))
        epochs += [epoch] * count
    log.flush()
    sid = log.create_snapshot(snap_at)
    start = sid.end_offset if sid else 0
    if trunc_at >= start:
        log.truncate_to(trunc_at)
    end = log.end_offset
    epochs = epochs[:end]
    # The model: every offset in [start-1, end) with its epoch (the snapshot's last one stands
    # for the prefix); the largest epoch <= asked, and where the next larger one starts.
    known = list(range(max(start - 1, 0), end)) if (start or end) else []
    below = [epochs[o] for o in known if epochs[o] <= ask_epoch]
    got = log.end_offset_for_epoch(ask_epoch)
    if not below:
        assert got.epoch == -1
        return
    found = max(below)
    nxt = [o for o in known if epochs[o] > found and o >= start]
    assert got == (found, nxt[0] if nxt else end)


def dynamic(node_id: int, voters: set[int]) -> RaftNode:
    return RaftNode(node_id, frozenset(voters), CLUSTER, MemoryRaftLog(),
                    MemoryQuorumStateStore(), random.Random(node_id), 0,
                    RaftConfig(kraft_version=1))


def admin(nodes: dict[int, RaftNode], leader: RaftNode, now: int,
          body: m.RaftRequest) -> m.RaftResponse:
    """Send a voter change from an admin client (id 0) and run until it is answered (the
    messages under way then are still delivered: none is lost)."""
    leader.handle(now, m.RaftMessage(0, leader.node_id, 77, m.wire_round_trip(body)))
    pending: list[m.RaftMessage] = []
    answer: m.RaftResponse | None = None
    for _ in range(400):
        for n in nodes.values():
            out, _ = n.poll(now)
            pending += out
        while pending:
            msg = pending.pop(0)
            if msg.dst == 0:
                got = m.wire_round_trip(msg.body)
                assert not isinstance(got, m.REQUEST_TYPES)
                answer = got
                continue
            nodes[msg.dst].handle(now, m.RaftMessage(msg.src, msg.dst, msg.correlation_id,
                                                     m.wire_round_trip(msg.body)))
            out, _ = nodes[msg.dst].poll(now)
            pending += out
        if answer is not None:
            return answer
        now += 10
    raise AssertionError("no answer")


def test_add_and_remove_voters_one_at_a_time() -> None:
    nodes = {i: dynamic(i, {1, 2, 3}) for i in (1, 2, 3, 4)}
    now = run(nodes, 5_000)
    leader = next(n for n in nodes.values() if n.is_leader)
    add = m.AddRaftVoterRequest(cluster_id=CLUSTER, timeout_ms=1000, voter_id=4)
    resp = admin(nodes, leader, now, add)
    assert isinstance(resp, m.AddRaftVoterResponse) and resp.error_code == 0
    assert leader.voters == {1, 2, 3, 4} and leader.majority == 3
    run(nodes, now + 2_000, now)
    assert all(n.voters == {1, 2, 3, 4} for n in nodes.values())  # from the log, everywhere
    again = admin(nodes, leader, now, add)
    assert isinstance(again, m.AddRaftVoterResponse)
    assert again.error_code == ErrorCode.DUPLICATE_VOTER
    victim = next(v for v in (2, 3, 4) if v != leader.node_id)
    gone = admin(nodes, leader, now, m.RemoveRaftVoterRequest(cluster_id=CLUSTER,
                                                               voter_id=victim))
    assert isinstance(gone, m.RemoveRaftVoterResponse) and gone.error_code == 0
    assert victim not in leader.voters
    missing = admin(nodes, leader, now, m.RemoveRaftVoterRequest(cluster_id=CLUSTER,
                                                                  voter_id=victim))
    assert isinstance(missing, m.RemoveRaftVoterResponse)
    assert missing.error_code == ErrorCode.VOTER_NOT_FOUND
    # A restart rebuilds the set from the log (the VotersRecords), not from the configuration.
    n1 = nodes[1]
    again1 = RaftNode(1, frozenset({1, 2, 3}), CLUSTER, n1.log, n1.store, random.Random(5),
                      now, RaftConfig(kraft_version=1))
    assert again1.voters == leader.voters


def test_a_static_quorum_refuses_voter_changes() -> None:
    nodes = {i: make(i, {1, 2, 3}) for i in (1, 2, 3)}
    now = run(nodes, 5_000)
    leader = next(n for n in nodes.values() if n.is_leader)
    resp = admin(nodes, leader, now, m.AddRaftVoterRequest(cluster_id=CLUSTER, voter_id=4))
    assert isinstance(resp, m.AddRaftVoterResponse)
    assert resp.error_code == ErrorCode.UNSUPPORTED_VERSION
    follower = next(n for n in nodes.values() if not n.is_leader)
    resp = admin(nodes, follower, now, m.RemoveRaftVoterRequest(cluster_id=CLUSTER, voter_id=2))
    assert isinstance(resp, m.RemoveRaftVoterResponse)
    assert resp.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_a_lagging_follower_installs_the_leaders_snapshot() -> None:
    nodes = {i: make(i, {1, 2, 3}) for i in (1, 2, 3)}
    now = run(nodes, 5_000)
    leader = next(n for n in nodes.values() if n.is_leader)
    for i in range(30):
        leader.append(now, [b"x%d" % i])
    now = run(nodes, now + 1_000, now)
    assert leader.snapshot() is not None  # the committed prefix goes into a snapshot
    sid = leader.log.latest_snapshot_id()
    assert sid is not None and leader.log.start_offset == sid.end_offset > 0
    late = make(4, {1, 2, 3})  # an observer that starts from nothing
    nodes[4] = late
    run(nodes, now + 3_000, now)
    assert late.log.latest_snapshot_id() == sid
    assert late.log.start_offset == sid.end_offset
    assert late.log.end_offset == leader.log.end_offset
    assert late.high_watermark == leader.high_watermark

    def snap(snapshot_id: tuple[int, int], position: int) -> int:
        Q = m.FetchSnapshotRequest
        req = Q(cluster_id=CLUSTER, replica_id=4, max_bytes=1 << 20, topics=[Q.TopicSnapshot(
            name=m.METADATA_TOPIC, partitions=[Q.PartitionSnapshot(
                partition=0, current_leader_epoch=leader.epoch, position=position,
                snapshot_id=Q.SnapshotId(end_offset=snapshot_id[0], epoch=snapshot_id[1]))])])
        resp = ask(leader, now, req, src=4)
        assert isinstance(resp, m.FetchSnapshotResponse)
        return int(resp.topics[0].partitions[0].error_code)
    assert snap((sid.end_offset, sid.epoch), 0) == 0
    assert snap((sid.end_offset + 1, sid.epoch), 0) == ErrorCode.SNAPSHOT_NOT_FOUND
    assert snap((sid.end_offset, sid.epoch), 1 << 30) == ErrorCode.POSITION_OUT_OF_RANGE


def test_a_resigning_leader_hands_over_fast_with_end_quorum_epoch() -> None:
    """Graceful shutdown: EndQuorumEpoch names the best-placed successor, which starts its
    election at once instead of waiting out a fetch timeout (2 s)."""
    nodes = {i: make(i, {1, 2, 3}) for i in (1, 2, 3)}
    now = run(nodes, 5_000)
    leader = next(n for n in nodes.values() if n.is_leader)
    epoch = leader.epoch
    leader.resign(now)
    assert leader.state == RaftState.RESIGNED
    out, _ = leader.poll(now)
    ends = [x for x in out if isinstance(x.body, m.EndQuorumEpochRequest)]
    assert sorted(x.dst for x in ends) == sorted(set(nodes) - {leader.node_id})
    del nodes[leader.node_id]  # it shuts down
    for x in ends:
        nodes[x.dst].handle(now, m.RaftMessage(x.src, x.dst, x.correlation_id,
                                               m.wire_round_trip(x.body)))
    t = now
    while not any(n.is_leader for n in nodes.values()) and t < now + 5_000:
        t = run(nodes, t + 10, t)
    new = [n for n in nodes.values() if n.is_leader]
    assert len(new) == 1 and new[0].epoch > epoch
    # The first successor starts at once: well under the 2 s fetch timeout + election.
    assert t - now < 1_000, t - now


def test_added_voters_endpoints_ride_in_the_voters_record() -> None:
    """KIP-853: the VotersRecord carries the new voter's replica key and listeners; every
    replica learns them from its log, and the record in force at an offset is the one before."""
    nodes = {i: dynamic(i, {1, 2, 3}) for i in (1, 2, 3, 4)}
    now = run(nodes, 5_000)
    leader = next(n for n in nodes.values() if n.is_leader)
    before = leader.log.end_offset
    directory = uuid.uuid4()
    add = m.AddRaftVoterRequest(cluster_id=CLUSTER, timeout_ms=1000, voter_id=4,
                                voter_directory_id=directory, listeners=[
                                    m.AddRaftVoterRequest.Listener(name="CONTROLLER",
                                                                   host="127.0.0.1", port=9094)])
    resp = admin(nodes, leader, now, add)
    assert isinstance(resp, m.AddRaftVoterResponse) and resp.error_code == 0
    run(nodes, now + 2_000, now)
    for n in nodes.values():
        assert endpoints_of(n.history.current_record, 4) == [("CONTROLLER", "127.0.0.1", 9094)]
        v4 = next(v for v in n.history.current_record.voters if v.voter_id == 4)
        assert v4.voter_directory_id == directory
        assert (v4.k_raft_version_feature.min_supported_version,
                v4.k_raft_version_feature.max_supported_version) == (0, 1)
        assert n.history.record_at(before) is None  # the static set was in force before it
        assert n.history.record_at(n.log.end_offset) is n.history.current_record


def update(epoch: int, voter: int, directory: uuid.UUID, port: int, cluster: str = CLUSTER,
           versions: tuple[int, int] = (0, 1)) -> m.UpdateRaftVoterRequest:
    Q = m.UpdateRaftVoterRequest
    return Q(cluster_id=cluster, current_leader_epoch=epoch, voter_id=voter,
             voter_directory_id=directory,
             listeners=[Q.Listener(name="CONTROLLER", host="127.0.0.1", port=port)],
             k_raft_version_feature=Q.KRaftVersionFeature(min_supported_version=versions[0],
                                                          max_supported_version=versions[1]))


def test_update_raft_voter_from_a_voter_with_new_endpoints() -> None:
    """KIP-853 UpdateRaftVoter: a voter whose VotersRecord entry has other endpoints than it
    listens on tells the leader, which writes the new entry; Kafka's refusals before that."""
    nodes = {i: dynamic(i, {1, 2, 3}) for i in (1, 2, 3)}
    moved = ("CONTROLLER", "127.0.0.1", 9999)
    nodes[4] = RaftNode(4, frozenset({1, 2, 3}), CLUSTER, MemoryRaftLog(),
                        MemoryQuorumStateStore(), random.Random(4), 0,
                        RaftConfig(kraft_version=1, listeners=(moved,)))
    now = run(nodes, 5_000)
    leader = next(n for n in nodes.values() if n.is_leader)
    directory = uuid.uuid4()
    listener = m.AddRaftVoterRequest.Listener(name="CONTROLLER", host="127.0.0.1", port=9094)
    resp = admin(nodes, leader, now, m.AddRaftVoterRequest(
        cluster_id=CLUSTER, timeout_ms=1000, voter_id=4, voter_directory_id=directory,
        listeners=[listener]))
    assert isinstance(resp, m.AddRaftVoterResponse) and resp.error_code == 0
    now = run(nodes, now + 7_000, now + 4_000)  # after admin()'s own clock
    for n in nodes.values():  # node 4 caught up, saw its old entry and sent UpdateRaftVoter
        assert endpoints_of(n.history.current_record, 4) == [moved], n.node_id
    writes = len(leader.history.entries)
    now = run(nodes, now + 5_000, now)
    assert len(leader.history.entries) == writes  # once up to date, no more updates
    E = ErrorCode
    leader = next(n for n in nodes.values() if n.is_leader)
    epoch = leader.epoch
    follower = next(n for n in nodes.values() if not n.is_leader)
    cases: list[tuple[RaftNode, m.UpdateRaftVoterRequest, int]] = [
        (leader, update(epoch, 4, directory, 1, cluster="another"), E.INCONSISTENT_CLUSTER_ID),
        (leader, update(epoch - 1, 4, directory, 1), E.FENCED_LEADER_EPOCH),
        (leader, update(epoch + 1, 4, directory, 1), E.UNKNOWN_LEADER_EPOCH),
        (follower, update(epoch, 4, directory, 1), E.NOT_LEADER_OR_FOLLOWER),
        (leader, update(epoch, 4, directory, 1, versions=(0, 0)), E.INVALID_REQUEST),
        (leader, update(epoch, 4, uuid.UUID(int=0), 1), E.INVALID_REQUEST),
        (leader, update(epoch, 4, uuid.uuid4(), 1), E.VOTER_NOT_FOUND),
        (leader, update(epoch, 7, directory, 1), E.VOTER_NOT_FOUND),
    ]
    for node, req, code in cases:
        got = ask(node, now, req)
        assert isinstance(got, m.UpdateRaftVoterResponse) and got.error_code == code, (req, got)
        assert got.current_leader.leader_id == leader.node_id
    assert len(leader.history.entries) == writes  # refusals write nothing
    ok = ask(leader, now, update(epoch, 4, directory, 4444))
    assert isinstance(ok, m.UpdateRaftVoterResponse) and ok.error_code == 0
    assert endpoints_of(leader.history.current_record, 4) == [("CONTROLLER", "127.0.0.1", 4444)]
    busy = ask(leader, now, update(epoch, 4, directory, 5555))  # the last one is uncommitted
    assert isinstance(busy, m.UpdateRaftVoterResponse)
    assert busy.error_code == E.REQUEST_TIMED_OUT


def test_update_raft_voter_on_a_static_quorum_writes_nothing() -> None:
    nodes = {i: make(i, {1, 2, 3}) for i in (1, 2, 3)}
    now = run(nodes, 5_000)
    leader = next(n for n in nodes.values() if n.is_leader)
    end = leader.log.end_offset
    got = ask(leader, now, update(leader.epoch, 2, uuid.uuid4(), 1))
    assert isinstance(got, m.UpdateRaftVoterResponse) and got.error_code == 0
    assert leader.log.end_offset == end and leader.history.entries == []


def test_a_new_leader_writes_the_bootstrap_voters_and_its_moved_endpoints() -> None:
    """Kafka's start-of-epoch control records: with kraft.version 1 the first leader copies the
    bootstrap checkpoint's VotersRecord (with a KRaftVersionRecord) into the log; later leaders
    write it again only when their own endpoints changed."""
    here = ("CONTROLLER", "127.0.0.1", 9001)
    boot = VotersRecord(version_=0, voters=[
        voter_entry(1, uuid.uuid4(), [here]), voter_entry(2, uuid.uuid4(), [])])
    history = VoterHistory(frozenset({1, 2}))
    history.reset([(0, boot)], 0)  # the bootstrap checkpoint 0-0: Kafka's offset -1
    assert not history.in_log()
    assert epoch_start_records(history, 0, 1, [here], 0) == []  # kraft.version 0: never
    first = epoch_start_records(history, 1, 1, [here], 0)
    keys = [int.from_bytes((r.key or b"")[2:4], "big") for r in first]
    assert keys == [ControlType.KRAFT_VERSION, ControlType.KRAFT_VOTERS]
    data = build_batch(first, base_offset=5, is_control=True, partition_leader_epoch=1)
    history.add_from(data)
    assert history.in_log() and history.current == {1, 2}
    assert epoch_start_records(history, 1, 1, [here], 0) == []  # in the log, unchanged
    moved = ("CONTROLLER", "127.0.0.1", 9002)
    again = epoch_start_records(history, 1, 1, [moved], 0)
    history.add_from(build_batch(again, base_offset=9, is_control=True,
                                 partition_leader_epoch=2))
    assert endpoints_of(history.current_record, 1) == [moved]
    assert endpoints_of(history.current_record, 2) == []
    assert history.record_at(9) is not None and endpoints_of(history.record_at(9), 1) == [here]
