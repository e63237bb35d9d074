"""Listener security settings, read by Kafka's property names.

Each listener has a security protocol from ``listener.security.protocol.map`` (``NAME:PROTOCOL``
pairs; a listener named like a protocol maps to it by default): PLAINTEXT, SSL, SASL_PLAINTEXT
or SASL_SSL. A setting is looked up as Kafka does: first with the listener prefix
``listener.name.<listener lower case>.<key>``, then the plain ``<key>``; a SASL JAAS config is
``listener.name.<listener>.<mechanism lower case>.sasl.jaas.config`` first, then
``sasl.jaas.config``. Values come from the static config (``server.properties`` /
``--override``) and, for the keys Kafka reconfigures per broker, from this broker's dynamic
config (AlterConfigs), which wins; a TLS context is rebuilt when its settings or the files they
name change (Kafka's keystore reload).

Pure: reads a ``BrokerConfig`` and the broker's dynamic config dict.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from kafkawire.config.broker_config import BrokerConfig, ConfigError

#: Kafka's SecurityProtocol ids (BrokerRegistration endpoints)
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
#: Kafka's defaults of the keys below
DEFAULTS: dict[str, str] = {
    "ssl.client.auth": "none",
    "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
    "ssl.keystore.type": "JKS",
    "ssl.truststore.type": "JKS",
    "ssl.principal.mapping.rules": "DEFAULT",
    "ssl.endpoint.identification.algorithm": "https",
    "sasl.mechanism.inter.broker.protocol": "GSSAPI",
    "sasl.mechanism.controller.protocol": "GSSAPI",
    "sasl.enabled.mechanisms": "GSSAPI",
    "connections.max.reauth.ms": "0",
    "sasl.server.max.receive.size": "524288",
    "connection.failed.authentication.delay.ms": "100",
    "sasl.oauthbearer.sub.claim.name": "sub",
    "sasl.oauthbearer.scope.claim.name": "scope",
    "sasl.oauthbearer.expected.audience": "",
    "sasl.oauthbearer.expected.issuer": "",
    "sasl.oauthbearer.clock.skew.seconds": "30",
    "sasl.oauthbearer.jwks.endpoint.url": "",
    "sasl.oauthbearer.jwks.endpoint.refresh.ms": "3600000",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": "100",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": "10000",
}
SSL_KEYS = (
    "ssl.keystore.location", "ssl.keystore.password", "ssl.keystore.type", "ssl.key.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.location",
    "ssl.truststore.password", "ssl.truststore.type", "ssl.truststore.certificates",
    "ssl.client.auth", "ssl.enabled.protocols", "ssl.cipher.suites",
)


def protocol_map(cfg: BrokerConfig) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in str(cfg["listener.security.protocol.map"]).split(","):
        if not pair.strip():
            continue
        name, sep, proto = pair.partition(":")
        proto = proto.strip().upper()
        if not sep or proto not in SECURITY_PROTOCOL_IDS:
            raise ConfigError(f"invalid listener.security.protocol.map entry {pair!r}")
        out[name.strip().upper()] = proto
    return out


def listener_protocol(cfg: BrokerConfig, listener: str) -> str:
    proto = protocol_map(cfg).get(listener.upper())
    if proto is None:
        raise ConfigError(
            f"listener {listener} has no entry in listener.security.protocol.map")
    return proto


def lookup(cfg: BrokerConfig, dynamic: Mapping[str, str], listener: str, key: str) -> str | None:
    """A listener setting: dynamic then static, prefixed then plain, then Kafka's default."""
    prefixed = f"listener.name.{listener.lower()}.{key}"
    for source in (dynamic, cfg.explicit):
        if prefixed in source:
            return source[prefixed]
    for source in (dynamic, cfg.explicit):
        if key in source:
            return source[key]
    return DEFAULTS.get(key)


def jaas_config(cfg: BrokerConfig, dynamic: Mapping[str, str], listener: str,
                mechanism: str) -> str | None:
    return lookup(cfg, dynamic, listener, f"{mechanism.lower()}.sasl.jaas.config") or lookup(
        cfg, dynamic, listener, "sasl.jaas.config")


