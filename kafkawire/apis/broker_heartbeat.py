"""BrokerHeartbeat (key 63), versions 0-2; controller listener only.

Every ``broker.heartbeat.interval.ms`` a registered broker reports its metadata offset; the
controller keeps its session (``broker.session.timeout.ms``) and answers:
- ``is_caught_up``: the offset reached the broker's registration record;
- ``is_fenced``: a fenced broker is unfenced once caught up unless ``want_fence``;
- ``should_shut_down``: ``want_shut_down`` starts a controlled shutdown (leadership moves
  away), answered true once the broker leads nothing (it is fenced then).
STALE_BROKER_EPOCH for an unknown broker or an old epoch (kraft/cluster_control.py).
v1 ``offline_log_dirs``, v2 ``cordoned_log_dirs``: not modelled (one log directory per node).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol._generated.broker_heartbeat_request import BrokerHeartbeatRequest
from protocol._generated.broker_heartbeat_response import BrokerHeartbeatResponse
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 63
VERSIONS = (0, 2)


async def handle(
    broker: Broker, ctx: RequestContext, req: BrokerHeartbeatRequest
) -> BrokerHeartbeatResponse:
    try:
        reply = await broker.controller.heartbeat(
            req.broker_id, req.broker_epoch, req.current_metadata_offset, req.want_fence,
            req.want_shut_down)
    except KafkaError as e:
        return BrokerHeartbeatResponse(throttle_time_ms=0, error_code=e.code, is_caught_up=False,
                                       is_fenced=True, should_shut_down=False)
    return BrokerHeartbeatResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, is_caught_up=reply.is_caught_up,
        is_fenced=reply.is_fenced, should_shut_down=reply.should_shut_down)
