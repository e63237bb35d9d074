"""Shared plumbing of the share-coordinator APIs (keys 83-87, ``kafkawire/apis/*_share_group_
state*.py``): one operation per (topic id, partition) on the ``__share_group_state`` shard
that coordinates the key, coordinator errors per partition.

A state changed through these APIs replaces what the broker keeps in memory: the live share
partition is dropped and reloaded from the new state at its next use (its acquisitions are
lost, as on a leadership change).
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
        broker.share.partitions.pop((group_id, topic_id, partition), None)
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
