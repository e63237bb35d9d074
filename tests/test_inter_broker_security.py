"""kafkawire.security.inter_broker: the inter-broker listener and its security from Kafka's keys, and
the SASL client (PLAIN, SCRAM) against kafkawire's own SASL server mechanisms. The SASL_SSL
cluster is in tests/test_replication_secure.py."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from kafkawire.config.broker_config import BrokerConfig, ConfigError
from kafkawire.security.inter_broker import (
    ClientSecurity,
    SaslClient,
    controller_listener,
    controller_security,
    inter_broker_listener,
    inter_broker_security,
)
from kafkawire.security.sasl import PlainServer, SaslFailure, ScramServer
from kraft.image import ScramCredential
from kraft.scram import scram_keys
from tests.security_helpers import make_pki

BASE = {"node.id": "1", "process.roles": "broker,controller",
        "controller.quorum.voters": "1@127.0.0.1:9093", "controller.listener.names": "CONTROLLER"}


def cfg(**kv: str) -> BrokerConfig:
    return BrokerConfig.from_dict({**BASE, **{k.replace("_", "."): v for k, v in kv.items()}})


def test_listener_choice() -> None:
    two = {"listeners": "PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9094,"
                        "CONTROLLER://127.0.0.1:9093"}
    c = BrokerConfig.from_dict({**BASE, **two})
    assert inter_broker_listener(c) == "PLAINTEXT"
    c = BrokerConfig.from_dict({**BASE, **two, "security.inter.broker.protocol": "SASL_SSL"})
    assert inter_broker_listener(c) == "SASL_SSL"
    c = BrokerConfig.from_dict({**BASE, **two, "inter.broker.listener.name": "SASL_SSL",
                                "security.inter.broker.protocol": "SASL_SSL"})
    with pytest.raises(ConfigError, match="Only one of inter.broker.listener.name"):
        inter_broker_listener(c)


def test_security_of_a_sasl_ssl_listener(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    raw = {**BASE, "listeners": "SECURE://127.0.0.1:9094,CONTROLLER://127.0.0.1:9093",
           "listener.security.protocol.map": "SECURE:SASL_SSL,CONTROLLER:PLAINTEXT",
           "listener.name.secure.ssl.truststore.type": "PEM",
           "listener.name.secure.ssl.truststore.location": str(pki.ca_pem),
           "listener.name.secure.plain.sasl.jaas.config":
               'org.apache.kafka.common.security.plain.PlainLoginModule required '
               'username="admin" password="s3cret" user_admin="s3cret";'}
    with pytest.raises(ConfigError, match="GSSAPI is not supported"):
        inter_broker_security(BrokerConfig.from_dict(raw), {}, "SECURE")
    raw["sasl.mechanism.inter.broker.protocol"] = "PLAIN"
    sec = inter_broker_security(BrokerConfig.from_dict(raw), {}, "SECURE")
    assert (sec.protocol, sec.mechanism, sec.username, sec.password) == (
        "SASL_SSL", "PLAIN", "admin", "s3cret")
    assert sec.ssl_context is not None and sec.ssl_context.check_hostname
    assert not inter_broker_security(BrokerConfig.from_dict(
        {**raw, "listener.name.secure.ssl.endpoint.identification.algorithm": ""}), {},
        "SECURE").ssl_context.check_hostname  # type: ignore[union-attr]
    with pytest.raises(ConfigError, match="no username/password"):  # no SCRAM JAAS entry
        inter_broker_security(BrokerConfig.from_dict(
            {**raw, "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"}), {}, "SECURE")


def test_security_of_the_controller_listener(tmp_path: Path) -> None:
    """Connections to the controllers use the first controller listener's settings and
    sasl.mechanism.controller.protocol (not the inter-broker one)."""
    pki = make_pki(tmp_path)
    raw = {**BASE, "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
           "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_SSL",
           "sasl.mechanism.inter.broker.protocol": "PLAIN",
           "listener.name.controller.ssl.truststore.type": "PEM",
           "listener.name.controller.ssl.truststore.location": str(pki.ca_pem),
           "listener.name.controller.scram-sha-512.sasl.jaas.config":
               'org.apache.kafka.common.security.scram.ScramLoginModule required '
               'username="ctl" password="pw";'}
    c = BrokerConfig.from_dict(raw)
    assert controller_listener(c) == "CONTROLLER"
    assert inter_broker_security(c, {}, inter_broker_listener(c)).protocol == "PLAINTEXT"
    with pytest.raises(ConfigError, match="sasl.mechanism.controller.protocol=GSSAPI"):
        controller_security(c, {})  # Kafka's default mechanism
    sec = controller_security(BrokerConfig.from_dict(
        {**raw, "sasl.mechanism.controller.protocol": "SCRAM-SHA-512"}), {})
    assert (sec.protocol, sec.mechanism, sec.username, sec.password) == (
        "SASL_SSL", "SCRAM-SHA-512", "ctl", "pw")
    assert sec.ssl_context is not None
    ssl_only = controller_security(BrokerConfig.from_dict(
        {**raw, "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL"}), {})
    assert ssl_only.protocol == "SSL" and ssl_only.mechanism is None
    assert ssl_only.ssl_context is not None
    assert controller_security(BrokerConfig.from_dict(
        {**BASE, "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"}),
        {}).ssl_context is None


def _exchange(client: SaslClient, server: ScramServer | PlainServer) -> None:
    token: bytes | None = client.first()
    while token is not None:
        token = client.next(server.evaluate(token, 0))
    assert server.complete


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_client_against_the_server(mechanism: str) -> None:
    digest = "sha512" if mechanism.endswith("512") else "sha256"
    salt, iterations = b"salty", 4096
    salted = hashlib.pbkdf2_hmac(digest, b"pw,=x", salt, iterations)
    stored, server_key = scram_keys(digest, salted)
    cred = ScramCredential(salt, stored, server_key, iterations)
    server = ScramServer(mechanism, digest, lambda u: cred if u == "broker,1" else None)
    _exchange(SaslClient(ClientSecurity("SASL_SSL", None, mechanism, "broker,1", "pw,=x")),
              server)
    assert server.principal == "broker,1"
    wrong = ScramServer(mechanism, digest, lambda u: cred)
    with pytest.raises(SaslFailure):
        _exchange(SaslClient(ClientSecurity("SASL_SSL", None, mechanism, "u", "nope")), wrong)


def test_plain_client_against_the_server() -> None:
    server = PlainServer({"admin": "s3cret"})
    _exchange(SaslClient(ClientSecurity("SASL_PLAINTEXT", None, "PLAIN", "admin", "s3cret")),
              server)
    assert server.principal == "admin"
