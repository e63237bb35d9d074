"""InitializeShareGroupState (key 83), version 0 (KIP-932 share coordinator; flexible).

Sets a share partition's state epoch and start offset with no state batches (a ShareSnapshot
in ``__share_group_state``). Per partition: FENCED_STATE_EPOCH for an epoch older than the
stored one, INVALID_REQUEST without a group id, coordinator errors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from groups.share_state import ShareStateShard
from kafkawire.coordinators.share_state_apis import Op, per_partition
from protocol._generated.initialize_share_group_state_request import (
    InitializeShareGroupStateRequest,
)
from protocol._generated.initialize_share_group_state_response import (
    InitializeShareGroupStateResponse as Resp,
)
from protocol.share_state import ShareStateKey

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 83
VERSIONS = (0, 0)


def _op(state_epoch: int, start: int) -> Op:
    def op(shard: ShareStateShard, key: ShareStateKey, now: int) -> tuple[list[Any], None]:
        return shard.initialize(key, state_epoch, start, now), None
    return op


async def handle(broker: Broker, ctx: RequestContext, req: InitializeShareGroupStateRequest) -> Resp:
    return Resp(results=await per_partition(
        broker, req.group_id, req.topics, lambda p: _op(p.state_epoch, p.start_offset),
        lambda p, code, _: Resp.PartitionResult(partition=p.partition, error_code=code),
        lambda tid, parts: Resp.InitializeStateResult(topic_id=tid, partitions=parts),
        mutates=True))
