"""WriteShareGroupState (key 85), versions 0-1 (KIP-932 share coordinator; flexible).

Writes state batches over a share partition's stored ones (later wins), moving the start
offset unless it is -1. Per partition: FENCED_STATE_EPOCH / FENCED_LEADER_EPOCH for a request
older than the stored state, INVALID_REQUEST without a group id, coordinator errors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from groups.share_state import ShareStateShard
from kafkawire.coordinators.share_state_apis import Op, per_partition
from protocol._generated.write_share_group_state_request import WriteShareGroupStateRequest
from protocol._generated.write_share_group_state_response import (
    WriteShareGroupStateResponse as Resp,
)
from protocol.share_state import ShareStateKey

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 85
VERSIONS = (0, 1)


def _op(state_epoch: int, leader_epoch: int, start: int,
        batches: list[tuple[int, int, int, int]]) -> Op:
    def op(shard: ShareStateShard, key: ShareStateKey, now: int) -> tuple[list[Any], None]:
        return shard.write_delta(key, state_epoch, leader_epoch, start, batches, now), None
    return op


def _op_for(p: Any) -> Op:
    batches = [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
               for b in p.state_batches]
    return _op(p.state_epoch, p.leader_epoch, p.start_offset, batches)


async def handle(broker: Broker, ctx: RequestContext, req: WriteShareGroupStateRequest) -> Resp:
    return Resp(results=await per_partition(
        broker, req.group_id, req.topics, _op_for,
        lambda p, code, _: Resp.PartitionResult(partition=p.partition, error_code=code),
        lambda tid, parts: Resp.WriteStateResult(topic_id=tid, partitions=parts),
        mutates=True))
