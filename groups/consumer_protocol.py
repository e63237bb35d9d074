"""The embedded consumer protocol (``ConsumerProtocolSubscription`` / ``Assignment``): only
what the coordinator must read itself (subscribed topics, for OffsetDelete and offsets
retention; assignments for the classic->describe path). Malformed bytes give empty results,
never an exception: the bytes are the clients' business."""

from __future__ import annotations

import struct

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def _string(buf: bytes, pos: int) -> tuple[str, int]:
    (n,) = _I16.unpack_from(buf, pos)
    pos += 2
    if n < 0 or pos + n > len(buf):
        raise ValueError("bad string")
    return buf[pos : pos + n].decode(), pos + n


def subscribed_topics(metadata: bytes) -> set[str] | None:
    """Topics of a ConsumerProtocolSubscription (any version), None when unreadable."""
    try:
        pos = 2  # version
        (n,) = _I32.unpack_from(metadata, pos)
        pos += 4
        if n < 0 or n > len(metadata):
            return None
        out = set()
        for _ in range(n):
            t, pos = _string(metadata, pos)
            out.add(t)
        return out
    except (struct.error, ValueError, UnicodeDecodeError):
        return None


def encode_subscription(topics: list[str], user_data: bytes | None = None) -> bytes:
    b = _I16.pack(0) + _I32.pack(len(topics))
    for t in topics:
        e = t.encode()
        b += _I16.pack(len(e)) + e
    if user_data is None:
        return b + _I32.pack(-1)
    return b + _I32.pack(len(user_data)) + user_data


def encode_assignment(partitions: dict[str, list[int]]) -> bytes:
    b = _I16.pack(0) + _I32.pack(len(partitions))
    for t, ps in sorted(partitions.items()):
        e = t.encode()
        b += _I16.pack(len(e)) + e + _I32.pack(len(ps)) + b"".join(_I32.pack(p) for p in ps)
    return b + _I32.pack(-1)


def assigned_partitions(assignment: bytes) -> dict[str, list[int]] | None:
    try:
        pos = 2
        (n,) = _I32.unpack_from(assignment, pos)
        pos += 4
        if n < 0 or n > len(assignment):
            return None
        out: dict[str, list[int]] = {}
        for _ in range(n):
            t, pos = _string(assignment, pos)
            (m,) = _I32.unpack_from(assignment, pos)
            pos += 4
            if m < 0 or pos + 4 * m > len(assignment):
                return None
            out[t] = list(struct.unpack_from(f">{m}i", assignment, pos))
            pos += 4 * m
        return out
    except (struct.error, ValueError, UnicodeDecodeError):
        return None
