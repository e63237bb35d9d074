"""KIP-848 consumer groups (the "consumer" rebalance protocol): ConsumerGroupHeartbeat,
ConsumerGroupDescribe, server-side assignment, incremental reconciliation, static members,
regular-expression subscriptions and classic-protocol members of a consumer group.

State lives in Kafka's consumer-group coordinator records and ONLY ``replay`` changes it
(as in Kafka, these records are replayed on the live path too):

* ConsumerGroupMetadata (type 3): the group epoch (bumped on every membership, subscription
  or subscribed-metadata change) and a hash of the subscribed topics' metadata;
* ConsumerGroupMemberMetadata (5): a member's subscription (names and/or regex), client
  id/host, rack, rebalance timeout, preferred server assignor, and for a member that speaks
  the classic protocol its ``ClassicMemberMetadata`` (session timeout, JoinGroup protocols);
  a tombstone removes the member;
* ConsumerGroupTargetAssignmentMember (7) / ...Metadata (6): the assignor's target per member,
  the epoch it was computed for and when;
* ConsumerGroupCurrentMemberAssignment (8): where the member is in its reconciliation: member
  epoch, previous epoch, state, assigned partitions, partitions it must still revoke;
* ConsumerGroupRegularExpression (16): a subscribed regex resolved to topic names, with the
  metadata version and the time of the resolution.

Epochs (Kafka 4.3): a new group starts at epoch 1 with an empty target at epoch 1; the first
member bumps it to 2. A change bumps the group epoch; the target assignment is recomputed
when the group epoch is ahead of it, at most once per ``group.consumer.assignment.interval.ms``
(Kafka's assignment batching; the group is "Assigning" meanwhile) and at the next heartbeat
(no timer). A member leaving or fenced bumps the group epoch without recomputing at once.

Reconciliation (Kafka's CurrentAssignmentBuilder): a member that still owns partitions its
target no longer holds revokes them first (UNREVOKED_PARTITIONS, epoch unchanged) and reports
it in a later heartbeat; a member that already owns none of them goes straight on. Then it
receives its target at the new epoch, minus partitions another member has not released yet
(UNRELEASED_PARTITIONS) which follow once released; then STABLE. A heartbeat carrying another
epoch than the member's is FENCED_MEMBER_EPOCH, unless it is the previous epoch and the member
owns a subset of its partitions (a lost response). Members are fenced when their session
expires or when they do not revoke within their rebalance timeout.

Static members (``instance_id``): leaving with epoch -2 keeps the member, its assignment and
its session timer (the group does not rebalance); a new member id with the same instance id
and epoch 0 then replaces it and gets the same partitions back without a group epoch bump.
While the instance is held by an active member a join is UNRELEASED_INSTANCE_ID; a heartbeat
for the instance from another member id is FENCED_INSTANCE_ID.

Regular expressions are resolved as Kafka does it, asynchronously: a heartbeat that needs a
resolution schedules one (a timer due at once, outside the heartbeat), which writes a
ConsumerGroupRegularExpression record per regex and bumps the group epoch when a resolution
changed; the next heartbeat computes the new target. A group resolves again when a member
brings an unresolved regex, when topics were created since its last resolution, or after
``REGEX_REFRESH_MAX_INTERVAL_MS``, never more often than every 10 s
(``REGEX_REFRESH_MIN_INTERVAL_MS``). Matching is a full match over every topic name, internal
topics included, as Kafka's. **Deviation:** Python's ``re`` instead of RE2/J: RE2 syntax is a
subset of ``re`` except for a few escapes (``\\pN``, ``\\C``), which ``re`` rejects or reads
otherwise; look-arounds and back-references, which RE2 rejects (INVALID_REGULAR_EXPRESSION),
are accepted here. No RE2 binding ships as a pure-Python wheel for every platform we run on.

Classic members (``ClassicMemberMetadata`` set) are served through JoinGroup, SyncGroup,
Heartbeat, LeaveGroup and OffsetCommit from this state (``classic_*`` below): their
ConsumerProtocolSubscription gives their topics and owned partitions, SyncGroup hands them
their assigned partitions as a ConsumerProtocolAssignment, and Heartbeat answers
REBALANCE_IN_PROGRESS whenever they must rejoin to move on. Conversions between the classic
and the consumer group types live in the shard (``groups/shard.py``): the last consumer-protocol
member leaving (``fence_hook``) or replaced by a classic static member (``replace_hook``, Kafka
4.3's validateOnlineDowngradeWithReplacedMember) turns the group classic; a classic group whose
assignments carry a custom assignor's user data is not upgraded (``from_classic``).

Assignment epochs (KIP-1251, Kafka 4.3): every partition a member holds, assigned or pending
revocation, carries the epoch at which it was assigned to the member (the target's epoch when it
came; kept partitions keep theirs; 0 after a static leave; the generation after an upgrade),
persisted as the AssignmentEpochs of the ConsumerGroupCurrentMemberAssignment record (a record
without them: the member epoch). ``validate_commit`` accepts an OffsetCommit with an epoch older
than the member's for partitions held since that epoch or earlier, so a commit crossing the
heartbeat response that bumped the epoch is not fenced.
"""

from __future__ import annotations

import re
import struct
import uuid
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from groups.assignors import Assignment, TopicInfo, assign
from groups.config import REGEX_REFRESH_MAX_INTERVAL_MS, REGEX_REFRESH_MIN_INTERVAL_MS, GroupConfig
from groups.consumer_protocol import Subscription, encode_assignment, parse_subscription
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
from protocol._generated.heartbeat_request import HeartbeatRequest
from protocol._generated.join_group_request import JoinGroupRequest
from protocol._generated.join_group_response import JoinGroupResponse
from protocol._generated.leave_group_request import LeaveGroupRequest
from protocol._generated.leave_group_response import LeaveGroupResponse
from protocol._generated.sync_group_request import SyncGroupRequest
from protocol._generated.sync_group_response import SyncGroupResponse
from protocol.coordinator import CoordinatorRecord, decode_key, decode_value, record, record_type
from protocol.errors import ErrorCode

Records = list[CoordinatorRecord]
#: topic name -> (topic id, partition count): the metadata the coordinator works with
TopicsView = dict[str, tuple[uuid.UUID, int]]

GROUP_METADATA = 3
MEMBER_METADATA = 5
TARGET_METADATA = 6
TARGET_MEMBER = 7
CURRENT_ASSIGNMENT = 8
REGULAR_EXPRESSION = 16
RECORD_TYPES = frozenset({3, 4, 5, 6, 7, 8, 16})

