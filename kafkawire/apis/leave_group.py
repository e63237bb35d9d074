"""LeaveGroup (key 13), versions 0-5 (v0-1 non-flexible: librdkafka; v4+ flexible).

v0-2 remove one ``member_id``; v3+ a batch of member identities (static members by
``group_instance_id``), each with its own error (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID). A
departure from a Stable/CompletingRebalance group starts a rebalance; the last member leaving
makes the group Empty. Unknown group: UNKNOWN_MEMBER_ID (top level), as Kafka 4.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkawire.coordinators.groups import on_group
from protocol._generated.leave_group_request import LeaveGroupRequest
from protocol._generated.leave_group_response import LeaveGroupResponse

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 13
VERSIONS = (0, 5)


async def handle(broker: Broker, ctx: RequestContext, req: LeaveGroupRequest) -> LeaveGroupResponse:
    v = ctx.api_version
    resp: LeaveGroupResponse = await on_group(
        broker, req.group_id, lambda shard, now: shard.leave(req, v, now),
        lambda e: LeaveGroupResponse(error_code=e.code, members=[]), ctx=ctx,
    )
    return resp
