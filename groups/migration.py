"""Conversions between classic and KIP-848 consumer groups (Kafka's online migration, KIP-848's
``group.consumer.migration.policy``: disabled, upgrade, downgrade, bidirectional).

* Empty groups convert both ways whatever the policy: a ConsumerGroupHeartbeat join to an empty
  classic group deletes its GroupMetadata; a JoinGroup to an empty consumer group writes the
  consumer group's tombstones.
* Upgrade (convertToConsumerGroup): a join (epoch 0) to a non-empty classic group that uses the
  consumer embedded protocol makes it a consumer group of its classic members at its generation
  (each with the partitions of its assignment), when the policy allows it, the group fits
  ``group.consumer.max.size``, the subscriptions parse and no assignment carries a custom
  assignor's user data (Kafka 4.3: the consumer protocol would lose it). The classic members'
  parked requests are answered REBALANCE_IN_PROGRESS: they rejoin the consumer group.
* Downgrade (convertToClassicGroup): when the members left after a fence or a leave all speak the
  classic protocol (validateOnlineDowngradeWithFencedMembers), or a classic static member
  replaced the last consumer-protocol member (validateOnlineDowngradeWithReplacedMember), the
  group becomes a classic group of them at its group epoch, assignments taken from the target:
  at once in place (as Kafka), Stable, and rebalancing (unless the replaced member's target was
  current).
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from groups.assignors import Assignment
from groups.classic import ClassicGroup, ClassicMember, join_error, sync_error
from groups.classic_protocol import ClassicGroups
from groups.classic_rebalance import JOIN_TIMER, SYNC_TIMER, hb_key
from groups.consumer import ConsumerGroups
from groups.consumer_classic import ClassicMembers
from groups.consumer_group import (
    ClassicMeta,
    ConsumerGroup,
    ConsumerMember,
    GroupOpError,
    copy_of,
    held_epochs,
)
from groups.consumer_protocol import (
    ArrayTooLong,
    Subscription,
    parse_assignment,
    parse_subscription,
)
from groups.records import (
    Records,
    classic_group_record,
    classic_group_tombstone,
    consumer_group_records,
    consumer_group_tombstones,
)
from groups.states import ClassicGroupState
from groups.target import metadata_hash
from protocol._generated.consumer_group_heartbeat_request import ConsumerGroupHeartbeatRequest
from protocol._generated.consumer_group_heartbeat_response import ConsumerGroupHeartbeatResponse
from protocol.errors import ErrorCode

S = ClassicGroupState


class Migration:
    def __init__(self, classic: ClassicGroups, consumer: ConsumerGroups, members: ClassicMembers) -> None:
        self.classic = classic
        self.consumer = consumer
        self.members = members
        self.config = consumer.config
        consumer.fence_hook = self.maybe_downgrade
        members.replace_hook = self.downgrade_with_replaced

    # =====================================================================================
    # classic -> consumer
    # =====================================================================================
    def consumer_join(
        self, g: ClassicGroup, req: ConsumerGroupHeartbeatRequest, version: int, client_id: str,
        client_host: str, new_member_id: Callable[[], str], now_ms: int,
    ) -> tuple[Records, ConsumerGroupHeartbeatResponse]:
        """A ConsumerGroupHeartbeat for the classic group ``g``: a join converts it (an empty
        one whatever the policy, a non-empty one when it can be upgraded)."""
        if req.member_epoch != 0:
            return [], ConsumerGroupHeartbeatResponse(
                error_code=ErrorCode.GROUP_ID_NOT_FOUND, error_message=f"Group {req.group_id} is not a consumer group.")
        converted: Records = []
        upgraded: ConsumerGroup | None = None
        if not g.members and g.is_in(S.EMPTY):
            if g.generation_id > 0 or g.protocol_type:
                converted.append(classic_group_tombstone(g.group_id))
        else:
            try:
                converted, upgraded = self.upgrade(g, now_ms)
            except GroupOpError as e:
                return [], ConsumerGroupHeartbeatResponse(error_code=e.code, error_message=e.message)
        records, resp = self.consumer.heartbeat(req, version, client_id, client_host, new_member_id(), now_ms,
                                                upgraded)
        if resp.error_code != ErrorCode.NONE:
            return [], resp  # nothing converted either
        for m in g.members.values():  # the classic members rejoin the consumer group
            if m.join_pending is not None:
                m.join_pending.complete(join_error(ErrorCode.REBALANCE_IN_PROGRESS, m.member_id))
                m.join_pending = None
            if m.sync_pending is not None:
                m.sync_pending.complete(sync_error(ErrorCode.REBALANCE_IN_PROGRESS))
                m.sync_pending = None
            self.classic.timers.cancel(hb_key(g, m.member_id))
        for kind in (JOIN_TIMER, SYNC_TIMER):
            self.classic.timers.cancel((kind, g.group_id))
        self.classic.delete_now(g, now_ms)
        return converted + records, resp

    def upgrade(self, g: ClassicGroup, now_ms: int) -> tuple[Records, ConsumerGroup]:
        """Records turning the non-empty classic group ``g`` into a consumer group whose
        members are its classic members (Kafka's convertToConsumerGroup), and that group."""
        cfg = self.config
        why = None
        if not cfg.upgrade_enabled:
            why = "online upgrade is disabled"
        elif g.protocol_type != "consumer":
            why = "the group does not use the consumer embedded protocol"
        elif len(g.members) > cfg.consumer_max_size:
            why = "the group size exceeds the consumer group maximum size"
        if why is not None:
            raise GroupOpError(ErrorCode.GROUP_ID_NOT_FOUND,
                               f"Cannot upgrade classic group {g.group_id} to consumer group because {why}.")
        cg = ConsumerGroup(g.group_id, group_epoch=g.generation_id, assignment_epoch=g.generation_id)
        for m in g.members.values():
            meta = m.metadata(g.protocol_name) if g.protocol_name else (m.protocols[0][1] if m.protocols else b"")
            cm = self._member_from_classic(g.group_id, g.generation_id, m, meta)
            cg.members[cm.member_id] = cm
            cg.target[cm.member_id] = copy_of(cm.assigned)
        cg.metadata_hash = metadata_hash(cg, cg.members, self.consumer.topics)
        for cm in cg.members.values():
            self.consumer.touch(cg, cm, now_ms)
        return [classic_group_tombstone(g.group_id), *consumer_group_records(cg)], cg

    def _member_from_classic(self, gid: str, generation: int, m: ClassicMember, meta: bytes) -> ConsumerMember:
        """A classic member as a consumer group member at ``generation``; GroupOpError when
        its subscription or assignment cannot be carried over."""
        malformed = GroupOpError(
            ErrorCode.GROUP_ID_NOT_FOUND,
            f"Cannot upgrade classic group {gid} to consumer group because the embedded consumer "
            "protocol is malformed.")
        by_name: dict[str, list[int]] = {}
        if m.assignment:
            try:
                by_name, user_data = parse_assignment(m.assignment)
            except ArrayTooLong:
                raise GroupOpError(ErrorCode.UNKNOWN_SERVER_ERROR) from None
            except (ValueError, struct.error, UnicodeDecodeError):
                raise malformed from None
            if user_data:
                # Kafka 4.3: a custom assignor's user data would be lost (the consumer
                # protocol has no place for it): no upgrade
                raise GroupOpError(
                    ErrorCode.GROUP_ID_NOT_FOUND,
                    f"Cannot upgrade classic group {gid} to consumer group because an unsupported "
                    "custom assignor is in use. Please refer to the documentation or switch to a "
                    "default assignor before re-attempting the upgrade.")
        sub: Subscription | None = parse_subscription(meta)
        if sub is None:
            raise malformed
        parts = self.members.topic_ids(by_name)
        cm = ConsumerMember(
            m.member_id, instance_id=m.group_instance_id, rack_id=sub.rack_id, client_id=m.client_id,
            client_host=m.client_host, subscribed_topic_names=sorted(set(sub.topics)),
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            classic=ClassicMeta(m.session_timeout_ms, tuple(m.protocols)), member_epoch=generation,
            previous_member_epoch=generation, assigned=parts,
        )
        cm.epochs = held_epochs(cm, generation)
        return cm

    # =====================================================================================
    # consumer -> classic
    # =====================================================================================
    def empty_consumer_group_goes(self, cg: ConsumerGroup) -> Records:
        """A JoinGroup to an empty consumer group: it makes way for a classic group."""
        converted = consumer_group_tombstones(cg)
        cg.mark_dead()
        del self.consumer.groups[cg.group_id]
        return converted

    def maybe_downgrade(self, cg: ConsumerGroup, fenced: list[str], now_ms: int) -> Records | None:
        """The fence hook: when the members that remain all speak the classic protocol (and the
        policy allows it), the records of the classic group of them, rebalancing."""
        remaining = [m for mid, m in cg.members.items() if mid not in fenced]
        if not remaining or any(m.classic is None for m in remaining):
            return None
        if not self._may_downgrade(len(remaining)):
            return None
        return consumer_group_tombstones(cg) + self._to_classic(cg, remaining, cg.target, True, now_ms)

    def _may_downgrade(self, members: int) -> bool:
        return self.config.downgrade_enabled and members <= self.config.max_size

    def downgrade_with_replaced(
        self, cg: ConsumerGroup, members: dict[str, ConsumerMember], target: dict[str, Assignment],
        stale: bool, now_ms: int,
    ) -> Records | None:
        """The replace hook: a classic static member took the place of the group's last
        consumer-protocol member (``members``, ``target``: the group with the replacement
        done). The group becomes a classic group at its group epoch, at once Stable with the
        target's assignments, or rebalancing when the target is stale (the join changed the
        group epoch)."""
        if not self._may_downgrade(len(members)):
            return None
        view = ConsumerGroup(cg.group_id, members=members, target=target, regexes=cg.regexes)
        return consumer_group_tombstones(view) + self._to_classic(
            cg, list(members.values()), target, stale, now_ms)

    def _to_classic(
        self, cg: ConsumerGroup, remaining: list[ConsumerMember], target: dict[str, Assignment],
        rebalance: bool, now_ms: int,
    ) -> Records:
        """The records of a classic group of ``remaining`` (ClassicGroup.fromConsumerGroup),
        after the consumer group's tombstones; the group is in place at once, as Kafka does it."""
        g = ClassicGroup(cg.group_id, initial_state=S.STABLE, protocol_type="consumer",
                         generation_id=cg.group_epoch, state_timestamp_ms=now_ms)
        for m in remaining:
            assert m.classic is not None
            g.add(ClassicMember(
                member_id=m.member_id, group_instance_id=m.instance_id, client_id=m.client_id,
                client_host=m.client_host, rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=m.classic.session_timeout_ms, protocol_type="consumer",
                protocols=list(m.classic.protocols),
            ))
        g.protocol_name = g.select_protocol()
        for cm in g.members.values():
            cm.assignment = self.members.assignment_bytes(target.get(cm.member_id, {}), cm.metadata(g.protocol_name))
        records = [classic_group_record(g)]
        self.classic.groups[g.group_id] = g
        for cm in g.members.values():
            self.classic.rebalance.schedule_heartbeat(g, cm, now_ms)
        if rebalance:
            records += self.classic.rebalance.prepare_rebalance(g, now_ms)
        return records
