"""Wire primitives shared by the generated codecs.

Decoding works over a ``memoryview`` of one frame with an explicit cursor; every length read
from the wire is checked against the bytes that remain before anything is allocated, so an
absurd length can never make us allocate more than the frame we already hold. Anything that
does not parse raises :class:`RemoteProtocolError`.

Encoding appends to a :class:`Writer` (a ``bytearray``). A ``records`` field may hold an object
that is not bytes but has a ``size`` attribute (a slice of a segment file, sent later with
``sendfile``): the writer records where it goes instead of copying it. See ``Writer.externals``.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any, ClassVar, Protocol

__all__ = [
    "RemoteProtocolError",
    "Reader",
    "Writer",
    "External",
    "Struct",
    "ZERO_UUID",
]

ZERO_UUID = uuid.UUID(int=0)

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")


class RemoteProtocolError(Exception):
    """Bytes from a peer that do not follow the protocol. Close that connection."""


def _utf8(mv: memoryview) -> str:
    try:
        return str(mv, "utf-8")
    except UnicodeDecodeError as e:
        raise RemoteProtocolError(f"invalid UTF-8 in a string: {e}") from None


class External(Protocol):
    """A chunk of a records field that is sent from elsewhere (e.g. a file range)."""

    @property
    def size(self) -> int: ...


class Reader:
    """A cursor over one frame. All reads are bounds-checked."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None):
        self.buf = buf if isinstance(buf, memoryview) else memoryview(buf)
        self.pos = pos
        self.end = len(self.buf) if end is None else end

    def remaining(self) -> int:
        return self.end - self.pos

    def unpack(self, s: struct.Struct) -> tuple[Any, ...]:
        p = self.pos
        n = p + s.size
        if n > self.end:
            raise RemoteProtocolError("truncated message")
        self.pos = n
        return s.unpack_from(self.buf, p)

    def int8(self) -> int:
        p = self.pos
        if p >= self.end:
            raise RemoteProtocolError("truncated message")
        self.pos = p + 1
        v = self.buf[p]
        return v - 256 if v > 127 else v

    def int16(self) -> int:
        return int(self.unpack(_I16)[0])

    def int32(self) -> int:
        return int(self.unpack(_I32)[0])

    def uvarint(self) -> int:
        buf = self.buf
        p = self.pos
        end = self.end
        result = 0
        shift = 0
        while True:
            if p >= end:
                raise RemoteProtocolError("truncated varint")
            b = buf[p]
            p += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if shift > 28:
                raise RemoteProtocolError("varint too long")
        self.pos = p
        return result

    def take(self, n: int) -> memoryview:
        if n < 0:
            raise RemoteProtocolError(f"negative length {n}")
        p = self.pos
        e = p + n
        if e > self.end:
            raise RemoteProtocolError(f"length {n} exceeds the {self.end - p} bytes left")
        self.pos = e
        return self.buf[p:e]

    # strings -------------------------------------------------------------------------------
    def string(self) -> str:
        n = self.int16()
        if n < 0:
            raise RemoteProtocolError("null string where not nullable")
        return _utf8(self.take(n))

    def nstring(self) -> str | None:
        n = self.int16()
        if n < 0:
            if n == -1:
                return None
            raise RemoteProtocolError(f"invalid string length {n}")
        return _utf8(self.take(n))

    def cstring(self) -> str:
        n = self.uvarint() - 1
        if n < 0:
            raise RemoteProtocolError("null string where not nullable")
        return _utf8(self.take(n))

    def ncstring(self) -> str | None:
        n = self.uvarint() - 1
        if n < 0:
            return None
        return _utf8(self.take(n))

    # bytes ---------------------------------------------------------------------------------
    def bytes_(self) -> bytes:
        n = self.int32()
        if n < 0:
            raise RemoteProtocolError("null bytes where not nullable")
        return bytes(self.take(n))

    def nbytes(self) -> bytes | None:
        n = self.int32()
        if n < 0:
            if n == -1:
                return None
            raise RemoteProtocolError(f"invalid bytes length {n}")
        return bytes(self.take(n))

    def cbytes(self) -> bytes:
        n = self.uvarint() - 1
        if n < 0:
            raise RemoteProtocolError("null bytes where not nullable")
        return bytes(self.take(n))

    def ncbytes(self) -> bytes | None:
        n = self.uvarint() - 1
        if n < 0:
            return None
        return bytes(self.take(n))

    # records: zero-copy views of the frame ------------------------------------------------
    def records(self) -> memoryview | None:
        n = self.int32()
        if n < 0:
            if n == -1:
                return None
            raise RemoteProtocolError(f"invalid records length {n}")
        return self.take(n)

    def crecords(self) -> memoryview | None:
        n = self.uvarint() - 1
        if n < 0:
            return None
        return self.take(n)

    # arrays --------------------------------------------------------------------------------
    def array_len(self) -> int:
        n = self.int32()
        if n < 0:
            raise RemoteProtocolError("null array where not nullable")
        if n > self.end - self.pos:
            raise RemoteProtocolError(f"array length {n} exceeds the bytes left")
        return n

    def narray_len(self) -> int:
        n = self.int32()
        if n < -1:
            raise RemoteProtocolError(f"invalid array length {n}")
        if n > self.end - self.pos:
            raise RemoteProtocolError(f"array length {n} exceeds the bytes left")
        return n

    def carray_len(self) -> int:
        n = self.uvarint() - 1
        if n < 0:
            raise RemoteProtocolError("null array where not nullable")
        if n > self.end - self.pos:
            raise RemoteProtocolError(f"array length {n} exceeds the bytes left")
        return n

    def ncarray_len(self) -> int:
        n = self.uvarint() - 1
        if n > self.end - self.pos:
            raise RemoteProtocolError(f"array length {n} exceeds the bytes left")
        return n

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=bytes(self.take(16)))

    # tagged fields -------------------------------------------------------------------------
    def tag_header(self) -> tuple[int, int]:
        tag = self.uvarint()
        size = self.uvarint()
        if size > self.end - self.pos:
            raise RemoteProtocolError(f"tagged field size {size} exceeds the bytes left")
        return tag, size

    def sub(self, size: int) -> Reader:
        """A reader over the next ``size`` bytes; advances this reader past them."""
        start = self.pos
        self.take(size)
        return Reader(self.buf, start, start + size)


