"""ListGroups (key 16), versions 0-5 (v3+ flexible).

Every group of every loaded ``__consumer_offsets`` shard of this node (simple groups created by
commits included, protocol type ""). v4+ ``states_filter`` and v5+ ``types_filter`` are
case-insensitive, as Kafka's; v0-3 have no state/type in the answer. A shard still loading
makes the answer COORDINATOR_LOAD_IN_PROGRESS (with the groups that are known). Share groups
(KIP-932, ``kafkawire.coordinators.share``) are listed with type and protocol type ``share``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kraft.acls import CLUSTER, CLUSTER_NAME, DESCRIBE, GROUP
from protocol._generated.list_groups_request import ListGroupsRequest
from protocol._generated.list_groups_response import ListGroupsResponse
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 16
VERSIONS = (0, 5)


async def handle(broker: Broker, ctx: RequestContext, req: ListGroupsRequest) -> ListGroupsResponse:
    v = ctx.api_version
    states = list(req.states_filter) if v >= 4 else []
    types = list(req.types_filter) if v >= 5 else []
    runtime = broker.group_runtime
    groups = []
    for _p, shard in runtime.loaded_shards():
        groups += shard.list_groups(states, types)  # type: ignore[attr-defined]
    groups += broker.share.list_groups(states, types)
    # Kafka: DESCRIBE on the cluster lists every group, else those the principal may DESCRIBE
    if not ctx.allowed(DESCRIBE, CLUSTER, CLUSTER_NAME, log_denied=False):
        groups = [g for g in groups
                  if ctx.allowed(DESCRIBE, GROUP, g.group_id, log_denied=False)]
    loading = any(not s.loaded for s in runtime.slots.values())
    code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if loading else ErrorCode.NONE
    return ListGroupsResponse(error_code=code, groups=groups)
