"""DeleteShareGroupState (key 86), version 0 (KIP-932 share coordinator; flexible).

Tombstones a share partition's state in ``__share_group_state`` (nothing to delete is not an
error). Per partition: INVALID_REQUEST without a group id, coordinator errors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkawire.share_state_apis import on_key
from protocol._generated.delete_share_group_state_request import DeleteShareGroupStateRequest
from protocol._generated.delete_share_group_state_response import (
    DeleteShareGroupStateResponse as Resp,
)

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.server import RequestContext

API_KEY = 86
VERSIONS = (0, 0)


async def handle(broker: Broker, ctx: RequestContext, req: DeleteShareGroupStateRequest) -> Resp:
    results = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            code, _ = await on_key(broker, req.group_id, t.topic_id, p.partition,
                                   lambda shard, key, _now: (shard.delete(key), None),
                                   mutates=True)
            parts.append(Resp.PartitionResult(partition=p.partition, error_code=code))
        results.append(Resp.DeleteStateResult(topic_id=t.topic_id, partitions=parts))
    return Resp(results=results)
