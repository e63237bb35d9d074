"""Differential tests against 3-node clusters, Apache Kafka 4.3.1 (``kafka_cluster3``) and
kafkawire (``kafkawire_cluster3``), compared like the single-node scenarios
(``test_compat.check_outcome``: live Kafka outcome, else ``expected/<name>.json``;
``accepted.py``). The clusters start once per session, only when one of these tests runs.

* ``test_scenario_on_cluster``: the single-node scenarios of ``scenarios*.py``, the same
  functions, given the cluster's bootstrap (``cluster_wire.ClusterConnection`` routes their raw
  requests to leaders and coordinators); outcomes normalized by
  ``cluster_wire.normalize_on_cluster`` and compared with ``expected/cluster3/<name>.json``.
  ``KAFKAWIRE_COMPAT_CLUSTER`` picks them: ``ci`` (default, ``ON_CLUSTER_CI``), ``all``
  (``make compat-cluster``), ``none``, or a comma-separated list of names.
* ``test_cluster_scenario``: ``scenarios_cluster.py``'s own 3-node scenarios (they stop and
  kill nodes, so they run after the others).
"""

from __future__ import annotations

import os
import traceback
from typing import Any

import pytest

from compat_tests.cluster_wire import normalize_on_cluster, open_connection
from compat_tests.conftest import selected_targets
from compat_tests.scenarios import SCENARIOS, run_scenario
from compat_tests.scenarios_cluster import CLUSTER_SCENARIOS, run_cluster_scenario
from compat_tests.test_compat import check_outcome

pytestmark = pytest.mark.compat

CLUSTER_FIXTURES = {"kafka": "kafka_cluster3", "kafkawire": "kafkawire_cluster3"}
TARGETS = [t for t in selected_targets() if t in CLUSTER_FIXTURES]

#: the single-node scenarios that `make test` (CI) runs on both 3-node clusters: produce and
#: fetch, transactions, admin (topics, configs, quotas, SCRAM, DescribeCluster, DescribeQuorum,
#: ACL APIs) and groups. `make compat-cluster` runs every scenario.
ON_CLUSTER_CI = (
    "produce_basics",
    "fetch_edges",
    "idempotent_duplicate",
    "delete_records",
    "list_offsets_by_time",
    "transactions_confluent",
    "create_topics_raw",
    "partitions_and_delete",
    "describe_configs_topic",
    "describe_configs_broker",
    "alter_configs",
    "epochs_and_cluster",
    "describe_quorum",
    "security_disabled",
    "cluster_admin_extras",
    "dynamic_broker_configs",
    "client_quotas",
    "scram_credentials",
    "classic_group_protocol",
    "group_edge_cases",
    "client_confluent",
)
# not in CI: group_commit_assignment_epochs (its 1.1 s sleep past the assignment interval: at
# load 50+ Kafka's own outcome differed from its recording, STALE_MEMBER_EPOCH for 0)


#: single-node scenarios that say nothing on a cluster: name -> why
NOT_ON_CLUSTER = {
    "fetch_sessions": "a KIP-227 session lives on one broker: its partitions would need one "
    "leader, which the controller's placement does not give (differs between two runs of Kafka)",
}


def on_cluster_names() -> list[str]:
    raw = os.environ.get("KAFKAWIRE_COMPAT_CLUSTER", "ci").strip()
    if raw == "none":
        return []
    if raw == "all":
        return [n for n in SCENARIOS if n not in NOT_ON_CLUSTER]
    names = list(ON_CLUSTER_CI) if raw == "ci" else [n.strip() for n in raw.split(",") if n]
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise pytest.UsageError(f"KAFKAWIRE_COMPAT_CLUSTER: unknown scenarios {unknown}")
    return names


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", on_cluster_names())
def test_scenario_on_cluster(
    name: str,
    target: str,
    request: pytest.FixtureRequest,
    live_outcomes: dict[tuple[str, str], Any],
) -> None:
    cluster = request.getfixturevalue(CLUSTER_FIXTURES[target])
    nodes = list(cluster.node_ids)
    addresses = [cluster.address(i) for i in nodes]
    ports = {int(a.rsplit(":", 1)[1]) for a in addresses}
    raised: str | None = None
    try:
        got = run_scenario(name, ",".join(addresses))
    except Exception:
        got = {"scenario_raised": traceback.format_exc().strip().splitlines()[-1]}
        raised = traceback.format_exc()
    finally:
        reset_broker_configs(",".join(addresses), nodes)
    got = normalize_on_cluster(got, set(nodes), ports)
    check_outcome(f"cluster3/{name}", target, got, raised, live_outcomes)


def reset_broker_configs(bootstrap: str, nodes: list[int]) -> None:
    """Remove the dynamic broker configs a scenario left, the cluster-wide defaults and each
    node's (a legacy AlterConfigs replaces the whole set). On one node each scenario leaves the
    broker as the next expects; on the shared clusters a default such as
    ``min.insync.replicas=1`` (``dynamic_broker_configs``) reached the 3-node scenarios that
    follow. The cluster-level ``min.insync.replicas`` cannot be removed while ELR is enabled
    (KIP-966: INVALID_CONFIG on both systems), so it goes back to the clusters' static value.
    Nothing is sent when nothing was left (so sources stay STATIC_BROKER_CONFIG)."""
    from compat_tests.kafka_cluster import SCENARIO_PROPS
    from protocol._generated.alter_configs_request import AlterConfigsRequest as AC
    from protocol._generated.describe_configs_request import DescribeConfigsRequest as DC

    with open_connection(bootstrap) as c:
        for name in ["", *map(str, nodes)]:
            r = c.request(DC(resources=[DC.DescribeConfigsResource(
                resource_type=4, resource_name=name, configuration_keys=None)],
                include_synonyms=False), 4)
            source = 3 if name == "" else 2  # DYNAMIC_DEFAULT_BROKER_CONFIG / DYNAMIC_BROKER
            left = {e.name: e.value for e in r.results[0].configs if e.config_source == source}
            keep = ({"min.insync.replicas": SCENARIO_PROPS["min.insync.replicas"]}
                    if name == "" and "min.insync.replicas" in left else {})
            if left == keep:
                continue
            ans = c.request(AC(resources=[AC.AlterConfigsResource(
                resource_type=4, resource_name=name,
                configs=[AC.AlterableConfig(name=k, value=v) for k, v in keep.items()])],
                validate_only=False), 2)
            err = ans.responses[0].error_code
            assert err == 0, f"resetting broker configs of {name!r}: error {err}"


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", list(CLUSTER_SCENARIOS))
def test_cluster_scenario(
    name: str,
    target: str,
    request: pytest.FixtureRequest,
    live_outcomes: dict[tuple[str, str], Any],
) -> None:
    cluster = request.getfixturevalue(CLUSTER_FIXTURES[target])
    raised: str | None = None
    try:
        got = run_cluster_scenario(name, cluster)
    except Exception:
        got = {"scenario_raised": traceback.format_exc().strip().splitlines()[-1]}
        raised = traceback.format_exc()
    check_outcome(name, target, got, raised, live_outcomes)
