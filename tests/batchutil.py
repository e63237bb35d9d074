"""Test helper: build v2 record batches (uncompressed or compressed) without the broker code."""

from __future__ import annotations

import gzip
import struct

import crc32c
import lz4.frame
import snappy
import zstandard

from protocol.records import BatchHeader, iter_headers

_HDR = struct.Struct(">qiibIhiqqqhii")


def zigzag(v: int) -> bytes:
    u = (v << 1) ^ (v >> 63)
    out = bytearray()
    while True:
        b = u & 0x7F
        u >>= 7
        if u:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def encode_record(offset_delta: int, ts_delta: int, key: bytes | None, value: bytes | None) -> bytes:
    body = bytearray(b"\x00")
    body += zigzag(ts_delta) + zigzag(offset_delta)
    for part in (key, value):
        if part is None:
            body += zigzag(-1)
        else:
            body += zigzag(len(part)) + part
    body += zigzag(0)  # no headers
    return zigzag(len(body)) + bytes(body)


def compress(codec: int, data: bytes, *, xerial: bool = True) -> bytes:
    if codec == 0:
        return data
    if codec == 1:
        return gzip.compress(data)
    if codec == 2:
        if not xerial:
            return bytes(snappy.compress(data))
        out = bytearray(b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1))
        for i in range(0, len(data), 32 * 1024):
            block = snappy.compress(data[i : i + 32 * 1024])
            out += struct.pack(">i", len(block)) + block
        return bytes(out)
    if codec == 3:
        return bytes(lz4.frame.compress(data))
    if codec == 4:
        return bytes(zstandard.ZstdCompressor().compress(data))
    raise ValueError(codec)


def build_batch(
    timestamps: list[int] | int,
    *,
    base_offset: int = 0,
    value_size: int = 10,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
    compression: int = 0,
    xerial: bool = True,
    leader_epoch: int = -1,
    records: list[tuple[bytes | None, bytes | None]] | None = None,
) -> bytearray:
    """A batch with one record per timestamp (an int n means n records at timestamp 1000)."""
    ts_list = [1000] * timestamps if isinstance(timestamps, int) else list(timestamps)
    n = len(ts_list)
    base_ts = ts_list[0] if ts_list else -1
    max_ts = max(ts_list) if ts_list else -1
    body = bytearray()
    for i, ts in enumerate(ts_list):
        if records is not None:
            key, value = records[i]
        else:
            key, value = None, bytes([i % 251]) * value_size
        body += encode_record(i, ts - base_ts, key, value)
    payload = compress(compression, bytes(body), xerial=xerial)
    attrs = compression | (0x10 if transactional else 0) | (0x20 if control else 0)
    length = 61 - 12 + len(payload)
    hdr = bytearray(
        _HDR.pack(
            base_offset,
            length,
            leader_epoch,
            2,
            0,
            attrs,
            n - 1,
            base_ts,
            max_ts,
            producer_id,
            producer_epoch,
            base_sequence,
            n,
        )
    )
    buf = hdr + payload
    struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[21:])))
    return buf


def control_batch(
    *, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int = 0, ts: int = 1000
) -> bytearray:
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, coordinator_epoch)
    return build_batch(
        [ts],
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
        records=[(key, value)],
    )


def headers(buf: bytes | bytearray) -> list[tuple[int, BatchHeader]]:
    return iter_headers(buf)


def split_batches(data: bytes) -> list[bytes]:
    return [bytes(data[p : p + h.size]) for p, h in iter_headers(data)]
