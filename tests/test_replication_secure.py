"""Replication between brokers whose only broker listener is SASL_SSL (kafkawire.security.inter_broker):
the followers fetch from the leader, and the transaction coordinator and other peers talk,
over TLS with SASL PLAIN authentication, with the listener's own keystore, truststore and JAAS
config, as Kafka's inter-broker client does. Real processes: one controller (PLAINTEXT
controller listener) and three brokers; stock clients (librdkafka) over SASL_SSL."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkawire.tools.cluster import LocalCluster
from tests.security_helpers import make_pki, wait_until

pytestmark = pytest.mark.slow

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')


def secure_overrides(pki: Any) -> dict[str, str]:
    return {
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,SECURE:SASL_SSL",
        "inter.broker.listener.name": "SECURE",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.secure.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.secure.plain.sasl.jaas.config": JAAS,
        "listener.name.secure.ssl.keystore.type": "PEM",
        "listener.name.secure.ssl.keystore.location": str(pki.server_pem),
        "listener.name.secure.ssl.truststore.type": "PEM",
        "listener.name.secure.ssl.truststore.location": str(pki.ca_pem),
        "broker.session.timeout.ms": "4000", "broker.heartbeat.interval.ms": "500",
        "default.replication.factor": "3", "min.insync.replicas": "2",
        "offsets.topic.replication.factor": "3",
    }


def client_config(bootstrap: str, pki: Any) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "PLAIN", "sasl.username": "alice",
            "sasl.password": "alice-secret", "ssl.ca.location": str(pki.ca_pem)}


@pytest.fixture
def secure_cluster(tmp_path: Path) -> Iterator[tuple[LocalCluster, Any]]:
    pki = make_pki(tmp_path / "pki")
    procs = LocalCluster(tmp_path / "cluster")
    # the only broker listener: SASL_SSL ({host}/{port}: each broker's own client address)
    secure = {"listeners": "SECURE://{host}:{port}", "advertised.listeners": "SECURE://{host}:{port}"}
    try:
        procs.create(3, 1, overrides=secure_overrides(pki), defaults=False,
                     node_overrides={i: secure for i in (2, 3, 4)})
        procs.start_all()
        procs.wait_ready(procs.controller_ids, timeout_s=120)
        yield procs, pki
    finally:
        procs.down()


def isr_of(admin: Any, topic: str) -> tuple[int, list[int]] | None:
    md = admin.list_topics(topic, timeout=10).topics[topic]
    if md.error is not None or 0 not in md.partitions:
        return None
    p = md.partitions[0]
    return p.leader, sorted(p.isrs)


def test_sasl_ssl_only_cluster_replicates_and_survives_a_leader_kill(
        secure_cluster: tuple[LocalCluster, Any]) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    procs, pki = secure_cluster
    conf = client_config(procs.bootstrap, pki)
    admin = AdminClient(conf)
    wait_until(lambda: set(admin.list_topics(timeout=10).brokers) >= set(procs.broker_ids),
               180, "every broker to serve over SASL_SSL")
    topic = "secure-orders"
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(60)
    # the followers can only have joined the ISR by fetching over SASL_SSL
    wait_until(lambda: (s := isr_of(admin, topic)) is not None and s[1] == procs.broker_ids,
               120, "all three replicas in sync")
    acked: list[bytes] = []
    prod = Producer({**conf, "acks": "all", "enable.idempotence": True, "linger.ms": 5})

    def send(prefix: str, n: int) -> None:
        for i in range(n):
            prod.produce(topic, b"%s-%d" % (prefix.encode(), i), partition=0,
                         on_delivery=lambda e, m: acked.append(m.value()) if e is None else None)
            if i % 100 == 0:
                prod.poll(0)

    send("before", 2000)
    assert prod.flush(60) == 0
    leader = (isr_of(admin, topic) or (-1, []))[0]
    procs.kill(leader)
    send("after", 2000)
    assert prod.flush(120) == 0
    assert len(acked) == 4000
    state = wait_until(lambda: (s := isr_of(admin, topic)) is not None and s[0] not in (-1, leader)
                       and s, 60, "a new leader")
    assert leader not in state[1]
    cons = Consumer({**conf, "group.id": "secure-check", "auto.offset.reset": "earliest",
                     "enable.auto.commit": False})
    # assign, not subscribe: with a broker down, __consumer_offsets (RF 3) cannot be created
    cons.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    seen: set[bytes] = set()
    deadline = time.monotonic() + 120
    while not set(acked) <= seen and time.monotonic() < deadline:
        for m in cons.consume(1000, timeout=1.0):
            if m.error() is None:
                seen.add(m.value())
    cons.close()
    assert set(acked) <= seen, f"lost {len(set(acked) - seen)} acknowledged records"
