"""ApiVersions (key 18), versions 0-4.

Lists every API the registry serves on the connection's listener type with the range we really
implement, computed from the registry: a broker listener never lists the controller-only APIs
(BrokerRegistration, BrokerHeartbeat, AllocateProducerIds, AlterPartition), a controller
listener lists only the APIs Kafka marks "controller". Quirks kept as Kafka keeps them:
- Produce is advertised from v0 although v0-2 are refused (librdkafka turns compression off
  when the advertised minimum is >= 3: KAFKA-18659). See ``produce.ADVERTISED_MIN``.
- The response header is always v0 (KIP-511), handled in ``server``.
- An unsupported ApiVersions version gets a v0 body with UNSUPPORTED_VERSION and our key-18
  range (``server.api_versions_fallback``).
v3+: SupportedFeatures / FinalizedFeatures / FinalizedFeaturesEpoch (tagged). metadata.version,
eligible.leader.replicas.version (as Kafka 4.3 bootstraps), group.version (KIP-848, when
enabled) and transaction.version 2 (KIP-890 part 2) are finalized.
The ConsumerGroup* APIs are listed even while the consumer protocol is off (group.version 0,
or ``group.coordinator.rebalance.protocols`` without ``consumer``), as Kafka 4.3.1 lists them;
they answer UNSUPPORTED_VERSION then.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from protocol._generated.api_versions_request import ApiVersionsRequest
from protocol._generated.api_versions_response import ApiVersionsResponse
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 18
VERSIONS = (0, 4)

_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


async def handle(
    broker: Broker, ctx: RequestContext, req: ApiVersionsRequest
) -> ApiVersionsResponse:
    from kafkawire.apis import REGISTRY

    if ctx.api_version >= 3:
        name, ver = req.client_software_name, req.client_software_version
        if not _SOFTWARE.match(name or "") or not _SOFTWARE.match(ver or ""):
            return ApiVersionsResponse(error_code=ErrorCode.INVALID_REQUEST)
        ctx.connection.client_software = (name, ver)
    resp = ApiVersionsResponse(
        error_code=0,
        api_keys=[
            ApiVersionsResponse.ApiVersion(
                api_key=h.api_key, min_version=h.advertised_min, max_version=h.max_version
            )
            for h in sorted(REGISTRY.values(), key=lambda h: h.api_key)
            if ctx.connection.listener_type in h.listeners
            and (not h.optional or getattr(broker.config, h.optional))
        ],
        throttle_time_ms=0,
    )
    if ctx.api_version >= 3:
        img = broker.image
        # as Kafka: v3 lists only metadata.version as supported, v4 every feature
        resp.supported_features = [
            ApiVersionsResponse.SupportedFeatureKey(name=n, min_version=lo, max_version=hi)
            for n, (lo, hi) in sorted(broker.supported_features().items())
            if ctx.api_version >= 4 or n == "metadata.version"
        ]
        resp.finalized_features_epoch = img.offset
        resp.finalized_features = [
            ApiVersionsResponse.FinalizedFeatureKey(
                name=n, max_version_level=lvl, min_version_level=lvl
            )
            for n, lvl in sorted(img.features.items())
        ]
    return resp
