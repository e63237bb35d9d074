"""DescribeGroups (key 15), versions 0-6 (v5+ flexible).

Per group, from its shard: state, protocol type, protocol name and members (with metadata and
assignment only when Stable, as Kafka). An unknown group describes as ``Dead`` with NONE up to
v5; v6 (KIP-1043) answers GROUP_ID_NOT_FOUND for it. Coordinator errors per group.
``include_authorized_operations`` (v3+): the principal's operations of READ, DELETE, DESCRIBE,
DESCRIBE_CONFIGS, ALTER_CONFIGS (Kafka 4.x's group operations; all five without an authorizer).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kraft.acls import DESCRIBE, GROUP
from protocol._generated.describe_groups_request import DescribeGroupsRequest
from protocol._generated.describe_groups_response import DescribeGroupsResponse
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.server import RequestContext

API_KEY = 15
VERSIONS = (0, 6)

AUTH_OPS_NOT_REQUESTED = -2147483648


async def handle(broker: Broker, ctx: RequestContext, req: DescribeGroupsRequest) -> DescribeGroupsResponse:
    v = ctx.api_version
    out = []
    for group_id in req.groups:
        if not ctx.allowed(DESCRIBE, GROUP, group_id):  # Kafka: DESCRIBE on the group
            out.append(DescribeGroupsResponse.DescribedGroup(
                error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id=group_id,
                group_state="", members=[], protocol_type="", protocol_data=""))
            continue
        try:
            shard = broker.group_runtime.shard_for(group_id)
        except KafkaError as e:
            out.append(DescribeGroupsResponse.DescribedGroup(
                error_code=e.code, group_id=group_id, group_state="", members=[],
            ))
            continue
        d: DescribeGroupsResponse.DescribedGroup = shard.describe(group_id)  # type: ignore[attr-defined]
        if v >= 6 and d.group_state == "Dead":
            d.error_code = ErrorCode.GROUP_ID_NOT_FOUND
            d.error_message = f"Group {group_id} not found."
        if v >= 3 and req.include_authorized_operations:
            d.authorized_operations = ctx.operations(GROUP, group_id)
        out.append(d)
    # Kafka answers the groups the principal may not DESCRIBE first
    out.sort(key=lambda d: d.error_code != ErrorCode.GROUP_AUTHORIZATION_FAILED)
    return DescribeGroupsResponse(groups=out)
