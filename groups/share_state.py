"""The share coordinator's state (KIP-932), one shard per ``__share_group_state`` partition.

Kafka's share coordinator persists each share partition's state (start offset, state epoch and
the in-flight state batches, ``groups.share_partition.SharePartition.state_batches``) so that it
survives restarts and moves with leadership. The shard follows the coordinator contract
(docs/COORDINATORS.md): ``write``/``initialize``/``delete`` return records, only ``replay``
changes ``states``.

Writes are ShareSnapshot records (the whole state, snapshot epoch + 1), so a compacted topic
keeps exactly the latest state per key; ShareUpdate records (deltas, which Kafka writes between
snapshots) are read back correctly: their batches overlay the snapshot's and a start offset
other than -1 moves it. A tombstone deletes the key (DeleteShareGroupState, DeleteGroups, the
topic deleted: ``on_metadata``).
"""

from __future__ import annotations

from kraft.image import MetadataImage
from protocol.coordinator import CoordinatorRecord
from protocol.errors import ErrorCode, KafkaError
from protocol.share_state import (
    NO_START_OFFSET,
    SNAPSHOT_TYPE,
    UPDATE_TYPE,
    ShareStateKey,
    ShareStateValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

Batch = tuple[int, int, int, int]


def overlay(base: list[Batch], updates: list[Batch], start_offset: int) -> list[Batch]:
    """``base`` with ``updates`` written over it (later wins), cut below ``start_offset``."""
    out = list(base)
    for u in sorted(updates):
        kept: list[Batch] = []
        for b in out:
            if b[1] < u[0] or b[0] > u[1]:
                kept.append(b)
                continue
            if b[0] < u[0]:
                kept.append((b[0], u[0] - 1, b[2], b[3]))
            if b[1] > u[1]:
                kept.append((u[1] + 1, b[1], b[2], b[3]))
        kept.append(u)
        out = sorted(kept)
    cut: list[Batch] = []
    for b in out:
        if b[1] < start_offset:
            continue
        cut.append((max(b[0], start_offset), b[1], b[2], b[3]))
    return cut


class ShareStateShard:
    def __init__(self, partition: int) -> None:
        self.partition = partition
        self.states: dict[ShareStateKey, ShareStateValue] = {}
        self.loaded = False

    # ---- coordinator contract -------------------------------------------------------------
    def replay(self, offset: int, producer_id: int, producer_epoch: int, rec: CoordinatorRecord) -> None:
        rtype, key = decode_key(rec.key)
        if rec.value is None:
            self.states.pop(key, None)
            return
        v = decode_value(rtype, rec.value)
        if rtype == SNAPSHOT_TYPE:
            self.states[key] = v
            return
        cur = self.states.get(key)
        if cur is None:
            return  # an update without its snapshot: nothing to apply it to
        if v.start_offset != NO_START_OFFSET:
            cur.start_offset = v.start_offset
        cur.state_batches = overlay(cur.state_batches, v.state_batches, cur.start_offset)
        cur.leader_epoch = v.leader_epoch

    def replay_end_txn(self, offset: int, producer_id: int, producer_epoch: int, committed: bool) -> None:
        pass

    def on_loaded(self, now_ms: int) -> None:
        self.loaded = True

    def on_unloaded(self) -> None:
        self.loaded = False

    def next_deadline_ms(self) -> int | None:
        return None

    def on_metadata(self, image: MetadataImage, now_ms: int) -> list[CoordinatorRecord]:
        """The state of share partitions whose topic is gone is deleted (as Kafka deletes it
        when a topic is deleted); also once after loading."""
        records: list[CoordinatorRecord] = []
        for key in sorted(self.states, key=lambda k: (k.group_id, str(k.topic_id), k.partition)):
            if key.topic_id not in image.topics_by_id:
                records += self.delete(key)
        return records

    def on_timer(self, now_ms: int) -> list[CoordinatorRecord]:
        return []

    # ---- operations ---------------------------------------------------------------------------
    def write(
        self, key: ShareStateKey, start_offset: int, batches: list[Batch], leader_epoch: int,
        now_ms: int, state_epoch: int | None = None,
    ) -> list[CoordinatorRecord]:
        """A ShareSnapshot with the whole new state."""
        cur = self.states.get(key)
        v = ShareStateValue(
            snapshot_epoch=(cur.snapshot_epoch + 1) if cur is not None else 0,
            state_epoch=state_epoch if state_epoch is not None else (
                cur.state_epoch if cur is not None else 0),
            leader_epoch=leader_epoch,
            start_offset=start_offset,
            create_timestamp=cur.create_timestamp if cur is not None else now_ms,
            write_timestamp=now_ms,
            state_batches=list(batches),
        )
        return [CoordinatorRecord(encode_key(SNAPSHOT_TYPE, key), encode_value(SNAPSHOT_TYPE, v))]

    def delete(self, key: ShareStateKey) -> list[CoordinatorRecord]:
        """Tombstones for both record types of ``key``."""
        if key not in self.states:
            return []
        return [CoordinatorRecord(encode_key(SNAPSHOT_TYPE, key), None),
                CoordinatorRecord(encode_key(UPDATE_TYPE, key), None)]

    # ---- the share-coordinator APIs (InitializeShareGroupState ... ) -----------------------
    def check_epochs(self, key: ShareStateKey, state_epoch: int | None, leader_epoch: int | None) -> None:
        """FENCED_STATE_EPOCH / FENCED_LEADER_EPOCH for a request older than the state."""
        cur = self.states.get(key)
        if cur is None:
            return
        if state_epoch is not None and state_epoch < cur.state_epoch:
            raise KafkaError(ErrorCode.FENCED_STATE_EPOCH)
        if leader_epoch is not None and leader_epoch >= 0 and leader_epoch < cur.leader_epoch:
            raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH)

    def initialize(self, key: ShareStateKey, state_epoch: int, start_offset: int,
                   now_ms: int) -> list[CoordinatorRecord]:
        self.check_epochs(key, state_epoch, None)
        cur = self.states.get(key)
        epoch = cur.leader_epoch if cur is not None else -1
        return self.write(key, start_offset, [], epoch, now_ms, state_epoch=state_epoch)

    def write_delta(self, key: ShareStateKey, state_epoch: int, leader_epoch: int,
                    start_offset: int, batches: list[Batch], now_ms: int) -> list[CoordinatorRecord]:
        """WriteShareGroupState: ``batches`` over the current ones, start offset -1 kept."""
        self.check_epochs(key, state_epoch, leader_epoch)
        cur = self.states.get(key)
        start = start_offset if start_offset != NO_START_OFFSET else (
            cur.start_offset if cur is not None else NO_START_OFFSET)
        merged = overlay(cur.state_batches if cur is not None else [], batches, start)
        return self.write(key, start, merged, leader_epoch, now_ms, state_epoch=state_epoch)

    def keys_of(self, group_id: str) -> list[ShareStateKey]:
        return [k for k in self.states if k.group_id == group_id]
