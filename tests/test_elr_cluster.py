"""KIP-966 eligible leader replicas on real processes: a kafkawire.tools.cluster.LocalCluster (one
combined controller node, three broker-only nodes on loopback), a topic with RF 3 and
``min.insync.replicas`` 3 on the broker-only nodes, a follower killed with SIGKILL.

- The controller fences it: ISR 2 < min ISR 3, so it joins ELR (DescribeTopicPartitions
  ``eligible_leader_replicas``), as Kafka 4.3.1 (compat scenario ``cluster_leader_failover``).
- acks=1 goes on, but the leader's high watermark stays (librdkafka's watermark offsets, and
  the remaining follower has the record on disk meanwhile); acks=all gets NOT_ENOUGH_REPLICAS;
  the leader's UnderMinIsrPartitionCount is 1.
- The killed broker restarts (an unclean shutdown: it leaves ELR at registration), catches up,
  rejoins the ISR; ELR is empty and the high watermark moves on.

And the controller's periodic unclean election (``unclean.leader.election.interval.ms``) of a
leaderless partition once its topic gets ``unclean.leader.election.enable``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench import failover
from protocol._generated.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
)
from protocol._generated.describe_topic_partitions_request import (
    DescribeTopicPartitionsRequest,
)
from protocol._generated.incremental_alter_configs_request import (
    IncrementalAlterConfigsRequest,
)
from tests.conftest import RawClient
from tests.replication_cluster import ReplicationCluster, replication_cluster

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ReplicationCluster]:
    with replication_cluster(brokers=3, base_dir=tmp_path) as c:
        yield c


def elr_view(address: str, topic: str) -> tuple[int, list[int], list[int], list[int]] | None:
    """(leader, isr, eligible_leader_replicas, last_known_elr) of partition 0, from
    DescribeTopicPartitions v0; None while the node cannot answer."""
    R = DescribeTopicPartitionsRequest
    try:
        raw = RawClient(address)
        try:
            resp = raw.request(R(topics=[R.TopicRequest(name=topic)],
                                 response_partition_limit=10), 0)
        finally:
            raw.sock.close()
    except OSError:
        return None
    p = resp.topics[0].partitions[0]
    return (p.leader_id, sorted(p.isr_nodes), list(p.eligible_leader_replicas),
            list(p.last_known_elr))


def under_min_isr(c: ReplicationCluster, node: int) -> float:
    """The node's ``UnderMinIsrPartitionCount`` from /metrics."""
    import urllib.request

    n = c.cluster.node(node)
    with urllib.request.urlopen(f"http://{n.host}:{n.metrics_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    name = "kafka_server_replicamanager_underminisrpartitioncount "
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name))


def high_watermark(bootstrap: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"hw-{uuid.uuid4().hex[:6]}"})
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1])
    finally:
        c.close()


def produce(bootstrap: str, topic: str, acks: str, value: bytes) -> tuple[str, int]:
    """(error name or 'NONE', offset) of one record (no retries)."""
    from confluent_kafka import Producer

    out: list[tuple[str, int]] = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "retries": 0,
                  "enable.idempotence": False, "message.timeout.ms": 20000})
    p.produce(topic, value, partition=0,
              on_delivery=lambda err, msg: out.append(
                  (err.name() if err is not None else "NONE", msg.offset())))
    p.flush(30)
    assert out, "no delivery report"
    return out[0]


