"""Signed JWT validation for OAUTHBEARER (Kafka's OAuthBearerValidatorCallbackHandler, KIP-768).

Enabled per listener with
``listener.name.<l>.oauthbearer.sasl.server.callback.handler.class=
org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler`` (or the
``...secured.`` name Kafka 3.x used) and ``sasl.oauthbearer.jwks.endpoint.url``: a ``file:``
URL or an ``http(s):`` URL serving a JSON Web Key Set.

The keys (``JwksCache``, Kafka's ``RefreshingHttpsJwks``) are never fetched on the broker's
event loop: a worker thread reads them once before the listeners serve, again every
``sasl.oauthbearer.jwks.endpoint.refresh.ms`` (1 h), and at once when a token names a ``kid``
the set lacks (each such kid at most once a minute, kids longer than 1000 characters never);
each fetch is retried with ``sasl.oauthbearer.jwks.endpoint.retry.backoff.ms`` (100 ms)
doubling up to ``...retry.backoff.max.ms`` (10 s). Authentication only reads the cached set:
a token with an unknown ``kid`` is refused (as Kafka refuses it) while the refresh that may
bring its key runs in the background. A fetch that fails keeps the keys already held.

A token passes when its signature (RS256/384/512, PS256/384/512, ES256/384/512; checked by
PyJWT) verifies with the JWKS key its ``kid`` names, ``exp`` is in the future and ``iat`` /
``nbf`` not in the future (within ``sasl.oauthbearer.clock.skew.seconds``, by the broker's
clock), the principal claim (``sasl.oauthbearer.sub.claim.name``) is a non-empty string,
``aud`` contains one of ``sasl.oauthbearer.expected.audience`` (when set) and ``iss`` equals
``sasl.oauthbearer.expected.issuer`` (when set).
"""

from __future__ import annotations

import json
import logging
import urllib.request
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import jwt as pyjwt
import trio

log = logging.getLogger("kafkawire.security")

VALIDATOR_CLASSES = frozenset({
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
})
#: one HTTP(S) read of the JWKS gives up after this long (on its worker thread)
JWKS_FETCH_TIMEOUT_S = 10
#: Kafka's RefreshingHttpsJwks: an unknown kid asks for a refresh at most this often, for at
#: most this many kids remembered, and a kid longer than this is not looked up at all
MISSING_KID_INTERVAL_MS = 60_000
MISSING_KID_MAX_ENTRIES = 16
MISSING_KID_MAX_LENGTH = 1000
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512")


class JwtInvalid(ValueError):
    pass


def parse_jwks(doc: Any) -> dict[str, pyjwt.PyJWK]:
    """kid -> key of a JWKS document: signing keys PyJWT can use (others are skipped)."""
    keys: dict[str, pyjwt.PyJWK] = {}
    for jwk in doc.get("keys", []) if isinstance(doc, dict) else []:
        if not isinstance(jwk, dict) or jwk.get("use", "sig") != "sig":
            continue
        try:
            keys[str(jwk.get("kid", ""))] = pyjwt.PyJWK(jwk)
        except (pyjwt.PyJWKError, pyjwt.InvalidKeyError, KeyError, ValueError, TypeError):
            continue
    return keys


def fetch_jwks(url: str) -> dict[str, pyjwt.PyJWK]:
    """Read and parse a JWKS at a file: or http(s): URL. Blocking: call it on a worker thread
    (``JwksCache``), never on the event loop."""
    if not url.startswith(("file:", "http:", "https:")):
        raise JwtInvalid(f"unsupported JWKS URL {url}")
    with urllib.request.urlopen(url, timeout=JWKS_FETCH_TIMEOUT_S) as f:  # noqa: S310
        return parse_jwks(json.loads(f.read()))