#: Kafka's MemberState values
STABLE, UNREVOKED, UNRELEASED = 0, 1, 2
LEAVE_EPOCH, STATIC_LEAVE_EPOCH = -1, -2
#: the epoch (and empty target) a new group starts with (Kafka 4.3, KAFKA-20268)
INITIAL_EPOCH = 1
PROTOCOL_TYPE = "consumer"


class GroupOpError(Exception):
    """An error code (and message) for the request at hand."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class ClassicMeta:
    """A member that speaks the classic protocol: its session timeout and JoinGroup
    protocols (name, ConsumerProtocolSubscription)."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]

    @property
    def protocol_names(self) -> list[str]:
        return [n for n, _ in self.protocols]


@dataclass(frozen=True)
class ResolvedRegex:
    topics: frozenset[str]
    version: int
    timestamp_ms: int


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
    classic: ClassicMeta | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: int = STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    #: KIP-1251: (topic id, partition) -> the epoch at which the member got the partition, for
    #: every partition it holds (assigned or pending revocation)
    epochs: dict[tuple[uuid.UUID, int], int] = field(default_factory=dict)

    def copy(self, **changes: Any) -> ConsumerMember:
        return replace(self, **changes)


METADATA_FIELDS = ("instance_id", "rack_id", "client_id", "client_host", "subscribed_topic_names",
                   "subscribed_topic_regex", "rebalance_timeout_ms", "server_assignor", "classic")
ASSIGNMENT_FIELDS = ("member_epoch", "previous_member_epoch", "state", "assigned",
                     "pending_revocation", "epochs")


def _differs(a: ConsumerMember, b: ConsumerMember, names: tuple[str, ...]) -> bool:
    return any(getattr(a, f) != getattr(b, f) for f in names)


@dataclass(eq=False)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    metadata_hash: int = 0
    assignment_epoch: int = 0
    assignment_timestamp_ms: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    regexes: dict[str, ResolvedRegex] = field(default_factory=dict)
    last_regex_refresh_ms: int = 0
    last_regex_version: int = -1

    def state(self) -> str:
        if not self.members:
            return "Empty"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state != STABLE:
                return "Reconciling"
        return "Stable"

    def static_member(self, instance_id: str | None) -> ConsumerMember | None:
        if instance_id is None:
            return None
        for m in self.members.values():
            if m.instance_id == instance_id:
                return m
        return None

    def regex_counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for m in self.members.values():
            if m.subscribed_topic_regex:
                out[m.subscribed_topic_regex] = out.get(m.subscribed_topic_regex, 0) + 1
        return out

    def classic_members(self) -> list[ConsumerMember]:
        return [m for m in self.members.values() if m.classic is not None]


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


def _epochs(m: ConsumerMember, new_epoch: int) -> dict[tuple[uuid.UUID, int], int]:
    """KIP-1251: the assignment epochs of what ``m`` holds: a partition it held already keeps
    its epoch, a new one gets ``new_epoch`` (Kafka's CurrentAssignmentBuilder)."""
    return {(t, p): m.epochs.get((t, p), new_epoch)
            for a in (m.assigned, m.pending_revocation) for t, ps in a.items() for p in ps}


def _with_epochs(tps: Any, default: int) -> dict[tuple[uuid.UUID, int], int]:
    """The assignment epochs of a ConsumerGroupCurrentMemberAssignment record's partitions
    (``default``, the member epoch, where the record has none: Kafka's replay)."""
    out: dict[tuple[uuid.UUID, int], int] = {}
    for tp in tps:
        epochs = tp.assignment_epochs or []
        for i, p in enumerate(tp.partitions):
            out[(tp.topic_id, p)] = epochs[i] if len(epochs) == len(tp.partitions) else default
    return out


def compile_regex(regex: str) -> re.Pattern[str] | None:
    try:
        return re.compile(regex)
    except (re.error, RecursionError, OverflowError):
        return None


