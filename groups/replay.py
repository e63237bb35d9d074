"""Record replay: the one place where records (``groups/records.py``) become state, on the live
path (the runtime replays every record it appends) and while loading a partition alike.

* OffsetCommit records go to the offset store (``groups/offsets.py``); a commit outside a
  transaction for a group nobody knows recreates it as a simple (non-member) classic group, as
  Kafka does from its offsets.
* GroupMetadata records rebuild classic groups, while the shard is loading only: as Kafka's new
  group coordinator (``replayRecords=false`` for classic groups), the live path updates classic
  groups itself and writes the record for a restart. A loaded group comes back Stable (members
  with their assignment) or Empty.
* The consumer group records build KIP-848 groups on both paths (Kafka replays them live too);
  the group's state is derived again after each one. A simple classic group (offsets only)
  makes way for a consumer group of its id (Kafka's getOrMaybeCreatePersistedConsumerGroup).

Other record types (share and streams groups) are not served here; ``handlers`` maps a record
type to its reader, so a new group type adds its own.
"""

from __future__ import annotations

from collections.abc import Callable

from groups.classic import ClassicGroup, ClassicMember
from groups.consumer_group import (
    ClassicMeta,
    ConsumerGroup,
    ConsumerMember,
    ResolvedRegex,
    from_wire,
    record_epochs,
)
from groups.offsets import OffsetAndMetadata, OffsetStore
from groups.records import (
    CONSUMER_CURRENT_ASSIGNMENT,
    CONSUMER_GROUP_METADATA,
    CONSUMER_MEMBER_METADATA,
    CONSUMER_RECORD_TYPES,
    CONSUMER_REGULAR_EXPRESSION,
    CONSUMER_TARGET_MEMBER,
    CONSUMER_TARGET_METADATA,
    GROUP_METADATA,
    LEGACY_OFFSET_COMMIT,
    OFFSET_COMMIT,
)
from groups.states import ClassicGroupState, MemberState
from protocol._generated.consumer_group_current_member_assignment_key import (
    ConsumerGroupCurrentMemberAssignmentKey,
)
from protocol._generated.consumer_group_current_member_assignment_value import (
    ConsumerGroupCurrentMemberAssignmentValue,
)
from protocol._generated.consumer_group_member_metadata_key import ConsumerGroupMemberMetadataKey
from protocol._generated.consumer_group_member_metadata_value import (
    ConsumerGroupMemberMetadataValue,
)
from protocol._generated.consumer_group_metadata_key import ConsumerGroupMetadataKey
from protocol._generated.consumer_group_metadata_value import ConsumerGroupMetadataValue
from protocol._generated.consumer_group_regular_expression_key import (
    ConsumerGroupRegularExpressionKey,
)
from protocol._generated.consumer_group_regular_expression_value import (
    ConsumerGroupRegularExpressionValue,
)
from protocol._generated.consumer_group_target_assignment_member_key import (
    ConsumerGroupTargetAssignmentMemberKey,
)
from protocol._generated.consumer_group_target_assignment_member_value import (
    ConsumerGroupTargetAssignmentMemberValue,
)
from protocol._generated.consumer_group_target_assignment_metadata_key import (
    ConsumerGroupTargetAssignmentMetadataKey,
)
from protocol._generated.consumer_group_target_assignment_metadata_value import (
    ConsumerGroupTargetAssignmentMetadataValue,
)
from protocol._generated.group_metadata_key import GroupMetadataKey
from protocol._generated.group_metadata_value import GroupMetadataValue
from protocol._generated.offset_commit_key import OffsetCommitKey
from protocol._generated.offset_commit_value import OffsetCommitValue
from protocol.coordinator import CoordinatorRecord, decode_key, decode_value, record_type

#: (record offset, producer id, key, value) -> None
Handler = Callable[[int, int, bytes, "bytes | None"], None]


def record_group_id(key: bytes) -> str | None:
    """The group id that opens every consumer-group record key (non-flexible string)."""
    if len(key) < 4:
        return None
    n = int.from_bytes(key[2:4], "big", signed=True)
    if n < 0 or 4 + n > len(key):
        return None
    return key[4 : 4 + n].decode("utf-8", "replace")


