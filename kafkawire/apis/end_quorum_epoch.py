"""EndQuorumEpoch (key 54), versions 0-1; controller listener only (KIP-595).

A resigning leader names its preferred successors; answered by this node's Raft replica
(kraft/raft/election.py), which starts its election after its place in that order.
REQUEST_TIMED_OUT while starting.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkawire.metadata.raft_driver import raft_answer
from kraft.raft.messages import only_partition
from protocol._generated.end_quorum_epoch_request import EndQuorumEpochRequest
from protocol._generated.end_quorum_epoch_response import EndQuorumEpochResponse
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 54
VERSIONS = (0, 1)


async def handle(broker: Broker, ctx: RequestContext,
                 req: EndQuorumEpochRequest) -> EndQuorumEpochResponse:
    part = only_partition(list(req.topics))
    src = part.leader_id if isinstance(part, EndQuorumEpochRequest.PartitionData) else -1
    resp = await raft_answer(broker.quorum, src, req)
    if not isinstance(resp, EndQuorumEpochResponse):
        return EndQuorumEpochResponse(error_code=ErrorCode.REQUEST_TIMED_OUT, topics=[])
    return resp
