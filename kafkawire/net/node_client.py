"""An async Kafka-protocol client between nodes (broker -> controller, follower -> leader).

``NodeClient`` speaks the Kafka protocol with the generated codecs over one trio TCP
connection to one node, as Kafka's NetworkClient does for inter-broker traffic:

- connects lazily, then negotiates with ApiVersions (v3, falling back to v0 when the peer
  answers UNSUPPORTED_VERSION, KIP-511) and sends each request at the highest version both
  sides support (``NodeUnsupportedVersion`` when there is none);
- correlation ids increase per connection and every response is checked against its request;
- one request in flight at a time (a lock): the peer answers in order anyway;
- ``request_timeout_ms`` (Kafka's ``request.timeout.ms``) bounds each request and each
  connection set-up (connect + ApiVersions); a timeout or any
  connection error closes the connection and raises ``NodeDisconnected``; the next request
  reconnects after ``reconnect.backoff.ms``, doubling up to ``reconnect.backoff.max.ms``.

- ``security`` (``kafkawire.security.inter_broker``): TLS to an SSL / SASL_SSL listener (this
  broker's client side of ``kafkawire.net.tls_stream``), and SASL (PLAIN, SCRAM) after ApiVersions
  on a SASL listener; a failed handshake or authentication is a ``NodeDisconnected``.

Callers (the broker lifecycle manager, later the replica fetchers and the Raft driver) decide
what to retry.
"""

from __future__ import annotations

import importlib
import logging
import ssl
import struct
from collections.abc import Callable
from typing import Any

import trio

from kafkawire.net.tls_stream import TLSStream
from kafkawire.security.inter_broker import ClientSecurity, SaslClient
from protocol._generated import API_INFO, RESPONSES
from protocol._generated.api_versions_request import ApiVersionsRequest
from protocol._generated.api_versions_response import ApiVersionsResponse
from protocol._generated.request_header import RequestHeader
from protocol._generated.sasl_authenticate_request import SaslAuthenticateRequest
from protocol._generated.sasl_handshake_request import SaslHandshakeRequest
from protocol.errors import ErrorCode
from protocol.primitives import RemoteProtocolError

log = logging.getLogger("kafkawire.net.node_client")

_SIZE = struct.Struct(">i")
API_VERSIONS_KEY = 18
#: Kafka's client defaults
REQUEST_TIMEOUT_MS = 30_000
RECONNECT_BACKOFF_MS = 50
RECONNECT_BACKOFF_MAX_MS = 1000
#: a response larger than this closes the connection (Kafka's clients have no limit; a peer
#: speaking something else must not make us allocate gigabytes)
RESPONSE_MAX_BYTES = 256 * 1024 * 1024
SOFTWARE_NAME = "kafkawire"
SOFTWARE_VERSION = "0.1"


class NodeDisconnected(Exception):
    """The connection failed, closed or timed out; the request may or may not have run."""


class NodeAuthenticationFailed(NodeDisconnected):
    """The peer refused our credentials (SASL) or the TLS handshake failed."""


class NodeUnsupportedVersion(Exception):
    """The peer serves no version of the API that we can encode."""


class _AuthenticationError(Exception):
    """Inside ``_connect``: the TLS handshake or SASL exchange was refused."""


def _response_class(api_key: int) -> Any:
    mod, cls = RESPONSES[api_key]
    return getattr(importlib.import_module(f"protocol._generated.{mod}"), cls)


def _flexible(api_key: int, version: int) -> bool:
    return 0 <= API_INFO[api_key][3] <= version


