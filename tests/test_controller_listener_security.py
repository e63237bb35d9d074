"""A controller listener secured with TLS (SSL) or TLS + SASL PLAIN (SASL_SSL): the Raft voters
fetch from and vote with each other over it, brokers register, heartbeat, send AlterPartition
and forward admin requests over it, with the listener's own keystore, truststore and JAAS
config and ``sasl.mechanism.controller.protocol``, as Kafka's controller channel does.
Real processes (kafkawire.tools.cluster) and a stock client (librdkafka) on the brokers' PLAINTEXT
listener; the quorum leader is killed and a new one takes over. A node whose controller
password is wrong never joins and says why in its log."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kafkawire.tools.cluster import LocalCluster
from tests.security_helpers import make_pki, wait_until

pytestmark = pytest.mark.slow


def plain_jaas(password: str) -> str:
    return ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            f'username="admin" password="{password}" user_admin="admin-secret";')


def controller_tls(pki: Any, protocol: str) -> dict[str, str]:
    return {
        "listener.security.protocol.map": f"PLAINTEXT:PLAINTEXT,CONTROLLER:{protocol}",
        "listener.name.controller.ssl.keystore.type": "PEM",
        "listener.name.controller.ssl.keystore.location": str(pki.server_pem),
        "listener.name.controller.ssl.truststore.type": "PEM",
        "listener.name.controller.ssl.truststore.location": str(pki.ca_pem),
        "broker.session.timeout.ms": "4000", "broker.heartbeat.interval.ms": "500",
    }


def produce_and_read(bootstrap: str, topic: str, n: int, rf: int) -> None:
    """Create ``topic`` (a fresh admin client: a reused one may keep asking a dead controller),
    produce ``n`` records at acks=all and read them all back."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    def create() -> bool:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        fut = admin.create_topics([NewTopic(topic, 1, rf)], operation_timeout=20)[topic]
        try:
            fut.result(30)
        except Exception as e:
            if "TOPIC_ALREADY_EXISTS" not in str(e):
                raise
        return True

    wait_until(create, 90, f"CreateTopics {topic}")
    prod = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    acked: list[bytes] = []
    for i in range(n):
        prod.produce(topic, b"%s-%d" % (topic.encode(), i), partition=0,
                     on_delivery=lambda e, m: acked.append(m.value()) if e is None else None)
    assert prod.flush(90) == 0
    assert len(acked) == n
    cons = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                     "enable.auto.commit": False})
    cons.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    seen: set[bytes] = set()
    deadline = time.monotonic() + 60
    while len(seen) < n and time.monotonic() < deadline:
        for m in cons.consume(1000, timeout=1.0):
            if m.error() is None:
                seen.add(m.value())
    cons.close()
    assert seen == set(acked)


def check_failover(procs: LocalCluster, bootstrap_after: Callable[[int], str]) -> None:
    """Kill the quorum leader: another voter leads, and the cluster still creates topics and
    takes acks=all writes."""
    leader = procs.quorum_leader(timeout_s=60)
    procs.kill(leader)
    new = procs.quorum_leader(timeout_s=60, not_node=leader)
    assert new != leader and new in procs.controller_ids
    if leader in procs.broker_ids:  # fenced first, or the new topic could be placed on it
        from confluent_kafka.admin import AdminClient

        wait_until(lambda: leader not in AdminClient({"bootstrap.servers": bootstrap_after(
            leader)}).list_topics(timeout=5).brokers, 60, f"broker {leader} fenced")
    produce_and_read(bootstrap_after(leader), "after-failover", 200, 1)


def test_sasl_ssl_controller_listener(tmp_path: Path) -> None:
    """3 combined nodes whose controller listener is SASL_SSL (PLAIN), and a 4th node, a
    broker, with a wrong password for it: refused, it never registers."""
    pki = make_pki(tmp_path / "pki")
    overrides = {**controller_tls(pki, "SASL_SSL"),
                 "sasl.mechanism.controller.protocol": "PLAIN",
                 "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
                 "listener.name.controller.plain.sasl.jaas.config": plain_jaas("admin-secret")}
    wrong = {"listener.name.controller.plain.sasl.jaas.config": plain_jaas("not-the-secret")}
    with LocalCluster(tmp_path / "cluster") as procs:
        procs.create(4, overrides=overrides, node_overrides={4: wrong})
        procs.start_all()
        procs.wait_ready([1, 2, 3], timeout_s=120)
        boot = ",".join(procs.node(i).address for i in (1, 2, 3))
        produce_and_read(boot, "before", 500, 3)
        # the wrong password: refused by the controllers, logged, and the broker stays out
        wait_until(lambda: "failed authentication due to: SASL PLAIN authentication as admin"
                   in procs.log_path(4).read_text(), 60, "node 4 to log the refusal")
        assert "Invalid username or password" in procs.log_path(4).read_text()
        assert not procs.node_ready(4)
        from confluent_kafka.admin import AdminClient

        brokers = AdminClient({"bootstrap.servers": boot}).list_topics(timeout=20).brokers
        assert set(brokers) == {1, 2, 3}
        check_failover(procs, lambda dead: ",".join(
            procs.node(i).address for i in (1, 2, 3) if i != dead))


def test_ssl_controller_listener_with_dedicated_controllers(tmp_path: Path) -> None:
    """3 controllers + 1 broker, the controller listener SSL with client certificates
    required (mutual TLS between the voters and from the broker)."""
    pki = make_pki(tmp_path / "pki")
    overrides = {**controller_tls(pki, "SSL"),
                 "listener.name.controller.ssl.client.auth": "required"}
    with LocalCluster(tmp_path / "cluster") as procs:
        procs.create(1, controllers=3, overrides=overrides)
        procs.start_all()
        procs.wait_ready(timeout_s=120)
        boot = procs.bootstrap
        produce_and_read(boot, "before", 500, 1)
        check_failover(procs, lambda dead: boot)
