"""The next transaction's first write before the previous transaction's markers (issue 11).

With transaction version 2 every EndTxn bumps the producer epoch and the client starts the next
transaction at once: its first Produce (epoch + 1) can reach a partition before the previous
transaction's COMMIT/ABORT marker is written there. It must never join the transaction that
marker closes: the broker asks the coordinator, which answers CONCURRENT_TRANSACTIONS until the
previous transaction is complete (the broker retries for a while, then the client), as Kafka
4.3.1 does.

The race is forced here, not hoped for: a broker runs in this process and its marker writer is
held (``write_markers`` waits at a gate) between EndTxn and the markers, so the next transaction's
Produce arrives, deterministically, while the markers are pending. Everything else is the real
broker on the wire.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

import kafkawire.txn_coordinator as txn_driver
from kafkawire.testing import InProcessBroker
from protocol._generated.describe_transactions_request import DescribeTransactionsRequest
from protocol._generated.find_coordinator_request import FindCoordinatorRequest
from protocol._generated.txn_offset_commit_request import TxnOffsetCommitRequest
from protocol.errors import ErrorCode
from protocol.records import iter_headers
from tests.conftest import RawClient
from tests.test_txn_wire import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    batches,
    coordinator_ready,
    end_txn,
    fetch,
    init_txn,
    produce_txn,
    txn_batch,
    wait_lso,
)
from tests.test_wire import new_topic

COMMIT, ABORT = 1, 0


class MarkerGate:
    """Holds the broker's marker writer: while closed, every marker write waits."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.open.set()
        self.waiting = threading.Event()  # a marker write reached the gate

    def close(self) -> None:
        self.waiting.clear()
        self.open.clear()

    def wait_held(self, timeout_s: float = 20) -> None:
        assert self.waiting.wait(timeout_s), "the marker writer never started"


@pytest.fixture
def gated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[RawClient, MarkerGate]]:
    yield from _gated_broker(tmp_path, monkeypatch)


def _gated_broker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                  **overrides: str) -> Iterator[tuple[RawClient, MarkerGate]]:
    gate = MarkerGate()
    real = txn_driver.write_markers

    async def gated_write_markers(*args: Any, **kwargs: Any) -> dict[Any, ErrorCode]:
        if not gate.open.is_set():
            gate.waiting.set()
            while not gate.open.is_set():
                await trio.sleep(0.005)
        return await real(*args, **kwargs)

    monkeypatch.setattr(txn_driver, "write_markers", gated_write_markers)
    broker = InProcessBroker(tmp_path / "data", **overrides).start()
    raw = RawClient(broker.bootstrap)
    try:
        yield raw, gate
    finally:
        gate.open.set()
        raw.close()
        broker.stop()


def state(raw: RawClient, tid: str) -> str:
    d = raw.request(DescribeTransactionsRequest(transactional_ids=[tid]), 0)
    return str(d.transaction_states[0].transaction_state)


def end_v2(raw: RawClient, tid: str, pid: int, epoch: int, commit: bool) -> Any:
    deadline = time.monotonic() + 20
    while (e := end_txn(raw, tid, pid, epoch, commit, 5)).error_code == (
        ErrorCode.CONCURRENT_TRANSACTIONS
    ):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert e.error_code == 0, e
    return e


def control_markers(raw: RawClient, topic: str) -> list[tuple[int, int, int]]:
    """(offset, control type, epoch) of every marker of partition 0."""
    p = fetch(raw, topic, 0, READ_UNCOMMITTED)
    data = bytes(p.records or b"")
    kinds = {b[0]: b[3] for b in batches(p)}
    return [(h.base_offset, kinds[h.base_offset][0][0], h.producer_epoch)
            for _pos, h in iter_headers(data) if h.is_control]


