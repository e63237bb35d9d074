"""ReadShareGroupState (key 84), version 0 (KIP-932 share coordinator; flexible).

A share partition's stored state: state epoch, start offset and state batches; a partition
never initialized answers start offset -1 and no batches. Per partition: FENCED_LEADER_EPOCH
for a leader epoch older than the stored one, INVALID_REQUEST without a group id, coordinator
errors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafkawire.share_state_apis import Op, per_partition, read_op
from protocol._generated.read_share_group_state_request import ReadShareGroupStateRequest
from protocol._generated.read_share_group_state_response import (
    ReadShareGroupStateResponse as Resp,
)

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.server import RequestContext

API_KEY = 84
VERSIONS = (0, 0)


def reader(leader_epoch: int) -> Op:
    """A read that stores a newer leader epoch (the share-partition leader loading)."""
    return read_op(leader_epoch, update_epoch=True)


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
