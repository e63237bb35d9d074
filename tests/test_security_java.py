"""Kafka's own Java tools (kafka-clients 4.3.1) over SASL_SSL with SCRAM-SHA-256 and PLAIN, and
``kafka-acls`` against the StandardAuthorizer: a client configured for a secured Apache Kafka
works unchanged. Skips without Java or Kafka's jars (``python -m compat_tests.kafka_dist
fetch``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkawire.tools.testing import BrokerProcess
from tests.javatools import JavaTools, require_line, write_properties
from tests.security_helpers import Pki, listeners, make_pki
from tests.test_security_auth import _set_scram  # noqa: F401  (bob's SCRAM credentials)

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_admin="admin-secret";')


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, int, Pki,
                                                                          Path]]:
    require_line("4.x")
    base = tmp_path_factory.mktemp("java-sec")
    pki = make_pki(base / "pki")
    ov, ports = listeners(PLAIN="PLAINTEXT", SECURE="SASL_SSL")
    ov.update({
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS;User:admin",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.secure.plain.sasl.jaas.config": JAAS,
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.server_pem),
        "delegation.token.secret.key": "java-test-secret",
    })
    bp = BrokerProcess(base / "data", port=ports["PLAIN"], overrides=ov).start()
    try:
        _set_scram(bp.bootstrap)  # bob / bob-secret
        yield bp, ports["SECURE"], pki, base
    finally:
        bp.close()


def _client_props(path: Path, pki: Pki, mechanism: str, user: str, password: str) -> Path:
    module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if mechanism == "PLAIN"
              else "org.apache.kafka.common.security.scram.ScramLoginModule")
    return write_properties(path, {
        "security.protocol": "SASL_SSL", "sasl.mechanism": mechanism,
        "sasl.jaas.config": f'{module} required username="{user}" password="{password}";',
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca_pem),
    })


def test_kafka_acls_and_console_clients(
    secured: tuple[BrokerProcess, int, Pki, Path],
) -> None:
    bp, port, pki, base = secured
    tools = JavaTools("4.x")
    addr = f"127.0.0.1:{port}"
    admin = _client_props(base / "admin.properties", pki, "PLAIN", "admin", "admin-secret")
    bob = _client_props(base / "bob.properties", pki, "SCRAM-SHA-256", "bob", "bob-secret")
    topic = f"java-{uuid.uuid4().hex[:8]}"
    tools.run("topics", "--bootstrap-server", addr, "--command-config", str(admin),
              "--create", "--topic", topic, "--partitions", "1", "--replication-factor", "1")
    # bob without ACLs: Kafka's TopicAuthorizationException
    res = tools.run("console-producer", "--bootstrap-server", addr, "--topic", topic,
                    tools.option("producer-property-file"), str(bob), input="denied\n",
                    check=False)
    assert "TopicAuthorizationException" in res.output or "Not authorized" in res.output
    tools.run("acls", "--bootstrap-server", addr, "--command-config", str(admin), "--add",
              "--allow-principal", "User:bob", "--operation", "Write", "--operation", "Read",
              "--topic", topic)
    tools.run("acls", "--bootstrap-server", addr, "--command-config", str(admin), "--add",
              "--allow-principal", "User:bob", "--operation", "Read", "--group", "bob-",
              "--resource-pattern-type", "prefixed")
    listed = tools.run("acls", "--bootstrap-server", addr, "--command-config", str(admin),
                       "--list", "--topic", topic).output
    assert "principal=User:bob" in listed and "operation=WRITE" in listed
    assert "operation=READ" in listed
    tools.run("console-producer", "--bootstrap-server", addr, "--topic", topic,
              tools.option("producer-property-file"), str(bob), input="one\ntwo\nthree\n")
    res = tools.run("console-consumer", "--bootstrap-server", addr, "--topic", topic,
                    "--group", "bob-readers", "--from-beginning", "--max-messages", "3",
                    "--timeout-ms", "60000", "--command-config", str(bob))
    assert res.stdout.split() == ["one", "two", "three"]
    # a group outside bob's prefix: GroupAuthorizationException
    res = tools.run("console-consumer", "--bootstrap-server", addr, "--topic", topic,
                    "--group", "other-group", "--from-beginning", "--max-messages", "1",
                    "--timeout-ms", "20000", "--command-config", str(bob), check=False)
    assert "GroupAuthorizationException" in res.output or "Not authorized" in res.output
    tools.run("acls", "--bootstrap-server", addr, "--command-config", str(admin), "--remove",
              "--force", "--allow-principal", "User:bob", "--operation", "Write",
              "--topic", topic)
    listed = tools.run("acls", "--bootstrap-server", addr, "--command-config", str(admin),
                       "--list", "--topic", topic).output
    assert "operation=WRITE" not in listed and "operation=READ" in listed


def test_kafka_delegation_tokens_and_a_token_client(
    secured: tuple[BrokerProcess, int, Pki, Path],
) -> None:
    """kafka-delegation-tokens creates and describes a token for bob; a console producer
    authenticates with it (ScramLoginModule tokenauth=true) and acts as bob."""
    bp, port, pki, base = secured
    tools = JavaTools("4.x")
    addr = f"127.0.0.1:{port}"
    bob = _client_props(base / "bob-tok.properties", pki, "SCRAM-SHA-256", "bob", "bob-secret")
    out = tools.run("delegation-tokens", "--bootstrap-server", addr, "--command-config",
                    str(bob), "--create", "--max-life-time-period", "-1").output
    line = next(ln for ln in out.splitlines() if "User:bob" in ln)
    token_id, hmac_b64 = line.split()[0], line.split()[1]
    described = tools.run("delegation-tokens", "--bootstrap-server", addr, "--command-config",
                          str(bob), "--describe", "--owner-principal", "User:bob").output
    assert token_id in described
    topic = f"token-{uuid.uuid4().hex[:8]}"
    admin = _client_props(base / "admin-tok.properties", pki, "PLAIN", "admin", "admin-secret")
    tools.run("acls", "--bootstrap-server", addr, "--command-config", str(admin), "--add",
              "--allow-principal", "User:bob", "--operation", "Write", "--topic", topic)
    token_props = write_properties(base / "token.properties", {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
                            f'username="{token_id}" password="{hmac_b64}" tokenauth="true";',
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca_pem),
    })
    tools.run("topics", "--bootstrap-server", addr, "--command-config", str(admin),
              "--create", "--topic", topic, "--partitions", "1", "--replication-factor", "1")
    tools.run("console-producer", "--bootstrap-server", addr, "--topic", topic,
              tools.option("producer-property-file"), str(token_props), input="by-token\n")
