"""TLS and SASL with real clients against a real broker, and bad input on secured listeners.

One broker per module with four listeners: PLAIN (PLAINTEXT, used to set SCRAM credentials),
SSL (PKCS12 keystore, client certificates requested and mapped by
ssl.principal.mapping.rules), SASL (SASL_PLAINTEXT) and SASLSSL (SASL_SSL, PEM keystore);
SASL mechanisms PLAIN (JAAS user list), SCRAM-SHA-256/512 (credentials set with
AlterUserScramCredentials) and OAUTHBEARER (unsecured JWTs).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import socket
import ssl
import struct
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkawire.tools.testing import BrokerProcess
from protocol._generated.metadata_request import MetadataRequest
from protocol._generated.sasl_authenticate_request import SaslAuthenticateRequest
from protocol._generated.sasl_handshake_request import SaslHandshakeRequest
from tests.conftest import RawClient
from tests.security_helpers import PASSWORD, Pki, listeners, make_pki

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-secret" user_admin="admin-secret" '
        'user_alice="alice-secret";')
REAUTH_MS = 4000
SCRAM_USER, SCRAM_PASSWORD = "bob", "bob-secret"


class Secured:
    def __init__(self, broker: BrokerProcess, ports: dict[str, int], pki: Pki) -> None:
        self.broker, self.ports, self.pki = broker, ports, pki

    def addr(self, name: str) -> str:
        return f"127.0.0.1:{self.ports[name]}"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    base = tmp_path_factory.mktemp("secured")
    pki = make_pki(base / "pki")
    ov, ports = listeners(PLAIN="PLAINTEXT", SSL="SSL", SASL="SASL_PLAINTEXT",
                          SASLSSL="SASL_SSL")
    ov.update({
        "listener.name.ssl.ssl.keystore.type": "PKCS12",
        "listener.name.ssl.ssl.keystore.location": str(pki.server_p12),
        "listener.name.ssl.ssl.keystore.password": PASSWORD,
        "listener.name.ssl.ssl.truststore.type": "PKCS12",
        "listener.name.ssl.ssl.truststore.location": str(pki.truststore_p12),
        "listener.name.ssl.ssl.truststore.password": PASSWORD,
        "listener.name.ssl.ssl.client.auth": "requested",
        "ssl.principal.mapping.rules": "RULE:^.*CN=([a-z]+).*$/$1/L,DEFAULT",
        "listener.name.saslssl.ssl.keystore.type": "PEM",
        "listener.name.saslssl.ssl.keystore.location": str(pki.server_pem),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        "listener.name.sasl.plain.sasl.jaas.config": JAAS,
        "listener.name.saslssl.plain.sasl.jaas.config": JAAS,
        "connections.max.reauth.ms": str(REAUTH_MS),
    })
    bp = BrokerProcess(base / "data", port=ports["PLAIN"], overrides=ov).start()
    try:
        _set_scram(bp.bootstrap)
        yield Secured(bp, ports, pki)
    finally:
        bp.close()


def _set_scram(bootstrap: str) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for mech in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
        futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            SCRAM_USER, ScramCredentialInfo(mech, 4096), SCRAM_PASSWORD.encode())])
        for f in futures.values():
            f.result(30)


def _ck_conf(s: Secured, listener: str, mech: str | None = None) -> dict[str, Any]:
    proto = {"SSL": "SSL", "SASL": "SASL_PLAINTEXT", "SASLSSL": "SASL_SSL"}[listener]
    conf: dict[str, Any] = {"bootstrap.servers": s.addr(listener), "security.protocol": proto}
    if "SSL" in proto:
        conf["ssl.ca.location"] = str(s.pki.ca_pem)
    if mech == "OAUTHBEARER":
        conf.update({"sasl.mechanism": mech, "enable.sasl.oauthbearer.unsecure.jwt": True,
                     "sasl.oauthbearer.config": "principal=carol"})
    elif mech is not None:
        user, pw = ("alice", "alice-secret") if mech == "PLAIN" else (SCRAM_USER, SCRAM_PASSWORD)
        conf.update({"sasl.mechanism": mech, "sasl.username": user, "sasl.password": pw})
    return conf


def _ck_roundtrip(conf: dict[str, Any], n: int = 20) -> list[bytes]:
    from confluent_kafka import Consumer, Producer

    topic = f"sec-{uuid.uuid4().hex[:8]}"
    errors: list[Any] = []
    p = Producer({**conf, "error_cb": errors.append, "message.timeout.ms": 30000})
    for i in range(n):
        p.produce(topic, b"m%d" % i)
    assert p.flush(60) == 0, errors
    c = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(1)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    assert got == [b"m%d" % i for i in range(n)]
    return got


@pytest.mark.parametrize("listener,mech", [
    ("SSL", None),
    ("SASL", "PLAIN"), ("SASL", "SCRAM-SHA-256"), ("SASL", "SCRAM-SHA-512"),
    ("SASL", "OAUTHBEARER"),
    ("SASLSSL", "PLAIN"), ("SASLSSL", "SCRAM-SHA-256"), ("SASLSSL", "SCRAM-SHA-512"),
])
def test_confluent_kafka_produce_consume(secured: Secured, listener: str, mech: str | None) -> None:
    _ck_roundtrip(_ck_conf(secured, listener, mech))


def test_confluent_kafka_client_certificate(secured: Secured) -> None:
    cert, key = secured.pki.client("alice")
    conf = {**_ck_conf(secured, "SSL"), "ssl.certificate.location": str(cert),
            "ssl.key.location": str(key)}
    _ck_roundtrip(conf, 3)


def test_wrong_password_gets_kafkas_error(secured: Secured) -> None:
    from confluent_kafka import KafkaError, Producer

    errors: list[Any] = []
    conf = {**_ck_conf(secured, "SASL", "SCRAM-SHA-256"), "sasl.password": "nope",
            "error_cb": errors.append, "message.timeout.ms": 3000}
    p = Producer(conf)
    p.produce("never", b"x")
    p.flush(10)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION
    assert "invalid credentials with SASL mechanism SCRAM-SHA-256" in errors[0].str()


@pytest.mark.parametrize("listener,mech", [
    ("SSL", None), ("SASL", "PLAIN"), ("SASL", "SCRAM-SHA-256"), ("SASLSSL", "SCRAM-SHA-512"),
])
def test_kafka_python(secured: Secured, listener: str, mech: str | None) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    proto = {"SSL": "SSL", "SASL": "SASL_PLAINTEXT", "SASLSSL": "SASL_SSL"}[listener]
    kw: dict[str, Any] = {"bootstrap_servers": secured.addr(listener), "security_protocol": proto}
    if "SSL" in proto:
        kw["ssl_cafile"] = str(secured.pki.ca_pem)
    if mech:
        user, pw = ("alice", "alice-secret") if mech == "PLAIN" else (SCRAM_USER, SCRAM_PASSWORD)
        kw.update(sasl_mechanism=mech, sasl_plain_username=user, sasl_plain_password=pw)
    topic = f"kp-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(**kw)
    for i in range(5):
        producer.send(topic, b"v%d" % i).get(30)
    producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=20000,
                             **kw)
    got = []
    for m in consumer:  # ends at 5 records, or after 20 s without one
        got.append(m.value)
        if len(got) == 5:
            break
    consumer.close()
    assert got == [b"v%d" % i for i in range(5)]


@pytest.mark.parametrize("listener,mech", [("SSL", None), ("SASLSSL", "SCRAM-SHA-256"),
                                           ("SASL", "PLAIN")])
def test_aiokafka(secured: Secured, listener: str, mech: str | None) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    proto = {"SSL": "SSL", "SASL": "SASL_PLAINTEXT", "SASLSSL": "SASL_SSL"}[listener]
    kw: dict[str, Any] = {"bootstrap_servers": secured.addr(listener), "security_protocol": proto}
    if "SSL" in proto:
        kw["ssl_context"] = create_ssl_context(cafile=str(secured.pki.ca_pem))
    if mech:
        user, pw = ("alice", "alice-secret") if mech == "PLAIN" else (SCRAM_USER, SCRAM_PASSWORD)
        kw.update(sasl_mechanism=mech, sasl_plain_username=user, sasl_plain_password=pw)
    topic = f"aio-{uuid.uuid4().hex[:8]}"

    async def main() -> list[bytes]:
        producer = AIOKafkaProducer(**kw)
        await producer.start()
        try:
            for i in range(5):
                await producer.send_and_wait(topic, b"a%d" % i)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest", **kw)
        await consumer.start()
        got: list[bytes] = []
        try:
            async with asyncio.timeout(30):
                async for msg in consumer:
                    got.append(msg.value)
                    if len(got) == 5:
                        break
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(main()) == [b"a%d" % i for i in range(5)]


def test_tls_close_notify_is_answered(secured: Secured) -> None:
    """A client that ends TLS with close_notify (asyncio, hence aiokafka's stop()) gets the
    broker's close_notify at once; it used to wait out asyncio's 30 s SSL shutdown timeout."""

    async def main() -> float:
        ctx = ssl.create_default_context(cafile=str(secured.pki.ca_pem))
        host, port = secured.addr("SSL").split(":")
        r, w = await asyncio.open_connection(host, int(port), ssl=ctx,
                                             server_hostname="localhost")
        body = struct.pack(">hhih", 18, 0, 7, 1) + b"x"  # ApiVersions v0, client id "x"
        w.write(struct.pack(">i", len(body)) + body)
        await w.drain()
        (size,) = struct.unpack(">i", await r.readexactly(4))
        await r.readexactly(size)
        start = time.monotonic()
        w.close()
        await asyncio.wait_for(w.wait_closed(), 20)
        return time.monotonic() - start

    assert asyncio.run(main()) < 10


# ---- the wire, byte by byte ---------------------------------------------------------------

class TlsRawClient(RawClient):
    def __init__(self, bootstrap: str, ca: Path | None) -> None:
        super().__init__(bootstrap)
        if ca is not None:
            ctx = ssl.create_default_context(cafile=str(ca))
            self.sock = ctx.wrap_socket(self.sock, server_hostname="localhost")


def _closed(sock: socket.socket, timeout_s: float = 10) -> bool:
    sock.settimeout(timeout_s)
    try:
        while True:
            if not sock.recv(4096):
                return True
    except (ConnectionError, ssl.SSLError):
        return True
    except TimeoutError:
        return False


def _plain_ok(s: Secured) -> None:
    c = RawClient(s.broker.bootstrap)
    try:
        assert c.request(MetadataRequest(topics=[]), 12).brokers
    finally:
        c.close()


def _scram_exchange(c: RawClient, password: str, version: int = 1) -> Any:
    """SCRAM-SHA-256 through SaslHandshake v1 + SaslAuthenticate; the last response."""
    hs = c.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 1)
    assert hs.error_code == 0 and "SCRAM-SHA-256" in hs.mechanisms
    nonce = base64.b64encode(uuid.uuid4().bytes).decode()
    first_bare = f"n={SCRAM_USER},r={nonce}"
    r1 = c.request(SaslAuthenticateRequest(auth_bytes=b"n,," + first_bare.encode()), version)
    if r1.error_code:
        return r1
    server_first = bytes(r1.auth_bytes).decode()
    attrs = dict(a.split("=", 1) for a in server_first.split(","))
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(attrs["s"]),
                                 int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    stored = hashlib.sha256(client_key).digest()
    final_bare = f"c=biws,r={attrs['r']}"
    auth_message = f"{first_bare},{server_first},{final_bare}".encode()
    sig = hmac.new(stored, auth_message, "sha256").digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, sig, strict=True)))
    r2 = c.request(SaslAuthenticateRequest(
        auth_bytes=f"{final_bare},p={proof.decode()}".encode()), version)
    if r2.error_code == 0:
        server_key = hmac.new(salted, b"Server Key", "sha256").digest()
        expected = base64.b64encode(hmac.new(server_key, auth_message, "sha256").digest())
        assert bytes(r2.auth_bytes) == b"v=" + expected
    return r2


def test_scram_on_the_wire_and_reauthentication(secured: Secured) -> None:
    c = RawClient(secured.addr("SASL"))
    try:
        done = _scram_exchange(c, SCRAM_PASSWORD)
        assert done.error_code == 0
        assert done.session_lifetime_ms == REAUTH_MS
        assert c.request(MetadataRequest(topics=[]), 12).brokers
        # KIP-368: re-authenticating before expiry keeps the connection going
        assert _scram_exchange(c, SCRAM_PASSWORD).error_code == 0
        time.sleep(REAUTH_MS / 1000 + 0.5)
        # after expiry, a request other than re-authentication closes the connection
        c.send_raw(b"\x00\x03\x00\x0c\x00\x00\x00\x63\x00\x03raw\x00\x01\x00\x00")
        assert _closed(c.sock)
    finally:
        c.close()


def test_wrong_passwords_close_only_that_connection(secured: Secured) -> None:
    for _ in range(30):
        c = RawClient(secured.addr("SASL"))
        try:
            failed = _scram_exchange(c, "guess")
            assert failed.error_code == 58  # SASL_AUTHENTICATION_FAILED
            assert _closed(c.sock)
        finally:
            c.close()
    assert _scram_exchange(RawClient(secured.addr("SASL")), SCRAM_PASSWORD).error_code == 0
    _plain_ok(secured)


def test_requests_before_authentication_close_the_connection(secured: Secured) -> None:
    for listener in ("SASL", "SASLSSL"):
        c = TlsRawClient(secured.addr(listener),
                         secured.pki.ca_pem if listener == "SASLSSL" else None)
        try:
            c.send_raw(b"\x00\x03\x00\x0c\x00\x00\x00\x07\x00\x03raw\x00\x01\x00\x00")
            assert _closed(c.sock)
        finally:
            c.close()
    _plain_ok(secured)


def test_sasl_errors(secured: Secured) -> None:
    c = RawClient(secured.addr("SASL"))
    try:
        r = c.request(SaslAuthenticateRequest(auth_bytes=b"\x00alice\x00alice-secret"), 1)
        assert r.error_code == 34  # ILLEGAL_SASL_STATE
        assert _closed(c.sock)
    finally:
        c.close()
    c = RawClient(secured.addr("SASL"))
    try:
        r = c.request(SaslHandshakeRequest(mechanism="GSSAPI"), 1)
        assert r.error_code == 33  # UNSUPPORTED_SASL_MECHANISM
        assert sorted(r.mechanisms) == sorted(
            ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"])
        assert _closed(c.sock)
    finally:
        c.close()
    c = RawClient(secured.broker.bootstrap)  # a PLAINTEXT listener
    try:
        assert c.request(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 34
    finally:
        c.close()


def test_huge_sasl_token_closes_the_connection(secured: Secured) -> None:
    c = RawClient(secured.addr("SASL"))
    try:
        assert c.request(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
        # a 100 MB SaslAuthenticate: refused from its size (sasl.server.max.receive.size)
        c.sock.sendall(struct.pack(">i", 100 * 1024 * 1024) + b"\x00\x24\x00\x01")
        assert _closed(c.sock)
    finally:
        c.close()
    _plain_ok(secured)


def test_sasl_handshake_v0_bare_tokens(secured: Secured) -> None:
    c = RawClient(secured.addr("SASL"))
    try:
        assert c.request(SaslHandshakeRequest(mechanism="PLAIN"), 0).error_code == 0
        c.send_raw(b"\x00alice\x00alice-secret")
        assert c.recv_frame() == b""
        assert c.request(MetadataRequest(topics=[]), 12).brokers
    finally:
        c.close()


def test_garbled_tls_handshake(secured: Secured) -> None:
    for listener in ("SSL", "SASLSSL"):
        sock = socket.create_connection(("127.0.0.1", secured.ports[listener]), timeout=10)
        try:
            sock.sendall(b"\x16\x03\x01\x02\x00" + bytes(range(256)) * 4)
            assert _closed(sock)
        finally:
            sock.close()
        # plaintext Kafka spoken to a TLS listener
        sock = socket.create_connection(("127.0.0.1", secured.ports[listener]), timeout=10)
        try:
            sock.sendall(b"\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x01\x00\x00")
            assert _closed(sock)
        finally:
            sock.close()
    _ck_roundtrip(_ck_conf(secured, "SSL"), 2)


def test_oauthbearer_expired_token_fails(secured: Secured) -> None:
    c = RawClient(secured.addr("SASL"))
    try:
        assert c.request(SaslHandshakeRequest(mechanism="OAUTHBEARER"), 1).error_code == 0

        def b64(obj: dict[str, Any]) -> str:
            return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

        jwt = f"{b64({'alg': 'none'})}.{b64({'sub': 'dave', 'exp': 1000})}."
        r = c.request(SaslAuthenticateRequest(
            auth_bytes=f"n,,\x01auth=Bearer {jwt}\x01\x01".encode()), 1)
        assert r.error_code == 0 and b"invalid_token" in bytes(r.auth_bytes)
        r = c.request(SaslAuthenticateRequest(auth_bytes=b"\x01"), 1)
        assert r.error_code == 58
    finally:
        c.close()


@pytest.mark.parametrize("listener,mech", [("SSL", None), ("SASL", "SCRAM-SHA-512"),
                                           ("SASLSSL", "PLAIN")])
def test_kcat(secured: Secured, listener: str, mech: str | None) -> None:
    import shutil
    import subprocess

    exe = shutil.which("kcat") or shutil.which("kafkacat")
    if exe is None:
        pytest.skip("kcat is not installed")
    conf = _ck_conf(secured, listener, mech)
    opts = [x for k, v in conf.items() if k != "bootstrap.servers"
            for x in ("-X", f"{k}={v}")]
    topic = f"kcat-{uuid.uuid4().hex[:8]}"
    base = [exe, "-b", conf["bootstrap.servers"], "-t", topic, *opts]
    subprocess.run([*base, "-P"], input=b"k1\nk2\nk3\n", check=True, timeout=60)
    out = subprocess.run([*base, "-C", "-o", "beginning", "-c", "3", "-e", "-q"],
                         capture_output=True, check=True, timeout=60).stdout
    assert out.split() == [b"k1", b"k2", b"k3"]


def test_ten_thousand_wrong_passwords(secured: Secured) -> None:
    """10,000 PLAIN attempts with wrong passwords, 100 at a time: each gets
    SASL_AUTHENTICATION_FAILED and its connection closed; nobody gets in; the broker keeps
    serving the others meanwhile."""
    from protocol._generated.request_header import RequestHeader

    def frame(req: Any, version: int, corr: int) -> bytes:
        hdr = RequestHeader(request_api_key=req.API_KEY, request_api_version=version,
                            correlation_id=corr, client_id="guesser")
        body = hdr.encode(1 if req.API_KEY == 17 else 2) + req.encode(version)
        return struct.pack(">i", len(body)) + body

    handshake = frame(SaslHandshakeRequest(mechanism="PLAIN"), 1, 1)
    host, port = "127.0.0.1", secured.ports["SASL"]

    async def attempt(i: int) -> tuple[int, bool]:
        reader, writer = await asyncio.open_connection(host, port)
        try:
            auth = frame(SaslAuthenticateRequest(
                auth_bytes=f"\x00alice\x00guess-{i}".encode()), 2, 2)
            writer.write(handshake + auth)
            await writer.drain()
            for _ in range(2):
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                payload = await reader.readexactly(size)
            # SaslAuthenticate v2 response: correlation id, tagged fields, error code
            code = struct.unpack_from(">h", payload, 5)[0]
            closed = await reader.read(1) == b""
            return code, closed
        finally:
            writer.close()

    async def main() -> list[tuple[int, bool]]:
        sem = asyncio.Semaphore(100)

        async def bounded(i: int) -> tuple[int, bool]:
            async with sem:
                return await attempt(i)

        return await asyncio.gather(*(bounded(i) for i in range(10_000)))

    start = time.monotonic()
    results = asyncio.run(main())
    elapsed = time.monotonic() - start
    assert results.count((58, True)) == 10_000, set(results)
    print(f"10,000 wrong passwords refused in {elapsed:.1f} s")
    _plain_ok(secured)
    _ck_roundtrip(_ck_conf(secured, "SASL", "PLAIN"), 2)


def test_delegation_tokens_disabled_on_authenticated_connections(secured: Secured) -> None:
    """No token support: Kafka without delegation.token.secret.key answers an authenticated
    client DELEGATION_TOKEN_AUTH_DISABLED (PLAINTEXT: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)."""
    from protocol._generated.create_delegation_token_request import (
        CreateDelegationTokenRequest,
    )

    c = RawClient(secured.addr("SASL"))
    try:
        assert _scram_exchange(c, SCRAM_PASSWORD).error_code == 0
        r = c.request(CreateDelegationTokenRequest(renewers=[], max_lifetime_ms=-1), 3)
        assert r.error_code == 61
        assert (r.principal_type, r.principal_name) == ("User", SCRAM_USER)
    finally:
        c.close()
    c = RawClient(secured.broker.bootstrap)
    try:
        r = c.request(CreateDelegationTokenRequest(renewers=[], max_lifetime_ms=-1), 3)
        assert r.error_code == 64
    finally:
        c.close()


def test_handshake_after_authentication_without_reauth(tmp_path: Path) -> None:
    """connections.max.reauth.ms=0 (Kafka's default): a second SaslHandshake is
    ILLEGAL_SASL_STATE and the connection goes on."""
    ov, ports = listeners(PLAIN="PLAINTEXT", SASL="SASL_PLAINTEXT")
    ov.update({"sasl.enabled.mechanisms": "PLAIN",
               "listener.name.sasl.plain.sasl.jaas.config": JAAS})
    with BrokerProcess(tmp_path / "data", port=ports["PLAIN"], overrides=ov):
        c = RawClient(f"127.0.0.1:{ports['SASL']}")
        try:
            assert c.request(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
            r = c.request(SaslAuthenticateRequest(auth_bytes=b"\x00alice\x00alice-secret"), 1)
            assert r.error_code == 0 and r.session_lifetime_ms == 0
            again = c.request(SaslHandshakeRequest(mechanism="PLAIN"), 1)
            assert again.error_code == 34 and again.mechanisms == []
            assert c.request(MetadataRequest(topics=[]), 12).brokers
        finally:
            c.close()
