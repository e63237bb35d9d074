"""KIP-848 consumer groups (the "consumer" rebalance protocol): ConsumerGroupHeartbeat,
ConsumerGroupDescribe, server-side assignment and incremental reconciliation.

State lives in Kafka's consumer-group coordinator records and ONLY ``replay`` changes it
(as in Kafka, these records are replayed on the live path too):

* ConsumerGroupMetadata (type 3): the group epoch (bumped on every membership, subscription
  or subscribed-metadata change) and a hash of the subscribed topics' metadata;
* ConsumerGroupMemberMetadata (5): a member's subscription (names and/or regex), client
  id/host, rack, rebalance timeout, preferred server assignor; a tombstone removes the member;
* ConsumerGroupTargetAssignmentMember (7) / ...Metadata (6): the assignor's target per member
  and the epoch it was computed for;
* ConsumerGroupCurrentMemberAssignment (8): where the member is in its reconciliation: member
  epoch, previous epoch, state, assigned partitions, partitions it must still revoke.

Reconciliation (Kafka's CurrentAssignmentBuilder): a member first revokes what its target no
longer holds (state UNREVOKED_PARTITIONS, epoch unchanged) and reports it in a later heartbeat;
then receives its target at the new epoch, minus partitions another member has not released
yet (UNRELEASED_PARTITIONS) which follow once released; then STABLE. A heartbeat carrying an
older epoch than the member's is FENCED_MEMBER_EPOCH (unless it is the previous epoch and the
member owns nothing it should not: a lost response). Members are removed when their session
(``group.consumer.session.timeout.ms``) expires, or when they do not revoke within their
rebalance timeout.

Deviations from Kafka: a static member that leaves (epoch -2) is removed like a dynamic one
(its return is a normal join, with a rebalance); regular expressions use Python's ``re``
(``fullmatch``) instead of RE2/J and are resolved at every heartbeat instead of being stored
(ConsumerGroupRegularExpression records are not written); classic members cannot join a
non-empty consumer group (INCONSISTENT_GROUP_PROTOCOL; Kafka supports mixed groups).
"""

from __future__ import annotations

import re
import uuid
import zlib
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from groups.assignors import Assignment, TopicInfo, assign
from groups.config import GroupConfig
from groups.timers import Timers
from protocol._generated.consumer_group_current_member_assignment_key import (
    ConsumerGroupCurrentMemberAssignmentKey,
)
from protocol._generated.consumer_group_current_member_assignment_value import (
    ConsumerGroupCurrentMemberAssignmentValue,
)
from protocol._generated.consumer_group_describe_response import ConsumerGroupDescribeResponse
from protocol._generated.consumer_group_heartbeat_request import ConsumerGroupHeartbeatRequest
from protocol._generated.consumer_group_heartbeat_response import ConsumerGroupHeartbeatResponse
from protocol._generated.consumer_group_member_metadata_key import ConsumerGroupMemberMetadataKey
from protocol._generated.consumer_group_member_metadata_value import (
    ConsumerGroupMemberMetadataValue,
)
from protocol._generated.consumer_group_metadata_key import ConsumerGroupMetadataKey
from protocol._generated.consumer_group_metadata_value import ConsumerGroupMetadataValue
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
from protocol.coordinator import CoordinatorRecord, decode_key, decode_value, record
from protocol.errors import ErrorCode

Records = list[CoordinatorRecord]
#: topic name -> (topic id, partition count): the metadata the handler passes in
TopicsView = dict[str, tuple[uuid.UUID, int]]

GROUP_METADATA = 3
MEMBER_METADATA = 5
TARGET_METADATA = 6
TARGET_MEMBER = 7
CURRENT_ASSIGNMENT = 8
RECORD_TYPES = frozenset({3, 4, 5, 6, 7, 8, 16})

STABLE, UNREVOKED, UNRELEASED = 0, 1, 2
LEAVE_EPOCH, STATIC_LEAVE_EPOCH = -1, -2


@dataclass(eq=False)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: int = STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)


@dataclass(eq=False)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    metadata_hash: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)

    def state(self) -> str:
        if not self.members:
            return "Empty"
        if self.group_epoch != self.assignment_epoch:
            return "Assigning"
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state != STABLE:
                return "Reconciling"
        return "Stable"


