"""AddRaftVoter (key 80), versions 0-1; controller and broker listeners (KIP-853), answered by
kafkawire/metadata/raft_voters.py (a broker-only node forwards it to the active controller)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkawire.metadata.raft_voters import voter_change
from protocol._generated.add_raft_voter_request import AddRaftVoterRequest
from protocol._generated.add_raft_voter_response import AddRaftVoterResponse

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 80
VERSIONS = (0, 1)


async def handle(broker: Broker, ctx: RequestContext, req: AddRaftVoterRequest) -> AddRaftVoterResponse:
    resp = await voter_change(broker, req)
    assert isinstance(resp, AddRaftVoterResponse)
    return resp