@pytest.mark.parametrize("first", ["commit", "abort"])
def test_v2_next_epoch_write_waits_for_the_markers(
    gated: tuple[RawClient, MarkerGate], first: str
) -> None:
    raw, gate = gated
    topic = new_topic(raw, "race")
    tid = f"race-{uuid.uuid4().hex[:6]}"
    coordinator_ready(raw, tid)
    r = init_txn(raw, tid, 5)
    pid = r.producer_id
    assert produce_txn(raw, tid, topic, txn_batch(pid, 0, ["t1"], epoch=0), 12).error_code == 0

    gate.close()
    e = end_txn(raw, tid, pid, 0, first == "commit", 5)
    assert (e.error_code, e.producer_epoch) == (0, 1)
    gate.wait_held()
    assert state(raw, tid) == ("PrepareCommit" if first == "commit" else "PrepareAbort")

    # the next transaction's first write, epoch 1, while transaction 1 waits for its marker:
    # refused as retriable (after the broker's own retries: CONCURRENT_TRANSACTIONS, as Kafka
    # answers Produce v12), nothing appended, transaction 1 untouched
    p = produce_txn(raw, tid, topic, txn_batch(pid, 0, ["t2"], epoch=1), 12)
    assert (p.error_code, p.base_offset, p.log_start_offset) == (
        ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1), p
    part = fetch(raw, topic, 0, READ_UNCOMMITTED)
    assert (part.high_watermark, part.last_stable_offset) == (1, 0)
    assert state(raw, tid) == ("PrepareCommit" if first == "commit" else "PrepareAbort")

    gate.open.set()
    wait_lso(raw, topic, 2)
    # the client's retry: now a new transaction (epoch 1) from offset 2, then aborted
    assert produce_txn(raw, tid, topic, txn_batch(pid, 0, ["t2"], epoch=1), 12).error_code == 0
    assert state(raw, tid) == "Ongoing"
    e = end_v2(raw, tid, pid, 1, False)
    assert e.producer_epoch == 2
    p = wait_lso(raw, topic, 4)
    first_type = COMMIT if first == "commit" else ABORT
    assert control_markers(raw, topic) == [(1, first_type, 1), (3, ABORT, 2)]
    aborted = [(a.producer_id, a.first_offset) for a in p.aborted_transactions]
    assert aborted == ([(pid, 2)] if first == "commit" else [(pid, 0), (pid, 2)])
    assert committed_values(p) == (["t1"] if first == "commit" else [])


def committed_values(part: Any) -> list[str]:
    """What a read_committed consumer keeps of a fetched partition: data batches outside the
    aborted ranges (from an aborted transaction's first offset to its producer's next marker)."""
    got = batches(part)
    markers = [off for off, _attr, _pid, vals in got if isinstance(vals[0], tuple)]
    aborted = [(a.first_offset, min(m for m in markers if m > a.first_offset))
               for a in part.aborted_transactions]
    return [v for off, _attr, _pid, vals in got if not isinstance(vals[0], tuple)
            and not any(lo <= off < hi for lo, hi in aborted) for v in vals]


