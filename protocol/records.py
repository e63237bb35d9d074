"""Record batch v2 (magic 2): the header view used on the hot paths.

Layout (big-endian), offsets as in Kafka's DefaultRecordBatch:

    0  baseOffset int64          8  batchLength int32       12 partitionLeaderEpoch int32
    16 magic int8               17  crc uint32 (CRC-32C over [21:end))
    21 attributes int16         23  lastOffsetDelta int32   27 baseTimestamp int64
    35 maxTimestamp int64       43  producerId int64        51 producerEpoch int16
    53 baseSequence int32       57  recordsCount int32      61 records...

The produce path parses only this 61-byte header of each batch (one ``struct`` call), checks
the CRC in C, and rewrites baseOffset / partitionLeaderEpoch in place (both lie outside the CRC).
Records themselves are never touched there: :func:`validate_batches` is that path's check.

Below the header view are the record-level tools used off the hot path (compaction, strict
validation, control markers, tests): :func:`decode_batch_records` and :func:`build_batch`.
A record (``DefaultRecord.java``) is::

    length varint            bytes after this field
    attributes int8          unused, 0
    timestampDelta varlong   relative to baseTimestamp
    offsetDelta varint       relative to baseOffset
    keyLength varint, key    -1 = null
    valueLength varint, value
    headersCount varint, then per header: keyLength varint + UTF-8 key (never null),
                                          valueLength varint + value (-1 = null)

Record varints are zig-zag signed protobuf varints (``ByteUtils.writeVarint``/``writeVarlong``),
not the unsigned varints of flexible message encoding in :mod:`protocol.primitives`.

Errors are :class:`RecordError` subclasses (``KafkaError``) carrying the error code of a
produce response: CORRUPT_MESSAGE for bad CRC / framing / compressed payloads, INVALID_RECORD
where Kafka's ``InvalidRecordException`` applies (record structure, produce rules),
MESSAGE_TOO_LARGE, UNSUPPORTED_COMPRESSION_TYPE. They answer one partition; they do not close
the connection. (``parse_header`` keeps raising ``RemoteProtocolError`` on a short buffer.)
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from enum import IntEnum
from typing import Literal, NamedTuple

import crc32c as _crc32c

from protocol.compression import (
    Codec,
    CorruptRecordError,
    RecordError,
    RecordTooLargeError,
    UnsupportedCompressionError,
    compress,
    decompress,
)
from protocol.errors import ErrorCode
from protocol.primitives import RemoteProtocolError

__all__ = [
    # header view (hot path)
    "RECORD_BATCH_OVERHEAD",
    "LOG_OVERHEAD",
    "MAGIC_V2",
    "HEADER",
    "OFF_BASE_OFFSET",
    "OFF_LENGTH",
    "OFF_LEADER_EPOCH",
    "OFF_MAGIC",
    "OFF_CRC",
    "OFF_ATTRIBUTES",
    "OFF_MAX_TIMESTAMP",
    "COMPRESSION_MASK",
    "TIMESTAMP_TYPE_BIT",
    "TRANSACTIONAL_BIT",
    "CONTROL_BIT",
    "DELETE_HORIZON_BIT",
    "NO_PRODUCER_ID",
    "NO_PRODUCER_EPOCH",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "BatchHeader",
    "parse_header",
    "crc_ok",
    "compute_crc",
    "set_base_offset",
    "set_leader_epoch",
    "set_max_timestamp_log_append",
    "iter_headers",
    "validate_batches",
    # errors
    "RecordError",
    "CorruptRecordError",
    "InvalidRecordError",
    "RecordTooLargeError",
    "UnsupportedCompressionError",
    # record level
    "Codec",
    "Record",
    "SimpleRecord",
    "decode_batch_records",
    "build_batch",
    "ControlType",
    "build_control_batch",
    "parse_control_record",
    "encode_control_key",
    "write_varint",
    "write_varlong",
    "encode_varint",
    "encode_varlong",
    "decode_varint",
    "decode_varlong",
    "varint_size",
    "varlong_size",
    "DEFAULT_MAX_UNCOMPRESSED_BYTES",
]

RECORD_BATCH_OVERHEAD = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength
MAGIC_V2 = 2

HEADER = struct.Struct(">qiibIhiqqqhii")
_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_QQ = struct.Struct(">q")

OFF_BASE_OFFSET = 0
OFF_LENGTH = 8
OFF_LEADER_EPOCH = 12
OFF_MAGIC = 16
OFF_CRC = 17
OFF_ATTRIBUTES = 21
OFF_MAX_TIMESTAMP = 35

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
DELETE_HORIZON_BIT = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_BIT)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Parse the header of the batch at ``pos``; raises RemoteProtocolError if short."""
    if len(buf) - pos < RECORD_BATCH_OVERHEAD:
        raise RemoteProtocolError("record batch shorter than its header")
    return BatchHeader._make(HEADER.unpack_from(buf, pos))


