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


def _topic_partitions(buf: bytes, pos: int) -> tuple[dict[str, list[int]], int]:
    """An array of (topic, [partition]) as both embedded schemas write it; ValueError when
    malformed."""
    (n,) = _I32.unpack_from(buf, pos)
    pos += 4
    if n < 0 or n > len(buf):
        raise ValueError("bad count")
    out: dict[str, list[int]] = {}
    for _ in range(n):
        t, pos = _string(buf, pos)
        (m,) = _I32.unpack_from(buf, pos)
        pos += 4
        if m < 0 or pos + 4 * m > len(buf):
            raise ValueError("bad partitions")
        out.setdefault(t, []).extend(struct.unpack_from(f">{m}i", buf, pos))
        pos += 4 * m
    return out, pos


class Subscription:
    """A decoded ConsumerProtocolSubscription (versions 0-3)."""

    __slots__ = ("version", "topics", "user_data", "owned", "generation", "rack_id")

    def __init__(self, version: int, topics: list[str], user_data: bytes | None,
                 owned: dict[str, list[int]], generation: int, rack_id: str | None) -> None:
        self.version = version
        self.topics = topics
        self.user_data = user_data
        self.owned = owned
        self.generation = generation
        self.rack_id = rack_id


def _nullable_bytes(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    (n,) = _I32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        return None, pos
    if pos + n > len(buf):
        raise ValueError("bad bytes")
    return buf[pos : pos + n], pos + n


def parse_subscription(metadata: bytes) -> Subscription | None:
    """Every field of a ConsumerProtocolSubscription (v1 owned partitions, v2 generation, v3
    rack id); fields a version lacks take their defaults. None when malformed (Kafka's
    SchemaException); later versions than 3 are read as 3 (fields are only ever added)."""
    try:
        (version,) = _I16.unpack_from(metadata, 0)
        pos = 2
        (n,) = _I32.unpack_from(metadata, pos)
        pos += 4
        if n < 0 or n > len(metadata):
            return None
        topics = []
        for _ in range(n):
            t, pos = _string(metadata, pos)
            topics.append(t)
        user_data, pos = _nullable_bytes(metadata, pos)
        owned: dict[str, list[int]] = {}
        generation, rack = -1, None
        if version >= 1:
            owned, pos = _topic_partitions(metadata, pos)
        if version >= 2:
            (generation,) = _I32.unpack_from(metadata, pos)
            pos += 4
        if version >= 3:
            (ln,) = _I16.unpack_from(metadata, pos)
            pos += 2
            if ln >= 0:
                rack = metadata[pos : pos + ln].decode()
        return Subscription(version, topics, user_data, owned, generation, rack)
    except (struct.error, ValueError, UnicodeDecodeError):
        return None


class ArrayTooLong(ValueError):
    """An embedded array longer than the bytes left: Kafka's generated readers throw a plain
    RuntimeException ("Tried to allocate a collection of size ...") for it, which the group
    coordinator answers UNKNOWN_SERVER_ERROR; other malformations are SchemaExceptions."""


def parse_assignment(assignment: bytes) -> tuple[dict[str, list[int]], bytes | None]:
    """A ConsumerProtocolAssignment's partitions by topic and its user data. Raises
    ArrayTooLong, or ValueError / struct.error when it is otherwise malformed."""
    (version,) = _I16.unpack_from(assignment, 0)
    if version < 0:
        raise ValueError("unsupported assignment version")
    pos = 2
    (n,) = _I32.unpack_from(assignment, pos)
    pos += 4
    if n > len(assignment) - pos:
        raise ArrayTooLong("topics")
    out: dict[str, list[int]] = {}
    for _ in range(max(n, 0)):
        t, pos = _string(assignment, pos)
        (m,) = _I32.unpack_from(assignment, pos)
        pos += 4
        if m > len(assignment) - pos:
            raise ArrayTooLong("partitions")
        out.setdefault(t, []).extend(struct.unpack_from(f">{max(m, 0)}i", assignment, pos))
        pos += 4 * max(m, 0)
    user_data, _pos = _nullable_bytes(assignment, pos)
    return out, user_data


def encode_assignment(partitions: dict[str, list[int]], version: int = 0) -> bytes:
    """A ConsumerProtocolAssignment at ``version`` (0-3 share one layout), null user data."""
    b = _I16.pack(max(0, min(version, 3))) + _I32.pack(len(partitions))
    for t, ps in sorted(partitions.items()):
        e = t.encode()
        b += _I16.pack(len(e)) + e + _I32.pack(len(ps)) + b"".join(_I32.pack(p) for p in sorted(ps))
    return b + _I32.pack(-1)
