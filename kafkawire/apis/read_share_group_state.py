"""ReadShareGroupState (key 84), version 0 (KIP-932 share coordinator; flexible).

A share partition's stored state: state epoch, start offset and state batches; a partition
never initialized answers start offset -1 and no batches. Per partition: FENCED_LEADER_EPOCH
for a leader epoch older than the stored one, INVALID_REQUEST without a group id, coordinator
errors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from groups.share_state import ShareStateShard
from kafkawire.share_state_apis import Op, per_partition
from protocol._generated.read_share_group_state_request import ReadShareGroupStateRequest
from protocol._generated.read_share_group_state_response import (
    ReadShareGroupStateResponse as Resp,
)
from protocol.share_state import ShareStateKey

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.server import RequestContext

API_KEY = 84
VERSIONS = (0, 0)


def read(shard: ShareStateShard, key: ShareStateKey, leader_epoch: int) -> tuple[list[Any], Any]:
    shard.check_epochs(key, None, leader_epoch)
    return [], shard.states.get(key)


def reader(leader_epoch: int) -> Op:
    def op(shard: ShareStateShard, key: ShareStateKey, _now: int) -> tuple[list[Any], Any]:
        return read(shard, key, leader_epoch)
    return op


def _result(p: Any, code: Any, v: Any) -> Resp.PartitionResult:
    r = Resp.PartitionResult(partition=p.partition, error_code=code, state_epoch=0,
                             start_offset=-1, state_batches=[])
    if v is not None:
        r.state_epoch, r.start_offset = v.state_epoch, v.start_offset
        r.state_batches = [Resp.StateBatch(first_offset=b[0], last_offset=b[1],
                                           delivery_state=b[2], delivery_count=b[3])
                           for b in v.state_batches]
    return r


async def handle(broker: Broker, ctx: RequestContext, req: ReadShareGroupStateRequest) -> Resp:
    return Resp(results=await per_partition(
        broker, req.group_id, req.topics, lambda p: reader(p.leader_epoch), _result,
        lambda tid, parts: Resp.ReadStateResult(topic_id=tid, partitions=parts),
        mutates=False))
