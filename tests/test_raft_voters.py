"""KIP-853 voter changes on the wire (AddRaftVoter 80, RemoveRaftVoter 81) against real nodes:
raw requests to the controller listener, the same through a broker-only node (forwarded in an
Envelope), and Kafka's own ``kafka-metadata-quorum remove-controller`` / ``add-controller``."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from kafkawire.net.node_client import NodeClient
from kafkawire.tools.cluster import LocalCluster
from protocol._generated.add_raft_voter_request import AddRaftVoterRequest
from protocol._generated.remove_raft_voter_request import RemoveRaftVoterRequest
from protocol.errors import ErrorCode
from tests.javatools import JavaTools, require_line
from tests.test_forwarding import start_node

NOT_STATIC = "Cluster doesn't support {} voter because the kraft.version feature is 0"


def ask(port: int, req: Any) -> Any:
    async def main() -> Any:
        c = NodeClient("127.0.0.1", port, "test", lambda: int(trio.current_time() * 1000),
                       request_timeout_ms=60_000)
        try:
            return await c.request(req)
        finally:
            await c.aclose()
    return trio.run(main)


def add(cluster_id: str | None, voter: int, directory: uuid.UUID, port: int = 1,
        timeout_ms: int = 3000) -> AddRaftVoterRequest:
    listeners = [AddRaftVoterRequest.Listener(name="CONTROLLER", host="127.0.0.1", port=port)]
    return AddRaftVoterRequest(cluster_id=cluster_id, timeout_ms=timeout_ms, voter_id=voter,
                               voter_directory_id=directory, listeners=listeners)


def remove(cluster_id: str | None, voter: int, directory: uuid.UUID) -> RemoveRaftVoterRequest:
    return RemoveRaftVoterRequest(cluster_id=cluster_id, voter_id=voter,
                                  voter_directory_id=directory)


@pytest.fixture(scope="module")
def static(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path_factory.mktemp("voters")) as c:
        c.up(1, 1, defaults=False, timeout_s=120)
        yield c


def test_static_quorum_refuses_voter_changes(static: LocalCluster) -> None:
    cid, some = static.cluster_id, uuid.uuid4()
    cport = static.controller_ports[1]
    broker = static.node(static.broker_ids[0]).port
    for port in (cport, broker):  # the broker-only node forwards to the controller
        r = ask(port, add(cid, 7, some))
        assert (r.error_code, r.error_message) == (ErrorCode.UNSUPPORTED_VERSION,
                                                   NOT_STATIC.format("adding"))
        r = ask(port, remove(cid, 1, some))
        assert (r.error_code, r.error_message) == (ErrorCode.UNSUPPORTED_VERSION,
                                                   NOT_STATIC.format("removing"))
    # Kafka's order: the cluster id, then the leader, then the voter key
    assert ask(cport, add("another-cluster", 7, some)).error_code == \
        ErrorCode.INCONSISTENT_CLUSTER_ID
    bad = ask(cport, add(cid, 7, uuid.UUID(int=0)))
    assert (bad.error_code, bad.error_message) == (
        ErrorCode.INVALID_REQUEST, "Add voter request didn't include a valid voter")
    bad = ask(cport, remove(cid, 1, uuid.UUID(int=0)))
    assert (bad.error_code, bad.error_message) == (
        ErrorCode.INVALID_REQUEST, "Remove voter request didn't include a valid voter")
    empty = add(cid, 7, some)
    empty.listeners = []
    assert ask(cport, empty).error_code == ErrorCode.INVALID_REQUEST


def test_kafka_tool_remove_controller_on_a_static_quorum(static: LocalCluster) -> None:
    require_line("4.x")
    tools = JavaTools("4.x")
    for flag, address in (("--bootstrap-controller", static.controller_bootstrap),
                          ("--bootstrap-server", static.bootstrap)):
        res = tools.run("metadata-quorum", flag, address, "remove-controller",
                        "--controller-id", "1", "--controller-directory-id",
                        "AAAAAAAAAAAAAAAAAAAAAQ", check=False)
        assert res.returncode != 0
        assert NOT_STATIC.format("removing") in res.output, res.output


def test_dynamic_quorum_voter_changes(tmp_path: Path) -> None:
    """A one-voter dynamic quorum (``format --standalone``, kraft.version 1): the changes get
    past the kraft.version check to the Raft leader's own refusals."""
    b, cport = start_node(tmp_path / "data", standalone=True)
    try:
        some = uuid.uuid4()
        cid = "q1dHpv3lQ5y-RBV8fJkZ3w"
        r = ask(cport, add(cid, 9, some, timeout_ms=2000))  # node 9 never fetched: not caught up
        assert r.error_code == ErrorCode.REQUEST_TIMED_OUT, r
        assert ask(cport, remove(cid, 9, some)).error_code == ErrorCode.VOTER_NOT_FOUND
        assert ask(cport, remove(cid, 1, some)).error_code == ErrorCode.INVALID_REQUEST
        assert ask(cport, add(cid, 1, some)).error_code == ErrorCode.DUPLICATE_VOTER
    finally:
        b.close()
