"""Issue 27: a write through one node of a 3-node cluster (a topic, an ACL, a topic config)
reaches every node in Kafka's order of latency (Kafka 4.3.1 here: tens of milliseconds), not
at the Raft fetch's max wait (500 ms, before followers were answered at once when they had a
high watermark to learn). Real processes; ``bench/metadata_propagation.py`` measures the same
on Apache Kafka."""

from __future__ import annotations

import statistics
from pathlib import Path

from kafkawire.cluster import LocalCluster
from tests.metadata_propagation import AUTHORIZER_PROPS, KINDS, measure, quorum_leader, table


def test_writes_reach_every_node_of_three_within_kafkas_latency(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "cluster")
    try:
        cluster.up(3, overrides=dict(AUTHORIZER_PROPS), timeout_s=180)
        nodes = {n: cluster.node(n).address for n in cluster.broker_ids}
        leader = quorum_leader(nodes[1])
        via = next(n for n in sorted(nodes) if n != leader)  # forwarded to the controller
        samples = measure(nodes, via, rounds=6)
    finally:
        cluster.down()
    print(table(f"through node {via}", samples))
    for kind in KINDS:
        lags = [s.worst_lag_ms for s in samples if s.kind == kind]
        # Measured 5-16 ms p50 at load average 13 (500+ ms before the fix); bounds for a
        # loaded 2-core machine, still far under the fetch max wait for the median.
        assert statistics.median(lags) < 250, (kind, lags)
        assert max(lags) < 5_000, (kind, lags)
