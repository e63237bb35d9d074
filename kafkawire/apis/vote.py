"""Vote (key 52), versions 0-2; controller listener only (KIP-595, v2 ``pre_vote`` KIP-996).

Answered by this node's Raft replica (kraft/raft/election.py): INCONSISTENT_CLUSTER_ID for
another cluster, INVALID_VOTER_KEY when addressed to another voter, FENCED_LEADER_EPOCH for
an old epoch, the vote granted only to a log at least as up to date, written to
``quorum-state`` before the answer leaves. REQUEST_TIMED_OUT while the node is starting.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkawire.metadata.raft_driver import raft_answer
from kraft.raft.messages import only_partition
from protocol._generated.vote_request import VoteRequest
from protocol._generated.vote_response import VoteResponse
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 52
VERSIONS = (0, 2)


async def handle(broker: Broker, ctx: RequestContext, req: VoteRequest) -> VoteResponse:
    part = only_partition(list(req.topics))
    src = part.replica_id if isinstance(part, VoteRequest.PartitionData) else -1
    resp = await raft_answer(broker.quorum, src, req)
    if not isinstance(resp, VoteResponse):
        return VoteResponse(error_code=ErrorCode.REQUEST_TIMED_OUT, topics=[])
    return resp
