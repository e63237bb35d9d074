"""The three state tables of groups/states.py, every state x event:

* the tables themselves: a move in its table succeeds, any other raises AssertionError (our bug);
* classic groups driven by requests (GroupShard): from each state, each request moves the group
  as Kafka's coordinator does, or is answered with Kafka's error code and leaves it be;
* KIP-848 members driven by reconciliation inputs: each (state, input) gives the table's state;
* consumer groups: the derived state, and Dead only from Empty.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from groups.classic import ClassicGroup
from groups.config import GroupConfig
from groups.consumer_group import ConsumerGroup, ConsumerMember
from groups.reconcile import reconcile
from groups.shard import GroupShard
from groups.states import (
    CLASSIC_INITIAL,
    CLASSIC_TRANSITIONS,
    CONSUMER_GROUP_TRANSITIONS,
    MEMBER_TRANSITIONS,
    ClassicGroupState,
    ConsumerGroupState,
    MemberEvent,
    MemberState,
    member_next,
)
from protocol._generated.heartbeat_request import HeartbeatRequest
from protocol._generated.join_group_request import JoinGroupRequest
from protocol._generated.join_group_response import JoinGroupResponse
from protocol._generated.leave_group_request import LeaveGroupRequest
from protocol._generated.sync_group_request import SyncGroupRequest
from protocol.coordinator import Pending
from protocol.errors import ErrorCode

C = ClassicGroupState
G = ConsumerGroupState
M = MemberState
E = MemberEvent


# ---- classic: the table --------------------------------------------------------------------
def classic_group_in(state: ClassicGroupState) -> ClassicGroup:
    """A group brought to ``state`` by legal moves only."""
    path = {
        C.EMPTY: [], C.STABLE: [], C.PREPARING_REBALANCE: [C.PREPARING_REBALANCE],
        C.COMPLETING_REBALANCE: [C.PREPARING_REBALANCE, C.COMPLETING_REBALANCE], C.DEAD: [C.DEAD],
    }[state]
    g = ClassicGroup("g", initial_state=C.STABLE if state == C.STABLE else C.EMPTY)
    for s in path:
        g.transition(s, 1)
    assert g.state == state
    return g


@pytest.mark.parametrize("old", list(C))
@pytest.mark.parametrize("new", list(C))
def test_classic_table(old: ClassicGroupState, new: ClassicGroupState) -> None:
    g = classic_group_in(old)
    if new in CLASSIC_TRANSITIONS[old]:
        g.transition(new, 7)
        assert g.state == new and g.state_timestamp_ms == 7
    else:
        with pytest.raises(AssertionError):
            g.transition(new, 7)
        assert g.state == old


@pytest.mark.parametrize("state", list(C))
def test_classic_groups_are_created_empty_or_stable(state: ClassicGroupState) -> None:
    if state in CLASSIC_INITIAL:
        assert ClassicGroup("g", initial_state=state).state == state
    else:
        with pytest.raises(AssertionError):
            ClassicGroup("g", initial_state=state)


def test_classic_state_is_read_only() -> None:
    g = ClassicGroup("g")
    with pytest.raises(AttributeError):
        g.state = C.STABLE  # type: ignore[misc]


# ---- classic: requests from every state -----------------------------------------------------
CONFIG = GroupConfig(min_session_timeout_ms=10, max_session_timeout_ms=100_000, initial_rebalance_delay_ms=0)


class Classic:
    """A shard with group "g" of two members a (leader) and b, brought to a state by requests."""

    def __init__(self) -> None:
        self.n = 0
        self.shard = GroupShard(0, CONFIG, self._id)
        self.shard.on_loaded(0)
        self.now = 0
        self.ids: list[str] = []

    def _id(self) -> str:
        self.n += 1
        return str(self.n)

    @property
    def group(self) -> ClassicGroup:
        return self.shard.classic.groups["g"]

    def join(self, member_id: str = "", meta: bytes = b"m") -> Any:
        req = JoinGroupRequest(group_id="g", session_timeout_ms=5000, rebalance_timeout_ms=5000,
                               member_id=member_id, protocol_type="consumer",
                               protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=meta)])
        _records, reply = self.shard.join(req, 3, "c", "/h", self.now)
        return reply

    def tick(self, ms: int = 1) -> None:
        self.now += ms
        while (d := self.shard.next_deadline_ms()) is not None and d <= self.now:
            self.shard.on_timer(self.now)

    def sync(self, member_id: str, generation: int | None = None, assign: bool = False) -> Any:
        assignments = [SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=b"x") for m in self.ids]
        req = SyncGroupRequest(group_id="g", generation_id=self.group.generation_id if generation is None else generation,
                               member_id=member_id, assignments=assignments if assign else [])
        return self.shard.sync(req, 3, self.now)[1]

    def to(self, state: ClassicGroupState) -> Classic:
        a, b = self.join(), self.join()
        self.tick()  # the join phase ends (no initial delay): CompletingRebalance
        assert isinstance(a, Pending) and isinstance(b, Pending) and a.done and b.done
        ra, rb = a.value, b.value
        assert isinstance(ra, JoinGroupResponse) and isinstance(rb, JoinGroupResponse)
        leader, follower = (ra, rb) if ra.leader == ra.member_id else (rb, ra)
        self.ids = [leader.member_id, follower.member_id]
        if state in (C.STABLE, C.PREPARING_REBALANCE, C.EMPTY):
            self.sync(follower.member_id)
            self.sync(leader.member_id, assign=True)
        if state == C.PREPARING_REBALANCE:
            self.join(follower.member_id, meta=b"changed")  # new metadata: a rebalance
        if state == C.EMPTY:
            for mid in self.ids:
                self.leave(mid)
        if state == C.DEAD:
            self.shard.on_unloaded()
        assert self.group.state == state, (self.group.state, state)
        return self

    def leave(self, member_id: str) -> ErrorCode:
        req = LeaveGroupRequest(group_id="g", members=[LeaveGroupRequest.MemberIdentity(member_id=member_id)])
        resp = self.shard.leave(req, 3, self.now)[1]
        return ErrorCode(resp.members[0].error_code if resp.members else resp.error_code)

    def heartbeat(self, member_id: str) -> ErrorCode:
        req = HeartbeatRequest(group_id="g", generation_id=self.group.generation_id, member_id=member_id)
        return self.shard.heartbeat(req, 3, self.now)[1]


def _outcome(reply: Any) -> Any:
    if isinstance(reply, Pending):
        value: Any = reply.value
        return "parked" if not reply.done else value.error_code
    return reply.error_code


# from each state: (request) -> (the reply's error code or "parked", the state after)
CLASSIC_MATRIX: dict[ClassicGroupState, dict[str, tuple[Any, ClassicGroupState]]] = {
    C.EMPTY: {
        "heartbeat": (ErrorCode.UNKNOWN_MEMBER_ID, C.EMPTY),
        "sync": (ErrorCode.UNKNOWN_MEMBER_ID, C.EMPTY),
        "commit": (ErrorCode.UNKNOWN_MEMBER_ID, C.EMPTY),
        "simple_commit": (ErrorCode.NONE, C.EMPTY),
        "join_new": ("parked", C.PREPARING_REBALANCE),
        "leave": (ErrorCode.UNKNOWN_MEMBER_ID, C.EMPTY),
        "delete": (ErrorCode.NONE, C.DEAD),
    },
    C.PREPARING_REBALANCE: {
        "heartbeat": (ErrorCode.REBALANCE_IN_PROGRESS, C.PREPARING_REBALANCE),
        "sync": (ErrorCode.REBALANCE_IN_PROGRESS, C.PREPARING_REBALANCE),
        "commit": (ErrorCode.NONE, C.PREPARING_REBALANCE),
        "simple_commit": (ErrorCode.UNKNOWN_MEMBER_ID, C.PREPARING_REBALANCE),
        "join_new": ("parked", C.PREPARING_REBALANCE),
        "leave": (ErrorCode.NONE, C.COMPLETING_REBALANCE),  # the leader left: everyone else joined
        "delete": (ErrorCode.NON_EMPTY_GROUP, C.PREPARING_REBALANCE),
    },
    C.COMPLETING_REBALANCE: {
        "heartbeat": (ErrorCode.NONE, C.COMPLETING_REBALANCE),
        "sync": ("parked", C.COMPLETING_REBALANCE),  # the follower waits for the leader
        "commit": (ErrorCode.REBALANCE_IN_PROGRESS, C.COMPLETING_REBALANCE),
        "simple_commit": (ErrorCode.UNKNOWN_MEMBER_ID, C.COMPLETING_REBALANCE),
        "join_new": ("parked", C.PREPARING_REBALANCE),
        "leave": (ErrorCode.NONE, C.PREPARING_REBALANCE),
        "delete": (ErrorCode.NON_EMPTY_GROUP, C.COMPLETING_REBALANCE),
    },
    C.STABLE: {
        "heartbeat": (ErrorCode.NONE, C.STABLE),
        "sync": (ErrorCode.NONE, C.STABLE),
        "commit": (ErrorCode.NONE, C.STABLE),
        "simple_commit": (ErrorCode.UNKNOWN_MEMBER_ID, C.STABLE),
        "join_new": ("parked", C.PREPARING_REBALANCE),
        "leave": (ErrorCode.NONE, C.PREPARING_REBALANCE),
        "delete": (ErrorCode.NON_EMPTY_GROUP, C.STABLE),
    },
    C.DEAD: {
        "heartbeat": (ErrorCode.COORDINATOR_NOT_AVAILABLE, C.DEAD),
        "sync": (ErrorCode.COORDINATOR_NOT_AVAILABLE, C.DEAD),
        "commit": (ErrorCode.COORDINATOR_NOT_AVAILABLE, C.DEAD),
        "simple_commit": (ErrorCode.COORDINATOR_NOT_AVAILABLE, C.DEAD),
        "join_new": (ErrorCode.COORDINATOR_NOT_AVAILABLE, C.DEAD),
        "leave": (ErrorCode.COORDINATOR_NOT_AVAILABLE, C.DEAD),
        "delete": (ErrorCode.GROUP_ID_NOT_FOUND, C.DEAD),
    },
}


@pytest.mark.parametrize("state", list(C))
@pytest.mark.parametrize("request_kind", list(CLASSIC_MATRIX[C.EMPTY]))
def test_classic_requests_from_every_state(state: ClassicGroupState, request_kind: str) -> None:
    c = Classic().to(state)
    g = c.group
    leader, follower = c.ids
    member = follower if state != C.PREPARING_REBALANCE else leader
    outcome: Any
    if request_kind == "heartbeat":
        outcome = c.heartbeat(member)
    elif request_kind == "sync":
        outcome = _outcome(c.sync(member))
    elif request_kind in ("commit", "simple_commit"):
        simple = request_kind == "simple_commit"
        outcome = c.shard.validate_commit("g", -1 if simple else g.generation_id, "" if simple else member,
                                          None, False, c.now)
    elif request_kind == "join_new":
        outcome = _outcome(c.join())
    elif request_kind == "leave":
        outcome = c.leave(leader if state != C.EMPTY else "gone")
    else:
        _records, outcome = c.shard.delete_group("g", c.now)
    want, after = CLASSIC_MATRIX[state][request_kind]
    assert outcome == want
    assert g.state == after
    assert after == state or after in CLASSIC_TRANSITIONS[state]


# ---- KIP-848 members --------------------------------------------------------------------------
@pytest.mark.parametrize("state", list(M))
@pytest.mark.parametrize("event", list(E))
def test_member_table(state: MemberState, event: MemberEvent) -> None:
    want = MEMBER_TRANSITIONS.get((state, event))
    m = ConsumerMember("m", state=state)
    if want is None:
        with pytest.raises(AssertionError):
            member_next(state, event)
        with pytest.raises(AssertionError):
            m.moved(event)
    else:
        assert member_next(state, event) == want
        moved = m.moved(event, member_epoch=3)
        assert moved.state == want and moved.member_epoch == 3 and m.state == state


def test_member_state_changes_only_through_the_table() -> None:
    m = ConsumerMember("m")
    with pytest.raises(AssertionError):
        m.copy(state=M.UNRELEASED_PARTITIONS)
    assert M.from_value(2) == M.UNRELEASED_PARTITIONS and M.from_value(9) == M.UNKNOWN


T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


def member(state: MemberState, epoch: int, assigned: dict[uuid.UUID, set[int]],
           revoking: dict[uuid.UUID, set[int]] | None = None) -> ConsumerMember:
    return ConsumerMember("m", state=state, member_epoch=epoch, previous_member_epoch=epoch - 1,
                          assigned=assigned, pending_revocation=revoking or {})


# (state, what the member reports, what the group wants) -> (event, state, member epoch)
RECONCILE_CASES: dict[str, tuple[ConsumerMember, Any, dict[uuid.UUID, set[int]], dict[uuid.UUID, set[int]], int,
                                 MemberState, int]] = {
    # a STABLE member at the target's epoch holds
    "stable-holds": (member(M.STABLE, 5, {T1: {0}}), {T1: {0}}, {T1: {0}}, {}, 5, M.STABLE, 5),
    # a new target that only adds partitions: straight to it
    "stable-advances": (member(M.STABLE, 5, {T1: {0}}), {T1: {0}}, {T1: {0, 1}}, {}, 6, M.STABLE, 6),
    # ... when another member still holds one of them: UNRELEASED_PARTITIONS at the new epoch
    "stable-unreleased": (member(M.STABLE, 5, {T1: {0}}), {T1: {0}}, {T1: {0, 1}}, {T1: {1}}, 6,
                          M.UNRELEASED_PARTITIONS, 6),
    # a new target taking a partition it owns away: revoke first, epoch unchanged
    "stable-revokes": (member(M.STABLE, 5, {T1: {0, 1}}), {T1: {0, 1}}, {T1: {0}}, {}, 6,
                       M.UNREVOKED_PARTITIONS, 5),
    # it still reports the revoked partition: holds
    "unrevoked-holds": (member(M.UNREVOKED_PARTITIONS, 5, {T1: {0}}, {T1: {1}}), {T1: {0, 1}}, {T1: {0}}, {}, 6,
                        M.UNREVOKED_PARTITIONS, 5),
    # it did not say what it owns: holds
    "unrevoked-silent": (member(M.UNREVOKED_PARTITIONS, 5, {T1: {0}}, {T1: {1}}), None, {T1: {0}}, {}, 6,
                         M.UNREVOKED_PARTITIONS, 5),
    # revoked: on to the target's epoch
    "unrevoked-advances": (member(M.UNREVOKED_PARTITIONS, 5, {T1: {0}}, {T1: {1}}), {T1: {0}}, {T1: {0}}, {}, 6,
                           M.STABLE, 6),
    # revoked, but the target moved on and takes another one away
    "unrevoked-revokes-again": (member(M.UNREVOKED_PARTITIONS, 5, {T1: {0, 2}}, {T1: {1}}), {T1: {0, 2}},
                                {T1: {0}}, {}, 7, M.UNREVOKED_PARTITIONS, 5),
    # the partition it waited for is released
    "unreleased-released": (member(M.UNRELEASED_PARTITIONS, 6, {T1: {0}}), {T1: {0}}, {T1: {0, 1}}, {}, 6,
                            M.STABLE, 6),
    # still held by another member: stays
    "unreleased-waits": (member(M.UNRELEASED_PARTITIONS, 6, {T1: {0}}), {T1: {0}}, {T1: {0, 1}}, {T1: {1}}, 6,
                         M.UNRELEASED_PARTITIONS, 6),
    # a new target taking a partition away from an UNRELEASED member
    "unreleased-revokes": (member(M.UNRELEASED_PARTITIONS, 6, {T1: {0}, T2: {0}}), {T1: {0}, T2: {0}},
                           {T1: {0, 1}}, {}, 7, M.UNREVOKED_PARTITIONS, 6),
    # a state of a future version moves on by the same events
    "unknown-advances": (member(M.UNKNOWN, 6, {T1: {0}}), {T1: {0}}, {T1: {0}}, {}, 7, M.STABLE, 7),
}


@pytest.mark.parametrize("case", list(RECONCILE_CASES))
def test_reconcile_moves_by_the_member_table(case: str) -> None:
    m, owned, target, others, target_epoch, want, epoch = RECONCILE_CASES[case]
    new = reconcile(m, target_epoch, target, owned, others)
    assert (new.state, new.member_epoch) == (want, epoch)


# ---- consumer groups ------------------------------------------------------------------------------
def consumer_group_in(state: ConsumerGroupState) -> ConsumerGroup:
    g = ConsumerGroup("g", group_epoch=3, assignment_epoch=3)
    if state != G.EMPTY and state != G.DEAD:
        g.members["a"] = ConsumerMember("a", member_epoch=3)
        if state == G.ASSIGNING:
            g.group_epoch = 4
        elif state == G.RECONCILING:
            g.members["a"] = ConsumerMember("a", member_epoch=2)
    g.refresh_state()
    if state == G.DEAD:
        g.mark_dead()
    assert g.state == state
    return g


def steer(g: ConsumerGroup, state: ConsumerGroupState) -> None:
    """Change ``g``'s data so that it derives ``state``."""
    g.members.clear()
    g.group_epoch = g.assignment_epoch = 5
    if state == G.EMPTY:
        return
    g.members["b"] = ConsumerMember("b", member_epoch=5 if state != G.RECONCILING else 4)
    if state == G.ASSIGNING:
        g.group_epoch = 6


@pytest.mark.parametrize("old", list(G))
@pytest.mark.parametrize("new", list(G))
def test_consumer_group_table(old: ConsumerGroupState, new: ConsumerGroupState) -> None:
    g = consumer_group_in(old)
    allowed = new in CONSUMER_GROUP_TRANSITIONS[old]
    if new == G.DEAD:
        act = g.mark_dead
    else:
        steer(g, new)
        act = g.refresh_state
    if allowed:
        act()
        assert g.state == new
    else:
        with pytest.raises(AssertionError):
            act()
        assert g.state == old