class JwksCache:
    """One JWKS endpoint's keys, read off the event loop (see the module's docstring)."""

    def __init__(self, url: str, refresh_ms: int, backoff_ms: int, backoff_max_ms: int,
                 clock_ms: Callable[[], int],
                 fetch: Callable[[str], dict[str, pyjwt.PyJWK]] = fetch_jwks) -> None:
        self.url = url
        self.refresh_ms = max(1, refresh_ms)
        self.backoff_ms = max(1, backoff_ms)
        self.backoff_max_ms = max(self.backoff_ms, backoff_max_ms)
        self.clock_ms = clock_ms
        self.fetch = fetch
        self.keys: dict[str, pyjwt.PyJWK] = {}
        #: fetches that succeeded (tests and the log)
        self.refreshes = 0
        self._missing: OrderedDict[str, int] = OrderedDict()
        self._wake = trio.Event()

    def key(self, kid: str) -> pyjwt.PyJWK | None:
        """The cached key ``kid`` names; None (and maybe an expedited refresh) otherwise.
        Never blocks."""
        found = self.keys.get(kid)
        if found is None:
            self.maybe_expedite(kid)
        return found

    def maybe_expedite(self, kid: str) -> bool:
        """Ask for a refresh now for an unknown kid, unless that kid asked less than a minute
        ago (Kafka's RefreshingHttpsJwks.maybeExpediteRefresh)."""
        if len(kid) > MISSING_KID_MAX_LENGTH:
            log.warning("JWT key id of %d characters is too long to look up", len(kid))
            return False
        now = self.clock_ms()
        due = self._missing.get(kid)
        if due is not None and due > now:
            return False
        self._missing[kid] = now + MISSING_KID_INTERVAL_MS
        self._missing.move_to_end(kid)
        while len(self._missing) > MISSING_KID_MAX_ENTRIES:
            self._missing.popitem(last=False)
        self._wake.set()
        return True

    async def refresh(self) -> bool:
        """One refresh with Kafka's retries: the fetch on a worker thread, tried again after
        backoff.ms, doubling, until backoff.max.ms have passed. True when the keys were
        replaced."""
        delay_ms, waited_ms = self.backoff_ms, 0
        while True:
            try:
                keys = await trio.to_thread.run_sync(self.fetch, self.url,
                                                     abandon_on_cancel=True)
            except (OSError, ValueError) as e:
                if waited_ms + delay_ms > self.backoff_max_ms:
                    log.warning("cannot read the JWKS at %s (keeping the %d key(s) held): %s",
                                self.url, len(self.keys), e)
                    return False
                await trio.sleep(delay_ms / 1000)
                waited_ms += delay_ms
                delay_ms *= 2
                continue
            for kid in keys:
                self._missing.pop(kid, None)
            self.keys = keys
            self.refreshes += 1
            log.debug("JWKS at %s read: %d key(s)", self.url, len(keys))
            return True

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The first read (``started`` once it is done or has given up), then a refresh every
        refresh.ms and whenever an unknown kid asks for one."""
        await self.refresh()
        log.info("JWKS at %s: %d key(s), refreshed every %d ms", self.url, len(self.keys),
                 self.refresh_ms)
        task_status.started()
        while True:
            with trio.move_on_after(self.refresh_ms / 1000):
                await self._wake.wait()
            self._wake = trio.Event()
            await self.refresh()


def validate(token: str, keys: Callable[[str], Any], options: Mapping[str, str],
             now_ms: int) -> tuple[str, int]:
    """(principal, expiry ms) of a signed JWT; JwtInvalid otherwise. ``keys(kid)`` returns a
    PyJWK or None and must not block."""
    try:
        header = pyjwt.get_unverified_header(token)
    except pyjwt.InvalidTokenError:
        raise JwtInvalid("undecodable JWT") from None
    key = keys(str(header.get("kid", "")))
    if key is None:
        raise JwtInvalid("no JWKS key for the token's kid")
    audiences = [a.strip() for a in (options.get("sasl.oauthbearer.expected.audience") or "")
                 .split(",") if a.strip()]
    issuer = options.get("sasl.oauthbearer.expected.issuer") or None
    try:
        # signature, aud and iss by PyJWT; the times below by the broker's clock
        claims = pyjwt.decode(
            token, key, algorithms=list(ALGORITHMS), audience=audiences or None,
            issuer=issuer, options={"require": ["exp"], "verify_exp": False,
                                    "verify_iat": False, "verify_nbf": False,
                                    "verify_aud": bool(audiences)})
    except pyjwt.InvalidTokenError as e:
        raise JwtInvalid(str(e) or type(e).__name__) from None
    skew_ms = int(options.get("sasl.oauthbearer.clock.skew.seconds") or 30) * 1000
    exp, iat, nbf = claims.get("exp"), claims.get("iat"), claims.get("nbf")
    if not isinstance(exp, (int, float)) or exp * 1000 + skew_ms <= now_ms:
        raise JwtInvalid("expired or no exp")
    for name, value in (("iat", iat), ("nbf", nbf)):
        if isinstance(value, (int, float)) and value * 1000 - skew_ms > now_ms:
            raise JwtInvalid(f"{name} in the future")
    sub = claims.get(options.get("sasl.oauthbearer.sub.claim.name") or "sub")
    if not isinstance(sub, str) or not sub.strip():
        raise JwtInvalid("no principal claim")
    return sub, int(exp * 1000)
