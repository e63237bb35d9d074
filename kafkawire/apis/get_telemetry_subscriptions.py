"""GetTelemetrySubscriptions (key 71), version 0 (KIP-714; ``kafkawire.ops.telemetry``).

Advertised only with ``metrics.client.telemetry.enable=true`` (as Kafka advertises it only with
a telemetry-receiving metrics reporter); otherwise answered with UNSUPPORTED_VERSION. A zero
client instance id gets a fresh one. The subscription comes from the client-metrics configs
that match the client (client id, software name and version from ApiVersions, source address
and port); no match: no requested metrics, and the client pushes nothing.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING

from kafkawire.ops.telemetry import ACCEPTED_COMPRESSION, TELEMETRY_MAX_BYTES
from protocol._generated.get_telemetry_subscriptions_request import (
    GetTelemetrySubscriptionsRequest,
)
from protocol._generated.get_telemetry_subscriptions_response import (
    GetTelemetrySubscriptionsResponse,
)
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 71
VERSIONS = (0, 0)
#: advertised in ApiVersions only when the broker receives client telemetry
OPTIONAL = "client_telemetry"


def client_labels(ctx: RequestContext) -> dict[str, str]:
    host, _, port = ctx.connection.peer.rpartition(":")
    name, version = ctx.connection.client_software or ("", "")
    return {"client_id": ctx.client_id or "", "client_software_name": name,
            "client_software_version": version, "client_source_address": host,
            "client_source_port": port}


async def handle(broker: Broker, ctx: RequestContext,
                 req: GetTelemetrySubscriptionsRequest) -> GetTelemetrySubscriptionsResponse:
    resp = GetTelemetrySubscriptionsResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, client_instance_id=uuid.UUID(int=0),
        subscription_id=0, accepted_compression_types=[], push_interval_ms=0,
        telemetry_max_bytes=0, delta_temporality=False, requested_metrics=[])
    if not broker.config.client_telemetry:
        resp.error_code = ErrorCode.UNSUPPORTED_VERSION
        return resp
    iid, sub = broker.telemetry.get_subscription(
        broker.image, req.client_instance_id, client_labels(ctx), int(time.time() * 1000))
    resp.client_instance_id = iid
    resp.subscription_id = sub.subscription_id
    resp.accepted_compression_types = list(ACCEPTED_COMPRESSION)
    resp.push_interval_ms = sub.push_interval_ms
    resp.telemetry_max_bytes = TELEMETRY_MAX_BYTES
    resp.requested_metrics = sub.metrics
    return resp
