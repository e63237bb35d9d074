"""Coordinator records and parked replies: the vocabulary shared by the coordinator runtime
(``kafkawire/coordinators/runtime.py``) and the sans-I/O coordinators (``groups/``, ``txn/``).

A record of an internal coordinator topic (``__consumer_offsets``, ``__transaction_state``) is
Kafka's ``CoordinatorRecord`` framing:

* key   = int16 record type (the ``apiKey`` of the ``coordinator-key`` schema: 0 transaction
  log, 1 offset commit, 2 group metadata, 3-16 consumer-group records...) + the key struct;
* value = int16 schema version + the value struct, or None (a tombstone: the key is deleted).

``encode_key`` / ``encode_value`` / ``record_type`` do that framing over the generated codecs in
``protocol/_generated/`` (``offset_commit_key.py`` etc.), so Kafka's own tools
(``kafka-dump-log --offsets-decoder``) can read what we write.
"""

from __future__ import annotations

import struct
from typing import Any, Generic, NamedTuple, TypeVar

from protocol.primitives import Reader, RemoteProtocolError

_I16 = struct.Struct(">h")

T = TypeVar("T")


class CoordinatorRecord(NamedTuple):
    """One record of an internal coordinator topic: framed key bytes, value bytes or None."""

    key: bytes
    value: bytes | None


def encode_key(key: Any) -> bytes:
    """A coordinator key struct behind its record type (the schema's apiKey)."""
    return _I16.pack(key.API_KEY) + bytes(key.encode(0))


def encode_value(value: Any, version: int) -> bytes:
    """A coordinator value struct behind its version."""
    return _I16.pack(version) + bytes(value.encode(version))


def record(key: Any, value: Any | None, version: int = 0) -> CoordinatorRecord:
    return CoordinatorRecord(encode_key(key), None if value is None else encode_value(value, version))


def record_type(key: bytes) -> int:
    """The record type of a framed key (raises RemoteProtocolError when too short)."""
    if len(key) < 2:
        raise RemoteProtocolError("coordinator record key shorter than 2 bytes")
    return int(_I16.unpack_from(key)[0])


def decode_key(cls: Any, key: bytes) -> Any:
    """The key struct of a framed key whose type is already known to be ``cls.API_KEY``.

    Legacy record types (0 and 1 for offsets, as Kafka reads them) decode with schema 0.
    """
    return cls.read(Reader(memoryview(key)[2:]), 0)


def decode_value(cls: Any, value: bytes) -> tuple[int, Any]:
    """(version, value struct). A version newer than we know is read with our highest, as
    Kafka does for the forward-compatible coordinator values."""
    if len(value) < 2:
        raise RemoteProtocolError("coordinator record value shorter than 2 bytes")
    (version,) = _I16.unpack_from(value)
    if version < cls.MIN_VERSION:
        raise RemoteProtocolError(f"{cls.NAME} v{version} is not a known version")
    v = min(version, cls.MAX_VERSION)
    return version, cls.read(Reader(memoryview(value)[2:]), v)


class Pending(Generic[T]):
    """A reply that is not known yet (a JoinGroup waiting for the rebalance, a SyncGroup
    waiting for the leader's assignment...). The sans-I/O coordinator hands it out instead of
    the reply and later calls :meth:`complete`; the runtime parks the request until then."""

    __slots__ = ("done", "value")

    def __init__(self) -> None:
        self.done = False
        self.value: T | None = None

    def complete(self, value: T) -> None:
        if not self.done:
            self.done = True
            self.value = value

    def __repr__(self) -> str:
        return f"Pending(done={self.done})"
