"""PushTelemetry (key 72), version 0 (KIP-714; ``kafkawire.ops.telemetry``).

Advertised only with ``metrics.client.telemetry.enable=true``; otherwise UNSUPPORTED_VERSION.
Errors: UNKNOWN_SUBSCRIPTION_ID (unknown client instance, or the subscription changed),
THROTTLING_QUOTA_EXCEEDED (sooner than the push interval), TELEMETRY_TOO_LARGE,
UNSUPPORTED_COMPRESSION_TYPE, INVALID_RECORD (the OTLP payload does not decode).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from kafkawire.ops.telemetry import TelemetryError
from protocol._generated.push_telemetry_request import PushTelemetryRequest
from protocol._generated.push_telemetry_response import PushTelemetryResponse
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 72
VERSIONS = (0, 0)
OPTIONAL = "client_telemetry"


async def handle(broker: Broker, ctx: RequestContext,
                 req: PushTelemetryRequest) -> PushTelemetryResponse:
    if not broker.config.client_telemetry:
        return PushTelemetryResponse(throttle_time_ms=0, error_code=ErrorCode.UNSUPPORTED_VERSION)
    try:
        broker.telemetry.push(broker.image, req.client_instance_id, req.subscription_id,
                              req.terminating, req.compression_type, bytes(req.metrics or b""),
                              int(time.time() * 1000))
    except TelemetryError as e:
        return PushTelemetryResponse(throttle_time_ms=0, error_code=e.code)
    return PushTelemetryResponse(throttle_time_ms=0, error_code=ErrorCode.NONE)
