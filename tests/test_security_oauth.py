"""OAUTHBEARER with signed JWTs checked against a JWKS (Kafka's
OAuthBearerValidatorCallbackHandler): RS256 and ES256 tokens, wrong signature, audience,
issuer, expiry and unsigned tokens refused; confluent-kafka with an ``oauth_cb`` token."""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from kafkawire.tools.testing import BrokerProcess
from protocol._generated.sasl_authenticate_request import SaslAuthenticateRequest
from protocol._generated.sasl_handshake_request import SaslHandshakeRequest
from tests.conftest import RawClient
from tests.security_helpers import listeners

ISSUER, AUDIENCE = "https://issuer.test", "kafka"
RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _uint(n: int, size: int | None = None) -> str:
    return b64(n.to_bytes(size or (n.bit_length() + 7) // 8, "big"))


def jwks() -> dict[str, Any]:
    rn = RSA_KEY.public_key().public_numbers()
    en = EC_KEY.public_key().public_numbers()
    return {"keys": [
        {"kty": "RSA", "kid": "rsa1", "use": "sig", "alg": "RS256", "n": _uint(rn.n),
         "e": _uint(rn.e)},
        {"kty": "EC", "kid": "ec1", "use": "sig", "crv": "P-256", "x": _uint(en.x, 32),
         "y": _uint(en.y, 32)},
    ]}


def token(sub: str = "erin", alg: str = "RS256", kid: str = "rsa1", key: Any = None,
          **claims: Any) -> str:
    now = int(time.time())
    body = {"sub": sub, "iss": ISSUER, "aud": [AUDIENCE], "iat": now, "exp": now + 600,
            **claims}
    head = b64(json.dumps({"alg": alg, "kid": kid, "typ": "JWT"}).encode())
    signed = f"{head}.{b64(json.dumps(body).encode())}"
    if alg == "none":
        return signed + "."
    if alg == "ES256":
        r, s = decode_dss_signature((key or EC_KEY).sign(signed.encode(),
                                                         ec.ECDSA(hashes.SHA256())))
        sig = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    else:
        sig = (key or RSA_KEY).sign(signed.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{signed}.{b64(sig)}"


@pytest.fixture(scope="module")
def oauth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, str]]:
    base = tmp_path_factory.mktemp("oauth")
    jwks_file = base / "jwks.json"
    jwks_file.write_text(json.dumps(jwks()))
    ov, ports = listeners(PLAIN="PLAINTEXT", OAUTH="SASL_PLAINTEXT")
    ov.update({
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.oauth.oauthbearer.sasl.server.callback.handler.class":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
        "listener.name.oauth.oauthbearer.sasl.jaas.config":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;",
        "sasl.oauthbearer.jwks.endpoint.url": Path(jwks_file).as_uri(),
        "sasl.oauthbearer.expected.audience": AUDIENCE,
        "sasl.oauthbearer.expected.issuer": ISSUER,
    })
    bp = BrokerProcess(base / "data", port=ports["PLAIN"], overrides=ov).start()
    try:
        yield bp, f"127.0.0.1:{ports['OAUTH']}"
    finally:
        bp.close()


def _authenticate(addr: str, jwt: str) -> tuple[int, int]:
    """(error code, session lifetime ms) of an OAUTHBEARER exchange with ``jwt``."""
    c = RawClient(addr)
    try:
        assert c.request(SaslHandshakeRequest(mechanism="OAUTHBEARER"), 1).error_code == 0
        r = c.request(SaslAuthenticateRequest(
            auth_bytes=f"n,,\x01auth=Bearer {jwt}\x01\x01".encode()), 1)
        if r.error_code == 0 and b"invalid_token" in bytes(r.auth_bytes):
            r = c.request(SaslAuthenticateRequest(auth_bytes=b"\x01"), 1)
        return int(r.error_code), int(r.session_lifetime_ms)
    finally:
        c.close()


def test_signed_tokens(oauth: tuple[BrokerProcess, str]) -> None:
    _bp, addr = oauth
    code, lifetime = _authenticate(addr, token())
    assert code == 0 and 590_000 < lifetime <= 600_000  # the token's exp
    assert _authenticate(addr, token(alg="ES256", kid="ec1"))[0] == 0
    refused = {
        "signed by another key": token(key=OTHER_KEY),
        "unknown kid": token(kid="nope"),
        "unsigned": token(alg="none"),
        "expired": token(exp=int(time.time()) - 3600),
        "other audience": token(aud=["elsewhere"]),
        "other issuer": token(iss="https://evil.test"),
        "no subject": token(sub=""),
    }
    for what, jwt in refused.items():
        assert _authenticate(addr, jwt)[0] == 58, what


def test_confluent_kafka_with_oauth_cb(oauth: tuple[BrokerProcess, str]) -> None:
    from confluent_kafka import Producer

    _bp, addr = oauth
    errors: list[Any] = []

    def oauth_cb(_config: str) -> tuple[str, float]:
        return token(sub="frank"), time.time() + 600

    p = Producer({"bootstrap.servers": addr, "security.protocol": "SASL_PLAINTEXT",
                  "sasl.mechanism": "OAUTHBEARER", "oauth_cb": oauth_cb,
                  "error_cb": errors.append})
    p.produce(f"oauth-{uuid.uuid4().hex[:6]}", b"signed")
    assert p.flush(30) == 0, errors


class _JwksServer:
    """An HTTP JWKS endpoint on loopback whose answers can be held back (a slow identity
    provider) and whose key set can change (a key rotation)."""

    def __init__(self, doc: dict[str, Any]) -> None:
        import http.server
        import threading

        self.doc = doc
        self.requests = 0
        self.asked = threading.Event()  # a request arrived while held
        self.release = threading.Event()
        self.release.set()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                outer.requests += 1
                if not outer.release.is_set():
                    outer.asked.set()
                    outer.release.wait(60)
                body = json.dumps(outer.doc).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/jwks.json"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def test_jwks_fetch_never_blocks_the_event_loop(tmp_path: Path) -> None:
    """A token with a kid the cached set lacks is refused at once and refreshes the JWKS on a
    worker thread: while the identity provider takes its time, other clients are served; once
    the new key set is read, the rotated key's tokens pass (Kafka's RefreshingHttpsJwks)."""
    from protocol._generated.api_versions_request import ApiVersionsRequest

    first = jwks()
    rotated_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    rn = rotated_key.public_key().public_numbers()
    rotated = {"keys": [*first["keys"], {"kty": "RSA", "kid": "rsa2", "use": "sig",
                                         "n": _uint(rn.n), "e": _uint(rn.e)}]}
    idp = _JwksServer(first)
    ov, ports = listeners(PLAIN="PLAINTEXT", OAUTH="SASL_PLAINTEXT")
    ov.update({
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.oauth.oauthbearer.sasl.server.callback.handler.class":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
        "listener.name.oauth.oauthbearer.sasl.jaas.config":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;",
        "sasl.oauthbearer.jwks.endpoint.url": idp.url,
    })
    bp = BrokerProcess(tmp_path / "data", port=ports["PLAIN"], overrides=ov).start(60)
    try:
        addr = f"127.0.0.1:{ports['OAUTH']}"
        assert idp.requests == 1  # read once before serving
        assert _authenticate(addr, token())[0] == 0
        idp.doc, held = rotated, time.monotonic()
        idp.release.clear()
        started = time.monotonic()
        assert _authenticate(addr, token(kid="rsa2", key=rotated_key))[0] == 58
        refused_s = time.monotonic() - started
        assert idp.asked.wait(30), "no refresh for the unknown kid"
        started = time.monotonic()
        c = RawClient(bp.bootstrap)
        try:
            assert c.request(ApiVersionsRequest(client_software_name="t",
                                                client_software_version="1"), 3).error_code == 0
        finally:
            c.close()
        served_s = time.monotonic() - started
        assert idp.release.is_set() is False  # the provider was still holding its answer
        idp.release.set()
        hold_s = time.monotonic() - held
        assert refused_s < 5 and served_s < 5, (refused_s, served_s, hold_s)
        deadline = time.monotonic() + 30
        while _authenticate(addr, token(kid="rsa2", key=rotated_key))[0] != 0:
            assert time.monotonic() < deadline, "the rotated key never became usable"
            time.sleep(0.3)
    finally:
        bp.close()
        idp.close()
