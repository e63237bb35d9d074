"""FetchSnapshot (key 59), versions 0-1; controller listener only (KIP-630).

A replica whose fetch offset lies below the leader's log start reads the leader's latest
``.checkpoint`` in chunks (``position``, at most ``max_bytes`` and the node's chunk size):
answered by this node's Raft replica (kraft/raft/replication.py) with SNAPSHOT_NOT_FOUND,
POSITION_OUT_OF_RANGE, FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER or
INCONSISTENT_CLUSTER_ID as Kafka's leader answers. REQUEST_TIMED_OUT while starting.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkawire.metadata.raft_driver import raft_answer
from protocol._generated.fetch_snapshot_request import FetchSnapshotRequest
from protocol._generated.fetch_snapshot_response import FetchSnapshotResponse
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 59
VERSIONS = (0, 1)


async def handle(broker: Broker, ctx: RequestContext,
                 req: FetchSnapshotRequest) -> FetchSnapshotResponse:
    resp = await raft_answer(broker.quorum, req.replica_id, req)
    if not isinstance(resp, FetchSnapshotResponse):
        return FetchSnapshotResponse(error_code=ErrorCode.REQUEST_TIMED_OUT, topics=[])
    return resp
