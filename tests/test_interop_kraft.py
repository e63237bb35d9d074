"""Issue 12's interop, as a test: Apache Kafka 4.3.1 and kafkawire nodes in one cluster
(compat_tests/interop_kraft.py). An Apache Kafka broker registers with, follows and serves
produce/consume on a kafkawire controller; a kafkawire broker does the same with an Apache Kafka
controller (formatted with streams.version=0: Kafka 4.3.1 finalizes streams.version 1, which
kafkawire brokers do not support, and its controller refuses their registration otherwise).
CreateTopics through either broker is forwarded in an Envelope to the other system's controller.
Heavy (a Kafka JVM each); skipped without java or the jars unless KAFKAWIRE_REQUIRE_KAFKA=1."""

from __future__ import annotations

import pytest

from compat_tests.interop_kraft import scenario
from tests.javatools import require_line

pytestmark = [pytest.mark.slow, pytest.mark.compat]


@pytest.mark.parametrize("controllers, broker, features", [
    ("kafkawire", "kafka", []),
    ("kafka", "kafkawire", ["streams.version=0"]),
])
def test_mixed_cluster(controllers: str, broker: str, features: list[str]) -> None:
    require_line("4.x")
    res = scenario(controllers, broker, 1, 120.0, features)
    report = {k: v for k, v in res.items() if k != "logs"}
    assert res["leader"] == (1, 1), report
    assert res["broker_live"], (report, res["logs"])
    assert res["create_topic_through_broker"], (report, res["logs"])
    assert res["produce_consume"], (report, res["logs"])
    assert all(res["alive"].values()), (report, res["logs"])
    assert "partition error 0" in res["observer_fetch"], report
