"""Private helpers that look inside ONE batch's records, off the hot paths.

* ``record_timestamps``: (offset, timestamp) of each record, for the timestamp search
  (ListOffsets by time, KIP-79), only for the single batch that holds the answer.
* ``scan_records``: where each record sits in the (inflated) records section, its offset and
  timestamp deltas, key and whether it has a value. The log cleaner decides per record from
  this and copies the retained records' bytes as they are (re-encoding only the timestamp
  delta when a delete horizon becomes the batch's base timestamp), so a cleaned batch needs
  no full decode / re-encode of keys, values and headers.
* ``keyless_records``: indexes of the records without a key (compacted topics refuse them).

They decode just the record prefix (length, attributes, timestampDelta, offsetDelta, key
length, value length; zig-zag varints) and skip the rest of each record by its length.
Compressed batches are inflated first: gzip, snappy (xerial-framed as the Java client and
kafka-python write it, or raw as librdkafka writes it), lz4 frame, zstd.
"""

from __future__ import annotations

import gzip
import io
from typing import NamedTuple

import lz4.frame
import snappy
import zstandard

from protocol.compression import decompress as bounded_decompress
from protocol.records import RECORD_BATCH_OVERHEAD, TIMESTAMP_TYPE_BIT, parse_header

__all__ = [
    "record_timestamps",
    "control_record",
    "decompress",
    "RecordInfo",
    "scan_records",
    "keyless_records",
    "batch_records_section",
]

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = 16  # magic (8) + version int32 + compatible version int32


def _snappy(data: bytes) -> bytes:
    if data[:8] == _XERIAL_MAGIC:
        out = bytearray()
        pos = _XERIAL_HEADER
        while pos + 4 <= len(data):
            n = int.from_bytes(data[pos : pos + 4], "big")
            pos += 4
            if n < 0 or pos + n > len(data):
                raise ValueError("truncated xerial snappy block")
            out += snappy.decompress(data[pos : pos + n])
            pos += n
        return bytes(out)
    return bytes(snappy.decompress(data))


def _zstd(data: bytes) -> bytes:
    reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True)
    return bytes(reader.read())