def crc_ok(buf: bytes | bytearray | memoryview, pos: int, size: int) -> bool:
    """True when the stored CRC-32C matches bytes [pos+21, pos+size)."""
    stored = struct.unpack_from(">I", buf, pos + OFF_CRC)[0]
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    return bool(_crc32c.crc32c(view[pos + OFF_ATTRIBUTES : pos + size]) == stored)


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    return int(_crc32c.crc32c(view[pos + OFF_ATTRIBUTES : pos + size]))


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    _Q.pack_into(buf, pos + OFF_BASE_OFFSET, base_offset)


def set_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    _I.pack_into(buf, pos + OFF_LEADER_EPOCH, epoch)


def set_max_timestamp_log_append(buf: bytearray | memoryview, pos: int, size: int, ts: int) -> None:
    """Switch a batch to LogAppendTime with ``ts`` and fix its CRC (header-only change)."""
    attrs = struct.unpack_from(">h", buf, pos + OFF_ATTRIBUTES)[0]
    struct.pack_into(">h", buf, pos + OFF_ATTRIBUTES, attrs | TIMESTAMP_TYPE_BIT)
    _QQ.pack_into(buf, pos + OFF_MAX_TIMESTAMP, ts)
    struct.pack_into(">I", buf, pos + OFF_CRC, compute_crc(buf, pos, size))


def iter_headers(
    buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None
) -> list[tuple[int, BatchHeader]]:
    """(position, header) of each complete batch in buf[pos:end]. Stops at a partial batch."""
    out: list[tuple[int, BatchHeader]] = []
    end = len(buf) if end is None else end
    while end - pos >= RECORD_BATCH_OVERHEAD:
        h = BatchHeader._make(HEADER.unpack_from(buf, pos))
        if h.batch_length < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD or pos + h.size > end:
            break
        out.append((pos, h))
        pos += h.size
    return out


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------


class InvalidRecordError(RecordError):
    """Where Kafka raises ``InvalidRecordException``: bad record structure, produce rules."""

    default_code = ErrorCode.INVALID_RECORD


# ---------------------------------------------------------------------------------------------
# Produce-path validation: headers only, one loop step per batch
# ---------------------------------------------------------------------------------------------

_I8 = struct.Struct(">b")
_U32 = struct.Struct(">I")
# Kafka's ByteBufferLogInputStream refuses a batchLength below the legacy v0 record overhead
# (LegacyRecord.RECORD_OVERHEAD_V0) before it even reads the magic byte.
_MIN_BATCH_LENGTH = 14
_HEADER_UP_TO_MAGIC = OFF_MAGIC + 1


