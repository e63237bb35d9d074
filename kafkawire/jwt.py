"""Signed JWT validation for OAUTHBEARER (Kafka's OAuthBearerValidatorCallbackHandler, KIP-768).

Enabled per listener with
``listener.name.<l>.oauthbearer.sasl.server.callback.handler.class=
org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler`` (or the
``...secured.`` name Kafka 3.x used) and ``sasl.oauthbearer.jwks.endpoint.url``: a ``file:``
URL or an ``http(s):`` URL serving a JSON Web Key Set. The keys are read when first needed and
again after ``sasl.oauthbearer.jwks.endpoint.refresh.ms`` (1 h) or when a token names an
unknown ``kid``; an ``http(s)`` fetch blocks the broker's loop for at most 10 s.

A token passes when its signature (RS256/384/512, PS256/384/512, ES256/384/512) verifies with
the JWKS key its ``kid`` names, ``exp`` is in the future and ``iat`` not in the future (both
within ``sasl.oauthbearer.clock.skew.seconds``), the principal claim
(``sasl.oauthbearer.sub.claim.name``) is a non-empty string, ``aud`` contains one of
``sasl.oauthbearer.expected.audience`` (when set) and ``iss`` equals
``sasl.oauthbearer.expected.issuer`` (when set).
"""

from __future__ import annotations

import base64
import binascii
import json
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

VALIDATOR_CLASSES = frozenset({
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
})
JWKS_FETCH_TIMEOUT_S = 10
_HASHES: dict[str, Callable[[], hashes.HashAlgorithm]] = {
    "256": hashes.SHA256, "384": hashes.SHA384, "512": hashes.SHA512}
_CURVES: dict[str, Callable[[], ec.EllipticCurve]] = {
    "P-256": ec.SECP256R1, "P-384": ec.SECP384R1, "P-521": ec.SECP521R1}


class JwtInvalid(ValueError):
    pass


def b64url(part: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    except (binascii.Error, ValueError):
        raise JwtInvalid("not base64url") from None


def _int(part: str) -> int:
    return int.from_bytes(b64url(part), "big")


def public_key(jwk: Mapping[str, Any]) -> Any:
    kty = jwk.get("kty")
    if kty == "RSA":
        return rsa.RSAPublicNumbers(_int(jwk["e"]), _int(jwk["n"])).public_key()
    if kty == "EC" and jwk.get("crv") in _CURVES:
        curve = _CURVES[jwk["crv"]]()
        return ec.EllipticCurvePublicNumbers(_int(jwk["x"]), _int(jwk["y"]), curve).public_key()
    raise JwtInvalid(f"unsupported JWK type {kty}")


def fetch_jwks(url: str) -> dict[str, Any]:
    """kid -> public key of a JWKS document at a file: or http(s): URL."""
    if not url.startswith(("file:", "http:", "https:")):
        raise JwtInvalid(f"unsupported JWKS URL {url}")
    with urllib.request.urlopen(url, timeout=JWKS_FETCH_TIMEOUT_S) as f:  # noqa: S310
        doc = json.loads(f.read())
    keys: dict[str, Any] = {}
    for jwk in doc.get("keys", []):
        if jwk.get("use", "sig") == "sig":
            try:
                keys[str(jwk.get("kid", ""))] = public_key(jwk)
            except (JwtInvalid, KeyError, ValueError):
                continue
    return keys


def _verify(alg: str, key: Any, signed: bytes, signature: bytes) -> None:
    digest = _HASHES.get(alg[2:])
    if digest is None:
        raise JwtInvalid(f"unsupported alg {alg}")
    try:
        if alg.startswith("RS") and isinstance(key, rsa.RSAPublicKey):
            key.verify(signature, signed, padding.PKCS1v15(), digest())
        elif alg.startswith("PS") and isinstance(key, rsa.RSAPublicKey):
            key.verify(signature, signed, padding.PSS(padding.MGF1(digest()),
                                                      padding.PSS.DIGEST_LENGTH), digest())
        elif alg.startswith("ES") and isinstance(key, ec.EllipticCurvePublicKey):
            half = len(signature) // 2
            der = encode_dss_signature(int.from_bytes(signature[:half], "big"),
                                       int.from_bytes(signature[half:], "big"))
            key.verify(der, signed, ec.ECDSA(digest()))
        else:
            raise JwtInvalid(f"alg {alg} does not fit the key")
    except InvalidSignature:
        raise JwtInvalid("bad signature") from None


def validate(token: str, keys: Callable[[str], Any], options: Mapping[str, str],
             now_ms: int) -> tuple[str, int]:
    """(principal, expiry ms) of a signed JWT; JwtInvalid otherwise."""
    parts = token.split(".")
    if len(parts) != 3:
        raise JwtInvalid("not a JWS compact token")
    try:
        header, claims = json.loads(b64url(parts[0])), json.loads(b64url(parts[1]))
    except ValueError:
        raise JwtInvalid("undecodable JWT") from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise JwtInvalid("undecodable JWT")
    key = keys(str(header.get("kid", "")))
    if key is None:
        raise JwtInvalid("no JWKS key for the token's kid")
    _verify(str(header.get("alg", "")), key, f"{parts[0]}.{parts[1]}".encode(),
            b64url(parts[2]))
    skew_ms = int(options.get("sasl.oauthbearer.clock.skew.seconds") or 30) * 1000
    exp, iat = claims.get("exp"), claims.get("iat")
    if not isinstance(exp, (int, float)) or exp * 1000 + skew_ms <= now_ms:
        raise JwtInvalid("expired or no exp")
    if isinstance(iat, (int, float)) and iat * 1000 - skew_ms > now_ms:
        raise JwtInvalid("issued in the future")
    sub = claims.get(options.get("sasl.oauthbearer.sub.claim.name") or "sub")
    if not isinstance(sub, str) or not sub.strip():
        raise JwtInvalid("no principal claim")
    audiences = [a.strip() for a in (options.get("sasl.oauthbearer.expected.audience") or "")
                 .split(",") if a.strip()]
    aud = claims.get("aud")
    got = aud if isinstance(aud, list) else [aud]
    if audiences and not set(audiences) & {a for a in got if isinstance(a, str)}:
        raise JwtInvalid("unexpected audience")
    issuer = options.get("sasl.oauthbearer.expected.issuer") or ""
    if issuer and claims.get("iss") != issuer:
        raise JwtInvalid("unexpected issuer")
    return sub, int(exp * 1000)
