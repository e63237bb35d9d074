"""Classic-protocol members of a KIP-848 consumer group (Kafka's ClassicMemberMetadata members):
JoinGroup, SyncGroup, Heartbeat and LeaveGroup served from the consumer group's state.

Their ConsumerProtocolSubscription gives their topics and owned partitions; a JoinGroup updates
the member like a heartbeat does (``ConsumerGroups.update``) and answers at once with the member
epoch as generation; SyncGroup hands them their assigned partitions as a
ConsumerProtocolAssignment (at the version of their subscription); Heartbeat answers
REBALANCE_IN_PROGRESS whenever they must rejoin to move on (a rejoin deadline then runs, the
rebalance timeout); a JoinGroup must be followed by a SyncGroup within the rebalance timeout.
A classic static member replacing the last consumer-protocol member turns the group classic at
once (``replace_hook``, the downgrade of ``groups/migration.py``).
"""

from __future__ import annotations

from collections.abc import Callable

from groups.assignors import Assignment
from groups.consumer import (
    CLASSIC_JOIN_TIMER,
    CLASSIC_SYNC_TIMER,
    ConsumerGroups,
    check_instance,
    unknown_member,
)
from groups.consumer_group import (
    PROTOCOL_TYPE,
    ClassicMeta,
    ConsumerGroup,
    ConsumerMember,
    GroupOpError,
)
from groups.consumer_protocol import Subscription, encode_assignment, parse_subscription
from groups.reconcile import waiting_on_unreleased
from groups.records import CONSUMER_GROUP_METADATA, Records
from groups.states import MemberState
from protocol._generated.consumer_group_metadata_value import ConsumerGroupMetadataValue
from protocol._generated.heartbeat_request import HeartbeatRequest
from protocol._generated.join_group_request import JoinGroupRequest
from protocol._generated.join_group_response import JoinGroupResponse
from protocol._generated.leave_group_request import LeaveGroupRequest
from protocol._generated.leave_group_response import LeaveGroupResponse
from protocol._generated.sync_group_request import SyncGroupRequest
from protocol._generated.sync_group_response import SyncGroupResponse
from protocol.coordinator import decode_value, record_type
from protocol.errors import ErrorCode

#: (group, members and target after the replacement, whether the target is stale, now) ->
#: the records of the conversion to a classic group, None when the policy does not allow it
ReplaceHook = Callable[[ConsumerGroup, dict[str, ConsumerMember], dict[str, Assignment], bool, int], "Records | None"]


def group_epoch_after(g: ConsumerGroup, records: Records) -> int:
    """The group epoch once ``records`` (of group ``g``) are replayed."""
    epoch = g.group_epoch
    for r in records:
        if r.value is not None and record_type(r.key) == CONSUMER_GROUP_METADATA:
            epoch = decode_value(ConsumerGroupMetadataValue, r.value)[1].epoch
    return epoch


def join_response(member_id: str, generation: int, protocol: str) -> JoinGroupResponse:
    return JoinGroupResponse(
        error_code=ErrorCode.NONE, generation_id=generation, protocol_type=PROTOCOL_TYPE,
        protocol_name=protocol, leader="", skip_assignment=False, member_id=member_id, members=[])


