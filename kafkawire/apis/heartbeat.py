"""Heartbeat (key 12), versions 0-4 (v0-3 non-flexible: librdkafka; v4 flexible).

Keeps a classic member alive (its session timer restarts). Answers REBALANCE_IN_PROGRESS
during the join phase (the member must rejoin), NONE when Stable or CompletingRebalance;
UNKNOWN_MEMBER_ID for unknown groups/members (and Empty groups), ILLEGAL_GENERATION,
FENCED_INSTANCE_ID, coordinator errors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkawire.coordinators.groups import on_group
from protocol._generated.heartbeat_request import HeartbeatRequest
from protocol._generated.heartbeat_response import HeartbeatResponse
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 12
VERSIONS = (0, 4)


async def handle(broker: Broker, ctx: RequestContext, req: HeartbeatRequest) -> HeartbeatResponse:
    v = ctx.api_version
    code: ErrorCode = await on_group(
        broker, req.group_id, lambda shard, now: shard.heartbeat(req, v, now), lambda e: e.code, ctx=ctx)
    return HeartbeatResponse(error_code=code)
