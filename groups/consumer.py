"""The KIP-848 consumer protocol: ConsumerGroupHeartbeat (join, reconcile, leave, static members),
ConsumerGroupDescribe, the member timers, and what offsets and admin requests ask of consumer
groups. The model is ``groups/consumer_group.py``; reconciliation ``groups/reconcile.py``; the
target assignment ``groups/target.py``; regexes ``groups/regexes.py``; classic members of a
consumer group ``groups/consumer_classic.py``; conversions ``groups/migration.py``.

State lives in Kafka's consumer-group coordinator records and ONLY replay
(``groups/replay.py``) changes it (as in Kafka, these records are replayed on the live path too):
ConsumerGroupMetadata (the group epoch, bumped on every membership, subscription or
subscribed-metadata change, and a hash of the subscribed topics' metadata); a member's
ConsumerGroupMemberMetadata (subscription, client, rack, rebalance timeout, server assignor, and
for a member speaking the classic protocol its ClassicMemberMetadata); the target assignment
(metadata: its epoch and time; one record per member); ConsumerGroupCurrentMemberAssignment
(member epoch, previous epoch, state, assigned partitions, partitions pending revocation); the
resolved regexes.

Epochs (Kafka 4.3): a new group starts at epoch 1 with an empty target at epoch 1; the first
member bumps it to 2. A change bumps the group epoch; the target assignment is recomputed when
the group epoch is ahead of it, at most once per ``group.consumer.assignment.interval.ms``
(Kafka's assignment batching; the group is "Assigning" meanwhile) and at the next heartbeat (no
timer). A member leaving or fenced bumps the group epoch without recomputing at once. A
heartbeat carrying another epoch than the member's is FENCED_MEMBER_EPOCH, unless it is the
previous epoch and the member owns a subset of its partitions (a lost response). Members are
fenced when their session expires or when they do not revoke within their rebalance timeout.

Static members (``instance_id``): leaving with epoch -2 keeps the member, its assignment and its
session timer (the group does not rebalance); a new member id with the same instance id and
epoch 0 then replaces it and gets the same partitions back without a group epoch bump. While
the instance is held by an active member a join is UNRELEASED_INSTANCE_ID; a heartbeat for the
instance from another member id is FENCED_INSTANCE_ID.

Assignment epochs (KIP-1251, Kafka 4.3): every partition a member holds, assigned or pending
revocation, carries the epoch at which it was assigned to the member (the target's epoch when it
came; kept partitions keep theirs; 0 after a static leave; the generation after an upgrade),
persisted as the AssignmentEpochs of the ConsumerGroupCurrentMemberAssignment record.
``validate_commit`` accepts an OffsetCommit with an epoch older than the member's for partitions
held since that epoch or earlier, so a commit crossing the heartbeat response that bumped the
epoch is not fenced.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from groups.assignors import Assignment
from groups.config import GroupConfig
from groups.consumer_group import (
    ASSIGNMENT_FIELDS,
    INITIAL_EPOCH,
    LEAVE_EPOCH,
    METADATA_FIELDS,
    STATIC_LEAVE_EPOCH,
    ConsumerGroup,
    ConsumerMember,
    GroupOpError,
    TopicsView,
    differs,
    from_wire,
    held_epochs,
    is_empty,
    minus,
    union,
)
from groups.group_type import Expiry
from groups.reconcile import owned_by_others, reconcile
from groups.records import (
    Records,
    consumer_group_tombstones,
    current_record,
    epoch_record,
    member_record,
    removal_records,
    target_metadata_record,
    target_record,
    wire_partitions,
)
from groups.regexes import REGEX_TIMER, compile_regex, maybe_update_regexes, resolve_regexes
from groups.states import MemberEvent, MemberState
from groups.target import choose_assignor, compute_target, metadata_hash, subscribed_topics
from groups.timers import Timers
from protocol._generated.consumer_group_describe_response import ConsumerGroupDescribeResponse
from protocol._generated.consumer_group_heartbeat_request import ConsumerGroupHeartbeatRequest
from protocol._generated.consumer_group_heartbeat_response import ConsumerGroupHeartbeatResponse
from protocol._generated.list_groups_response import ListGroupsResponse
from protocol.errors import ErrorCode

#: member timers: (kind, group id, member id); REGEX_TIMER: (kind, group id)
SESSION_TIMER, REVOKE_TIMER, CLASSIC_JOIN_TIMER, CLASSIC_SYNC_TIMER = "csession", "crevoke", "cjoin", "csync"
MEMBER_TIMERS = (SESSION_TIMER, REVOKE_TIMER, CLASSIC_JOIN_TIMER, CLASSIC_SYNC_TIMER)


def validate_heartbeat(req: ConsumerGroupHeartbeatRequest, version: int) -> None:
    """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid (INVALID_REQUEST)."""
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


def unknown_member(g: ConsumerGroup, member_id: str) -> GroupOpError:
    return GroupOpError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {g.group_id}.")


def check_instance(m: ConsumerMember | None, member_id: str, instance_id: str) -> ConsumerMember:
    if m is None:
        raise GroupOpError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
    if m.member_id != member_id:
        raise GroupOpError(ErrorCode.FENCED_INSTANCE_ID,
                           f"Static member {member_id} with instance id {instance_id} was fenced by "
                           f"member {m.member_id}.")
    return m


def check_epoch(m: ConsumerMember, epoch: int, owned: Assignment | None) -> None:
    if epoch > m.member_epoch:
        raise GroupOpError(ErrorCode.FENCED_MEMBER_EPOCH,
                           f"The consumer group member has a greater member epoch ({epoch}) than the one "
                           f"known by the group coordinator ({m.member_epoch}). The member must abandon "
                           "all its partitions and rejoin.")
    if epoch < m.member_epoch and (
        epoch != m.previous_member_epoch or owned is None or not is_empty(minus(owned, m.assigned))
    ):
        raise GroupOpError(ErrorCode.FENCED_MEMBER_EPOCH,
                           f"The consumer group member has a smaller member epoch ({epoch}) than the one "
                           f"known by the group coordinator ({m.member_epoch}). The member must abandon "
                           "all its partitions and rejoin.")


def with_request(m: ConsumerMember, req: ConsumerGroupHeartbeatRequest, client_id: str,
                 client_host: str) -> ConsumerMember:
    """``m`` with what the heartbeat sets (a field the request leaves null is kept)."""
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
    return m


class ConsumerGroups:
    """The KIP-848 groups of one shard (a group type of ``groups/group_type.py``)."""

    type_name = "consumer"
    timer_kinds = frozenset({*MEMBER_TIMERS, REGEX_TIMER})

    def __init__(self, config: GroupConfig, timers: Timers) -> None:
        self.config = config
        #: a group's dynamic settings (its group configs: ``consumer.session.timeout.ms``,
        #: ``consumer.heartbeat.interval.ms``, ``consumer.assignment.interval.ms``), read at
        #: each heartbeat as Kafka does; missing keys fall back to ``config``
        self.group_settings: Callable[[str], Mapping[str, int]] = lambda _gid: {}
        self.timers = timers
        #: written by replay only (``groups/replay.py``)
        self.groups: dict[str, ConsumerGroup] = {}
        #: the latest metadata (``update_topics``; heartbeats pass theirs too)
        self.topics: TopicsView = {}
        self.metadata_version = -1
        #: the metadata version at which topics were last created (regexes resolve again)
        self.new_topics_version = -1
        #: member ids for classic members joining a consumer group
        self.id_factory: Callable[[], str] = lambda: str(uuid.uuid4())
        #: called before members are fenced: returns the records of a conversion to a
        #: classic group when that applies (the downgrade, ``groups/migration.py``), else None
        self.fence_hook: Callable[[ConsumerGroup, list[str], int], Records | None] | None = None

    def update_topics(self, topics: TopicsView, version: int) -> None:
        if version >= 0 and version < self.metadata_version:
            return
        old = self.topics
        if any(old.get(name, (None, 0))[0] != tid for name, (tid, _n) in topics.items()):
            self.new_topics_version = max(version, self.new_topics_version + 1)
        self.topics = topics
        if version >= 0:
            self.metadata_version = version

    def setting(self, group_id: str, key: str, default: int) -> int:
        return self.group_settings(group_id).get(key, default)

    # =====================================================================================
    # the runtime's hooks (the shard routes them here)
    # =====================================================================================
    def has(self, group_id: str) -> bool:
        return group_id in self.groups

    def group_ids(self) -> Iterable[str]:
        return self.groups.keys()

    def on_loaded(self, now_ms: int) -> None:
        for g in self.groups.values():
            for m in g.members.values():
                self.touch(g, m, now_ms)

    def on_unloaded(self, now_ms: int) -> None:
        pass

    def on_timer(self, key: tuple[Any, ...], now_ms: int) -> Records:
        kind, gid = key[0], key[1]
        g = self.groups.get(gid)
        if g is None:
            return []
        if kind == REGEX_TIMER:
            return resolve_regexes(g, self.topics, self.metadata_version, now_ms)
        m = g.members.get(key[2])
        if m is None:
            return []
        if kind == REVOKE_TIMER and m.state != MemberState.UNREVOKED_PARTITIONS:
            return []
        if kind in (CLASSIC_JOIN_TIMER, CLASSIC_SYNC_TIMER) and m.classic is None:
            return []
        return self.fence(g, [m.member_id], now_ms)

    # =====================================================================================
    # member timers
    # =====================================================================================
    def touch(self, g: ConsumerGroup, m: ConsumerMember, now_ms: int) -> None:
        """The member is alive: its session restarts; its revocation deadline is armed while
        it must revoke (consumer-protocol members only)."""
        session = self.setting(g.group_id, "consumer.session.timeout.ms", self.config.consumer_session_timeout_ms)
        if m.classic is not None:
            session = m.classic.session_timeout_ms
        self.timers.schedule((SESSION_TIMER, g.group_id, m.member_id), now_ms + session)
        key = (REVOKE_TIMER, g.group_id, m.member_id)
        if m.state == MemberState.UNREVOKED_PARTITIONS and m.classic is None:
            if key not in self.timers:
                self.timers.schedule(key, now_ms + max(m.rebalance_timeout_ms, 0))
        else:
            self.timers.cancel(key)

    def cancel_timers(self, gid: str, mid: str) -> None:
        for kind in MEMBER_TIMERS:
            self.timers.cancel((kind, gid, mid))

    # =====================================================================================
    # the shared core of a member's update (ConsumerGroupHeartbeat and classic JoinGroup)
    # =====================================================================================
    def update(
        self, g: ConsumerGroup, old: ConsumerMember | None, m: ConsumerMember,
        members: dict[str, ConsumerMember], targets: dict[str, Assignment], records: Records,
        owned: Assignment | None, new_group: bool, regex_resolved: bool, now_ms: int,
    ) -> tuple[ConsumerMember, ConsumerMember]:
        """Persist ``m``'s metadata, bump the group epoch when needed, compute the target
        when due and reconcile; returns (member before reconciliation, after)."""
        gid = g.group_id
        if old is None or differs(old, m, METADATA_FIELDS):
            records.append(member_record(gid, m))
        members[m.member_id] = m
        names_changed = (old.subscribed_topic_names if old is not None else []) != m.subscribed_topic_names
        group_epoch = max(g.group_epoch, INITIAL_EPOCH)
        assignment_epoch = max(g.assignment_epoch, INITIAL_EPOCH)
        mhash = metadata_hash(g, members, self.topics)
        if names_changed or regex_resolved or mhash != g.metadata_hash:
            group_epoch += 1
            records.append(epoch_record(gid, group_epoch, mhash))
        elif new_group:
            records.append(epoch_record(gid, group_epoch, mhash))
        target_epoch, target = assignment_epoch, targets
        if group_epoch > assignment_epoch and self._can_assign(g, now_ms):
            trecords, target = compute_target(g, members, targets, group_epoch, now_ms, self.topics,
                                              self.config.consumer_assignors[0])
            records += trecords
            target_epoch = group_epoch
        elif new_group:
            records.append(target_metadata_record(gid, INITIAL_EPOCH, 0))
        new = reconcile(m, target_epoch, target.get(m.member_id, {}), owned,
                        owned_by_others(members, m.member_id))
        if old is None or differs(old, new, ASSIGNMENT_FIELDS):
            records.append(current_record(gid, new))
        return m, new

    def _can_assign(self, g: ConsumerGroup, now_ms: int) -> bool:
        interval = self.setting(g.group_id, "consumer.assignment.interval.ms",
                                self.config.consumer_assignment_interval_ms)
        return now_ms >= g.assignment_timestamp_ms + interval

    def group_for_join(self, gid: str, create: bool, group: ConsumerGroup | None) -> tuple[ConsumerGroup, bool]:
        if group is not None:
            return group, False
        g = self.groups.get(gid)
        if g is not None:
            return g, False
        if not create:
            raise GroupOpError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {gid} not found.")
        return ConsumerGroup(gid), True

    def check_full(self, g: ConsumerGroup, member_id: str) -> None:
        cap = self.config.consumer_max_size
        if len(g.members) >= cap and (not member_id or member_id not in g.members):
            raise GroupOpError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                               f"The consumer group has reached its maximum capacity of {cap} members.")

    def replace_static(
        self, g: ConsumerGroup, old: ConsumerMember, member_id: str,
        members: dict[str, ConsumerMember], targets: dict[str, Assignment], records: Records,
    ) -> ConsumerMember:
        """Kafka's replaceMember: the new member id takes the old one's place, assignment and
        target (no rebalance). The old member's timers are left to find it gone."""
        new = old.copy(member_id=member_id, member_epoch=0, previous_member_epoch=0)
        records += removal_records(g.group_id, old.member_id)
        records.append(member_record(g.group_id, new))
        target = targets.pop(old.member_id, {})
        targets[member_id] = target
        records.append(target_record(g.group_id, member_id, target))
        records.append(current_record(g.group_id, new))
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

    def _heartbeat(
        self, req: ConsumerGroupHeartbeatRequest, version: int, client_id: str, client_host: str,
        new_member_id: str, now_ms: int, group: ConsumerGroup | None,
    ) -> tuple[Records, ConsumerGroupHeartbeatResponse]:
        validate_heartbeat(req, version)
        if req.server_assignor is not None and req.server_assignor not in self.config.consumer_assignors:
            raise GroupOpError(ErrorCode.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {req.server_assignor} is not supported.")
        if req.subscribed_topic_regex is not None and compile_regex(req.subscribed_topic_regex) is None:
            raise GroupOpError(ErrorCode.INVALID_REGULAR_EXPRESSION,
                               f"SubscribedTopicRegex `{req.subscribed_topic_regex}` is not a valid regular expression.")
        gid, epoch = req.group_id, req.member_epoch
        member_id = req.member_id or new_member_id
        if epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(gid, member_id, req.instance_id, epoch, now_ms)
        g, new_group = self.group_for_join(gid, epoch == 0, group)
        self.check_full(g, req.member_id)
        owned = None if req.topic_partitions is None else from_wire(req.topic_partitions)
        members = dict(g.members)
        targets = dict(g.target)
        records: Records = []
        old = self._member_before(g, req, member_id, members, targets, records)
        if old is not None and epoch != 0:
            check_epoch(old, epoch, owned)
        if old is None:
            m = ConsumerMember(member_id)
        elif epoch == 0 and old.member_epoch != 0:
            # rejoining with epoch 0: a fresh start
            m = old.moved(MemberEvent.JOIN, member_epoch=0, assigned={}, pending_revocation={}, epochs={})
        else:
            m = old.copy()
        with_request(m, req, client_id, client_host)
        _updated, regex_resolved = maybe_update_regexes(g, old, m, records, now_ms, self.timers,
                                                        self.new_topics_version)
        before, new = self.update(g, old, m, members, targets, records, owned, new_group, regex_resolved,
                                  now_ms)
        self.touch(g, new, now_ms)
        return records, self._response(req, member_id, old, before, new)

    def _member_before(
        self, g: ConsumerGroup, req: ConsumerGroupHeartbeatRequest, member_id: str,
        members: dict[str, ConsumerMember], targets: dict[str, Assignment], records: Records,
    ) -> ConsumerMember | None:
        """The member as the group knows it before this heartbeat (None: a new member); a
        static member taking its instance back replaces the one that left."""
        epoch = req.member_epoch
        if req.instance_id is None:
            old = g.members.get(member_id)
            if old is None and epoch != 0:
                raise unknown_member(g, member_id)
            return old
        existing = g.static_member(req.instance_id)
        if epoch != 0:
            return check_instance(existing, member_id, req.instance_id)
        if existing is None:
            return g.members.get(member_id)
        if existing.member_epoch != STATIC_LEAVE_EPOCH:
            raise GroupOpError(
                ErrorCode.UNRELEASED_INSTANCE_ID,
                f"Static member {member_id} with instance id {req.instance_id} cannot join the "
                f"group because the instance id is owned by {existing.member_id} member.")
        if existing.member_id == member_id:
            return existing.copy(member_epoch=0, previous_member_epoch=0)
        return self.replace_static(g, existing, member_id, members, targets, records)

    def _response(
        self, req: ConsumerGroupHeartbeatRequest, member_id: str, old: ConsumerMember | None,
        before: ConsumerMember, new: ConsumerMember,
    ) -> ConsumerGroupHeartbeatResponse:
        resp = ConsumerGroupHeartbeatResponse(
            member_id=member_id, member_epoch=new.member_epoch,
            heartbeat_interval_ms=self.setting(req.group_id, "consumer.heartbeat.interval.ms",
                                               self.config.consumer_heartbeat_interval_ms),
        )
        full = req.rebalance_timeout_ms != -1 and (
            req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None
        ) and req.topic_partitions is not None
        if req.member_epoch == 0 or full or before.assigned != new.assigned or old is None:
            resp.assignment = ConsumerGroupHeartbeatResponse.Assignment(
                topic_partitions=wire_partitions(new.assigned, ConsumerGroupHeartbeatResponse.TopicPartitions))
        else:
            resp.assignment = None
        return resp

    def _leave(self, gid: str, member_id: str, instance_id: str | None, epoch: int,
               now_ms: int) -> tuple[Records, ConsumerGroupHeartbeatResponse]:
        g = self.groups.get(gid)
        if g is None:
            raise GroupOpError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} not found.")
        if instance_id is None:
            m = g.members.get(member_id)
            if m is None:
                raise unknown_member(g, member_id)
        else:
            m = check_instance(g.static_member(instance_id), member_id, instance_id)
        resp = ConsumerGroupHeartbeatResponse(member_id=member_id, member_epoch=epoch, heartbeat_interval_ms=0)
        if epoch == STATIC_LEAVE_EPOCH and instance_id is not None:
            # the static member keeps its place (and its session timer) for its return
            self.timers.cancel((REVOKE_TIMER, gid, m.member_id))
            # KIP-1251: what it keeps is held from epoch 0 (resetAssignedPartitionsEpochsToZero)
            left = m.copy(member_epoch=STATIC_LEAVE_EPOCH, pending_revocation={})
            left.epochs = held_epochs(left.copy(epochs={}), 0)
            return [current_record(gid, left)], resp
        return self.fence(g, [m.member_id], now_ms), resp

    def fence(self, g: ConsumerGroup, member_ids: list[str], now_ms: int) -> Records:
        """Remove members (left, expired, fenced) and bump the group epoch; or, when only
        classic members would remain, the downgrade to a classic group."""
        for mid in member_ids:
            self.cancel_timers(g.group_id, mid)
        if self.fence_hook is not None:
            converted = self.fence_hook(g, member_ids, now_ms)
            if converted is not None:
                return converted
        records: Records = []
        members = dict(g.members)
        for mid in member_ids:
            records += removal_records(g.group_id, mid)
            members.pop(mid, None)
        records.append(epoch_record(g.group_id, g.group_epoch + 1, metadata_hash(g, members, self.topics)))
        return records

    # =====================================================================================
    # offsets (groups/offset_manager.py asks)
    # =====================================================================================
    def validate_commit(
        self, group_id: str, generation: int, member_id: str, instance_id: str | None,
        transactional: bool, now_ms: int, api_version: int = -1,
        partitions: list[tuple[str, int]] | None = None,
    ) -> ErrorCode:
        """Kafka 4.3's ConsumerGroup.validateOffsetCommit with KIP-1251's assignment epochs:
        the member's epoch commits anything; a newer one is refused; an older one (a commit
        sent before the heartbeat response that bumped the epoch arrived) commits only
        partitions the member holds (assigned or pending revocation) since that epoch or
        earlier, and one partition refused refuses the whole request, as Kafka's validator
        throws. ``partitions``: (topic name, partition) of the commit. A transactional commit
        without a member (an old producer) is not checked."""
        g = self.groups[group_id]
        epoch = generation
        if transactional and generation < 0 and member_id == "":
            return ErrorCode.NONE
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

    def validate_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> ErrorCode:
        """OffsetFetch v9+ names the member: Kafka's validateOffsetFetch (a null member id with
        a negative epoch is an admin)."""
        g = self.groups[group_id]
        if member_id is None and member_epoch < 0:
            return ErrorCode.NONE
        m = g.members.get(member_id or "")
        if m is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != m.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION if m.classic is not None else ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    def offset_delete_check(self, group_id: str) -> tuple[ErrorCode, set[str]]:
        return ErrorCode.NONE, subscribed_topics(self.groups[group_id])

    def expiry(self, group_id: str) -> Expiry:
        """Offsets of topics the group subscribes to never expire."""
        return Expiry(subscribed=subscribed_topics(self.groups[group_id]))

    def after_expiry(self, group_id: str, had_offsets: bool, now_ms: int) -> Records:
        """Every offset of the group expired: a group without members goes too."""
        g = self.groups[group_id]
        return [] if g.members else consumer_group_tombstones(g)

    # =====================================================================================
    # admin: list / describe / delete
    # =====================================================================================
    def listed(self, states: set[str], types: set[str]) -> list[ListGroupsResponse.ListedGroup]:
        out = []
        for g in self.groups.values():
            state = g.state.value
            if states and state.lower() not in states:
                continue
            if types and self.type_name not in types:
                continue
            out.append(ListGroupsResponse.ListedGroup(
                group_id=g.group_id, protocol_type="consumer", group_state=state, group_type=self.type_name))
        return out

    def delete(self, group_id: str, now_ms: int) -> tuple[Records, ErrorCode]:
        g = self.groups[group_id]
        if g.members:
            return [], ErrorCode.NON_EMPTY_GROUP
        return consumer_group_tombstones(g), ErrorCode.NONE

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
                assignment=wire(union(m.assigned, m.pending_revocation)),
                target_assignment=wire(g.target.get(m.member_id, {})),
                member_type=0 if m.classic is not None else 1,
            )
            for m in g.members.values()
        ]
        return ConsumerGroupDescribeResponse.DescribedGroup(
            error_code=ErrorCode.NONE, group_id=gid, group_state=g.state.value,
            group_epoch=g.group_epoch, assignment_epoch=g.assignment_epoch,
            assignor_name=choose_assignor(g.members, self.config.consumer_assignors[0]), members=members,
        )
