"""Exactly-once consume-transform-produce with rebalances on a 3-node kafkawire cluster
(issue 27): tests/eos_chain.py's three stages (librdkafka members with transaction version 1
and Kafka's Java 4.x members with version 2, each poll one transaction with
``send_offsets_to_transaction``, 20 % aborted on purpose) over topics with RF 3 and
``min.insync.replicas=2``, while members join and leave every 2 s (each join or leave a
rebalance of its stage's group, whose coordinator and transaction coordinators are spread over
the three nodes). Every stage's output, read at read_committed, must hold each input exactly
once and in order per partition.

``make eos-cluster`` runs the same workload longer (100,000 records) on 3 kafkawire nodes and
then on 3 Apache Kafka 4.3.1 nodes (figures in docs/BENCHMARKS.md); ``make eos-failover`` adds
leader kills.
"""

from __future__ import annotations

import pytest

from kafkawire.cluster import LocalCluster
from tests.eos_chain import run_chain
from tests.javatools import require_line

pytestmark = pytest.mark.slow

#: RF 3 / min ISR 2 come from the cluster's defaults; fewer internal partitions keep the two
#: shared cores for the workload; an open transaction of a stopped member is aborted soon
OVERRIDES = {
    "offsets.topic.num.partitions": "5",
    "transaction.state.log.num.partitions": "5",
    "group.initial.rebalance.delay.ms": "0",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
}


@pytest.mark.timeout(900)
@pytest.mark.kafkawire_cluster(nodes=3, overrides=OVERRIDES)
def test_chain_with_rebalances_on_three_nodes(kafkawire_cluster: LocalCluster) -> None:
    require_line("4.x")
    res = run_chain(kafkawire_cluster.bootstrap, records=4000, partitions=3, members=2,
                    churn_s=2.0, kill=False, abort_ratio=0.2, replication=-1, timeout_s=600)
    assert res.exact, res.line()
    assert res.counts == {"s1": 4000, "s2": 4000, "s3": 4000}, res.line()
    assert res.joins + res.leaves >= 2, res.line()
