"""DeleteShareGroupState (key 86), version 0 (KIP-932 share coordinator; flexible).

Tombstones a share partition's state in ``__share_group_state`` (nothing to delete is not an
error). Per partition: INVALID_REQUEST without a group id, coordinator errors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkawire.coordinators.share_state_apis import per_partition
from protocol._generated.delete_share_group_state_request import DeleteShareGroupStateRequest
from protocol._generated.delete_share_group_state_response import (
    DeleteShareGroupStateResponse as Resp,
)

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 86
VERSIONS = (0, 0)


async def handle(broker: Broker, ctx: RequestContext, req: DeleteShareGroupStateRequest) -> Resp:
    return Resp(results=await per_partition(
        broker, req.group_id, req.topics,
        lambda _p: lambda shard, key, _now: (shard.delete(key), None),
        lambda p, code, _: Resp.PartitionResult(partition=p.partition, error_code=code),
        lambda tid, parts: Resp.DeleteStateResult(topic_id=tid, partitions=parts),
        mutates=True))
