"""SASL mechanism servers: PLAIN, SCRAM-SHA-256/512 (RFC 5802/7677), OAUTHBEARER (RFC 7628).

Each server takes the client's tokens one at a time (``evaluate(token, now_ms) -> challenge``)
until ``complete``; then ``principal`` names the authenticated user (Kafka's principal type
``User``) and ``expiry_ms`` bounds the session when the credential carries one (an OAUTHBEARER
token's ``exp``). A bad credential raises ``SaslFailure`` with Kafka's message; a token that is
not what the mechanism expects raises it too (the client gets SASL_AUTHENTICATION_FAILED and
the connection closes).

- PLAIN: ``authzid NUL user NUL password`` checked against the ``user_<name>="<password>"``
  options of the listener's ``PlainLoginModule`` JAAS config.
- SCRAM: the credentials (salt, StoredKey, ServerKey, iterations) stored in the metadata log by
  AlterUserScramCredentials; the client proof is checked against StoredKey and the server
  signature is sent back. Unknown users fail like a wrong password.
- OAUTHBEARER: Kafka's unsecured validator (``OAuthBearerUnsecuredValidatorCallbackHandler``, for
  development): an unsigned JWT (``alg`` ``none``) whose principal claim (``sub``, or
  ``sasl.oauthbearer.sub.claim.name``) names the user and whose ``exp`` (seconds) is in the
  future (allowing ``sasl.oauthbearer.clock.skew.seconds``). An invalid token is answered with
  the RFC 7628 error JSON; the client's following ``\\x01`` gets the failure.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
import re
import secrets
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from kraft.image import ScramCredential

log = logging.getLogger("kafkawire.security.sasl")


class SaslFailure(Exception):
    """Authentication failed: Kafka's SASL_AUTHENTICATION_FAILED with this message."""


class MechanismServer(Protocol):
    complete: bool
    principal: str
    expiry_ms: int | None

    def evaluate(self, token: bytes, now_ms: int) -> bytes: ...


_JAAS_OPTION = re.compile(r'([A-Za-z0-9_.\-]+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def jaas_options(text: str) -> dict[str, str]:
    """The ``key="value"`` options of a JAAS login module entry."""
    return {m.group(1): m.group(2).replace('\\"', '"') for m in _JAAS_OPTION.finditer(text)}


class PlainServer:
    def __init__(self, users: Mapping[str, str]) -> None:
        self.users = users
        self.complete = False
        self.principal = ""
        self.expiry_ms: int | None = None

    @staticmethod
    def from_jaas(text: str) -> PlainServer:
        opts = jaas_options(text)
        return PlainServer({k[5:]: v for k, v in opts.items() if k.startswith("user_")})

    def evaluate(self, token: bytes, now_ms: int) -> bytes:
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise SaslFailure("Invalid SASL/PLAIN response: expected 3 tokens, got "
                              f"{len(parts)}")
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise SaslFailure("Invalid SASL/PLAIN response: not UTF-8") from None
        if not user:
            raise SaslFailure("Authentication failed: username not specified")
        if not password:
            raise SaslFailure("Authentication failed: password not specified")
        expected = self.users.get(user)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise SaslFailure("Authentication failed: Invalid username or password")
        if authzid and authzid != user:
            raise SaslFailure("Authentication failed: Client requested an authorization id "
                              "that is different from username")
        self.principal = user
        self.complete = True
        return b""


def _scram_name(raw: str) -> str:
    return raw.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """RFC 5802 server side: client-first -> server-first -> client-final -> server-final."""

    def __init__(self, mechanism: str, digest: str,
                 credential_of: Callable[[str], ScramCredential | None],
                 token_of: Callable[[str], tuple[ScramCredential, str] | None] | None = None,
                 ) -> None:
        self.mechanism = mechanism
        self.digest = digest
        self.credential_of = credential_of
        #: delegation tokens: token id -> (credential, owner name), None when disabled
        self.token_of = token_of
        self.token_authenticated = False
        self.complete = False
        self.principal = ""
        self.expiry_ms: int | None = None
        self._step = 0
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._cred: ScramCredential | None = None

    def _fail(self) -> SaslFailure:
        return SaslFailure("Authentication failed during authentication due to invalid "
                           f"credentials with SASL mechanism {self.mechanism}")

    def evaluate(self, token: bytes, now_ms: int) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslFailure(f"Invalid {self.mechanism} message: not UTF-8") from None
        if self._step == 0:
            return self._first(text)
        if self._step == 1:
            return self._final(text)
        raise SaslFailure(f"Unexpected {self.mechanism} message after completion")

    def _first(self, text: str) -> bytes:
        m = re.fullmatch(r"([ny]|p=[^,]*),(a=[^,]*)?,(n=[^,]*,r=[^,]*(?:,.*)?)", text)
        if m is None or m.group(1).startswith("p="):
            raise SaslFailure(f"Invalid {self.mechanism} client first message")
        self._client_first_bare = m.group(3)
        attrs = dict(a.split("=", 1) for a in m.group(3).split(",") if "=" in a)
        user = _scram_name(attrs.get("n", ""))
        authzid = _scram_name((m.group(2) or "a=")[2:])
        if authzid and authzid != user:
            raise SaslFailure("Authentication failed: Client requested an authorization id "
                              "that is different from username")
        if attrs.get("tokenauth") == "true":  # a delegation token: its id is the user name
            found = self.token_of(user) if self.token_of is not None else None
            if found is None:
                raise self._fail()
            cred, self.principal = found
            self.token_authenticated = True
        else:
            maybe = self.credential_of(user)
            if maybe is None or not user:
                raise self._fail()
            cred, self.principal = maybe, user
        self._cred = cred
        self._nonce = attrs.get("r", "") + secrets.token_urlsafe(24)
        self._server_first = (f"r={self._nonce},s={base64.b64encode(cred.salt).decode()},"
                              f"i={cred.iterations}")
        self._step = 1
        return self._server_first.encode()

    def _final(self, text: str) -> bytes:
        assert self._cred is not None
        without_proof, sep, proof_b64 = text.rpartition(",p=")
        attrs = dict(a.split("=", 1) for a in without_proof.split(",") if "=" in a)
        # Kafka's check is "ends with" the server nonce: librdkafka before 2.1 sends the client
        # nonce twice (client nonce + the whole server nonce)
        if not sep or not attrs.get("r", "").endswith(self._nonce):
            log.debug("%s client final message %r does not continue nonce %r",
                      self.mechanism, without_proof, self._nonce)
            raise SaslFailure(f"Invalid {self.mechanism} client final message")
        try:
            proof = base64.b64decode(proof_b64, validate=True)
        except (binascii.Error, ValueError):
            raise self._fail() from None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}"
        signature = hmac.new(self._cred.stored_key, auth_message.encode(), self.digest).digest()
        if len(proof) != len(signature):
            raise self._fail()
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self.digest, client_key).digest(),
                                   self._cred.stored_key):
            raise self._fail()
        server_sig = hmac.new(self._cred.server_key, auth_message.encode(), self.digest).digest()
        self._step = 2
        self.complete = True
        return f"v={base64.b64encode(server_sig).decode()}".encode()


