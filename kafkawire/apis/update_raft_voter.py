"""UpdateRaftVoter (key 82), version 0; controller listener only (KIP-853): a voter tells the
leader its current endpoints and supported kraft.version range. Answered by this node's Raft
replica (kraft/raft/update_voter.py); REQUEST_TIMED_OUT while the node is starting."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkawire.metadata.raft_driver import raft_answer
from protocol._generated.update_raft_voter_request import UpdateRaftVoterRequest
from protocol._generated.update_raft_voter_response import UpdateRaftVoterResponse
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 82
VERSIONS = (0, 0)


async def handle(broker: Broker, ctx: RequestContext,
                 req: UpdateRaftVoterRequest) -> UpdateRaftVoterResponse:
    resp = await raft_answer(broker.quorum, req.voter_id, req)
    if not isinstance(resp, UpdateRaftVoterResponse):
        return UpdateRaftVoterResponse(error_code=ErrorCode.REQUEST_TIMED_OUT)
    return resp
