"""Private helper: the (offset, timestamp) of each record in ONE batch.

Only the timestamp search (ListOffsets by time, KIP-79) needs this, and only for the single
batch that holds the answer; append and read never call it. It decodes just the record prefix
(length, attributes, timestampDelta, offsetDelta; zig-zag varints) and skips the rest of each
record by its length. Compressed batches are inflated first: gzip, snappy (xerial-framed as the
Java client and kafka-python write it, or raw as librdkafka writes it), lz4 frame, zstd.

Kept small and self-contained so it can later be swapped for protocol.records' decoder.
"""

from __future__ import annotations

import gzip
import io

import lz4.frame
import snappy
import zstandard

from protocol.records import RECORD_BATCH_OVERHEAD, TIMESTAMP_TYPE_BIT, parse_header

__all__ = ["record_timestamps", "control_record", "decompress"]

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