class NodeClient:
    def __init__(
        self,
        host: str,
        port: int,
        client_id: str,
        clock_ms: Callable[[], int],
        request_timeout_ms: int = REQUEST_TIMEOUT_MS,
        reconnect_backoff_ms: int = RECONNECT_BACKOFF_MS,
        reconnect_backoff_max_ms: int = RECONNECT_BACKOFF_MAX_MS,
        security: ClientSecurity | None = None,
    ) -> None:
        self.host, self.port, self.client_id = host, port, client_id
        #: TLS and/or SASL of the peer's listener (None: PLAINTEXT)
        self.security = security
        self.clock_ms = clock_ms
        self.request_timeout_ms = request_timeout_ms
        self.reconnect_backoff_ms = reconnect_backoff_ms
        self.reconnect_backoff_max_ms = reconnect_backoff_max_ms
        self.stream: trio.abc.Stream | None = None
        self.versions: dict[int, tuple[int, int]] = {}
        self._correlation = 0
        self._lock = trio.Lock()
        self._buf = bytearray()
        self._failures = 0
        self._next_attempt_ms = 0

    # ---- connection -----------------------------------------------------------------------
    async def _connect(self) -> None:
        wait_ms = self._next_attempt_ms - self.clock_ms()
        if wait_ms > 0:
            await trio.sleep(wait_ms / 1000)
        try:
            with trio.fail_after(self.request_timeout_ms / 1000):
                self.stream = await self._open()
                self._buf.clear()
                self.versions = await self._negotiate()
                if self.security is not None and self.security.mechanism is not None:
                    await self._authenticate(self.security)
        except _AuthenticationError as e:
            # Kafka's NetworkClient logs this at ERROR on every failed attempt
            log.error("Connection to node %s:%s (client %s) failed authentication due to: %s",
                      self.host, self.port, self.client_id, e)
            self._backoff()
            await self._close_stream()
            raise NodeAuthenticationFailed(
                f"connecting to {self.host}:{self.port}: authentication failed: {e}") from e
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError,
                RemoteProtocolError, ssl.SSLError, ValueError) as e:
            self._backoff()
            await self._close_stream()
            raise NodeDisconnected(f"connecting to {self.host}:{self.port}: {e}") from e
        self._failures = 0

    async def _open(self) -> trio.abc.Stream:
        sock = await trio.open_tcp_stream(self.host, self.port)
        ctx = self.security.ssl_context if self.security is not None else None
        if ctx is None:
            return sock
        tls = TLSStream(sock, ctx, server_side=False, server_hostname=self.host)
        self.stream = tls  # closed on failure like any stream
        try:
            await tls.do_handshake()
        except (trio.BrokenResourceError, ssl.SSLError) as e:
            cause = e.__cause__ if isinstance(e.__cause__, ssl.SSLError) else e
            if isinstance(cause, ssl.SSLError):
                raise _AuthenticationError(f"SSL handshake failed: {cause}") from e
            raise
        return tls

    async def _authenticate(self, sec: ClientSecurity) -> None:
        """SaslHandshake v1, then SaslAuthenticate until the mechanism is done (Kafka's
        client order: after ApiVersions). A refusal raises RemoteProtocolError."""
        assert sec.mechanism is not None
        hs = await self._roundtrip(SaslHandshakeRequest(mechanism=sec.mechanism),
                                   self.version_for(SaslHandshakeRequest()))
        if hs.error_code != ErrorCode.NONE:
            raise _AuthenticationError(f"SaslHandshake {sec.mechanism}: error {hs.error_code} "
                                       f"(enabled: {hs.mechanisms})")
        client = SaslClient(sec)
        token: bytes | None = client.first()
        version = self.version_for(SaslAuthenticateRequest())
        while token is not None:
            resp = await self._roundtrip(SaslAuthenticateRequest(auth_bytes=token), version)
            if resp.error_code != ErrorCode.NONE:
                raise _AuthenticationError(f"SASL {sec.mechanism} authentication as "
                                           f"{sec.username}: {resp.error_message}")
            token = client.next(bytes(resp.auth_bytes or b""))

    def backoff_remaining_ms(self) -> int:
        """How long the next connection attempt still waits (0: none, or connected)."""
        if self.stream is not None:
            return 0
        return max(0, self._next_attempt_ms - self.clock_ms())

    def _backoff(self) -> None:
        delay = min(self.reconnect_backoff_ms * (2 ** self._failures),
                    self.reconnect_backoff_max_ms)
        self._failures += 1
        self._next_attempt_ms = self.clock_ms() + delay

    async def _negotiate(self) -> dict[int, tuple[int, int]]:
        req = ApiVersionsRequest(client_software_name=SOFTWARE_NAME,
                                 client_software_version=SOFTWARE_VERSION)
        resp = await self._roundtrip(req, 3)
        if resp.error_code == ErrorCode.UNSUPPORTED_VERSION:
            resp = await self._roundtrip(ApiVersionsRequest(), 0)
        if resp.error_code != ErrorCode.NONE:
            raise RemoteProtocolError(f"ApiVersions failed with error {resp.error_code}")
        assert isinstance(resp, ApiVersionsResponse)
        return {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}

    async def _close_stream(self) -> None:
        stream, self.stream = self.stream, None
        if stream is not None:
            with trio.move_on_after(1) as cs:
                cs.shield = True
                try:
                    await stream.aclose()
                except (OSError, trio.BrokenResourceError, trio.ClosedResourceError):
                    pass

    async def aclose(self) -> None:
        await self._close_stream()

    # ---- requests -------------------------------------------------------------------------
    def version_for(self, request: Any) -> int:
        key = int(request.API_KEY)
        theirs = self.versions.get(key)
        if theirs is None:
            raise NodeUnsupportedVersion(f"{self.host}:{self.port} does not serve API {key}")
        lo, hi = max(theirs[0], request.MIN_VERSION), min(theirs[1], request.MAX_VERSION)
        if lo > hi:
            raise NodeUnsupportedVersion(
                f"no common version of API {key}: ours {request.MIN_VERSION}-"
                f"{request.MAX_VERSION}, theirs {theirs[0]}-{theirs[1]}")
        return int(hi)

    async def request(self, request: Any, version: int | None = None,
                      timeout_ms: int | None = None) -> Any:
        """Send ``request`` and return the decoded response (NodeDisconnected on failure).
        ``timeout_ms`` bounds this request instead of ``request_timeout_ms``."""
        async with self._lock:
            if self.stream is None:
                await self._connect()
            v = self.version_for(request) if version is None else version
            limit_ms = self.request_timeout_ms if timeout_ms is None else timeout_ms
            try:
                with trio.fail_after(limit_ms / 1000):
                    return await self._roundtrip(request, v)
            except (trio.TooSlowError, OSError, trio.BrokenResourceError,
                    trio.ClosedResourceError, RemoteProtocolError) as e:
                self._backoff()
                await self._close_stream()
                raise NodeDisconnected(
                    f"{type(request).__name__} to {self.host}:{self.port}: "
                    f"{type(e).__name__} {e}") from e

    async def _roundtrip(self, request: Any, version: int) -> Any:
        stream = self._open_stream()
        key = int(request.API_KEY)
        flexible = _flexible(key, version)
        self._correlation += 1
        corr = self._correlation
        hdr = RequestHeader(request_api_key=key, request_api_version=version,
                            correlation_id=corr, client_id=self.client_id)
        body = hdr.encode(2 if flexible else 1) + request.encode(version)
        await stream.send_all(_SIZE.pack(len(body)) + body)
        frame = await self._read_frame()
        (got,) = _SIZE.unpack_from(frame, 0)
        if got != corr:
            raise RemoteProtocolError(f"correlation id {got} answers request {corr}")
        pos = 5 if flexible and key != API_VERSIONS_KEY else 4
        if pos == 5 and frame[4] != 0:
            raise RemoteProtocolError("tagged fields in a response header")  # none defined
        return _response_class(key).decode(frame[pos:], version)

    def _open_stream(self) -> trio.abc.Stream:
        """The connection, or ClosedResourceError when aclose() ran meanwhile (another task
        closes the client while a request is in flight, e.g. at shutdown)."""
        if self.stream is None:
            raise trio.ClosedResourceError(f"connection to {self.host}:{self.port} closed")
        return self.stream

    async def _read_frame(self) -> bytes:
        stream = self._open_stream()
        buf = self._buf
        while True:
            if len(buf) >= 4:
                (size,) = _SIZE.unpack_from(buf, 0)
                if size < 4 or size > RESPONSE_MAX_BYTES:
                    raise RemoteProtocolError(f"response of {size} bytes")
                if len(buf) >= 4 + size:
                    frame = bytes(buf[4:4 + size])
                    del buf[:4 + size]
                    return frame
            data = await stream.receive_some(256 * 1024)
            if not data:
                raise RemoteProtocolError("connection closed by the peer")
            buf += data
