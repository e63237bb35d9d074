"""TLS configuration: inline PEM keystores, ssl.enabled.protocols, ssl.cipher.suites, the
keystore reloaded after AlterConfigs (Kafka's dynamic listener update), a bad new keystore
refused with INVALID_CONFIG, a bad static one refused at start; principal mapping rules."""

from __future__ import annotations

import socket
import ssl
from pathlib import Path

import pytest

from kafkawire.config.broker_config import BrokerConfig, ConfigError
from kafkawire.config.security import map_principal, parse_mapping_rules
from kafkawire.security.listener import ListenerSecurity
from kafkawire.tools.testing import BrokerProcess
from protocol._generated.incremental_alter_configs_request import (
    IncrementalAlterConfigsRequest as IAC,
)
from tests.conftest import RawClient
from tests.security_helpers import listeners, make_pki


def _peer_subject(port: int, ca: Path, **ctx_opts: object) -> str:
    ctx = ssl.create_default_context(cafile=str(ca))
    for k, v in ctx_opts.items():
        setattr(ctx, k, v)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            cert = s.getpeercert()
            assert cert is not None
            return ",".join(f"{k}={v}" for rdn in cert["subject"] for k, v in rdn)


def test_inline_pem_protocols_and_reload(tmp_path: Path) -> None:
    old, new = make_pki(tmp_path / "old"), make_pki(tmp_path / "new", server_cn="renewed")
    both = tmp_path / "both-cas.pem"
    both.write_bytes(old.ca_pem.read_bytes() + new.ca_pem.read_bytes())
    ov, ports = listeners(PLAIN="PLAINTEXT", TLS="SSL")
    ov.update({
        "listener.name.tls.ssl.keystore.type": "PEM",
        # as Kafka's docs write inline PEM in a properties file: lines joined by spaces
        "listener.name.tls.ssl.keystore.certificate.chain":
            old.server_cert_pem.read_text().replace("\n", " "),
        "listener.name.tls.ssl.keystore.key": old.server_key_pem.read_text().replace("\n", " "),
        "listener.name.tls.ssl.enabled.protocols": "TLSv1.3",
    })
    with BrokerProcess(tmp_path / "data", port=ports["PLAIN"], overrides=ov) as bp:
        assert "commonName=localhost" in _peer_subject(ports["TLS"], both)
        # TLS 1.2 only: refused by a TLSv1.3-only listener
        with pytest.raises(ssl.SSLError):
            _peer_subject(ports["TLS"], both, maximum_version=ssl.TLSVersion.TLSv1_2)
        admin = RawClient(bp.bootstrap)
        try:
            def alter(key: str, value: str) -> int:
                r = admin.request(IAC(resources=[IAC.AlterConfigsResource(
                    resource_type=4, resource_name="1", configs=[IAC.AlterableConfig(
                        name=key, config_operation=0, value=value)])]), 1)
                return int(r.responses[0].error_code)

            # an unusable keystore is refused (INVALID_CONFIG) and changes nothing
            assert alter("listener.name.tls.ssl.keystore.key", "not a key") == 40
            assert "commonName=localhost" in _peer_subject(ports["TLS"], both)
            assert alter("listener.name.tls.ssl.keystore.certificate.chain",
                         new.server_cert_pem.read_text()) == 40  # key of the old one
            r = admin.request(IAC(resources=[IAC.AlterConfigsResource(
                resource_type=4, resource_name="1", configs=[
                    IAC.AlterableConfig(name="listener.name.tls.ssl.keystore.certificate.chain",
                                        config_operation=0,
                                        value=new.server_cert_pem.read_text()),
                    IAC.AlterableConfig(name="listener.name.tls.ssl.keystore.key",
                                        config_operation=0,
                                        value=new.server_key_pem.read_text())])]), 1)
            assert r.responses[0].error_code == 0
        finally:
            admin.close()
        assert "commonName=renewed" in _peer_subject(ports["TLS"], both)


def test_cipher_suites_and_bad_keystores(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    base = {"listeners": "S://127.0.0.1:0", "listener.security.protocol.map": "S:SSL",
            "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.server_pem)}
    sec = ListenerSecurity(BrokerConfig.from_dict({
        **base, "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        "ssl.enabled.protocols": "TLSv1.2"}), dict)
    sec.check(["S"])
    ciphers = [c["name"] for c in sec.ssl_context("S").get_ciphers()]
    assert "ECDHE-ECDSA-AES256-GCM-SHA384" in ciphers
    assert "ECDHE-ECDSA-AES128-GCM-SHA256" not in ciphers
    for bad in ({"ssl.keystore.location": str(tmp_path / "missing.pem")},
                {"ssl.keystore.type": "JKS", "ssl.keystore.location": str(pki.server_p12)},
                {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(pki.server_p12),
                 "ssl.keystore.password": "wrong"},
                {"ssl.client.auth": "required"},
                {"ssl.cipher.suites": "TLS_NO_SUCH_SUITE"}):
        with pytest.raises(ConfigError):
            ListenerSecurity(BrokerConfig.from_dict({**base, **bad}), dict).check(["S"])


def test_principal_mapping_rules() -> None:
    rules = parse_mapping_rules(
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=.*$/$1@$2/L,DEFAULT")
    assert map_principal(rules, "CN=kafka-app,OU=ServiceUsers,O=Org") == "kafka-app"
    assert map_principal(rules, "CN=Duke,OU=SME,O=Org,C=US") == "duke@sme"
    assert map_principal(rules, "CN=other,O=Org") == "CN=other,O=Org"
    upper = parse_mapping_rules("RULE:^cn=([a-z]+)$/$1/U")
    assert map_principal(upper, "cn=adam") == "ADAM"
    with pytest.raises(ValueError):
        map_principal(upper, "CN=nomatch")
