"""ReadShareGroupStateSummary (key 87), versions 0-1 (KIP-932 share coordinator; flexible).

A share partition's state epoch, leader epoch and start offset, and (v1, KIP-1226) the number
of acknowledged or archived records from the start offset on (-1 when not initialized). Per
partition: FENCED_LEADER_EPOCH, INVALID_REQUEST without a group id, coordinator errors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafkawire.share_state_apis import delivery_complete_count, per_partition, read_op
from protocol._generated.read_share_group_state_summary_request import (
    ReadShareGroupStateSummaryRequest,
)
from protocol._generated.read_share_group_state_summary_response import (
    ReadShareGroupStateSummaryResponse as Resp,
)

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.server import RequestContext

API_KEY = 87
VERSIONS = (0, 1)


def _result(p: Any, code: Any, v: Any) -> Resp.PartitionResult:
    r = Resp.PartitionResult(partition=p.partition, error_code=code, state_epoch=0,
                             leader_epoch=-1, start_offset=-1, delivery_complete_count=-1)
    if v is not None:
        r.state_epoch, r.leader_epoch, r.start_offset = (
            v.state_epoch, v.leader_epoch, v.start_offset)
        r.delivery_complete_count = delivery_complete_count(v)
    return r


async def handle(broker: Broker, ctx: RequestContext, req: ReadShareGroupStateSummaryRequest) -> Resp:
    return Resp(results=await per_partition(
        broker, req.group_id, req.topics, lambda p: read_op(p.leader_epoch, update_epoch=False), _result,
        lambda tid, parts: Resp.ReadStateSummaryResult(topic_id=tid, partitions=parts),
        mutates=False))
