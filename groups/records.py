"""The coordinator records the group coordinator writes, in Kafka's own schemas (so Kafka's tools
read ``__consumer_offsets``): their types (the key's apiKey) and builders. Reading them back is
``groups/replay.py``.

* OffsetCommit (type 1; 0 is the legacy key, read only): one committed offset, value version 3
  (version 1 when it carries an explicit expire timestamp);
* GroupMetadata (2): a classic group, value version 3;
* the KIP-848 consumer group records: ConsumerGroupMetadata (3; 4, partition metadata, is
  deprecated and never written), ConsumerGroupMemberMetadata (5), target assignment metadata (6)
  and member (7), ConsumerGroupCurrentMemberAssignment (8), ConsumerGroupRegularExpression (16).
"""

from __future__ import annotations

from typing import Any

from groups.assignors import Assignment
from groups.classic import ClassicGroup
from groups.consumer_group import ConsumerGroup, ConsumerMember, ResolvedRegex
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
from protocol.coordinator import CoordinatorRecord, record

Records = list[CoordinatorRecord]

#: coordinator record types (the key's apiKey)
LEGACY_OFFSET_COMMIT = 0
OFFSET_COMMIT = 1
GROUP_METADATA = 2
CONSUMER_GROUP_METADATA = 3
CONSUMER_PARTITION_METADATA = 4
CONSUMER_MEMBER_METADATA = 5
CONSUMER_TARGET_METADATA = 6
CONSUMER_TARGET_MEMBER = 7
CONSUMER_CURRENT_ASSIGNMENT = 8
CONSUMER_REGULAR_EXPRESSION = 16
CONSUMER_RECORD_TYPES = frozenset({3, 4, 5, 6, 7, 8, 16})
#: GroupMetadataValue / OffsetCommitValue versions we write (what Kafka 4.x writes)
GROUP_METADATA_VERSION = 3
OFFSET_COMMIT_VERSION = 3


# ---- offsets ----------------------------------------------------------------------------
def offset_record(
    group_id: str, topic: str, partition: int, offset: int, leader_epoch: int,
    metadata: str | None, now_ms: int, expire_ms: int = -1,
) -> CoordinatorRecord:
    value = OffsetCommitValue(
        offset=offset, leader_epoch=leader_epoch, metadata=metadata or "",
        commit_timestamp=now_ms, expire_timestamp=expire_ms,
    )
    return record(
        OffsetCommitKey(group=group_id, topic=topic, partition=partition), value,
        1 if expire_ms >= 0 else OFFSET_COMMIT_VERSION,
    )


def offset_tombstone(group_id: str, topic: str, partition: int) -> CoordinatorRecord:
    return record(OffsetCommitKey(group=group_id, topic=topic, partition=partition), None)


# ---- classic groups ---------------------------------------------------------------------
def classic_group_record(g: ClassicGroup) -> CoordinatorRecord:
    members = [
        GroupMetadataValue.MemberMetadata(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout=m.rebalance_timeout_ms,
            session_timeout=m.session_timeout_ms,
            subscription=m.metadata(g.protocol_name),
            assignment=m.assignment,
        )
        for m in g.members.values()
    ]
    value = GroupMetadataValue(
        protocol_type=g.protocol_type or "",
        generation=g.generation_id,
        protocol=g.protocol_name,
        leader=g.leader_id,
        current_state_timestamp=g.state_timestamp_ms,
        members=members,
    )
    return record(GroupMetadataKey(group=g.group_id), value, GROUP_METADATA_VERSION)


def classic_group_tombstone(group_id: str) -> CoordinatorRecord:
    return record(GroupMetadataKey(group=group_id), None)


# ---- consumer groups (KIP-848) ----------------------------------------------------------
def wire_partitions(a: Assignment, cls: Any) -> list[Any]:
    return [cls(topic_id=t, partitions=sorted(p)) for t, p in sorted(a.items(), key=lambda kv: str(kv[0])) if p]