class ConsumerGroups:
    """The KIP-848 groups of one shard."""

    def __init__(self, config: GroupConfig, timers: Timers) -> None:
        self.config = config
        #: a group's dynamic settings (its group configs: ``consumer.session.timeout.ms``,
        #: ``consumer.heartbeat.interval.ms``, ``consumer.assignment.interval.ms``), read at
        #: each heartbeat as Kafka does; missing keys fall back to ``config``
        self.group_settings: Callable[[str], Mapping[str, int]] = lambda _gid: {}
        self.timers = timers
        self.groups: dict[str, ConsumerGroup] = {}
        #: the latest metadata (``update_topics``; heartbeats pass theirs too)
        self.topics: TopicsView = {}
        self.metadata_version = -1
        #: the metadata version at which topics were last created (regexes resolve again)
        self.new_topics_version = -1
        #: member ids for classic members joining a consumer group
        self.id_factory: Callable[[], str] = lambda: str(uuid.uuid4())
        #: called before members are fenced: returns the records of a conversion to a
        #: classic group when that applies (the shard's downgrade), else None
        self.fence_hook: Callable[[ConsumerGroup, list[str], int], Records | None] | None = None
        #: called when a classic static member replaced the last consumer-protocol member
        #: (members and target after the replacement, whether the target is stale): returns
        #: the records of the conversion to a classic group when the policy allows it
        self.replace_hook: Callable[
            [ConsumerGroup, dict[str, ConsumerMember], dict[str, Assignment], bool, int], Records | None
        ] | None = None

    def update_topics(self, topics: TopicsView, version: int) -> None:
        if version >= 0 and version < self.metadata_version:
            return
        old = self.topics
        if any(old.get(name, (None, 0))[0] != tid for name, (tid, _n) in topics.items()):
            self.new_topics_version = max(version, self.new_topics_version + 1)
        self.topics = topics
        if version >= 0:
            self.metadata_version = version

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
            m.subscribed_topic_regex = mv.subscribed_topic_regex or None
            m.rebalance_timeout_ms = mv.rebalance_timeout_ms
            m.server_assignor = mv.server_assignor
            cm = mv.classic_member_metadata
            absent = cm is None or (cm.session_timeout_ms == 0 and not cm.supported_protocols)
            m.classic = None if cm is None or absent else ClassicMeta(
                cm.session_timeout_ms,
                tuple((p.name, bytes(p.metadata)) for p in cm.supported_protocols))
        elif rtype == TARGET_METADATA:
            k = decode_key(ConsumerGroupTargetAssignmentMetadataKey, key_bytes)
            g1 = self.groups.get(k.group_id)
            if value is not None and g1 is not None:
                _v, tv = decode_value(ConsumerGroupTargetAssignmentMetadataValue, value)
                g1.assignment_epoch = tv.assignment_epoch
                g1.assignment_timestamp_ms = tv.assignment_timestamp
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
            m3.epochs = {**_with_epochs(cv.assigned_partitions, cv.member_epoch),
                         **_with_epochs(cv.partitions_pending_revocation, cv.member_epoch)}
        elif rtype == REGULAR_EXPRESSION:
            k = decode_key(ConsumerGroupRegularExpressionKey, key_bytes)
            g4 = self.groups.get(k.group_id)
            if g4 is None:
                return
            if value is None:
                g4.regexes.pop(k.regular_expression, None)
                return
            _v, rv = decode_value(ConsumerGroupRegularExpressionValue, value)
            g4.regexes[k.regular_expression] = ResolvedRegex(
                frozenset(rv.topics), rv.version_, rv.timestamp)
            g4.last_regex_refresh_ms = max(g4.last_regex_refresh_ms, rv.timestamp)
            g4.last_regex_version = max(g4.last_regex_version, rv.version_)
        # 4 (partition metadata) is deprecated in Kafka 4.x and not written

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

    def _current_record(self, gid: str, m: ConsumerMember) -> CoordinatorRecord:
        def wire(a: Assignment) -> list[ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions]:
            out = self._wire(a, ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions)
            for tp in out:  # KIP-1251: the epoch each partition was assigned at
                tp.assignment_epochs = [m.epochs.get((tp.topic_id, p), m.member_epoch) for p in tp.partitions]
            return out

        return record(
            ConsumerGroupCurrentMemberAssignmentKey(group_id=gid, member_id=m.member_id),
            ConsumerGroupCurrentMemberAssignmentValue(
                member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch,
                state=m.state, assigned_partitions=wire(m.assigned),
                partitions_pending_revocation=wire(m.pending_revocation),
            ),
        )

    def _target_record(self, gid: str, mid: str, a: Assignment) -> CoordinatorRecord:
        tp = ConsumerGroupTargetAssignmentMemberValue.TopicPartition
        return record(
            ConsumerGroupTargetAssignmentMemberKey(group_id=gid, member_id=mid),
            ConsumerGroupTargetAssignmentMemberValue(topic_partitions=self._wire(a, tp)))

    @staticmethod
    def _target_metadata_record(gid: str, epoch: int, ts: int) -> CoordinatorRecord:
        return record(
            ConsumerGroupTargetAssignmentMetadataKey(group_id=gid),
            ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=epoch, assignment_timestamp=ts))

    @staticmethod
    def _epoch_record(gid: str, epoch: int, mhash: int) -> CoordinatorRecord:
        return record(ConsumerGroupMetadataKey(group_id=gid),
                      ConsumerGroupMetadataValue(epoch=epoch, metadata_hash=mhash))

    @staticmethod
    def _regex_record(gid: str, regex: str, r: ResolvedRegex | None) -> CoordinatorRecord:
        key = ConsumerGroupRegularExpressionKey(group_id=gid, regular_expression=regex)
        if r is None:
            return record(key, None)
        return record(key, ConsumerGroupRegularExpressionValue(
            topics=sorted(r.topics), version_=r.version, timestamp=r.timestamp_ms))

    def _removal_records(self, gid: str, member_id: str) -> Records:
        return [
            record(ConsumerGroupCurrentMemberAssignmentKey(group_id=gid, member_id=member_id), None),
            record(ConsumerGroupTargetAssignmentMemberKey(group_id=gid, member_id=member_id), None),
            record(ConsumerGroupMemberMetadataKey(group_id=gid, member_id=member_id), None),
        ]

    def tombstones(self, g: ConsumerGroup) -> Records:
        """Every record of the group, deleted (the group is gone once they are replayed)."""
        out: Records = []
        for mid in sorted(set(g.members) | set(g.target)):
            out += self._removal_records(g.group_id, mid)
        for rx in sorted(g.regexes):
            out.append(self._regex_record(g.group_id, rx, None))
        out.append(record(ConsumerGroupTargetAssignmentMetadataKey(group_id=g.group_id), None))
        out.append(record(ConsumerGroupMetadataKey(group_id=g.group_id), None))
        return out

    def group_records(self, g: ConsumerGroup) -> Records:
        """Records that rebuild ``g`` from nothing (a conversion from a classic group)."""
        out = [self._member_record(g.group_id, m) for m in g.members.values()]
        out.append(self._epoch_record(g.group_id, g.group_epoch, g.metadata_hash))
        out += [self._target_record(g.group_id, mid, a) for mid, a in g.target.items()]
        out.append(self._target_metadata_record(g.group_id, g.assignment_epoch, g.assignment_timestamp_ms))
        out += [self._current_record(g.group_id, m) for m in g.members.values()]
        return out

    # =====================================================================================
    # subscriptions and the target assignment
    # =====================================================================================
    def _subscribed(self, g: ConsumerGroup, m: ConsumerMember) -> set[str]:
        topics = self.topics
        names = {t for t in m.subscribed_topic_names if t in topics}
        if m.subscribed_topic_regex:
            r = g.regexes.get(m.subscribed_topic_regex)
            if r is not None:
                names |= {t for t in r.topics if t in topics}
        return names

    def _hash(self, g: ConsumerGroup, members: dict[str, ConsumerMember]) -> int:
        names: set[str] = set()
        for m in members.values():
            names |= self._subscribed(g, m)
        topics = self.topics
        text = ";".join(f"{n}:{topics[n][0]}:{topics[n][1]}" for n in sorted(names))
        return zlib.crc32(text.encode()) if names else 0

    def _assignor(self, members: dict[str, ConsumerMember]) -> str:
        votes: dict[str, int] = {}
        for m in members.values():
            if m.server_assignor:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        if votes:
            return max(sorted(votes), key=lambda a: votes[a])
        return self.config.consumer_assignors[0]

    def _compute_target(
        self, g: ConsumerGroup, members: dict[str, ConsumerMember], current: dict[str, Assignment],
        epoch: int, now_ms: int,
    ) -> tuple[Records, dict[str, Assignment]]:
        topics = self.topics
        subs: dict[str, set[uuid.UUID]] = {}
        info: TopicInfo = {}
        for mid, m in members.items():
            names = self._subscribed(g, m)
            subs[mid] = {topics[n][0] for n in names}
            for n in names:
                info[topics[n][0]] = (n, topics[n][1])
        target = assign(self._assignor(members), subs, info, current)
        records: Records = []
        for mid in sorted(target):
            if mid not in current or target[mid] != _copy(current[mid]):
                records.append(self._target_record(g.group_id, mid, target[mid]))
        for mid in sorted(set(current) - set(target)):
            records.append(record(ConsumerGroupTargetAssignmentMemberKey(group_id=g.group_id, member_id=mid), None))
        records.append(self._target_metadata_record(g.group_id, epoch, now_ms))
        return records, target

    def _can_assign(self, g: ConsumerGroup, now_ms: int) -> bool:
        interval = self.group_settings(g.group_id).get(
            "consumer.assignment.interval.ms", self.config.consumer_assignment_interval_ms)
        return now_ms >= g.assignment_timestamp_ms + interval

    # =====================================================================================
    # reconciliation
    # =====================================================================================
    @staticmethod
    def reconcile(
        m: ConsumerMember, target_epoch: int, target: Assignment, owned: Assignment | None,
        owned_by_others: Assignment,
    ) -> ConsumerMember:
        """The member's next current assignment (a new object; ``m`` is not changed).
        ``owned`` None: the member did not say what it owns."""
        if m.state == UNREVOKED:
            if owned is None or not _empty(_inter(m.pending_revocation, owned)):
                return m
        elif m.state == STABLE and m.member_epoch == target_epoch:
            return m
        kept = _inter(m.assigned, target)
        revoke = _minus(m.assigned, target)
        to_assign = _minus(target, m.assigned)
        unreleased = _inter(to_assign, owned_by_others)
        if not _empty(revoke) and (owned is None or not _empty(_inter(revoke, owned))):
            return m.copy(state=UNREVOKED, assigned=kept, pending_revocation=revoke)
        new = m.copy(previous_member_epoch=m.member_epoch, member_epoch=target_epoch,
                     pending_revocation={})
        if not _empty(unreleased):
            new.state = UNRELEASED
            new.assigned = _union(kept, _minus(to_assign, unreleased))
        else:
            new.state = STABLE
            new.assigned = _copy(target)
        new.epochs = _epochs(new, target_epoch)
        return new

    def _touch(self, g: ConsumerGroup, m: ConsumerMember, now_ms: int) -> None:
        session = self.group_settings(g.group_id).get(
            "consumer.session.timeout.ms", self.config.consumer_session_timeout_ms)
        if m.classic is not None:
            session = m.classic.session_timeout_ms
        self.timers.schedule(("csession", g.group_id, m.member_id), now_ms + session)
        key = ("crevoke", g.group_id, m.member_id)
        if m.state == UNREVOKED and m.classic is None:
            if key not in self.timers:
                self.timers.schedule(key, now_ms + max(m.rebalance_timeout_ms, 0))
        else:
            self.timers.cancel(key)

    def _cancel_timers(self, gid: str, mid: str) -> None:
        for kind in ("csession", "crevoke", "cjoin", "csync"):
            self.timers.cancel((kind, gid, mid))

    # =====================================================================================
    # the shared core of a member's update (ConsumerGroupHeartbeat and classic JoinGroup)
    # =====================================================================================
    def _update(
        self, g: ConsumerGroup, old: ConsumerMember | None, m: ConsumerMember,
        members: dict[str, ConsumerMember], targets: dict[str, Assignment], records: Records,
        owned: Assignment | None, new_group: bool, regex_resolved: bool, now_ms: int,
    ) -> tuple[ConsumerMember, ConsumerMember]:
        """Persist ``m``'s metadata, bump the group epoch when needed, compute the target
        when due and reconcile; returns (member before reconciliation, after)."""
        gid = g.group_id
        if old is None or _differs(old, m, METADATA_FIELDS):
            records.append(self._member_record(gid, m))
        members[m.member_id] = m
        names_changed = (old.subscribed_topic_names if old is not None else []) != m.subscribed_topic_names
        group_epoch = max(g.group_epoch, INITIAL_EPOCH)
        assignment_epoch = max(g.assignment_epoch, INITIAL_EPOCH)
        mhash = self._hash(g, members)
        if names_changed or regex_resolved or mhash != g.metadata_hash:
            group_epoch += 1
            records.append(self._epoch_record(gid, group_epoch, mhash))
        elif new_group:
            records.append(self._epoch_record(gid, group_epoch, mhash))
        target_epoch, target = assignment_epoch, targets
        if group_epoch > assignment_epoch and self._can_assign(g, now_ms):
            trecords, target = self._compute_target(g, members, targets, group_epoch, now_ms)
            records += trecords
            target_epoch = group_epoch
        elif new_group:
            records.append(self._target_metadata_record(gid, INITIAL_EPOCH, 0))
        others: Assignment = {}
        for mid, x in members.items():
            if mid != m.member_id:
                others = _union(others, _union(x.assigned, x.pending_revocation))
        new = self.reconcile(m, target_epoch, target.get(m.member_id, {}), owned, others)
        if old is None or _differs(old, new, ASSIGNMENT_FIELDS):
            records.append(self._current_record(gid, new))
        return m, new

    def _group_for_join(self, gid: str, create: bool, group: ConsumerGroup | None) -> tuple[ConsumerGroup, bool]:
        if group is not None:
            return group, False
        g = self.groups.get(gid)
        if g is not None:
            return g, False
        if not create:
            raise GroupOpError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {gid} not found.")
        return ConsumerGroup(gid), True

    def _check_full(self, g: ConsumerGroup, member_id: str) -> None:
        cap = self.config.consumer_max_size
        if len(g.members) >= cap and (not member_id or member_id not in g.members):
            raise GroupOpError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                               f"The consumer group has reached its maximum capacity of {cap} members.")

    @staticmethod
    def _check_epoch(m: ConsumerMember, epoch: int, owned: Assignment | None) -> None:
        if epoch > m.member_epoch:
            raise GroupOpError(ErrorCode.FENCED_MEMBER_EPOCH,
                               f"The consumer group member has a greater member epoch ({epoch}) than the one "
                               f"known by the group coordinator ({m.member_epoch}). The member must abandon "
                               "all its partitions and rejoin.")
        if epoch < m.member_epoch and (
            epoch != m.previous_member_epoch or owned is None or not _empty(_minus(owned, m.assigned))
        ):
            raise GroupOpError(ErrorCode.FENCED_MEMBER_EPOCH,
                               f"The consumer group member has a smaller member epoch ({epoch}) than the one "
                               f"known by the group coordinator ({m.member_epoch}). The member must abandon "
                               "all its partitions and rejoin.")

    @staticmethod
    def _unknown_member(g: ConsumerGroup, member_id: str) -> GroupOpError:
        return GroupOpError(ErrorCode.UNKNOWN_MEMBER_ID,
                            f"Member {member_id} is not a member of group {g.group_id}.")

    @staticmethod
    def _check_instance(m: ConsumerMember | None, member_id: str, instance_id: str) -> ConsumerMember:
        if m is None:
            raise GroupOpError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if m.member_id != member_id:
            raise GroupOpError(ErrorCode.FENCED_INSTANCE_ID,
                               f"Static member {member_id} with instance id {instance_id} was fenced by "
                               f"member {m.member_id}.")
        return m

    def _replace_static(
        self, g: ConsumerGroup, old: ConsumerMember, member_id: str,
        members: dict[str, ConsumerMember], targets: dict[str, Assignment], records: Records,
    ) -> ConsumerMember:
        """Kafka's replaceMember: the new member id takes the old one's place, assignment and
        target (no rebalance). The old member's timers are left to find it gone."""
        new = old.copy(member_id=member_id, member_epoch=0, previous_member_epoch=0)
        records += self._removal_records(g.group_id, old.member_id)
        records.append(self._member_record(g.group_id, new))
        target = targets.pop(old.member_id, {})
        targets[member_id] = target
        records.append(self._target_record(g.group_id, member_id, target))
        records.append(self._current_record(g.group_id, new))
        del members[old.member_id]
        members[member_id] = new
        return new

    # =====================================================================================
    # ConsumerGroupHeartbeat
    # =====================================================================================
    def heartbeat(
        self, req: ConsumerGroupHeartbeatRequest, version: int, client_id: str, client_host: str,
        new_member_id: str, now_ms: int, group: ConsumerGroup | None = None,
    ) -> tuple[Records, ConsumerGroupHeartbeatResponse]:
        """``group``: a group converted from a classic one in this same operation (its
        records precede ours), else the group of that id is looked up or created."""
        try:
            return self._heartbeat(req, version, client_id, client_host, new_member_id, now_ms, group)
        except GroupOpError as e:
            return [], ConsumerGroupHeartbeatResponse(error_code=e.code, error_message=e.message)

    @staticmethod
    def validate_heartbeat(req: ConsumerGroupHeartbeatRequest, version: int) -> None:
        epoch = req.member_epoch
        if not req.group_id:
            raise GroupOpError(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
        if req.instance_id is not None and not req.instance_id:
            raise GroupOpError(ErrorCode.INVALID_REQUEST, "InstanceId can't be empty.")
        if req.rack_id is not None and not req.rack_id:
            raise GroupOpError(ErrorCode.INVALID_REQUEST, "RackId can't be empty.")
        if epoch == 0:
            if version >= 1 and not req.member_id:
                raise GroupOpError(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
            if req.rebalance_timeout_ms == -1:
                raise GroupOpError(ErrorCode.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
            if req.topic_partitions is None or req.topic_partitions:
                raise GroupOpError(ErrorCode.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.")
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                raise GroupOpError(ErrorCode.INVALID_REQUEST,
                                   "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        elif epoch < STATIC_LEAVE_EPOCH:
            raise GroupOpError(ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid.")
        elif not req.member_id:
            raise GroupOpError(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
        if epoch == STATIC_LEAVE_EPOCH and req.instance_id is None:
            raise GroupOpError(ErrorCode.INVALID_REQUEST, "InstanceId can't be null.")

    def _heartbeat(
        self, req: ConsumerGroupHeartbeatRequest, version: int, client_id: str, client_host: str,
        new_member_id: str, now_ms: int, group: ConsumerGroup | None,
    ) -> tuple[Records, ConsumerGroupHeartbeatResponse]:
        self.validate_heartbeat(req, version)
        cfg = self.config
        if req.server_assignor is not None and req.server_assignor not in cfg.consumer_assignors:
            raise GroupOpError(ErrorCode.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {req.server_assignor} is not supported.")
        if req.subscribed_topic_regex is not None and compile_regex(req.subscribed_topic_regex) is None:
            raise GroupOpError(ErrorCode.INVALID_REGULAR_EXPRESSION,
                               f"SubscribedTopicRegex `{req.subscribed_topic_regex}` is not a valid regular expression.")
        gid, epoch = req.group_id, req.member_epoch
        member_id = req.member_id or new_member_id
        if epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(gid, member_id, req.instance_id, epoch, now_ms)
        g, new_group = self._group_for_join(gid, epoch == 0, group)
        self._check_full(g, req.member_id)
        owned = None if req.topic_partitions is None else _from_wire(req.topic_partitions)
        members = dict(g.members)
        targets = dict(g.target)
        records: Records = []
        if req.instance_id is None:
            old = g.members.get(member_id)
            if old is None and epoch != 0:
                raise self._unknown_member(g, member_id)
        else:
            existing = g.static_member(req.instance_id)
            if epoch != 0:
                old = self._check_instance(existing, member_id, req.instance_id)
            elif existing is None:
                old = g.members.get(member_id)
            elif existing.member_epoch != STATIC_LEAVE_EPOCH:
                raise GroupOpError(
                    ErrorCode.UNRELEASED_INSTANCE_ID,
                    f"Static member {member_id} with instance id {req.instance_id} cannot join the "
                    f"group because the instance id is owned by {existing.member_id} member.")
            elif existing.member_id == member_id:
                old = existing.copy(member_epoch=0, previous_member_epoch=0)
            else:
                old = self._replace_static(g, existing, member_id, members, targets, records)
        if old is not None and epoch != 0:
            self._check_epoch(old, epoch, owned)
        # the member's new metadata
        if old is None:
            m = ConsumerMember(member_id)
        elif epoch == 0 and old.member_epoch != 0:
            # rejoining with epoch 0: a fresh start
            m = old.copy(member_epoch=0, assigned={}, pending_revocation={}, state=STABLE, epochs={})
        else:
            m = old.copy()
        m.client_id, m.client_host, m.classic = client_id, client_host, None
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
        _updated, regex_resolved = self._maybe_update_regexes(g, old, m, records, now_ms)
        before, new = self._update(g, old, m, members, targets, records, owned, new_group, regex_resolved,
                                   now_ms)
        self._touch(g, new, now_ms)
        resp = ConsumerGroupHeartbeatResponse(
            member_id=member_id, member_epoch=new.member_epoch,
            heartbeat_interval_ms=self.group_settings(gid).get(
                "consumer.heartbeat.interval.ms", cfg.consumer_heartbeat_interval_ms),
        )
        full = req.rebalance_timeout_ms != -1 and (
            req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None
        ) and req.topic_partitions is not None
        if epoch == 0 or full or before.assigned != new.assigned or old is None:
            resp.assignment = ConsumerGroupHeartbeatResponse.Assignment(
                topic_partitions=self._wire(new.assigned, ConsumerGroupHeartbeatResponse.TopicPartitions))
        else:
            resp.assignment = None
        return records, resp

    def _leave(self, gid: str, member_id: str, instance_id: str | None, epoch: int,
               now_ms: int) -> tuple[Records, ConsumerGroupHeartbeatResponse]:
        g = self.groups.get(gid)
        if g is None:
            raise GroupOpError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} not found.")
        if instance_id is None:
            m = g.members.get(member_id)
            if m is None:
                raise self._unknown_member(g, member_id)
        else:
            m = self._check_instance(g.static_member(instance_id), member_id, instance_id)
        resp = ConsumerGroupHeartbeatResponse(member_id=member_id, member_epoch=epoch, heartbeat_interval_ms=0)
        if epoch == STATIC_LEAVE_EPOCH and instance_id is not None:
            # the static member keeps its place (and its session timer) for its return
            self.timers.cancel(("crevoke", gid, m.member_id))
            # KIP-1251: what it keeps is held from epoch 0 (resetAssignedPartitionsEpochsToZero)
            left = m.copy(member_epoch=STATIC_LEAVE_EPOCH, pending_revocation={})
            left.epochs = _epochs(left.copy(epochs={}), 0)
            return [self._current_record(gid, left)], resp
        return self.fence(g, [m.member_id], now_ms), resp

    def fence(self, g: ConsumerGroup, member_ids: list[str], now_ms: int) -> Records:
        """Remove members (left, expired, fenced) and bump the group epoch; or, when only
        classic members would remain, the shard's downgrade to a classic group."""
        for mid in member_ids:
            self._cancel_timers(g.group_id, mid)
        if self.fence_hook is not None:
            converted = self.fence_hook(g, member_ids, now_ms)
            if converted is not None:
                return converted
        records: Records = []
        members = dict(g.members)
        for mid in member_ids:
            records += self._removal_records(g.group_id, mid)
            members.pop(mid, None)
        records.append(self._epoch_record(g.group_id, g.group_epoch + 1, self._hash(g, members)))
        return records

    def on_timer(self, key: tuple[Any, ...], now_ms: int) -> Records:
        kind, gid = key[0], key[1]
        g = self.groups.get(gid)
        if g is None:
            return []
        if kind == "cregex":
            return self._resolve_regexes(g, now_ms)
        m = g.members.get(key[2])
        if m is None:
            return []
        if kind == "crevoke" and m.state != UNREVOKED:
            return []
        if kind in ("cjoin", "csync") and m.classic is None:
            return []
        return self.fence(g, [m.member_id], now_ms)

    # =====================================================================================
    # regular expressions
    # =====================================================================================
    def _maybe_update_regexes(
        self, g: ConsumerGroup, old: ConsumerMember | None, m: ConsumerMember, records: Records,
        now_ms: int,
    ) -> tuple[bool, bool]:
        """Kafka's maybeUpdateRegularExpressions: (regex changed, changed to a regex already
        resolved). Schedules a resolution when one is due."""
        old_rx = old.subscribed_topic_regex if old is not None else None
        new_rx = m.subscribed_topic_regex
        counts = g.regex_counts()
        updated = resolved = require = False
        if old_rx != new_rx:
            updated = True
            if old_rx and counts.get(old_rx, 0) == 1 and old_rx in g.regexes:
                records.append(self._regex_record(g.group_id, old_rx, None))
            if new_rx:
                if counts.get(new_rx, 0) == 0:
                    require = True
                elif new_rx in g.regexes:
                    resolved = True
        after = dict(counts)
        if old_rx:
            after[old_rx] = after.get(old_rx, 0) - 1
        if new_rx:
            after[new_rx] = after.get(new_rx, 0) + 1
        wanted = {rx for rx, n in after.items() if n > 0}
        if not wanted:
            return updated, resolved
        key = ("cregex", g.group_id)
        if key in self.timers:
            return updated, resolved
        if counts and now_ms <= g.last_regex_refresh_ms + REGEX_REFRESH_MIN_INTERVAL_MS:
            return updated, resolved
        require = require or any(rx not in g.regexes for rx in wanted)
        require = require or g.last_regex_version < self.new_topics_version
        require = require or now_ms >= g.last_regex_refresh_ms + REGEX_REFRESH_MAX_INTERVAL_MS
        if require:
            self.timers.schedule(key, now_ms)
        return updated, resolved

    def _resolve_regexes(self, g: ConsumerGroup, now_ms: int) -> Records:
        """The asynchronous part: resolve the group's regexes against the current topics,
        persist them, bump the group epoch when a resolution changed."""
        wanted = sorted(g.regex_counts())
        records: Records = []
        changed = False
        names = sorted(self.topics)
        for rx in wanted:
            pattern = compile_regex(rx)
            topics = frozenset(n for n in names if pattern is not None and pattern.fullmatch(n))
            old = g.regexes.get(rx)
            if old is None or old.topics != topics:
                changed = True
            records.append(self._regex_record(g.group_id, rx, ResolvedRegex(topics, self.metadata_version, now_ms)))
        for rx in sorted(set(g.regexes) - set(wanted)):
            records.append(self._regex_record(g.group_id, rx, None))
        if changed and g.group_epoch <= g.assignment_epoch:
            resolved = dict(g.regexes)
            for rx in wanted:
                pattern = compile_regex(rx)
                resolved[rx] = ResolvedRegex(
                    frozenset(n for n in names if pattern is not None and pattern.fullmatch(n)), 0, 0)
            view = ConsumerGroup(g.group_id, regexes=resolved)
            records.append(self._epoch_record(g.group_id, g.group_epoch + 1, self._hash(view, g.members)))
        return records

    # =====================================================================================
    # classic members in a consumer group (JoinGroup / SyncGroup / Heartbeat / LeaveGroup)
    # =====================================================================================
    def supports_classic(self, g: ConsumerGroup, protocol_type: str, names: list[str]) -> bool:
        """Kafka's supportsClassicProtocols: the type is "consumer" and one of the protocols is
        supported by every classic member."""
        if not g.members:
            return bool(protocol_type) and bool(names)
        if protocol_type != PROTOCOL_TYPE:
            return False
        classic = g.classic_members()
        return any(all(n in c.classic.protocol_names for c in classic if c.classic) for n in names)

    def _topic_ids(self, by_name: dict[str, list[int]]) -> Assignment:
        out: Assignment = {}
        for name, parts in by_name.items():
            t = self.topics.get(name)
            if t is not None and parts:
                out.setdefault(t[0], set()).update(parts)
        return out

    def assignment_bytes(self, a: Assignment, subscription: bytes) -> bytes:
        """A ConsumerProtocolAssignment of ``a`` at the version of the member's subscription."""
        by_id = {tid: name for name, (tid, _n) in self.topics.items()}
        by_name = {by_id[t]: sorted(p) for t, p in a.items() if t in by_id and p}
        sub = parse_subscription(subscription)
        return encode_assignment(by_name, sub.version if sub is not None else 0)

    def classic_join(
        self, g: ConsumerGroup, req: JoinGroupRequest, version: int, client_id: str, client_host: str,
        now_ms: int,
    ) -> tuple[Records, JoinGroupResponse]:
        member_id = req.member_id
        unknown = member_id == ""
        if unknown:
            member_id = self.id_factory()
        self._check_full(g, "" if unknown else member_id)
        protocols = tuple((p.name, bytes(p.metadata)) for p in req.protocols)
        if not self.supports_classic(g, req.protocol_type, [n for n, _ in protocols]):
            raise GroupOpError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"Member {member_id}'s protocols are not supported.")
        if self.config.migration_policy == "disabled":
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
        members = dict(g.members)
        targets = dict(g.target)
        records: Records = []
        old: ConsumerMember | None
        replaced: ConsumerMember | None = None
        if instance is None:
            old = g.members.get(member_id)
        else:
            existing = g.static_member(instance)
            if unknown:
                replaced = existing
                old = None if existing is None else self._replace_static(
                    g, existing, member_id, members, targets, records)
            else:
                old = self._check_instance(existing, member_id, instance)
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
        _before, new = self._update(g, old, m, members, targets, records, self._topic_ids(sub.owned),
                                    False, False, now_ms)
        gid = g.group_id
        if replaced is not None and replaced.classic is None and self.replace_hook is not None and all(
            x.classic is not None for x in members.values()
        ):
            # Kafka 4.3: the classic static member replaced the last consumer-protocol member:
            # the group goes back to classic at once (validateOnlineDowngradeWithReplacedMember);
            # with the target it had when the join changed the group epoch (stale), rebalancing
            stale = self._group_epoch_after(g, records) > g.assignment_epoch
            members[member_id] = new
            converted = self.replace_hook(g, members, target_before if stale else targets, stale, now_ms)
            if converted is not None:
                self._cancel_timers(gid, member_id)
                return records + converted, JoinGroupResponse(
                    error_code=ErrorCode.NONE, generation_id=new.member_epoch if not stale else 0,
                    protocol_type=PROTOCOL_TYPE, protocol_name=protocols[0][0], leader="",
                    skip_assignment=False, member_id=member_id, members=[])
        self.timers.cancel(("cjoin", gid, member_id))
        self._touch(g, new, now_ms)
        self.timers.schedule(("csync", gid, member_id), now_ms + rebalance_timeout)
        return records, JoinGroupResponse(
            error_code=ErrorCode.NONE, generation_id=new.member_epoch, protocol_type=PROTOCOL_TYPE,
            protocol_name=protocols[0][0], leader="", skip_assignment=False, member_id=member_id,
            members=[])

    @staticmethod
    def _group_epoch_after(g: ConsumerGroup, records: Records) -> int:
        """The group epoch once ``records`` (of group ``g``) are replayed."""
        epoch = g.group_epoch
        for r in records:
            if r.value is not None and record_type(r.key) == GROUP_METADATA:
                epoch = decode_value(ConsumerGroupMetadataValue, r.value)[1].epoch
        return epoch

    def _classic_member(self, g: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerMember:
        if instance_id is None:
            m = g.members.get(member_id)
            if m is None:
                raise self._unknown_member(g, member_id)
        else:
            m = self._check_instance(g.static_member(instance_id), member_id, instance_id)
        if m.classic is None:
            raise GroupOpError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {m.member_id} does not use the classic protocol.")
        return m

    def _rejoin_needed(self, g: ConsumerGroup, m: ConsumerMember, now_ms: int) -> None:
        key = ("cjoin", g.group_id, m.member_id)
        if key not in self.timers:
            self.timers.schedule(key, now_ms + max(m.rebalance_timeout_ms, 0))

    def classic_sync(self, g: ConsumerGroup, req: SyncGroupRequest, now_ms: int) -> SyncGroupResponse:
        m = self._classic_member(g, req.member_id, req.group_instance_id)
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
        if g.assignment_epoch > m.member_epoch and m.state != UNREVOKED:
            self._rejoin_needed(g, m, now_ms)
            raise GroupOpError(ErrorCode.REBALANCE_IN_PROGRESS,
                               f"A new rebalance is triggered in group {g.group_id} and member "
                               f"{m.member_id} should rejoin to catch up.")
        self.timers.cancel(("csync", g.group_id, m.member_id))
        self._touch(g, m, now_ms)
        meta = m.classic.protocols[0][1] if m.classic.protocols else b""
        return SyncGroupResponse(
            error_code=ErrorCode.NONE, protocol_type=req.protocol_type, protocol_name=req.protocol_name,
            assignment=self.assignment_bytes(m.assigned, meta))

    def classic_heartbeat(self, g: ConsumerGroup, req: HeartbeatRequest, now_ms: int) -> ErrorCode:
        m = self._classic_member(g, req.member_id, req.group_instance_id)
        if req.generation_id != m.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION
        self._touch(g, m, now_ms)
        if m.member_epoch < g.assignment_epoch or m.state == UNREVOKED or (
            m.state == UNRELEASED and not self._waiting_on_unreleased(g, m)
        ):
            self._rejoin_needed(g, m, now_ms)
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    @staticmethod
    def _waiting_on_unreleased(g: ConsumerGroup, m: ConsumerMember) -> bool:
        pending = _minus(g.target.get(m.member_id, {}), m.assigned)
        for mid, x in g.members.items():
            if mid != m.member_id and not _empty(_inter(pending, _union(x.assigned, x.pending_revocation))):
                return True
        return False

    def classic_leave(
        self, g: ConsumerGroup, identities: list[LeaveGroupRequest.MemberIdentity], now_ms: int,
    ) -> tuple[Records, list[LeaveGroupResponse.MemberResponse]]:
        out = []
        leaving: list[str] = []
        for ident in identities:
            mid, iid = ident.member_id, ident.group_instance_id
            try:
                if iid is None:
                    m = g.members.get(mid)
                    if m is None:
                        raise self._unknown_member(g, mid)
                    if m.classic is None:
                        raise GroupOpError(ErrorCode.UNKNOWN_MEMBER_ID)
                else:
                    found = g.static_member(iid)
                    if found is None:
                        raise GroupOpError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {iid} is unknown.")
                    if mid:  # an admin removal names the instance only
                        m = self._check_instance(found, mid, iid)
                        if m.classic is None:
                            raise GroupOpError(ErrorCode.UNKNOWN_MEMBER_ID)
                    m = found
                if m.member_id not in leaving:
                    leaving.append(m.member_id)
                out.append(LeaveGroupResponse.MemberResponse(member_id=m.member_id, group_instance_id=iid))
            except GroupOpError as e:
                out.append(LeaveGroupResponse.MemberResponse(member_id=mid, group_instance_id=iid, error_code=e.code))
        records = self.fence(g, leaving, now_ms) if leaving else []
        return records, out

    # =====================================================================================
    # conversion from a classic group (the shard calls it for an online upgrade)
    # =====================================================================================
    def from_classic(
        self, gid: str, generation: int,
        members: list[tuple[str, str | None, str, str, int, int, tuple[tuple[str, bytes], ...], bytes, bytes]],
        now_ms: int,
    ) -> tuple[Records, ConsumerGroup]:
        """A consumer group holding a classic group's members at its generation: each
        (member id, instance id, client id, host, rebalance timeout, session timeout,
        protocols, subscription of the group's protocol, assignment). Raises GroupOpError
        when a subscription is malformed."""
        from groups.consumer_protocol import ArrayTooLong, parse_assignment

        malformed = GroupOpError(
            ErrorCode.GROUP_ID_NOT_FOUND,
            f"Cannot upgrade classic group {gid} to consumer group because the embedded consumer "
            "protocol is malformed.")
        g = ConsumerGroup(gid, group_epoch=generation, assignment_epoch=generation)
        for mid, iid, cid, host, rebalance, session, protocols, meta, assignment in members:
            by_name: dict[str, list[int]] = {}
            if assignment:
                try:
                    by_name, user_data = parse_assignment(assignment)
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
            parts = self._topic_ids(by_name)
            m = ConsumerMember(
                mid, instance_id=iid, rack_id=sub.rack_id, client_id=cid, client_host=host,
                subscribed_topic_names=sorted(set(sub.topics)), rebalance_timeout_ms=rebalance,
                classic=ClassicMeta(session, protocols), member_epoch=generation,
                previous_member_epoch=generation, state=STABLE, assigned=parts,
            )
            m.epochs = _epochs(m, generation)
            g.members[mid] = m
            g.target[mid] = _copy(parts)
        g.metadata_hash = self._hash(g, g.members)
        for m in g.members.values():
            self._touch(g, m, now_ms)
        return self.group_records(g), g

    # =====================================================================================
    # offsets, describe, list, delete
    # =====================================================================================
    def validate_commit(self, g: ConsumerGroup, member_id: str, epoch: int, api_version: int,
                        transactional: bool, partitions: list[tuple[str, int]] | None = None) -> ErrorCode:
        """Kafka 4.3's ConsumerGroup.validateOffsetCommit with KIP-1251's assignment epochs:
        the member's epoch commits anything; a newer one is refused; an older one (a commit
        sent before the heartbeat response that bumped the epoch arrived) commits only
        partitions the member holds (assigned or pending revocation) since that epoch or
        earlier, and one partition refused refuses the whole request, as Kafka's validator
        throws. ``partitions``: (topic name, partition) of the commit."""
        if epoch < 0 and not g.members:
            return ErrorCode.NONE
        m = g.members.get(member_id)
        if m is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if not transactional and m.classic is None and 0 <= api_version < 9:
            return ErrorCode.UNSUPPORTED_VERSION
        if epoch == m.member_epoch:
            return ErrorCode.NONE
        # a transactional commit's STALE_MEMBER_EPOCH is ILLEGAL_GENERATION
        # (GroupCoordinatorShard.validateTransactionalOffsetCommit)
        refused = ErrorCode.ILLEGAL_GENERATION if m.classic is not None or transactional else (
            ErrorCode.STALE_MEMBER_EPOCH)
        if epoch > m.member_epoch:
            return refused
        for name, p in partitions or []:
            t = self.topics.get(name)
            assigned_at = None if t is None else m.epochs.get((t[0], p))
            if assigned_at is None or epoch < assigned_at:
                return refused
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
                subscribed_topic_regex=m.subscribed_topic_regex or "",
                assignment=wire(_union(m.assigned, m.pending_revocation)),
                target_assignment=wire(g.target.get(m.member_id, {})),
                member_type=0 if m.classic is not None else 1,
            )
            for m in g.members.values()
        ]
        return ConsumerGroupDescribeResponse.DescribedGroup(
            error_code=ErrorCode.NONE, group_id=gid, group_state=g.state(),
            group_epoch=g.group_epoch,
            assignment_epoch=g.assignment_epoch, assignor_name=self._assignor(g.members), members=members,
        )

    def subscribed_topics(self, g: ConsumerGroup) -> set[str]:
        out: set[str] = set()
        for m in g.members.values():
            out |= set(m.subscribed_topic_names)
            if m.subscribed_topic_regex:
                r = g.regexes.get(m.subscribed_topic_regex)
                if r is not None:
                    out |= r.topics
        return out

