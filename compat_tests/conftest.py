"""Fixtures of the compatibility harness: a real Apache Kafka and a kafkawire broker."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compat_tests.kafka_dist import (  # noqa: F401  (kafka_broker is a fixture)
    DEFAULT_BROKER_PROPS,
    KafkaDistError,
    fetch,
    kafka_broker,
    running_kafka,
)

# kafka39 (Apache Kafka 3.9.2 as the target) is not a default: it exercises the harness with a
# real broker that differs from 4.x in known ways.
ALL_TARGETS = ("kafka", "kafkawire", "kafka39")
DEFAULT_TARGETS = ("kafka", "kafkawire")


def selected_targets() -> list[str]:
    """``KAFKAWIRE_COMPAT_TARGETS`` (comma separated), default both."""
    raw = os.environ.get("KAFKAWIRE_COMPAT_TARGETS", ",".join(DEFAULT_TARGETS))
    targets = [t.strip() for t in raw.split(",") if t.strip()]
    bad = [t for t in targets if t not in ALL_TARGETS]
    if bad:
        raise pytest.UsageError(f"KAFKAWIRE_COMPAT_TARGETS: unknown {bad}; known {ALL_TARGETS}")
    return targets


# The same static configuration as the Kafka side, so that config sources and defaults compare.
KAFKAWIRE_OVERRIDES = {"node.id": "1", "process.roles": "broker,controller", **DEFAULT_BROKER_PROPS}


@pytest.fixture(scope="session")
def kafkawire_compat_broker() -> Iterator[str]:
    """Bootstrap address of ``python -m kafkawire serve`` (this checkout), started once.

    Fails (never skips) when the broker cannot start: the harness exists to catch that.
    """
    try:
        from kafkawire.tools.testing import BrokerProcess
    except Exception as e:  # pragma: no cover - depends on the state of the tree
        pytest.fail(f"kafkawire.tools.testing is not importable: {e!r}")
    with tempfile.TemporaryDirectory(prefix="kafkawire-compat-") as tmp:
        proc = BrokerProcess(
            Path(tmp) / "data", overrides=KAFKAWIRE_OVERRIDES, log_file=Path(tmp) / "broker.log"
        )
        try:
            proc.start(timeout_s=60)
        except Exception as e:
            pytest.fail(f"kafkawire did not start: {e}", pytrace=False)
        try:
            yield proc.bootstrap
        finally:
            rc = proc.stop()
            if rc not in (0, -15):
                print(f"kafkawire exited with {rc}:\n{proc.log()}")


@pytest.fixture(scope="session")
def live_outcomes() -> dict[tuple[str, str], Any]:
    """Every outcome of this session by ``(target, scenario)`` (Kafka's are the references)."""
    return {}


def pytest_configure(config: pytest.Config) -> None:
    # kafka-python 3.0 loads its schemas with importlib.resources' deprecated helpers.
    config.addinivalue_line("filterwarnings", "ignore::DeprecationWarning")


@pytest.fixture(scope="session")
def kafka39_broker() -> Iterator[str]:
    """Apache Kafka 3.9.2 (jars), for checking the harness against a known-different broker."""
    try:
        fetch("3.9")
    except KafkaDistError as e:
        pytest.fail(f"cannot fetch Apache Kafka 3.9: {e}")
    with running_kafka("3.9") as bootstrap:
        yield bootstrap


# --- 3-node clusters (cluster scenarios only; started once, when the first one runs) -----------


@pytest.fixture(scope="session")
def kafka_cluster3() -> Iterator[Any]:
    """A 3-node Apache Kafka 4.3.1 cluster (``kafka_cluster.KafkaCluster``)."""
    from compat_tests.kafka_cluster import SCENARIO_PROPS, KafkaCluster

    try:
        fetch("4.x")
    except KafkaDistError as e:
        pytest.fail(f"cannot fetch Apache Kafka: {e}")
    cluster = KafkaCluster(3, overrides=SCENARIO_PROPS)
    try:
        cluster.start()
    except Exception as e:
        pytest.fail(f"the Kafka cluster did not start: {e}", pytrace=False)
    try:
        yield cluster
    finally:
        cluster.stop()


class KafkawireClusterTarget:
    """``kafkawire.tools.cluster.LocalCluster`` as a ``scenarios_cluster.ClusterTarget``."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster

    @property
    def node_ids(self) -> list[int]:
        return [n.node_id for n in self.cluster.state.brokers]

    def address(self, node_id: int) -> str:
        return str(self.cluster.state.node(node_id).address)

    def stop_node(self, node_id: int) -> None:
        self.cluster.stop(node_id)

    def start_node(self, node_id: int) -> None:
        self.cluster.start_node(node_id)
        self.cluster.wait_ready([node_id])

    def kill_node(self, node_id: int) -> None:
        self.cluster.kill(node_id)


@pytest.fixture(scope="session")
def kafkawire_cluster3() -> Iterator[KafkawireClusterTarget]:
    """A 3-node kafkawire cluster (this checkout) with the Kafka cluster's properties."""
    from compat_tests.kafka_cluster import SCENARIO_PROPS
    from kafkawire.tools.cluster import LocalCluster

    with tempfile.TemporaryDirectory(prefix="kafkawire-compat-cluster-") as tmp:
        cluster = LocalCluster(Path(tmp) / "cluster")
        try:
            cluster.up(3, 0, "loopback", dict(SCENARIO_PROPS), timeout_s=180.0)
        except Exception as e:
            if cluster.state_path.exists():
                cluster.down()
            pytest.fail(f"the kafkawire cluster did not start: {e}", pytrace=False)
        try:
            yield KafkawireClusterTarget(cluster)
        finally:
            if cluster.state_path.exists():
                cluster.down()
