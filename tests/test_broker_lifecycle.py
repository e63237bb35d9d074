"""Broker lifecycle against a real broker process with a controller listener: this node
registers and is unfenced; a second "broker" (this test, through kafkawire.net.node_client) speaks
BrokerRegistration / BrokerHeartbeat / AllocateProducerIds / AlterPartition / UnregisterBroker
to the controller listener, is fenced by broker.session.timeout.ms, and the listeners expose
only their own APIs; SIGTERM shuts down through a controlled shutdown."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from kafkawire.net.node_client import NodeClient
from kafkawire.tools.testing import BrokerProcess, free_port
from protocol._generated.allocate_producer_ids_request import AllocateProducerIdsRequest
from protocol._generated.alter_partition_request import AlterPartitionRequest
from protocol._generated.api_versions_request import ApiVersionsRequest
from protocol._generated.broker_heartbeat_request import BrokerHeartbeatRequest
from protocol._generated.broker_registration_request import BrokerRegistrationRequest
from protocol._generated.create_topics_request import CreateTopicsRequest
from protocol._generated.describe_cluster_request import DescribeClusterRequest
from protocol._generated.elect_leaders_request import ElectLeadersRequest
from protocol._generated.metadata_request import MetadataRequest
from protocol._generated.unregister_broker_request import UnregisterBrokerRequest
from protocol.errors import ErrorCode
from tests.conftest import RawClient
from tests.javatools import JavaTools, require_line

SESSION_MS = 3000
CONTROLLER_ONLY = {56, 58, 62, 63, 67}  # AlterPartition, Envelope, registration, heartbeat, pids


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    port, cport = free_port(), free_port()
    bp = BrokerProcess(tmp_path_factory.mktemp("lifecycle") / "data", port, overrides={
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}",
        "broker.session.timeout.ms": str(SESSION_MS),
        "broker.rack": "rack-a",
    })
    bp.controller_port = cport  # type: ignore[attr-defined]
    bp.start(timeout_s=60)
    yield bp
    bp.close()


def call(node: BrokerProcess, fn: Callable[[NodeClient], Any]) -> Any:
    """Run ``fn(client)`` (an async function) against the controller listener."""

    async def main() -> Any:
        client = NodeClient("127.0.0.1", node.controller_port,  # type: ignore[attr-defined]
                            "lifecycle-test", lambda: int(time.time() * 1000), 20_000)
        try:
            return await fn(client)
        finally:
            await client.aclose()

    return trio.run(main)


def describe(node: BrokerProcess) -> Any:
    raw = RawClient(node.bootstrap)
    try:
        return raw.request(DescribeClusterRequest(include_fenced_brokers=True), 2)
    finally:
        raw.close()


def registration(cluster_id: str, broker_id: int, incarnation: uuid.UUID
                 ) -> BrokerRegistrationRequest:
    return BrokerRegistrationRequest(
        broker_id=broker_id, cluster_id=cluster_id, incarnation_id=incarnation,
        listeners=[BrokerRegistrationRequest.Listener(
            name="PLAINTEXT", host="127.0.0.1", port=1, security_protocol=0)],
        features=[BrokerRegistrationRequest.Feature(
            name="metadata.version", min_supported_version=7, max_supported_version=30)],
        rack="rack-b")


def heartbeat(c: NodeClient, broker_id: int, epoch: int, offset: int, shut: bool = False
              ) -> Any:
    return c.request(BrokerHeartbeatRequest(broker_id=broker_id, broker_epoch=epoch,
                                            current_metadata_offset=offset,
                                            want_shut_down=shut))


def wait_for(cond: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.1)


def test_node_registers_and_is_unfenced(node: BrokerProcess) -> None:
    resp = describe(node)
    ours = [b for b in resp.brokers if b.broker_id == 1]
    assert len(ours) == 1 and not ours[0].is_fenced and ours[0].rack == "rack-a"
    assert ours[0].port == node.port


def test_api_versions_per_listener(node: BrokerProcess) -> None:
    raw = RawClient(node.bootstrap)
    try:
        broker_keys = {k.api_key for k in raw.request(ApiVersionsRequest(
            client_software_name="t", client_software_version="1"), 3).api_keys}
    finally:
        raw.close()
    assert not broker_keys & CONTROLLER_ONLY and 0 in broker_keys and 64 in broker_keys

    async def versions(c: NodeClient) -> set[int]:
        await c.request(ApiVersionsRequest(client_software_name="t",
                                           client_software_version="1"), 3)
        return set(c.versions)

    ctl_keys = call(node, versions)
    assert CONTROLLER_ONLY <= ctl_keys and 0 not in ctl_keys and 3 not in ctl_keys
    # a controller-only API on the broker listener closes the connection, as Kafka
    raw = RawClient(node.bootstrap)
    try:
        with pytest.raises((ConnectionError, OSError)):
            raw.request(BrokerHeartbeatRequest(broker_id=1, broker_epoch=0), 0)
    finally:
        raw.close()


def test_register_heartbeat_fence_by_session_timeout(node: BrokerProcess) -> None:
    cluster_id = describe(node).cluster_id

    async def scenario(c: NodeClient) -> dict[str, Any]:
        out: dict[str, Any] = {}
        inc = uuid.uuid4()
        wrong = await c.request(registration("AAAAAAAAAAAAAAAAAAAAAA", 2, inc))
        out["wrong_cluster"] = wrong.error_code
        reg = await c.request(registration(cluster_id, 2, inc))
        assert reg.error_code == 0, reg
        epoch = out["epoch"] = reg.broker_epoch
        behind = await heartbeat(c, 2, epoch, epoch - 1)
        out["behind"] = (behind.is_caught_up, behind.is_fenced)
        out["stale"] = (await heartbeat(c, 2, epoch + 1000, epoch)).error_code
        dup = await c.request(registration(cluster_id, 2, uuid.uuid4()))
        out["duplicate"] = dup.error_code
        up = await heartbeat(c, 2, epoch, epoch)
        out["caught_up"] = (up.is_caught_up, up.is_fenced)
        blocks = [await c.request(AllocateProducerIdsRequest(broker_id=2, broker_epoch=epoch))
                  for _ in range(2)]
        out["blocks"] = [(b.error_code, b.producer_id_start, b.producer_id_len) for b in blocks]
        stale_pid = await c.request(AllocateProducerIdsRequest(broker_id=2, broker_epoch=1))
        out["stale_pid"] = stale_pid.error_code
        return out

    out = call(node, scenario)
    assert out["wrong_cluster"] == ErrorCode.INCONSISTENT_CLUSTER_ID
    assert out["behind"] == (False, True)
    assert out["stale"] == ErrorCode.STALE_BROKER_EPOCH
    assert out["duplicate"] == ErrorCode.DUPLICATE_BROKER_REGISTRATION
    assert out["caught_up"] == (True, False)
    (e1, s1, n1), (e2, s2, n2) = out["blocks"]
    assert (e1, e2, n1, n2) == (0, 0, 1000, 1000) and s2 == s1 + 1000
    assert out["stale_pid"] == ErrorCode.STALE_BROKER_EPOCH
    two = [b for b in describe(node).brokers if b.broker_id == 2]
    assert two and not two[0].is_fenced and two[0].rack == "rack-b"
    # no more heartbeats: fenced after broker.session.timeout.ms, this node stays unfenced
    t0 = time.monotonic()
    wait_for(lambda: any(b.broker_id == 2 and b.is_fenced for b in describe(node).brokers))
    assert time.monotonic() - t0 < SESSION_MS / 1000 + 10
    assert any(b.broker_id == 1 and not b.is_fenced for b in describe(node).brokers)


def _topic_state(node: BrokerProcess, name: str) -> Any:
    raw = RawClient(node.bootstrap)
    try:
        md = raw.request(MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=name)],
            allow_auto_topic_creation=False), 12)
    finally:
        raw.close()
    return md.topics[0]


def elect(node: BrokerProcess, kind: int, topic: str) -> tuple[int, ...]:
    raw = RawClient(node.bootstrap)
    try:
        res = raw.request(ElectLeadersRequest(
            election_type=kind, topic_partitions=[ElectLeadersRequest.TopicPartitions(
                topic=topic, partitions=[0])], timeout_ms=30000), 2)
    finally:
        raw.close()
    return tuple(r.error_code for t in res.replica_election_results for r in t.partition_result)


def test_alter_partition_and_leader_moves_on_fencing(node: BrokerProcess) -> None:
    cluster_id = describe(node).cluster_id

    async def scenario(c: NodeClient) -> dict[str, Any]:
        out: dict[str, Any] = {}
        reg = await c.request(registration(cluster_id, 3, uuid.uuid4()))
        epoch = reg.broker_epoch
        hb = await heartbeat(c, 3, epoch, 1 << 40)
        assert not hb.is_fenced, hb
        return {"epoch": epoch, **out}

    epoch = call(node, scenario)["epoch"]
    raw = RawClient(node.bootstrap)
    try:
        for name, assignment in (("ap-led-by-3", [3, 1]), ("moves-to-1", [3, 1])):
            req = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
                name=name, num_partitions=-1, replication_factor=-1,
                assignments=[CreateTopicsRequest.CreatableReplicaAssignment(
                    partition_index=0, broker_ids=assignment)])], timeout_ms=30000)
            res = raw.request(req, 7)
            assert res.topics[0].error_code == 0, res
    finally:
        raw.close()
    t = _topic_state(node, "ap-led-by-3")
    p = t.partitions[0]
    assert (p.leader_id, p.replica_nodes, p.isr_nodes) == (3, [3, 1], [3, 1])

    def alter(leader_epoch: int, partition_epoch: int, isr: list[tuple[int, int]],
              broker_epoch: int = epoch) -> Any:
        return AlterPartitionRequest(broker_id=3, broker_epoch=broker_epoch, topics=[
            AlterPartitionRequest.TopicData(topic_id=t.topic_id, partitions=[
                AlterPartitionRequest.PartitionData(
                    partition_index=0, leader_epoch=leader_epoch, partition_epoch=partition_epoch,
                    new_isr_with_epochs=[AlterPartitionRequest.BrokerState(
                        broker_id=b, broker_epoch=e) for b, e in isr])])])

    async def alters(c: NodeClient) -> list[Any]:
        await heartbeat(c, 3, epoch, 1 << 40)
        out = []
        for req in (alter(0, 0, [(3, epoch)], broker_epoch=epoch + 99),  # stale broker epoch
                    alter(5, 0, [(3, epoch)]),                 # FENCED_LEADER_EPOCH
                    alter(0, 7, [(3, epoch)]),                 # INVALID_UPDATE_VERSION
                    alter(0, 0, [(3, epoch), (9, -1)]),        # INELIGIBLE_REPLICA
                    alter(0, 0, [(3, epoch), (1, 12345)]),     # INELIGIBLE_REPLICA (epoch)
                    alter(0, 0, [(3, epoch)])):                # shrink to [3]
            out.append(await c.request(req, 3))
        return out

    stale, fenced_epoch, bad_version, unknown, wrong_epoch, ok = call(node, alters)
    assert stale.error_code == ErrorCode.STALE_BROKER_EPOCH
    codes = [r.topics[0].partitions[0].error_code
             for r in (fenced_epoch, bad_version, unknown, wrong_epoch, ok)]
    assert codes == [ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.INVALID_UPDATE_VERSION,
                     ErrorCode.INELIGIBLE_REPLICA, ErrorCode.INELIGIBLE_REPLICA, ErrorCode.NONE]
    res = ok.topics[0].partitions[0]
    assert (res.leader_id, res.leader_epoch, res.isr, res.partition_epoch) == (3, 0, [3], 1)
    assert _topic_state(node, "ap-led-by-3").partitions[0].isr_nodes == [3]
    # broker 3 stops heartbeating: fenced, and its leadership moves to the other ISR member
    wait_for(lambda: _topic_state(node, "moves-to-1").partitions[0].leader_id == 1)
    moved = _topic_state(node, "moves-to-1").partitions[0]
    assert moved.isr_nodes == [1] and moved.leader_epoch == 1
    # the partition whose ISR was only 3 has no leader left (no unclean election)
    assert _topic_state(node, "ap-led-by-3").partitions[0].leader_id == -1
    # ElectLeaders: the preferred replica (3) is fenced; an unclean election brings the
    # leaderless partition back on broker 1, which becomes its ISR
    assert elect(node, 0, "moves-to-1") == (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,)
    assert elect(node, 1, "moves-to-1") == (ErrorCode.ELECTION_NOT_NEEDED,)
    assert elect(node, 1, "ap-led-by-3") == (ErrorCode.NONE,)
    p = _topic_state(node, "ap-led-by-3").partitions[0]
    assert (p.leader_id, p.isr_nodes) == (1, [1])

    async def unregister(c: NodeClient) -> tuple[int, int]:
        first = await c.request(UnregisterBrokerRequest(broker_id=3))
        again = await c.request(UnregisterBrokerRequest(broker_id=3))
        return first.error_code, again.error_code

    assert call(node, unregister) == (ErrorCode.NONE, ErrorCode.BROKER_ID_NOT_REGISTERED)
    assert not any(b.broker_id == 3 for b in describe(node).brokers)


def test_controlled_shutdown_on_sigterm(tmp_path: Path) -> None:
    bp = BrokerProcess(tmp_path / "data")
    try:
        bp.start(timeout_s=60)
        assert bp.stop() == 0
        log = bp.log()
        assert "PENDING_CONTROLLED_SHUTDOWN -> SHUTTING_DOWN" in log, log
        marker = json.loads((tmp_path / "data" / ".kafka_cleanshutdown").read_text())
        assert marker["version"] == 0 and marker["brokerEpoch"] >= 0
        bp.start(timeout_s=60)  # registers again with that epoch and is unfenced
        assert any(b.broker_id == 1 and not b.is_fenced for b in describe(bp).brokers)
    finally:
        bp.close()


def test_kafka_tools_see_the_registered_broker(node: BrokerProcess) -> None:
    """Kafka 4.3.1's own tools: kafka-broker-api-versions lists this broker (and no
    controller-only API), kafka-metadata-quorum describes the quorum through both the broker
    and the controller listener (KIP-919 DescribeCluster), kafka-cluster cluster-id."""
    require_line("4.x")
    tools = JavaTools("4.x")
    cport = node.controller_port  # type: ignore[attr-defined]
    out = tools.run("broker-api-versions", "--bootstrap-server", node.bootstrap).output
    assert f"127.0.0.1:{node.port} (id: 1 rack: rack-a" in out, out
    assert "Produce(0)" in out and "BrokerHeartbeat" not in out and "AlterPartition(" not in out
    cluster_id = describe(node).cluster_id
    for flag, address in (("--bootstrap-server", node.bootstrap),
                          ("--bootstrap-controller", f"127.0.0.1:{cport}")):
        status = tools.run("metadata-quorum", flag, address, "describe", "--status").output
        fields = dict(ln.split(":", 1) for ln in status.splitlines() if ":" in ln)
        assert fields["ClusterId"].strip() == cluster_id and fields["LeaderId"].strip() == "1"
        voters = json.loads(fields["CurrentVoters"])
        assert voters == [{"id": 1, "endpoints": [f"CONTROLLER://127.0.0.1:{cport}"]}], voters
    out = tools.run("cluster", "cluster-id", "--bootstrap-server", node.bootstrap).output
    assert f"Cluster ID: {cluster_id}" in out

    async def register_7(c: NodeClient) -> int:
        reg = await c.request(registration(cluster_id, 7, uuid.uuid4()))
        return int(reg.error_code)

    assert call(node, register_7) == 0
    assert any(b.broker_id == 7 for b in describe(node).brokers)
    tools.run("cluster", "unregister", "--bootstrap-server", node.bootstrap, "--id", "7")
    assert not any(b.broker_id == 7 for b in describe(node).brokers)
    res = tools.run("cluster", "unregister", "--bootstrap-server", node.bootstrap, "--id", "7",
                    check=False)
    assert res.returncode != 0 and "BrokerIdNotRegisteredException" in res.output, res.output


def test_remote_lifecycle_manager(node: BrokerProcess) -> None:
    """kafkawire's own BrokerLifecycleManager over RemoteControllerChannel (the path a
    broker-only node takes): registers fenced, RUNNING once unfenced, then a controlled
    shutdown moves its leadership and ends SHUTTING_DOWN, fenced."""
    from kafkawire.metadata.broker_lifecycle import (
        BrokerLifecycleManager,
        BrokerState,
        RemoteControllerChannel,
    )
    from kraft.cluster_control import Registration

    cluster_id = describe(node).cluster_id
    states: list[BrokerState] = []

    async def main() -> None:
        client = NodeClient("127.0.0.1", node.controller_port,  # type: ignore[attr-defined]
                            "broker-5", lambda: int(time.time() * 1000), 20_000)
        reg = Registration(5, cluster_id, uuid.uuid4(), [("PLAINTEXT", "127.0.0.1", 1, 0)],
                           {"metadata.version": (7, 30)}, "rack-c")
        mgr = BrokerLifecycleManager(RemoteControllerChannel(client), lambda: reg,
                                     lambda: 1 << 40, 500, 30_000)
        async with trio.open_nursery() as nursery:
            with trio.fail_after(30):
                await nursery.start(mgr.run)
            states.append(mgr.state)
            # give broker 5 a leadership to move: a topic led by it, with node 1 in the ISR
            raw = RawClient(node.bootstrap)
            try:
                req = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
                    name="led-by-5", num_partitions=-1, replication_factor=-1,
                    assignments=[CreateTopicsRequest.CreatableReplicaAssignment(
                        partition_index=0, broker_ids=[5, 1])])], timeout_ms=30000)
                assert raw.request(req, 7).topics[0].error_code == 0
            finally:
                raw.close()
            with trio.fail_after(30):
                assert await mgr.controlled_shutdown()
            states.append(mgr.state)
            nursery.cancel_scope.cancel()
        await client.aclose()

    trio.run(main)
    assert states == [BrokerState.RUNNING, BrokerState.SHUTTING_DOWN]
    assert any(b.broker_id == 5 and b.is_fenced for b in describe(node).brokers)
    p = _topic_state(node, "led-by-5").partitions[0]
    assert (p.leader_id, p.isr_nodes) == (1, [1])


def test_node_client_failures() -> None:
    """Connection refused and a peer that never answers: NodeDisconnected, the backoff grows,
    and the next request connects again."""
    from kafkawire.net.node_client import NodeDisconnected

    async def main() -> None:
        clock = lambda: int(time.time() * 1000)  # noqa: E731
        refused = NodeClient("127.0.0.1", free_port(), "t", clock, 1000, 50, 400)
        for _ in range(3):
            with pytest.raises(NodeDisconnected):
                await refused.request(ApiVersionsRequest(), 0)
        assert refused._failures == 3 and refused._next_attempt_ms > clock()
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        accepted: list[trio.SocketStream] = []

        async def silent(stream: trio.SocketStream) -> None:
            accepted.append(stream)
            await trio.sleep_forever()

        async with trio.open_nursery() as nursery:
            await nursery.start(trio.serve_listeners, silent, listeners)
            mute = NodeClient("127.0.0.1", port, "t", clock, 300, 10, 100)
            t0 = clock()
            with pytest.raises(NodeDisconnected):
                await mute.request(ApiVersionsRequest(), 0)
            assert clock() - t0 < 5000 and mute.stream is None
            with pytest.raises(NodeDisconnected):
                await mute.request(ApiVersionsRequest(), 0)
            assert len(accepted) == 2  # it reconnected for the second request
            nursery.cancel_scope.cancel()

    trio.run(main)