def test_elr_and_high_watermark_with_a_follower_killed(cluster: ReplicationCluster) -> None:
    boot, admin = cluster.bootstrap, cluster.admin_bootstrap
    topic = f"elr-{uuid.uuid4().hex[:8]}"
    failover.create_topic(admin, topic, cluster.broker_ids, min_isr=3)
    for i in range(3):
        assert produce(boot, topic, "all", b"v%d" % i) == ("NONE", i)
    leader = elr_view(admin, topic)
    assert leader is not None and leader[1:] == (sorted(cluster.broker_ids), [], [])
    victim = next(b for b in cluster.broker_ids if b != leader[0])
    survivor = next(b for b in cluster.broker_ids if b not in (leader[0], victim))
    cluster.kill(victim)
    failover.wait_until(lambda: (v := elr_view(admin, topic)) is not None and victim not in v[1],
                        30, f"broker {victim} fenced and out of the ISR")
    assert elr_view(admin, topic) == (
        leader[0], sorted([leader[0], survivor]), [victim], [])

    seg = cluster.data_dir(survivor) / f"{topic}-0"
    before = sum(p.stat().st_size for p in seg.glob("*.log"))
    assert produce(boot, topic, "1", b"acks-1") == ("NONE", 3)
    failover.wait_until(lambda: sum(p.stat().st_size for p in seg.glob("*.log")) > before, 30,
                        "the in-sync follower to replicate the acks=1 record")
    deadline = time.monotonic() + 2  # several follower fetches: the high watermark stays
    while time.monotonic() < deadline:
        assert high_watermark(boot, topic) == 3
        time.sleep(0.3)
    assert produce(boot, topic, "all", b"refused")[0] == "NOT_ENOUGH_REPLICAS"
    assert under_min_isr(cluster, leader[0]) == 1  # the topic's min ISR 3, not the broker's

    cluster.start(victim)  # after SIGKILL: an unclean shutdown, it leaves ELR at registration
    failover.wait_until(lambda: (v := elr_view(admin, topic)) is not None and len(v[1]) == 3,
                        60, f"broker {victim} back in the ISR")
    view = elr_view(admin, topic)
    assert view is not None and view[2:] == ([], [])
    failover.wait_until(lambda: high_watermark(boot, topic) == 4, 30,
                        "the high watermark to move once the ISR is back at min ISR")


def admin_request(address: str, req: Any, version: int) -> Any:
    raw = RawClient(address)
    try:
        return raw.request(req, version)
    finally:
        raw.sock.close()


@pytest.fixture
def fast_unclean_cluster(tmp_path: Path) -> Iterator[ReplicationCluster]:
    with replication_cluster(brokers=2, base_dir=tmp_path,
                             overrides={"unclean.leader.election.interval.ms": "1000"}) as c:
        yield c


def test_periodic_unclean_election_once_the_topic_allows_it(
        fast_unclean_cluster: ReplicationCluster) -> None:
    """Kafka's electUnclean task (``unclean.leader.election.interval.ms``, 1 s here): an RF 1
    partition whose replica is killed is leaderless (ELR and LastKnownElr: the dead one);
    reassigned to the other broker (which cannot catch up: no leader) it stays leaderless
    while its topic has no ``unclean.leader.election.enable``; set to true, the controller's
    next periodic run makes that broker leader without any broker event, with an empty log
    (the record written before is lost, as an unclean election loses it on Kafka). Measured
    on Kafka 4.3.1 the same way: compat_tests/explore_elr.py part B (docs/FINDINGS.md F)."""
    c = fast_unclean_cluster
    admin = c.admin_bootstrap
    dead, other = c.broker_ids
    topic = f"unclean-{uuid.uuid4().hex[:8]}"
    failover.create_topic(admin, topic, [dead], min_isr=1)
    assert produce(c.bootstrap, topic, "all", b"lost") == ("NONE", 0)
    c.kill(dead)
    failover.wait_until(lambda: (v := elr_view(admin, topic)) is not None and v[0] == -1, 30,
                        f"{topic} leaderless once broker {dead} is fenced")
    assert elr_view(admin, topic) == (-1, [], [dead], [dead])
    R = AlterPartitionReassignmentsRequest
    r = admin_request(admin, R(topics=[R.ReassignableTopic(name=topic, partitions=[
        R.ReassignablePartition(partition_index=0, replicas=[other])])]), 0)
    assert (r.error_code, r.responses[0].partitions[0].error_code) == (0, 0)
    deadline = time.monotonic() + 2.5  # more than two periodic runs: nothing to elect yet
    while time.monotonic() < deadline:
        assert elr_view(admin, topic) == (-1, [], [dead], [dead])
        time.sleep(0.3)
    C = IncrementalAlterConfigsRequest
    r = admin_request(admin, C(resources=[C.AlterConfigsResource(
        resource_type=2, resource_name=topic, configs=[C.AlterableConfig(
            name="unclean.leader.election.enable", config_operation=0, value="true")])]), 1)
    assert r.responses[0].error_code == 0
    failover.wait_until(lambda: (v := elr_view(admin, topic)) is not None and v[0] == other,
                        30, f"the periodic unclean election to make broker {other} leader")
    assert elr_view(admin, topic) == (other, [other], [], [])
    assert produce(c.bootstrap, topic, "all", b"after") == ("NONE", 0)
