"""Live state == state rebuilt from the emitted records, for KIP-848 consumer groups with
classic members and the conversions between the two group types (Hypothesis state machine over
GroupShard; the classic protocol alone is tests/test_groups_state_machine.py).

Clients: consumer-protocol members (dynamic or static; join, heartbeat reporting what they own
or not, leave, static leave, stale epochs) and classic members (JoinGroup with the
MEMBER_ID_REQUIRED round, SyncGroup, Heartbeat, LeaveGroup), time passing with timers firing
(sessions, revocation and rejoin deadlines), DeleteGroups. After every step:

* the consumer groups a shard rebuilds by replaying every record emitted so far equal the live
  ones field by field (epochs, members with their state and assignments, target, regexes), and
  their state is the one their members and epochs derive;
* every member state and group state is one of its table's;
* a classic group (after a downgrade) that is Stable or Empty is rebuilt with the same
  generation, protocol and members.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from groups.config import GroupConfig
from groups.consumer_protocol import encode_subscription
from groups.shard import GroupShard
from groups.states import ClassicGroupState, ConsumerGroupState, MemberState
from protocol._generated.consumer_group_heartbeat_request import ConsumerGroupHeartbeatRequest
from protocol._generated.heartbeat_request import HeartbeatRequest
from protocol._generated.join_group_request import JoinGroupRequest
from protocol._generated.join_group_response import JoinGroupResponse
from protocol._generated.leave_group_request import LeaveGroupRequest
from protocol._generated.sync_group_request import SyncGroupRequest
from protocol.coordinator import CoordinatorRecord, Pending
from protocol.errors import ErrorCode

GROUP = "g"
TOPICS = {"a": (uuid.UUID(int=1), 4), "b": (uuid.UUID(int=2), 3)}
CONFIG = GroupConfig(
    min_session_timeout_ms=10, max_session_timeout_ms=100_000, initial_rebalance_delay_ms=0,
    consumer_session_timeout_ms=3000, consumer_assignment_interval_ms=0,
)
NEW, CLASSIC = 3, 2  # consumer-protocol clients, classic clients


class ConsumerGroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.counter = 0
        self.shard = GroupShard(0, CONFIG, self._next_id)
        self.shard.on_loaded(0)
        self.log: list[CoordinatorRecord] = []
        self.now = 0
        self.epoch = [0] * NEW
        self.owned: list[dict[uuid.UUID, list[int]]] = [{} for _ in range(NEW)]
        self.classic_id = [""] * CLASSIC
        self.generation = [-1] * CLASSIC
        self.joins: list[Pending[Any] | None] = [None] * CLASSIC
        self.last_type: str | None = None

    def _next_id(self) -> str:
        self.counter += 1
        return f"id{self.counter}"

    def _type(self) -> str | None:
        if GROUP in self.shard.consumer.groups:
            return "consumer"
        return "classic" if GROUP in self.shard.classic.groups else None

    def _apply(self, records: list[CoordinatorRecord]) -> None:
        for r in records:
            self.shard.replay(len(self.log), -1, 0, r)
            self.log.append(r)
        now = self._type()
        if self.last_type is not None and now not in (self.last_type, None):
            event(f"converted to {now}")
        self.last_type = now
        for i, p in enumerate(self.joins):
            if p is not None and p.done:
                if isinstance(p.value, JoinGroupResponse) and p.value.error_code == ErrorCode.NONE:
                    self.generation[i] = p.value.generation_id
                self.joins[i] = None

    # ---- consumer-protocol members -------------------------------------------------------
    def _heartbeat(self, c: int, req: ConsumerGroupHeartbeatRequest) -> None:
        records, resp = self.shard.consumer_heartbeat(req, 1, f"c{c}", "/h", TOPICS, self.now)
        self._apply(records)
        event(f"heartbeat {ErrorCode(resp.error_code).name}")
        if resp.error_code != ErrorCode.NONE:
            if resp.error_code in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
                self.epoch[c], self.owned[c] = 0, {}
            return
        self.epoch[c] = max(resp.member_epoch, 0)
        if resp.assignment is not None:
            self.owned[c] = {tp.topic_id: list(tp.partitions) for tp in resp.assignment.topic_partitions}

    @rule(c=st.integers(0, NEW - 1), topics=st.sets(st.sampled_from(sorted(TOPICS)), min_size=1),
          static=st.booleans())
    def join(self, c: int, topics: set[str], static: bool) -> None:
        self._heartbeat(c, ConsumerGroupHeartbeatRequest(
            group_id=GROUP, member_id=f"m{c}", member_epoch=0, rebalance_timeout_ms=2000,
            instance_id=f"i{c}" if static else None, subscribed_topic_names=sorted(topics), topic_partitions=[]))

    @rule(c=st.integers(0, NEW - 1), report=st.booleans(), stale=st.booleans())
    def heartbeat(self, c: int, report: bool, stale: bool) -> None:
        owned = [ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=t, partitions=p)
                 for t, p in self.owned[c].items()] if report else None
        self._heartbeat(c, ConsumerGroupHeartbeatRequest(
            group_id=GROUP, member_id=f"m{c}", member_epoch=self.epoch[c] + (3 if stale else 0),
            topic_partitions=owned))

    @rule(c=st.integers(0, NEW - 1), static=st.booleans())
    def leave(self, c: int, static: bool) -> None:
        self._heartbeat(c, ConsumerGroupHeartbeatRequest(
            group_id=GROUP, member_id=f"m{c}", member_epoch=-2 if static else -1,
            instance_id=f"i{c}" if static else None))
        self.epoch[c], self.owned[c] = 0, {}

    # ---- classic members ---------------------------------------------------------------------
    @rule(c=st.integers(0, CLASSIC - 1), topics=st.sets(st.sampled_from(sorted(TOPICS)), min_size=1))
    def classic_join(self, c: int, topics: set[str]) -> None:
        req = JoinGroupRequest(
            group_id=GROUP, session_timeout_ms=2500, rebalance_timeout_ms=2000, member_id=self.classic_id[c],
            protocol_type="consumer", protocols=[JoinGroupRequest.JoinGroupRequestProtocol(
                name="range", metadata=encode_subscription(sorted(topics)))])
        records, reply = self.shard.join(req, 9, f"k{c}", "/h", self.now)
        if isinstance(reply, Pending):
            self.joins[c] = reply
        elif reply.error_code in (ErrorCode.MEMBER_ID_REQUIRED, ErrorCode.NONE):
            self.classic_id[c] = reply.member_id
            self.generation[c] = reply.generation_id if reply.error_code == ErrorCode.NONE else -1
        self._apply(records)

    @rule(c=st.integers(0, CLASSIC - 1), topics=st.sets(st.sampled_from(sorted(TOPICS)), min_size=1))
    def classic_round(self, c: int, topics: set[str]) -> None:
        """A classic client's whole round: join (twice for MEMBER_ID_REQUIRED), the join phase
        ending, SyncGroup."""
        self.classic_join(c, topics)
        if self.joins[c] is None and self.generation[c] < 0:
            self.classic_join(c, topics)
        self.time_passes(1)
        self.classic_sync(c)

    @rule(c=st.integers(0, CLASSIC - 1))
    def classic_sync(self, c: int) -> None:
        records, _reply = self.shard.sync(SyncGroupRequest(
            group_id=GROUP, generation_id=self.generation[c], member_id=self.classic_id[c], assignments=[
                SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=b"") for m in self.classic_id if m]),
            5, self.now)
        self._apply(records)

    @rule(c=st.integers(0, CLASSIC - 1))
    def classic_heartbeat(self, c: int) -> None:
        records, _code = self.shard.heartbeat(HeartbeatRequest(
            group_id=GROUP, generation_id=self.generation[c], member_id=self.classic_id[c]), 4, self.now)
        self._apply(records)

    @rule(c=st.integers(0, CLASSIC - 1))
    def classic_leave(self, c: int) -> None:
        records, _resp = self.shard.leave(LeaveGroupRequest(group_id=GROUP, members=[
            LeaveGroupRequest.MemberIdentity(member_id=self.classic_id[c])]), 3, self.now)
        self._apply(records)

    # ---- the group, time ---------------------------------------------------------------------------
    @rule()
    def delete(self) -> None:
        records, _code = self.shard.delete_group(GROUP, self.now)
        self._apply(records)

    @rule(ms=st.integers(1, 4000))
    def time_passes(self, ms: int) -> None:
        target = self.now + ms
        while (d := self.shard.next_deadline_ms()) is not None and d <= target:
            self.now = max(self.now, d)
            self._apply(self.shard.on_timer(self.now))
        self.now = target

    # ---- invariants ----------------------------------------------------------------------------------
    def _rebuilt(self) -> GroupShard:
        fresh = GroupShard(0, CONFIG, lambda: "x")
        for offset, r in enumerate(self.log):
            fresh.replay(offset, -1, 0, r)
        fresh.on_loaded(self.now)
        return fresh

    @invariant()
    def consumer_groups_rebuild_from_their_records(self) -> None:
        fresh = self._rebuilt()
        live = self.shard.consumer.groups
        assert set(fresh.consumer.groups) == set(live)
        for gid, g in live.items():
            back = fresh.consumer.groups[gid]
            event(f"consumer group {g.state.value}")
            assert g.state == g.derived_state() and g.state != ConsumerGroupState.DEAD
            assert back.state == g.state
            for f in ("group_epoch", "metadata_hash", "assignment_epoch", "assignment_timestamp_ms", "target",
                      "regexes"):
                assert getattr(back, f) == getattr(g, f), f
            assert set(back.members) == set(g.members)
            for mid, m in g.members.items():
                assert m.state in MemberState
                assert dataclasses.asdict(back.members[mid]) == dataclasses.asdict(m)

    @invariant()
    def classic_groups_rebuild_from_their_records(self) -> None:
        live = self.shard.classic.groups.get(GROUP)
        event(f"classic group {live.state.value if live is not None else None}")
        if live is None or live.state not in (ClassicGroupState.STABLE, ClassicGroupState.EMPTY):
            return
        if live.state == ClassicGroupState.EMPTY and live.generation_id == 0:
            return  # nothing persisted
        back = self._rebuilt().classic.groups.get(GROUP)
        assert back is not None and back.state == live.state
        assert (back.generation_id, back.protocol_type) == (live.generation_id, live.protocol_type)
        if live.state == ClassicGroupState.STABLE:
            assert {k: m.assignment for k, m in back.members.items()} == {
                k: m.assignment for k, m in live.members.items()}


ConsumerGroupMachine.TestCase.settings = settings(
    max_examples=40, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow],
)
TestConsumerGroupMachine = ConsumerGroupMachine.TestCase