def validate_batches(
    buf: bytes | bytearray | memoryview,
    *,
    from_client: bool = True,
    produce_version: int | None = None,
    max_message_bytes: int | None = None,
) -> list[tuple[int, BatchHeader]]:
    """Check the batches of a produce ``records`` field; return (position, header) of each.

    Reads only the 61-byte headers and CRCs, never the records. The checks and their error
    codes follow Kafka (``ProduceRequest.validateRecords``, ``UnifiedLog
    .analyzeAndValidateRecords``, ``LogValidator.validateBatch``), in Kafka's order:

    * batchLength < 14, or a magic byte outside 0..2: CORRUPT_MESSAGE.
    * no complete batch, magic 0/1, more than one batch (client): INVALID_RECORD.
    * zstd with ``produce_version`` < 7: UNSUPPORTED_COMPRESSION_TYPE.
    * baseOffset != 0 (client): INVALID_RECORD.
    * batch larger than ``max_message_bytes``: MESSAGE_TOO_LARGE.
    * batch shorter than its 61-byte header, or a CRC-32C mismatch: CORRUPT_MESSAGE.
    * codec id 5-7: UNSUPPORTED_COMPRESSION_TYPE (Kafka fails with an unknown server error).
    * client only: lastOffsetDelta < 0, recordsCount <= 0, recordsCount != lastOffsetDelta + 1,
      a control batch, or a producer id without a base sequence: INVALID_RECORD.

    Like Kafka, bytes after the last complete batch (a partial batch) are ignored: append only
    ``buf[:pos + header.size]`` of the last returned entry. ``from_client=False`` (replication,
    recovery) allows several batches and no batch at all, and skips the client-only rules.
    """
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    spans = _frame_batches(view)
    if from_client:
        _check_produce_request(view, spans, produce_version)
    out: list[tuple[int, BatchHeader]] = []
    unpack = HEADER.unpack_from
    crc = _crc32c.crc32c
    for pos, size, magic in spans:
        if magic != MAGIC_V2:
            raise InvalidRecordError(f"record batch with magic {magic}; only magic 2 is supported")
        if from_client:
            base_offset = _Q.unpack_from(view, pos)[0]
            if base_offset != 0:
                raise InvalidRecordError(
                    f"the baseOffset of a produced record batch must be 0, not {base_offset}"
                )
        if max_message_bytes is not None and size > max_message_bytes:
            raise RecordTooLargeError(
                f"record batch of {size} bytes exceeds the maximum of {max_message_bytes}"
            )
        if size < RECORD_BATCH_OVERHEAD:
            raise CorruptRecordError(
                f"record batch of {size} bytes is smaller than its {RECORD_BATCH_OVERHEAD}-byte header"
            )
        h = BatchHeader._make(unpack(view, pos))
        if crc(view[pos + OFF_ATTRIBUTES : pos + size]) != h.crc:
            raise CorruptRecordError(f"record batch CRC mismatch (stored crc {h.crc})")
        if h.attributes & COMPRESSION_MASK > Codec.ZSTD:
            raise UnsupportedCompressionError(
                f"unknown compression codec id {h.attributes & COMPRESSION_MASK}"
            )
        if from_client:
            _check_produced_batch(h)
        elif h.last_offset_delta < 0 or h.records_count < 0:
            raise InvalidRecordError(
                f"invalid lastOffsetDelta {h.last_offset_delta} / recordsCount {h.records_count}"
            )
        out.append((pos, h))
    return out


def _frame_batches(view: memoryview) -> list[tuple[int, int, int]]:
    """(position, size, magic) of each complete batch: lengths and magic bytes only."""
    n = len(view)
    spans: list[tuple[int, int, int]] = []
    pos = 0
    while n - pos >= LOG_OVERHEAD:
        length = _I.unpack_from(view, pos + OFF_LENGTH)[0]
        if length < _MIN_BATCH_LENGTH:
            raise CorruptRecordError(
                f"record batch length {length} is below the minimum of {_MIN_BATCH_LENGTH}"
            )
        if n - pos < _HEADER_UP_TO_MAGIC:
            break
        magic = _I8.unpack_from(view, pos + OFF_MAGIC)[0]
        if magic < 0 or magic > MAGIC_V2:
            raise CorruptRecordError(f"invalid magic {magic} in record batch")
        size = length + LOG_OVERHEAD
        if n - pos < size:
            break
        spans.append((pos, size, magic))
        pos += size
    return spans


