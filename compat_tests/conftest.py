"""Fixtures of the compatibility harness: a real Apache Kafka and a kafkawire broker."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

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
        from kafkawire.testing import BrokerProcess
    except Exception as e:  # pragma: no cover - depends on the state of the tree
        pytest.fail(f"kafkawire.testing is not importable: {e!r}")
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
