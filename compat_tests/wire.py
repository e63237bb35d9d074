"""Raw Kafka protocol access for the compatibility scenarios.

Clients hide details the scenarios want to compare (base offsets of duplicates, whole batches
returned for a mid-batch fetch, every field of a response). This module speaks the protocol
directly with the repo's generated codecs (``protocol._generated``) over a blocking socket, and
builds/parses magic-2 record batches.
"""

from __future__ import annotations

import gzip
import importlib
import socket
import struct
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import crc32c

from protocol._generated import API_INFO, RESPONSES
from protocol._generated.request_header import RequestHeader
from protocol._generated.response_header import ResponseHeader
from protocol.primitives import Reader, Struct

CLIENT_ID = "kafkawire-compat"
API_VERSIONS_KEY = 18


class ConnectionClosed(ConnectionError):
    """The broker closed the connection instead of answering."""


def split_address(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.rpartition(":")
    return host, int(port)


def response_class(api_key: int) -> type[Struct]:
    module, name = RESPONSES[api_key]
    cls: type[Struct] = getattr(importlib.import_module(f"protocol._generated.{module}"), name)
    return cls


def request_header_version(api_key: int, version: int) -> int:
    flexible_from = API_INFO[api_key][3]
    return 2 if flexible_from >= 0 and version >= flexible_from else 1


def response_header_version(api_key: int, version: int) -> int:
    if api_key == API_VERSIONS_KEY:
        return 0  # always v0, so that a client can read it whatever it sent (KIP-511)
    flexible_from = API_INFO[api_key][3]
    return 1 if flexible_from >= 0 and version >= flexible_from else 0


class Connection:
    """One blocking connection; requests are answered in order."""

    def __init__(self, bootstrap: str, timeout: float = 60.0) -> None:
        self.bootstrap = bootstrap
        self.timeout = timeout
        self._sock: socket.socket | None = None
        self._correlation = 0
        self.reconnects = 0
        self._connect()

    def _connect(self) -> socket.socket:
        sock = socket.create_connection(split_address(self.bootstrap), timeout=self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock = sock
        return sock

    @property
    def sock(self) -> socket.socket:
        """The socket; reconnects when the broker closed the previous one."""
        if self._sock is None:
            self.reconnects += 1
            return self._connect()
        return self._sock

    def drop(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def close(self) -> None:
        self.drop()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def next_correlation(self) -> int:
        self._correlation += 1
        return self._correlation

    def send_frame(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def _recv_exact(self, n: int) -> bytes:
        parts: list[bytes] = []
        while n:
            try:
                chunk = self.sock.recv(min(n, 1 << 20))
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                self.drop()  # the next request opens a new connection
                raise ConnectionClosed("connection closed by the broker")
            parts.append(chunk)
            n -= len(chunk)
        return b"".join(parts)

    def recv_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._recv_exact(4))
        return self._recv_exact(size)

    def encode_request(
        self,
        msg: Any,
        version: int,
        *,
        api_key: int | None = None,
        correlation_id: int | None = None,
    ) -> tuple[int, bytes]:
        key = msg.API_KEY if api_key is None else api_key
        cid = self.next_correlation() if correlation_id is None else correlation_id
        header = RequestHeader(
            request_api_key=key,
            request_api_version=version,
            correlation_id=cid,
            client_id=CLIENT_ID,
        )
        body = msg.encode(version)
        return cid, header.encode(request_header_version(key, version)) + body

    def request(self, msg: Any, version: int) -> Any:
        """Send ``msg`` at ``version`` and decode the answer (same version)."""
        key = msg.API_KEY
        cid, frame = self.encode_request(msg, version)
        self.send_frame(frame)
        return self.read_response(key, version, cid)

    def send_only(self, msg: Any, version: int) -> int:
        """Send without reading an answer (Produce acks=0); returns the correlation id."""
        cid, frame = self.encode_request(msg, version)
        self.send_frame(frame)
        return cid

    def read_response(self, api_key: int, version: int, correlation_id: int) -> Any:
        raw = self.recv_frame()
        r = Reader(raw)
        header = ResponseHeader.read(r, response_header_version(api_key, version))
        if header.correlation_id != correlation_id:
            raise AssertionError(
                f"correlation id {header.correlation_id} answered, {correlation_id} expected"
            )
        cls = response_class(api_key)
        return cls.read(r, version)  # type: ignore[attr-defined]

    def raw_request(self, api_key: int, version: int, body: bytes, header_version: int) -> bytes:
        """Send a hand-made body; returns the raw answer frame (header included)."""
        cid = self.next_correlation()
        header = RequestHeader(
            request_api_key=api_key,
            request_api_version=version,
            correlation_id=cid,
            client_id=CLIENT_ID,
        )
        self.send_frame(header.encode(header_version) + body)
        return self.recv_frame()

    def closes_after(self, frame: bytes, wait: float = 5.0) -> bool:
        """Send a frame; True when the broker closes the connection without answering."""
        self.send_frame(frame)
        self.sock.settimeout(wait)
        try:
            data = self.sock.recv(4)
        except TimeoutError:
            return False
        except ConnectionResetError:
            return True
        return data == b""


# --- conversion of generated structs to plain data --------------------------------------------


def plain(obj: Any) -> Any:
    """A generated struct (or list of them) as JSON-able data; records stay raw bytes."""
    if isinstance(obj, Struct):
        out = {f[0]: plain(getattr(obj, f[0])) for f in obj.FIELDS}
        if obj.unknown_tags:
            out["_unknown_tags"] = [[t, b.hex()] for t, b in obj.unknown_tags]
        return out
    if isinstance(obj, list):
        return [plain(x) for x in obj]
    if isinstance(obj, uuid.UUID):
        return str(obj)
    if isinstance(obj, memoryview):
        return bytes(obj)
    return obj


# --- record batches (magic 2) -------------------------------------------------------------------


def _zigzag(v: int) -> int:
    return (v << 1) ^ (v >> 63)


def write_varint(out: bytearray, v: int) -> None:
    u = _zigzag(v) & 0xFFFFFFFFFFFFFFFF
    while u > 0x7F:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    u = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        u |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
    return (u >> 1) ^ -(u & 1), pos


@dataclass
class Rec:
    value: bytes | None
    key: bytes | None = None
    timestamp: int | None = None  # absolute; None = the batch's base timestamp
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


CONTROL_TYPES = {
    0: "ABORT",
    1: "COMMIT",
    2: "LEADER_CHANGE",
    3: "SNAPSHOT_HEADER",
    4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION",
    6: "KRAFT_VOTERS",
}

_BATCH_HEAD = struct.Struct(">qiibIhiqqqhii")


def build_batch(
    records: list[Rec],
    *,
    base_timestamp: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    compression: int = 0,
    base_offset: int = 0,
    corrupt_crc: bool = False,
) -> bytes:
    """An uncompressed (or gzip, ``compression=1``) magic-2 batch with a correct CRC-32C.

    ``base_timestamp`` defaults to the first record's timestamp, else the current time.
    """
    if base_timestamp is None:
        first = records[0].timestamp if records else None
        base_timestamp = int(time.time() * 1000) if first is None else first
    body = bytearray()
    max_ts = -1
    for i, rec in enumerate(records):
        ts = base_timestamp if rec.timestamp is None else rec.timestamp
        max_ts = max(max_ts, ts)
        r = bytearray([0])
        write_varint(r, ts - base_timestamp)
        write_varint(r, i)
        for part in (rec.key, rec.value):
            if part is None:
                write_varint(r, -1)
            else:
                write_varint(r, len(part))
                r += part
        write_varint(r, len(rec.headers))
        for hk, hv in rec.headers:
            kb = hk.encode()
            write_varint(r, len(kb))
            r += kb
            if hv is None:
                write_varint(r, -1)
            else:
                write_varint(r, len(hv))
                r += hv
        write_varint(body, len(r))
        body += r
    if compression == 1:
        body = bytearray(gzip.compress(bytes(body), mtime=0))
    elif compression != 0:
        raise ValueError("only none and gzip are built here")
    attributes = compression | (0x10 if transactional else 0)
    tail = struct.pack(
        ">hiqqqhii",
        attributes,
        len(records) - 1,
        base_timestamp,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    ) + bytes(body)
    crc = crc32c.crc32c(tail)
    if corrupt_crc:
        crc ^= 0xFFFF
    batch_length = 4 + 1 + 4 + len(tail)  # leader epoch, magic, crc, rest
    return struct.pack(">qiibI", base_offset, batch_length, -1, 2, crc) + tail


def parse_batches(data: bytes | None) -> list[dict[str, Any]]:
    """Every complete batch in a fetch response's records, decoded (gzip/none payloads)."""
    out: list[dict[str, Any]] = []
    if not data:
        return out
    data = bytes(data)
    pos = 0
    while len(data) - pos >= 61:
        (
            base_offset,
            length,
            leader_epoch,
            magic,
            crc,
            attributes,
            last_delta,
            base_ts,
            max_ts,
            pid,
            epoch,
            base_seq,
            count,
        ) = _BATCH_HEAD.unpack_from(data, pos)
        end = pos + 12 + length
        if end > len(data):
            out.append({"partial_batch_bytes": len(data) - pos})
            break
        batch: dict[str, Any] = {
            "base_offset": base_offset,
            "batch_length": length,
            "partition_leader_epoch": leader_epoch,
            "magic": magic,
            "crc_ok": crc32c.crc32c(data[pos + 21 : end]) == crc,
            "attributes": attributes,
            "last_offset_delta": last_delta,
            "base_timestamp": base_ts,
            "max_timestamp": max_ts,
            "producer_id": pid,
            "producer_epoch": epoch,
            "base_sequence": base_seq,
            "records_count": count,
        }
        payload = data[pos + 61 : end]
        codec = attributes & 7
        if codec == 1:
            payload = gzip.decompress(payload)
        if codec in (0, 1):
            recs = _parse_records(payload, count, base_offset, base_ts)
            if attributes & 0x20:  # control batch: key = int16 version, int16 type
                for r in recs:
                    key = (r["key"] or "").encode("latin-1")
                    ctype = struct.unpack(">h", key[2:4])[0] if len(key) >= 4 else None
                    r["control_type"] = CONTROL_TYPES.get(ctype, ctype)  # type: ignore[arg-type]
            batch["records"] = recs
        out.append(batch)
        pos = end
    return out


def _parse_records(buf: bytes, count: int, base_offset: int, base_ts: int) -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = []
    pos = 0
    for _ in range(count):
        length, pos = read_varint(buf, pos)
        end = pos + length
        pos += 1  # attributes
        ts_delta, pos = read_varint(buf, pos)
        off_delta, pos = read_varint(buf, pos)
        klen, pos = read_varint(buf, pos)
        key = None if klen < 0 else buf[pos : pos + klen]
        pos += max(klen, 0)
        vlen, pos = read_varint(buf, pos)
        value = None if vlen < 0 else buf[pos : pos + vlen]
        pos += max(vlen, 0)
        nh, pos = read_varint(buf, pos)
        headers = []
        for _ in range(nh):
            hkl, pos = read_varint(buf, pos)
            hk = buf[pos : pos + hkl].decode()
            pos += hkl
            hvl, pos = read_varint(buf, pos)
            hv = None if hvl < 0 else buf[pos : pos + hvl].decode("latin-1")
            pos += max(hvl, 0)
            headers.append([hk, hv])
        recs.append(
            {
                "offset": base_offset + off_delta,
                "timestamp": base_ts + ts_delta,
                "key": None if key is None else key.decode("latin-1"),
                "value": None if value is None else value.decode("latin-1"),
                "headers": headers,
            }
        )
        pos = end
    return recs
