"""The group coordinator state of one ``__consumer_offsets`` partition (a runtime shard).

Every request handler is ``op(request..., now_ms) -> (records, reply)``: the reply may be a
``Pending`` (a parked JoinGroup/SyncGroup) that a later operation or timer completes. The
records (Kafka's OffsetCommit / GroupMetadata coordinator records) are appended by the runtime
and replayed into this shard (``replay``):

* offsets: only ``replay`` changes the offset store (live path and restart alike);
* classic groups: as Kafka's new group coordinator (``replayRecords=false`` for classic group
  writes), the live path updates the in-memory group itself and writes GroupMetadataValue so
  that a restart can rebuild it; replaying GroupMetadata records therefore only builds groups
  while the shard is loading. Loaded groups come back Stable (members with their assignment,
  session timers re-armed) or Empty.

Nothing here reads a clock or does I/O; member ids come from ``id_factory``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

from groups.assignors import Assignment
from groups.classic import ClassicGroup, ClassicGroupState, ClassicMember
from groups.config import GroupConfig
from groups.consumer import RECORD_TYPES as CONSUMER_RECORD_TYPES
from groups.consumer import ConsumerGroup, ConsumerGroups, ConsumerMember, GroupOpError, TopicsView
from groups.offsets import OffsetAndMetadata, OffsetStore
from groups.timers import Timers
from protocol._generated.consumer_group_describe_response import ConsumerGroupDescribeResponse
from protocol._generated.consumer_group_heartbeat_request import ConsumerGroupHeartbeatRequest
from protocol._generated.consumer_group_heartbeat_response import ConsumerGroupHeartbeatResponse
from protocol._generated.describe_groups_response import DescribeGroupsResponse
from protocol._generated.group_metadata_key import GroupMetadataKey
from protocol._generated.group_metadata_value import GroupMetadataValue
from protocol._generated.heartbeat_request import HeartbeatRequest
from protocol._generated.join_group_request import JoinGroupRequest
from protocol._generated.join_group_response import JoinGroupResponse
from protocol._generated.leave_group_request import LeaveGroupRequest
from protocol._generated.leave_group_response import LeaveGroupResponse
from protocol._generated.list_groups_response import ListGroupsResponse
from protocol._generated.offset_commit_key import OffsetCommitKey
from protocol._generated.offset_commit_value import OffsetCommitValue
from protocol._generated.sync_group_request import SyncGroupRequest
from protocol._generated.sync_group_response import SyncGroupResponse
from protocol.coordinator import (
    CoordinatorRecord,
    Pending,
    decode_key,
    decode_value,
    record,
    record_type,
)
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kraft.image import MetadataImage

S = ClassicGroupState
Records = list[CoordinatorRecord]
UNKNOWN_MEMBER_ID = ""
#: GroupMetadataValue / OffsetCommitValue versions we write (what Kafka 4.x writes)
GROUP_METADATA_VERSION = 3
OFFSET_COMMIT_VERSION = 3
#: coordinator record types (the key's apiKey)
LEGACY_OFFSET_COMMIT_TYPE = 0
OFFSET_COMMIT_TYPE = 1
GROUP_METADATA_TYPE = 2
RETENTION_TIMER = ("retention",)


class GroupError(Exception):
    """An error code for the whole request/group (validation)."""

    def __init__(self, code: ErrorCode) -> None:
        super().__init__(code.name)
        self.code = code


def join_error(code: ErrorCode, member_id: str = "") -> JoinGroupResponse:
    return JoinGroupResponse(
        error_code=code, generation_id=-1, protocol_type=None, protocol_name=None,
        leader="", member_id=member_id, members=[],
    )


def sync_error(code: ErrorCode) -> SyncGroupResponse:
    return SyncGroupResponse(error_code=code, protocol_type=None, protocol_name=None, assignment=b"")


class GroupShard:
    def __init__(
        self,
        partition: int,
        config: GroupConfig,
        id_factory: Callable[[], str],
    ) -> None:
        self.partition = partition
        self.config = config
        self.id_factory = id_factory
        self.groups: dict[str, ClassicGroup] = {}
        self.offsets = OffsetStore()
        self.timers = Timers()
        #: KIP-848 consumer groups (groups/consumer.py); ``groups`` holds the classic ones
        self.consumer = ConsumerGroups(config, self.timers)
        self.consumer.id_factory = id_factory
        self.consumer.fence_hook = self._maybe_downgrade
        self.consumer.replace_hook = self._downgrade_with_replaced
        #: the topics at the last ``on_metadata`` (to see which were deleted)
        self._metadata_topics: TopicsView | None = None
        self.loaded = False
        #: Pending replies whose group/state went away (completed on unload)
        self._now_ms = 0

    # =====================================================================================
    # runtime hooks
    # =====================================================================================
    def replay(self, offset: int, producer_id: int, producer_epoch: int, rec: CoordinatorRecord) -> None:
        rtype = record_type(rec.key)
        if rtype in (LEGACY_OFFSET_COMMIT_TYPE, OFFSET_COMMIT_TYPE):
            key = decode_key(OffsetCommitKey, rec.key)
            om = None
            if rec.value is not None:
                version, v = decode_value(OffsetCommitValue, rec.value)
                om = OffsetAndMetadata(
                    offset=v.offset,
                    leader_epoch=v.leader_epoch if version >= 3 else -1,
                    metadata=v.metadata or "",
                    commit_timestamp_ms=v.commit_timestamp,
                    expire_timestamp_ms=v.expire_timestamp if version == 1 else -1,
                    record_offset=offset,
                )
                if (
                    producer_id < 0 and key.group not in self.groups
                    and key.group not in self.consumer.groups
                ):
                    # a simple (non-member) group, as Kafka recreates it from its offsets
                    self.groups[key.group] = ClassicGroup(key.group)
            self.offsets.replay_commit(key.group, (key.topic, key.partition), om, producer_id)
        elif rtype == GROUP_METADATA_TYPE:
            key = decode_key(GroupMetadataKey, rec.key)
            if self.loaded:
                return  # the live path already holds this state (Kafka: replayRecords=false)
            if rec.value is None:
                self.groups.pop(key.group, None)
                return
            _version, gv = decode_value(GroupMetadataValue, rec.value)
            self.groups[key.group] = self._group_from_record(key.group, gv)
        elif rtype in CONSUMER_RECORD_TYPES:
            if rec.value is not None:
                # a simple group (offsets only, no records of its own) makes way, as Kafka's
                # getOrMaybeCreatePersistedConsumerGroup
                gid = self._record_group_id(rec.key)
                simple = self.groups.get(gid) if gid is not None else None
                if simple is not None and not simple.members and not simple.protocol_type \
                        and simple.generation_id == 0:
                    del self.groups[simple.group_id]
            self.consumer.replay(rtype, rec.key, rec.value)
        # other record types (share and streams groups) are not served here

    def _group_from_record(self, group_id: str, gv: GroupMetadataValue) -> ClassicGroup:
        g = ClassicGroup(group_id)
        g.protocol_type = gv.protocol_type or None
        g.protocol_name = gv.protocol
        g.generation_id = gv.generation
        g.state_timestamp_ms = gv.current_state_timestamp
        for m in gv.members:
            member = ClassicMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout if m.rebalance_timeout >= 0 else m.session_timeout,
                session_timeout_ms=m.session_timeout,
                protocol_type=g.protocol_type or "",
                protocols=[(gv.protocol or "", m.subscription)],
                assignment=m.assignment,
            )
            g.members[member.member_id] = member
            if member.group_instance_id is not None:
                g.static_members[member.group_instance_id] = member.member_id
        g.leader_id = gv.leader if gv.leader in g.members else next(iter(g.members), None)
        g.state = S.STABLE if g.members else S.EMPTY
        return g

    @staticmethod
    def _record_group_id(key: bytes) -> str | None:
        """The group id that opens every consumer-group record key (non-flexible string)."""
        if len(key) < 4:
            return None
        n = int.from_bytes(key[2:4], "big", signed=True)
        if n < 0 or 4 + n > len(key):
            return None
        return key[4 : 4 + n].decode("utf-8", "replace")

    def replay_end_txn(self, offset: int, producer_id: int, producer_epoch: int, committed: bool) -> None:
        self.offsets.replay_end_txn(producer_id, committed)

    def on_loaded(self, now_ms: int) -> None:
        self.loaded = True
        self._now_ms = now_ms
        for g in self.groups.values():
            for m in g.members.values():
                self._schedule_heartbeat(g, m, now_ms)
        self.consumer.on_loaded(now_ms)
        self.timers.schedule(RETENTION_TIMER, now_ms + self.config.offsets_retention_check_interval_ms)

    def on_unloaded(self) -> None:
        for g in self.groups.values():
            for m in g.members.values():
                if m.join_pending is not None:
                    m.join_pending.complete(join_error(ErrorCode.NOT_COORDINATOR, m.member_id))
                if m.sync_pending is not None:
                    m.sync_pending.complete(sync_error(ErrorCode.NOT_COORDINATOR))
            g.state = S.DEAD

    def next_deadline_ms(self) -> int | None:
        return self.timers.next_deadline()

    def on_metadata(self, image: MetadataImage, now_ms: int) -> Records:
        """The metadata image changed (and once after loading): KIP-848 groups see the new
        topics (regexes resolve again on their next heartbeat when topics were created), and
        committed offsets of deleted topics are deleted, as Kafka's onPartitionsDeleted."""
        view: TopicsView = {t.name: (t.topic_id, len(t.partitions)) for t in image.topics.values()}
        before, self._metadata_topics = self._metadata_topics, view
        self.consumer.update_topics(view, image.offset)
        if before is None:
            return []
        gone = {name for name, (tid, _n) in before.items() if view.get(name, (None, 0))[0] != tid}
        records: Records = []
        if gone:
            for group_id in sorted(self.offsets.groups()):
                for topic, partition in sorted(self.offsets.group_offsets(group_id)):
                    if topic in gone:
                        records.append(self.offset_tombstone(group_id, topic, partition))
        return records

    def on_timer(self, now_ms: int) -> Records:
        self._now_ms = now_ms
        records: Records = []
        for key in self.timers.pop_due(now_ms):
            assert isinstance(key, tuple)
            kind = key[0]
            if kind == "retention":
                records += self.expire_offsets(now_ms)
                self.timers.schedule(
                    RETENTION_TIMER, now_ms + self.config.offsets_retention_check_interval_ms
                )
                continue
            if kind in ("csession", "crevoke", "cjoin", "csync", "cregex"):
                records += self.consumer.on_timer(key, now_ms)
                continue
            g = self.groups.get(key[1])
            if g is None:
                continue
            if kind == "join":
                records += self._join_deadline(g, now_ms)
            elif kind == "sync":
                records += self._sync_deadline(g, now_ms)
            elif kind == "hb":
                records += self._heartbeat_expired(g, key[2], now_ms)
            elif kind == "pending":
                g.pending_members.discard(key[2])
                if g.is_in(S.PREPARING_REBALANCE) and g.all_joined():
                    records += self._complete_join(g, now_ms)
        return records

    # =====================================================================================
    # helpers
    # =====================================================================================
    def _hb_key(self, g: ClassicGroup, member_id: str) -> Hashable:
        return ("hb", g.group_id, member_id)

    def _schedule_heartbeat(self, g: ClassicGroup, m: ClassicMember, now_ms: int) -> None:
        self.timers.schedule(self._hb_key(g, m.member_id), now_ms + m.session_timeout_ms)

    def _group_record(self, g: ClassicGroup) -> CoordinatorRecord:
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

    def _remove_member(self, g: ClassicGroup, m: ClassicMember, code: ErrorCode, now_ms: int) -> Records:
        """Remove ``m`` (left, expired, fenced) and move the group on."""
        if m.join_pending is not None:
            m.join_pending.complete(join_error(code, m.member_id))
            m.join_pending = None
        if m.sync_pending is not None:
            m.sync_pending.complete(sync_error(code))
            m.sync_pending = None
        self.timers.cancel(self._hb_key(g, m.member_id))
        g.remove(m.member_id)
        records: Records = []
        if g.is_in(S.STABLE, S.COMPLETING_REBALANCE):
            # Kafka's prepareRebalance ends with maybeCompleteJoinPhase: the last member
            # leaving empties the group at once
            records = self._prepare_rebalance(g, now_ms)
        return records + self._try_complete_join(g, now_ms)

    # =====================================================================================
    # JoinGroup
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
                    return self.consumer.classic_join(cg, req, version, client_id, client_host, now_ms)
                except GroupOpError as e:
                    return [], join_error(e.code, req.member_id)
            converted = self.consumer.tombstones(cg)  # an empty consumer group becomes classic
            del self.consumer.groups[req.group_id]
        records, reply = self._join_classic(req, version, client_id, client_host, now_ms)
        return converted + records, reply

    def _join_classic(
        self, req: JoinGroupRequest, version: int, client_id: str, client_host: str, now_ms: int
    ) -> tuple[Records, JoinGroupResponse | Pending[Any]]:
        group_id = req.group_id
        member_id = req.member_id
        cfg = self.config
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
        names = [n for n, _ in protocols]
        if not g.supports(req.protocol_type, names):
            return [], join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
        instance_id = req.group_instance_id
        if member_id == UNKNOWN_MEMBER_ID:
            new_id = (instance_id or client_id) + "-" + self.id_factory()
            if instance_id is not None:
                old = g.static_member_id(instance_id)
                if old is not None:
                    return self._replace_static_member(
                        g, old, new_id, protocols, rebalance_timeout, req.session_timeout_ms,
                        client_id, client_host, now_ms,
                    )
            elif version >= 4:
                if len(g.members) + len(g.pending_members) >= cfg.max_size:
                    return [], join_error(ErrorCode.GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID)
                g.pending_members.add(new_id)
                self.timers.schedule(("pending", group_id, new_id), now_ms + req.session_timeout_ms)
                return [], join_error(ErrorCode.MEMBER_ID_REQUIRED, new_id)
            if len(g.members) >= cfg.max_size:
                return [], join_error(ErrorCode.GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID)
            return self._add_member_and_rebalance(
                g, new_id, instance_id, protocols, req.protocol_type, rebalance_timeout,
                req.session_timeout_ms, client_id, client_host, now_ms,
            )
        # a known member id
        if member_id in g.pending_members:
            if len(g.members) >= cfg.max_size:
                g.pending_members.discard(member_id)
                return [], join_error(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id)
            g.pending_members.discard(member_id)
            self.timers.cancel(("pending", group_id, member_id))
            return self._add_member_and_rebalance(
                g, member_id, instance_id, protocols, req.protocol_type, rebalance_timeout,
                req.session_timeout_ms, client_id, client_host, now_ms,
            )
        code = self._validate_member(g, member_id, instance_id)
        if code != ErrorCode.NONE:
            return [], join_error(code, member_id)
        m = g.members[member_id]
        if g.is_in(S.PREPARING_REBALANCE):
            return self._update_member_and_rebalance(g, m, protocols, rebalance_timeout, req.session_timeout_ms, now_ms)
        if g.is_in(S.COMPLETING_REBALANCE):
            if m.matches(protocols):
                # a retried JoinGroup: answer with the current generation again
                return [], self._join_response(g, m)
            return self._update_member_and_rebalance(g, m, protocols, rebalance_timeout, req.session_timeout_ms, now_ms)
        if g.is_in(S.STABLE):
            if g.leader_id == member_id or not m.matches(protocols):
                return self._update_member_and_rebalance(g, m, protocols, rebalance_timeout, req.session_timeout_ms, now_ms)
            self._schedule_heartbeat(g, m, now_ms)
            return [], self._join_response(g, m)
        return [], join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id)

    def _validate_member(self, g: ClassicGroup, member_id: str, instance_id: str | None) -> ErrorCode:
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

    def _join_response(self, g: ClassicGroup, m: ClassicMember, skip_assignment: bool = False) -> JoinGroupResponse:
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

    def _add_member_and_rebalance(
        self, g: ClassicGroup, member_id: str, instance_id: str | None,
        protocols: list[tuple[str, bytes]], protocol_type: str, rebalance_timeout: int,
        session_timeout: int, client_id: str, client_host: str, now_ms: int,
    ) -> tuple[Records, Pending[Any]]:
        m = ClassicMember(
            member_id=member_id, group_instance_id=instance_id, client_id=client_id,
            client_host=client_host, rebalance_timeout_ms=rebalance_timeout,
            session_timeout_ms=session_timeout, protocol_type=protocol_type, protocols=protocols,
            is_new=True,
        )
        pending: Pending[Any] = Pending()
        m.join_pending = pending
        g.add(m)
        g.new_member_added = True
        # a new member is kept alive while it waits in the join phase, at most this long
        self.timers.schedule(self._hb_key(g, member_id), now_ms + self.config.new_member_join_timeout_ms)
        records = self._maybe_prepare_rebalance(g, now_ms)
        records += self._try_complete_join(g, now_ms)
        return records, pending

    def _update_member_and_rebalance(
        self, g: ClassicGroup, m: ClassicMember, protocols: list[tuple[str, bytes]],
        rebalance_timeout: int, session_timeout: int, now_ms: int,
    ) -> tuple[Records, Pending[Any]]:
        m.protocols = protocols
        m.rebalance_timeout_ms = rebalance_timeout
        m.session_timeout_ms = session_timeout
        if m.join_pending is not None:  # a duplicate join replaces the parked one
            m.join_pending.complete(join_error(ErrorCode.UNKNOWN_MEMBER_ID, m.member_id))
        pending: Pending[Any] = Pending()
        m.join_pending = pending
        self._schedule_heartbeat(g, m, now_ms)
        records = self._maybe_prepare_rebalance(g, now_ms)
        records += self._try_complete_join(g, now_ms)
        return records, pending

    def _replace_static_member(
        self, g: ClassicGroup, old_id: str, new_id: str, protocols: list[tuple[str, bytes]],
        rebalance_timeout: int, session_timeout: int, client_id: str, client_host: str,
        now_ms: int,
    ) -> tuple[Records, JoinGroupResponse | Pending[Any]]:
        old = g.members[old_id]
        # the old incarnation is fenced
        if old.join_pending is not None:
            old.join_pending.complete(join_error(ErrorCode.FENCED_INSTANCE_ID, old_id))
        if old.sync_pending is not None:
            old.sync_pending.complete(sync_error(ErrorCode.FENCED_INSTANCE_ID))
        self.timers.cancel(self._hb_key(g, old_id))
        was_leader = g.leader_id == old_id
        del g.members[old_id]
        if old_id in g.pending_sync:
            g.pending_sync.discard(old_id)
            g.pending_sync.add(new_id)
        old_protocols = old.protocols
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
        self._schedule_heartbeat(g, m, now_ms)
        if g.is_in(S.STABLE):
            if g.select_protocol() != g.protocol_name or (
                m.metadata(g.protocol_name) != dict(old_protocols).get(g.protocol_name or "")
                and was_leader
            ):
                return self._update_member_and_rebalance(g, m, protocols, rebalance_timeout, session_timeout, now_ms)
            # rejoin without rebalance (KIP-345): same generation, assignment kept
            return [self._group_record(g)], self._join_response(g, m, skip_assignment=was_leader)
        if g.is_in(S.COMPLETING_REBALANCE):
            return self._update_member_and_rebalance(g, m, protocols, rebalance_timeout, session_timeout, now_ms)
        # PreparingRebalance: wait in the join phase like everyone else
        return self._update_member_and_rebalance(g, m, protocols, rebalance_timeout, session_timeout, now_ms)

    def _maybe_prepare_rebalance(self, g: ClassicGroup, now_ms: int) -> Records:
        if g.is_in(S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY):
            return self._prepare_rebalance(g, now_ms)
        return []

    def _prepare_rebalance(self, g: ClassicGroup, now_ms: int) -> Records:
        if g.is_in(S.COMPLETING_REBALANCE):
            for m in g.members.values():
                m.assignment = b""
                if m.sync_pending is not None:
                    m.sync_pending.complete(sync_error(ErrorCode.REBALANCE_IN_PROGRESS))
                    m.sync_pending = None
            self.timers.cancel(("sync", g.group_id))
        g.pending_sync.clear()
        rebalance_timeout = g.rebalance_timeout_ms()
        if g.is_in(S.EMPTY):
            delay = self.config.initial_rebalance_delay_ms
            g.initial_delay_remaining_ms = max(rebalance_timeout - delay, 0)
            g.new_member_added = False
            self.timers.schedule(("join", g.group_id), now_ms + min(delay, rebalance_timeout))
        else:
            g.initial_delay_remaining_ms = -1
            self.timers.schedule(("join", g.group_id), now_ms + rebalance_timeout)
        g.transition(S.PREPARING_REBALANCE, now_ms)
        return []

    def _try_complete_join(self, g: ClassicGroup, now_ms: int) -> Records:
        if g.is_in(S.PREPARING_REBALANCE) and g.initial_delay_remaining_ms < 0 and g.all_joined():
            return self._complete_join(g, now_ms)
        return []

    def _join_deadline(self, g: ClassicGroup, now_ms: int) -> Records:
        if not g.is_in(S.PREPARING_REBALANCE):
            return []
        if g.initial_delay_remaining_ms >= 0:
            remaining = g.initial_delay_remaining_ms
            if g.new_member_added and remaining > 0:
                delay = min(self.config.initial_rebalance_delay_ms, remaining)
                g.initial_delay_remaining_ms = max(remaining - delay, 0)
                g.new_member_added = False
                self.timers.schedule(("join", g.group_id), now_ms + delay)
                return []
            g.initial_delay_remaining_ms = -1
        return self._complete_join(g, now_ms)

    def _complete_join(self, g: ClassicGroup, now_ms: int) -> Records:
        self.timers.cancel(("join", g.group_id))
        g.initial_delay_remaining_ms = -1
        for m in list(g.members.values()):
            if m.join_pending is None and m.group_instance_id is None:
                self.timers.cancel(self._hb_key(g, m.member_id))
                g.remove(m.member_id)
        # pending (MEMBER_ID_REQUIRED) members that never came back are forgotten
        for mid in g.pending_members:
            self.timers.cancel(("pending", g.group_id, mid))
        g.pending_members.clear()
        g.generation_id += 1
        if not g.members:
            g.protocol_name = None
            g.leader_id = None
            g.transition(S.EMPTY, now_ms)
            return [self._group_record(g)]
        g.protocol_name = g.select_protocol()
        if g.leader_id not in g.members or g.members[g.leader_id].join_pending is None:
            joined = [mid for mid, m in g.members.items() if m.join_pending is not None]
            g.leader_id = joined[0] if joined else next(iter(g.members))
        g.transition(S.COMPLETING_REBALANCE, now_ms)
        g.pending_sync = set(g.members)
        for m in g.members.values():
            m.is_new = False
            if m.join_pending is not None:
                m.join_pending.complete(self._join_response(g, m))
                m.join_pending = None
            self._schedule_heartbeat(g, m, now_ms)
        self.timers.schedule(("sync", g.group_id), now_ms + g.rebalance_timeout_ms())
        return []

    def _heartbeat_expired(self, g: ClassicGroup, member_id: str, now_ms: int) -> Records:
        m = g.members.get(member_id)
        if m is None:
            return []
        if m.join_pending is not None and not m.is_new:
            # parked in the join phase: alive until the phase ends
            self._schedule_heartbeat(g, m, now_ms)
            return []
        return self._remove_member(g, m, ErrorCode.UNKNOWN_MEMBER_ID, now_ms)

    def _sync_deadline(self, g: ClassicGroup, now_ms: int) -> Records:
        if not g.is_in(S.COMPLETING_REBALANCE):
            return []
        records: Records = []
        late = [g.members[mid] for mid in g.pending_sync if mid in g.members]
        g.pending_sync.clear()
        for m in late:
            if m.sync_pending is not None:
                m.sync_pending.complete(sync_error(ErrorCode.REBALANCE_IN_PROGRESS))
                m.sync_pending = None
            self.timers.cancel(self._hb_key(g, m.member_id))
            g.remove(m.member_id)
        if late:
            records += self._prepare_rebalance(g, now_ms)
            records += self._try_complete_join(g, now_ms)
        return records

    # =====================================================================================
    # SyncGroup
    # =====================================================================================
    def sync(self, req: SyncGroupRequest, version: int, now_ms: int) -> tuple[Records, SyncGroupResponse | Pending[Any]]:
        self._now_ms = now_ms
        g = self.groups.get(req.group_id)
        cg = self.consumer.groups.get(req.group_id) if g is None else None
        if cg is not None:
            try:
                return [], self.consumer.classic_sync(cg, req, now_ms)
            except GroupOpError as e:
                return [], sync_error(e.code)
        if g is None or g.is_in(S.EMPTY) and req.member_id not in g.members:
            return [], sync_error(ErrorCode.UNKNOWN_MEMBER_ID)
        if g.is_in(S.DEAD):
            return [], sync_error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        code = self._validate_member(g, req.member_id, req.group_instance_id)
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
        self._schedule_heartbeat(g, m, now_ms)
        if g.is_in(S.STABLE):
            return [], self._sync_response(g, m)
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
        for mid, member in g.members.items():
            member.assignment = assignments.get(mid, b"")
        self.timers.cancel(("sync", g.group_id))
        g.pending_sync.clear()
        g.transition(S.STABLE, now_ms)
        for member in g.members.values():
            if member.sync_pending is not None:
                member.sync_pending.complete(self._sync_response(g, member))
                member.sync_pending = None
        return [self._group_record(g)], pending

    def _sync_response(self, g: ClassicGroup, m: ClassicMember) -> SyncGroupResponse:
        return SyncGroupResponse(
            error_code=ErrorCode.NONE, protocol_type=g.protocol_type,
            protocol_name=g.protocol_name, assignment=m.assignment,
        )

    # =====================================================================================
    # Heartbeat / LeaveGroup
    # =====================================================================================
    def heartbeat(self, req: HeartbeatRequest, version: int, now_ms: int) -> tuple[Records, ErrorCode]:
        g = self.groups.get(req.group_id)
        if g is None:
            cg = self.consumer.groups.get(req.group_id)
            if cg is not None:
                try:
                    return [], self.consumer.classic_heartbeat(cg, req, now_ms)
                except GroupOpError as e:
                    return [], e.code
            return [], ErrorCode.UNKNOWN_MEMBER_ID
        if g.is_in(S.DEAD):
            return [], ErrorCode.COORDINATOR_NOT_AVAILABLE
        code = self._validate_member(g, req.member_id, req.group_instance_id)
        if code != ErrorCode.NONE:
            return [], code
        if req.generation_id != g.generation_id:
            return [], ErrorCode.ILLEGAL_GENERATION
        if g.is_in(S.EMPTY):
            return [], ErrorCode.UNKNOWN_MEMBER_ID
        m = g.members[req.member_id]
        self._schedule_heartbeat(g, m, now_ms)
        if g.is_in(S.PREPARING_REBALANCE):
            return [], ErrorCode.REBALANCE_IN_PROGRESS
        return [], ErrorCode.NONE

    def leave(self, req: LeaveGroupRequest, version: int, now_ms: int) -> tuple[Records, LeaveGroupResponse]:
        if version < 3:
            identities = [LeaveGroupRequest.MemberIdentity(member_id=req.member_id)]
        else:
            identities = list(req.members)
        g = self.groups.get(req.group_id)
        cg = self.consumer.groups.get(req.group_id) if g is None else None
        if cg is not None:
            fenced, answers = self.consumer.classic_leave(cg, identities, now_ms)
            if version < 3:
                return fenced, LeaveGroupResponse(error_code=answers[0].error_code, members=[])
            return fenced, LeaveGroupResponse(error_code=ErrorCode.NONE, members=answers)
        if g is None:
            return [], LeaveGroupResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID, members=[])
        if g.is_in(S.DEAD):
            return [], LeaveGroupResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, members=[])
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
                self.timers.cancel(("pending", g.group_id, mid))
                records += self._try_complete_join(g, now_ms)
            else:
                target = g.members.get(mid)
                if target is None:
                    code = ErrorCode.UNKNOWN_MEMBER_ID
            if target is not None:
                records += self._remove_member(g, target, ErrorCode.UNKNOWN_MEMBER_ID, now_ms)
            out.append(LeaveGroupResponse.MemberResponse(member_id=mid, group_instance_id=iid, error_code=code))
        if version < 3:
            return records, LeaveGroupResponse(error_code=out[0].error_code, members=[])
        return records, LeaveGroupResponse(error_code=ErrorCode.NONE, members=out)

    # =====================================================================================
    # offsets
    # =====================================================================================
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

        def error(code: ErrorCode, message: str | None) -> tuple[Records, ConsumerGroupHeartbeatResponse]:
            return [], ConsumerGroupHeartbeatResponse(error_code=code, error_message=message)

        try:
            ConsumerGroups.validate_heartbeat(req, version)
        except GroupOpError as e:
            return error(e.code, e.message)
        converted: Records = []
        upgraded: ConsumerGroup | None = None
        g = self.groups.get(req.group_id)
        if g is not None:
            if req.member_epoch != 0:
                return error(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a consumer group.")
            if not g.members and g.is_in(S.EMPTY):
                if g.generation_id > 0 or g.protocol_type:
                    converted.append(record(GroupMetadataKey(group=g.group_id), None))
            else:
                try:
                    converted, upgraded = self._upgrade(g, now_ms)
                except GroupOpError as e:
                    return error(e.code, e.message)
        records, resp = self.consumer.heartbeat(
            req, version, client_id, client_host, self.id_factory(), now_ms, upgraded
        )
        if resp.error_code != ErrorCode.NONE:
            return [], resp  # nothing converted either
        if g is not None:
            for m in g.members.values():  # the classic members rejoin the consumer group
                if m.join_pending is not None:
                    m.join_pending.complete(join_error(ErrorCode.REBALANCE_IN_PROGRESS, m.member_id))
                    m.join_pending = None
                if m.sync_pending is not None:
                    m.sync_pending.complete(sync_error(ErrorCode.REBALANCE_IN_PROGRESS))
                    m.sync_pending = None
                self.timers.cancel(self._hb_key(g, m.member_id))
            for kind in ("join", "sync"):
                self.timers.cancel((kind, g.group_id))
            del self.groups[g.group_id]
        return converted + records, resp

    def _upgrade(self, g: ClassicGroup, now_ms: int) -> tuple[Records, ConsumerGroup]:
        """Records turning the non-empty classic group ``g`` into a consumer group whose
        members are its classic members (Kafka's convertToConsumerGroup), and that group."""
        cfg = self.config
        gid = g.group_id
        why = None
        if not cfg.upgrade_enabled:
            why = "online upgrade is disabled"
        elif g.protocol_type != "consumer":
            why = "the group does not use the consumer embedded protocol"
        elif len(g.members) > cfg.consumer_max_size:
            why = "the group size exceeds the consumer group maximum size"
        if why is not None:
            raise GroupOpError(ErrorCode.GROUP_ID_NOT_FOUND,
                               f"Cannot upgrade classic group {gid} to consumer group because {why}.")
        members = [
            (m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
             m.session_timeout_ms, tuple(m.protocols),
             m.metadata(g.protocol_name) if g.protocol_name else (m.protocols[0][1] if m.protocols else b""),
             m.assignment)
            for m in g.members.values()
        ]
        records, cg = self.consumer.from_classic(gid, g.generation_id, members, now_ms)
        return [record(GroupMetadataKey(group=gid), None), *records], cg

    def _maybe_downgrade(self, cg: ConsumerGroup, fenced: list[str], now_ms: int) -> Records | None:
        """Kafka's validateOnlineDowngradeWithFencedMembers + convertToClassicGroup: when the
        members that remain all speak the classic protocol (and the policy allows it), the
        consumer group becomes a classic group of them at its group epoch, assignments taken
        from the target, and rebalances."""
        remaining = [m for mid, m in cg.members.items() if mid not in fenced]
        if not remaining or any(m.classic is None for m in remaining):
            return None
        if not self._may_downgrade(len(remaining)):
            return None
        return self.consumer.tombstones(cg) + self._to_classic(cg, remaining, cg.target, True, now_ms)

    def _may_downgrade(self, members: int) -> bool:
        return self.config.downgrade_enabled and members <= self.config.max_size

    def _downgrade_with_replaced(
        self, cg: ConsumerGroup, members: dict[str, ConsumerMember], target: dict[str, Assignment],
        stale: bool, now_ms: int,
    ) -> Records | None:
        """Kafka's validateOnlineDowngradeWithReplacedMember: a classic static member took the
        place of the group's last consumer-protocol member (``members``, ``target``: the group
        with the replacement done). The group becomes a classic group at its group epoch, at
        once Stable with the target's assignments, or rebalancing when the target is stale
        (the join changed the group epoch)."""
        if not self._may_downgrade(len(members)):
            return None
        view = ConsumerGroup(cg.group_id, members=members, target=target, regexes=cg.regexes)
        return self.consumer.tombstones(view) + self._to_classic(
            cg, list(members.values()), target, stale, now_ms)

    def _to_classic(
        self, cg: ConsumerGroup, remaining: list[ConsumerMember], target: dict[str, Assignment],
        rebalance: bool, now_ms: int,
    ) -> Records:
        """The records of a classic group of ``remaining`` (ClassicGroup.fromConsumerGroup),
        after the consumer group's tombstones; the group is in place at once, as Kafka does it."""
        g = ClassicGroup(cg.group_id, state=S.STABLE, protocol_type="consumer",
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
            cm.assignment = self.consumer.assignment_bytes(
                target.get(cm.member_id, {}), cm.metadata(g.protocol_name))
        records = [self._group_record(g)]
        self.groups[g.group_id] = g
        for cm in g.members.values():
            self._schedule_heartbeat(g, cm, now_ms)
        if rebalance:
            records += self._prepare_rebalance(g, now_ms)
        return records

    def consumer_describe(
        self, group_id: str, names: dict[Any, str]
    ) -> ConsumerGroupDescribeResponse.DescribedGroup:
        if group_id in self.groups:
            return ConsumerGroupDescribeResponse.DescribedGroup(
                error_code=ErrorCode.GROUP_ID_NOT_FOUND, group_id=group_id, members=[],
                error_message=f"Group {group_id} is not a consumer group.",
            )
        return self.consumer.describe(group_id, names)

    def validate_commit(
        self, group_id: str, generation: int, member_id: str, instance_id: str | None,
        transactional: bool, now_ms: int, api_version: int = -1,
        partitions: list[tuple[str, int]] | None = None,
    ) -> ErrorCode:
        """``partitions``: (topic name, partition) of the commit, which a consumer group
        checks against the member's assignment epochs (KIP-1251) when the epoch is older."""
        cg = self.consumer.groups.get(group_id)
        if cg is not None:
            if transactional and generation < 0 and member_id == UNKNOWN_MEMBER_ID:
                return ErrorCode.NONE
            return self.consumer.validate_commit(cg, member_id, generation, api_version, transactional,
                                                 partitions)
        g = self.groups.get(group_id)
        if g is None:
            if generation >= 0 and not transactional:
                return ErrorCode.ILLEGAL_GENERATION
            self.groups[group_id] = ClassicGroup(group_id, state_timestamp_ms=now_ms)
            return ErrorCode.NONE
        if g.is_in(S.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if transactional and generation < 0 and member_id == UNKNOWN_MEMBER_ID:
            return ErrorCode.NONE
        if generation < 0 and g.is_in(S.EMPTY):
            return ErrorCode.NONE
        if generation >= 0 or member_id != UNKNOWN_MEMBER_ID or instance_id is not None:
            code = self._validate_member(g, member_id, instance_id)
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
            self._schedule_heartbeat(g, m, now_ms)  # a commit proves the member alive
        return ErrorCode.NONE

    def validate_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> ErrorCode:
        """OffsetFetch v9+ names the member of a consumer group: Kafka's validateOffsetFetch
        (a null member id with a negative epoch is an admin; classic groups check nothing)."""
        cg = self.consumer.groups.get(group_id)
        if cg is None or member_id is None and member_epoch < 0:
            return ErrorCode.NONE
        m = cg.members.get(member_id or "")
        if m is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != m.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION if m.classic is not None else ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    def fetch_offsets(
        self, group_id: str, topics: list[tuple[str, list[int]]] | None, require_stable: bool
    ) -> list[tuple[str, list[tuple[int, int, int, str, ErrorCode]]]]:
        """Committed offsets as (topic, [(partition, offset, leader epoch, metadata, error)]).
        ``topics`` None = every committed offset of the group. With ``require_stable``, a
        partition with a pending transactional offset is UNSTABLE_OFFSET_COMMIT."""
        committed = self.offsets.group_offsets(group_id)
        pending = self.offsets.pending_partitions(group_id) if require_stable else set()
        if topics is None:
            by_topic: dict[str, list[int]] = {}
            for t, p in sorted(committed):
                by_topic.setdefault(t, []).append(p)
            topics = list(by_topic.items())
        out = []
        for topic, partitions in topics:
            rows = []
            for p in partitions:
                if (topic, p) in pending:
                    rows.append((p, -1, -1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT))
                    continue
                om = committed.get((topic, p))
                if om is None:
                    rows.append((p, -1, -1, "", ErrorCode.NONE))
                else:
                    rows.append((p, om.offset, om.leader_epoch, om.metadata, ErrorCode.NONE))
            out.append((topic, rows))
        return out

    def offset_record(
        self, group_id: str, topic: str, partition: int, offset: int, leader_epoch: int,
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

    def offset_tombstone(self, group_id: str, topic: str, partition: int) -> CoordinatorRecord:
        return record(OffsetCommitKey(group=group_id, topic=topic, partition=partition), None)

    def expire_offsets(self, now_ms: int) -> Records:
        """Offsets retention (``offsets.retention.minutes``), as Kafka decides it:
        an Empty group's offsets expire ``retention`` after the group became empty; a
        simple group's (no protocol type) after their commit; a Stable consumer group's only
        for topics no member subscribes to. A group left Empty without offsets is deleted."""
        records: Records = []
        retention = self.config.offsets_retention_ms
        for group_id in sorted(self.offsets.groups() | set(self.groups) | set(self.consumer.groups)):
            g = self.groups.get(group_id)
            offsets = self.offsets.group_offsets(group_id)
            subscribed: set[str] | None = None
            base_state: int | None = None
            expirable = True
            cg = self.consumer.groups.get(group_id)
            if cg is not None:
                subscribed = self.consumer.subscribed_topics(cg)
            elif g is not None and g.protocol_type:
                if g.is_in(S.EMPTY):
                    base_state = g.state_timestamp_ms if g.state_timestamp_ms >= 0 else None
                elif g.is_in(S.STABLE) and g.protocol_type == "consumer":
                    subscribed = g.subscribed_topics()
                    expirable = subscribed is not None
                else:
                    expirable = False
            if not expirable:
                continue
            pending = self.offsets.pending_partitions(group_id)
            gone = 0
            for (topic, partition), om in sorted(offsets.items()):
                if subscribed is not None and topic in subscribed:
                    continue
                if (topic, partition) in pending:
                    continue
                if om.expire_timestamp_ms >= 0:
                    expired = now_ms >= om.expire_timestamp_ms
                else:
                    base = base_state if base_state is not None else om.commit_timestamp_ms
                    expired = now_ms - base >= retention
                if expired:
                    records.append(self.offset_tombstone(group_id, topic, partition))
                    gone += 1
            if cg is not None and not cg.members and gone == len(offsets) and not pending:
                records += self.consumer.tombstones(cg)
                continue
            if (
                g is not None and g.is_in(S.EMPTY) and gone == len(offsets)
                and not pending
            ):
                if offsets or g.generation_id > 0 or g.protocol_type:
                    records.append(record(GroupMetadataKey(group=group_id), None))
                self._delete_group(g, now_ms)
        return records

    def _delete_group(self, g: ClassicGroup, now_ms: int) -> None:
        g.transition(S.DEAD, now_ms)
        del self.groups[g.group_id]

    # =====================================================================================
    # admin: list / describe / delete
    # =====================================================================================
    def list_groups(self, states: list[str], types: list[str]) -> list[ListGroupsResponse.ListedGroup]:
        want_states = {s.lower() for s in states}
        want_types = {t.lower() for t in types}
        out = []
        for g in self.groups.values():
            if g.is_in(S.DEAD):
                continue
            if want_states and g.state.value.lower() not in want_states:
                continue
            if want_types and "classic" not in want_types:
                continue
            out.append(
                ListGroupsResponse.ListedGroup(
                    group_id=g.group_id, protocol_type=g.protocol_type or "",
                    group_state=g.state.value, group_type="classic",
                )
            )
        for cg in self.consumer.groups.values():
            state = cg.state()
            if want_states and state.lower() not in want_states:
                continue
            if want_types and "consumer" not in want_types:
                continue
            out.append(
                ListGroupsResponse.ListedGroup(
                    group_id=cg.group_id, protocol_type="consumer", group_state=state,
                    group_type="consumer",
                )
            )
        return out

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

    def delete_group(self, group_id: str, now_ms: int) -> tuple[Records, ErrorCode]:
        cg = self.consumer.groups.get(group_id)
        if cg is not None:
            if cg.members:
                return [], ErrorCode.NON_EMPTY_GROUP
            offsets = [
                self.offset_tombstone(group_id, t, p)
                for (t, p) in sorted(self.offsets.group_offsets(group_id))
            ]
            return offsets + self.consumer.tombstones(cg), ErrorCode.NONE
        g = self.groups.get(group_id)
        if g is None or g.is_in(S.DEAD):
            return [], ErrorCode.GROUP_ID_NOT_FOUND
        if not g.is_in(S.EMPTY):
            return [], ErrorCode.NON_EMPTY_GROUP
        records = [
            self.offset_tombstone(group_id, t, p)
            for (t, p) in sorted(self.offsets.group_offsets(group_id))
        ]
        records.append(record(GroupMetadataKey(group=group_id), None))
        self._delete_group(g, now_ms)
        return records, ErrorCode.NONE

    def offset_delete_check(self, group_id: str) -> tuple[ErrorCode, set[str]]:
        """(group error, topics the group is subscribed to) for OffsetDelete."""
        cg = self.consumer.groups.get(group_id)
        if cg is not None:
            return ErrorCode.NONE, self.consumer.subscribed_topics(cg)
        g = self.groups.get(group_id)
        if g is None or g.is_in(S.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, set()
        if g.is_in(S.EMPTY):
            return ErrorCode.NONE, set()
        if g.protocol_type != "consumer":
            return ErrorCode.NON_EMPTY_GROUP, set()
        return ErrorCode.NONE, g.subscribed_topics() or set()
