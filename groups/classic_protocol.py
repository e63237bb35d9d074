"""The classic group protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup of classic groups, and
what offsets and admin requests ask of them (a group type of ``groups/group_type.py``). The
phases and their timers are ``groups/classic_rebalance.py``; the states ``groups/states.py``.

Each handler is ``op(request..., now_ms) -> (records, reply)``; the reply may be a ``Pending``
(a parked JoinGroup/SyncGroup) that a later operation or timer completes. Classic groups are
changed by the live path itself (Kafka's ``replayRecords=false``), which writes GroupMetadata
records so that a restart can rebuild them (``groups/replay.py``); simple groups (offsets only,
no protocol type) are created by a commit and by replaying their offsets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from groups.classic import ClassicGroup, ClassicMember, join_error, sync_error
from groups.classic_rebalance import (
    PENDING_TIMER,
    TIMER_KINDS,
    ClassicRebalance,
    hb_key,
    join_response,
    sync_response,
)
from groups.config import GroupConfig
from groups.group_type import Expiry
from groups.records import Records, classic_group_record, classic_group_tombstone
from groups.states import ClassicGroupState
from groups.timers import Timers
from protocol._generated.describe_groups_response import DescribeGroupsResponse
from protocol._generated.heartbeat_request import HeartbeatRequest
from protocol._generated.join_group_request import JoinGroupRequest
from protocol._generated.join_group_response import JoinGroupResponse
from protocol._generated.leave_group_request import LeaveGroupRequest
from protocol._generated.leave_group_response import LeaveGroupResponse
from protocol._generated.list_groups_response import ListGroupsResponse
from protocol._generated.sync_group_request import SyncGroupRequest
from protocol._generated.sync_group_response import SyncGroupResponse
from protocol.coordinator import Pending
from protocol.errors import ErrorCode

S = ClassicGroupState
UNKNOWN_MEMBER_ID = ""
Protocols = list[tuple[str, bytes]]


def validate_member(g: ClassicGroup, member_id: str, instance_id: str | None) -> ErrorCode:
    """Kafka's ClassicGroup.validateMember: an instance id must map to this member id."""
    if instance_id is not None:
        known = g.static_member_id(instance_id)
        if known is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if known != member_id:
            return ErrorCode.FENCED_INSTANCE_ID
        return ErrorCode.NONE
    if member_id not in g.members:
        return ErrorCode.UNKNOWN_MEMBER_ID
    return ErrorCode.NONE


