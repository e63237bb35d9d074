"""Differential tests against 3-node clusters: ``scenarios_cluster.py`` against Apache Kafka
4.3.1 (``kafka_cluster3``) and kafkawire (``kafkawire_cluster3``), compared like the single-node
scenarios (``test_compat.check_outcome``: live Kafka outcome, else ``expected/<name>.json``;
``accepted.py``). The clusters start once per session, only when one of these tests runs."""

from __future__ import annotations

import traceback
from typing import Any

import pytest

from compat_tests.conftest import selected_targets
from compat_tests.scenarios_cluster import CLUSTER_SCENARIOS, run_cluster_scenario
from compat_tests.test_compat import check_outcome

pytestmark = pytest.mark.compat

CLUSTER_FIXTURES = {"kafka": "kafka_cluster3", "kafkawire": "kafkawire_cluster3"}


@pytest.mark.parametrize("target", [t for t in selected_targets() if t in CLUSTER_FIXTURES])
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
