"""Share groups (KIP-932) on a real 3-node kafkawire cluster with confluent-kafka's
ShareConsumer (issue 27): the group coordinator, the share-partition leaders and the share
coordinators (``__share_group_state`` leaders) on different brokers.

* 200 of 200 records from one-partition topics of RF 1 and RF 3 led by each broker (before
  the fix: 0 in 30 s, the heartbeat answered an empty assignment for ever);
* a resubscription drops the old topic at once (before: its new records kept coming);
* kill -9 of the share partition's leader, and of the leader of its ``__share_group_state``
  partition, with exact accounting: every record delivered, nothing accepted (committed)
  before the kill delivered again, nothing delivered again but the records held at the kill;
* ``__share_group_state`` created with Kafka's replication factor 3 on three brokers.

The steps are ``compat_tests/scenarios_share_cluster.py``'s, which the compat suite also runs
against Apache Kafka.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
if not hasattr(confluent_kafka, "ShareConsumer"):
    pytest.skip("confluent-kafka without ShareConsumer", allow_module_level=True)

from compat_tests import scenarios_share_cluster as sc  # noqa: E402
from compat_tests.conftest import KafkawireClusterTarget  # noqa: E402
from kafkawire.cluster import LocalCluster  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkawireClusterTarget]:
    lc = LocalCluster(Path(tmp_path_factory.mktemp("share-cluster")) / "cluster")
    try:
        lc.up(3, 0, "loopback", {}, timeout_s=180.0)
        yield KafkawireClusterTarget(lc)
    finally:
        if lc.state_path.exists():
            lc.down()


def test_share_consumer_gets_every_record_from_each_leader(
        cluster: KafkawireClusterTarget) -> None:
    out = sc.cluster_share_consume_every_leader(cluster)
    for rf in (1, 3):
        for leader in (1, 2, 3):
            got: Any = out[f"rf{rf}_leader{leader}"]
            assert got == {"distinct": 200, "deliveries": 200, "values_ok": True,
                           "delivery_counts": [1]}, (rf, leader, got)
    with sc._connect_any(sc.bootstrap_of(cluster)) as c:
        md = sc.MetadataRequest(topics=[sc.MetadataRequest.MetadataRequestTopic(
            name="__share_group_state")], allow_auto_topic_creation=False)
        parts = c.request(md, 12).topics[0].partitions
    assert len(parts) == 50 and {len(p.replica_nodes) for p in parts} == {3}


def test_resubscribe_drops_the_old_topic(cluster: KafkawireClusterTarget) -> None:
    out = sc.cluster_share_resubscribe(cluster)
    assert out == {"first": ["a"], "first_count": 3, "second": ["b"], "second_count": 5}


@pytest.mark.parametrize("state_leader", [False, True], ids=["partition-leader", "state-leader"])
def test_kill_9_with_exact_delivery_accounting(cluster: KafkawireClusterTarget,
                                               state_leader: bool) -> None:
    out = sc._failover(cluster, kill_state_leader=state_leader)
    assert out["victim_is_data_leader"] is not state_leader
    assert out["delivered"] == 200 and out["all_accepted"], out
    assert out["accepted_before_kill_delivered_again"] == [], out
    assert out["delivered_again_outside_held"] == [], out
    assert out["first_delivery_counts"] == [1], out