def classic_group_from_record(group_id: str, gv: GroupMetadataValue) -> ClassicGroup:
    members = []
    for m in gv.members:
        members.append(ClassicMember(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout_ms=m.rebalance_timeout if m.rebalance_timeout >= 0 else m.session_timeout,
            session_timeout_ms=m.session_timeout,
            protocol_type=gv.protocol_type or "",
            protocols=[(gv.protocol or "", m.subscription)],
            assignment=m.assignment,
        ))
    g = ClassicGroup(
        group_id, initial_state=ClassicGroupState.STABLE if members else ClassicGroupState.EMPTY,
        protocol_type=gv.protocol_type or None, protocol_name=gv.protocol,
        generation_id=gv.generation, state_timestamp_ms=gv.current_state_timestamp,
    )
    for member in members:
        g.members[member.member_id] = member
        if member.group_instance_id is not None:
            g.static_members[member.group_instance_id] = member.member_id
    g.leader_id = gv.leader if gv.leader in g.members else next(iter(g.members), None)
    return g


class Replayer:
    """Replays records into the shard's stores (the dicts are the groups' own, shared)."""

    def __init__(self, offsets: OffsetStore, classic: dict[str, ClassicGroup],
                 consumer: dict[str, ConsumerGroup]) -> None:
        self.offsets = offsets
        self.classic = classic
        self.consumer = consumer
        #: set once the partition is loaded (classic groups are then kept by the live path)
        self.loaded = False
        self.handlers: dict[int, Handler] = {
            LEGACY_OFFSET_COMMIT: self._offset_commit,
            OFFSET_COMMIT: self._offset_commit,
            GROUP_METADATA: self._group_metadata,
            CONSUMER_GROUP_METADATA: self._consumer_group_metadata,
            CONSUMER_MEMBER_METADATA: self._member_metadata,
            CONSUMER_TARGET_METADATA: self._target_metadata,
            CONSUMER_TARGET_MEMBER: self._target_member,
            CONSUMER_CURRENT_ASSIGNMENT: self._current_assignment,
            CONSUMER_REGULAR_EXPRESSION: self._regular_expression,
        }

    def replay(self, offset: int, producer_id: int, rec: CoordinatorRecord) -> None:
        rtype = record_type(rec.key)
        if rtype in CONSUMER_RECORD_TYPES and rec.value is not None:
            self._simple_group_makes_way(rec.key)
        handler = self.handlers.get(rtype)
        if handler is not None:
            handler(offset, producer_id, rec.key, rec.value)
        if rtype in CONSUMER_RECORD_TYPES:
            gid = record_group_id(rec.key)
            g = self.consumer.get(gid) if gid is not None else None
            if g is not None:
                g.refresh_state()

    def replay_end_txn(self, producer_id: int, committed: bool) -> None:
        self.offsets.replay_end_txn(producer_id, committed)

    # ---- offsets and classic groups ----------------------------------------------------------
    def _offset_commit(self, offset: int, producer_id: int, key_bytes: bytes, value: bytes | None) -> None:
        key = decode_key(OffsetCommitKey, key_bytes)
        om = None
        if value is not None:
            version, v = decode_value(OffsetCommitValue, value)
            om = OffsetAndMetadata(
                offset=v.offset,
                leader_epoch=v.leader_epoch if version >= 3 else -1,
                metadata=v.metadata or "",
                commit_timestamp_ms=v.commit_timestamp,
                expire_timestamp_ms=v.expire_timestamp if version == 1 else -1,
                record_offset=offset,
            )
            if producer_id < 0 and key.group not in self.classic and key.group not in self.consumer:
                # a simple (non-member) group, as Kafka recreates it from its offsets
                self.classic[key.group] = ClassicGroup(key.group)
        self.offsets.replay_commit(key.group, (key.topic, key.partition), om, producer_id)

    def _group_metadata(self, _offset: int, _pid: int, key_bytes: bytes, value: bytes | None) -> None:
        if self.loaded:
            return  # the live path already holds this state (Kafka: replayRecords=false)
        key = decode_key(GroupMetadataKey, key_bytes)
        if value is None:
            self.classic.pop(key.group, None)
            return
        _version, gv = decode_value(GroupMetadataValue, value)
        self.classic[key.group] = classic_group_from_record(key.group, gv)

    def _simple_group_makes_way(self, key: bytes) -> None:
        gid = record_group_id(key)
        simple = self.classic.get(gid) if gid is not None else None
        if simple is not None and not simple.members and not simple.protocol_type \
                and simple.generation_id == 0:
            del self.classic[simple.group_id]

    # ---- consumer groups ---------------------------------------------------------------------
    def _consumer_group_metadata(self, _offset: int, _pid: int, key_bytes: bytes, value: bytes | None) -> None:
        k = decode_key(ConsumerGroupMetadataKey, key_bytes)
        if value is None:
            gone = self.consumer.pop(k.group_id, None)
            if gone is not None:
                gone.mark_dead()
            return
        _v, gv = decode_value(ConsumerGroupMetadataValue, value)
        g = self.consumer.setdefault(k.group_id, ConsumerGroup(k.group_id))
        g.group_epoch, g.metadata_hash = gv.epoch, gv.metadata_hash

    def _member_metadata(self, _offset: int, _pid: int, key_bytes: bytes, value: bytes | None) -> None:
        k = decode_key(ConsumerGroupMemberMetadataKey, key_bytes)
        if value is None:
            g0 = self.consumer.get(k.group_id)
            if g0 is not None:
                g0.members.pop(k.member_id, None)
            return
        _v, mv = decode_value(ConsumerGroupMemberMetadataValue, value)
        g = self.consumer.setdefault(k.group_id, ConsumerGroup(k.group_id))
        m = g.members.setdefault(k.member_id, ConsumerMember(k.member_id))
        m.instance_id = mv.instance_id
        m.rack_id = mv.rack_id
        m.client_id = mv.client_id
        m.client_host = mv.client_host
        m.subscribed_topic_names = list(mv.subscribed_topic_names)
        m.subscribed_topic_regex = mv.subscribed_topic_regex or None
        m.rebalance_timeout_ms = mv.rebalance_timeout_ms
        m.server_assignor = mv.server_assignor
        cm = mv.classic_member_metadata
        absent = cm is None or (cm.session_timeout_ms == 0 and not cm.supported_protocols)
        m.classic = None if cm is None or absent else ClassicMeta(
            cm.session_timeout_ms,
            tuple((p.name, bytes(p.metadata)) for p in cm.supported_protocols))

    def _target_metadata(self, _offset: int, _pid: int, key_bytes: bytes, value: bytes | None) -> None:
        k = decode_key(ConsumerGroupTargetAssignmentMetadataKey, key_bytes)
        g = self.consumer.get(k.group_id)
        if value is not None and g is not None:
            _v, tv = decode_value(ConsumerGroupTargetAssignmentMetadataValue, value)
            g.assignment_epoch = tv.assignment_epoch
            g.assignment_timestamp_ms = tv.assignment_timestamp

    def _target_member(self, _offset: int, _pid: int, key_bytes: bytes, value: bytes | None) -> None:
        k = decode_key(ConsumerGroupTargetAssignmentMemberKey, key_bytes)
        g = self.consumer.get(k.group_id)
        if g is None:
            return
        if value is None:
            g.target.pop(k.member_id, None)
        else:
            _v, am = decode_value(ConsumerGroupTargetAssignmentMemberValue, value)
            g.target[k.member_id] = from_wire(am.topic_partitions)

    def _current_assignment(self, _offset: int, _pid: int, key_bytes: bytes, value: bytes | None) -> None:
        k = decode_key(ConsumerGroupCurrentMemberAssignmentKey, key_bytes)
        g = self.consumer.get(k.group_id)
        if value is None or g is None:
            return
        _v, cv = decode_value(ConsumerGroupCurrentMemberAssignmentValue, value)
        m = g.members.setdefault(k.member_id, ConsumerMember(k.member_id))
        m.member_epoch = cv.member_epoch
        m.previous_member_epoch = cv.previous_member_epoch
        m.restored(MemberState.from_value(cv.state))
        m.assigned = from_wire(cv.assigned_partitions)
        m.pending_revocation = from_wire(cv.partitions_pending_revocation)
        m.epochs = {**record_epochs(cv.assigned_partitions, cv.member_epoch),
                    **record_epochs(cv.partitions_pending_revocation, cv.member_epoch)}

    def _regular_expression(self, _offset: int, _pid: int, key_bytes: bytes, value: bytes | None) -> None:
        k = decode_key(ConsumerGroupRegularExpressionKey, key_bytes)
        g = self.consumer.get(k.group_id)
        if g is None:
            return
        if value is None:
            g.regexes.pop(k.regular_expression, None)
            return
        _v, rv = decode_value(ConsumerGroupRegularExpressionValue, value)
        g.regexes[k.regular_expression] = ResolvedRegex(frozenset(rv.topics), rv.version_, rv.timestamp)
        g.last_regex_refresh_ms = max(g.last_regex_refresh_ms, rv.timestamp)
        g.last_regex_version = max(g.last_regex_version, rv.version_)