class ClassicGroups:
    """The classic groups of one shard and their requests."""

    type_name = "classic"
    timer_kinds = TIMER_KINDS

    def __init__(self, config: GroupConfig, timers: Timers, id_factory: Callable[[], str]) -> None:
        self.config = config
        self.timers = timers
        self.id_factory = id_factory
        self.groups: dict[str, ClassicGroup] = {}
        self.rebalance = ClassicRebalance(config, timers)

    # =====================================================================================
    # the runtime's hooks
    # =====================================================================================
    def has(self, group_id: str) -> bool:
        return group_id in self.groups

    def group_ids(self) -> Iterable[str]:
        return self.groups.keys()

    def on_loaded(self, now_ms: int) -> None:
        for g in self.groups.values():
            for m in g.members.values():
                self.rebalance.schedule_heartbeat(g, m, now_ms)

    def on_unloaded(self, now_ms: int) -> None:
        for g in self.groups.values():
            for m in g.members.values():
                if m.join_pending is not None:
                    m.join_pending.complete(join_error(ErrorCode.NOT_COORDINATOR, m.member_id))
                if m.sync_pending is not None:
                    m.sync_pending.complete(sync_error(ErrorCode.NOT_COORDINATOR))
            g.transition(S.DEAD, now_ms)

    def on_timer(self, key: tuple[Any, ...], now_ms: int) -> Records:
        g = self.groups.get(key[1])
        return [] if g is None else self.rebalance.on_timer(g, key, now_ms)

    def delete_now(self, g: ClassicGroup, now_ms: int) -> None:
        g.transition(S.DEAD, now_ms)
        del self.groups[g.group_id]

    # =====================================================================================
    # JoinGroup
    # =====================================================================================
    def join(
        self, req: JoinGroupRequest, version: int, client_id: str, client_host: str, now_ms: int
    ) -> tuple[Records, JoinGroupResponse | Pending[Any]]:
        group_id, member_id = req.group_id, req.member_id
        protocols = [(p.name, bytes(p.metadata)) for p in req.protocols]
        rebalance_timeout = req.rebalance_timeout_ms
        if version == 0 or rebalance_timeout < 0:
            rebalance_timeout = req.session_timeout_ms  # v0 has none (brod PR #465)
        g = self.groups.get(group_id)
        if g is None:
            if member_id != UNKNOWN_MEMBER_ID:
                return [], join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
            g = self.groups[group_id] = ClassicGroup(group_id, state_timestamp_ms=now_ms)
        if g.is_in(S.DEAD):
            return [], join_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id)
        if not g.supports(req.protocol_type, [n for n, _ in protocols]):
            return [], join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
        if member_id == UNKNOWN_MEMBER_ID:
            return self._join_unknown(g, req, version, protocols, rebalance_timeout, client_id, client_host, now_ms)
        if member_id in g.pending_members:
            g.pending_members.discard(member_id)
            if len(g.members) >= self.config.max_size:
                return [], join_error(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id)
            self.timers.cancel((PENDING_TIMER, group_id, member_id))
            return self._add_member(g, member_id, req, protocols, rebalance_timeout, client_id, client_host, now_ms)
        code = validate_member(g, member_id, req.group_instance_id)
        if code != ErrorCode.NONE:
            return [], join_error(code, member_id)
        return self._join_known(g, g.members[member_id], protocols, rebalance_timeout, req.session_timeout_ms,
                                now_ms)

    def _join_unknown(
        self, g: ClassicGroup, req: JoinGroupRequest, version: int, protocols: Protocols,
        rebalance_timeout: int, client_id: str, client_host: str, now_ms: int,
    ) -> tuple[Records, JoinGroupResponse | Pending[Any]]:
        """A JoinGroup without a member id: a static member's new incarnation, a member id
        handed out (v4+: MEMBER_ID_REQUIRED), or a new member."""
        instance_id = req.group_instance_id
        new_id = (instance_id or client_id) + "-" + self.id_factory()
        if instance_id is not None:
            old = g.static_member_id(instance_id)
            if old is not None:
                return self._replace_static_member(
                    g, old, new_id, protocols, rebalance_timeout, req.session_timeout_ms,
                    client_id, client_host, now_ms,
                )
        elif version >= 4:
            if len(g.members) + len(g.pending_members) >= self.config.max_size:
                return [], join_error(ErrorCode.GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID)
            g.pending_members.add(new_id)
            self.timers.schedule((PENDING_TIMER, g.group_id, new_id), now_ms + req.session_timeout_ms)
            return [], join_error(ErrorCode.MEMBER_ID_REQUIRED, new_id)
        if len(g.members) >= self.config.max_size:
            return [], join_error(ErrorCode.GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID)
        return self._add_member(g, new_id, req, protocols, rebalance_timeout, client_id, client_host, now_ms)

    def _join_known(
        self, g: ClassicGroup, m: ClassicMember, protocols: Protocols, rebalance_timeout: int,
        session_timeout: int, now_ms: int,
    ) -> tuple[Records, JoinGroupResponse | Pending[Any]]:
        """A JoinGroup of a known member, by the group's state."""
        if g.is_in(S.PREPARING_REBALANCE):
            return self._update_member(g, m, protocols, rebalance_timeout, session_timeout, now_ms)
        if g.is_in(S.COMPLETING_REBALANCE):
            if m.matches(protocols):
                # a retried JoinGroup: answer with the current generation again
                return [], join_response(g, m)
            return self._update_member(g, m, protocols, rebalance_timeout, session_timeout, now_ms)
        if g.is_in(S.STABLE):
            if g.leader_id == m.member_id or not m.matches(protocols):
                return self._update_member(g, m, protocols, rebalance_timeout, session_timeout, now_ms)
            self.rebalance.schedule_heartbeat(g, m, now_ms)
            return [], join_response(g, m)
        return [], join_error(ErrorCode.UNKNOWN_MEMBER_ID, m.member_id)

    def _add_member(
        self, g: ClassicGroup, member_id: str, req: JoinGroupRequest, protocols: Protocols,
        rebalance_timeout: int, client_id: str, client_host: str, now_ms: int,
    ) -> tuple[Records, Pending[Any]]:
        m = ClassicMember(
            member_id=member_id, group_instance_id=req.group_instance_id, client_id=client_id,
            client_host=client_host, rebalance_timeout_ms=rebalance_timeout,
            session_timeout_ms=req.session_timeout_ms, protocol_type=req.protocol_type, protocols=protocols,
            is_new=True,
        )
        pending: Pending[Any] = Pending()
        m.join_pending = pending
        g.add(m)
        g.new_member_added = True
        # a new member is kept alive while it waits in the join phase, at most this long
        self.timers.schedule(hb_key(g, member_id), now_ms + self.config.new_member_join_timeout_ms)
        records = self.rebalance.maybe_prepare_rebalance(g, now_ms)
        records += self.rebalance.try_complete_join(g, now_ms)
        return records, pending

    def _update_member(
        self, g: ClassicGroup, m: ClassicMember, protocols: Protocols,
        rebalance_timeout: int, session_timeout: int, now_ms: int,
    ) -> tuple[Records, Pending[Any]]:
        m.protocols = protocols
        m.rebalance_timeout_ms = rebalance_timeout
        m.session_timeout_ms = session_timeout
        if m.join_pending is not None:  # a duplicate join replaces the parked one
            m.join_pending.complete(join_error(ErrorCode.UNKNOWN_MEMBER_ID, m.member_id))
        pending: Pending[Any] = Pending()
        m.join_pending = pending
        self.rebalance.schedule_heartbeat(g, m, now_ms)
        records = self.rebalance.maybe_prepare_rebalance(g, now_ms)
        records += self.rebalance.try_complete_join(g, now_ms)
        return records, pending

    def _replace_static_member(
        self, g: ClassicGroup, old_id: str, new_id: str, protocols: Protocols,
        rebalance_timeout: int, session_timeout: int, client_id: str, client_host: str,
        now_ms: int,
    ) -> tuple[Records, JoinGroupResponse | Pending[Any]]:
        old = g.members[old_id]
        # the old incarnation is fenced
        if old.join_pending is not None:
            old.join_pending.complete(join_error(ErrorCode.FENCED_INSTANCE_ID, old_id))
        if old.sync_pending is not None:
            old.sync_pending.complete(sync_error(ErrorCode.FENCED_INSTANCE_ID))
        self.timers.cancel(hb_key(g, old_id))
        was_leader = g.leader_id == old_id
        del g.members[old_id]
        if old_id in g.pending_sync:
            g.pending_sync.discard(old_id)
            g.pending_sync.add(new_id)
        m = ClassicMember(
            member_id=new_id, group_instance_id=old.group_instance_id, client_id=client_id,
            client_host=client_host, rebalance_timeout_ms=rebalance_timeout,
            session_timeout_ms=session_timeout, protocol_type=old.protocol_type,
            protocols=protocols, assignment=old.assignment,
        )
        g.members[new_id] = m
        assert m.group_instance_id is not None
        g.static_members[m.group_instance_id] = new_id
        if was_leader:
            g.leader_id = new_id
        self.rebalance.schedule_heartbeat(g, m, now_ms)
        if g.is_in(S.STABLE) and g.select_protocol() == g.protocol_name and not (
            m.metadata(g.protocol_name) != dict(old.protocols).get(g.protocol_name or "") and was_leader
        ):
            # rejoin without rebalance (KIP-345): same generation, assignment kept
            return [classic_group_record(g)], join_response(g, m, skip_assignment=was_leader)
        # otherwise (CompletingRebalance, PreparingRebalance) it joins like everyone else
        return self._update_member(g, m, protocols, rebalance_timeout, session_timeout, now_ms)

    # =====================================================================================
    # SyncGroup / Heartbeat / LeaveGroup
    # =====================================================================================
    def sync(self, req: SyncGroupRequest, version: int, now_ms: int) -> tuple[Records, SyncGroupResponse | Pending[Any]]:
        g = self.groups.get(req.group_id)
        if g is None or g.is_in(S.EMPTY) and req.member_id not in g.members:
            return [], sync_error(ErrorCode.UNKNOWN_MEMBER_ID)
        if g.is_in(S.DEAD):
            return [], sync_error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        code = validate_member(g, req.member_id, req.group_instance_id)
        if code != ErrorCode.NONE:
            return [], sync_error(code)
        if req.generation_id != g.generation_id:
            return [], sync_error(ErrorCode.ILLEGAL_GENERATION)
        if (req.protocol_type is not None and req.protocol_type != g.protocol_type) or (
            req.protocol_name is not None and req.protocol_name != g.protocol_name
        ):
            return [], sync_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        m = g.members[req.member_id]
        if g.is_in(S.PREPARING_REBALANCE):
            return [], sync_error(ErrorCode.REBALANCE_IN_PROGRESS)
        self.rebalance.schedule_heartbeat(g, m, now_ms)
        if g.is_in(S.STABLE):
            return [], sync_response(g, m)
        # CompletingRebalance
        if any(len(a.assignment) > self.config.member_metadata_max_bytes for a in req.assignments):
            return [], sync_error(ErrorCode.INVALID_REQUEST)
        g.pending_sync.discard(m.member_id)
        pending: Pending[Any] = Pending()
        if m.sync_pending is not None:
            m.sync_pending.complete(sync_error(ErrorCode.REBALANCE_IN_PROGRESS))
        m.sync_pending = pending
        if g.leader_id != m.member_id:
            return [], pending
        assignments = {a.member_id: bytes(a.assignment) for a in req.assignments}
        return self.rebalance.complete_sync(g, assignments, now_ms), pending

    def heartbeat(self, req: HeartbeatRequest, version: int, now_ms: int) -> tuple[Records, ErrorCode]:
        g = self.groups.get(req.group_id)
        if g is None:
            return [], ErrorCode.UNKNOWN_MEMBER_ID
        if g.is_in(S.DEAD):
            return [], ErrorCode.COORDINATOR_NOT_AVAILABLE
        code = validate_member(g, req.member_id, req.group_instance_id)
        if code != ErrorCode.NONE:
            return [], code
        if req.generation_id != g.generation_id:
            return [], ErrorCode.ILLEGAL_GENERATION
        if g.is_in(S.EMPTY):
            return [], ErrorCode.UNKNOWN_MEMBER_ID
        self.rebalance.schedule_heartbeat(g, g.members[req.member_id], now_ms)
        if g.is_in(S.PREPARING_REBALANCE):
            return [], ErrorCode.REBALANCE_IN_PROGRESS
        return [], ErrorCode.NONE

    def leave(
        self, group_id: str, identities: list[LeaveGroupRequest.MemberIdentity], now_ms: int,
    ) -> tuple[Records, list[LeaveGroupResponse.MemberResponse] | ErrorCode]:
        """The members' answers, or the group's error."""
        g = self.groups.get(group_id)
        if g is None:
            return [], ErrorCode.UNKNOWN_MEMBER_ID
        if g.is_in(S.DEAD):
            return [], ErrorCode.COORDINATOR_NOT_AVAILABLE
        records: Records = []
        out = []
        for ident in identities:
            mid, iid = ident.member_id, ident.group_instance_id
            code = ErrorCode.NONE
            target: ClassicMember | None = None
            if iid is not None:
                known = g.static_member_id(iid)
                if known is None:
                    code = ErrorCode.UNKNOWN_MEMBER_ID
                elif mid != UNKNOWN_MEMBER_ID and mid != known:
                    code = ErrorCode.FENCED_INSTANCE_ID
                else:
                    target = g.members.get(known)
            elif mid in g.pending_members:
                g.pending_members.discard(mid)
                self.timers.cancel((PENDING_TIMER, g.group_id, mid))
                records += self.rebalance.try_complete_join(g, now_ms)
            else:
                target = g.members.get(mid)
                if target is None:
                    code = ErrorCode.UNKNOWN_MEMBER_ID
            if target is not None:
                records += self.rebalance.remove_member(g, target, ErrorCode.UNKNOWN_MEMBER_ID, now_ms)
            out.append(LeaveGroupResponse.MemberResponse(member_id=mid, group_instance_id=iid, error_code=code))
        return records, out

    # =====================================================================================
    # offsets (groups/offset_manager.py asks)
    # =====================================================================================
    def create_simple(self, group_id: str, now_ms: int) -> None:
        """A commit outside any group creates a simple group (offsets only)."""
        self.groups[group_id] = ClassicGroup(group_id, state_timestamp_ms=now_ms)

    def validate_commit(
        self, group_id: str, generation: int, member_id: str, instance_id: str | None,
        transactional: bool, now_ms: int, api_version: int = -1,
        partitions: list[tuple[str, int]] | None = None,
    ) -> ErrorCode:
        """Kafka's ClassicGroup.validateOffsetCommit; a commit proves a member alive."""
        g = self.groups[group_id]
        if g.is_in(S.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if transactional and generation < 0 and member_id == UNKNOWN_MEMBER_ID:
            return ErrorCode.NONE
        if generation < 0 and g.is_in(S.EMPTY):
            return ErrorCode.NONE
        if generation >= 0 or member_id != UNKNOWN_MEMBER_ID or instance_id is not None:
            code = validate_member(g, member_id, instance_id)
            if code != ErrorCode.NONE:
                return code
            if generation != g.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
        elif not g.is_in(S.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if not transactional and g.is_in(S.COMPLETING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        m = g.members.get(member_id)
        if m is not None and not transactional:
            self.rebalance.schedule_heartbeat(g, m, now_ms)
        return ErrorCode.NONE

    def validate_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> ErrorCode:
        return ErrorCode.NONE  # classic groups check nothing (Kafka's validateOffsetFetch)

    def offset_delete_check(self, group_id: str) -> tuple[ErrorCode, set[str]]:
        g = self.groups[group_id]
        if g.is_in(S.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, set()
        if g.is_in(S.EMPTY):
            return ErrorCode.NONE, set()
        if g.protocol_type != "consumer":
            return ErrorCode.NON_EMPTY_GROUP, set()
        return ErrorCode.NONE, g.subscribed_topics() or set()

    def expiry(self, group_id: str) -> Expiry:
        """An Empty group's offsets expire counted from when it became empty; a simple
        group's (no protocol type) from each commit; a Stable consumer-protocol group's only
        for topics no member subscribes to; others' never."""
        g = self.groups[group_id]
        if not g.protocol_type:
            return Expiry()
        if g.is_in(S.EMPTY):
            return Expiry(base_ms=g.state_timestamp_ms if g.state_timestamp_ms >= 0 else None)
        if g.is_in(S.STABLE) and g.protocol_type == "consumer":
            subscribed = g.subscribed_topics()
            return Expiry(expirable=subscribed is not None, subscribed=subscribed)
        return Expiry(expirable=False)

    def after_expiry(self, group_id: str, had_offsets: bool, now_ms: int) -> Records:
        """An Empty group without offsets left is deleted (with its record when it has one)."""
        g = self.groups[group_id]
        if not g.is_in(S.EMPTY):
            return []
        records = []
        if had_offsets or g.generation_id > 0 or g.protocol_type:
            records.append(classic_group_tombstone(group_id))
        self.delete_now(g, now_ms)
        return records

    # =====================================================================================
    # admin: list / describe / delete
    # =====================================================================================
    def listed(self, states: set[str], types: set[str]) -> list[ListGroupsResponse.ListedGroup]:
        out = []
        for g in self.groups.values():
            if g.is_in(S.DEAD):
                continue
            if states and g.state.value.lower() not in states:
                continue
            if types and self.type_name not in types:
                continue
            out.append(ListGroupsResponse.ListedGroup(
                group_id=g.group_id, protocol_type=g.protocol_type or "",
                group_state=g.state.value, group_type=self.type_name))
        return out

    def delete(self, group_id: str, now_ms: int) -> tuple[Records, ErrorCode]:
        g = self.groups[group_id]
        if g.is_in(S.DEAD):
            return [], ErrorCode.GROUP_ID_NOT_FOUND
        if not g.is_in(S.EMPTY):
            return [], ErrorCode.NON_EMPTY_GROUP
        self.delete_now(g, now_ms)
        return [classic_group_tombstone(group_id)], ErrorCode.NONE

    def describe(self, group_id: str) -> DescribeGroupsResponse.DescribedGroup:
        g = self.groups.get(group_id)
        if g is None or g.is_in(S.DEAD):
            return DescribeGroupsResponse.DescribedGroup(
                error_code=ErrorCode.NONE, group_id=group_id, group_state="Dead",
                protocol_type="", protocol_data="", members=[],
            )
        stable = g.is_in(S.STABLE)
        members = [
            DescribeGroupsResponse.DescribedGroupMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id,
                client_id=m.client_id, client_host=m.client_host,
                member_metadata=m.metadata(g.protocol_name) if stable else b"",
                member_assignment=m.assignment,
            )
            for m in g.members.values()
        ]
        return DescribeGroupsResponse.DescribedGroup(
            error_code=ErrorCode.NONE, group_id=group_id, group_state=g.state.value,
            protocol_type=g.protocol_type or "",
            protocol_data=(g.protocol_name or "") if stable else "",
            members=members,
        )
