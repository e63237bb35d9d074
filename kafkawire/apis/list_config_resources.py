"""ListConfigResources (key 74), versions 0-1 (KIP-1142; ``kafka-configs --describe`` without
an entity name, Admin ``listConfigResources``).

v1: the resources of the requested types (all when the list is empty): BROKER_LOGGER (8) and
BROKER (4) for every broker registered in the cluster's metadata (as Apache Kafka 4.3.1 lists
all three brokers of a 3-node cluster from any of them; a dedicated controller is no broker;
this node when the image has no broker yet), every topic (2, internal ones included), groups (32) and client
metrics (16) that have configs; any other type: UNSUPPORTED_VERSION with no resources, as Kafka.
v0 (``ListClientMetricsResources`` before it was renamed) lists client-metrics resources only.
Groups and client-metrics subscriptions are listed while they have at least one config
(``kafkawire.config_resources``); deleting their last key removes them, as in Kafka.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kraft.image import RESOURCE_BROKER, RESOURCE_GROUP, RESOURCE_TOPIC
from protocol._generated.list_config_resources_request import ListConfigResourcesRequest
from protocol._generated.list_config_resources_response import ListConfigResourcesResponse
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.server import RequestContext

API_KEY = 74
VERSIONS = (0, 1)

RESOURCE_BROKER_LOGGER = 8
RESOURCE_CLIENT_METRICS = 16
KNOWN = (RESOURCE_TOPIC, RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_CLIENT_METRICS,
         RESOURCE_GROUP)

R = ListConfigResourcesResponse


async def handle(
    broker: Broker, ctx: RequestContext, req: ListConfigResourcesRequest
) -> R:
    img = broker.image
    if ctx.api_version == 0:
        wanted: list[int] = [RESOURCE_CLIENT_METRICS]
    else:
        wanted = list(req.resource_types) or list(KNOWN)
        if any(t not in KNOWN for t in wanted):
            return R(throttle_time_ms=0, error_code=ErrorCode.UNSUPPORTED_VERSION,
                     config_resources=[])
    out: list[tuple[str, int]] = []
    nodes = [str(n) for n in sorted(img.brokers)] or [str(broker.node_id)]
    if RESOURCE_BROKER_LOGGER in wanted:
        out += [(n, RESOURCE_BROKER_LOGGER) for n in nodes]
    if RESOURCE_BROKER in wanted:
        out += [(n, RESOURCE_BROKER) for n in nodes]
    if RESOURCE_TOPIC in wanted:
        out += [(name, RESOURCE_TOPIC) for name in sorted(img.topics)]
    for kind in (RESOURCE_GROUP, RESOURCE_CLIENT_METRICS):
        if kind in wanted:
            out += sorted((name, kind) for (t, name), cfg in img.configs.items()
                          if t == kind and cfg)
    return R(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        config_resources=[R.ConfigResource(resource_name=n, resource_type=t) for n, t in out],
    )
