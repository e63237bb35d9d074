"""Envelope (API 58) and the broker's forwarding of admin writes, against real broker processes.

A combined node of a one-voter static quorum serves Envelope on its controller listener; the
tests send envelopes to it as a broker would (kafkawire/metadata/forwarding.py's ``ForwardingManager``
and hand-built ones for bad input) and check the answers and the metadata they commit.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import trio

from kafkawire.metadata.envelope import (
    address_bytes,
    decode_inner_response,
    encode_inner_request,
    error_response,
    serialize_principal,
)
from kafkawire.metadata.forwarding import ForwardingManager
from kafkawire.net.node_client import NodeClient, NodeDisconnected
from kafkawire.net.server import Connection, RequestContext
from kafkawire.tools.testing import BrokerProcess, free_port
from protocol._generated.create_topics_request import CreateTopicsRequest
from protocol._generated.create_topics_response import CreateTopicsResponse
from protocol._generated.envelope_request import EnvelopeRequest
from protocol._generated.metadata_request import MetadataRequest
from protocol._generated.request_header import RequestHeader
from protocol.errors import ErrorCode

ROOT = Path(__file__).resolve().parents[1]
CID = "q1dHpv3lQ5y-RBV8fJkZ3w"
StrDict = dict[str, str]


def node_overrides(port: int, cport: int, **extra: str) -> StrDict:
    return {
        "process.roles": "broker,controller", "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{cport}",
        "controller.listener.names": "CONTROLLER",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        **extra,
    }


def start_node(data: Path, standalone: bool = False, **extra: str) -> tuple[BrokerProcess, int]:
    """A formatted combined node of a one-voter quorum: static (``controller.quorum.voters``)
    or, ``standalone``, dynamic (``controller.quorum.bootstrap.servers``, ``--standalone``)."""
    port, cport = free_port(), free_port()
    overrides = node_overrides(port, cport, **extra)
    args = [sys.executable, "-m", "kafkawire", "format", "--cluster-id", CID,
            "--override", f"log.dir={data}"]
    if standalone:
        del overrides["controller.quorum.voters"]
        overrides["controller.quorum.bootstrap.servers"] = f"127.0.0.1:{cport}"
        args.append("--standalone")
    for k, v in overrides.items():
        args += ["--override", f"{k}={v}"]
    p = subprocess.run(args, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0, p.stderr
    return BrokerProcess(data, port=port, overrides=overrides).start(timeout_s=60), cport


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, int]]:
    b, cport = start_node(tmp_path_factory.mktemp("fwd") / "data")
    try:
        yield b, cport
    finally:
        b.close()


@pytest.fixture(scope="module")
def acl_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, int]]:
    b, cport = start_node(
        tmp_path_factory.mktemp("fwdacl") / "data",
        **{"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
           "super.users": "User:ANONYMOUS"})
    try:
        yield b, cport
    finally:
        b.close()


def clock_ms() -> int:
    return int(trio.current_time() * 1000)


def create_topics(*names: str, partitions: int = 1) -> CreateTopicsRequest:
    return CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=n, num_partitions=partitions, replication_factor=1) for n in names],
        timeout_ms=30_000)


def envelope(inner: Any, version: int, principal: str = "User:ANONYMOUS",
             corr: int = 7, address: bytes | None = None) -> EnvelopeRequest:
    hdr = RequestHeader(request_api_key=inner.API_KEY, request_api_version=version,
                        correlation_id=corr, client_id="forwarded-client")
    return EnvelopeRequest(
        request_data=encode_inner_request(hdr, inner),
        request_principal=serialize_principal(principal),
        client_host_address=address_bytes("127.0.0.1") if address is None else address)


def ask(port: int, *requests: Any, version: int | None = None) -> list[Any]:
    async def main() -> list[Any]:
        c = NodeClient("127.0.0.1", port, "test", clock_ms, request_timeout_ms=60_000)
        try:
            return [await c.request(r, version) for r in requests]
        finally:
            await c.aclose()
    return trio.run(main)


def topic_names(port: int) -> set[str]:
    req = MetadataRequest()
    req.topics = None  # all topics (the constructor turns None into [])
    (md,) = ask(port, req)
    return {t.name for t in md.topics}


def unwrap(resp: Any, corr: int = 7, version: int = 7) -> CreateTopicsResponse:
    assert resp.error_code == ErrorCode.NONE, resp
    out = decode_inner_response(bytes(resp.response_data), 19, version, corr,
                                CreateTopicsResponse)
    assert isinstance(out, CreateTopicsResponse)
    return out


# ---- the controller side ----------------------------------------------------------------------
def test_envelope_creates_topics_on_the_controller(node: tuple[BrokerProcess, int]) -> None:
    b, cport = node
    (resp,) = ask(cport, envelope(create_topics("fwd-a", partitions=3), 7))
    inner = unwrap(resp)
    assert [(t.name, t.error_code, t.num_partitions) for t in inner.topics] == [
        ("fwd-a", 0, 3)]
    assert "fwd-a" in topic_names(b.port)
    # an older, non-flexible inner version round-trips with its own header version
    (resp,) = ask(cport, envelope(create_topics("fwd-a"), 4, corr=9))
    inner = unwrap(resp, corr=9, version=4)
    assert inner.topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS


def test_envelope_is_refused_on_a_broker_listener(node: tuple[BrokerProcess, int]) -> None:
    b, _ = node
    with pytest.raises(NodeDisconnected):
        ask(b.port, envelope(create_topics("fwd-never"), 7), version=0)
    assert "fwd-never" not in topic_names(b.port)


@pytest.mark.parametrize("bad, code", [
    ({"request_principal": b"\x00\x07junk"}, ErrorCode.PRINCIPAL_DESERIALIZATION_FAILURE),
    ({"request_principal": b""}, ErrorCode.PRINCIPAL_DESERIALIZATION_FAILURE),
    ({"client_host_address": b"\x7f\x00\x01"}, ErrorCode.INVALID_REQUEST),
    ({"request_data": b"\x00\x13"}, ErrorCode.INVALID_REQUEST),
    ({"request_data": "metadata"}, ErrorCode.INVALID_REQUEST),
    ({"request_data": "truncated"}, ErrorCode.INVALID_REQUEST),
    ({"request_data": "v99"}, ErrorCode.UNSUPPORTED_VERSION),
])
def test_bad_envelopes_get_kafkas_error(node: tuple[BrokerProcess, int], bad: dict[str, Any],
                                        code: ErrorCode) -> None:
    b, cport = node
    env = envelope(create_topics("fwd-bad"), 7)
    data = bytes(env.request_data)
    special = {
        "metadata": lambda: envelope(MetadataRequest(topics=None), 12).request_data,
        "truncated": lambda: data[:-6],
        "v99": lambda: data[:2] + b"\x00\x63" + data[4:],
    }
    for field, value in bad.items():
        setattr(env, field, special[value]() if isinstance(value, str) else value)
    resp, ok = ask(cport, env, envelope(create_topics("fwd-after-bad"), 7))
    assert resp.error_code == code and resp.response_data is None
    assert unwrap(ok).topics[0].error_code in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS)
    assert "fwd-bad" not in topic_names(b.port)


def test_forwarded_principal_is_the_one_authorized(acl_node: tuple[BrokerProcess, int]) -> None:
    b, cport = acl_node
    denied, allowed = ask(cport, envelope(create_topics("acl-fwd"), 7, principal="User:alice"),
                          envelope(create_topics("acl-fwd"), 7, corr=8))
    assert unwrap(denied).topics[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert unwrap(allowed, corr=8).topics[0].error_code == ErrorCode.NONE


# ---- the broker side ----------------------------------------------------------------------
def forward_ctx(request: Any, version: int = 7) -> RequestContext:
    conn = Connection(cast(Any, None), "127.0.0.1:40000", "PLAINTEXT", 1)
    hdr = RequestHeader(request_api_key=request.API_KEY, request_api_version=version,
                        correlation_id=31, client_id="admin")
    return RequestContext(request.API_KEY, version, 31, "admin", conn, hdr)


def test_forwarding_finds_the_controller(node: tuple[BrokerProcess, int]) -> None:
    b, cport = node
    dead = free_port()

    async def main() -> tuple[Any, Any, ForwardingManager]:
        # a closed port, then a node's broker listener (no Envelope there), then the controller
        fm = ForwardingManager(lambda: [(3, "127.0.0.1", dead), (2, "127.0.0.1", b.port),
                                        (1, "127.0.0.1", cport)], "broker-9", clock_ms)
        req = create_topics("fwd-b", "fwd-c")
        first = await fm.forward(forward_ctx(req), req)
        retries = fm.retries
        again = await fm.forward(forward_ctx(req), req)  # straight to the one that answered
        assert fm.retries == retries
        await fm.aclose()
        return first, again, fm

    first, again, fm = trio.run(main)
    assert [(t.name, t.error_code) for t in first.topics] == [("fwd-b", 0), ("fwd-c", 0)]
    assert {t.error_code for t in again.topics} == {ErrorCode.TOPIC_ALREADY_EXISTS}
    assert fm.preferred == (1, "127.0.0.1", cport) and fm.forwarded == 2 and fm.retries >= 2
    assert {"fwd-b", "fwd-c"} <= topic_names(b.port)


def test_forwarding_times_out_with_request_timed_out() -> None:
    dead = free_port()

    async def main() -> tuple[Any, float]:
        fm = ForwardingManager(lambda: [(1, "127.0.0.1", dead)], "broker-9", clock_ms,
                               retry_timeout_ms=1500)
        req = create_topics("x", "y")
        t0 = trio.current_time()
        resp = await fm.forward(forward_ctx(req), req)
        return resp, trio.current_time() - t0

    resp, elapsed = trio.run(main)
    assert [(t.name, t.error_code) for t in resp.topics] == [
        ("x", ErrorCode.REQUEST_TIMED_OUT), ("y", ErrorCode.REQUEST_TIMED_OUT)]
    assert 1.4 <= elapsed < 10


def test_error_response_names_every_item() -> None:
    from protocol._generated.alter_user_scram_credentials_request import (
        AlterUserScramCredentialsRequest as A,
    )
    from protocol._generated.alter_user_scram_credentials_response import (
        AlterUserScramCredentialsResponse,
    )
    from protocol._generated.delete_topics_request import DeleteTopicsRequest
    from protocol._generated.delete_topics_response import DeleteTopicsResponse

    r = error_response(DeleteTopicsResponse, DeleteTopicsRequest(topic_names=["a", "b"]),
                       ErrorCode.UNKNOWN_SERVER_ERROR)
    assert [(t.name, t.error_code) for t in r.responses] == [("a", -1), ("b", -1)]
    r = error_response(AlterUserScramCredentialsResponse, A(
        deletions=[A.ScramCredentialDeletion(name="u1", mechanism=1)],
        upsertions=[A.ScramCredentialUpsertion(name="u1", mechanism=2),
                    A.ScramCredentialUpsertion(name="u2", mechanism=1)]),
        ErrorCode.REQUEST_TIMED_OUT)
    assert [(x.user, x.error_code) for x in r.results] == [("u1", 7), ("u2", 7)]
