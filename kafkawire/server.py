"""The trio network layer: one task per connection, one request at a time.

An API is served only on the listener types Kafka's definitions name for it (``broker`` or
``controller``, ``controller.listener.names``); another closes the connection, as Kafka's
request channel does. A connection reads a 4-byte size, checks it against ``socket.request.max.bytes`` (larger: the
connection is closed, as Kafka does), reads the frame, decodes the request header, and looks the
API up in the handler registry. An unknown API key or an unsupported version closes the
connection, except ApiVersions, which is answered with a v0 body carrying UNSUPPORTED_VERSION and
our key-18 range (KIP-511) so the client can retry. The handler's response is encoded behind the
response header (v0 for ApiVersions always, v1 for flexible versions) and sent; ``records``
fields that reference segment files go out with ``os.sendfile``.

Requests on one connection are answered in order because they are processed one at a time
(Kafka mutes a channel while a request is in flight the same way). Any exception in a handler is
logged with the correlation id and closes only that connection.

Limits: a connection that sends nothing for ``connections.max.idle.ms`` is closed (also one
stuck in the middle of a frame); the bytes of request frames held by all connections together
are bounded (``queued.max.request.bytes``, :class:`FrameMemory`): a frame is reserved in full
once its size is read, and a connection whose frame does not fit waits, unread. Warnings about
misbehaving clients name the request (API key, version, its correlation id) and are rate
limited (:class:`RateLimitedLog`); so is trio's failed-accept error (out of descriptors).

Debugging: the ``kafkawire.requests`` logger at DEBUG logs every request and its response
(decoded, with the connection id and correlation id), except Produce and Fetch, whose records
would flood the log; ``python -m kafkawire serve --log-level DEBUG`` turns it on.
"""

from __future__ import annotations

import errno
import logging
import math
import os
import socket
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import trio

from kafkawire.apis import REGISTRY, ApiHandler
from kafkawire.authorizer import Authorizer
from kafkawire.listener_security import ListenerSecurity
from kafkawire.loop_monitor import SLOW_REQUEST_S, slow_requests
from kafkawire.metrics import BrokerMetrics
from kafkawire.quota_manager import ConnectionRate
from kafkawire.tls_stream import TLSStream
from protocol._generated.api_versions_response import ApiVersionsResponse
from protocol._generated.request_header import RequestHeader
from protocol.errors import ErrorCode
from protocol.primitives import External, Reader, RemoteProtocolError, Writer

log = logging.getLogger("kafkawire.server")
#: request/response trace at DEBUG (not Produce/Fetch: their records)
trace = logging.getLogger("kafkawire.requests")
TRACE_SKIPPED_KEYS = frozenset({0, 1})



class RateLimitedLog:
    """At most ``burst`` records per ``interval_s`` through ``logger``; the rest are counted
    and reported in one line when the next interval opens (bad clients must not flood the
    log: one line per bad frame made 13.8 MB of log for 110,000 frames)."""

    def __init__(self, logger: logging.Logger, burst: int = 10, interval_s: float = 10.0) -> None:
        self.logger = logger
        self.burst = burst
        self.interval_s = interval_s
        self._window_start = -math.inf
        self._count = 0
        self._suppressed = 0

    def warning(self, msg: str, *args: Any) -> None:
        try:
            now = trio.current_time()
        except RuntimeError:  # outside trio (tests of the server pieces)
            now = 0.0
        if now - self._window_start >= self.interval_s:
            if self._suppressed:
                self.logger.warning("%d more such warning(s) suppressed in the last %.0f s",
                                    self._suppressed, now - self._window_start)
            self._window_start, self._count, self._suppressed = now, 0, 0
        if self._count < self.burst:
            self._count += 1
            self.logger.warning(msg, *args)
        else:
            self._suppressed += 1


#: warnings about misbehaving clients (malformed frames, unknown APIs), rate limited
bad_clients = RateLimitedLog(log)


class AcceptErrorFilter(logging.Filter):
    """trio logs every failed ``accept`` (EMFILE: out of descriptors) with a traceback, ten
    times a second while it lasts. Keep one line per ``interval_s``, without the traceback,
    counting the ones dropped."""

    def __init__(self, interval_s: float = 10.0) -> None:
        super().__init__()
        self.interval_s = interval_s
        self._last = -math.inf
        self._dropped = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if record.created - self._last < self.interval_s:
            self._dropped += 1
            return False
        record.exc_info = None
        record.exc_text = None
        if self._dropped:
            record.msg = f"{record.msg} ({self._dropped} more since the last such line)"
        self._last, self._dropped = record.created, 0
        return True