class Writer(bytearray):
    """An output buffer. ``externals`` lists (position, chunk) for records sent out of band."""

    externals: list[tuple[int, External]]

    def __init__(self) -> None:
        super().__init__()
        self.externals = []

    def uvarint(self, v: int) -> None:
        while v > 0x7F:
            self.append((v & 0x7F) | 0x80)
            v >>= 7
        self.append(v)

    def string(self, v: str | None) -> None:
        if v is None:
            raise ValueError("null in a non-nullable string field")
        b = v.encode()
        self += _I16.pack(len(b))
        self += b

    def nstring(self, v: str | None) -> None:
        if v is None:
            self += b"\xff\xff"
        else:
            self.string(v)

    def cstring(self, v: str | None) -> None:
        if v is None:
            raise ValueError("null in a non-nullable string field")
        b = v.encode()
        self.uvarint(len(b) + 1)
        self += b

    def ncstring(self, v: str | None) -> None:
        if v is None:
            self.append(0)
        else:
            self.cstring(v)

    def bytes_(self, v: bytes | bytearray | memoryview | None) -> None:
        if v is None:
            raise ValueError("null in a non-nullable bytes field")
        self += _I32.pack(len(v))
        self += v

    def nbytes(self, v: bytes | bytearray | memoryview | None) -> None:
        if v is None:
            self += b"\xff\xff\xff\xff"
        else:
            self.bytes_(v)

    def cbytes(self, v: bytes | bytearray | memoryview | None) -> None:
        if v is None:
            raise ValueError("null in a non-nullable bytes field")
        self.uvarint(len(v) + 1)
        self += v

    def ncbytes(self, v: bytes | bytearray | memoryview | None) -> None:
        if v is None:
            self.append(0)
        else:
            self.cbytes(v)

    def _records_body(self, v: Any) -> None:
        if isinstance(v, (bytes, bytearray, memoryview)):
            self += v
        else:
            self.externals.append((len(self), v))

    def records(self, v: Any) -> None:
        if v is None:
            self += b"\xff\xff\xff\xff"
            return
        self += _I32.pack(_records_size(v))
        self._records_body(v)

    def crecords(self, v: Any) -> None:
        if v is None:
            self.append(0)
            return
        self.uvarint(_records_size(v) + 1)
        self._records_body(v)

    def array_len(self, v: list[Any] | None) -> None:
        if v is None:
            raise ValueError("null in a non-nullable array field")
        self += _I32.pack(len(v))

    def narray_len(self, v: list[Any] | None) -> None:
        self += _I32.pack(-1 if v is None else len(v))

    def carray_len(self, v: list[Any] | None) -> None:
        if v is None:
            raise ValueError("null in a non-nullable array field")
        self.uvarint(len(v) + 1)

    def ncarray_len(self, v: list[Any] | None) -> None:
        self.uvarint(0 if v is None else len(v) + 1)

    def uuid(self, v: uuid.UUID) -> None:
        self += v.bytes

    def tagged(self, tag: int, body: bytes | bytearray) -> None:
        self.uvarint(tag)
        self.uvarint(len(body))
        self += body

    def total_size(self) -> int:
        return len(self) + sum(e.size for _, e in self.externals)

    def chunks(self) -> list[bytes | bytearray | memoryview | External]:
        """The output in order: buffer slices interleaved with external chunks."""
        if not self.externals:
            return [self]
        out: list[bytes | bytearray | memoryview | External] = []
        mv = memoryview(self)
        prev = 0
        for pos, ext in self.externals:
            if pos > prev:
                out.append(mv[prev:pos])
            out.append(ext)
            prev = pos
        if prev < len(self):
            out.append(mv[prev:])
        return out


