"""Metadata (key 3), versions 0-13.

- Topics null (v1+) or empty (v0) = all topics. v12+ topics may be named by topic id; a null
  name or a topic id in v10/v11 fails the whole request as Kafka does: every topic
  INVALID_REQUEST (null names sent back as ""), no brokers, controller -1.
- Auto topic creation when ``allow_auto_topic_creation`` (always for v0-3) and
  ``auto.create.topics.enable``: created with ``num.partitions`` and
  ``default.replication.factor``. Like Kafka, the request that triggers the creation is
  answered UNKNOWN_TOPIC_OR_PARTITION; the next request sees the topic (ours is already
  committed by then, creation being synchronous on a single node).
- Brokers are listed with the endpoint of the listener the request came in on; the
  controller id is this live node (librdkafka's admin client waits for it).
- Authorized operations: -2147483648 (not requested) unless asked, then the principal's
  (``kafkawire.security.authorizer``; all operations without an authorizer).
- Authorization as Kafka: listing all topics leaves out those the principal may not DESCRIBE;
  a named one it may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED; auto-creation needs CREATE on
  the cluster or on the topic, else TOPIC_AUTHORIZATION_FAILED.
- v13: top-level error code (unused, 0).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from kraft.acls import CLUSTER, CLUSTER_NAME, CREATE, DESCRIBE, TOPIC
from kraft.controller import validate_topic_name
from kraft.image import MetadataImage, TopicImage
from protocol._generated.metadata_request import MetadataRequest
from protocol._generated.metadata_response import MetadataResponse
from protocol.errors import ErrorCode, KafkaError
from protocol.primitives import ZERO_UUID

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 3
VERSIONS = (0, 13)

AUTH_OPS_NOT_REQUESTED = -2147483648
# READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS (bit = op code)
TOPIC_ALL_OPS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
# CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE
# (what Kafka 4.3 reports for the cluster resource: 8096)
CLUSTER_ALL_OPS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))

Topic = MetadataResponse.MetadataResponseTopic
Partition = MetadataResponse.MetadataResponsePartition


def topic_metadata(img: MetadataImage, topic: TopicImage, version: int, auth_ops: int) -> Topic:
    return Topic(
        error_code=ErrorCode.NONE,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.is_internal,
        partitions=_PARTITIONS.get(img, topic),
        topic_authorized_operations=auth_ops,
    )


def _partitions(topic: TopicImage, live: frozenset[int]) -> list[Partition]:
    parts = []
    for p in sorted(topic.partitions.values(), key=lambda p: p.partition):
        leader = p.leader if p.leader in live else -1
        parts.append(
            Partition(
                error_code=ErrorCode.NONE if leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
                partition_index=p.partition,
                leader_id=leader,
                leader_epoch=p.leader_epoch,
                replica_nodes=list(p.replicas),
                isr_nodes=list(p.isr),
                offline_replicas=[r for r in p.replicas if r not in live],
            )
        )
    return parts


class _PartitionsCache:
    """A topic's partition entries, built once per TopicImage and set of live brokers.

    Images are immutable (a changed topic is a new TopicImage), and building the entries costs
    a few microseconds per partition: with 100,000 partitions a client refreshing its metadata
    would otherwise cost the event loop a second or more each time. The entries are shared by
    the answers and never modified (encoding only reads them)."""

    def __init__(self) -> None:
        self._entries: dict[str, tuple[TopicImage, frozenset[int], list[Partition]]] = {}

    def get(self, img: MetadataImage, topic: TopicImage) -> list[Partition]:
        live = frozenset(b for b, info in img.brokers.items() if not info.fenced)
        entry = self._entries.get(topic.name)
        if entry is not None and entry[0] is topic and entry[1] == live:
            return entry[2]
        parts = _partitions(topic, live)
        if len(self._entries) > 2 * len(img.topics) + 16:  # deleted topics' entries go
            self._entries = {n: e for n, e in self._entries.items()
                             if img.topics.get(n) is e[0]}
        self._entries[topic.name] = (topic, live, parts)
        return parts


_PARTITIONS = _PartitionsCache()


def error_topic(name: str | None, code: ErrorCode, topic_id: uuid.UUID = ZERO_UUID) -> Topic:
    return Topic(error_code=code, name=name, topic_id=topic_id, is_internal=False, partitions=[])


def invalid_request(req: MetadataRequest) -> MetadataResponse:
    """Kafka's error response to a whole Metadata request (null names or topic ids before
    v12): every topic INVALID_REQUEST, a null name sent back as "" (v10/v11 responses cannot
    carry a null name), no brokers, no cluster id, controller -1."""
    return MetadataResponse(
        throttle_time_ms=0,
        topics=[
            Topic(error_code=ErrorCode.INVALID_REQUEST, name=rt.name or "", topic_id=rt.topic_id,
                  is_internal=False, partitions=[])
            for rt in req.topics or []
        ],
        error_code=ErrorCode.INVALID_REQUEST,
    )


async def _requested_topic(
    broker: Broker, ctx: RequestContext, rt: MetadataRequest.MetadataRequestTopic, v: int,
    auto_create: bool, described: Callable[[TopicImage], Topic],
) -> Topic:
    name = rt.name
    if name is None:
        if v >= 10 and rt.topic_id != ZERO_UUID:
            found = broker.image.topics_by_id.get(rt.topic_id)
            if found is None:
                return error_topic(None, ErrorCode.UNKNOWN_TOPIC_ID, rt.topic_id)
            if not ctx.allowed(DESCRIBE, TOPIC, found.name):
                return error_topic(None, ErrorCode.TOPIC_AUTHORIZATION_FAILED, rt.topic_id)
            return described(found)
        return error_topic(None, ErrorCode.INVALID_REQUEST)
    if not ctx.allowed(DESCRIBE, TOPIC, name):
        return error_topic(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    t: TopicImage | None = broker.image.topics.get(name)
    if t is not None:
        return described(t)
    try:
        validate_topic_name(name)
    except KafkaError:
        return error_topic(name, ErrorCode.INVALID_TOPIC_EXCEPTION)
    if not auto_create or name.startswith("__"):
        return error_topic(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if not (ctx.allowed(CREATE, CLUSTER, CLUSTER_NAME) or ctx.allowed(CREATE, TOPIC, name)):
        return error_topic(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    # As Kafka: the request that triggers creation is answered UNKNOWN_TOPIC_OR_PARTITION (or
    # the creation error); the topic is there for the client's next Metadata request.
    code = await broker.auto_create_topic(name)
    return error_topic(name, code or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


async def handle(broker: Broker, ctx: RequestContext, req: MetadataRequest) -> MetadataResponse:
    v = ctx.api_version
    auto_create = (req.allow_auto_topic_creation if v >= 4 else True) and (
        broker.config.auto_create_topics_enable
    )
    want_topic_ops = v >= 8 and req.include_topic_authorized_operations

    def described(t: TopicImage) -> Topic:
        ops = ctx.operations(TOPIC, t.name) if want_topic_ops else AUTH_OPS_NOT_REQUESTED
        return topic_metadata(broker.image, t, v, ops)

    topics: list[Topic] = []
    all_topics = req.topics is None or (v == 0 and not req.topics)
    if not all_topics and v < 12 and req.topics is not None and any(
        rt.name is None or rt.topic_id != ZERO_UUID for rt in req.topics
    ):
        return invalid_request(req)
    if all_topics:  # as Kafka: topics the principal may not DESCRIBE are left out
        for ti in sorted(broker.image.topics.values(), key=lambda x: x.name):
            if ctx.allowed(DESCRIBE, TOPIC, ti.name, log_denied=False):
                topics.append(described(ti))
    else:
        assert req.topics is not None
        for rt in req.topics:
            topics.append(await _requested_topic(broker, ctx, rt, v, auto_create, described))
    img = broker.image
    listener = ctx.connection.listener
    brokers = []
    for b in sorted(img.brokers.values(), key=lambda b: b.broker_id):
        if b.fenced:
            continue
        ep = next((e for e in b.endpoints if e.listener == listener), None)
        if ep is None:
            continue
        brokers.append(
            MetadataResponse.MetadataResponseBroker(
                node_id=b.broker_id, host=ep.host, port=ep.port, rack=b.rack
            )
        )
    cluster_ops = (
        ctx.operations(CLUSTER, CLUSTER_NAME)
        if 8 <= v <= 10 and req.include_cluster_authorized_operations
        else AUTH_OPS_NOT_REQUESTED
    )
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=brokers,
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        topics=topics,
        cluster_authorized_operations=cluster_ops,
        error_code=0,
    )
