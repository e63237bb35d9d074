"""ConsumerGroupDescribe (key 69), versions 0-1 (KIP-848; flexible).

Per group: state (Empty, Assigning, Reconciling, Stable), group and assignment epochs, the
assignor, and every member with its subscription, current and target assignment (topic ids
and names). Unknown groups and classic groups: GROUP_ID_NOT_FOUND. Advertised only while
``group.version`` >= 1 is finalized. ``include_authorized_operations``: the principal's group operations (READ, DELETE, DESCRIBE,
DESCRIBE_CONFIGS, ALTER_CONFIGS).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkawire.group_coordinator import consumer_protocol_enabled
from kraft.acls import DESCRIBE, GROUP
from protocol._generated.consumer_group_describe_request import ConsumerGroupDescribeRequest
from protocol._generated.consumer_group_describe_response import ConsumerGroupDescribeResponse
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.server import RequestContext

API_KEY = 69
VERSIONS = (0, 1)


async def handle(
    broker: Broker, ctx: RequestContext, req: ConsumerGroupDescribeRequest
) -> ConsumerGroupDescribeResponse:
    names = {t.topic_id: t.name for t in broker.image.topics.values()}
    out = []
    disabled = not consumer_protocol_enabled(broker)
    for gid in req.group_ids:
        if not ctx.allowed(DESCRIBE, GROUP, gid):  # Kafka: DESCRIBE on the group
            out.append(ConsumerGroupDescribeResponse.DescribedGroup(
                error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id=gid, members=[]))
            continue
        try:
            if disabled:  # as Kafka answers then (see consumer_protocol_enabled)
                raise KafkaError(ErrorCode.UNSUPPORTED_VERSION)
            shard = broker.group_runtime.shard_for(gid)
        except KafkaError as e:
            out.append(ConsumerGroupDescribeResponse.DescribedGroup(
                error_code=e.code, group_id=gid, members=[]))
            continue
        d: ConsumerGroupDescribeResponse.DescribedGroup = shard.consumer_describe(gid, names)  # type: ignore[attr-defined]
        if req.include_authorized_operations:
            d.authorized_operations = ctx.operations(GROUP, gid)
        out.append(d)
    return ConsumerGroupDescribeResponse(groups=out)
