"""DeleteGroups (key 42), versions 0-2 (v2 flexible).

An Empty group (or a simple one) is deleted: tombstones for its offsets and its group
metadata are written to ``__consumer_offsets``; it then describes as Dead. Errors per group:
NON_EMPTY_GROUP (members), GROUP_ID_NOT_FOUND (unknown), coordinator errors. A share group
(KIP-932) without members is deleted with its share-partition state in
``__share_group_state``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from groups.shard import GroupShard
from kraft.acls import DELETE, GROUP
from protocol._generated.delete_groups_request import DeleteGroupsRequest
from protocol._generated.delete_groups_response import DeleteGroupsResponse
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 42
VERSIONS = (0, 2)


async def handle(broker: Broker, ctx: RequestContext, req: DeleteGroupsRequest) -> DeleteGroupsResponse:
    out = []
    for group_id in req.groups_names:
        if broker.share.group_known(group_id):
            share_code = await broker.share.delete_group(group_id)
            out.append(DeleteGroupsResponse.DeletableGroupResult(group_id=group_id,
                                                                 error_code=share_code))
            continue

        def op(shard: GroupShard, now: int, g: str = group_id) -> tuple[list[Any], ErrorCode]:
            return shard.delete_group(g, now)

        if not ctx.allowed(DELETE, GROUP, group_id):  # Kafka: DELETE on the group
            code = ErrorCode.GROUP_AUTHORIZATION_FAILED
        else:
            try:
                code = await broker.group_runtime.run(group_id, op)
            except KafkaError as e:
                code = e.code
        out.append(DeleteGroupsResponse.DeletableGroupResult(group_id=group_id, error_code=code))
    return DeleteGroupsResponse(results=out)