class ClassicMembers:
    def __init__(self, consumer: ConsumerGroups) -> None:
        self.consumer = consumer
        self.timers = consumer.timers
        self.replace_hook: ReplaceHook | None = None

    def supports_classic(self, g: ConsumerGroup, protocol_type: str, names: list[str]) -> bool:
        """Kafka's supportsClassicProtocols: the type is "consumer" and one of the protocols is
        supported by every classic member."""
        if not g.members:
            return bool(protocol_type) and bool(names)
        if protocol_type != PROTOCOL_TYPE:
            return False
        classic = g.classic_members()
        return any(all(n in c.classic.protocol_names for c in classic if c.classic) for n in names)

    def topic_ids(self, by_name: dict[str, list[int]]) -> Assignment:
        out: Assignment = {}
        for name, parts in by_name.items():
            t = self.consumer.topics.get(name)
            if t is not None and parts:
                out.setdefault(t[0], set()).update(parts)
        return out

    def assignment_bytes(self, a: Assignment, subscription: bytes) -> bytes:
        """A ConsumerProtocolAssignment of ``a`` at the version of the member's subscription."""
        by_id = {tid: name for name, (tid, _n) in self.consumer.topics.items()}
        by_name = {by_id[t]: sorted(p) for t, p in a.items() if t in by_id and p}
        sub = parse_subscription(subscription)
        return encode_assignment(by_name, sub.version if sub is not None else 0)

    # ---- JoinGroup ---------------------------------------------------------------------
    def join(
        self, g: ConsumerGroup, req: JoinGroupRequest, version: int, client_id: str, client_host: str,
        now_ms: int,
    ) -> tuple[Records, JoinGroupResponse]:
        member_id = req.member_id
        unknown = member_id == ""
        if unknown:
            member_id = self.consumer.id_factory()
        self.consumer.check_full(g, "" if unknown else member_id)
        protocols = tuple((p.name, bytes(p.metadata)) for p in req.protocols)
        if not self.supports_classic(g, req.protocol_type, [n for n, _ in protocols]):
            raise GroupOpError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"Member {member_id}'s protocols are not supported.")
        if self.consumer.config.migration_policy == "disabled":
            # KAFKA-20640: no classic member joins (or rejoins) a consumer group then
            raise GroupOpError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                               f"Cannot join the consumer group {g.group_id} with the classic protocol "
                               "because the group migration is disabled.")
        instance = req.group_instance_id
        if unknown and instance is None and version >= 4:
            return [], JoinGroupResponse(
                error_code=ErrorCode.MEMBER_ID_REQUIRED, generation_id=-1, protocol_type=None,
                protocol_name=None, leader="", member_id=member_id, members=[])
        sub = parse_subscription(protocols[0][1])
        if sub is None:
            raise GroupOpError(ErrorCode.UNKNOWN_SERVER_ERROR,
                               "Malformed embedded consumer protocol in subscription deserialization.")
        return self._join(g, req, version, member_id, unknown, protocols, sub, client_id, client_host, now_ms)

    def _join(
        self, g: ConsumerGroup, req: JoinGroupRequest, version: int, member_id: str, unknown: bool,
        protocols: tuple[tuple[str, bytes], ...], sub: Subscription, client_id: str, client_host: str,
        now_ms: int,
    ) -> tuple[Records, JoinGroupResponse]:
        members = dict(g.members)
        targets = dict(g.target)
        records: Records = []
        old: ConsumerMember | None
        replaced: ConsumerMember | None = None
        instance = req.group_instance_id
        if instance is None:
            old = g.members.get(member_id)
        else:
            existing = g.static_member(instance)
            if unknown:
                replaced = existing
                old = None if existing is None else self.consumer.replace_static(
                    g, existing, member_id, members, targets, records)
            else:
                old = check_instance(existing, member_id, instance)
        m = ConsumerMember(member_id) if old is None else old.copy()
        if instance is not None:
            m.instance_id = instance
        if sub.rack_id is not None:
            m.rack_id = sub.rack_id
        rebalance_timeout = req.rebalance_timeout_ms
        if version == 0 or rebalance_timeout < 0:
            rebalance_timeout = req.session_timeout_ms
        m.rebalance_timeout_ms = rebalance_timeout
        m.subscribed_topic_names = sorted(set(sub.topics))
        m.client_id, m.client_host = client_id, client_host
        m.classic = ClassicMeta(req.session_timeout_ms, protocols)
        target_before = dict(targets)
        _before, new = self.consumer.update(g, old, m, members, targets, records, self.topic_ids(sub.owned),
                                            False, False, now_ms)
        gid = g.group_id
        if replaced is not None and replaced.classic is None and self.replace_hook is not None and all(
            x.classic is not None for x in members.values()
        ):
            # Kafka 4.3: the classic static member replaced the last consumer-protocol member:
            # the group goes back to classic at once (validateOnlineDowngradeWithReplacedMember);
            # with the target it had when the join changed the group epoch (stale), rebalancing
            stale = group_epoch_after(g, records) > g.assignment_epoch
            members[member_id] = new
            converted = self.replace_hook(g, members, target_before if stale else targets, stale, now_ms)
            if converted is not None:
                self.consumer.cancel_timers(gid, member_id)
                return records + converted, join_response(
                    member_id, new.member_epoch if not stale else 0, protocols[0][0])
        self.timers.cancel((CLASSIC_JOIN_TIMER, gid, member_id))
        self.consumer.touch(g, new, now_ms)
        self.timers.schedule((CLASSIC_SYNC_TIMER, gid, member_id), now_ms + rebalance_timeout)
        return records, join_response(member_id, new.member_epoch, protocols[0][0])

    # ---- SyncGroup / Heartbeat / LeaveGroup ----------------------------------------------
    def _member(self, g: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerMember:
        if instance_id is None:
            m = g.members.get(member_id)
            if m is None:
                raise unknown_member(g, member_id)
        else:
            m = check_instance(g.static_member(instance_id), member_id, instance_id)
        if m.classic is None:
            raise GroupOpError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {m.member_id} does not use the classic protocol.")
        return m

    def _rejoin_needed(self, g: ConsumerGroup, m: ConsumerMember, now_ms: int) -> None:
        key = (CLASSIC_JOIN_TIMER, g.group_id, m.member_id)
        if key not in self.timers:
            self.timers.schedule(key, now_ms + max(m.rebalance_timeout_ms, 0))

    def sync(self, g: ConsumerGroup, req: SyncGroupRequest, now_ms: int) -> SyncGroupResponse:
        m = self._member(g, req.member_id, req.group_instance_id)
        assert m.classic is not None
        if req.generation_id != m.member_epoch:
            raise GroupOpError(ErrorCode.ILLEGAL_GENERATION,
                               f"The request generation id {req.generation_id} is not equal to the member "
                               f"epoch {m.member_epoch} of member {m.member_id}.")
        name = m.classic.protocols[0][0] if m.classic.protocols else ""
        if (req.protocol_type is not None and req.protocol_type != PROTOCOL_TYPE) or (
            req.protocol_name is not None and req.protocol_name != name
        ):
            raise GroupOpError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        # against the target's epoch (Kafka 4.3: with assignment batching the group epoch may
        # run ahead of any target the member could reconcile to)
        if g.assignment_epoch > m.member_epoch and m.state != MemberState.UNREVOKED_PARTITIONS:
            self._rejoin_needed(g, m, now_ms)
            raise GroupOpError(ErrorCode.REBALANCE_IN_PROGRESS,
                               f"A new rebalance is triggered in group {g.group_id} and member "
                               f"{m.member_id} should rejoin to catch up.")
        self.timers.cancel((CLASSIC_SYNC_TIMER, g.group_id, m.member_id))
        self.consumer.touch(g, m, now_ms)
        meta = m.classic.protocols[0][1] if m.classic.protocols else b""
        return SyncGroupResponse(
            error_code=ErrorCode.NONE, protocol_type=req.protocol_type, protocol_name=req.protocol_name,
            assignment=self.assignment_bytes(m.assigned, meta))

    def heartbeat(self, g: ConsumerGroup, req: HeartbeatRequest, now_ms: int) -> ErrorCode:
        m = self._member(g, req.member_id, req.group_instance_id)
        if req.generation_id != m.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION
        self.consumer.touch(g, m, now_ms)
        if m.member_epoch < g.assignment_epoch or m.state == MemberState.UNREVOKED_PARTITIONS or (
            m.state == MemberState.UNRELEASED_PARTITIONS and not waiting_on_unreleased(g, m)
        ):
            self._rejoin_needed(g, m, now_ms)
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def _leaving(self, g: ConsumerGroup, ident: LeaveGroupRequest.MemberIdentity) -> ConsumerMember:
        mid, iid = ident.member_id, ident.group_instance_id
        if iid is None:
            m = g.members.get(mid)
            if m is None:
                raise unknown_member(g, mid)
            if m.classic is None:
                raise GroupOpError(ErrorCode.UNKNOWN_MEMBER_ID)
            return m
        found = g.static_member(iid)
        if found is None:
            raise GroupOpError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {iid} is unknown.")
        if mid:  # an admin removal names the instance only
            m = check_instance(found, mid, iid)
            if m.classic is None:
                raise GroupOpError(ErrorCode.UNKNOWN_MEMBER_ID)
        return found

    def leave(
        self, g: ConsumerGroup, identities: list[LeaveGroupRequest.MemberIdentity], now_ms: int,
    ) -> tuple[Records, list[LeaveGroupResponse.MemberResponse]]:
        out = []
        leaving: list[str] = []
        for ident in identities:
            mid, iid = ident.member_id, ident.group_instance_id
            try:
                m = self._leaving(g, ident)
                if m.member_id not in leaving:
                    leaving.append(m.member_id)
                out.append(LeaveGroupResponse.MemberResponse(member_id=m.member_id, group_instance_id=iid))
            except GroupOpError as e:
                out.append(LeaveGroupResponse.MemberResponse(member_id=mid, group_instance_id=iid, error_code=e.code))
        records = self.consumer.fence(g, leaving, now_ms) if leaving else []
        return records, out
