"""Delegation tokens (KIP-48) with ``delegation.token.secret.key``: create, describe, SCRAM
authentication with the token (``tokenauth=true``), renew by a renewer, expire; Kafka's error
codes for the wrong principal and for token-authenticated requests."""

from __future__ import annotations

import base64
import hashlib
import hmac
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kafkawire.tools.testing import BrokerProcess
from protocol._generated.create_delegation_token_request import CreateDelegationTokenRequest
from protocol._generated.describe_delegation_token_request import (
    DescribeDelegationTokenRequest,
)
from protocol._generated.expire_delegation_token_request import ExpireDelegationTokenRequest
from protocol._generated.metadata_request import MetadataRequest
from protocol._generated.renew_delegation_token_request import RenewDelegationTokenRequest
from protocol._generated.sasl_authenticate_request import SaslAuthenticateRequest
from protocol._generated.sasl_handshake_request import SaslHandshakeRequest
from tests.conftest import RawClient
from tests.security_helpers import listeners

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_alice="alice-secret" user_bob="bob-secret" user_carol="carol-secret";')


@pytest.fixture(scope="module")
def sasl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    ov, ports = listeners(PLAIN="PLAINTEXT", SASL="SASL_PLAINTEXT")
    ov.update({"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
               "listener.name.sasl.plain.sasl.jaas.config": JAAS,
               "delegation.token.secret.key": "a-secret-of-the-cluster",
               "delegation.token.expiry.check.interval.ms": "500"})
    bp = BrokerProcess(tmp_path_factory.mktemp("tokens") / "data", port=ports["PLAIN"],
                       overrides=ov).start()
    try:
        yield f"127.0.0.1:{ports['SASL']}"
    finally:
        bp.close()


def plain_login(addr: str, user: str) -> RawClient:
    c = RawClient(addr)
    assert c.request(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
    r = c.request(SaslAuthenticateRequest(auth_bytes=f"\x00{user}\x00{user}-secret".encode()), 1)
    assert r.error_code == 0
    return c


def token_login(addr: str, token_id: str, mac: bytes) -> tuple[int, RawClient]:
    """SCRAM-SHA-256 with the token: (error code, connection)."""
    c = RawClient(addr)
    assert c.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 1).error_code == 0
    password = base64.b64encode(mac).decode()
    nonce = uuid.uuid4().hex
    first_bare = f"n={token_id},r={nonce},tokenauth=true"
    r1 = c.request(SaslAuthenticateRequest(auth_bytes=f"n,,{first_bare}".encode()), 1)
    if r1.error_code:
        return int(r1.error_code), c
    server_first = bytes(r1.auth_bytes).decode()
    attrs = dict(a.split("=", 1) for a in server_first.split(","))
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(attrs["s"]),
                                 int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    final_bare = f"c=biws,r={attrs['r']}"
    auth_message = f"{first_bare},{server_first},{final_bare}".encode()
    sig = hmac.new(hashlib.sha256(client_key).digest(), auth_message, "sha256").digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, sig, strict=True)))
    r2 = c.request(SaslAuthenticateRequest(
        auth_bytes=f"{final_bare},p={proof.decode()}".encode()), 1)
    return int(r2.error_code), c


def _describe(c: RawClient) -> list[Any]:
    req = DescribeDelegationTokenRequest()
    req.owners = None  # every owner (the constructor turns None into [])
    r = c.request(req, 3)
    assert r.error_code == 0
    return list(r.tokens)