def split_list(raw: str | None) -> list[str]:
    return [p.strip() for p in (raw or "").split(",") if p.strip()]


@dataclass(frozen=True)
class SaslSettings:
    mechanisms: tuple[str, ...]
    #: mechanism -> its JAAS config text (PLAIN users, OAUTHBEARER options)
    jaas: Mapping[str, str]
    reauth_ms: int
    max_receive_bytes: int
    failed_auth_delay_ms: int
    oauth: Mapping[str, str]


def sasl_settings(cfg: BrokerConfig, dynamic: Mapping[str, str], listener: str) -> SaslSettings:
    def num(key: str) -> int:
        raw = lookup(cfg, dynamic, listener, key)
        try:
            return int(raw or 0)
        except ValueError:
            raise ConfigError(f"invalid value {raw!r} for {key}") from None

    mechs = tuple(m.upper() for m in split_list(lookup(cfg, dynamic, listener,
                                                       "sasl.enabled.mechanisms")))
    jaas = {m: text for m in mechs
            if (text := jaas_config(cfg, dynamic, listener, m)) is not None}
    oauth = {k: lookup(cfg, dynamic, listener, k) or "" for k in DEFAULTS
             if k.startswith("sasl.oauthbearer.")}
    return SaslSettings(mechs, jaas, num("connections.max.reauth.ms"),
                        num("sasl.server.max.receive.size"),
                        num("connection.failed.authentication.delay.ms"), oauth)


def ssl_settings(cfg: BrokerConfig, dynamic: Mapping[str, str],
                 listener: str) -> dict[str, str | None]:
    return {k: lookup(cfg, dynamic, listener, k) for k in SSL_KEYS}


def ssl_fingerprint(settings: Mapping[str, str | None]) -> tuple[object, ...]:
    """What a TLS context depends on: the settings and the files' modification times."""
    stamps: list[object] = []
    for key in ("ssl.keystore.location", "ssl.truststore.location"):
        path = settings.get(key)
        try:
            stamps.append(os.stat(path).st_mtime_ns if path else None)
        except OSError:
            stamps.append(None)
    return (tuple(sorted((k, v or "") for k, v in settings.items())), *stamps)


# ---- ssl.principal.mapping.rules --------------------------------------------------------------

_RULE = re.compile(
    r"\s*(?:(DEFAULT)|RULE:((?:\\/|[^/])*)/((?:\\/|[^/])*)/([LU]?))\s*(?:,|$)")


@dataclass(frozen=True)
class PrincipalRule:
    default: bool
    pattern: re.Pattern[str] | None = None
    replacement: str = ""
    case: str = ""


def parse_mapping_rules(text: str) -> list[PrincipalRule]:
    """Kafka's ``ssl.principal.mapping.rules``: ``DEFAULT`` or ``RULE:pattern/replacement/[LU]``
    separated by commas; ``$1`` in a replacement is the pattern's first group."""
    rules: list[PrincipalRule] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _RULE.match(text, pos)
        if m is None or m.end() == pos:
            raise ConfigError(f"invalid ssl.principal.mapping.rules at {text[pos:]!r}")
        pos = m.end()
        if m.group(1):
            rules.append(PrincipalRule(True))
            continue
        pattern = m.group(2).replace("\\/", "/")
        replacement = re.sub(r"\$(\d)", r"\\\1", m.group(3).replace("\\/", "/"))
        rules.append(PrincipalRule(False, re.compile(pattern), replacement, m.group(4) or ""))
    return rules or [PrincipalRule(True)]


def map_principal(rules: list[PrincipalRule], distinguished_name: str) -> str:
    """The principal name of a certificate's subject DN (RFC 2253), as SslPrincipalMapper."""
    for rule in rules:
        if rule.default:
            return distinguished_name
        assert rule.pattern is not None
        if rule.pattern.fullmatch(distinguished_name):
            out = rule.pattern.sub(rule.replacement, distinguished_name)
            if rule.case == "L":
                out = out.lower()
            elif rule.case == "U":
                out = out.upper()
            return out
    raise ValueError(f"no ssl.principal.mapping.rules rule matches {distinguished_name}")
