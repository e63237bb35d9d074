"""ConsumerGroupHeartbeat (key 68), versions 0-1 (KIP-848; flexible).

The next-generation consumer protocol (``groups/consumer.py``): the member sends its
subscription (names, or v1 a regex) and the partitions it owns; the coordinator bumps the
group epoch on changes, computes the target assignment with a server-side assignor
(``uniform`` default, ``range``; ``group.consumer.assignors``) and answers with the member's
epoch and the partitions it may own now (incremental reconciliation). Epoch 0 joins, -1
leaves, -2 leaves a static member. v0 may let the coordinator pick the member id; v1 requires
the client's own. Advertised only while ``group.version`` >= 1 is finalized; when UpdateFeatures
lowers it, UNSUPPORTED_VERSION (as Kafka).
Errors: INVALID_REQUEST, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, UNSUPPORTED_ASSIGNOR,
INVALID_REGULAR_EXPRESSION, GROUP_ID_NOT_FOUND (a non-empty classic group of that id),
GROUP_MAX_SIZE_REACHED (``group.consumer.max.size``), coordinator errors.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from kafkawire.coordinators.groups import client_host, consumer_protocol_enabled, on_group
from kraft.acls import DESCRIBE, GROUP, READ, TOPIC
from protocol._generated.consumer_group_heartbeat_request import ConsumerGroupHeartbeatRequest
from protocol._generated.consumer_group_heartbeat_response import ConsumerGroupHeartbeatResponse
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 68
VERSIONS = (0, 1)


def topics_view(broker: Broker) -> dict[str, tuple[uuid.UUID, int]]:
    """Every topic, internal ones included: Kafka subscribes and matches regexes over them."""
    return {t.name: (t.topic_id, len(t.partitions)) for t in broker.image.topics.values()}


async def handle(
    broker: Broker, ctx: RequestContext, req: ConsumerGroupHeartbeatRequest
) -> ConsumerGroupHeartbeatResponse:
    if not consumer_protocol_enabled(broker):
        # group.version lowered with UpdateFeatures, or the consumer protocol left out of
        # group.coordinator.rebalance.protocols: Kafka answers so (and still lists the API)
        return ConsumerGroupHeartbeatResponse(
            error_code=ErrorCode.UNSUPPORTED_VERSION, error_message=None, member_id=None,
            assignment=None,
        )
    v = ctx.api_version
    host = client_host(ctx)
    if not ctx.allowed(READ, GROUP, req.group_id):
        return ConsumerGroupHeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                              error_message=None)
    # Kafka: DESCRIBE on every subscribed topic name
    denied = sorted(n for n in req.subscribed_topic_names or []
                    if not ctx.allowed(DESCRIBE, TOPIC, n))
    if denied:
        return ConsumerGroupHeartbeatResponse(
            error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            error_message="The following topics are not authorized: " + ", ".join(denied))
    topics = topics_view(broker)
    version = broker.image.offset
    resp: ConsumerGroupHeartbeatResponse = await on_group(
        broker, req.group_id,
        lambda shard, now: shard.consumer_heartbeat(req, v, ctx.client_id or "", host, topics, now, version),
        lambda e: ConsumerGroupHeartbeatResponse(error_code=e.code, error_message=e.message), ctx=ctx,
    )
    return resp
