"""The two 3-node clusters the side-by-side replication figures run on (issue 13).

``three_nodes("kafka")`` is Apache Kafka 4.3.1 and ``three_nodes("kafkawire")`` kafkawire, each
as three combined ``broker,controller`` nodes (KRaft, a static quorum of the three through
``controller.quorum.voters``), real processes on free loopback ports, with the same
properties (``SHARED``). Both yield an object with what bench/failover.py's ``Cluster`` needs:
``bootstrap``, ``admin_bootstrap``, ``broker_ids`` and ``kill`` / ``stop`` / ``start`` by node
id. Kafka's JVMs get small heaps (``KAFKA_HEAP``, serial GC: compat_tests/kafka_dist.py's
options) and are started through bench/quorum.py's ``Node``.

Killing a combined node kills a broker and a controller voter: two of three voters stay, so the
quorum keeps a leader, as with Kafka's recommended combined 3-node layout.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.quorum import MAP, Node, live_brokers, wait_until  # noqa: E402
from compat_tests.kafka_dist import random_cluster_id  # noqa: E402
from kafkawire.testing import free_port  # noqa: E402

KAFKA_HEAP = "512m"
#: the same on both systems. A dead broker is fenced after 4 s (Kafka's default 9 s) so that a
#: kill loop does not wait for nothing; internal topics get 5 partitions (default 50) to keep
#: 2 shared cores for the workload; RF 3 and min.insync.replicas 2 everywhere.
SHARED = {
    "broker.session.timeout.ms": "4000",
    "broker.heartbeat.interval.ms": "500",
    "offsets.topic.num.partitions": "5",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.num.partitions": "5",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "group.initial.rebalance.delay.ms": "0",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
}
START_TIMEOUT_S = 240.0


class ThreeNodes(Protocol):
    system: str
    bootstrap: str
    admin_bootstrap: str
    broker_ids: list[int]

    def kill(self, node_id: int) -> None: ...

    def stop(self, node_id: int) -> None: ...

    def start(self, node_id: int) -> None: ...

    def pid(self, node_id: int) -> int | None: ...


class KafkaCluster:
    """Three combined Apache Kafka 4.3.1 nodes (ids 1..3)."""

    system = "kafka"

    def __init__(self, workdir: Path, overrides: dict[str, str] | None = None) -> None:
        self.workdir = workdir
        ports = {i: (free_port(), free_port()) for i in (1, 2, 3)}
        voters = ",".join(f"{i}@127.0.0.1:{c}" for i, (_p, c) in ports.items())
        self.nodes: dict[int, Node] = {}
        for i, (port, cport) in ports.items():
            node = Node("kafka", i, "broker,controller", workdir, {
                "process.roles": "broker,controller", "node.id": str(i),
                "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
                "controller.listener.names": "CONTROLLER",
                "inter.broker.listener.name": "PLAINTEXT",
                "listener.security.protocol.map": MAP, "controller.quorum.voters": voters,
                "log.dirs": str(workdir / f"node{i}" / "data"), **SHARED, **(overrides or {})})
            node.heap = KAFKA_HEAP
            self.nodes[i] = node
        self.broker_ids = list(self.nodes)
        self.bootstrap = ",".join(f"127.0.0.1:{ports[i][0]}" for i in self.broker_ids)
        self.admin_bootstrap = self.bootstrap
        self.cluster_id = random_cluster_id()

    def start_all(self) -> None:
        for n in self.nodes.values():
            n.format(self.cluster_id)
        for n in self.nodes.values():
            n.start()
        wait_until(lambda: live_brokers(self.bootstrap.split(",")[0]) >= 3,
                   time.monotonic() + START_TIMEOUT_S, list(self.nodes.values()),
                   "three live brokers")

    def kill(self, node_id: int) -> None:
        self.nodes[node_id].kill9()

    def stop(self, node_id: int) -> None:
        self.nodes[node_id].stop()

    def start(self, node_id: int) -> None:
        self.nodes[node_id].start()

    def pid(self, node_id: int) -> int | None:
        proc = self.nodes[node_id].proc
        return None if proc is None else proc.pid

    def close(self) -> None:
        for n in self.nodes.values():
            n.stop()


class KafkawireCluster:
    """Three combined kafkawire nodes (ids 1..3), ``kafkawire.testing.ClusterProcesses``."""

    system = "kafkawire"

    def __init__(self, workdir: Path, overrides: dict[str, str] | None = None) -> None:
        from kafkawire.testing import ClusterProcesses

        self.procs = ClusterProcesses(workdir, controllers=3, brokers=0, combined=True,
                                      overrides={**SHARED, **(overrides or {})})
        self.broker_ids = list(self.procs.broker_ids)
        self.bootstrap = self.procs.bootstrap
        self.admin_bootstrap = self.bootstrap

    def start_all(self) -> None:
        self.procs.start(timeout_s=START_TIMEOUT_S)
        deadline = time.monotonic() + START_TIMEOUT_S
        while live_brokers(self.procs.nodes[1].bootstrap) < 3:
            if time.monotonic() > deadline:
                raise TimeoutError("three live kafkawire brokers")
            time.sleep(0.2)

    def kill(self, node_id: int) -> None:
        self.procs.kill(node_id)

    def stop(self, node_id: int) -> None:
        self.procs.stop(node_id)

    def start(self, node_id: int) -> None:
        self.procs.start_node(node_id, timeout_s=120)

    def pid(self, node_id: int) -> int | None:
        proc = self.procs.nodes[node_id].proc
        return None if proc is None else proc.pid

    def close(self) -> None:
        self.procs.close()


@contextmanager
def three_nodes(system: str, overrides: dict[str, str] | None = None,
                keep: bool = False) -> Iterator[KafkaCluster | KafkawireCluster]:
    """A started 3-node cluster of ``system`` ("kafka" or "kafkawire"), closed afterwards."""
    workdir = Path(tempfile.mkdtemp(prefix=f"three-{system}-"))
    cluster: KafkaCluster | KafkawireCluster = (
        KafkaCluster(workdir, overrides) if system == "kafka"
        else KafkawireCluster(workdir, overrides))
    try:
        cluster.start_all()
        yield cluster
    finally:
        cluster.close()
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)


NAMES = {"kafka": "Apache Kafka 4.3.1", "kafkawire": "kafkawire"}