logging.getLogger("trio.serve_listeners").addFilter(AcceptErrorFilter())

_SIZE = struct.Struct(">i")
_HDR = struct.Struct(">hhi")
API_VERSIONS_KEY = 18
#: SaslHandshake, ApiVersions, SaslAuthenticate: served before authentication
SASL_EXCHANGE_KEYS = frozenset({17, 18, 36})
RECV_CHUNK_BYTES = 256 * 1024
#: request bytes held in memory by all connections together when ``queued.max.request.bytes``
#: is -1 (Kafka: unbounded): four frames of the default ``socket.request.max.bytes``
FRAME_MEMORY_DEFAULT_BYTES = 4 * 104857600


@dataclass
class RequestContext:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    connection: Connection
    header: RequestHeader
    #: None: no authorizer (everything allowed)
    authorizer: Authorizer | None = None
    #: the request's size on the wire (produce byte-rate quotas)
    size_bytes: int = 0

    def allowed(self, operation: int, resource_type: int, name: str,
                log_denied: bool = True) -> bool:
        """May this request's principal do ``operation`` on the resource (kraft.acls)?
        ``log_denied=False`` where a denial only filters a listing (as Kafka)."""
        a = self.authorizer
        return a is None or a.allowed(self.connection.principal, self.connection.host,
                                      operation, resource_type, name, log_denied)

    def operations(self, resource_type: int, name: str) -> int:
        """The authorized-operations bit field of a resource for this principal."""
        a = self.authorizer
        if a is None:
            from kraft.acls import SUPPORTED_OPERATIONS
            return sum(1 << op for op in SUPPORTED_OPERATIONS.get(resource_type, ()))
        return a.operations(self.connection.principal, self.connection.host, resource_type,
                            name)
    #: time a handler spent waiting on others (Fetch long polls: Kafka's RemoteTimeMs), seconds
    remote_s: float = 0.0


@dataclass(eq=False)
class Connection:
    stream: trio.abc.Stream
    peer: str
    listener: str
    conn_id: int
    buf: bytearray = field(default_factory=bytearray)
    closed: bool = False
    client_software: tuple[str, str] | None = None
    #: Kafka's listener type: "controller" on a ``controller.listener.names`` listener
    listener_type: str = "broker"
    state: dict[str, Any] = field(default_factory=dict)
    #: the request being handled (or the last one), for log lines
    request_info: str = "no request yet"
    #: Kafka principal ("User:name"); ANONYMOUS on PLAINTEXT and SSL without a certificate
    principal: str = "User:ANONYMOUS"
    #: False on a SASL listener until SaslAuthenticate succeeds
    authenticated: bool = True
    #: the SASL exchange in progress (mechanism server), if any
    sasl: Any = None
    #: SaslHandshake v0: the next frames are bare SASL tokens (no Kafka request header)
    sasl_raw_tokens: bool = False
    #: KIP-368: requests after this time (ms) close the connection until re-authentication
    session_expiry_ms: int | None = None
    #: set by a handler: close the connection this many ms after sending the response
    close_after_ms: int | None = None
    #: set by a handler: mute (read nothing more) for this many ms after the response
    throttle_ms: int = 0

    @property
    def host(self) -> str:
        return self.peer.rsplit(":", 1)[0]


class FrameTooLarge(RemoteProtocolError):
    pass


class ConnectionIdle(Exception):
    """Nothing received for ``connections.max.idle.ms``."""


