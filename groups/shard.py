"""The group coordinator state of one ``__consumer_offsets`` partition (a runtime shard): a small
facade that composes the jobs of ``groups/`` and routes to them.

* runtime hooks (``replay``, ``on_loaded``, ``on_timer``...; docs/COORDINATORS.md): records go
  to ``groups/replay.py``, timers to the job that owns their kind;
* requests: the classic protocol's (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) go to the group
  type that holds the group id (a consumer group serves its classic members,
  ``groups/consumer_classic.py``), conversions to ``groups/migration.py``;
  ConsumerGroupHeartbeat to ``groups/consumer.py``; offsets to ``groups/offset_manager.py``;
  list/describe/delete to ``groups/admin.py``.

Every request handler is ``op(request..., now_ms) -> (records, reply)``; the runtime appends the
records and replays them here. Nothing here reads a clock or does I/O; member ids come from
``id_factory``. A new group type (streams, KIP-1071) is a module implementing
``groups/group_type.py``'s ``GroupType`` with its own heartbeat; the shard adds it to ``types``
and gets one entry point for its heartbeat.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from groups.admin import GroupAdmin
from groups.classic import join_error, sync_error
from groups.classic_protocol import ClassicGroups
from groups.config import GroupConfig
from groups.consumer import ConsumerGroups, validate_heartbeat
from groups.consumer_classic import ClassicMembers
from groups.consumer_group import GroupOpError, TopicsView
from groups.group_type import GroupType
from groups.migration import Migration
from groups.offset_manager import OffsetManager, Rows
from groups.offsets import OffsetStore
from groups.records import Records, offset_record, offset_tombstone
from groups.replay import Replayer
from groups.timers import Timers
from protocol._generated.consumer_group_describe_response import ConsumerGroupDescribeResponse
from protocol._generated.consumer_group_heartbeat_request import ConsumerGroupHeartbeatRequest
from protocol._generated.consumer_group_heartbeat_response import ConsumerGroupHeartbeatResponse
from protocol._generated.describe_groups_response import DescribeGroupsResponse
from protocol._generated.heartbeat_request import HeartbeatRequest
from protocol._generated.join_group_request import JoinGroupRequest
from protocol._generated.join_group_response import JoinGroupResponse
from protocol._generated.leave_group_request import LeaveGroupRequest
from protocol._generated.leave_group_response import LeaveGroupResponse
from protocol._generated.list_groups_response import ListGroupsResponse
from protocol._generated.sync_group_request import SyncGroupRequest
from protocol._generated.sync_group_response import SyncGroupResponse
from protocol.coordinator import CoordinatorRecord, Pending
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kraft.image import MetadataImage


class GroupShard:
    def __init__(self, partition: int, config: GroupConfig, id_factory: Callable[[], str]) -> None:
        self.partition = partition
        self.config = config
        self.id_factory = id_factory
        self.timers = Timers()
        self.offsets = OffsetStore()
        self.classic = ClassicGroups(config, self.timers, id_factory)
        self.consumer = ConsumerGroups(config, self.timers)
        self.consumer.id_factory = id_factory
        self.classic_members = ClassicMembers(self.consumer)
        self.migration = Migration(self.classic, self.consumer, self.classic_members)
        #: the group types, in ListGroups' order
        self.types: list[GroupType] = [self.classic, self.consumer]
        self.offset_manager = OffsetManager(config, self.timers, self.offsets, self.types, self.classic)
        self.admin = GroupAdmin(self.types, self.offset_manager, self.classic, self.consumer)
        self.replayer = Replayer(self.offsets, self.classic.groups, self.consumer.groups)
        #: timer kind -> the job whose timers they are
        owners: list[GroupType | OffsetManager] = [*self.types, self.offset_manager]
        self._timer_owners = {kind: owner for owner in owners for kind in owner.timer_kinds}
        #: the topics at the last ``on_metadata`` (to see which were deleted)
        self._metadata_topics: TopicsView | None = None
        self._now_ms = 0

    @property
    def loaded(self) -> bool:
        return self.replayer.loaded

    # =====================================================================================
    # runtime hooks
    # =====================================================================================
    def replay(self, offset: int, producer_id: int, producer_epoch: int, rec: CoordinatorRecord) -> None:
        self.replayer.replay(offset, producer_id, rec)

    def replay_end_txn(self, offset: int, producer_id: int, producer_epoch: int, committed: bool) -> None:
        self.replayer.replay_end_txn(producer_id, committed)

    def on_loaded(self, now_ms: int) -> None:
        self.replayer.loaded = True
        self._now_ms = now_ms
        for t in self.types:
            t.on_loaded(now_ms)
        self.offset_manager.on_loaded(now_ms)

    def on_unloaded(self) -> None:
        for t in self.types:
            t.on_unloaded(self._now_ms)

    def next_deadline_ms(self) -> int | None:
        return self.timers.next_deadline()

    def on_metadata(self, image: MetadataImage, now_ms: int) -> Records:
        """The metadata image changed (and once after loading): KIP-848 groups see the new
        topics (regexes resolve again on their next heartbeat when topics were created), and
        committed offsets of deleted topics are deleted, as Kafka's onPartitionsDeleted."""
        view: TopicsView = {t.name: (t.topic_id, len(t.partitions)) for t in image.topics.values()}
        before, self._metadata_topics = self._metadata_topics, view
        self.consumer.update_topics(view, image.offset)
        return [] if before is None else self.offset_manager.topics_deleted(before, view)

    def on_timer(self, now_ms: int) -> Records:
        self._now_ms = now_ms
        records: Records = []
        for key in self.timers.pop_due(now_ms):
            assert isinstance(key, tuple)
            owner = self._timer_owners.get(key[0])
            if owner is not None:
                records += owner.on_timer(key, now_ms)
        return records

    # =====================================================================================
    # the classic protocol's requests
    # =====================================================================================
    def join(
        self, req: JoinGroupRequest, version: int, client_id: str, client_host: str, now_ms: int
    ) -> tuple[Records, JoinGroupResponse | Pending[Any]]:
        self._now_ms = now_ms
        if not req.group_id:
            return [], join_error(ErrorCode.INVALID_GROUP_ID, req.member_id)
        cfg = self.config
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            return [], join_error(ErrorCode.INVALID_SESSION_TIMEOUT, req.member_id)
        if sum(len(p.metadata) for p in req.protocols) > cfg.member_metadata_max_bytes:
            return [], join_error(ErrorCode.INVALID_REQUEST, req.member_id)
        converted: Records = []
        cg = self.consumer.groups.get(req.group_id)
        if cg is not None:
            if cg.members:  # a classic member of a consumer group
                try:
                    return self.classic_members.join(cg, req, version, client_id, client_host, now_ms)
                except GroupOpError as e:
                    return [], join_error(e.code, req.member_id)
            converted = self.migration.empty_consumer_group_goes(cg)
        records, reply = self.classic.join(req, version, client_id, client_host, now_ms)
        return converted + records, reply

    def sync(self, req: SyncGroupRequest, version: int, now_ms: int) -> tuple[Records, SyncGroupResponse | Pending[Any]]:
        self._now_ms = now_ms
        cg = self.consumer.groups.get(req.group_id) if not self.classic.has(req.group_id) else None
        if cg is not None:
            try:
                return [], self.classic_members.sync(cg, req, now_ms)
            except GroupOpError as e:
                return [], sync_error(e.code)
        return self.classic.sync(req, version, now_ms)

    def heartbeat(self, req: HeartbeatRequest, version: int, now_ms: int) -> tuple[Records, ErrorCode]:
        cg = self.consumer.groups.get(req.group_id) if not self.classic.has(req.group_id) else None
        if cg is not None:
            try:
                return [], self.classic_members.heartbeat(cg, req, now_ms)
            except GroupOpError as e:
                return [], e.code
        return self.classic.heartbeat(req, version, now_ms)

    def leave(self, req: LeaveGroupRequest, version: int, now_ms: int) -> tuple[Records, LeaveGroupResponse]:
        if version < 3:
            identities = [LeaveGroupRequest.MemberIdentity(member_id=req.member_id)]
        else:
            identities = list(req.members)
        cg = self.consumer.groups.get(req.group_id) if not self.classic.has(req.group_id) else None
        records: Records
        if cg is not None:
            records, answers = self.classic_members.leave(cg, identities, now_ms)
        else:
            records, out = self.classic.leave(req.group_id, identities, now_ms)
            if isinstance(out, ErrorCode):
                return [], LeaveGroupResponse(error_code=out, members=[])
            answers = out
        if version < 3:
            return records, LeaveGroupResponse(error_code=answers[0].error_code, members=[])
        return records, LeaveGroupResponse(error_code=ErrorCode.NONE, members=answers)

    # =====================================================================================
    # KIP-848: ConsumerGroupHeartbeat / ConsumerGroupDescribe
    # =====================================================================================
    def consumer_heartbeat(
        self, req: ConsumerGroupHeartbeatRequest, version: int, client_id: str, client_host: str,
        topics: TopicsView, now_ms: int, metadata_version: int = -1,
    ) -> tuple[Records, ConsumerGroupHeartbeatResponse]:
        """ConsumerGroupHeartbeat; a join (epoch 0) to a classic group converts it: an empty
        one whatever the policy, a non-empty one (online upgrade) when
        ``group.consumer.migration.policy`` allows it and it uses the consumer protocol."""
        self.consumer.update_topics(topics, metadata_version)
        try:
            validate_heartbeat(req, version)
        except GroupOpError as e:
            return [], ConsumerGroupHeartbeatResponse(error_code=e.code, error_message=e.message)
        g = self.classic.groups.get(req.group_id)
        if g is not None:
            return self.migration.consumer_join(g, req, version, client_id, client_host, self.id_factory, now_ms)
        return self.consumer.heartbeat(req, version, client_id, client_host, self.id_factory(), now_ms)

    def consumer_describe(self, group_id: str, names: dict[Any, str]) -> ConsumerGroupDescribeResponse.DescribedGroup:
        return self.admin.consumer_describe(group_id, names)

    # =====================================================================================
    # offsets
    # =====================================================================================
    def validate_commit(
        self, group_id: str, generation: int, member_id: str, instance_id: str | None,
        transactional: bool, now_ms: int, api_version: int = -1,
        partitions: list[tuple[str, int]] | None = None,
    ) -> ErrorCode:
        return self.offset_manager.validate_commit(group_id, generation, member_id, instance_id, transactional,
                                                   now_ms, api_version, partitions)

    def validate_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> ErrorCode:
        return self.offset_manager.validate_fetch(group_id, member_id, member_epoch)

    def fetch_offsets(self, group_id: str, topics: list[tuple[str, list[int]]] | None, require_stable: bool) -> Rows:
        return self.offset_manager.fetch_offsets(group_id, topics, require_stable)

    def offset_record(
        self, group_id: str, topic: str, partition: int, offset: int, leader_epoch: int,
        metadata: str | None, now_ms: int, expire_ms: int = -1,
    ) -> CoordinatorRecord:
        return offset_record(group_id, topic, partition, offset, leader_epoch, metadata, now_ms, expire_ms)

    def offset_tombstone(self, group_id: str, topic: str, partition: int) -> CoordinatorRecord:
        return offset_tombstone(group_id, topic, partition)

    def expire_offsets(self, now_ms: int) -> Records:
        return self.offset_manager.expire_offsets(now_ms)

    def offset_delete_check(self, group_id: str) -> tuple[ErrorCode, set[str]]:
        return self.offset_manager.offset_delete_check(group_id)

    # =====================================================================================
    # admin: list / describe / delete
    # =====================================================================================
    def list_groups(self, states: list[str], types: list[str]) -> list[ListGroupsResponse.ListedGroup]:
        return self.admin.list_groups(states, types)

    def describe(self, group_id: str) -> DescribeGroupsResponse.DescribedGroup:
        return self.admin.describe(group_id)

    def delete_group(self, group_id: str, now_ms: int) -> tuple[Records, ErrorCode]:
        return self.admin.delete_group(group_id, now_ms)
