"""Record batch v2 (magic 2): the header view used on the hot paths.

Layout (big-endian), offsets as in Kafka's DefaultRecordBatch:

    0  baseOffset int64          8  batchLength int32       12 partitionLeaderEpoch int32
    16 magic int8               17  crc uint32 (CRC-32C over [21:end))
    21 attributes int16         23  lastOffsetDelta int32   27 baseTimestamp int64
    35 maxTimestamp int64       43  producerId int64        51 producerEpoch int16
    53 baseSequence int32       57  recordsCount int32      61 records...

The produce path parses only this 61-byte header of each batch (one ``struct`` call), checks
the CRC in C, and rewrites baseOffset / partitionLeaderEpoch in place (both lie outside the CRC).
Records themselves are never touched there.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import crc32c as _crc32c

from protocol.primitives import RemoteProtocolError

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
