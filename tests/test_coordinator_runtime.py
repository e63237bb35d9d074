"""The shared coordinator runtime (kafkawire/coordinators/runtime.py): key -> partition mapping,
internal topic creation, shard loading/replay (with transactional batches and markers),
appends, timers and FindCoordinator over the wire."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import trio

from kafkawire.broker import Broker
from kafkawire.config.broker_config import BrokerConfig
from kafkawire.coordinators.runtime import java_abs, java_string_hash, partition_for
from kafkawire.tools.testing import free_port
from protocol._generated.find_coordinator_request import FindCoordinatorRequest
from protocol._generated.metadata_request import MetadataRequest
from protocol.coordinator import CoordinatorRecord, Pending
from protocol.errors import ErrorCode, KafkaError


def test_java_string_hash_matches_java() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    # the classic Integer.MIN_VALUE string: Utils.abs maps it to 0 (Math.abs would not)
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert java_abs(-(2**31)) == 0
    assert partition_for("polygenelubricants", 50) == 0
    # negative hashes: abs, then modulo
    h = java_string_hash("console-consumer-12345")
    assert partition_for("console-consumer-12345", 50) == abs(h) % 50


class RecordingShard:
    """A test coordinator: keeps what was replayed, pending per producer until a marker."""

    def __init__(self, partition: int) -> None:
        self.partition = partition
        self.state: dict[bytes, bytes] = {}
        self.pending: dict[int, dict[bytes, bytes | None]] = {}
        self.offsets: list[int] = []
        self.loaded_at: int | None = None
        self.deadline: int | None = None
        self.fired = 0
        self.waiter: Pending[str] | None = None

    def _apply(self, key: bytes, value: bytes | None) -> None:
        if value is None:
            self.state.pop(key, None)
        else:
            self.state[key] = value

    def replay(self, offset: int, producer_id: int, producer_epoch: int, record: CoordinatorRecord) -> None:
        self.offsets.append(offset)
        if producer_id >= 0:
            self.pending.setdefault(producer_id, {})[record.key] = record.value
        else:
            self._apply(record.key, record.value)

    def replay_end_txn(self, offset: int, producer_id: int, producer_epoch: int, committed: bool) -> None:
        pend = self.pending.pop(producer_id, {})
        if committed:
            for k, v in pend.items():
                self._apply(k, v)

    def on_loaded(self, now_ms: int) -> None:
        self.loaded_at = now_ms

    def on_unloaded(self) -> None:
        pass

    def next_deadline_ms(self) -> int | None:
        return self.deadline

    def on_timer(self, now_ms: int) -> list[CoordinatorRecord]:
        self.deadline = None
        self.fired += 1
        if self.waiter is not None:
            self.waiter.complete("timer")
        return [CoordinatorRecord(b"\x00\x00timer", b"\x00\x00fired")]


def _config(tmp: Path, **extra: str) -> BrokerConfig:
    return BrokerConfig.from_dict(
        {"listeners": f"PLAINTEXT://127.0.0.1:{free_port()}", "log.dir": str(tmp),
         "transaction.state.log.num.partitions": "3", **extra}
    )


async def _with_broker(tmp: Path, body: Any) -> Any:
    broker = Broker(_config(tmp))
    broker.txn_runtime.shard_factory = RecordingShard
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.run)
        try:
            return await body(broker)
        finally:
            nursery.cancel_scope.cancel()


async def _loaded(broker: Broker, key: str) -> RecordingShard:
    rt = broker.txn_runtime
    with trio.fail_after(10):
        while True:
            try:
                shard = rt.shard_for(key)
                assert isinstance(shard, RecordingShard)
                return shard
            except KafkaError as e:
                assert e.code in (
                    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR
                )
            await trio.sleep(0.01)


def test_runtime_append_markers_timers_and_replay_on_restart(tmp_path: Path) -> None:
    key = "txn-a"

    async def first(broker: Broker) -> dict[bytes, bytes]:
        rt = broker.txn_runtime
        with pytest.raises(KafkaError) as ei:
            rt.shard_for(key)
        assert ei.value.code == ErrorCode.NOT_COORDINATOR
        assert await rt.ensure_topic() == ErrorCode.COORDINATOR_NOT_AVAILABLE
        topic = broker.image.topics["__transaction_state"]
        assert len(topic.partitions) == 3
        assert broker.image.topic_config("__transaction_state")["cleanup.policy"] == "compact"
        shard = await _loaded(broker, key)
        p = rt.partition_for(key)

        def op(s: RecordingShard, now: int) -> tuple[list[CoordinatorRecord], str]:
            return [CoordinatorRecord(b"\x00\x00k1", b"\x00\x00v1"),
                    CoordinatorRecord(b"\x00\x00k2", b"\x00\x00v2")], "reply"

        assert await rt.run(key, op) == "reply"
        assert shard.state == {b"\x00\x00k1": b"\x00\x00v1", b"\x00\x00k2": b"\x00\x00v2"}
        assert shard.offsets == [0, 1]
        # tombstone
        await rt.run(key, lambda s, now: ([CoordinatorRecord(b"\x00\x00k2", None)], None))
        assert b"\x00\x00k2" not in shard.state
        # transactional records: invisible until COMMIT; dropped on ABORT
        rt.append(p, [CoordinatorRecord(b"\x00\x00t1", b"\x00\x00c")], producer_id=7,
                  producer_epoch=0, transactional=True)
        rt.append(p, [CoordinatorRecord(b"\x00\x00t2", b"\x00\x00a")], producer_id=8,
                  producer_epoch=3, transactional=True)
        assert b"\x00\x00t1" not in shard.state
        rt.append_marker(p, 7, 0, True, coordinator_epoch=rt.coordinator_epoch(p))
        rt.append_marker(p, 8, 3, False, coordinator_epoch=rt.coordinator_epoch(p))
        assert shard.state[b"\x00\x00t1"] == b"\x00\x00c"
        assert b"\x00\x00t2" not in shard.state
        # a parked reply completed by a timer
        pending: Pending[str] = Pending()
        shard.waiter = pending
        shard.deadline = int(time.time() * 1000) + 50
        rt._notify()
        with trio.fail_after(10):
            assert await rt.wait(pending) == "timer"
        assert shard.fired == 1
        assert shard.state[b"\x00\x00timer"] == b"\x00\x00fired"
        # keys of another partition led elsewhere would be NOT_COORDINATOR; a partition
        # outside the topic has no leader
        with pytest.raises(KafkaError) as ei:
            rt.check(99)
        assert ei.value.code == ErrorCode.NOT_COORDINATOR
        return dict(shard.state)

    state = trio.run(_with_broker, tmp_path, first)

    async def second(broker: Broker) -> dict[bytes, bytes]:
        shard = await _loaded(broker, key)
        return dict(shard.state)

    assert trio.run(_with_broker, tmp_path, second) == state


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_find_coordinator_single_key(broker: Any, raw: Any, version: int) -> None:
    key = f"fc-group-{version}"
    deadline = time.monotonic() + 20
    while True:
        r = raw.request(FindCoordinatorRequest(key=key, key_type=0), version)
        if r.error_code == 0 or time.monotonic() > deadline:
            break
        assert r.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert r.node_id == -1
        time.sleep(0.05)
    assert r.error_code == 0
    assert r.node_id == 1
    assert r.port == broker.port and r.host == "127.0.0.1"
    if version >= 1:
        assert r.error_message == "NONE"


def test_find_coordinator_batched_and_transaction_keys(broker: Any, raw: Any) -> None:
    keys = ["fc-a", "fc-b", "fc-c"]
    deadline = time.monotonic() + 20
    while True:
        r = raw.request(FindCoordinatorRequest(key_type=1, coordinator_keys=keys), 4)
        if all(c.error_code == 0 for c in r.coordinators) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert [c.key for c in r.coordinators] == keys
    assert all(c.error_code == 0 and c.node_id == 1 for c in r.coordinators)
    mreq = MetadataRequest()
    mreq.topics = None  # all topics
    md = raw.request(mreq, 12)
    internal = {t.name: t for t in md.topics if t.is_internal}
    assert "__transaction_state" in internal
    assert len(internal["__transaction_state"].partitions) == 50
    bad = raw.request(FindCoordinatorRequest(key_type=5, coordinator_keys=["x", "y"]), 6)
    assert [c.error_code for c in bad.coordinators] == [ErrorCode.INVALID_REQUEST] * 2
    assert all(c.node_id == -1 for c in bad.coordinators)
    bad3 = raw.request(FindCoordinatorRequest(key="x", key_type=5), 3)
    assert bad3.error_code == ErrorCode.INVALID_REQUEST and bad3.node_id == -1
