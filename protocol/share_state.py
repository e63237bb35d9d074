"""``__share_group_state`` records (KIP-932): ShareSnapshot and ShareUpdate, pure bytes.

Kafka's share coordinator keeps one share partition's state per key (group id, topic id,
partition) as coordinator records, framed like every coordinator record (``protocol.coordinator``:
int16 record type + key struct; int16 version + value struct, None for a tombstone):

* type 0 ShareSnapshot: the whole state: snapshot epoch, state epoch, leader epoch, the
  share-partition start offset, the create/write timestamps and the state batches;
* type 1 ShareUpdate: a delta over the last snapshot: start offset (-1: unchanged) and the
  state batches that changed.

Keys are non-flexible v0 structs (string group id, uuid topic id, int32 partition); values are
flexible v0 (compact arrays, tagged fields; ``DeliveryCompleteCount`` is tag 0, default -1).
A StateBatch is (first offset int64, last offset int64, delivery state int8 (0 available,
2 acknowledged, 4 archived), delivery count int16).

**Why hand-written:** the share coordinator's record definitions are not among the JSON specs
the generator reads (``../shared/kafka-protocol/coordinator/``); when they are added there,
``protocol.generator`` can replace this module.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field

from protocol.primitives import Reader, RemoteProtocolError

SNAPSHOT_TYPE = 0
UPDATE_TYPE = 1
NO_START_OFFSET = -1

_H = struct.Struct(">h")
_I = struct.Struct(">i")
_Q = struct.Struct(">q")
_BATCH = struct.Struct(">qqbh")


@dataclass(frozen=True)
class ShareStateKey:
    group_id: str
    topic_id: uuid.UUID
    partition: int

    def coordinator_key(self) -> str:
        """Kafka's ``SharePartitionKey`` string, hashed to a state-topic partition."""
        return f"{self.group_id}:{self.topic_id}:{self.partition}"


@dataclass
class ShareStateValue:
    snapshot_epoch: int = 0
    state_epoch: int = 0
    leader_epoch: int = -1
    start_offset: int = NO_START_OFFSET
    delivery_complete_count: int = -1
    create_timestamp: int = -1
    write_timestamp: int = -1
    #: (first offset, last offset, delivery state, delivery count)
    state_batches: list[tuple[int, int, int, int]] = field(default_factory=list)


def _uvarint(out: bytearray, v: int) -> None:
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def encode_key(rtype: int, key: ShareStateKey) -> bytes:
    gid = key.group_id.encode()
    return (_H.pack(rtype) + _H.pack(len(gid)) + gid + key.topic_id.bytes
            + _I.pack(key.partition))


def decode_key(data: bytes) -> tuple[int, ShareStateKey]:
    r = Reader(memoryview(data))
    rtype = r.int16()
    if rtype not in (SNAPSHOT_TYPE, UPDATE_TYPE):
        raise RemoteProtocolError(f"not a share-state record type: {rtype}")
    gid = r.string()
    tid = r.uuid()
    part = r.int32()
    return rtype, ShareStateKey(gid, tid, part)


def _batches(out: bytearray, batches: list[tuple[int, int, int, int]]) -> None:
    _uvarint(out, len(batches) + 1)
    for first, last, state, count in batches:
        out += _BATCH.pack(first, last, state, count)
        out.append(0)  # no tagged fields


def encode_value(rtype: int, v: ShareStateValue) -> bytes:
    out = bytearray(_H.pack(0))  # version 0
    if rtype == SNAPSHOT_TYPE:
        out += _I.pack(v.snapshot_epoch) + _I.pack(v.state_epoch) + _I.pack(v.leader_epoch)
        out += _Q.pack(v.start_offset) + _Q.pack(v.create_timestamp) + _Q.pack(v.write_timestamp)
    else:
        out += _I.pack(v.snapshot_epoch) + _I.pack(v.leader_epoch) + _Q.pack(v.start_offset)
    _batches(out, v.state_batches)
    if v.delivery_complete_count != -1:
        body = _I.pack(v.delivery_complete_count)
        out.append(1)
        _uvarint(out, 0)
        _uvarint(out, len(body))
        out += body
    else:
        out.append(0)
    return bytes(out)


def _read_tags(r: Reader, v: ShareStateValue) -> None:
    for _ in range(r.uvarint()):
        tag, size = r.tag_header()
        body = r.take(size)
        if tag == 0 and size == 4:
            v.delivery_complete_count = _I.unpack(body)[0]


def decode_value(rtype: int, data: bytes) -> ShareStateValue:
    r = Reader(memoryview(data))
    if r.int16() < 0:
        raise RemoteProtocolError("bad share-state value version")
    v = ShareStateValue()
    if rtype == SNAPSHOT_TYPE:
        v.snapshot_epoch, v.state_epoch, v.leader_epoch = r.int32(), r.int32(), r.int32()
        v.start_offset = r.unpack(_Q)[0]
        v.create_timestamp = r.unpack(_Q)[0]
        v.write_timestamp = r.unpack(_Q)[0]
    else:
        v.snapshot_epoch, v.leader_epoch = r.int32(), r.int32()
        v.start_offset = r.unpack(_Q)[0]
    n = r.uvarint() - 1
    if n < 0 or n * _BATCH.size > r.remaining():
        raise RemoteProtocolError("bad share-state batch count")
    for _ in range(n):
        first, last, state, count = r.unpack(_BATCH)
        v.state_batches.append((first, last, state, count))
        for _t in range(r.uvarint()):
            _tag, size = r.tag_header()
            r.take(size)
    _read_tags(r, v)
    return v
