"""The cluster the replication tests and ``make failover`` kill brokers of.

``replication_cluster(brokers=3)`` is a ``kafkawire.tools.cluster.LocalCluster`` with one combined
node (id 1: the single controller voter, and a broker that answers admin requests) and
``brokers`` broker-only nodes (ids 2..N+1, Raft observers), all real processes on free loopback
ports. Partitions under test are placed on the broker-only nodes (``broker_ids``), the ones that
get killed, so the single controller stays up. It waits until Metadata lists every broker.

Settings differ from Kafka's only where a test would wait for nothing:
``broker.session.timeout.ms`` 4000 (Kafka 9000) with heartbeats every 500 ms, so a killed
leader is fenced and replaced within seconds.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from kafkawire.tools.cluster import LocalCluster

CLUSTER_DEFAULTS = {
    "broker.session.timeout.ms": "4000",
    "broker.heartbeat.interval.ms": "500",
}


class ReplicationCluster:
    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.controller_id = cluster.controller_ids[0]
        #: the nodes partitions are placed on and that get killed
        self.broker_ids = [b for b in cluster.broker_ids if b not in cluster.controller_ids]

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    @property
    def admin_bootstrap(self) -> str:
        """The combined node alone: admin writes go there (broker-only nodes name themselves
        as controller in Metadata and do not forward admin writes yet)."""
        return self.cluster.node(self.controller_id).address

    def data_dir(self, node: int) -> Path:
        return self.cluster.data_dir(node)

    def kill(self, node: int) -> None:
        self.cluster.kill(node)

    def stop(self, node: int) -> None:
        """SIGTERM: a controlled shutdown (leadership moves first)."""
        self.cluster.stop(node)

    def start(self, node: int) -> None:
        self.cluster.start_node(node, timeout_s=120)

    def wait_for_brokers(self, timeout_s: float = 120) -> None:
        """Until Metadata lists every broker as live."""
        from confluent_kafka.admin import AdminClient

        want = set(self.cluster.broker_ids)
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
    with ExitStack() as stack:
        if base_dir is None:
            base_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kw-repl-")))
        cluster = stack.enter_context(LocalCluster(base_dir))
        cluster.up(brokers + 1, voters=1, overrides={**CLUSTER_DEFAULTS, **(overrides or {})},
                   node_overrides=node_overrides, log_level=log_level or "", defaults=False,
                   timeout_s=180)
        c = ReplicationCluster(cluster)
        c.wait_for_brokers()
        yield c
