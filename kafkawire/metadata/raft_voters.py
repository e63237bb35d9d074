"""KIP-853 voter changes on the wire: AddRaftVoter (80) and RemoveRaftVoter (81), as Kafka's
``kafka-metadata-quorum add-controller`` / ``remove-controller`` (Admin ``addRaftVoter`` /
``removeRaftVoter``) send them.

The request goes to this node's Raft replica (kraft/raft/replication.py), which answers as
Kafka's leader does: INCONSISTENT_CLUSTER_ID, NOT_LEADER_OR_FOLLOWER off the leader,
UNSUPPORTED_VERSION ("Cluster doesn't support adding voter because the kraft.version feature
is 0") for a static quorum, REQUEST_TIMED_OUT while another change is in flight, the leader
has not committed in its epoch or the new voter has not caught up, DUPLICATE_VOTER,
VOTER_NOT_FOUND; a change that goes ahead is written as a VotersRecord and answered once
committed. Before that, on the leader, the voter key is checked as Kafka checks it: a zero
directory id (or, to add, no listener) is INVALID_REQUEST "Add voter request didn't include a
valid voter" / "Remove voter request didn't include a valid voter".

AddRaftVoter waits for the commit up to its ``timeout_ms`` (REQUEST_TIMED_OUT after it); the
added voter's controller listener (the first of ``controller.listener.names`` it names) is
given to the Raft driver so the leader can reach it. A broker-only node forwards both APIs to
the active controller in an Envelope (kafkawire/metadata/forwarding.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafkawire.metadata.raft_driver import ANSWER_SLACK_MS, RaftDriver
from protocol._generated.add_raft_voter_request import AddRaftVoterRequest
from protocol._generated.add_raft_voter_response import AddRaftVoterResponse
from protocol._generated.remove_raft_voter_request import RemoveRaftVoterRequest
from protocol._generated.remove_raft_voter_response import RemoveRaftVoterResponse
from protocol.errors import ErrorCode
from protocol.primitives import ZERO_UUID

if TYPE_CHECKING:
    from kafkawire.broker import Broker

#: AddRaftVoter's wait when its ``timeout_ms`` is not positive (Kafka's Admin default, ms)
DEFAULT_ADD_TIMEOUT_MS = 30_000

Change = AddRaftVoterRequest | RemoveRaftVoterRequest


def _answer(req: Change, code: int, message: str | None) -> Any:
    cls = AddRaftVoterResponse if isinstance(req, AddRaftVoterRequest) else RemoveRaftVoterResponse
    return cls(error_code=code, error_message=message)


def _invalid_key(req: Change) -> str | None:
    add = isinstance(req, AddRaftVoterRequest)
    no_listener = isinstance(req, AddRaftVoterRequest) and not req.listeners
    if req.voter_id < 0 or req.voter_directory_id == ZERO_UUID or no_listener:
        return f"{'Add' if add else 'Remove'} voter request didn't include a valid voter"
    return None


def _controller_address(broker: Broker, req: AddRaftVoterRequest) -> tuple[str, int] | None:
    names = [n.upper() for n in broker.config.controller_listener_names] or ["CONTROLLER"]
    for listener in req.listeners:
        if listener.name.upper() == names[0]:
            return listener.host, int(listener.port)
    return None


async def voter_change(broker: Broker, req: Change) -> Any:
    quorum = broker.quorum
    driver = getattr(quorum, "driver", None)
    raft = getattr(quorum, "raft", None)
    if not isinstance(driver, RaftDriver) or raft is None:
        return _answer(req, ErrorCode.REQUEST_TIMED_OUT, "the metadata quorum is starting")
    same_cluster = req.cluster_id is None or req.cluster_id == raft.cluster_id
    if same_cluster and raft.is_leader:
        bad = _invalid_key(req)
        if bad is not None:
            return _answer(req, ErrorCode.INVALID_REQUEST, bad)
    wait_ms = ANSWER_SLACK_MS
    if isinstance(req, AddRaftVoterRequest):
        wait_ms = req.timeout_ms if req.timeout_ms > 0 else DEFAULT_ADD_TIMEOUT_MS
        address = _controller_address(broker, req)
        if address is not None and raft.is_leader and req.voter_id not in driver.peers:
            driver.peers[req.voter_id] = address
    resp = await driver.request(-1, req, wait_ms=wait_ms)
    if resp is None:
        return _answer(req, ErrorCode.REQUEST_TIMED_OUT,
                       "the voter change was not committed in time")
    return resp
