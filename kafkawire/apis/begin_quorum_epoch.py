"""BeginQuorumEpoch (key 53), versions 0-1; controller listener only (KIP-595).

A new leader announces its epoch to the voters; answered by this node's Raft replica
(kraft/raft/election.py), which follows that leader. REQUEST_TIMED_OUT while starting.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkawire.metadata.raft_driver import raft_answer
from kraft.raft.messages import only_partition
from protocol._generated.begin_quorum_epoch_request import BeginQuorumEpochRequest
from protocol._generated.begin_quorum_epoch_response import BeginQuorumEpochResponse
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 53
VERSIONS = (0, 1)


async def handle(broker: Broker, ctx: RequestContext,
                 req: BeginQuorumEpochRequest) -> BeginQuorumEpochResponse:
    part = only_partition(list(req.topics))
    src = part.leader_id if isinstance(part, BeginQuorumEpochRequest.PartitionData) else -1
    resp = await raft_answer(broker.quorum, src, req)
    if not isinstance(resp, BeginQuorumEpochResponse):
        return BeginQuorumEpochResponse(error_code=ErrorCode.REQUEST_TIMED_OUT, topics=[])
    return resp
