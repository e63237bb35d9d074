"""Hypothesis state machine over the sans-I/O group coordinator (groups/shard.py).

Every input (JoinGroup v0/v4/v9 dynamic or static, SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit simple/member, TxnOffsetCommit + COMMIT/ABORT markers, DeleteGroups, time passing
with timers firing) from every state, with stale generations and forged member ids mixed in.
After every step:

* the group's state is one of the table's, and the members agree with it (parked JoinGroups
  only while PreparingRebalance, parked SyncGroups only while CompletingRebalance, no member
  when Empty, a leader among the members otherwise);
* a shard rebuilt by replaying every record emitted so far has the same committed offsets, and
  the same persisted group (generation, protocol, members, assignments) for Stable and Empty
  groups: live state == state rebuilt from the emitted records.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from groups.config import GroupConfig
from groups.shard import GroupShard
from groups.states import CLASSIC_TRANSITIONS as TRANSITIONS
from groups.states import ClassicGroupState
from protocol._generated.heartbeat_request import HeartbeatRequest
from protocol._generated.join_group_request import JoinGroupRequest
from protocol._generated.join_group_response import JoinGroupResponse
from protocol._generated.leave_group_request import LeaveGroupRequest
from protocol._generated.sync_group_request import SyncGroupRequest
from protocol.coordinator import CoordinatorRecord, Pending
from protocol.errors import ErrorCode

S = ClassicGroupState
GROUP = "g"
CLIENTS = 4
CONFIG = GroupConfig(
    min_session_timeout_ms=10, max_session_timeout_ms=100_000, initial_rebalance_delay_ms=50,
    offsets_retention_ms=5000, offsets_retention_check_interval_ms=700,
)


class Log:
    """What the runtime would append: records with offsets, markers."""

    def __init__(self) -> None:
        self.entries: list[tuple[str, int, int, Any]] = []  # (kind, offset, pid, payload)
        self.next_offset = 0

    def append(self, shard: GroupShard, records: list[CoordinatorRecord], pid: int = -1) -> None:
        for r in records:
            off = self.next_offset
            self.next_offset += 1
            self.entries.append(("rec", off, pid, r))
            shard.replay(off, pid, 0, r)

    def marker(self, shard: GroupShard, pid: int, committed: bool) -> None:
        off = self.next_offset
        self.next_offset += 1
        self.entries.append(("end", off, pid, committed))
        shard.replay_end_txn(off, pid, 0, committed)

    def rebuild(self, now_ms: int) -> GroupShard:
        fresh = GroupShard(0, CONFIG, lambda: "x")
        for kind, off, pid, payload in self.entries:
            if kind == "rec":
                fresh.replay(off, pid, 0, payload)
            else:
                fresh.replay_end_txn(off, pid, 0, payload)
        fresh.on_loaded(now_ms)
        return fresh


class GroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.counter = 0
        self.shard = GroupShard(0, CONFIG, self._next_id)
        self.shard.on_loaded(0)
        self.log = Log()
        self.now = 0
        self.member: list[str] = [""] * CLIENTS
        self.generation: list[int] = [-1] * CLIENTS
        self.joins: list[Pending[Any] | None] = [None] * CLIENTS
        self.leader: int | None = None

    def _next_id(self) -> str:
        self.counter += 1
        return f"id{self.counter}"

    def _apply(self, records: list[CoordinatorRecord]) -> None:
        self.log.append(self.shard, records)
        self._harvest()

    def _harvest(self) -> None:
        for i, p in enumerate(self.joins):
            if p is not None and p.done:
                resp = p.value
                assert isinstance(resp, JoinGroupResponse)
                if resp.error_code == ErrorCode.NONE:
                    self.member[i] = resp.member_id
                    self.generation[i] = resp.generation_id
                    if resp.leader == resp.member_id:
                        self.leader = i
                self.joins[i] = None

    # ---- inputs ------------------------------------------------------------------------
    @rule(
        c=st.integers(0, CLIENTS - 1), version=st.sampled_from([0, 4, 9]), static=st.booleans(),
        forged=st.booleans(), proto=st.sampled_from(["range", "roundrobin"]),
        meta=st.binary(max_size=4),
    )
    def join(self, c: int, version: int, static: bool, forged: bool, proto: str, meta: bytes) -> None:
        member_id = "forged" if forged else self.member[c]
        req = JoinGroupRequest(
            group_id=GROUP, session_timeout_ms=1000, rebalance_timeout_ms=2000,
            member_id=member_id, group_instance_id=f"inst{c}" if static else None,
            protocol_type="consumer",
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name=proto, metadata=meta)],
        )
        records, reply = self.shard.join(req, version, f"client{c}", "/127.0.0.1", self.now)
        if isinstance(reply, Pending):
            self.joins[c] = reply
        elif reply.error_code == ErrorCode.MEMBER_ID_REQUIRED:
            self.member[c] = reply.member_id
        elif reply.error_code == ErrorCode.NONE:
            self.member[c] = reply.member_id
            self.generation[c] = reply.generation_id
        self._apply(records)

    @rule(c=st.integers(0, CLIENTS - 1), stale=st.booleans(), assign=st.booleans())
    def sync(self, c: int, stale: bool, assign: bool) -> None:
        assignments = []
        if assign:
            assignments = [
                SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=m.encode())
                for m in self.member if m
            ]
        req = SyncGroupRequest(
            group_id=GROUP, generation_id=self.generation[c] + (7 if stale else 0),
            member_id=self.member[c], assignments=assignments,
        )
        records, _reply = self.shard.sync(req, 5, self.now)
        self._apply(records)

    @rule()
    def leader_completes_rebalance(self) -> None:
        """The client that last learned it leads answers like a real leader would."""
        if self.leader is not None:
            self.sync(self.leader, False, True)

    @rule(c=st.integers(0, CLIENTS - 1), stale=st.booleans())
    def heartbeat(self, c: int, stale: bool) -> None:
        req = HeartbeatRequest(group_id=GROUP, generation_id=self.generation[c] - int(stale),
                               member_id=self.member[c])
        records, _code = self.shard.heartbeat(req, 4, self.now)
        self._apply(records)

    @rule(c=st.integers(0, CLIENTS - 1), by_instance=st.booleans(), version=st.sampled_from([1, 5]))
    def leave(self, c: int, by_instance: bool, version: int) -> None:
        ident = LeaveGroupRequest.MemberIdentity(
            member_id="" if by_instance else self.member[c],
            group_instance_id=f"inst{c}" if by_instance else None,
        )
        req = LeaveGroupRequest(group_id=GROUP, member_id=self.member[c], members=[ident])
        records, _resp = self.shard.leave(req, version, self.now)
        self._apply(records)

    @rule(c=st.integers(0, CLIENTS - 1), simple=st.booleans(), p=st.integers(0, 2),
          offset=st.integers(0, 100))
    def commit(self, c: int, simple: bool, p: int, offset: int) -> None:
        gen, mid = (-1, "") if simple else (self.generation[c], self.member[c])
        code = self.shard.validate_commit(GROUP, gen, mid, None, False, self.now)
        if code == ErrorCode.NONE:
            self._apply([self.shard.offset_record(GROUP, "t", p, offset, 0, "m", self.now)])

    @rule(pid=st.integers(1, 3), p=st.integers(0, 2), offset=st.integers(0, 100))
    def txn_commit(self, pid: int, p: int, offset: int) -> None:
        code = self.shard.validate_commit(GROUP, -1, "", None, True, self.now)
        if code == ErrorCode.NONE:
            self.log.append(self.shard, [self.shard.offset_record(GROUP, "t", p, offset, 0, "", self.now)], pid)

    @rule(pid=st.integers(1, 3), committed=st.booleans())
    def marker(self, pid: int, committed: bool) -> None:
        self.log.marker(self.shard, pid, committed)

    @rule()
    def delete(self) -> None:
        records, _code = self.shard.delete_group(GROUP, self.now)
        self._apply(records)

    @rule(ms=st.integers(1, 3000))
    def time_passes(self, ms: int) -> None:
        target = self.now + ms
        while True:
            d = self.shard.next_deadline_ms()
            if d is None or d > target:
                break
            self.now = max(self.now, d)
            self._apply(self.shard.on_timer(self.now))
        self.now = target

    @rule()
    def describe_and_list(self) -> None:
        d = self.shard.describe(GROUP)
        assert d.error_code == ErrorCode.NONE
        listed = self.shard.list_groups([], [])
        g = self.shard.classic.groups.get(GROUP)
        assert (g is not None) == any(x.group_id == GROUP for x in listed)
        self.shard.fetch_offsets(GROUP, None, True)

    # ---- invariants --------------------------------------------------------------------
    @invariant()
    def group_consistent(self) -> None:
        g = self.shard.classic.groups.get(GROUP)
        event(f"state {g.state.value if g is not None else None}")
        if g is None:
            return
        assert g.state in TRANSITIONS
        for m in g.members.values():
            if m.join_pending is not None:
                assert g.state == S.PREPARING_REBALANCE, g.state
            if m.sync_pending is not None:
                assert g.state == S.COMPLETING_REBALANCE, g.state
        if g.state == S.EMPTY:
            assert not g.members
        if g.state in (S.STABLE, S.COMPLETING_REBALANCE):
            assert g.members and g.leader_id in g.members
        for iid, mid in g.static_members.items():
            assert g.members[mid].group_instance_id == iid

    @invariant()
    def rebuilt_equals_live(self) -> None:
        fresh = self.log.rebuild(self.now)
        assert fresh.offsets.committed == self.shard.offsets.committed
        assert set(fresh.offsets.pending) == set(self.shard.offsets.pending)
        live = self.shard.classic.groups.get(GROUP)
        if live is None or live.state not in (S.STABLE, S.EMPTY):
            return
        if live.state == S.EMPTY and live.generation_id == 0:
            return  # a simple/new group: nothing persisted besides offsets
        back = fresh.classic.groups.get(GROUP)
        assert back is not None
        assert back.state == live.state
        assert back.generation_id == live.generation_id
        assert back.protocol_type == live.protocol_type
        if live.state == S.STABLE:
            assert back.protocol_name == live.protocol_name
            assert back.leader_id == live.leader_id
            assert {k: m.assignment for k, m in back.members.items()} == {
                k: m.assignment for k, m in live.members.items()
            }
            assert back.static_members == live.static_members


GroupMachine.TestCase.settings = settings(
    max_examples=200, stateful_step_count=50, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestGroupMachine = GroupMachine.TestCase


def test_offsets_retention_expires_and_deletes_empty_groups() -> None:
    """offsets.retention.minutes: a simple group's offsets expire after their commit; an Empty
    consumer group's after it became empty; a Stable group keeps subscribed topics' offsets."""
    from groups.consumer_protocol import encode_subscription
    from protocol.coordinator import record_type

    shard = GroupShard(0, CONFIG, lambda: "m")
    shard.on_loaded(0)
    log = Log()
    assert shard.validate_commit("simple", -1, "", None, False, 0) == ErrorCode.NONE
    log.append(shard, [shard.offset_record("simple", "t", 0, 5, 0, "", 0)])
    # a consumer group, Stable, subscribed to "t" with an old offset on "other"
    req = JoinGroupRequest(group_id="cg", session_timeout_ms=100_000, rebalance_timeout_ms=100,
                           protocol_type="consumer", protocols=[JoinGroupRequest.JoinGroupRequestProtocol(
                               name="range", metadata=encode_subscription(["t"]))])
    records, pending = shard.join(req, 3, "c", "/h", 0)
    log.append(shard, records)
    log.append(shard, shard.on_timer(100))  # initial delay over: join completes
    assert isinstance(pending, Pending) and pending.done
    mid = pending.value.member_id  # type: ignore[union-attr]
    records, _ = shard.sync(SyncGroupRequest(group_id="cg", generation_id=1, member_id=mid), 3, 100)
    log.append(shard, records)
    log.append(shard, [shard.offset_record("cg", "t", 0, 1, 0, "", 100),
                       shard.offset_record("cg", "other", 0, 1, 0, "", 100)])
    records, _ = shard.heartbeat(HeartbeatRequest(group_id="cg", generation_id=1, member_id=mid), 3, 6000)
    expired = shard.expire_offsets(6000)
    log.append(shard, expired)
    assert "simple" not in shard.classic.groups
    assert shard.offsets.group_offsets("cg").keys() == {("t", 0)}
    assert [record_type(r.key) for r in expired] == [1, 1, 2]  # cg/other, simple offset, simple group
    assert log.rebuild(6000).offsets.committed == shard.offsets.committed