def test_v2_offsets_with_next_epoch_wait_for_the_markers(
    gated: tuple[RawClient, MarkerGate]
) -> None:
    """TxnOffsetCommit v5 (transaction version 2 adds the group's partition with it) of the
    next transaction while the previous one's markers are pending: retriable, not merged."""
    raw, gate = gated
    topic = new_topic(raw, "race-o")
    tid = f"race-o-{uuid.uuid4().hex[:6]}"
    group = f"g-{uuid.uuid4().hex[:6]}"
    coordinator_ready(raw, tid)
    pid = init_txn(raw, tid, 5).producer_id
    deadline = time.monotonic() + 30
    while raw.request(FindCoordinatorRequest(key=group, key_type=0), 3).error_code != 0:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert produce_txn(raw, tid, topic, txn_batch(pid, 0, ["t1"], epoch=0), 12).error_code == 0

    def commit_offsets(epoch: int) -> int:
        req = TxnOffsetCommitRequest(
            transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=epoch,
            generation_id=-1, member_id="", group_instance_id=None,
            topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=topic, partitions=[
                TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                    partition_index=0, committed_offset=7, committed_leader_epoch=-1,
                    committed_metadata="")])])
        resp = raw.request(req, 5)
        return int(resp.topics[0].partitions[0].error_code)

    while (code := commit_offsets(0)) in (ErrorCode.NOT_COORDINATOR,
                                          ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert code == 0
    gate.close()
    assert end_txn(raw, tid, pid, 0, True, 5).producer_epoch == 1
    gate.wait_held()
    assert commit_offsets(1) == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert state(raw, tid) == "PrepareCommit"
    gate.open.set()
    wait_lso(raw, topic, 2)
    deadline = time.monotonic() + 20
    while (code := commit_offsets(1)) == ErrorCode.COORDINATOR_NOT_AVAILABLE:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert code == 0
    assert state(raw, tid) == "Ongoing"
    end_v2(raw, tid, pid, 1, False)


def test_read_committed_sees_no_aborted_record(gated: tuple[RawClient, MarkerGate]) -> None:
    """The issue's loop on the wire, each EndTxn immediately followed by the next write, with
    the marker writer held at every turn: nothing aborted is ever visible."""
    raw, gate = gated
    topic = new_topic(raw, "race-l")
    tid = f"race-l-{uuid.uuid4().hex[:6]}"
    coordinator_ready(raw, tid)
    pid = init_txn(raw, tid, 5).producer_id
    epoch = 0
    for i in range(6):
        value = f"{'c' if i % 2 == 0 else 'a'}{i}"
        deadline = time.monotonic() + 20
        while (p := produce_txn(raw, tid, topic, txn_batch(pid, 0, [value], epoch), 12)
               ).error_code == ErrorCode.CONCURRENT_TRANSACTIONS:
            gate.open.set()  # the client retries; the markers go out meanwhile
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert p.error_code == 0, p
        gate.close()
        epoch = end_v2(raw, tid, pid, epoch, i % 2 == 0).producer_epoch
    gate.open.set()
    p = wait_lso(raw, topic, 12)
    assert [(off, t) for off, t, _e in control_markers(raw, topic)] == [
        (1, COMMIT), (3, ABORT), (5, COMMIT), (7, ABORT), (9, COMMIT), (11, ABORT)]
    assert [(a.first_offset) for a in p.aborted_transactions] == [2, 6, 10]
    assert committed_values(p) == ["c0", "c2", "c4"]
    assert fetch(raw, topic, 0, READ_COMMITTED).last_stable_offset == 12


def test_v2_broker_retries_until_the_markers_are_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka's KAFKA-18654: the broker itself retries CONCURRENT_TRANSACTIONS for a version-2
    write (``add.partitions.to.txn.retry.backoff.ms`` / ``.max.ms``); markers written while it
    waits let the write through without the client seeing an error."""
    gen = _gated_broker(tmp_path, monkeypatch, **{
        "add.partitions.to.txn.retry.backoff.max.ms": "20000"})
    raw, gate = next(gen)
    try:
        topic = new_topic(raw, "race-r")
        tid = f"race-r-{uuid.uuid4().hex[:6]}"
        coordinator_ready(raw, tid)
        pid = init_txn(raw, tid, 5).producer_id
        assert produce_txn(raw, tid, topic, txn_batch(pid, 0, ["t1"], 0), 12).error_code == 0
        gate.close()
        assert end_txn(raw, tid, pid, 0, True, 5).producer_epoch == 1
        gate.wait_held()
        opener = threading.Timer(0.3, gate.open.set)  # while the Produce below waits
        opener.start()
        started = time.monotonic()
        p = produce_txn(raw, tid, topic, txn_batch(pid, 0, ["t2"], 1), 12)
        assert p.error_code == 0, p
        assert time.monotonic() - started >= 0.25  # answered after the markers, not before
        assert p.base_offset == 2  # after transaction 1's COMMIT marker (offset 1)
        assert state(raw, tid) == "Ongoing"
        opener.join()
    finally:
        gen.close()
