"""SyncGroup (key 14), versions 0-5 (v0-3 non-flexible: librdkafka; v4+ flexible).

The sync phase: followers are parked until the leader's SyncGroup brings the assignment; then
the group is persisted (GroupMetadataValue in ``__consumer_offsets``) and becomes Stable.
Errors: UNKNOWN_MEMBER_ID (also for unknown groups), FENCED_INSTANCE_ID, ILLEGAL_GENERATION,
INCONSISTENT_GROUP_PROTOCOL (v5 protocol type/name differ), REBALANCE_IN_PROGRESS,
INVALID_REQUEST (an assignment over the member metadata limit), coordinator errors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from groups.classic import sync_error
from kafkawire.coordinators.groups import on_group
from protocol._generated.sync_group_request import SyncGroupRequest
from protocol._generated.sync_group_response import SyncGroupResponse

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 14
VERSIONS = (0, 5)


async def handle(broker: Broker, ctx: RequestContext, req: SyncGroupRequest) -> SyncGroupResponse:
    v = ctx.api_version
    resp: SyncGroupResponse = await on_group(
        broker, req.group_id, lambda shard, now: shard.sync(req, v, now),
        lambda e: sync_error(e.code), ctx=ctx,
    )
    return resp
