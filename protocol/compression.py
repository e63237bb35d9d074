"""Compression codecs of record batch v2 payloads (attributes bits 0-2).

With a codec other than none, everything after ``recordsCount`` in a batch is one compressed
blob holding the records back to back. The codec ids and the payload formats are Kafka's:

* 0 none.
* 1 gzip: a gzip stream (RFC 1952). Readers accept concatenated members, as Java's
  ``GZIPInputStream`` does.
* 2 snappy: two framings exist on the wire. The Java client and kafka-python write the
  snappy-java ("xerial") stream: the 8-byte magic ``82 'SNAPPY' 00``, two int32 fields
  (version, compatible version; both 1) and then blocks, each an int32 big-endian length and
  one raw snappy block of at most 32 KiB of input. librdkafka writes one *raw* snappy block.
  We read both (as librdkafka and snappy-java do) and ignore the two version fields, because
  some writers store them little-endian. We write the xerial framing, like the Java client.
* 3 lz4: the LZ4 *frame* format (magic ``04 22 4D 18``). Kafka's Java reader decodes every block
  on its own, so we write independent 64 KiB blocks without content size or checksums, as the
  Java client does.
* 4 zstd: zstd frames (RFC 8878). Frames written by streaming compressors carry no content
  size, so reads never rely on it.

Every decompressor takes ``max_size``, the most bytes it may produce, and never allocates much
beyond it: a payload that would decompress to more raises :class:`RecordTooLargeError`.
Malformed or truncated payloads raise :class:`CorruptRecordError`; unknown codec ids raise
:class:`UnsupportedCompressionError`. All three are :class:`RecordError`, a ``KafkaError``
carrying the code a produce response would report for that partition.
"""

from __future__ import annotations

import struct
import zlib
from enum import IntEnum
from typing import ClassVar

import lz4.frame as _lz4f
import snappy as _snappy
import zstandard as _zstd

from protocol.errors import ErrorCode, KafkaError

__all__ = [
    "Codec",
    "RecordError",
    "CorruptRecordError",
    "RecordTooLargeError",
    "UnsupportedCompressionError",
    "compress",
    "decompress",
    "gzip_compress",
    "gzip_decompress",
    "snappy_compress",
    "snappy_decompress",
    "lz4_compress",
    "lz4_decompress",
    "zstd_compress",
    "zstd_decompress",
    "XERIAL_MAGIC",
]

Buffer = bytes | bytearray | memoryview


class Codec(IntEnum):
    """Kafka compression codec ids (``CompressionType.java``)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class RecordError(KafkaError):
    """Record data that cannot be accepted; ``code`` is what Kafka answers for it."""

    default_code: ClassVar[ErrorCode] = ErrorCode.CORRUPT_MESSAGE

    def __init__(self, message: str) -> None:
        super().__init__(self.default_code, message)


class CorruptRecordError(RecordError):
    """Bad CRC, bad batch framing or a malformed compressed payload (CORRUPT_MESSAGE)."""

    default_code = ErrorCode.CORRUPT_MESSAGE


class RecordTooLargeError(RecordError):
    """Decompressed data beyond the allowed bound (MESSAGE_TOO_LARGE; producers split)."""

    default_code = ErrorCode.MESSAGE_TOO_LARGE


class UnsupportedCompressionError(RecordError):
    """A codec id outside 0-4, or one the request version may not use."""

    default_code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


def _view(data: Buffer) -> memoryview:
    return data if isinstance(data, memoryview) else memoryview(data)


def _check_bound(max_size: int) -> None:
    if max_size < 0:
        raise ValueError(f"max_size must be >= 0, not {max_size}")


def _too_large(codec: str, max_size: int) -> RecordTooLargeError:
    return RecordTooLargeError(f"{codec} payload decompresses to more than {max_size} bytes")


# gzip --------------------------------------------------------------------------------------

_GZIP_MAGIC = b"\x1f\x8b"
_GZIP_WBITS = 16 + zlib.MAX_WBITS  # gzip header and trailer, no zlib wrapper


def gzip_compress(data: Buffer, level: int = 6) -> bytes:
    """A single gzip member; level 6 is Java's ``Deflater.DEFAULT_COMPRESSION``."""
    c = zlib.compressobj(level, zlib.DEFLATED, _GZIP_WBITS)
    return c.compress(data) + c.flush()