class FrameMemory:
    """The bytes of request frames held in memory by all connections, at most ``max_bytes``
    (``queued.max.request.bytes``; Kafka's memory pool). A connection whose next frame does
    not fit stops reading (its bytes wait in the socket, as Kafka mutes the channel) until
    others release theirs; a frame larger than the whole budget waits until it is alone."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.in_use = 0
        self._freed = trio.Event()

    async def acquire(self, n: int) -> None:
        while self.in_use and self.in_use + n > self.max_bytes:
            await self._freed.wait()
        self.in_use += n

    def release(self, n: int) -> None:
        self.in_use -= n
        self._freed.set()
        self._freed = trio.Event()


async def _receive(conn: Connection, max_bytes: int, idle_s: float) -> bytes | bytearray:
    with trio.move_on_after(idle_s):
        return await conn.stream.receive_some(max_bytes)
    raise ConnectionIdle(f"idle for more than connections.max.idle.ms ({idle_s * 1000:.0f})")


async def read_frame(
    conn: Connection, max_bytes: int, idle_s: float = math.inf, memory: FrameMemory | None = None
) -> bytearray | None:
    """The next request frame (without its size prefix), or None at a clean EOF. Raises
    ConnectionIdle when nothing arrives for ``idle_s`` seconds. With ``memory``, the frame's
    size is taken from it (the caller releases ``len(frame)`` when done with the frame)."""
    buf = conn.buf
    while len(buf) < 4:
        data = await _receive(conn, RECV_CHUNK_BYTES, idle_s)
        if not data:
            if buf:
                raise RemoteProtocolError("connection closed mid-frame")
            return None
        buf += data
    (size,) = _SIZE.unpack_from(buf, 0)
    if size < 0 or size > max_bytes:
        raise FrameTooLarge(
            f"request of {size} bytes is larger than socket.request.max.bytes ({max_bytes})"
        )
    need = 4 + size
    if memory is not None:
        await memory.acquire(size)
    try:
        while len(buf) < need:
            data = await _receive(conn, max(RECV_CHUNK_BYTES, need - len(buf)), idle_s)
            if not data:
                raise RemoteProtocolError("connection closed mid-frame")
            buf += data
    except BaseException:
        if memory is not None:
            memory.release(size)
        raise
    if len(buf) == need:
        frame = buf[4:]
        buf.clear()
    else:
        frame = buf[4:need]
        del buf[:need]
    return frame


#: TLS cannot use sendfile: file ranges are read and sent in pieces of this size
TLS_READ_CHUNK_BYTES = 1024 * 1024


async def send_chunks(stream: trio.abc.SendStream, chunks: list[Any]) -> None:
    """Send bytes chunks with the stream and External file ranges with sendfile (plaintext)
    or read from the file and sent through the stream (TLS)."""
    pending: list[bytes | bytearray | memoryview] = []
    for ch in chunks:
        if isinstance(ch, (bytes, bytearray, memoryview)):
            pending.append(ch)
            continue
        if pending:
            await stream.send_all(b"".join(pending) if len(pending) > 1 else pending[0])
            pending = []
        for rng in ch.ranges:  # file ranges (fd, position, length), kept alive by ch
            if isinstance(stream, trio.SocketStream):
                await sendfile_all(stream, rng.fd, rng.position, rng.length)
            else:
                await send_file_range(stream, rng.fd, rng.position, rng.length)
    if pending:
        await stream.send_all(b"".join(pending) if len(pending) > 1 else pending[0])


async def sendfile_all(stream: trio.SocketStream, fd: int, offset: int, count: int) -> None:
    sock = stream.socket
    out = sock.fileno()
    end = offset + count
    while offset < end:
        try:
            sent = os.sendfile(out, fd, offset, end - offset)
        except BlockingIOError:
            await trio.lowlevel.wait_writable(sock)
            continue
        except OSError as e:
            if e.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                await trio.lowlevel.wait_writable(sock)
                continue
            raise
        if sent == 0:
            # the file is shorter than promised (truncated underneath us): the frame can no
            # longer be completed, so the connection must go.
            raise OSError(errno.EIO, "segment file shorter than the promised fetch range")
        offset += sent
        await trio.lowlevel.checkpoint()


async def send_file_range(stream: trio.abc.SendStream, fd: int, offset: int,
                          count: int) -> None:
    end = offset + count
    while offset < end:
        data = os.pread(fd, min(TLS_READ_CHUNK_BYTES, end - offset), offset)
        if not data:
            raise OSError(errno.EIO, "segment file shorter than the promised fetch range")
        await stream.send_all(data)
        offset += len(data)


def response_header_version(api_key: int, api_version: int, handler: ApiHandler) -> int:
    if api_key == API_VERSIONS_KEY:
        return 0
    return 1 if handler.flexible(api_version) else 0


def encode_response(
    correlation_id: int, header_version: int, body: Any, api_version: int
) -> Writer:
    w = Writer()
    w += b"\x00\x00\x00\x00"  # size, patched below
    w += _SIZE.pack(correlation_id)
    if header_version >= 1:
        w.append(0)  # empty tagged fields
    body.write(w, api_version)
    _SIZE.pack_into(w, 0, w.total_size() - 4)
    return w


def api_versions_fallback(handler: ApiHandler) -> ApiVersionsResponse:
    return ApiVersionsResponse(
        error_code=ErrorCode.UNSUPPORTED_VERSION,
        api_keys=[
            ApiVersionsResponse.ApiVersion(
                api_key=API_VERSIONS_KEY,
                min_version=handler.min_version,
                max_version=handler.max_version,
            )
        ],
    )


Dispatch = Callable[[RequestContext, Any], Awaitable[Any]]
ConnectionLimits = tuple[int, int, dict[str, int]]
CreationLimits = tuple[float, float | None, float | None]


class Server:
    """Accepts connections on the broker listeners and dispatches requests to ``dispatch``."""

    def __init__(
        self,
        dispatch: Dispatch,
        request_max_bytes: int,
        on_disconnect: Callable[[Connection], None] | None = None,
        metrics: BrokerMetrics | None = None,
    ) -> None:
        self.dispatch = dispatch
        self.metrics = metrics
        self.request_max_bytes = request_max_bytes
        self.on_disconnect = on_disconnect
        self.next_conn_id = 0
        self.connections: set[Connection] = set()
        #: (max.connections, max.connections.per.ip, max.connections.per.ip.overrides), read
        #: at each new connection so that dynamic broker configs apply at once
        self.connection_limits: Callable[[], ConnectionLimits] | None = None
        #: ``connections.max.idle.ms``: a connection that sends nothing for this long is closed
        self.idle_ms: float = math.inf
        #: request bytes held in memory by all connections (``queued.max.request.bytes``)
        self.frame_memory = FrameMemory(FRAME_MEMORY_DEFAULT_BYTES)
        self._slot_freed = trio.Event()
        #: listener protocols, TLS contexts and SASL settings (None: everything PLAINTEXT)
        self.security: ListenerSecurity | None = None
        #: answers a bare SASL token after SaslHandshake v0 (None: unsupported)
        self.raw_token: Callable[[Connection, bytes], Awaitable[bytes | None]] | None = None
        #: (host, listener) -> (max.connection.creation.rate, the listener's or None, the
        #: address's connection_creation_rate or None)
        self.creation_limits: Callable[[str, str], CreationLimits] | None = None
        self.connection_rate = ConnectionRate()
        #: connections.max.idle.ms (also bounds the TLS handshake)
        self.idle_timeout_ms = 600_000
        self.now_ms: Callable[[], int] = lambda: int(time.time() * 1000)
        #: names of the controller listeners: they serve the APIs Kafka marks "controller"
        self.controller_listeners: set[str] = set()

    async def serve_listener(
        self,
        name: str,
        listeners: list[trio.SocketListener],
        task_status: trio.TaskStatus[list[trio.SocketListener]] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        async def handler(stream: trio.SocketStream) -> None:
            await self.serve_connection(stream, name)

        await trio.serve_listeners(handler, listeners, task_status=task_status)

    async def serve_connection(self, stream: trio.SocketStream, listener: str) -> None:
        """Serve one client. Nothing raised here may escape: it would stop the listener."""
        try:
            await self._serve_connection(stream, listener)
        except trio.Cancelled:
            raise
        except BaseException:  # pragma: no cover - last line of defence
            log.exception("unexpected error around a connection; the broker goes on")

    async def _creation_rate_ok(self, stream: trio.SocketStream, host: str,
                                listener: str) -> bool:
        """``connection_creation_rate`` of the address (beyond it: closed, as Kafka) and
        ``max.connection.creation.rate``, broker-wide and per listener (beyond it: accepting
        waits)."""
        if self.creation_limits is None:
            return True
        broker_rate, listener_rate, ip_rate = self.creation_limits(host, listener)
        now = self.now_ms()
        if self.connection_rate.ip_exceeded(host, ip_rate, now):
            log.info("closing connection from %s: connection_creation_rate (%s/s) exceeded",
                     host, ip_rate)
            with trio.move_on_after(1) as cs:
                cs.shield = True
                await stream.aclose()
            return False
        delay = self.connection_rate.accept_delay_ms(broker_rate, now, listener, listener_rate)
        if delay > 0:
            await trio.sleep(delay / 1000)
        return True

    async def _admit(self, stream: trio.SocketStream, host: str, listener: str) -> bool:
        """Kafka's connection quotas: a connection beyond ``max.connections.per.ip`` (or its
        override for the address) is closed at once; beyond ``max.connections`` it waits
        until another connection closes (Kafka's acceptor stops accepting meanwhile)."""
        if not await self._creation_rate_ok(stream, host, listener):
            return False
        if self.connection_limits is None:
            return True
        total, per_ip, overrides = self.connection_limits()
        limit = overrides.get(host, per_ip)
        if sum(1 for c in self.connections if c.peer.rsplit(":", 1)[0] == host) >= limit:
            log.info("closing connection from %s: max.connections.per.ip (%d) reached",
                     host, limit)
            with trio.move_on_after(1) as cs:
                cs.shield = True
                await stream.aclose()
            return False
        while len(self.connections) >= self.connection_limits()[0]:
            await self._slot_freed.wait()
        return True

    async def _secure(self, stream: trio.SocketStream, conn: Connection) -> bool:
        """TLS handshake (SSL, SASL_SSL) and the starting principal; False: close."""
        sec = self.security
        if sec is None:
            return True
        listener = conn.listener
        conn.authenticated = not sec.uses_sasl(listener)
        if not sec.uses_tls(listener):
            return True
        tls = TLSStream(stream, sec.ssl_context(listener))
        conn.stream = tls
        # Kafka closes a connection idle this long, handshake included
        with trio.move_on_after(self.idle_timeout_ms / 1000):
            try:
                await tls.do_handshake()
            except trio.BrokenResourceError as e:
                log.info("connection %s from %s: TLS handshake failed: %s",
                         conn.conn_id, conn.peer, e.__cause__ or e)
                return False
            if sec.protocol(listener) == "SSL":
                der = tls.getpeercert(binary_form=True)
                conn.principal = sec.certificate_principal(listener, der)
            return True
        log.info("connection %s from %s: TLS handshake timed out", conn.conn_id, conn.peer)
        return False

    def frame_limit(self, conn: Connection) -> int:
        """Before authentication Kafka reads at most sasl.server.max.receive.size bytes."""
        if conn.authenticated or self.security is None:
            return self.request_max_bytes
        return self.security.sasl(conn.listener).max_receive_bytes

    async def _serve_connection(self, stream: trio.SocketStream, listener: str) -> None:
        try:
            stream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            peer_addr = stream.socket.getpeername()
            peer = f"{peer_addr[0]}:{peer_addr[1]}"
        except OSError:
            peer = "?"
        if not await self._admit(stream, peer.rsplit(":", 1)[0], listener):
            return
        self.next_conn_id += 1
        conn = Connection(stream, peer, listener, self.next_conn_id)
        if listener in self.controller_listeners:
            conn.listener_type = "controller"
        self.connections.add(conn)
        if self.metrics is not None:
            self.metrics.connection_created(listener)
        memory = self.frame_memory
        try:
            if not await self._secure(stream, conn):
                return
            while True:
                frame = await read_frame(
                    conn, self.frame_limit(conn), self.idle_ms / 1000, memory
                )
                if frame is None:
                    return
                try:
                    if conn.sasl_raw_tokens:
                        await self.handle_raw_token(conn, bytes(frame))
                    else:
                        await self.handle_frame(conn, frame)
                finally:
                    memory.release(len(frame))
                if conn.close_after_ms is not None:
                    await trio.sleep(conn.close_after_ms / 1000)
                    return
                if conn.throttle_ms > 0:  # muted: Kafka reads nothing more meanwhile
                    await trio.sleep(conn.throttle_ms / 1000)
                    conn.throttle_ms = 0
        except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
            log.debug("connection %s from %s closed by peer", conn.conn_id, peer)
        except ConnectionIdle as e:
            log.debug("closing connection %s from %s: %s", conn.conn_id, peer, e)
        except RemoteProtocolError as e:
            bad_clients.warning(
                "closing connection %s from %s (%s): %s", conn.conn_id, peer, conn.request_info, e,
            )
        except Exception:
            log.exception(
                "error serving connection %s from %s (%s); closing it",
                conn.conn_id, peer, conn.request_info,
            )
        finally:
            conn.closed = True
            self.connections.discard(conn)
            self._slot_freed.set()
            self._slot_freed = trio.Event()
            if self.on_disconnect is not None:
                try:
                    self.on_disconnect(conn)
                except Exception:
                    log.exception("disconnect hook failed")
            with trio.move_on_after(1) as cs:
                cs.shield = True
                try:
                    await conn.stream.aclose()
                except Exception:
                    pass

    async def handle_raw_token(self, conn: Connection, token: bytes) -> None:
        """SaslHandshake v0: a bare token in, a bare (size-prefixed) token out."""
        if self.raw_token is None:
            raise RemoteProtocolError("SASL token without an authenticator")
        challenge = await self.raw_token(conn, token)
        if challenge is not None:
            await conn.stream.send_all(_SIZE.pack(len(challenge)) + challenge)

    def check_session(self, conn: Connection, api_key: int, name: str) -> None:
        """Before (re-)authentication only ApiVersions, SaslHandshake and SaslAuthenticate
        pass; anything else closes the connection, as Kafka's SaslServerAuthenticator."""
        if api_key in SASL_EXCHANGE_KEYS:
            return
        if not conn.authenticated:
            raise RemoteProtocolError(
                f"Unexpected Kafka request of type {name} during SASL handshake")
        expiry = conn.session_expiry_ms
        if expiry is not None and self.now_ms() >= expiry:
            raise RemoteProtocolError(
                f"{name} request after the SASL session expired (connections.max.reauth.ms)")

    async def handle_frame(self, conn: Connection, frame: bytearray) -> int:
        t_received = time.perf_counter()
        if len(frame) < 8:
            conn.request_info = f"a frame of {len(frame)} bytes, too short for a request header"
            raise RemoteProtocolError("request shorter than its header")
        api_key, api_version, correlation_id = (int(x) for x in _HDR.unpack_from(frame, 0))
        conn.request_info = f"API key {api_key} v{api_version}, correlation id {correlation_id}"
        handler = REGISTRY.get(api_key)
        if handler is None:
            raise RemoteProtocolError(f"unknown API key {api_key}")
        if conn.listener_type not in handler.listeners:
            # as Kafka: an API this listener type does not expose closes the connection
            raise RemoteProtocolError(
                f"API {handler.name} ({api_key}) is not enabled on a {conn.listener_type} "
                "listener")
        if not handler.min_version <= api_version <= handler.max_version:
            if api_key == API_VERSIONS_KEY:
                body = api_versions_fallback(handler)
                w = encode_response(correlation_id, 0, body, 0)
                await send_chunks(conn.stream, w.chunks())
                return correlation_id
            if not conn.authenticated:  # Kafka: an illegal SASL state, the connection closes
                raise RemoteProtocolError(
                    f"unsupported version {api_version} of {handler.name} before authentication")
            raise RemoteProtocolError(
                f"unsupported version {api_version} of API {handler.name} ({api_key})"
            )
        self.check_session(conn, api_key, handler.name)
        r = Reader(memoryview(frame))
        header = RequestHeader.read(r, 2 if handler.flexible(api_version) else 1)
        request = handler.request_cls.read(r, api_version)
        ctx = RequestContext(
            api_key, api_version, correlation_id, header.client_id, conn, header,
            size_bytes=len(frame) + 4,
        )
        t_dispatch = time.perf_counter()
        response = await self.dispatch(ctx, request)
        t_local = time.perf_counter()
        if api_key not in TRACE_SKIPPED_KEYS and trace.isEnabledFor(logging.DEBUG):
            trace.debug("conn %d %s v%d corr %d client %s: %r -> %r", conn.conn_id, handler.name,
                        api_version, correlation_id, header.client_id, request, response)
        if response is not None:  # None: e.g. Produce with acks=0
            hv = response_header_version(api_key, api_version, handler)
            w = encode_response(correlation_id, hv, response, api_version)
            await send_chunks(conn.stream, w.chunks())
        if SLOW_REQUEST_S > 0 and time.perf_counter() - t_received >= SLOW_REQUEST_S:
            slow_requests.warning(
                "%s v%d from %s (conn %d, corr %d) took %.0f ms: %.0f ms in the handler, %.0f "
                "ms waiting on others, %.0f ms sending", handler.name, api_version,
                header.client_id, conn.conn_id, correlation_id,
                (time.perf_counter() - t_received) * 1000,
                (t_local - t_dispatch - ctx.remote_s) * 1000, ctx.remote_s * 1000,
                (time.perf_counter() - t_local) * 1000)
        if self.metrics is not None:
            t_sent = time.perf_counter()
            local = t_local - t_dispatch - ctx.remote_s
            args = (api_version, t_dispatch - t_received, local, ctx.remote_s, t_sent - t_local)
            self.metrics.request_done(handler.name, *args)
            if api_key == 1:  # Kafka also files Fetch under FetchConsumer / FetchFollower
                follower = getattr(request, "replica_id", -1) >= 0 or getattr(
                    getattr(request, "replica_state", None), "replica_id", -1) >= 0
                self.metrics.request_done("FetchFollower" if follower else "FetchConsumer",
                                          *args)
        return correlation_id


__all__ = ["Server", "RequestContext", "Connection", "External", "read_frame", "send_chunks"]
