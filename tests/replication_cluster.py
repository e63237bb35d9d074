"""The cluster the replication tests and ``make failover`` kill brokers of.

``replication_cluster(brokers=3)`` is ``kafkawire.testing.ClusterProcesses`` with one combined
node (id 1: the single controller voter, and a broker that answers admin requests) and
``brokers`` broker-only nodes (ids 2..N+1, Raft observers), all real processes on free loopback
ports. Partitions under test are placed on the broker-only nodes (``broker_ids``), the ones that
get killed, so the single controller stays up. It waits until Metadata lists every broker.

Settings differ from Kafka's only where a test would wait for nothing:
``broker.session.timeout.ms`` 4000 (Kafka 9000) with heartbeats every 500 ms, so a killed
leader is fenced and replaced within seconds.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kafkawire.testing import ClusterProcesses

CLUSTER_DEFAULTS = {
    "broker.session.timeout.ms": "4000",
    "broker.heartbeat.interval.ms": "500",
}


class ReplicationCluster:
    def __init__(self, procs: ClusterProcesses) -> None:
        self.procs = procs
        self.controller_id = procs.controller_ids[0]
        #: the nodes partitions are placed on and that get killed
        self.broker_ids = [b for b in procs.broker_ids if b not in procs.controller_ids]

    @property
    def bootstrap(self) -> str:
        return self.procs.bootstrap

    @property
    def admin_bootstrap(self) -> str:
        """The combined node alone: admin writes go there (broker-only nodes name themselves
        as controller in Metadata and do not forward admin writes yet)."""
        return self.procs.nodes[self.controller_id].bootstrap

    def data_dir(self, node: int) -> Path:
        return self.procs.nodes[node].data_dir

    def kill(self, node: int) -> None:
        self.procs.kill(node)

    def stop(self, node: int) -> None:
        """SIGTERM: a controlled shutdown (leadership moves first)."""
        self.procs.stop(node)

    def start(self, node: int) -> None:
        self.procs.start_node(node, timeout_s=120)

    def wait_for_brokers(self, timeout_s: float = 120) -> None:
        """Until Metadata lists every broker as live."""
        from confluent_kafka.admin import AdminClient

        want = set(self.procs.broker_ids)
        deadline = time.monotonic() + timeout_s
        seen: set[int] = set()
        while time.monotonic() < deadline:
            try:
                md = AdminClient({"bootstrap.servers": self.bootstrap}).list_topics(timeout=10)
                seen = set(md.brokers)
                if seen >= want:
                    return
            except Exception:  # a node still starting: ask again
                pass
            time.sleep(0.5)
        raise TimeoutError(f"brokers {sorted(want - seen)} did not join within {timeout_s}s")


@contextmanager
def replication_cluster(brokers: int = 3, base_dir: Path | None = None,
                        overrides: dict[str, str] | None = None,
                        node_overrides: dict[int, dict[str, str]] | None = None,
                        log_level: str | None = None) -> Iterator[ReplicationCluster]:
    procs = ClusterProcesses(base_dir, controllers=1, brokers=brokers, combined=True,
                             overrides={**CLUSTER_DEFAULTS, **(overrides or {})},
                             node_overrides=node_overrides, log_level=log_level)
    try:
        procs.start(timeout_s=180)
        c = ReplicationCluster(procs)
        c.wait_for_brokers()
        yield c
    finally:
        procs.close()