def gzip_decompress(data: Buffer, max_size: int) -> bytes:
    """Decompress one or more concatenated gzip members, producing at most ``max_size`` bytes."""
    _check_bound(max_size)
    chunks: list[bytes] = []
    total = 0
    pending: Buffer = data
    if not len(pending):
        raise CorruptRecordError("empty gzip payload")
    try:
        while True:
            d = zlib.decompressobj(_GZIP_WBITS)
            while True:
                out = d.decompress(pending, max_size - total + 1)
                total += len(out)
                if total > max_size:
                    raise _too_large("gzip", max_size)
                chunks.append(out)
                if d.eof:
                    break
                pending = d.unconsumed_tail
                if not pending and not out:
                    raise CorruptRecordError("truncated gzip payload")
            pending = d.unused_data
            if not pending:
                break
            if pending[:2] != _GZIP_MAGIC:
                raise CorruptRecordError(f"{len(pending)} bytes of garbage after the gzip stream")
    except zlib.error as e:
        raise CorruptRecordError(f"invalid gzip payload: {e}") from None
    return b"".join(chunks)


# snappy ------------------------------------------------------------------------------------

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # version 1, compatible version 1
_XERIAL_HEADER_SIZE = 16
_XERIAL_BLOCK = 32 * 1024  # snappy-java's default block size
_I32 = struct.Struct(">i")


