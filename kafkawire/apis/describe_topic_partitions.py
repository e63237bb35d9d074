"""DescribeTopicPartitions (key 75), version 0 (KIP-966; Admin.describeTopics in Java 3.9+).

- An empty topic list means every topic; otherwise the named ones. Topics are answered in name
  order, starting at the cursor (topic name, partition index) when one is given.
- Paging: at most ``response_partition_limit`` partitions (clamped to [1, 2000], Kafka's
  ``max.request.partition.size.limit`` default). When a topic does not fit, its partitions up
  to the limit are returned and ``next_cursor`` names the first one left out; when the limit is
  reached exactly at a topic boundary, ``next_cursor`` points at partition 0 of the next topic.
- A named topic that does not exist: UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an
  illegal name) with a zero topic id; with the all-topics form such topics cannot occur.
- Partitions carry leader (-1 unless alive on the request's listener), leader epoch, replicas,
  ISR, eligible_leader_replicas and last_known_elr (KIP-966, as the controller keeps them:
  kraft/partition_change.py) and offline replicas
  (fenced, unknown or without that listener).
- ``topic_authorized_operations``: every topic operation (no authorizer).
- A cursor topic missing from the requested list, or a negative cursor partition:
  INVALID_REQUEST for every requested topic (Kafka's request-level error).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kafkawire.apis.metadata import AUTH_OPS_NOT_REQUESTED, TOPIC_ALL_OPS
from kraft.acls import DESCRIBE, TOPIC
from kraft.controller import validate_topic_name
from kraft.image import MetadataImage, TopicImage
from protocol._generated.describe_topic_partitions_request import (
    DescribeTopicPartitionsRequest,
)
from protocol._generated.describe_topic_partitions_response import (
    DescribeTopicPartitionsResponse,
)
from protocol.errors import ErrorCode, KafkaError
from protocol.primitives import ZERO_UUID

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 75
VERSIONS = (0, 0)

PARTITION_LIMIT_MAX = 2000
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state", "__share_group_state")

Response = DescribeTopicPartitionsResponse
Topic = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic
Partition = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponsePartition
Cursor = DescribeTopicPartitionsResponse.Cursor


def partitions_of(
    image: MetadataImage, topic: TopicImage, listener: str, start: int, count: int
) -> tuple[list[Partition], int]:
    """(partitions [start, start+count) of ``topic``, next partition index or -1)."""
    live = {
        b.broker_id
        for b in image.brokers.values()
        if not b.fenced and any(e.listener == listener for e in b.endpoints)
    }
    total = len(topic.partitions)
    upper = min(total, start + count)
    out = []
    for index in range(start, upper):
        p = topic.partitions.get(index)
        if p is None:
            continue
        out.append(Partition(
            error_code=ErrorCode.NONE,
            partition_index=index,
            leader_id=p.leader if p.leader in live else -1,
            leader_epoch=p.leader_epoch,
            replica_nodes=list(p.replicas),
            isr_nodes=list(p.isr),
            eligible_leader_replicas=list(p.eligible_leader_replicas),
            last_known_elr=list(p.last_known_elr),
            offline_replicas=[r for r in p.replicas if r not in live],
        ))
    return out, (upper if upper < total else -1)


def missing_topic(name: str) -> Topic:
    try:
        validate_topic_name(name)
        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    except KafkaError:
        code = ErrorCode.INVALID_TOPIC_EXCEPTION
    return Topic(error_code=code, name=name, topic_id=ZERO_UUID,
                 is_internal=name in INTERNAL_TOPICS, partitions=[],
                 topic_authorized_operations=TOPIC_ALL_OPS)


def _everything(_name: str, _log_denied: bool) -> bool:
    return True


def describe(
    image: MetadataImage, req: DescribeTopicPartitionsRequest, listener: str,
    allowed: Callable[[str, bool], bool] | None = None,
    operations: Callable[[str], int] = lambda _name: TOPIC_ALL_OPS,
) -> DescribeTopicPartitionsResponse:
    """``allowed``: may the principal DESCRIBE the topic (all topics: the others are left out;
    named: TOPIC_AUTHORIZATION_FAILED); ``operations``: its authorized-operations bits."""
    if allowed is None:
        allowed = _everything
    cursor = req.cursor
    cursor_topic = cursor.topic_name if cursor is not None else ""
    fetch_all = not req.topics
    candidates = [n for n in image.topics if allowed(n, False)] if fetch_all else [
        t.name for t in req.topics]
    names = sorted({n for n in candidates if n >= cursor_topic})
    if cursor is not None and not fetch_all and cursor.topic_name not in names:
        return request_error(req)
    if cursor is not None and cursor.partition_index < 0:
        return request_error(req)
    remaining = max(min(PARTITION_LIMIT_MAX, req.response_partition_limit), 1)
    resp = Response(throttle_time_ms=0, topics=[], next_cursor=None)
    for name in names:
        if remaining == 0:
            resp.next_cursor = Cursor(topic_name=name, partition_index=0)
            break
        topic = image.topics.get(name)
        if not allowed(name, True):
            resp.topics.append(Topic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name,
                                     topic_id=ZERO_UUID, is_internal=False, partitions=[],
                                     topic_authorized_operations=AUTH_OPS_NOT_REQUESTED))
            continue
        if topic is None:
            if not fetch_all:
                resp.topics.append(missing_topic(name))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor_topic else 0
        parts, next_index = partitions_of(image, topic, listener, start, remaining)
        resp.topics.append(Topic(
            error_code=ErrorCode.NONE, name=name, topic_id=topic.topic_id,
            is_internal=topic.is_internal, partitions=parts,
            topic_authorized_operations=operations(name),
        ))
        if next_index != -1:
            resp.next_cursor = Cursor(topic_name=name, partition_index=next_index)
            break
        remaining -= len(parts)
    return resp


def request_error(req: DescribeTopicPartitionsRequest) -> DescribeTopicPartitionsResponse:
    return Response(
        throttle_time_ms=0,
        topics=[
            Topic(error_code=ErrorCode.INVALID_REQUEST, name=t.name, topic_id=ZERO_UUID,
                  is_internal=False, partitions=[])
            for t in req.topics
        ],
        next_cursor=None,
    )


async def handle(
    broker: Broker, ctx: RequestContext, req: DescribeTopicPartitionsRequest
) -> DescribeTopicPartitionsResponse:
    return describe(broker.image, req, ctx.connection.listener,
                    lambda name, log: ctx.allowed(DESCRIBE, TOPIC, name, log),
                    lambda name: ctx.operations(TOPIC, name))
