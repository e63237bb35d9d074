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

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
if not hasattr(confluent_kafka, "ShareConsumer"):
    pytest.skip("confluent-kafka without ShareConsumer", allow_module_level=True)

from compat_tests import scenarios_share_cluster as sc  # noqa: E402
from compat_tests.conftest import KafkawireClusterTarget  # noqa: E402
from compat_tests.scenarios_cluster import bootstrap_of, creatable, create_and_wait  # noqa: E402
from kafkawire.cluster import LocalCluster  # noqa: E402
from protocol._generated.metadata_request import MetadataRequest  # noqa: E402
from tests.cluster_helpers import wait_for  # noqa: E402

pytestmark = pytest.mark.slow
EXPECTED = Path(__file__).resolve().parent.parent / "compat_tests" / "expected"


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
    with sc._connect_any(bootstrap_of(cluster)) as c:
        md = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
            name="__share_group_state")], allow_auto_topic_creation=False)
        parts = c.request(md, 12).topics[0].partitions
    assert len(parts) == 50 and {len(p.replica_nodes) for p in parts} == {3}


def test_resubscribe_drops_the_old_topic(cluster: KafkawireClusterTarget) -> None:
    out = sc.cluster_share_resubscribe(cluster)
    assert out == {"first": ["a"], "first_count": 3, "second": ["b"], "second_count": 5}


@pytest.mark.parametrize("state_leader", [False, True], ids=["partition-leader", "state-leader"])
def test_kill_9_with_exact_delivery_accounting(cluster: KafkawireClusterTarget,
                                               state_leader: bool) -> None:
    """The outcome Apache Kafka 4.3.1 gives (``compat_tests/expected``): killing the share
    partition's leader brings back exactly the held records (their acknowledgement fails;
    the new leader's first delivery of them counts 1, acquisitions are not persisted);
    killing the state partition's leader only delays the acknowledgements."""
    out = sc._failover(cluster, kill_state_leader=state_leader)
    name = "cluster_share_kill_" + ("state_leader" if state_leader else "partition_leader")
    kafka = json.loads((EXPECTED / f"{name}.json").read_text())
    assert out == kafka
    assert out["delivered"] == 200 and out["all_accepted"], out
    assert out["accepted_before_kill_delivered_again"] == [], out
    assert out["delivered_again_outside_held"] == [], out


def _coordinator_of(bs: str, group: str) -> int:
    from protocol._generated.find_coordinator_request import FindCoordinatorRequest

    def ask() -> int:
        with sc._connect_any(bs) as c:
            r = c.request(FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), 4)
        co = r.coordinators[0]
        return int(co.node_id) if co.error_code == 0 else 0

    return wait_for(ask, 60, f"the coordinator of {group}")


def test_kafka_share_groups_tool_on_the_cluster(cluster: KafkawireClusterTarget) -> None:
    """kafka-share-groups against three nodes: the share partitions led by the two nodes
    that do not coordinate the group, their state wherever the key hashes. Reset, describe
    (start offsets and lag), consume, delete the offsets, delete the group."""
    import subprocess
    import uuid

    from compat_tests.kafka_dist import java_command
    from tests.javatools import JavaTools, require_line

    require_line("4.x")
    tools = JavaTools("4.x")
    bs = bootstrap_of(cluster)
    name, group = "jq-" + uuid.uuid4().hex[:6], "jg-" + uuid.uuid4().hex[:6]
    co = _coordinator_of(bs, group)
    x, y = [n for n in (1, 2, 3) if n != co]
    with sc._connect_any(bs) as c:
        create_and_wait(c, creatable(name, assignments=[[x, y, co], [y, co, x]]), cluster)
    p = confluent_kafka.Producer({"bootstrap.servers": bs})
    for i in range(10):
        p.produce(name, value=f"m{i:03d}".encode(), partition=i % 2)
    assert p.flush(30) == 0

    def describe() -> set[tuple[str, ...]]:
        out = tools.run("share-groups", "--bootstrap-server", bs, "--describe", "--group",
                        group).output
        return {tuple(ln.split()[1:5]) for ln in out.splitlines() if ln.startswith(group)}

    tools.run("share-groups", "--bootstrap-server", bs, "--reset-offsets", "--group", group,
              "--topic", name, "--to-earliest", "--execute")
    assert describe() == {(name, "0", "0", "5"), (name, "1", "0", "5")}
    r = subprocess.run(java_command(tools.main_class("console-share-consumer"),
                                    ["--bootstrap-server", bs, "--topic", name, "--group", group,
                                     "--max-messages", "10", "--timeout-ms", "60000"], "4.x"),
                       capture_output=True, text=True, timeout=240)
    assert len([ln for ln in r.stdout.splitlines() if ln.startswith("m")]) == 10
    done = {(name, "0", "5", "0"), (name, "1", "5", "0")}
    wait_for(lambda: describe() == done, 60, "lag 0 (acknowledged when the consumer closes)")
    tools.run("share-groups", "--bootstrap-server", bs, "--delete-offsets", "--group", group,
              "--topic", name)
    assert {r for r in describe() if r[2] != "-"} == set()
    tools.run("share-groups", "--bootstrap-server", bs, "--delete", "--group", group)
    out = tools.run("share-groups", "--bootstrap-server", bs, "--list").output
    assert group not in out.split()