def snappy_compress(data: Buffer, *, xerial: bool = True) -> bytes:
    """Xerial-framed snappy (what the Java client writes), or one raw block."""
    if not xerial:
        return bytes(_snappy.compress(bytes(data)))
    view = _view(data)
    parts = [_XERIAL_HEADER]
    # Empty input still gets one (empty) block: kafka-python only detects the framing when
    # the payload is longer than the 16-byte header.
    for start in range(0, len(view) or 1, _XERIAL_BLOCK):
        block = bytes(_snappy.compress(bytes(view[start : start + _XERIAL_BLOCK])))
        parts.append(_I32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_raw_size(view: memoryview) -> int:
    """Uncompressed length from a raw snappy block's preamble (a little-endian base-128 uint32)."""
    result = 0
    shift = 0
    for b in view[:5]:
        result |= (b & 0x7F) << shift
        if b < 0x80:
            if result > 0xFFFFFFFF:
                break
            return result
        shift += 7
    raise CorruptRecordError("invalid snappy block length preamble")


def _snappy_block(view: memoryview, budget: int, max_size: int) -> bytes:
    size = _snappy_raw_size(view)
    if size > budget:
        raise _too_large("snappy", max_size)
    try:
        out = bytes(_snappy.decompress(view))
    except Exception as e:  # the binding raises its own UncompressError (or others)
        raise CorruptRecordError(f"invalid snappy block: {e or type(e).__name__}") from None
    if len(out) != size:
        raise CorruptRecordError("snappy block length does not match its preamble")
    return out


def snappy_decompress(data: Buffer, max_size: int) -> bytes:
    """Decompress xerial-framed or raw snappy, producing at most ``max_size`` bytes."""
    _check_bound(max_size)
    view = _view(data)
    n = len(view)
    if n < _XERIAL_HEADER_SIZE or view[:8] != XERIAL_MAGIC:
        return _snappy_block(view, max_size, max_size)
    chunks: list[bytes] = []
    total = 0
    pos = _XERIAL_HEADER_SIZE
    while pos < n:
        if n - pos < 4:
            raise CorruptRecordError("truncated snappy-java block length")
        size = _I32.unpack_from(view, pos)[0]
        pos += 4
        if size < 0 or size > n - pos:
            raise CorruptRecordError(f"snappy-java block of {size} bytes exceeds the payload")
        out = _snappy_block(view[pos : pos + size], max_size - total, max_size)
        total += len(out)
        chunks.append(out)
        pos += size
    return b"".join(chunks)


# lz4 ---------------------------------------------------------------------------------------


def lz4_compress(data: Buffer, level: int = 0) -> bytes:
    """One LZ4 frame with independent 64 KiB blocks and no size/checksums (Java's layout)."""
    return bytes(
        _lz4f.compress(
            bytes(data),
            compression_level=level,
            block_size=_lz4f.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            block_checksum=False,
            store_size=False,
        )
    )


def lz4_decompress(data: Buffer, max_size: int) -> bytes:
    """Decompress one or more LZ4 frames, producing at most ``max_size`` bytes."""
    _check_bound(max_size)
    chunks: list[bytes] = []
    total = 0
    pending: bytes = bytes(data)
    if not pending:
        raise CorruptRecordError("empty lz4 payload")
    while pending:
        d = _lz4f.LZ4FrameDecompressor()
        try:
            # A declared content size (0 = none) would size the output buffer: check it first.
            if _lz4f.get_frame_info(pending)["content_size"] > max_size - total:
                raise _too_large("lz4", max_size)
            out = bytes(d.decompress(pending, max_length=max_size - total + 1))
        except RuntimeError as e:
            raise CorruptRecordError(f"invalid lz4 frame: {e}") from None
        total += len(out)
        if total > max_size:
            raise _too_large("lz4", max_size)
        if not d.eof:
            raise CorruptRecordError("truncated lz4 frame")
        chunks.append(out)
        pending = bytes(d.unused_data or b"")
    return b"".join(chunks)


# zstd --------------------------------------------------------------------------------------

_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_SKIPPABLE_MIN = 0x184D2A50
_ZSTD_SKIPPABLE_MAX = 0x184D2A5F
_U32LE = struct.Struct("<I")
_ZSTD_DICT_ID_SIZE = (0, 1, 2, 4)
_ZSTD_FCS_SIZE = (0, 2, 4, 8)
_ZSTD_READ_CHUNK = 256 * 1024
_ZSTD_UNKNOWN = -1


def zstd_compress(data: Buffer, level: int = 3) -> bytes:
    """One zstd frame (with its content size); level 3 is zstd's and Kafka's default."""
    return bytes(_zstd.ZstdCompressor(level=level).compress(data))


def _zstd_walk(view: memoryview) -> tuple[int, int, int]:
    """Check that ``view`` is whole zstd frames; return (data frames, skippable frames, size).

    The walk reads only frame and block headers (a block holds up to 128 KiB), so it is
    cheap; it catches truncation and trailing garbage, which the streaming decoder would
    silently accept. The content size is ``_ZSTD_UNKNOWN`` when a frame does not declare it.
    """
    n = len(view)
    if n == 0:
        raise CorruptRecordError("empty zstd payload")
    pos = 0
    frames = 0
    skippable = 0
    content = 0
    while pos < n:
        if n - pos < 8:
            raise CorruptRecordError("truncated zstd frame header")
        magic = _U32LE.unpack_from(view, pos)[0]
        if _ZSTD_SKIPPABLE_MIN <= magic <= _ZSTD_SKIPPABLE_MAX:
            pos += 8 + _U32LE.unpack_from(view, pos + 4)[0]
            if pos > n:
                raise CorruptRecordError("truncated zstd skippable frame")
            skippable += 1
            continue
        if magic != _ZSTD_MAGIC:
            raise CorruptRecordError("not a zstd frame")
        fhd = view[pos + 4]
        if fhd & 0x08:
            raise CorruptRecordError("zstd frame header has its reserved bit set")
        single_segment = (fhd >> 5) & 1
        fcs_flag = fhd >> 6
        fcs_size = _ZSTD_FCS_SIZE[fcs_flag] or single_segment
        header = 5 + (1 - single_segment) + _ZSTD_DICT_ID_SIZE[fhd & 3] + fcs_size
        if n - pos < header:
            raise CorruptRecordError("truncated zstd frame header")
        if fcs_size and content != _ZSTD_UNKNOWN:
            size = int.from_bytes(view[pos + header - fcs_size : pos + header], "little")
            content += size + 256 if fcs_size == 2 else size
        else:
            content = _ZSTD_UNKNOWN
        pos += header
        while True:  # blocks: 3-byte little-endian header (last, type, size)
            if n - pos < 3:
                raise CorruptRecordError("truncated zstd block header")
            bh = view[pos] | view[pos + 1] << 8 | view[pos + 2] << 16
            btype = (bh >> 1) & 3
            if btype == 3:
                raise CorruptRecordError("zstd block of reserved type")
            pos += 3 + (1 if btype == 1 else bh >> 3)  # an RLE block stores one byte
            if pos > n:
                raise CorruptRecordError("truncated zstd block")
            if bh & 1:
                break
        if fhd & 0x04:  # content checksum
            pos += 4
            if pos > n:
                raise CorruptRecordError("truncated zstd frame checksum")
        frames += 1
    return frames, skippable, content


def zstd_decompress(data: Buffer, max_size: int) -> bytes:
    """Decompress zstd frames (with or without content size), at most ``max_size`` bytes."""
    _check_bound(max_size)
    view = _view(data)
    frames, skippable, content = _zstd_walk(view)
    if content > max_size:
        raise _too_large("zstd", max_size)
    dctx = _zstd.ZstdDecompressor()
    try:
        if frames == 1 and not skippable and content > 0:
            # one frame of known size (<= max_size): one shot, one allocation
            out = dctx.decompress(view, allow_extra_data=False)
            if len(out) != content:
                raise CorruptRecordError("zstd frame size does not match its header")
            return bytes(out)
        reader = dctx.stream_reader(view, read_across_frames=True)
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = reader.read(min(_ZSTD_READ_CHUNK, max_size - total + 1))
            if not chunk:
                break
            total += len(chunk)
            if total > max_size:
                raise _too_large("zstd", max_size)
            chunks.append(chunk)
    except _zstd.ZstdError as e:
        raise CorruptRecordError(f"invalid zstd payload: {e}") from None
    return b"".join(chunks)


# dispatch ----------------------------------------------------------------------------------


def compress(codec: int, data: Buffer, level: int | None = None) -> bytes:
    """Compress a records blob with codec id 0-4 (``level`` where the codec has one)."""
    if codec == Codec.NONE:
        return bytes(data)
    if codec == Codec.GZIP:
        return gzip_compress(data) if level is None else gzip_compress(data, level)
    if codec == Codec.SNAPPY:
        return snappy_compress(data)
    if codec == Codec.LZ4:
        return lz4_compress(data) if level is None else lz4_compress(data, level)
    if codec == Codec.ZSTD:
        return zstd_compress(data) if level is None else zstd_compress(data, level)
    raise UnsupportedCompressionError(f"unknown compression codec id {codec}")


def decompress(codec: int, data: Buffer, max_size: int) -> bytes:
    """Decompress a records blob with codec id 0-4, producing at most ``max_size`` bytes."""
    if codec == Codec.NONE:
        _check_bound(max_size)
        if len(data) > max_size:
            raise _too_large("uncompressed", max_size)
        return bytes(data)
    if codec == Codec.GZIP:
        return gzip_decompress(data, max_size)
    if codec == Codec.SNAPPY:
        return snappy_decompress(data, max_size)
    if codec == Codec.LZ4:
        return lz4_decompress(data, max_size)
    if codec == Codec.ZSTD:
        return zstd_decompress(data, max_size)
    raise UnsupportedCompressionError(f"unknown compression codec id {codec}")
