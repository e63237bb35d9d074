"""Per-listener security at run time: protocol, TLS context (reloaded on change), SASL settings.

``ListenerSecurity.check()`` builds every listener's TLS context at start, so a broken keystore
stops the broker with a clear message instead of failing each handshake. Later, each new
connection asks for its listener's context; when the ``ssl.*`` settings (static + this broker's
dynamic config, changed by AlterConfigs) or the keystore/truststore files changed, a new context
is built (Kafka reloads its keystore the same way); a new context that cannot be built is logged
and the previous one is kept.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable, Mapping
from typing import Any

from kafkawire.config import BrokerConfig, ConfigError
from kafkawire.jwt import VALIDATOR_CLASSES, fetch_jwks, validate
from kafkawire.sasl import (
    MechanismServer,
    OAuthBearerUnsecuredServer,
    PlainServer,
    SaslFailure,
    ScramServer,
)
from kafkawire.security_config import (
    SaslSettings,
    listener_protocol,
    lookup,
    map_principal,
    parse_mapping_rules,
    sasl_settings,
    ssl_fingerprint,
    ssl_settings,
)
from kafkawire.tls import server_context, subject_dn
from kraft.image import ScramCredential
from kraft.scram import MECHANISMS

log = logging.getLogger("kafkawire.security")
ANONYMOUS = "User:ANONYMOUS"
SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


class ListenerSecurity:
    def __init__(self, cfg: BrokerConfig, dynamic: Callable[[], Mapping[str, str]]) -> None:
        self.cfg = cfg
        self.dynamic = dynamic
        self._contexts: dict[str, tuple[tuple[object, ...], ssl.SSLContext]] = {}
        self.listeners: list[str] = []
        self._jwks: dict[str, tuple[int, dict[str, Any]]] = {}

    def protocol(self, listener: str) -> str:
        return listener_protocol(self.cfg, listener)

    def uses_tls(self, listener: str) -> bool:
        return self.protocol(listener) in ("SSL", "SASL_SSL")

    def uses_sasl(self, listener: str) -> bool:
        return self.protocol(listener).startswith("SASL_")

    def check(self, listeners: list[str]) -> None:
        """Refuse a configuration that cannot serve (ConfigError)."""
        self.listeners = list(listeners)
        for name in listeners:
            proto = self.protocol(name)
            if proto in ("SSL", "SASL_SSL"):
                settings = ssl_settings(self.cfg, {}, name)
                self._contexts[name] = (ssl_fingerprint(settings), server_context(settings))
            if proto.startswith("SASL_"):
                sasl = self.sasl(name)
                bad = [m for m in sasl.mechanisms if m not in SUPPORTED_MECHANISMS]
                if bad:
                    raise ConfigError(f"listener {name}: unsupported SASL mechanisms {bad} "
                                      f"(kafkawire serves {', '.join(SUPPORTED_MECHANISMS)})")
                if "PLAIN" in sasl.mechanisms and "PLAIN" not in sasl.jaas:
                    raise ConfigError(f"listener {name}: PLAIN needs a JAAS config "
                                      f"(listener.name.{name.lower()}.plain.sasl.jaas.config)")
            parse_mapping_rules(self.setting(name, "ssl.principal.mapping.rules") or "DEFAULT")

    def validate_dynamic(self, dynamic: Mapping[str, str]) -> str | None:
        """Kafka's check of a dynamic TLS change: every TLS listener's context must build."""
        for name in self.listeners:
            if self.protocol(name) not in ("SSL", "SASL_SSL"):
                continue
            try:
                server_context(ssl_settings(self.cfg, dynamic, name))
            except ConfigError as e:
                return f"Validation of dynamic config update of SSLFactory failed: {e}"
        return None

    def setting(self, listener: str, key: str) -> str | None:
        return lookup(self.cfg, self.dynamic(), listener, key)

    def ssl_context(self, listener: str) -> ssl.SSLContext:
        settings = ssl_settings(self.cfg, self.dynamic(), listener)
        stamp = ssl_fingerprint(settings)
        cached = self._contexts.get(listener)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        try:
            ctx = server_context(settings)
        except ConfigError as e:
            if cached is None:
                raise
            log.error("listener %s: new TLS settings unusable, keeping the previous ones: %s",
                      listener, e)
            self._contexts[listener] = (stamp, cached[1])
            return cached[1]
        if cached is not None:
            log.info("listener %s: TLS keystore/truststore reloaded", listener)
        self._contexts[listener] = (stamp, ctx)
        return ctx

    def certificate_principal(self, listener: str, der: bytes | None) -> str:
        """``User:<mapped subject DN>`` of a client certificate; ANONYMOUS without one."""
        if not der:
            return ANONYMOUS
        rules = parse_mapping_rules(
            self.setting(listener, "ssl.principal.mapping.rules") or "DEFAULT")
        return "User:" + map_principal(rules, subject_dn(der))

    def _jwk(self, url: str, kid: str, now_ms: int) -> Any:
        """A JWKS key by kid: read when first needed, after the refresh interval, or when a
        token names a kid the cached set lacks (at most once a second)."""
        refresh_ms = int(lookup(self.cfg, self.dynamic(), "",
                                "sasl.oauthbearer.jwks.endpoint.refresh.ms") or 3600000)
        fetched_ms, keys = self._jwks.get(url, (-1, {}))
        stale = fetched_ms < 0 or now_ms - fetched_ms >= refresh_ms
        if stale or (kid not in keys and now_ms - fetched_ms >= 1000):
            try:
                keys = fetch_jwks(url)
            except (OSError, ValueError) as e:
                log.error("cannot read the JWKS at %s: %s", url, e)
            self._jwks[url] = (now_ms, keys)
        return keys.get(kid)

    def sasl(self, listener: str) -> SaslSettings:
        return sasl_settings(self.cfg, self.dynamic(), listener)

    def mechanism_server(
        self, listener: str, mechanism: str,
        scram_of: Callable[[str, int], ScramCredential | None],
        token_of: Callable[[str, int], tuple[ScramCredential, str] | None] | None = None,
    ) -> MechanismServer:
        settings = self.sasl(listener)
        if mechanism == "PLAIN":
            return PlainServer.from_jaas(settings.jaas.get("PLAIN", ""))
        if mechanism == "OAUTHBEARER":
            handler = self.setting(listener, "oauthbearer.sasl.server.callback.handler.class")
            if handler in VALIDATOR_CLASSES:
                url = settings.oauth.get("sasl.oauthbearer.jwks.endpoint.url") or ""
                return OAuthBearerUnsecuredServer(
                    settings.oauth,
                    lambda token, now: validate(token, lambda kid: self._jwk(url, kid, now),
                                                settings.oauth, now))
            return OAuthBearerUnsecuredServer(settings.oauth)
        for mech_id, (name, digest) in MECHANISMS.items():
            if name == mechanism:
                def credential(user: str, m: int = mech_id) -> ScramCredential | None:
                    return scram_of(user, m)

                def token(token_id: str, m: int = mech_id) -> tuple[ScramCredential, str] | None:
                    return None if token_of is None else token_of(token_id, m)

                return ScramServer(name, digest, credential, token)
        raise SaslFailure(f"Unsupported SASL mechanism {mechanism}")
