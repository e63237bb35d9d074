"""WriteShareGroupState (key 85), versions 0-1 (KIP-932 share coordinator; flexible).

Writes state batches over a share partition's stored ones (later wins), moving the start
offset unless it is -1. Per partition: FENCED_STATE_EPOCH / FENCED_LEADER_EPOCH for a request
older than the stored state, INVALID_REQUEST without a group id, coordinator errors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from groups.share_state import ShareStateShard
from kafkawire.share_state_apis import Op, on_key
from protocol._generated.write_share_group_state_request import WriteShareGroupStateRequest
from protocol._generated.write_share_group_state_response import (
    WriteShareGroupStateResponse as Resp,
)
from protocol.share_state import ShareStateKey

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.server import RequestContext

API_KEY = 85
VERSIONS = (0, 1)


def _op(state_epoch: int, leader_epoch: int, start: int,
        batches: list[tuple[int, int, int, int]]) -> Op:
    def op(shard: ShareStateShard, key: ShareStateKey, now: int) -> tuple[list[Any], None]:
        return shard.write_delta(key, state_epoch, leader_epoch, start, batches, now), None
    return op


async def handle(broker: Broker, ctx: RequestContext, req: WriteShareGroupStateRequest) -> Resp:
    results = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            batches = [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                       for b in p.state_batches]
            code, _ = await on_key(
                broker, req.group_id, t.topic_id, p.partition,
                _op(p.state_epoch, p.leader_epoch, p.start_offset, batches), mutates=True)
            parts.append(Resp.PartitionResult(partition=p.partition, error_code=code))
        results.append(Resp.WriteStateResult(topic_id=t.topic_id, partitions=parts))
    return Resp(results=results)
