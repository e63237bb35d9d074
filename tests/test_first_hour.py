"""What a new user meets in the first hour (issue 26): a second broker on the same host starts
although the implicit metrics port is taken, while a metrics port that was asked for and is
taken stops the start; the implicit single node has the development defaults of Kafka's
quickstart configuration (no initial rebalance delay) and a cluster keeps Kafka's."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkawire.config.broker_config import BrokerConfig
from kafkawire.tools.testing import BrokerProcess, free_port

DEFAULT_METRICS_PORT = 9404


class NoMetricsKey(BrokerProcess):
    """``kafkawire serve`` with only its listener and log directory set: no metrics.port key
    at all, as a user starts a second broker or a node of a cluster by hand."""

    def command(self) -> list[str]:
        cmd = super().command()
        i = cmd.index(f"metrics.port={self.metrics_port}")
        return cmd[: i - 1] + cmd[i + 1 :]


@contextlib.contextmanager
def default_port_taken() -> Iterator[None]:
    """Hold 127.0.0.1:9404 (when something else holds it already, it is taken all the same)."""
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", DEFAULT_METRICS_PORT))
        s.listen()
    except OSError:
        pass
    try:
        yield
    finally:
        s.close()


def test_a_taken_default_metrics_port_does_not_stop_a_broker(tmp_path: Path) -> None:
    with default_port_taken():
        first = NoMetricsKey(tmp_path / "one")
        second = NoMetricsKey(tmp_path / "two")
        try:
            first.start(60)
            second.start(60)
            for bp in (first, second):
                assert "the default metrics port 127.0.0.1:9404 is not free" in bp.log(), \
                    bp.log()
        finally:
            first.close()
            second.close()
    # asked for and taken: an error, as a taken listener port is
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        bp = BrokerProcess(tmp_path / "three", metrics_port=port)
        bp.launch()
        assert bp.proc is not None
        assert bp.proc.wait(60) == 1
        assert f"cannot serve metrics on 127.0.0.1:{port}" in bp.log(), bp.log()
        bp.close()


QUORUM = {
    "node.id": "1", "process.roles": "broker,controller",
    "controller.quorum.voters": f"1@127.0.0.1:{free_port()}",
    "controller.listener.names": "CONTROLLER",
    "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
}


@pytest.mark.parametrize(("raw", "delay", "static"), [
    ({}, 0, True),  # the implicit single node: Kafka's quickstart value, as if set there
    ({"group.initial.rebalance.delay.ms": "250"}, 250, True),  # given: always wins
    (QUORUM, 3000, False),  # a cluster node keeps Kafka's default
    ({**QUORUM, "group.initial.rebalance.delay.ms": "0"}, 0, True),
])
def test_dev_mode_defaults_apply_to_the_single_node_only(
        raw: dict[str, str], delay: int, static: bool) -> None:
    cfg = BrokerConfig.from_dict(raw)
    assert cfg.values["group.initial.rebalance.delay.ms"] == delay
    assert ("group.initial.rebalance.delay.ms" in cfg.explicit) is static


def test_the_first_join_of_a_group_does_not_wait(tmp_path: Path) -> None:
    """A consumer of a new group on the default single node gets its partitions without
    Kafka's 3 s initial rebalance delay."""
    from confluent_kafka import Consumer
    from confluent_kafka.admin import (
        AdminClient,
        ConfigResource,
        ConfigSource,
        NewTopic,
        ResourceType,
    )

    with BrokerProcess(tmp_path / "data") as bp:
        admin = AdminClient({"bootstrap.servers": bp.bootstrap})
        res = ConfigResource(ResourceType.BROKER, "1")
        entry = admin.describe_configs([res])[res].result(30)["group.initial.rebalance.delay.ms"]
        assert entry.value == "0" and entry.source == ConfigSource.STATIC_BROKER_CONFIG.value
        admin.create_topics([NewTopic("fh", 1)])["fh"].result(30)
        c = Consumer({"bootstrap.servers": bp.bootstrap, "group.id": "fh-g",
                      "session.timeout.ms": 6000})
        try:
            # the group coordinator's partition is created on the first FindCoordinator; warm
            # it up with another group so that only the join itself is timed
            c.subscribe(["fh"])
            deadline = time.monotonic() + 60
            while not c.assignment():
                assert time.monotonic() < deadline
                c.poll(0.1)
        finally:
            c.close()
        c = Consumer({"bootstrap.servers": bp.bootstrap, "group.id": "fh-g2",
                      "session.timeout.ms": 6000})
        try:
            started = time.monotonic()
            c.subscribe(["fh"])
            while not c.assignment():
                assert time.monotonic() < started + 60
                c.poll(0.1)
            joined_s = time.monotonic() - started
        finally:
            c.close()
        # Kafka's default delay alone would take 3 s
        assert joined_s < 2.9, f"first join took {joined_s:.2f}s"
