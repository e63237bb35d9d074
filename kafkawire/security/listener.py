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
import time
from collections.abc import Callable, Mapping

import trio

from kafkawire.config.broker_config import BrokerConfig, ConfigError
from kafkawire.config.security import (
    SaslSettings,
    listener_protocol,
    lookup,
    map_principal,
    parse_mapping_rules,
    sasl_settings,
    ssl_fingerprint,
    ssl_settings,
)
from kafkawire.security.oauth_jwt import VALIDATOR_CLASSES, JwksCache, validate
from kafkawire.security.sasl import (
    MechanismServer,
    OAuthBearerUnsecuredServer,
    PlainServer,
    SaslFailure,
    ScramServer,
)
from kafkawire.security.tls import server_context, subject_dn
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
        #: JWKS endpoint URL -> its keys, refreshed off the event loop (run_jwks)
        self.jwks: dict[str, JwksCache] = {}
        self._jwks_nursery: trio.Nursery | None = None
        self.clock_ms: Callable[[], int] = lambda: int(time.time() * 1000)

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

    def _oauth_validated(self, listener: str) -> bool:
        return "OAUTHBEARER" in self.sasl(listener).mechanisms and self.setting(
            listener, "oauthbearer.sasl.server.callback.handler.class") in VALIDATOR_CLASSES

    def jwks_cache(self, url: str) -> JwksCache:
        """The cache of one JWKS endpoint, started in ``run_jwks``'s nursery when first named
        by a token (its first read then runs in the background as well)."""
        cache = self.jwks.get(url)
        if cache is None:
            def num(key: str, default: int) -> int:
                return int(lookup(self.cfg, self.dynamic(), "", key) or default)

            cache = self.jwks[url] = JwksCache(
                url, num("sasl.oauthbearer.jwks.endpoint.refresh.ms", 3_600_000),
                num("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", 100),
                num("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", 10_000),
                self.clock_ms)
            if self._jwks_nursery is not None:
                self._jwks_nursery.start_soon(cache.run)
        return cache

    async def run_jwks(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                       ) -> None:
        """Keep the JWKS of every listener with signed-JWT OAUTHBEARER fresh, off the event
        loop; ``started`` once each has been read (or its first read gave up), as Kafka
        reads them when the listener's validator is configured, before serving."""
        async with trio.open_nursery() as nursery:
            for name in self.listeners:
                if self.uses_sasl(name) and self._oauth_validated(name):
                    url = self.sasl(name).oauth.get("sasl.oauthbearer.jwks.endpoint.url") or ""
                    if url and url not in self.jwks:
                        await nursery.start(self.jwks_cache(url).run)
            self._jwks_nursery = nursery  # caches named later start here
            task_status.started()
            await trio.sleep_forever()

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
                cache = self.jwks_cache(
                    settings.oauth.get("sasl.oauthbearer.jwks.endpoint.url") or "")
                return OAuthBearerUnsecuredServer(
                    settings.oauth,
                    lambda token, now: validate(token, cache.key, settings.oauth, now))
            return OAuthBearerUnsecuredServer(settings.oauth)
        for mech_id, (name, digest) in MECHANISMS.items():
            if name == mechanism:
                def credential(user: str, m: int = mech_id) -> ScramCredential | None:
                    return scram_of(user, m)

                def token(token_id: str, m: int = mech_id) -> tuple[ScramCredential, str] | None:
                    return None if token_of is None else token_of(token_id, m)

                return ScramServer(name, digest, credential, token)
        raise SaslFailure(f"Unsupported SASL mechanism {mechanism}")
