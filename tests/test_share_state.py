"""protocol/share_state.py and groups/share_state.py: ShareSnapshot/ShareUpdate records round
trip, arbitrary bytes fail only with RemoteProtocolError, the shard replays snapshots, updates
and tombstones."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from groups.share_state import ShareStateShard, overlay
from protocol.coordinator import CoordinatorRecord
from protocol.primitives import RemoteProtocolError
from protocol.share_state import (
    SNAPSHOT_TYPE,
    UPDATE_TYPE,
    ShareStateKey,
    ShareStateValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
batch = st.tuples(i64, i64, st.sampled_from([0, 2, 4]), st.integers(0, 2**15 - 1))
keys = st.builds(ShareStateKey, st.text(max_size=20), st.uuids(), i32)
values = st.builds(ShareStateValue, i32, i32, i32, i64, i32, i64, i64, st.lists(batch, max_size=5))


@given(keys, values, st.sampled_from([SNAPSHOT_TYPE, UPDATE_TYPE]))
def test_round_trip(key: ShareStateKey, value: ShareStateValue, rtype: int) -> None:
    assert decode_key(encode_key(rtype, key)) == (rtype, key)
    back = decode_value(rtype, encode_value(rtype, value))
    if rtype == UPDATE_TYPE:  # an update has no state epoch nor timestamps
        value.state_epoch, value.create_timestamp, value.write_timestamp = 0, -1, -1
    assert back == value


@settings(max_examples=300)
@given(st.binary(max_size=80), st.sampled_from([SNAPSHOT_TYPE, UPDATE_TYPE]))
def test_garbage_raises_only_protocol_errors(data: bytes, rtype: int) -> None:
    for f in (lambda: decode_key(data), lambda: decode_value(rtype, data)):
        try:
            f()
        except RemoteProtocolError:
            pass


def test_overlay() -> None:
    base = [(0, 9, 0, 1), (10, 19, 2, 1)]
    assert overlay(base, [(5, 12, 4, 3)], 0) == [(0, 4, 0, 1), (5, 12, 4, 3), (13, 19, 2, 1)]
    assert overlay(base, [], 12) == [(12, 19, 2, 1)]


def test_shard_replays_snapshot_update_tombstone() -> None:
    shard = ShareStateShard(0)
    key = ShareStateKey("g", uuid.uuid4(), 3)
    for r in shard.write(key, 5, [(7, 8, 2, 1)], 0, now_ms=100):
        shard.replay(0, -1, -1, r)
    v = shard.states[key]
    assert (v.start_offset, v.state_batches, v.snapshot_epoch, v.create_timestamp) == (
        5, [(7, 8, 2, 1)], 0, 100)
    upd = ShareStateValue(snapshot_epoch=0, leader_epoch=0, start_offset=8,
                          state_batches=[(9, 9, 4, 5)])
    shard.replay(1, -1, -1, CoordinatorRecord(encode_key(UPDATE_TYPE, key),
                                              encode_value(UPDATE_TYPE, upd)))
    assert shard.states[key].start_offset == 8
    assert shard.states[key].state_batches == [(8, 8, 2, 1), (9, 9, 4, 5)]
    for r in shard.write(key, 10, [], 0, now_ms=200):
        shard.replay(2, -1, -1, r)
    assert shard.states[key].snapshot_epoch == 1 and shard.states[key].create_timestamp == 100
    for r in shard.delete(key):
        shard.replay(3, -1, -1, r)
    assert key not in shard.states and shard.delete(key) == []