def _check_produce_request(view: memoryview, spans: list[tuple[int, int, int]],
                           produce_version: int | None) -> None:
    """A client's records: exactly one batch, of magic 2, zstd only from Produce v7 on."""
    if not spans:
        raise InvalidRecordError("produce requests must have at least one record batch")
    first, first_size, first_magic = spans[0]
    if first_magic != MAGIC_V2:
        raise InvalidRecordError(
            "produce requests are only allowed to contain record batches with magic 2"
        )
    if (
        produce_version is not None
        and produce_version < 7
        and first_size > OFF_ATTRIBUTES + 1
        and view[first + OFF_ATTRIBUTES + 1] & COMPRESSION_MASK == Codec.ZSTD
    ):
        raise UnsupportedCompressionError(
            f"produce requests with version {produce_version} may not use zstd"
        )
    if len(spans) > 1:
        raise InvalidRecordError(
            "produce requests are only allowed to contain exactly one record batch"
        )


def _check_produced_batch(h: BatchHeader) -> None:
    """The header rules for a client's batch (Kafka's ``LogValidator.validateBatch``)."""
    count = h.records_count
    if h.last_offset_delta < 0:
        raise InvalidRecordError(f"invalid lastOffsetDelta {h.last_offset_delta}")
    if count <= 0:
        raise InvalidRecordError(f"invalid recordsCount {count}")
    if count != h.last_offset_delta + 1:
        raise InvalidRecordError(
            f"recordsCount {count} does not match lastOffsetDelta {h.last_offset_delta}"
        )
    if h.attributes & CONTROL_BIT:
        raise InvalidRecordError("clients may not write control batches")
    if h.producer_id >= 0 and h.base_sequence < 0:
        raise InvalidRecordError(
            f"invalid base sequence {h.base_sequence} with producer id {h.producer_id}"
        )


# ---------------------------------------------------------------------------------------------
# Zig-zag varints (record level)
# ---------------------------------------------------------------------------------------------

_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1


def _put_uvarint(out: bytearray, z: int) -> None:
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)


def write_varint(out: bytearray, value: int) -> None:
    """Append an int32 as a zig-zag varint (1-5 bytes)."""
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise ValueError(f"varint out of int32 range: {value}")
    _put_uvarint(out, (value << 1) ^ (value >> 31))


def write_varlong(out: bytearray, value: int) -> None:
    """Append an int64 as a zig-zag varlong (1-10 bytes)."""
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"varlong out of int64 range: {value}")
    _put_uvarint(out, (value << 1) ^ (value >> 63))


def encode_varint(value: int) -> bytes:
    out = bytearray()
    write_varint(out, value)
    return bytes(out)


def encode_varlong(value: int) -> bytes:
    out = bytearray()
    write_varlong(out, value)
    return bytes(out)


