"""RemoveRaftVoter (key 81), version 0; controller and broker listeners (KIP-853), answered by
kafkawire/metadata/raft_voters.py (a broker-only node forwards it to the active controller)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkawire.metadata.raft_voters import voter_change
from protocol._generated.remove_raft_voter_request import RemoveRaftVoterRequest
from protocol._generated.remove_raft_voter_response import RemoveRaftVoterResponse

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 81
VERSIONS = (0, 0)


async def handle(broker: Broker, ctx: RequestContext, req: RemoveRaftVoterRequest) -> RemoveRaftVoterResponse:
    resp = await voter_change(broker, req)
    assert isinstance(resp, RemoveRaftVoterResponse)
    return resp
