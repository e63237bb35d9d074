"""Shared plumbing of the share-coordinator APIs (keys 83-87, ``kafkawire/apis/*_share_group_
state*.py``): one operation per (topic id, partition) on the ``__share_group_state`` shard
that coordinates the key, coordinator errors per partition.

The operations themselves (``read_op``, ``write_op``, ``initialize_op``, ``delete_op``) are
shared with ``kafkawire.share_persister``, which runs them on a local shard directly and sends
the same APIs to the leader of the key's ``__share_group_state`` partition otherwise.

A state changed by Initialize or Delete replaces what this broker keeps in memory: a live
share partition of the key here is dropped and reloaded from the new state at its next use
(its acquisitions are lost, as on a leadership change).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from groups.share_state import ShareStateShard
from protocol.coordinator import CoordinatorRecord
from protocol.errors import ErrorCode, KafkaError
from protocol.share_state import ShareStateKey

if TYPE_CHECKING:
    from kafkawire.broker import Broker

Op = Callable[[ShareStateShard, ShareStateKey, int], tuple[list[CoordinatorRecord], Any]]
P = TypeVar("P")
T = TypeVar("T")
Batch = tuple[int, int, int, int]


def read_op(leader_epoch: int, *, update_epoch: bool) -> Op:
    """The stored state (None: never initialized); FENCED_LEADER_EPOCH for a leader epoch older
    than the stored one. With ``update_epoch`` (ReadShareGroupState, a share-partition leader
    loading the state) a newer leader epoch is stored, as Kafka's share coordinator does, so
    that the writes of a deposed leader are fenced from then on."""
    def op(shard: ShareStateShard, key: ShareStateKey, now: int) -> tuple[list[Any], Any]:
        shard.check_epochs(key, None, leader_epoch)
        cur = shard.states.get(key)
        if cur is None or not update_epoch or leader_epoch <= cur.leader_epoch:
            return [], cur
        records = shard.write(key, cur.start_offset, list(cur.state_batches), leader_epoch,
                              now, state_epoch=cur.state_epoch)
        return records, cur
    return op


def write_op(state_epoch: int, leader_epoch: int, start: int, batches: list[Batch]) -> Op:
    """WriteShareGroupState: ``batches`` over the stored ones, start offset -1 kept."""
    def op(shard: ShareStateShard, key: ShareStateKey, now: int) -> tuple[list[Any], None]:
        return shard.write_delta(key, state_epoch, leader_epoch, start, batches, now), None
    return op


def initialize_op(state_epoch: int, start: int) -> Op:
    def op(shard: ShareStateShard, key: ShareStateKey, now: int) -> tuple[list[Any], None]:
        return shard.initialize(key, state_epoch, start, now), None
    return op


def delete_op() -> Op:
    def op(shard: ShareStateShard, key: ShareStateKey, _now: int) -> tuple[list[Any], None]:
        return shard.delete(key), None
    return op


def delivery_complete_count(v: Any) -> int:
    """Records at or after the start offset that are acknowledged or archived."""
    return sum(b[1] - max(b[0], v.start_offset) + 1 for b in v.state_batches
               if b[2] in (2, 4) and b[1] >= v.start_offset)


async def on_key(broker: Broker, group_id: str, topic_id: uuid.UUID, partition: int,
                 op: Op, *, mutates: bool) -> tuple[ErrorCode, Any]:
    """(error, reply) of ``op`` on the shard of the key."""
    key = ShareStateKey(group_id, topic_id, partition)
    if not group_id:
        return ErrorCode.INVALID_REQUEST, None

    def run(shard: Any, now: int) -> tuple[list[CoordinatorRecord], Any]:
        try:
            return op(shard, key, now)
        except KafkaError as e:
            return [], e

    if broker.share_runtime.topic.name not in broker.image.topics:
        return await broker.share_runtime.ensure_topic(), None  # created on first need
    try:
        reply = await broker.share_runtime.run(key.coordinator_key(), run)
    except KafkaError as e:
        return e.code, None
    if isinstance(reply, KafkaError):
        return reply.code, None
    if mutates:
        broker.share.forget((group_id, topic_id, partition))
    return ErrorCode.NONE, reply


async def per_partition(
    broker: Broker, group_id: str, topics: Iterable[Any], op_for: Callable[[Any], Op],
    result: Callable[[Any, ErrorCode, Any], P], topic_result: Callable[[uuid.UUID, list[P]], T],
    *, mutates: bool,
) -> list[T]:
    """The loop of every share-state API: ``op_for(partition)`` on the key of each requested
    partition (in request order), ``result(partition, error, reply)`` per partition and
    ``topic_result(topic id, partition results)`` per topic."""
    results = []
    for t in topics:
        parts = []
        for p in t.partitions:
            code, reply = await on_key(broker, group_id, t.topic_id, p.partition, op_for(p),
                                       mutates=mutates)
            parts.append(result(p, code, reply))
        results.append(topic_result(t.topic_id, parts))
    return results
