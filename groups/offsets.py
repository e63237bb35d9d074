"""Committed offsets of the groups of one ``__consumer_offsets`` partition.

Only ``replay_*`` mutate this store: the coordinator emits OffsetCommit records (or
tombstones), the runtime appends and replays them. Transactional offset commits
(TxnOffsetCommit) are replayed into ``pending`` under their producer id and become committed
offsets when that producer's COMMIT marker is replayed (dropped on ABORT). A transactional
offset replaces a committed one only if it was written later (its record offset is larger),
as Kafka's OffsetMetadataManager does.
"""

from __future__ import annotations

from dataclasses import dataclass

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int  # -1: none (retention applies)
    record_offset: int  # where the record is in __consumer_offsets


class OffsetStore:
    def __init__(self) -> None:
        #: group -> (topic, partition) -> committed offset
        self.committed: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        #: producer id -> group -> (topic, partition) -> offset (None: a pending deletion)
        self.pending: dict[int, dict[str, dict[TopicPartition, OffsetAndMetadata | None]]] = {}

    # ---- replay ----------------------------------------------------------------------
    def replay_commit(self, group: str, tp: TopicPartition, om: OffsetAndMetadata | None,
                      producer_id: int = -1) -> None:
        if producer_id >= 0:
            self.pending.setdefault(producer_id, {}).setdefault(group, {})[tp] = om
            return
        if om is None:
            offsets = self.committed.get(group)
            if offsets is not None:
                offsets.pop(tp, None)
                if not offsets:
                    del self.committed[group]
        else:
            self.committed.setdefault(group, {})[tp] = om

    def replay_end_txn(self, producer_id: int, committed: bool) -> None:
        pending = self.pending.pop(producer_id, None)
        if not pending or not committed:
            return
        for group, offsets in pending.items():
            for tp, om in offsets.items():
                if om is None:
                    continue
                cur = self.committed.get(group, {}).get(tp)
                if cur is None or cur.record_offset < om.record_offset:
                    self.committed.setdefault(group, {})[tp] = om

    # ---- reads -----------------------------------------------------------------------
    def get(self, group: str, tp: TopicPartition) -> OffsetAndMetadata | None:
        return self.committed.get(group, {}).get(tp)

    def group_offsets(self, group: str) -> dict[TopicPartition, OffsetAndMetadata]:
        return self.committed.get(group, {})

    def has_offsets(self, group: str) -> bool:
        return bool(self.committed.get(group))

    def has_pending(self, group: str, tp: TopicPartition | None = None) -> bool:
        for groups in self.pending.values():
            offsets = groups.get(group)
            if offsets is not None and (tp is None or tp in offsets):
                return True
        return False

    def pending_partitions(self, group: str) -> set[TopicPartition]:
        out: set[TopicPartition] = set()
        for groups in self.pending.values():
            out |= set(groups.get(group, {}))
        return out

    def groups(self) -> set[str]:
        return set(self.committed) | {g for groups in self.pending.values() for g in groups}