def _uvarint_size(z: int) -> int:
    return max(1, (z.bit_length() + 6) // 7)


def varint_size(value: int) -> int:
    """Encoded size of an int32 zig-zag varint."""
    return _uvarint_size((value << 1) ^ (value >> 31))


def varlong_size(value: int) -> int:
    """Encoded size of an int64 zig-zag varlong."""
    return _uvarint_size((value << 1) ^ (value >> 63))


def _read_zigzag(
    buf: bytes | bytearray | memoryview, pos: int, end: int, max_bytes: int
) -> tuple[int, int]:
    """(value, next position) of the zig-zag varint at ``pos``; at most ``max_bytes`` bytes."""
    if pos >= end:
        raise InvalidRecordError("truncated varint")
    b = buf[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    z = b & 0x7F
    shift = 7
    limit = min(end, pos + max_bytes)
    pos += 1
    while True:
        if pos >= limit:
            raise InvalidRecordError("truncated varint" if limit == end else "varint too long")
        b = buf[pos]
        pos += 1
        z |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
    if z >> (32 if max_bytes == 5 else 64):
        raise InvalidRecordError("varint out of range")
    return (z >> 1) ^ -(z & 1), pos


def decode_varint(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """(int32 value, next position) of the zig-zag varint at ``pos``."""
    return _read_zigzag(buf, pos, len(buf), 5)


def decode_varlong(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """(int64 value, next position) of the zig-zag varlong at ``pos``."""
    return _read_zigzag(buf, pos, len(buf), 10)


# ---------------------------------------------------------------------------------------------
# Records: decode and build
# ---------------------------------------------------------------------------------------------

DEFAULT_MAX_UNCOMPRESSED_BYTES = 64 * 1024 * 1024
_MIN_RECORD_SIZE = 7  # length varint + attributes + 5 one-byte varints


class Record(NamedTuple):
    """One decoded record with its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    attributes: int = 0


class SimpleRecord(NamedTuple):
    """Input to :func:`build_batch`. ``timestamp`` None = -1 (none); ``offset_delta`` None =
    the previous record's delta + 1 (0 for the first)."""

    key: bytes | None = None
    value: bytes | None = None
    headers: Sequence[tuple[str, bytes | None]] = ()
    timestamp: int | None = None
    offset_delta: int | None = None


def _check_magic(magic: int) -> None:
    if magic != MAGIC_V2:
        if 0 <= magic < MAGIC_V2:
            raise InvalidRecordError(f"record batch with magic {magic}; only magic 2 is supported")
        raise CorruptRecordError(f"invalid magic {magic} in record batch")


def _parse_records(
    data: bytes, count: int, base_offset: int, base_timestamp: int, log_append_time: int | None
) -> list[Record]:
    if count < 0:
        raise InvalidRecordError(f"invalid recordsCount {count}")
    end = len(data)
    if count * _MIN_RECORD_SIZE > end:
        raise InvalidRecordError(f"{end} bytes cannot hold {count} records")
    read = _read_zigzag
    out: list[Record] = []
    append = out.append
    pos = 0
    for _ in range(count):
        length, pos = read(data, pos, end, 5)
        if length < _MIN_RECORD_SIZE - 1 or length > end - pos:
            raise InvalidRecordError(f"invalid record length {length}")
        rend = pos + length
        attributes = data[pos]
        if attributes > 127:
            attributes -= 256
        ts_delta, pos = read(data, pos + 1, rend, 10)
        offset_delta, pos = read(data, pos, rend, 5)
        n, pos = read(data, pos, rend, 5)
        if n < 0:
            if n != -1:
                raise InvalidRecordError(f"invalid key length {n}")
            key = None
        elif n > rend - pos:
            raise InvalidRecordError(f"key length {n} exceeds the record")
        else:
            key = data[pos : pos + n]
            pos += n
        n, pos = read(data, pos, rend, 5)
        if n < 0:
            if n != -1:
                raise InvalidRecordError(f"invalid value length {n}")
            value = None
        elif n > rend - pos:
            raise InvalidRecordError(f"value length {n} exceeds the record")
        else:
            value = data[pos : pos + n]
            pos += n
        n, pos = read(data, pos, rend, 5)
        if n < 0 or 2 * n > rend - pos:
            raise InvalidRecordError(f"invalid number of record headers {n}")
        headers: list[tuple[str, bytes | None]] = []
        if n:
            pos = _read_headers(data, pos, rend, n, headers)
        if pos != rend:
            raise InvalidRecordError(
                f"invalid record size: expected {length} bytes, read {length - (rend - pos)}"
            )
        append(
            Record(
                base_offset + offset_delta,
                base_timestamp + ts_delta if log_append_time is None else log_append_time,
                key,
                value,
                headers,
                attributes,
            )
        )
    if pos != end:
        raise InvalidRecordError(f"{end - pos} bytes left after the declared {count} records")
    return out


def _read_headers(data: bytes, pos: int, rend: int, n: int,
                  headers: list[tuple[str, bytes | None]]) -> int:
    """``n`` record headers from ``pos`` appended to ``headers``; returns the end position."""
    read = _read_zigzag
    for _ in range(n):
        hk, pos = read(data, pos, rend, 5)
        if hk < 0 or hk > rend - pos:
            raise InvalidRecordError(f"invalid header key length {hk}")
        try:
            hkey = data[pos : pos + hk].decode()
        except UnicodeDecodeError:
            raise InvalidRecordError("header key is not valid UTF-8") from None
        hv, pos = read(data, pos + hk, rend, 5)
        if hv < 0:
            if hv != -1:
                raise InvalidRecordError(f"invalid header value length {hv}")
            headers.append((hkey, None))
        elif hv > rend - pos:
            raise InvalidRecordError(f"header value length {hv} exceeds the record")
        else:
            headers.append((hkey, data[pos : pos + hv]))
            pos += hv
    return pos


def decode_batch_records(
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    max_uncompressed: int = DEFAULT_MAX_UNCOMPRESSED_BYTES,
    *,
    check_crc: bool = True,
) -> tuple[BatchHeader, list[Record]]:
    """Decode the batch at ``pos`` with all its records (decompressing as needed).

    Record framing is checked strictly: every length within its record, each record's
    length exactly consumed, exactly ``recordsCount`` records and no bytes after them.
    With LogAppendTime every record's timestamp is the batch's maxTimestamp (as in Kafka).
    Raises :class:`CorruptRecordError` (header, CRC, payload), :class:`InvalidRecordError`
    (records), :class:`RecordTooLargeError` (more than ``max_uncompressed`` bytes of records)
    or :class:`UnsupportedCompressionError`.
    """
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    if pos < 0 or len(view) - pos < RECORD_BATCH_OVERHEAD:
        raise CorruptRecordError("record batch shorter than its header")
    h = BatchHeader._make(HEADER.unpack_from(view, pos))
    _check_magic(h.magic)
    if h.batch_length < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
        raise CorruptRecordError(f"invalid batchLength {h.batch_length}")
    end = pos + h.size
    if end > len(view):
        raise CorruptRecordError(
            f"record batch of {h.size} bytes truncated to {len(view) - pos} bytes"
        )
    if check_crc and _crc32c.crc32c(view[pos + OFF_ATTRIBUTES : end]) != h.crc:
        raise CorruptRecordError(f"record batch CRC mismatch (stored crc {h.crc})")
    data = decompress(
        h.attributes & COMPRESSION_MASK, view[pos + RECORD_BATCH_OVERHEAD : end], max_uncompressed
    )
    log_append_time = h.max_timestamp if h.attributes & TIMESTAMP_TYPE_BIT else None
    records = _parse_records(
        data, h.records_count, h.base_offset, h.base_timestamp, log_append_time
    )
    return h, records


def _put_bytes(out: bytearray, b: bytes | bytearray | memoryview | None) -> None:
    if b is None:
        out.append(1)  # zig-zag(-1)
    else:
        _put_uvarint(out, len(b) << 1)
        out += b


def build_batch(
    records: Iterable[SimpleRecord],
    *,
    base_offset: int = 0,
    compression: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    timestamp_type: int = 0,
    partition_leader_epoch: int = -1,
    base_timestamp: int | None = None,
    max_timestamp: int | None = None,
    last_offset_delta: int | None = None,
    compression_level: int | None = None,
) -> bytes:
    """Encode a v2 batch with its CRC-32C.

    As Kafka's ``MemoryRecordsBuilder``: baseTimestamp defaults to the first record's
    timestamp, maxTimestamp to the largest record timestamp (pass the append time for
    ``timestamp_type=1``), lastOffsetDelta to the last record's offset delta. Offset deltas
    must increase. An empty batch (what compaction leaves) gets lastOffsetDelta 0 unless given.
    """
    recs = list(records)
    if timestamp_type not in (0, 1):
        raise ValueError("timestamp_type must be 0 (CreateTime) or 1 (LogAppendTime)")
    if base_timestamp is None:
        first = recs[0].timestamp if recs else None
        base_timestamp = NO_TIMESTAMP if first is None else first
    body, max_ts, prev = _encode_records(recs, base_timestamp)
    if last_offset_delta is None:
        last_offset_delta = max(prev, 0)
    elif last_offset_delta < prev:
        raise ValueError(f"last_offset_delta {last_offset_delta} is below a record's delta {prev}")
    attributes = compression & COMPRESSION_MASK
    if compression != attributes:
        raise ValueError(f"invalid compression codec id {compression}")
    attributes |= (TIMESTAMP_TYPE_BIT if timestamp_type else 0) \
        | (TRANSACTIONAL_BIT if is_transactional else 0) | (CONTROL_BIT if is_control else 0)
    payload = body if compression == Codec.NONE else compress(compression, body, compression_level)
    out = bytearray(
        HEADER.pack(
            base_offset,
            RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(payload),
            partition_leader_epoch,
            MAGIC_V2,
            0,
            attributes,
            last_offset_delta,
            base_timestamp,
            max_ts if max_timestamp is None else max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            len(recs),
        )
    )
    out += payload
    _U32.pack_into(out, OFF_CRC, _crc32c.crc32c(memoryview(out)[OFF_ATTRIBUTES:]))
    return bytes(out)


def _encode_records(recs: list[SimpleRecord], base_timestamp: int) -> tuple[bytearray, int, int]:
    """The records of a batch, encoded: (bytes, largest timestamp, last offset delta)."""
    body = bytearray()
    rec = bytearray()
    max_ts = NO_TIMESTAMP
    prev = -1
    for key, value, headers, ts, delta in recs:
        if delta is None:
            delta = prev + 1
        elif delta <= prev:
            raise ValueError(f"offset delta {delta} does not increase (previous {prev})")
        if ts is None:
            ts = NO_TIMESTAMP
        if ts > max_ts:
            max_ts = ts
        rec.clear()
        rec.append(0)  # attributes
        write_varlong(rec, ts - base_timestamp)
        write_varint(rec, delta)
        _put_bytes(rec, key)
        _put_bytes(rec, value)
        _put_uvarint(rec, len(headers) << 1)
        for hkey, hvalue in headers:
            _put_bytes(rec, hkey.encode())
            _put_bytes(rec, hvalue)
        write_varint(body, len(rec))
        body += rec
        prev = delta
    return body, max_ts, prev


# ---------------------------------------------------------------------------------------------
# Control records
# ---------------------------------------------------------------------------------------------


class ControlType(IntEnum):
    """Control record types (``ControlRecordType.java``); unknown types are ignored."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


_CONTROL_KEY = struct.Struct(">hh")  # version (0), type
_END_TXN_MARKER = struct.Struct(">hi")  # version (0), coordinator epoch


def encode_control_key(control_type: int, version: int = 0) -> bytes:
    """The key of a control record: int16 version, int16 type."""
    return _CONTROL_KEY.pack(version, control_type)


def build_control_batch(
    kind: ControlType | int | Literal["ABORT", "COMMIT"],
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    base_offset: int = 0,
    timestamp: int = NO_TIMESTAMP,
    *,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A transaction marker batch (what WriteTxnMarkers appends): one control record.

    Key = (version 0, type 0 ABORT / 1 COMMIT); value = (version 0, coordinator epoch); the
    batch is transactional and control, carries the producer id/epoch and no sequence.
    Pass the coordinator's time as ``timestamp``.
    """
    if isinstance(kind, str):
        kind = ControlType[kind.upper()]
    if kind not in (ControlType.ABORT, ControlType.COMMIT):
        raise ValueError(f"transaction markers are ABORT or COMMIT, not {kind!r}")
    record = SimpleRecord(
        encode_control_key(kind), _END_TXN_MARKER.pack(0, coordinator_epoch), (), timestamp
    )
    return build_batch(
        [record],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )


def parse_control_record(record: Record) -> tuple[int, int | None]:
    """(control type, coordinator epoch) of a control record; the epoch only for markers.

    Known types come back as :class:`ControlType`; an unknown type as its number (callers
    ignore those, as Kafka does). Newer key/value versions are read as version 0.
    """
    key = record.key
    if key is None or len(key) < _CONTROL_KEY.size:
        raise InvalidRecordError("control record key shorter than 4 bytes")
    version, ctype = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise InvalidRecordError(f"invalid control record key version {version}")
    if ctype not in (ControlType.ABORT, ControlType.COMMIT):
        known = ControlType.LEADER_CHANGE <= ctype <= ControlType.KRAFT_VOTERS
        return (ControlType(ctype) if known else ctype), None
    value = record.value
    if value is None or len(value) < _END_TXN_MARKER.size:
        raise InvalidRecordError("transaction marker value shorter than 6 bytes")
    version, coordinator_epoch = _END_TXN_MARKER.unpack_from(value)
    if version < 0:
        raise InvalidRecordError(f"invalid transaction marker version {version}")
    return ControlType(ctype), coordinator_epoch
