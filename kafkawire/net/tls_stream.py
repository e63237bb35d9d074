"""A TLS stream for the broker's connections: OpenSSL over memory BIOs on a trio socket.

trio.SSLStream returns at most one TLS record per ``receive_some`` and goes through its
conflict-detecting state machine and a checkpoint for each, which costs ~45 us per record.
librdkafka writes one TLS record per message segment (1 KiB records: ~1 KiB TLS records), so
a 1 MB produce request meant ~1,000 trips (17 MB/s where PLAINTEXT did 55). Here one socket read
(up to ``TLS_RECV_BYTES``) is decrypted record after record in one go, and everything OpenSSL
has to send (handshake, session tickets, encrypted data) goes out in one ``send_all``.

One task per connection uses it (the server reads a request, then writes its response), so
there is no concurrent use to guard against; a broken peer raises ``trio.BrokenResourceError``
like trio's streams.
"""

from __future__ import annotations

import ssl

import trio

#: encrypted bytes read from the socket at once
TLS_RECV_BYTES = 256 * 1024
#: plaintext bytes taken from OpenSSL per read call (several records)
TLS_READ_BYTES = 1024 * 1024


class TLSStream(trio.abc.Stream):
    def __init__(self, transport: trio.SocketStream, context: ssl.SSLContext,
                 server_side: bool = True, server_hostname: str | None = None) -> None:
        """``server_side=False`` (with ``server_hostname`` for its check): the client side,
        for this broker's own connections to other brokers over SSL / SASL_SSL."""
        self.transport = transport
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        self._obj = context.wrap_bio(self._in, self._out, server_side=server_side,
                                     server_hostname=None if server_side else server_hostname)
        self._eof = False

    async def _flush(self) -> None:
        if self._out.pending:
            await self.transport.send_all(self._out.read())

    async def _fill(self) -> None:
        await self._flush()
        data = await self.transport.receive_some(TLS_RECV_BYTES)
        if not data:
            self._in.write_eof()
            self._eof = True
        else:
            self._in.write(data)

    async def do_handshake(self) -> None:
        while True:
            try:
                self._obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                if self._eof:
                    raise trio.BrokenResourceError("EOF during the TLS handshake") from None
                await self._fill()
            except ssl.SSLError as e:
                await self._flush_quietly()
                raise trio.BrokenResourceError(str(e)) from e
        await self._flush()

    async def _flush_quietly(self) -> None:
        try:
            await self._flush()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass

    def getpeercert(self, binary_form: bool = True) -> bytes | None:
        return self._obj.getpeercert(binary_form=True)

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        limit = TLS_READ_BYTES if max_bytes is None else max(max_bytes, 1)
        while True:
            chunks: list[bytes] = []
            size = 0
            try:
                while size < limit:
                    chunk = self._obj.read(limit - size)
                    if not chunk:
                        # With nothing buffered OpenSSL raises SSLWantReadError; an empty
                        # read is the peer's close_notify (SSL_ERROR_ZERO_RETURN), which
                        # SSLObject.read reports as b"" rather than SSLZeroReturnError.
                        self._eof = True
                        break
                    chunks.append(chunk)
                    size += len(chunk)
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLZeroReturnError:
                self._eof = True
            except ssl.SSLError as e:
                raise trio.BrokenResourceError(str(e)) from e
            if chunks:
                await self._flush()  # e.g. a key update answered while reading
                return b"".join(chunks)
            if self._eof:
                return b""
            await self._fill()

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data)
        try:
            while view:
                n = self._obj.write(view[:TLS_READ_BYTES])
                view = view[n:]
                if self._out.pending >= TLS_RECV_BYTES:
                    await self._flush()
        except ssl.SSLError as e:
            raise trio.BrokenResourceError(str(e)) from e
        await self._flush()

    async def wait_send_all_might_not_block(self) -> None:
        await self.transport.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        try:
            self._obj.unwrap()
        except (ssl.SSLError, ValueError):
            pass
        await self._flush_quietly()
        await self.transport.aclose()
