"""Offsets (Kafka's OffsetMetadataManager): OffsetCommit and TxnOffsetCommit validation, the
OffsetCommit records, OffsetFetch, OffsetDelete, offsets retention and the offsets of deleted
topics. The committed offsets themselves are the store of ``groups/offsets.py``, written by
replay only. Which commits a group accepts is its type's business (``groups/group_type.py``);
a commit outside any group (generation -1, or transactional) creates a simple classic group.

Retention (``offsets.retention.minutes``, checked every ``offsets.retention.check.interval.ms``)
as Kafka decides it: an Empty group's offsets expire ``retention`` after the group became empty;
a simple group's (no protocol type) after their commit; a Stable consumer group's only for
topics no member subscribes to; an explicit expire timestamp (OffsetCommit v1) wins. A group
whose offsets all expired is deleted when its type says so (an Empty classic group, a consumer
group without members).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from groups.classic_protocol import ClassicGroups
from groups.config import GroupConfig
from groups.consumer_group import TopicsView
from groups.group_type import GroupType
from groups.offsets import OffsetStore
from groups.records import Records, offset_tombstone
from groups.timers import Timers
from protocol.errors import ErrorCode

RETENTION_TIMER = "retention"
#: OffsetFetch rows: (topic, [(partition, offset, leader epoch, metadata, error)])
Rows = list[tuple[str, list[tuple[int, int, int, str, ErrorCode]]]]


class OffsetManager:
    timer_kinds = frozenset({RETENTION_TIMER})

    def __init__(self, config: GroupConfig, timers: Timers, store: OffsetStore,
                 types: Sequence[GroupType], classic: ClassicGroups) -> None:
        self.config = config
        self.timers = timers
        self.store = store
        self.types = types
        self.classic = classic

    def owner(self, group_id: str) -> GroupType | None:
        """The group type holding ``group_id`` (None: no group of that id)."""
        for t in self.types:
            if t.has(group_id):
                return t
        return None

    # ---- the runtime's hooks ---------------------------------------------------------------
    def on_loaded(self, now_ms: int) -> None:
        self.timers.schedule((RETENTION_TIMER,), now_ms + self.config.offsets_retention_check_interval_ms)

    def on_timer(self, key: tuple[Any, ...], now_ms: int) -> Records:
        records = self.expire_offsets(now_ms)
        self.timers.schedule((RETENTION_TIMER,), now_ms + self.config.offsets_retention_check_interval_ms)
        return records

    def topics_deleted(self, before: TopicsView, now: TopicsView) -> Records:
        """Tombstones for the committed offsets of topics gone since ``before`` (Kafka's
        onPartitionsDeleted; a topic recreated under another id counts as gone)."""
        gone = {name for name, (tid, _n) in before.items() if now.get(name, (None, 0))[0] != tid}
        records: Records = []
        if gone:
            for group_id in sorted(self.store.groups()):
                for topic, partition in sorted(self.store.group_offsets(group_id)):
                    if topic in gone:
                        records.append(offset_tombstone(group_id, topic, partition))
        return records

    # ---- commit and fetch --------------------------------------------------------------------
    def validate_commit(
        self, group_id: str, generation: int, member_id: str, instance_id: str | None,
        transactional: bool, now_ms: int, api_version: int = -1,
        partitions: list[tuple[str, int]] | None = None,
    ) -> ErrorCode:
        """``partitions``: (topic name, partition) of the commit, which a consumer group
        checks against the member's assignment epochs (KIP-1251) when the epoch is older."""
        owner = self.owner(group_id)
        if owner is not None:
            return owner.validate_commit(group_id, generation, member_id, instance_id, transactional, now_ms,
                                         api_version, partitions)
        if generation >= 0 and not transactional:
            return ErrorCode.ILLEGAL_GENERATION
        self.classic.create_simple(group_id, now_ms)
        return ErrorCode.NONE

    def validate_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> ErrorCode:
        owner = self.owner(group_id)
        return ErrorCode.NONE if owner is None else owner.validate_fetch(group_id, member_id, member_epoch)

    def fetch_offsets(self, group_id: str, topics: list[tuple[str, list[int]]] | None, require_stable: bool) -> Rows:
        """Committed offsets as (topic, [(partition, offset, leader epoch, metadata, error)]).
        ``topics`` None = every committed offset of the group. With ``require_stable``, a
        partition with a pending transactional offset is UNSTABLE_OFFSET_COMMIT."""
        committed = self.store.group_offsets(group_id)
        pending = self.store.pending_partitions(group_id) if require_stable else set()
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

    # ---- delete and expire -------------------------------------------------------------------
    def offset_delete_check(self, group_id: str) -> tuple[ErrorCode, set[str]]:
        """(group error, topics the group is subscribed to) for OffsetDelete."""
        owner = self.owner(group_id)
        if owner is None:
            return ErrorCode.GROUP_ID_NOT_FOUND, set()
        return owner.offset_delete_check(group_id)

    def tombstones(self, group_id: str) -> Records:
        """Every committed offset of the group, deleted."""
        return [offset_tombstone(group_id, t, p) for (t, p) in sorted(self.store.group_offsets(group_id))]

    def expire_offsets(self, now_ms: int) -> Records:
        records: Records = []
        ids = set(self.store.groups())
        for t in self.types:
            ids |= set(t.group_ids())
        for group_id in sorted(ids):
            records += self._expire_group(group_id, now_ms)
        return records

    def _expire_group(self, group_id: str, now_ms: int) -> Records:
        owner = self.owner(group_id)
        policy = owner.expiry(group_id) if owner is not None else None
        if policy is not None and not policy.expirable:
            return []
        subscribed = policy.subscribed if policy is not None else None
        base_ms = policy.base_ms if policy is not None else None
        offsets = self.store.group_offsets(group_id)
        pending = self.store.pending_partitions(group_id)
        records: Records = []
        retention = self.config.offsets_retention_ms
        for (topic, partition), om in sorted(offsets.items()):
            if subscribed is not None and topic in subscribed or (topic, partition) in pending:
                continue
            if om.expire_timestamp_ms >= 0:
                expired = now_ms >= om.expire_timestamp_ms
            else:
                expired = now_ms - (base_ms if base_ms is not None else om.commit_timestamp_ms) >= retention
            if expired:
                records.append(offset_tombstone(group_id, topic, partition))
        if owner is not None and len(records) == len(offsets) and not pending:
            records += owner.after_expiry(group_id, bool(offsets), now_ms)
        return records