def test_token_lifecycle(sasl: str) -> None:
    alice = plain_login(sasl, "alice")
    try:
        created = alice.request(CreateDelegationTokenRequest(
            renewers=[CreateDelegationTokenRequest.CreatableRenewers(
                principal_type="User", principal_name="bob")], max_lifetime_ms=-1), 3)
        assert created.error_code == 0
        assert (created.principal_type, created.principal_name) == ("User", "alice")
        assert created.issue_timestamp_ms < created.expiry_timestamp_ms <= (
            created.max_timestamp_ms)
        bad = alice.request(CreateDelegationTokenRequest(
            renewers=[CreateDelegationTokenRequest.CreatableRenewers(
                principal_type="Group", principal_name="x")], max_lifetime_ms=-1), 3)
        assert bad.error_code == 67  # INVALID_PRINCIPAL_TYPE
        mine = _describe(alice)
        assert [t.token_id for t in mine] == [created.token_id]
        assert bytes(mine[0].hmac) == bytes(created.hmac)
    finally:
        alice.close()
    token_id, mac = created.token_id, bytes(created.hmac)

    # the token authenticates as its owner; token-authenticated clients get no tokens
    code, conn = token_login(sasl, token_id, mac)
    try:
        assert code == 0
        assert conn.request(MetadataRequest(topics=[]), 12).brokers
        again = conn.request(CreateDelegationTokenRequest(renewers=[], max_lifetime_ms=-1), 3)
        assert again.error_code == 64  # DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    finally:
        conn.close()
    assert token_login(sasl, token_id, b"wrong-hmac")[0] == 58

    carol, bob = plain_login(sasl, "carol"), plain_login(sasl, "bob")
    try:
        # no authorizer: DESCRIBE on every token is allowed (Kafka's answer too)
        assert [t.token_id for t in _describe(carol)] == [token_id]
        assert [t.token_id for t in _describe(bob)] == [token_id]
        r = carol.request(RenewDelegationTokenRequest(hmac=mac, renew_period_ms=-1), 2)
        assert r.error_code == 63  # DELEGATION_TOKEN_OWNER_MISMATCH
        r = bob.request(RenewDelegationTokenRequest(hmac=mac, renew_period_ms=60_000), 2)
        assert r.error_code == 0 and r.expiry_timestamp_ms > 0
        r = bob.request(RenewDelegationTokenRequest(hmac=b"nope", renew_period_ms=1), 2)
        assert r.error_code == 62  # DELEGATION_TOKEN_NOT_FOUND
        r = bob.request(ExpireDelegationTokenRequest(hmac=mac, expiry_time_period_ms=-1), 2)
        assert r.error_code == 0
        assert _describe(bob) == []
    finally:
        carol.close()
        bob.close()
    assert token_login(sasl, token_id, mac)[0] == 58  # expired: gone


def test_short_lived_token_expires_and_is_removed(sasl: str) -> None:
    import time

    from kraft.tokens import TokenInfo, expired_records

    alice = plain_login(sasl, "alice")
    try:
        created = alice.request(CreateDelegationTokenRequest(renewers=[],
                                                             max_lifetime_ms=1500), 3)
        assert created.error_code == 0
        assert created.max_timestamp_ms - created.issue_timestamp_ms == 1500
        assert token_login(sasl, created.token_id, bytes(created.hmac))[0] == 0
        # past its max lifetime it is expired, then removed by the task (every 0.5 s)
        deadline = time.monotonic() + 30
        codes: list[int] = []
        while not codes or codes[-1] != 62:  # DELEGATION_TOKEN_NOT_FOUND
            assert time.monotonic() < deadline, codes
            codes.append(alice.request(RenewDelegationTokenRequest(
                hmac=bytes(created.hmac), renew_period_ms=-1), 2).error_code)
            time.sleep(0.1)
        assert set(codes) <= {0, 66, 62}  # renewable, then DELEGATION_TOKEN_EXPIRED, then gone
        assert token_login(sasl, created.token_id, bytes(created.hmac))[0] == 58
    finally:
        alice.close()
    live = TokenInfo("a", "User:x", "User:x", (), 0, 10_000, 5_000)
    dead = TokenInfo("b", "User:x", "User:x", (), 0, 1_000, 1_000)
    assert [r.token_id for r in expired_records({"a": live, "b": dead}, 2_000)] == ["b"]