def _copy(a: Assignment) -> Assignment:
    return {t: set(p) for t, p in a.items() if p}


def _minus(a: Assignment, b: Assignment) -> Assignment:
    return {t: p - b.get(t, set()) for t, p in a.items() if p - b.get(t, set())}


def _inter(a: Assignment, b: Assignment) -> Assignment:
    return {t: p & b[t] for t, p in a.items() if t in b and p & b[t]}


def _union(a: Assignment, b: Assignment) -> Assignment:
    out = _copy(a)
    for t, p in b.items():
        out.setdefault(t, set()).update(p)
    return {t: p for t, p in out.items() if p}


def _from_wire(tps: Any) -> Assignment:
    return {tp.topic_id: set(tp.partitions) for tp in tps if tp.partitions}


def _empty(a: Assignment) -> bool:
    return not any(a.values())


class ConsumerGroups:
    """The KIP-848 groups of one shard."""

    def __init__(self, config: GroupConfig, timers: Timers) -> None:
        self.config = config
        self.timers = timers
        self.groups: dict[str, ConsumerGroup] = {}
        #: the topics seen by the last heartbeat (timers recompute assignments with it)
        self.topics: TopicsView = {}

    # =====================================================================================
    # replay
    # =====================================================================================
    def replay(self, rtype: int, key_bytes: bytes, value: bytes | None) -> None:
        if rtype == GROUP_METADATA:
            k = decode_key(ConsumerGroupMetadataKey, key_bytes)
            if value is None:
                self.groups.pop(k.group_id, None)
                return
            _v, gv = decode_value(ConsumerGroupMetadataValue, value)
            g = self.groups.setdefault(k.group_id, ConsumerGroup(k.group_id))
            g.group_epoch, g.metadata_hash = gv.epoch, gv.metadata_hash
        elif rtype == MEMBER_METADATA:
            k = decode_key(ConsumerGroupMemberMetadataKey, key_bytes)
            if value is None:
                g0 = self.groups.get(k.group_id)
                if g0 is not None:
                    g0.members.pop(k.member_id, None)
                return
            _v, mv = decode_value(ConsumerGroupMemberMetadataValue, value)
            g = self.groups.setdefault(k.group_id, ConsumerGroup(k.group_id))
            m = g.members.setdefault(k.member_id, ConsumerMember(k.member_id))
            m.instance_id = mv.instance_id
            m.rack_id = mv.rack_id
            m.client_id = mv.client_id
            m.client_host = mv.client_host
            m.subscribed_topic_names = list(mv.subscribed_topic_names)
            m.subscribed_topic_regex = mv.subscribed_topic_regex
            m.rebalance_timeout_ms = mv.rebalance_timeout_ms
            m.server_assignor = mv.server_assignor
        elif rtype == TARGET_METADATA:
            k = decode_key(ConsumerGroupTargetAssignmentMetadataKey, key_bytes)
            g1 = self.groups.get(k.group_id)
            if value is not None and g1 is not None:
                _v, tv = decode_value(ConsumerGroupTargetAssignmentMetadataValue, value)
                g1.assignment_epoch = tv.assignment_epoch
        elif rtype == TARGET_MEMBER:
            k = decode_key(ConsumerGroupTargetAssignmentMemberKey, key_bytes)
            g2 = self.groups.get(k.group_id)
            if g2 is None:
                return
            if value is None:
                g2.target.pop(k.member_id, None)
            else:
                _v, am = decode_value(ConsumerGroupTargetAssignmentMemberValue, value)
                g2.target[k.member_id] = _from_wire(am.topic_partitions)
        elif rtype == CURRENT_ASSIGNMENT:
            k = decode_key(ConsumerGroupCurrentMemberAssignmentKey, key_bytes)
            g3 = self.groups.get(k.group_id)
            if value is None or g3 is None:
                return
            _v, cv = decode_value(ConsumerGroupCurrentMemberAssignmentValue, value)
            m3 = g3.members.setdefault(k.member_id, ConsumerMember(k.member_id))
            m3.member_epoch = cv.member_epoch
            m3.previous_member_epoch = cv.previous_member_epoch
            m3.state = cv.state
            m3.assigned = _from_wire(cv.assigned_partitions)
            m3.pending_revocation = _from_wire(cv.partitions_pending_revocation)
        # 4 (partition metadata, deprecated) and 16 (resolved regexes) are not used

    def on_loaded(self, now_ms: int) -> None:
        for g in self.groups.values():
            for m in g.members.values():
                self._touch(g, m, now_ms)

    # =====================================================================================
    # records
    # =====================================================================================
    @staticmethod
    def _wire(a: Assignment, cls: Any) -> list[Any]:
        return [cls(topic_id=t, partitions=sorted(p)) for t, p in sorted(a.items(), key=lambda kv: str(kv[0])) if p]

    def _member_record(self, gid: str, m: ConsumerMember) -> CoordinatorRecord:
        return record(
            ConsumerGroupMemberMetadataKey(group_id=gid, member_id=m.member_id),
            ConsumerGroupMemberMetadataValue(
                instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id,
                client_host=m.client_host, subscribed_topic_names=list(m.subscribed_topic_names),
                subscribed_topic_regex=m.subscribed_topic_regex,
                rebalance_timeout_ms=m.rebalance_timeout_ms, server_assignor=m.server_assignor,
            ),
        )

    def _current_record(self, gid: str, m: ConsumerMember) -> CoordinatorRecord:
        tp = ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions
        return record(
            ConsumerGroupCurrentMemberAssignmentKey(group_id=gid, member_id=m.member_id),
            ConsumerGroupCurrentMemberAssignmentValue(
                member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch,
                state=m.state, assigned_partitions=self._wire(m.assigned, tp),
                partitions_pending_revocation=self._wire(m.pending_revocation, tp),
            ),
        )

    def _removal_records(self, gid: str, member_id: str) -> Records:
        return [
            record(ConsumerGroupCurrentMemberAssignmentKey(group_id=gid, member_id=member_id), None),
            record(ConsumerGroupTargetAssignmentMemberKey(group_id=gid, member_id=member_id), None),
            record(ConsumerGroupMemberMetadataKey(group_id=gid, member_id=member_id), None),
        ]

    def tombstones(self, g: ConsumerGroup) -> Records:
        """Every record of an (empty) group, deleted."""
        out: Records = []
        for mid in sorted(set(g.members) | set(g.target)):
            out += self._removal_records(g.group_id, mid)
        out.append(record(ConsumerGroupTargetAssignmentMetadataKey(group_id=g.group_id), None))
        out.append(record(ConsumerGroupMetadataKey(group_id=g.group_id), None))
        return out

    # =====================================================================================
    # subscriptions and the target assignment
    # =====================================================================================
    def _subscribed(self, m: ConsumerMember, topics: TopicsView) -> set[str]:
        names = {t for t in m.subscribed_topic_names if t in topics}
        if m.subscribed_topic_regex:
            try:
                rx = re.compile(m.subscribed_topic_regex)
            except re.error:
                rx = None
            if rx is not None:
                names |= {t for t in topics if not t.startswith("__") and rx.fullmatch(t)}
        return names

    @staticmethod
    def _hash(names: set[str], topics: TopicsView) -> int:
        text = ";".join(f"{n}:{topics[n][0]}:{topics[n][1]}" for n in sorted(names))
        return zlib.crc32(text.encode())

    def _assignor(self, members: dict[str, ConsumerMember]) -> str:
        votes: dict[str, int] = {}
        for m in members.values():
            if m.server_assignor:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        if votes:
            return max(sorted(votes), key=lambda a: votes[a])
        return self.config.consumer_assignors[0]

    def _target(
        self, g: ConsumerGroup, members: dict[str, ConsumerMember], topics: TopicsView, epoch: int,
        now_ms: int,
    ) -> tuple[Records, dict[str, Assignment]]:
        subs = {mid: {topics[t][0] for t in self._subscribed(m, topics)} for mid, m in members.items()}
        info: TopicInfo = {}
        for mid in subs:
            for name in self._subscribed(members[mid], topics):
                info[topics[name][0]] = (name, topics[name][1])
        target = assign(self._assignor(members), subs, info, g.target)
        records: Records = []
        tp = ConsumerGroupTargetAssignmentMemberValue.TopicPartition
        for mid in sorted(target):
            if target[mid] != {t: p for t, p in g.target.get(mid, {}).items() if p} or mid not in g.target:
                records.append(record(
                    ConsumerGroupTargetAssignmentMemberKey(group_id=g.group_id, member_id=mid),
                    ConsumerGroupTargetAssignmentMemberValue(topic_partitions=self._wire(target[mid], tp)),
                ))
        for mid in sorted(set(g.target) - set(target)):
            records.append(record(ConsumerGroupTargetAssignmentMemberKey(group_id=g.group_id, member_id=mid), None))
        records.append(record(
            ConsumerGroupTargetAssignmentMetadataKey(group_id=g.group_id),
            ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=epoch, assignment_timestamp=now_ms),
        ))
        return records, target

    # =====================================================================================
    # reconciliation
    # =====================================================================================
    @staticmethod
    def reconcile(
        m: ConsumerMember, target_epoch: int, target: Assignment, owned: Assignment | None,
        owned_by_others: Assignment,
    ) -> ConsumerMember:
        """The member's next current assignment (a new object; ``m`` is not changed)."""
        if m.state == UNREVOKED:
            still = owned is None or not _empty(_inter(m.pending_revocation, owned))
            if still:
                return m
        elif m.state == STABLE and m.member_epoch == target_epoch:
            return m
        kept = _inter(m.assigned, target)
        revoke = _minus(m.assigned, target)
        to_assign = _minus(target, m.assigned)
        unreleased = _inter(to_assign, owned_by_others)
        new = ConsumerMember(**{k: getattr(m, k) for k in m.__dataclass_fields__})
        if not _empty(revoke):
            new.state = UNREVOKED
            new.assigned = kept
            new.pending_revocation = revoke
            return new
        new.previous_member_epoch = m.member_epoch
        new.member_epoch = target_epoch
        new.pending_revocation = {}
        if not _empty(unreleased):
            new.state = UNRELEASED
            new.assigned = _union(kept, _minus(to_assign, unreleased))
        else:
            new.state = STABLE
            new.assigned = _copy(target)
        return new

    def _touch(self, g: ConsumerGroup, m: ConsumerMember, now_ms: int) -> None:
        self.timers.schedule(("csession", g.group_id, m.member_id), now_ms + self.config.consumer_session_timeout_ms)
        key: Hashable = ("crevoke", g.group_id, m.member_id)
        if m.state == UNREVOKED:
            if key not in self.timers:
                self.timers.schedule(key, now_ms + max(m.rebalance_timeout_ms, 0))
        else:
            self.timers.cancel(key)

    # =====================================================================================
    # ConsumerGroupHeartbeat
    # =====================================================================================
    def heartbeat(
        self, req: ConsumerGroupHeartbeatRequest, version: int, client_id: str, client_host: str,
        topics: TopicsView, new_member_id: str, now_ms: int,
    ) -> tuple[Records, ConsumerGroupHeartbeatResponse]:
        self.topics = topics

        def error(code: ErrorCode, message: str | None = None) -> tuple[Records, ConsumerGroupHeartbeatResponse]:
            return [], ConsumerGroupHeartbeatResponse(error_code=code, error_message=message)

        gid, epoch = req.group_id, req.member_epoch
        if not gid:
            return error(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
        if req.instance_id is not None and not req.instance_id:
            return error(ErrorCode.INVALID_REQUEST, "InstanceId can't be empty.")
        if epoch == 0:
            if version >= 1 and not req.member_id:
                return error(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
            if req.rebalance_timeout_ms == -1:
                return error(ErrorCode.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
            if req.topic_partitions is None or req.topic_partitions:
                return error(ErrorCode.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.")
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                return error(ErrorCode.INVALID_REQUEST,
                             "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        elif epoch < STATIC_LEAVE_EPOCH or not req.member_id:
            return error(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
        if req.server_assignor is not None and req.server_assignor not in self.config.consumer_assignors:
            return error(ErrorCode.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {req.server_assignor} is not supported.")
        if req.subscribed_topic_regex is not None:
            try:
                re.compile(req.subscribed_topic_regex)
            except re.error as e:
                return error(ErrorCode.INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex is invalid: {e}")

        g = self.groups.get(gid)
        member_id = req.member_id or new_member_id
        if epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            if g is None or member_id not in g.members:
                return error(ErrorCode.UNKNOWN_MEMBER_ID)
            return self._remove(g, member_id, now_ms), ConsumerGroupHeartbeatResponse(
                member_id=member_id, member_epoch=epoch, heartbeat_interval_ms=0)
        if g is None:
            if epoch != 0:
                return error(ErrorCode.UNKNOWN_MEMBER_ID)
            g = ConsumerGroup(gid)  # created by the records below
        assert g is not None
        old = g.members.get(member_id)
        if old is None:
            if epoch != 0:
                return error(ErrorCode.UNKNOWN_MEMBER_ID)
            if len(g.members) >= self.config.consumer_max_size:
                return error(ErrorCode.GROUP_MAX_SIZE_REACHED)
        owned = None if req.topic_partitions is None else _from_wire(req.topic_partitions)
        if old is not None and epoch != 0 and epoch != old.member_epoch:
            if not (epoch == old.previous_member_epoch and (owned is None or _empty(_minus(owned, old.assigned)))):
                return error(ErrorCode.FENCED_MEMBER_EPOCH,
                             f"The consumer group member has a smaller member epoch ({epoch}) than the one known by the group coordinator ({old.member_epoch}).")

        # the member's new metadata
        m = ConsumerMember(member_id) if old is None or epoch == 0 else ConsumerMember(
            **{k: getattr(old, k) for k in old.__dataclass_fields__})
        if old is not None and epoch == 0:
            # rejoining: a fresh start, keeping nothing
            m.member_epoch = 0
        m.client_id, m.client_host = client_id, client_host
        if req.instance_id is not None:
            m.instance_id = req.instance_id
        if req.rack_id is not None:
            m.rack_id = req.rack_id
        if req.rebalance_timeout_ms != -1:
            m.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.subscribed_topic_names is not None:
            m.subscribed_topic_names = sorted(set(req.subscribed_topic_names))
        if req.subscribed_topic_regex is not None:
            m.subscribed_topic_regex = req.subscribed_topic_regex or None
        if req.server_assignor is not None:
            m.server_assignor = req.server_assignor
        records: Records = []
        meta_changed = old is None or any(
            getattr(old, f) != getattr(m, f)
            for f in ("instance_id", "rack_id", "client_id", "client_host", "subscribed_topic_names",
                      "subscribed_topic_regex", "rebalance_timeout_ms", "server_assignor")
        )
        if meta_changed:
            records.append(self._member_record(gid, m))
        members = dict(g.members)
        members[member_id] = m
        subscribed: set[str] = set()
        for x in members.values():
            subscribed |= self._subscribed(x, topics)
        mhash = self._hash(subscribed, topics)
        sub_changed = old is None or epoch == 0 or (old.subscribed_topic_names, old.subscribed_topic_regex, old.server_assignor) != (
            m.subscribed_topic_names, m.subscribed_topic_regex, m.server_assignor)
        group_epoch = g.group_epoch
        if sub_changed or mhash != g.metadata_hash:
            group_epoch += 1
            records.append(record(ConsumerGroupMetadataKey(group_id=gid),
                                  ConsumerGroupMetadataValue(epoch=group_epoch, metadata_hash=mhash)))
        target_epoch, target = g.assignment_epoch, g.target
        if group_epoch > g.assignment_epoch:
            trecords, target = self._target(g, members, topics, group_epoch, now_ms)
            records += trecords
            target_epoch = group_epoch
        others: Assignment = {}
        for mid, x in g.members.items():
            if mid != member_id:
                others = _union(others, _union(x.assigned, x.pending_revocation))
        if old is not None and epoch == 0:
            m.assigned, m.pending_revocation, m.state = {}, {}, STABLE
        new = self.reconcile(m, target_epoch, target.get(member_id, {}), owned, others)
        changed = old is None or epoch == 0 or any(
            getattr(old, f) != getattr(new, f)
            for f in ("member_epoch", "previous_member_epoch", "state", "assigned", "pending_revocation"))
        if changed:
            records.append(self._current_record(gid, new))
        self._touch(g, new, now_ms)
        resp = ConsumerGroupHeartbeatResponse(
            member_id=member_id, member_epoch=new.member_epoch,
            heartbeat_interval_ms=self.config.consumer_heartbeat_interval_ms,
        )
        if changed or owned is not None and owned != _copy(new.assigned):
            resp.assignment = ConsumerGroupHeartbeatResponse.Assignment(
                topic_partitions=self._wire(new.assigned, ConsumerGroupHeartbeatResponse.TopicPartitions))
        else:
            resp.assignment = None
        return records, resp

    def _remove(self, g: ConsumerGroup, member_id: str, now_ms: int) -> Records:
        """Records removing a member and re-targeting the others (new group epoch)."""
        self.timers.cancel(("csession", g.group_id, member_id))
        self.timers.cancel(("crevoke", g.group_id, member_id))
        records = self._removal_records(g.group_id, member_id)
        members = {k: v for k, v in g.members.items() if k != member_id}
        subscribed: set[str] = set()
        for x in members.values():
            subscribed |= self._subscribed(x, self.topics)
        epoch = g.group_epoch + 1
        records.append(record(ConsumerGroupMetadataKey(group_id=g.group_id),
                              ConsumerGroupMetadataValue(epoch=epoch, metadata_hash=self._hash(subscribed, self.topics))))
        trecords, _target = self._target(
            ConsumerGroup(g.group_id, target={k: v for k, v in g.target.items() if k != member_id}),
            members, self.topics, epoch, now_ms)
        return records + trecords

    def on_timer(self, key: tuple[Any, ...], now_ms: int) -> Records:
        kind, gid, mid = key
        g = self.groups.get(gid)
        if g is None or mid not in g.members:
            return []
        if kind == "crevoke" and g.members[mid].state != UNREVOKED:
            return []
        return self._remove(g, mid, now_ms)

    # =====================================================================================
    # offsets, describe, list, delete
    # =====================================================================================
    def validate_commit(self, g: ConsumerGroup, member_id: str, epoch: int) -> ErrorCode:
        if epoch < 0 and not g.members:
            return ErrorCode.NONE
        m = g.members.get(member_id)
        if m is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if epoch != m.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    def describe(self, gid: str, names: dict[uuid.UUID, str]) -> ConsumerGroupDescribeResponse.DescribedGroup:
        g = self.groups.get(gid)
        if g is None:
            return ConsumerGroupDescribeResponse.DescribedGroup(
                error_code=ErrorCode.GROUP_ID_NOT_FOUND, error_message=f"Group {gid} not found.",
                group_id=gid, members=[])

        def wire(a: Assignment) -> ConsumerGroupDescribeResponse.Assignment:
            return ConsumerGroupDescribeResponse.Assignment(topic_partitions=[
                ConsumerGroupDescribeResponse.TopicPartitions(
                    topic_id=t, topic_name=names.get(t, ""), partitions=sorted(p))
                for t, p in sorted(a.items(), key=lambda kv: names.get(kv[0], "")) if p])

        members = [
            ConsumerGroupDescribeResponse.Member(
                member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
                member_epoch=m.member_epoch, client_id=m.client_id, client_host=m.client_host,
                subscribed_topic_names=list(m.subscribed_topic_names),
                subscribed_topic_regex=m.subscribed_topic_regex,
                assignment=wire(m.assigned), target_assignment=wire(g.target.get(m.member_id, {})),
                member_type=1,
            )
            for m in g.members.values()
        ]
        return ConsumerGroupDescribeResponse.DescribedGroup(
            error_code=ErrorCode.NONE, group_id=gid, group_state=g.state(), group_epoch=g.group_epoch,
            assignment_epoch=g.assignment_epoch, assignor_name=self._assignor(g.members), members=members,
        )

    def subscribed_topics(self, g: ConsumerGroup) -> set[str]:
        out: set[str] = set()
        for m in g.members.values():
            out |= set(m.subscribed_topic_names)
            if m.subscribed_topic_regex:
                out |= self._subscribed(m, self.topics)
        return out
