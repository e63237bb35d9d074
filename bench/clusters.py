"""The two 3-node clusters the side-by-side replication figures run on (issue 13).

``three_nodes("kafka")`` is Apache Kafka 4.3.1 and ``three_nodes("kafkawire")`` kafkawire, each
as three combined ``broker,controller`` nodes (KRaft, a static quorum of the three through
``controller.quorum.voters``), real processes on free loopback ports, with the same
properties (``SHARED``). Both yield an object with what bench/failover.py's ``Cluster`` needs:
``bootstrap``, ``admin_bootstrap``, ``broker_ids`` and ``kill`` / ``stop`` / ``start`` by node
id. Kafka's JVMs get small heaps (``KAFKA_HEAP``) and are compat_tests/kafka_cluster.py's
cluster; kafkawire's nodes are ``kafkawire.cluster.LocalCluster``'s.

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

from bench.quorum import live_brokers  # noqa: E402

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

    def launch(self, node_id: int) -> None: ...

    def pid(self, node_id: int) -> int | None: ...


class KafkaCluster:
    """Three combined Apache Kafka nodes (ids 1..3; ``version`` a ``kafka_dist`` line: "4.x"
    = 4.3.1, "4.4" = 4.4.0): compat_tests/kafka_cluster.py's cluster (the one the 3-node
    compat scenarios run on) with ``SHARED``."""

    system = "kafka"

    def __init__(self, workdir: Path, overrides: dict[str, str] | None = None,
                 version: str = "4.x") -> None:
        from compat_tests.kafka_cluster import KafkaCluster as Nodes

        self.workdir = workdir
        self.nodes = Nodes(3, overrides={**SHARED, **(overrides or {})}, workdir=workdir,
                           heap=KAFKA_HEAP, version=version)
        self.broker_ids = self.nodes.node_ids
        self.bootstrap = self.nodes.bootstrap
        self.admin_bootstrap = self.bootstrap

    def start_all(self) -> None:
        self.nodes.start(timeout=START_TIMEOUT_S)

    def kill(self, node_id: int) -> None:
        self.nodes.kill_node(node_id)

    def stop(self, node_id: int) -> None:
        self.nodes.stop_node(node_id)

    def start(self, node_id: int) -> None:
        self.nodes.start_node(node_id, timeout=START_TIMEOUT_S)

    def launch(self, node_id: int) -> None:
        """Start the node's JVM and return at once (several nodes may start together)."""
        n = self.nodes.node(node_id)
        if not n.running():
            n.start(self.nodes.heap)

    def log_files(self) -> list[Path]:
        return [n.log_file for n in self.nodes.nodes] + [n.dir / "stdout.log"
                                                          for n in self.nodes.nodes]

    def pid(self, node_id: int) -> int | None:
        proc = self.nodes.node(node_id).proc
        return None if proc is None else proc.pid

    def close(self) -> None:
        self.nodes.stop()


class KafkawireCluster:
    """Three combined kafkawire nodes (ids 1..3): ``kafkawire.cluster.LocalCluster``."""

    system = "kafkawire"

    def __init__(self, workdir: Path, overrides: dict[str, str] | None = None) -> None:
        from kafkawire.cluster import LocalCluster

        self.workdir = workdir
        self.procs = LocalCluster(workdir)
        self.overrides = {**SHARED, **(overrides or {})}
        self.broker_ids = [1, 2, 3]
        self.bootstrap = ""
        self.admin_bootstrap = ""

    def start_all(self) -> None:
        self.bootstrap = self.procs.up(3, 0, overrides=self.overrides, defaults=False,
                                       timeout_s=START_TIMEOUT_S)
        self.admin_bootstrap = self.bootstrap
        self.broker_ids = list(self.procs.broker_ids)
        deadline = time.monotonic() + START_TIMEOUT_S
        while live_brokers(self.procs.node(1).address) < 3:
            if time.monotonic() > deadline:
                raise TimeoutError("three live kafkawire brokers")
            time.sleep(0.2)

    def kill(self, node_id: int) -> None:
        self.procs.kill(node_id)

    def stop(self, node_id: int) -> None:
        self.procs.stop(node_id)

    def start(self, node_id: int) -> None:
        self.procs.start_node(node_id, timeout_s=120)

    def launch(self, node_id: int) -> None:
        """Start the node's process and return at once (several nodes may start together)."""
        self.procs.start_node(node_id)

    def log_files(self) -> list[Path]:
        return [self.procs.log_path(n) for n in self.broker_ids]

    def pid(self, node_id: int) -> int | None:
        return self.procs.pid_of(node_id) or None

    def close(self) -> None:
        self.procs.down()


@contextmanager
def three_nodes(system: str, overrides: dict[str, str] | None = None,
                keep: bool = False, version: str = "4.x"
                ) -> Iterator[KafkaCluster | KafkawireCluster]:
    """A started 3-node cluster of ``system`` ("kafka" or "kafkawire"; ``version`` the Kafka
    line), closed afterwards."""
    workdir = Path(tempfile.mkdtemp(prefix=f"three-{system}-"))
    cluster: KafkaCluster | KafkawireCluster = (
        KafkaCluster(workdir, overrides, version) if system == "kafka"
        else KafkawireCluster(workdir, overrides))
    try:
        cluster.start_all()
        yield cluster
    finally:
        cluster.close()
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)


NAMES = {"kafka": "Apache Kafka 4.3.1", "kafkawire": "kafkawire"}
