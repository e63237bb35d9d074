"""KIP-966 eligible leader replicas on real processes: a kafkawire.cluster.LocalCluster (one
combined controller node, three broker-only nodes on loopback), a topic with RF 3 and
``min.insync.replicas`` 3 on the broker-only nodes, a follower killed with SIGKILL.

- The controller fences it: ISR 2 < min ISR 3, so it joins ELR (DescribeTopicPartitions
  ``eligible_leader_replicas``), as Kafka 4.3.1 (compat scenario ``cluster_leader_failover``).
- acks=1 goes on, but the leader's high watermark stays (librdkafka's watermark offsets, and
  the remaining follower has the record on disk meanwhile); acks=all gets NOT_ENOUGH_REPLICAS;
  the leader's UnderMinIsrPartitionCount is 1.
- The killed broker restarts (an unclean shutdown: it leaves ELR at registration), catches up,
  rejoins the ISR; ELR is empty and the high watermark moves on.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench import failover
from protocol._generated.describe_topic_partitions_request import (
    DescribeTopicPartitionsRequest,
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
