"""The classic protocol's rebalance: the join and sync phases of a group and their timers (the
state machine is ``groups/states.py``, ``ClassicGroupState``).

Timers (keys of the shard's ``Timers``): ("join", group) ends the join phase (the rebalance
timeout, or the initial delay of an empty group, extended while members keep joining);
("sync", group) ends the sync phase; ("hb", group, member) is a member's session;
("pending", group, member) forgets a member id handed out with MEMBER_ID_REQUIRED that never
came back. As Kafka's new coordinator, the live path changes classic groups itself (no replay)
and writes their GroupMetadata record when a generation is formed or the group empties.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from groups.classic import ClassicGroup, ClassicMember, join_error, sync_error
from groups.config import GroupConfig
from groups.records import Records, classic_group_record
from groups.states import ClassicGroupState
from groups.timers import Timers
from protocol._generated.join_group_response import JoinGroupResponse
from protocol._generated.sync_group_response import SyncGroupResponse
from protocol.errors import ErrorCode

S = ClassicGroupState
JOIN_TIMER, SYNC_TIMER, HEARTBEAT_TIMER, PENDING_TIMER = "join", "sync", "hb", "pending"
TIMER_KINDS = frozenset({JOIN_TIMER, SYNC_TIMER, HEARTBEAT_TIMER, PENDING_TIMER})


def join_response(g: ClassicGroup, m: ClassicMember, skip_assignment: bool = False) -> JoinGroupResponse:
    members = []
    if g.leader_id == m.member_id:
        members = [
            JoinGroupResponse.JoinGroupResponseMember(
                member_id=x.member_id, group_instance_id=x.group_instance_id,
                metadata=x.metadata(g.protocol_name),
            )
            for x in g.members.values()
        ]
    return JoinGroupResponse(
        error_code=ErrorCode.NONE,
        generation_id=g.generation_id,
        protocol_type=g.protocol_type,
        protocol_name=g.protocol_name,
        leader=g.leader_id or "",
        skip_assignment=skip_assignment,
        member_id=m.member_id,
        members=members,
    )


def sync_response(g: ClassicGroup, m: ClassicMember) -> SyncGroupResponse:
    return SyncGroupResponse(
        error_code=ErrorCode.NONE, protocol_type=g.protocol_type,
        protocol_name=g.protocol_name, assignment=m.assignment,
    )


def hb_key(g: ClassicGroup, member_id: str) -> Hashable:
    return (HEARTBEAT_TIMER, g.group_id, member_id)


class ClassicRebalance:
    def __init__(self, config: GroupConfig, timers: Timers) -> None:
        self.config = config
        self.timers = timers

    def schedule_heartbeat(self, g: ClassicGroup, m: ClassicMember, now_ms: int) -> None:
        self.timers.schedule(hb_key(g, m.member_id), now_ms + m.session_timeout_ms)

    def on_timer(self, g: ClassicGroup, key: tuple[Any, ...], now_ms: int) -> Records:
        kind = key[0]
        if kind == JOIN_TIMER:
            return self.join_deadline(g, now_ms)
        if kind == SYNC_TIMER:
            return self.sync_deadline(g, now_ms)
        if kind == HEARTBEAT_TIMER:
            return self.heartbeat_expired(g, key[2], now_ms)
        if kind == PENDING_TIMER:
            g.pending_members.discard(key[2])
            if g.is_in(S.PREPARING_REBALANCE) and g.all_joined():
                return self.complete_join(g, now_ms)
        return []

    def remove_member(self, g: ClassicGroup, m: ClassicMember, code: ErrorCode, now_ms: int) -> Records:
        """Remove ``m`` (left, expired, fenced) and move the group on."""
        if m.join_pending is not None:
            m.join_pending.complete(join_error(code, m.member_id))
            m.join_pending = None
        if m.sync_pending is not None:
            m.sync_pending.complete(sync_error(code))
            m.sync_pending = None
        self.timers.cancel(hb_key(g, m.member_id))
        g.remove(m.member_id)
        records: Records = []
        if g.is_in(S.STABLE, S.COMPLETING_REBALANCE):
            # Kafka's prepareRebalance ends with maybeCompleteJoinPhase: the last member
            # leaving empties the group at once
            records = self.prepare_rebalance(g, now_ms)
        return records + self.try_complete_join(g, now_ms)

    # ---- the join phase ----------------------------------------------------------------
    def maybe_prepare_rebalance(self, g: ClassicGroup, now_ms: int) -> Records:
        if g.is_in(S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY):
            return self.prepare_rebalance(g, now_ms)
        return []

    def prepare_rebalance(self, g: ClassicGroup, now_ms: int) -> Records:
        if g.is_in(S.COMPLETING_REBALANCE):
            for m in g.members.values():
                m.assignment = b""
                if m.sync_pending is not None:
                    m.sync_pending.complete(sync_error(ErrorCode.REBALANCE_IN_PROGRESS))
                    m.sync_pending = None
            self.timers.cancel((SYNC_TIMER, g.group_id))
        g.pending_sync.clear()
        rebalance_timeout = g.rebalance_timeout_ms()
        if g.is_in(S.EMPTY):
            delay = self.config.initial_rebalance_delay_ms
            g.initial_delay_remaining_ms = max(rebalance_timeout - delay, 0)
            g.new_member_added = False
            self.timers.schedule((JOIN_TIMER, g.group_id), now_ms + min(delay, rebalance_timeout))
        else:
            g.initial_delay_remaining_ms = -1
            self.timers.schedule((JOIN_TIMER, g.group_id), now_ms + rebalance_timeout)
        g.transition(S.PREPARING_REBALANCE, now_ms)
        return []

    def try_complete_join(self, g: ClassicGroup, now_ms: int) -> Records:
        if g.is_in(S.PREPARING_REBALANCE) and g.initial_delay_remaining_ms < 0 and g.all_joined():
            return self.complete_join(g, now_ms)
        return []

    def join_deadline(self, g: ClassicGroup, now_ms: int) -> Records:
        if not g.is_in(S.PREPARING_REBALANCE):
            return []
        if g.initial_delay_remaining_ms >= 0:
            remaining = g.initial_delay_remaining_ms
            if g.new_member_added and remaining > 0:
                delay = min(self.config.initial_rebalance_delay_ms, remaining)
                g.initial_delay_remaining_ms = max(remaining - delay, 0)
                g.new_member_added = False
                self.timers.schedule((JOIN_TIMER, g.group_id), now_ms + delay)
                return []
            g.initial_delay_remaining_ms = -1
        return self.complete_join(g, now_ms)

    def complete_join(self, g: ClassicGroup, now_ms: int) -> Records:
        """The join phase ends: members that did not rejoin are dropped, the generation
        bumped, every parked JoinGroup answered; CompletingRebalance (Empty without members)."""
        self.timers.cancel((JOIN_TIMER, g.group_id))
        g.initial_delay_remaining_ms = -1
        for m in list(g.members.values()):
            if m.join_pending is None and m.group_instance_id is None:
                self.timers.cancel(hb_key(g, m.member_id))
                g.remove(m.member_id)
        # pending (MEMBER_ID_REQUIRED) members that never came back are forgotten
        for mid in g.pending_members:
            self.timers.cancel((PENDING_TIMER, g.group_id, mid))
        g.pending_members.clear()
        g.generation_id += 1
        if not g.members:
            g.protocol_name = None
            g.leader_id = None
            g.transition(S.EMPTY, now_ms)
            return [classic_group_record(g)]
        g.protocol_name = g.select_protocol()
        if g.leader_id not in g.members or g.members[g.leader_id].join_pending is None:
            joined = [mid for mid, m in g.members.items() if m.join_pending is not None]
            g.leader_id = joined[0] if joined else next(iter(g.members))
        g.transition(S.COMPLETING_REBALANCE, now_ms)
        g.pending_sync = set(g.members)
        for m in g.members.values():
            m.is_new = False
            if m.join_pending is not None:
                m.join_pending.complete(join_response(g, m))
                m.join_pending = None
            self.schedule_heartbeat(g, m, now_ms)
        self.timers.schedule((SYNC_TIMER, g.group_id), now_ms + g.rebalance_timeout_ms())
        return []

    # ---- member and sync deadlines -----------------------------------------------------
    def heartbeat_expired(self, g: ClassicGroup, member_id: str, now_ms: int) -> Records:
        m = g.members.get(member_id)
        if m is None:
            return []
        if m.join_pending is not None and not m.is_new:
            # parked in the join phase: alive until the phase ends
            self.schedule_heartbeat(g, m, now_ms)
            return []
        return self.remove_member(g, m, ErrorCode.UNKNOWN_MEMBER_ID, now_ms)

    def sync_deadline(self, g: ClassicGroup, now_ms: int) -> Records:
        if not g.is_in(S.COMPLETING_REBALANCE):
            return []
        records: Records = []
        late = [g.members[mid] for mid in g.pending_sync if mid in g.members]
        g.pending_sync.clear()
        for m in late:
            if m.sync_pending is not None:
                m.sync_pending.complete(sync_error(ErrorCode.REBALANCE_IN_PROGRESS))
                m.sync_pending = None
            self.timers.cancel(hb_key(g, m.member_id))
            g.remove(m.member_id)
        if late:
            records += self.prepare_rebalance(g, now_ms)
            records += self.try_complete_join(g, now_ms)
        return records

    def complete_sync(self, g: ClassicGroup, assignments: dict[str, bytes], now_ms: int) -> Records:
        """The leader's SyncGroup: every member gets its assignment; Stable, persisted."""
        for mid, member in g.members.items():
            member.assignment = assignments.get(mid, b"")
        self.timers.cancel((SYNC_TIMER, g.group_id))
        g.pending_sync.clear()
        g.transition(S.STABLE, now_ms)
        for member in g.members.values():
            if member.sync_pending is not None:
                member.sync_pending.complete(sync_response(g, member))
                member.sync_pending = None
        return [classic_group_record(g)]