def _records_size(v: Any) -> int:
    if isinstance(v, (bytes, bytearray, memoryview)):
        return len(v)
    return int(v.size)


def uvarint_size(v: int) -> int:
    n = 1
    while v > 0x7F:
        v >>= 7
        n += 1
    return n


class Struct:
    """Base of every generated struct: equality by fields, a readable repr."""

    __slots__ = ("unknown_tags",)
    FIELDS: ClassVar[tuple[tuple[Any, ...], ...]] = ()

    unknown_tags: list[tuple[int, bytes]] | None

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        for f in self.FIELDS:
            if getattr(self, f[0]) != getattr(other, f[0]):
                return False
        return (self.unknown_tags or None) == (other.unknown_tags or None)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        inner = ", ".join(f"{f[0]}={getattr(self, f[0])!r}" for f in self.FIELDS)
        return f"{type(self).__qualname__}({inner})"

    def read_unknown_tag(self, r: Reader, tag: int, size: int) -> None:
        data = bytes(r.take(size))
        if self.unknown_tags is None:
            self.unknown_tags = []
        self.unknown_tags.append((tag, data))


def write_tags(
    w: Writer,
    known: list[tuple[int, bytes | bytearray]],
    unknown: list[tuple[int, bytes]] | None,
) -> None:
    """Write a tagged-field section: known fields plus preserved unknown ones, by tag."""
    items: list[tuple[int, bytes | bytearray]] = list(known)
    if unknown:
        items.extend(unknown)
        items.sort(key=lambda t: t[0])
    w.uvarint(len(items))
    for tag, body in items:
        w.tagged(tag, body)
