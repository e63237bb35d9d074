"""How fast an admin write reaches every node of a 3-node cluster, kafkawire and Apache Kafka
(``make metadata-propagation``; issue 27).

Starts a 3-node kafkawire cluster (combined broker+controller nodes, ``LocalCluster``) and/or a
3-node Apache Kafka cluster (``compat_tests.kafka_cluster``, 4.3.1 or 4.4.0), both with
StandardAuthorizer, and writes ``--rounds`` topics, ACLs and topic configs through a node that
is not the quorum leader (it forwards them); ``tests/metadata_propagation.measure`` times when
each node shows each write. Prints one Markdown table per system (figures for
docs/BENCHMARKS.md) and the load average around each run.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.metadata_propagation import AUTHORIZER_PROPS, measure, quorum_leader, table  # noqa: E402


def _via(nodes: dict[int, str]) -> int:
    leader = quorum_leader(next(iter(nodes.values())))
    return next(n for n in sorted(nodes) if n != leader)


def run_kafkawire(rounds: int) -> str:
    from kafkawire.cluster import LocalCluster

    with tempfile.TemporaryDirectory(prefix="kafkawire-propagation-") as tmp:
        cluster = LocalCluster(Path(tmp))
        try:
            cluster.up(3, overrides=dict(AUTHORIZER_PROPS), timeout_s=240)
            nodes = {n: cluster.node(n).address for n in cluster.broker_ids}
            via = _via(nodes)
            load = os.getloadavg()[0]
            samples = measure(nodes, via, rounds)
        finally:
            cluster.down()
    return table(f"kafkawire, 3 combined nodes, writes through node {via} (not the quorum "
                 f"leader), load average {load:.1f} -> {os.getloadavg()[0]:.1f}", samples)


def run_kafka(rounds: int, version: str) -> str:
    from compat_tests.kafka_cluster import KafkaCluster

    with KafkaCluster(3, overrides=dict(AUTHORIZER_PROPS), version=version) as cluster:
        nodes = {n: cluster.address(n) for n in cluster.node_ids}
        via = _via(nodes)
        load = os.getloadavg()[0]
        samples = measure(nodes, via, rounds)
    name = {"4.x": "4.3.1", "4.4": "4.4.0"}.get(version, version)
    return table(f"Apache Kafka {name}, 3 combined nodes, writes through node {via} (not the "
                 f"quorum leader), load average {load:.1f} -> {os.getloadavg()[0]:.1f}", samples)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=30, help="writes of each kind")
    ap.add_argument("--system", choices=["both", "kafkawire", "kafka"], default="both")
    ap.add_argument("--kafka-version", default="4.x", help='kafka_dist line: "4.x" (4.3.1), "4.4"')
    args = ap.parse_args()
    if args.system in ("both", "kafkawire"):
        print(run_kafkawire(args.rounds), flush=True)
        print()
    if args.system in ("both", "kafka"):
        print(run_kafka(args.rounds, args.kafka_version), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