def decompress(codec: int, data: bytes) -> bytes:
    """Inflate a batch's records section for compression ``codec`` (attributes & 7)."""
    if codec == 0:
        return data
    if codec == 1:
        return gzip.decompress(data)
    if codec == 2:
        return _snappy(data)
    if codec == 3:
        return bytes(lz4.frame.decompress(data))
    if codec == 4:
        return _zstd(data)
    raise ValueError(f"unknown compression codec {codec}")


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A zig-zag (signed) varint at ``pos``: (value, next position)."""
    b = buf[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    b2 = buf[pos + 1]
    if b2 < 0x80:  # two bytes: record and value lengths up to 8 KiB
        raw = (b & 0x7F) | (b2 << 7)
        return (raw >> 1) ^ -(raw & 1), pos + 2
    shift = 0
    raw = 0
    while True:
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def record_timestamps(batch: bytes) -> list[tuple[int, int]]:
    """(offset, timestamp) of every record of the v2 batch in ``batch`` (the whole batch).

    With LogAppendTime every record's timestamp is the batch's maxTimestamp. Raises ValueError
    (or IndexError) on malformed input.
    """
    h = parse_header(batch)
    data = decompress(h.attributes & 0x07, bytes(batch[RECORD_BATCH_OVERHEAD : h.batch_length + 12]))
    log_append = bool(h.attributes & TIMESTAMP_TYPE_BIT)
    out: list[tuple[int, int]] = []
    pos = 0
    for _ in range(h.records_count):
        length, pos = _varint(data, pos)
        end = pos + length
        if length < 0 or end > len(data):
            raise ValueError("record length out of range")
        ts_delta, p = _varint(data, pos + 1)  # skip the attributes byte
        off_delta, _ = _varint(data, p)
        ts = h.max_timestamp if log_append else h.base_timestamp + ts_delta
        out.append((h.base_offset + off_delta, ts))
        pos = end
    return out


def control_record(batch: bytes) -> tuple[int, int] | None:
    """(control type, coordinator epoch) of a control batch's record; None if it has none.

    The key is ``int16 version, int16 type`` (0 ABORT, 1 COMMIT, ...); for end-transaction
    markers the value is ``int16 version, int32 coordinator epoch``; other types give -1.
    """
    h = parse_header(batch)
    if h.records_count < 1:
        return None
    data = decompress(h.attributes & 0x07, bytes(batch[RECORD_BATCH_OVERHEAD : h.batch_length + 12]))
    _, pos = _varint(data, 0)  # record length
    _, pos = _varint(data, pos + 1)  # timestamp delta (after the attributes byte)
    _, pos = _varint(data, pos)  # offset delta
    key_len, pos = _varint(data, pos)
    if key_len < 4:
        raise ValueError("control record key too short")
    ctype = int.from_bytes(data[pos + 2 : pos + 4], "big", signed=True)
    pos += key_len
    value_len, pos = _varint(data, pos)
    coordinator_epoch = -1
    if ctype in (0, 1) and value_len >= 6:
        coordinator_epoch = int.from_bytes(data[pos + 2 : pos + 6], "big", signed=True)
    return ctype, coordinator_epoch


class RecordInfo(NamedTuple):
    """One record of an inflated records section (positions index that section)."""

    start: int  # the record's length varint
    end: int  # just after the record
    ts_end: int  # just after the timestamp delta (the offset delta follows)
    ts_delta: int
    offset_delta: int
    key: bytes | None
    has_value: bool


def scan_records(data: bytes, count: int) -> list[RecordInfo]:
    """The ``count`` records of an inflated records section. Raises ValueError / IndexError on
    malformed input. (One-byte varints, the common case, are decoded inline: this loop is the
    log cleaner's main cost.)"""
    out: list[RecordInfo] = []
    append = out.append
    varint = _varint
    pos = 0
    n = len(data)
    for _ in range(count):
        start = pos
        b = data[pos]
        if b < 0x80:
            length, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            length, pos = varint(data, pos)
        end = pos + length
        if length < 6 or end > n:
            raise ValueError("record length out of range")
        p = pos + 1  # after the attributes byte
        b = data[p]
        if b < 0x80:
            ts_delta, p = (b >> 1) ^ -(b & 1), p + 1
        else:
            ts_delta, p = varint(data, p)
        ts_end = p
        b = data[p]
        if b < 0x80:
            offset_delta, p = (b >> 1) ^ -(b & 1), p + 1
        else:
            offset_delta, p = varint(data, p)
        b = data[p]
        if b < 0x80:
            key_len, p = (b >> 1) ^ -(b & 1), p + 1
        else:
            key_len, p = varint(data, p)
        if key_len >= 0:
            if p + key_len > end:
                raise ValueError("key length out of range")
            key: bytes | None = data[p : p + key_len]
            p += key_len
        elif key_len == -1:
            key = None
        else:
            raise ValueError("invalid key length")
        b = data[p]
        if b < 0x80:
            value_len = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            value_len, p = varint(data, p)
        if value_len < -1 or p + max(value_len, 0) > end:
            raise ValueError("value length out of range")
        append(RecordInfo(start, end, ts_end, ts_delta, offset_delta, key, value_len >= 0))
        pos = end
    if pos != n:
        raise ValueError(f"{n - pos} bytes after the last record")
    return out


def batch_records_section(batch: bytes | bytearray | memoryview, max_size: int) -> bytes:
    """The inflated records section of the v2 batch ``batch`` (at most ``max_size`` bytes,
    else RecordTooLargeError)."""
    h = parse_header(batch)
    return bytes(
        bounded_decompress(
            h.attributes & 0x07, memoryview(batch)[RECORD_BATCH_OVERHEAD : h.batch_length + 12],
            max_size,
        )
    )


def keyless_records(batch: bytes | bytearray | memoryview, max_size: int) -> list[int]:
    """Indexes (within the batch) of the records whose key is null."""
    h = parse_header(batch)
    records = scan_records(batch_records_section(batch, max_size), h.records_count)
    return [i for i, r in enumerate(records) if r.key is None]
