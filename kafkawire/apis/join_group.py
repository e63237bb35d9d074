"""JoinGroup (key 11), versions 0-9 (v0-5 non-flexible: librdkafka; v6+ flexible).

The join phase of the classic protocol (``groups/classic_protocol.py``, state machine in
``groups/states.py``). The request is parked until the rebalance's join phase completes (all
known members joined, or the rebalance timeout), then answered; the leader gets the members.
- v4+ without a member id: MEMBER_ID_REQUIRED with a new id ``<client.id>-<uuid>``
  (``<group.instance.id>-<uuid>`` for static members, which need no handshake).
- v0 has no rebalance timeout: the session timeout is used.
- Errors: INVALID_GROUP_ID, INVALID_SESSION_TIMEOUT (outside group.min/max.session.timeout.ms),
  INCONSISTENT_GROUP_PROTOCOL, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED
  (group.max.size), INVALID_REQUEST (member metadata over groups.config.MEMBER_METADATA_MAX_BYTES),
  NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS.
- v9: ``skip_assignment`` is set for a static leader that rejoined without a rebalance.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from groups.classic import join_error
from kafkawire.coordinators.groups import client_host, on_group
from protocol._generated.join_group_request import JoinGroupRequest
from protocol._generated.join_group_response import JoinGroupResponse

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 11
VERSIONS = (0, 9)


async def handle(broker: Broker, ctx: RequestContext, req: JoinGroupRequest) -> JoinGroupResponse:
    v = ctx.api_version
    host = client_host(ctx)
    resp: JoinGroupResponse = await on_group(
        broker, req.group_id,
        lambda shard, now: shard.join(req, v, ctx.client_id or "", host, now),
        lambda e: join_error(e.code, req.member_id), ctx=ctx,
    )
    if v < 7 and resp.protocol_name is None:
        resp.protocol_name = ""  # nullable from v7 only
    return resp