def member_record(gid: str, m: ConsumerMember) -> CoordinatorRecord:
    classic = None
    if m.classic is not None:
        v = ConsumerGroupMemberMetadataValue
        classic = v.ClassicMemberMetadata(
            session_timeout_ms=m.classic.session_timeout_ms,
            supported_protocols=[v.ClassicProtocol(name=n, metadata=meta) for n, meta in m.classic.protocols],
        )
    return record(
        ConsumerGroupMemberMetadataKey(group_id=gid, member_id=m.member_id),
        ConsumerGroupMemberMetadataValue(
            instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id,
            client_host=m.client_host, subscribed_topic_names=list(m.subscribed_topic_names),
            subscribed_topic_regex=m.subscribed_topic_regex,
            rebalance_timeout_ms=m.rebalance_timeout_ms, server_assignor=m.server_assignor,
            classic_member_metadata=classic,
        ),
    )


def current_record(gid: str, m: ConsumerMember) -> CoordinatorRecord:
    def wire(a: Assignment) -> list[ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions]:
        out = wire_partitions(a, ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions)
        for tp in out:  # KIP-1251: the epoch each partition was assigned at
            tp.assignment_epochs = [m.epochs.get((tp.topic_id, p), m.member_epoch) for p in tp.partitions]
        return out

    return record(
        ConsumerGroupCurrentMemberAssignmentKey(group_id=gid, member_id=m.member_id),
        ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch,
            state=m.state.value, assigned_partitions=wire(m.assigned),
            partitions_pending_revocation=wire(m.pending_revocation),
        ),
    )


def target_record(gid: str, mid: str, a: Assignment) -> CoordinatorRecord:
    tp = ConsumerGroupTargetAssignmentMemberValue.TopicPartition
    return record(
        ConsumerGroupTargetAssignmentMemberKey(group_id=gid, member_id=mid),
        ConsumerGroupTargetAssignmentMemberValue(topic_partitions=wire_partitions(a, tp)))


def target_tombstone(gid: str, mid: str) -> CoordinatorRecord:
    return record(ConsumerGroupTargetAssignmentMemberKey(group_id=gid, member_id=mid), None)


def target_metadata_record(gid: str, epoch: int, ts: int) -> CoordinatorRecord:
    return record(
        ConsumerGroupTargetAssignmentMetadataKey(group_id=gid),
        ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=epoch, assignment_timestamp=ts))


def epoch_record(gid: str, epoch: int, mhash: int) -> CoordinatorRecord:
    return record(ConsumerGroupMetadataKey(group_id=gid),
                  ConsumerGroupMetadataValue(epoch=epoch, metadata_hash=mhash))


def regex_record(gid: str, regex: str, r: ResolvedRegex | None) -> CoordinatorRecord:
    key = ConsumerGroupRegularExpressionKey(group_id=gid, regular_expression=regex)
    if r is None:
        return record(key, None)
    return record(key, ConsumerGroupRegularExpressionValue(
        topics=sorted(r.topics), version_=r.version, timestamp=r.timestamp_ms))


def removal_records(gid: str, member_id: str) -> Records:
    return [
        record(ConsumerGroupCurrentMemberAssignmentKey(group_id=gid, member_id=member_id), None),
        target_tombstone(gid, member_id),
        record(ConsumerGroupMemberMetadataKey(group_id=gid, member_id=member_id), None),
    ]


def consumer_group_tombstones(g: ConsumerGroup) -> Records:
    """Every record of the group, deleted (the group is gone once they are replayed)."""
    out: Records = []
    for mid in sorted(set(g.members) | set(g.target)):
        out += removal_records(g.group_id, mid)
    for rx in sorted(g.regexes):
        out.append(regex_record(g.group_id, rx, None))
    out.append(record(ConsumerGroupTargetAssignmentMetadataKey(group_id=g.group_id), None))
    out.append(record(ConsumerGroupMetadataKey(group_id=g.group_id), None))
    return out


def consumer_group_records(g: ConsumerGroup) -> Records:
    """Records that rebuild ``g`` from nothing (a conversion from a classic group)."""
    out = [member_record(g.group_id, m) for m in g.members.values()]
    out.append(epoch_record(g.group_id, g.group_epoch, g.metadata_hash))
    out += [target_record(g.group_id, mid, a) for mid, a in g.target.items()]
    out.append(target_metadata_record(g.group_id, g.assignment_epoch, g.assignment_timestamp_ms))
    out += [current_record(g.group_id, m) for m in g.members.values()]
    return out