def _b64url_json(part: str) -> Any:
    padded = part + "=" * (-len(part) % 4)
    return json.loads(base64.urlsafe_b64decode(padded.encode()))


class OAuthBearerUnsecuredServer:
    """OAUTHBEARER; ``verify`` (a signed-JWT validator, ``kafkawire.security.oauth_jwt``) replaces Kafka's
    unsecured validator when given: ``verify(jwt, now_ms) -> (principal, expiry ms)``, raising
    ValueError for a bad token."""

    def __init__(self, options: Mapping[str, str],
                 verify: Callable[[str, int], tuple[str, int]] | None = None) -> None:
        self.verify = verify
        self.sub_claim = options.get("sasl.oauthbearer.sub.claim.name") or "sub"
        self.skew_ms = int(options.get("sasl.oauthbearer.clock.skew.seconds") or 30) * 1000
        self.complete = False
        self.principal = ""
        self.expiry_ms: int | None = None
        self._error_sent = False

    def evaluate(self, token: bytes, now_ms: int) -> bytes:
        if self._error_sent:
            raise SaslFailure("Authentication failed: invalid OAUTHBEARER token")
        m = re.fullmatch(rb"n,(a=[^,]*)?,\x01(.*)\x01\x01", token, re.S)
        if m is None:
            raise SaslFailure("Invalid OAUTHBEARER client first message")
        kv = dict(p.split(b"=", 1) for p in m.group(2).split(b"\x01") if b"=" in p)
        auth = kv.get(b"auth", b"").decode("utf-8", "replace")
        if not auth.startswith("Bearer "):
            raise SaslFailure("Invalid OAUTHBEARER client first message: no Bearer token")
        problem = self._validate(auth[7:].strip(), now_ms)
        if problem is not None:
            self._error_sent = True
            return json.dumps({"status": "invalid_token", "scope": "",
                               "openid-configuration": ""}).encode()
        self.complete = True
        return b""

    def _validate(self, jwt: str, now_ms: int) -> str | None:
        if self.verify is not None:
            try:
                self.principal, self.expiry_ms = self.verify(jwt, now_ms)
            except ValueError as e:
                log.info("OAUTHBEARER token refused: %s", e)
                return str(e)
            return None
        parts = jwt.split(".")
        if len(parts) != 3:
            return "not a JWT"
        try:
            header, claims = _b64url_json(parts[0]), _b64url_json(parts[1])
        except (ValueError, binascii.Error):
            return "undecodable JWT"
        if not isinstance(header, dict) or not isinstance(claims, dict):
            return "undecodable JWT"
        if header.get("alg") != "none":
            return "not an unsecured JWT"
        sub, exp = claims.get(self.sub_claim), claims.get("exp")
        if not isinstance(sub, str) or not sub.strip():
            return f"no {self.sub_claim} claim"
        if not isinstance(exp, (int, float)):
            return "no exp claim"
        expiry_ms = int(exp * 1000)
        if expiry_ms + self.skew_ms <= now_ms:
            return "expired"
        self.principal = sub
        self.expiry_ms = expiry_ms
        return None
