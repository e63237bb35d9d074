"""Transactions with real clients (confluent-kafka / librdkafka and kafka-python) against a real
broker process: commit, abort, read_committed vs read_uncommitted, abort on timeout, fencing of
a zombie by a second instance, transaction.max.timeout.ms, restarts and kill -9.

Pitfalls (../shared/notes/pitfalls.md item 4, public reports): read_uncommitted must still see
aborted data (redpanda#6630); aborted data must never reach read_committed (LSO off-by-one,
redpanda PR #3036); a timed-out transaction is aborted AND its producer fenced;
transaction.timeout.ms above transaction.max.timeout.ms is INVALID_TRANSACTION_TIMEOUT.
"""

from __future__ import annotations

import gc
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkawire.tools.testing import BrokerProcess
from protocol._generated.describe_transactions_request import DescribeTransactionsRequest
from protocol._generated.fetch_request import FetchRequest
from protocol.records import decode_batch_records, iter_headers
from tests.conftest import RawClient

#: timeouts are checked every 300 ms here (Kafka's default is 10 s)
OVERRIDES = {
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "300",
    "transaction.max.timeout.ms": "120000",
    "num.partitions": "2",
}


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    bp = BrokerProcess(tmp_path_factory.mktemp("kwtx") / "data", overrides=OVERRIDES).start()
    try:
        yield bp
    finally:
        bp.close()


def new_topic(bootstrap: str, partitions: int = 2) -> str:
    name = f"tx-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


def confluent_producer(bootstrap: str, tid: str, **extra: Any) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5,
                     **extra})


def open_transaction(bootstrap: str, tid: str, topic: str, values: list[str], partition: int,
                     **extra: Any) -> Producer:
    """A producer with a transaction begun, ``values`` written to ``partition`` and flushed."""
    p = confluent_producer(bootstrap, tid, **extra)
    p.init_transactions(30)
    p.begin_transaction()
    for v in values:
        p.produce(topic, value=v.encode(), partition=partition)
    p.flush(30)
    return p


def consume(bootstrap: str, topic: str, isolation: str, expect: int, partitions: int = 2,
            idle_s: float = 1.5, timeout_s: float = 30) -> list[str]:
    """Every value of ``topic`` visible at ``isolation``: polls until ``expect`` values arrived,
    then until ``idle_s`` passes without more (extras would show up there)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                  "isolation.level": isolation, "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[str] = []
    deadline = time.monotonic() + timeout_s
    last = time.monotonic()
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.append((m.value() or b"").decode())
                last = time.monotonic()
            elif len(got) >= expect and time.monotonic() - last > idle_s:
                break
    finally:
        c.close()
    return sorted(got)


def markers(bootstrap: str, topic: str, partition: int) -> list[tuple[int, int, int]]:
    """(offset, control type, producer epoch) of the control batches of a partition."""
    raw = RawClient(bootstrap)
    try:
        req = FetchRequest(
            replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 22, isolation_level=0,
            session_id=0, session_epoch=-1,
            topics=[FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
                partition=partition, fetch_offset=0, partition_max_bytes=1 << 22)])])
        data = bytes(raw.request(req, 12).responses[0].partitions[0].records or b"")
    finally:
        raw.close()
    out = []
    for pos, h in iter_headers(data):
        if h.is_control:
            _, (rec,) = decode_batch_records(data[pos:pos + h.size])
            out.append((h.base_offset, int.from_bytes(rec.key[2:4], "big"), h.producer_epoch))
    return out


def describe(bootstrap: str, tid: str) -> Any:
    raw = RawClient(bootstrap)
    try:
        (st,) = raw.request(DescribeTransactionsRequest(transactional_ids=[tid]), 0).transaction_states
        return st
    finally:
        raw.close()


def wait_state(bootstrap: str, tid: str, state: str, timeout_s: float = 20) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        st = describe(bootstrap, tid)
        if st.transaction_state == state or time.monotonic() > deadline:
            assert st.transaction_state == state, st
            return st
        time.sleep(0.1)


# ---------------------------------------------------------------------------------------------
# librdkafka


def test_confluent_commit_abort_and_isolation(txn_broker: BrokerProcess) -> None:
    b = txn_broker.bootstrap
    topic = new_topic(b)
    tid = f"c-{uuid.uuid4().hex[:6]}"
    p = confluent_producer(b, tid)
    p.init_transactions(30)
    for round_, commit in enumerate((True, False, True, False, True)):
        p.begin_transaction()
        for i in range(4):
            p.produce(topic, value=f"{'c' if commit else 'a'}{round_}-{i}".encode(), partition=i % 2)
        p.flush(30)
        (p.commit_transaction if commit else p.abort_transaction)(30)
    committed = sorted(f"c{r}-{i}" for r in (0, 2, 4) for i in range(4))
    aborted = sorted(f"a{r}-{i}" for r in (1, 3) for i in range(4))
    assert consume(b, topic, "read_committed", 12) == committed
    # read_uncommitted still returns the aborted records (redpanda#6630)
    assert consume(b, topic, "read_uncommitted", 20) == sorted(committed + aborted)
    # every partition got COMMIT, ABORT, COMMIT, ABORT, COMMIT markers, epoch 0
    for part in (0, 1):
        assert [(t, e) for _, t, e in markers(b, topic, part)] == [(1, 0), (0, 0)] * 2 + [(1, 0)]
    st = wait_state(b, tid, "CompleteCommit")
    assert st.error_code == 0 and st.producer_epoch == 0 and st.topics == []
    p.flush(5)


def test_confluent_zombie_fenced_by_second_instance(txn_broker: BrokerProcess) -> None:
    b = txn_broker.bootstrap
    topic = new_topic(b)
    tid = f"z-{uuid.uuid4().hex[:6]}"
    zombie = open_transaction(b, tid, topic, [f"zombie{i}" for i in range(3)], 0)
    # a new instance with the same transactional.id aborts the open transaction and fences
    fresh = confluent_producer(b, tid)
    fresh.init_transactions(30)
    fresh.begin_transaction()
    fresh.produce(topic, value=b"fresh", partition=0)
    fresh.commit_transaction(30)
    with pytest.raises(KafkaException) as ei:
        zombie.produce(topic, value=b"late", partition=0)
        zombie.commit_transaction(30)
    err = ei.value.args[0]
    assert err.fatal() or err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                         KafkaError.INVALID_PRODUCER_EPOCH), err
    assert consume(b, topic, "read_committed", 1) == ["fresh"]
    assert consume(b, topic, "read_uncommitted", 4) == ["fresh", "zombie0", "zombie1", "zombie2"]
    # the abort of the zombie's transaction carries the fence's epoch: 0 + 2 with transaction
    # version 2 finalized (Kafka's coordinator-side abort bumps once more); the commit epoch 3
    assert [(t, e) for _, t, e in markers(b, topic, 0)] == [(0, 2), (1, 3)]


def test_confluent_abort_on_timeout(txn_broker: BrokerProcess) -> None:
    b = txn_broker.bootstrap
    topic = new_topic(b)
    tid = f"t-{uuid.uuid4().hex[:6]}"
    p = open_transaction(b, tid, topic, [f"slow{i}" for i in range(3)], 1,
                         **{"transaction.timeout.ms": 2000})
    # the coordinator aborts it on its own, fencing this producer (epoch 0 -> 2: the fence and,
    # transaction version 2 being finalized, the abort's own bump)
    st = wait_state(b, tid, "CompleteAbort", timeout_s=30)
    assert st.producer_epoch == 2
    assert [(t, e) for _, t, e in markers(b, topic, 1)] == [(0, 2)]
    with pytest.raises(KafkaException):
        p.commit_transaction(30)
    assert consume(b, topic, "read_committed", 0) == []
    assert consume(b, topic, "read_uncommitted", 3) == ["slow0", "slow1", "slow2"]
    # the transactional id is usable again by a new instance
    p2 = confluent_producer(b, tid)
    p2.init_transactions(30)
    p2.begin_transaction()
    p2.produce(topic, value=b"after", partition=1)
    p2.commit_transaction(30)
    assert consume(b, topic, "read_committed", 1) == ["after"]


def test_transaction_timeout_above_max_is_rejected(tmp_path: Path) -> None:
    bp = BrokerProcess(tmp_path / "data", overrides={"transaction.max.timeout.ms": "20000"}).start()
    try:
        p = confluent_producer(bp.bootstrap, "too-long", **{"transaction.timeout.ms": 30000})
        with pytest.raises(KafkaException) as ei:
            p.init_transactions(30)
        assert ei.value.args[0].code() == KafkaError.INVALID_TRANSACTION_TIMEOUT
        from kafka import KafkaProducer
        from kafka.errors import KafkaError as KPError
        kp = KafkaProducer(bootstrap_servers=bp.bootstrap, transactional_id="too-long-kp",
                           transaction_timeout_ms=30000)
        # kafka-python wraps the error code (50) in a fatal KafkaError
        with pytest.raises(KPError, match="InvalidTransactionTimeout"):
            kp.init_transactions()
        kp.close(timeout=5)
        ok = confluent_producer(bp.bootstrap, "fits", **{"transaction.timeout.ms": 20000})
        ok.init_transactions(30)
    finally:
        bp.close()


# ---------------------------------------------------------------------------------------------
# kafka-python


def test_kafka_python_commit_abort_and_fencing(txn_broker: BrokerProcess) -> None:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError as KPError

    b = txn_broker.bootstrap
    topic = new_topic(b)
    tid = f"kp-{uuid.uuid4().hex[:6]}"
    p = KafkaProducer(bootstrap_servers=b, transactional_id=tid)
    p.init_transactions()
    p.begin_transaction()
    for i in range(4):
        p.send(topic, f"c{i}".encode(), partition=i % 2)
    p.commit_transaction()
    p.begin_transaction()
    for i in range(4):
        p.send(topic, f"a{i}".encode(), partition=i % 2)
    p.flush()
    p.abort_transaction()
    p.begin_transaction()
    p.send(topic, b"zombie", partition=0)
    p.flush()
    p2 = KafkaProducer(bootstrap_servers=b, transactional_id=tid)
    p2.init_transactions()  # fences p and aborts its open transaction
    p2.begin_transaction()
    p2.send(topic, b"p2", partition=1)
    p2.commit_transaction()
    with pytest.raises(KPError):
        p.commit_transaction()
    p.close(timeout=5)
    p2.close(timeout=5)
    assert consume(b, topic, "read_committed", 5) == ["c0", "c1", "c2", "c3", "p2"]
    assert consume(b, topic, "read_uncommitted", 10) == sorted(
        [f"c{i}" for i in range(4)] + [f"a{i}" for i in range(4)] + ["p2", "zombie"])


def test_kafka_python_abort_on_timeout(txn_broker: BrokerProcess) -> None:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError as KPError

    b = txn_broker.bootstrap
    topic = new_topic(b)
    tid = f"kpt-{uuid.uuid4().hex[:6]}"
    p = KafkaProducer(bootstrap_servers=b, transactional_id=tid, transaction_timeout_ms=1500)
    p.init_transactions()
    p.begin_transaction()
    p.send(topic, b"late", partition=0)
    p.flush()
    wait_state(b, tid, "CompleteAbort", timeout_s=30)
    with pytest.raises(KPError):
        p.commit_transaction()
    p.close(timeout=5)
    assert consume(b, topic, "read_committed", 0) == []


# ---------------------------------------------------------------------------------------------
# restarts


def test_in_flight_transaction_survives_restart_and_kill9(tmp_path: Path) -> None:
    bp = BrokerProcess(tmp_path / "data", overrides=OVERRIDES).start()
    try:
        b = bp.bootstrap
        topic = new_topic(b)
        # 1) committed just before a kill -9: replayed from __transaction_state, the markers
        #    are (re)written after the restart and the data becomes visible
        done = confluent_producer(b, "restart-commit")
        done.init_transactions(30)
        done.begin_transaction()
        for i in range(3):
            done.produce(topic, value=f"done{i}".encode(), partition=0)
        done.commit_transaction(30)
        # 2) open at the kill: after the restart the LSO stays below it until the next
        #    instance of the same transactional id aborts it
        open_transaction(b, "restart-open", topic, [f"open{i}" for i in range(3)], 1)
        bp.kill()
        bp.start()
        assert consume(b, topic, "read_committed", 3) == ["done0", "done1", "done2"]
        assert wait_state(b, "restart-open", "Ongoing").topics[0].partitions == [1]
        again = confluent_producer(b, "restart-open")
        again.init_transactions(30)
        again.begin_transaction()
        again.produce(topic, value=b"again", partition=1)
        again.commit_transaction(30)
        assert consume(b, topic, "read_committed", 4) == ["again", "done0", "done1", "done2"]
        assert consume(b, topic, "read_uncommitted", 7) == sorted(
            ["again"] + [f"done{i}" for i in range(3)] + [f"open{i}" for i in range(3)])
        # 3) a clean restart keeps everything, including the aborted ranges
        bp.restart()
        assert consume(b, topic, "read_committed", 4) == ["again", "done0", "done1", "done2"]
    finally:
        bp.close()


def test_open_transaction_times_out_after_restart(tmp_path: Path) -> None:
    bp = BrokerProcess(tmp_path / "data", overrides=OVERRIDES).start()
    try:
        b = bp.bootstrap
        topic = new_topic(b)
        open_transaction(b, "restart-timeout", topic, ["x"], 0, **{"transaction.timeout.ms": 4000})
        bp.kill()
        bp.start()
        # the start time is in __transaction_state: the timeout still applies after a restart
        st = wait_state(b, "restart-timeout", "CompleteAbort", timeout_s=40)
        assert st.producer_epoch == 2
        assert [t for _, t, _ in markers(b, topic, 0)] == [0]
        assert consume(b, topic, "read_committed", 0) == []
    finally:
        bp.close()


def test_resumed_transaction_commits_after_kill9(tmp_path: Path) -> None:
    """Flink's exactly-once sink (redpanda#4029, #7975) resumes a transaction after a restart
    with the producer id and epoch it saved, and commits it: EndTxn from a new connection,
    after the broker was killed, must commit what the first connection wrote."""
    from protocol.errors import ErrorCode
    from tests.test_txn_wire import (
        add_partitions,
        coordinator_ready,
        end_txn,
        init_txn,
        produce_txn,
        txn_batch,
        wait_lso,
    )

    bp = BrokerProcess(tmp_path / "data", overrides=OVERRIDES).start()
    try:
        raw = RawClient(bp.bootstrap)
        topic = new_topic(bp.bootstrap, partitions=1)
        tid = "flink-sink-0"
        coordinator_ready(raw, tid)
        r = init_txn(raw, tid)
        pid, epoch = r.producer_id, r.producer_epoch
        assert add_partitions(raw, tid, pid, epoch, {topic: [0]}) == {(topic, 0): 0}
        assert produce_txn(raw, tid, topic, txn_batch(pid, 0, ["f0", "f1"], epoch)).error_code == 0
        raw.close()
        bp.kill()
        bp.start()
        raw = RawClient(bp.bootstrap)
        coordinator_ready(raw, tid)
        deadline = time.monotonic() + 30
        while (code := end_txn(raw, tid, pid, epoch, True).error_code) in (
            ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR,
        ):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert code == 0
        p = wait_lso(raw, topic, 3)
        assert p.aborted_transactions == []
        raw.close()
        assert consume(bp.bootstrap, topic, "read_committed", 2, partitions=1) == ["f0", "f1"]
    finally:
        bp.close()


# ---------------------------------------------------------------------------------------------
# aiokafka (the oldest request versions: InitProducerId v1, AddPartitionsToTxn v0, EndTxn v0)


def test_aiokafka_commit_abort_and_fencing(txn_broker: BrokerProcess) -> None:
    import asyncio

    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError as AIOError

    b = txn_broker.bootstrap
    topic = new_topic(b)
    tid = f"aio-{uuid.uuid4().hex[:6]}"

    async def run() -> str:
        p = AIOKafkaProducer(bootstrap_servers=b, transactional_id=tid)
        await p.start()
        async with p.transaction():
            for i in range(3):
                await p.send(topic, f"c{i}".encode(), partition=i % 2)
        with pytest.raises(RuntimeError):
            async with p.transaction():
                await p.send_and_wait(topic, b"a0", partition=0)
                raise RuntimeError("abort it")
        p2 = AIOKafkaProducer(bootstrap_servers=b, transactional_id=tid)
        await p2.start()  # fences p
        async with p2.transaction():
            await p2.send(topic, b"p2", partition=1)
        await p2.stop()
        fenced = ""
        try:
            async with asyncio.timeout(30):
                async with p.transaction():
                    await p.send_and_wait(topic, b"zombie", partition=0)
        except (AIOError, TimeoutError) as e:
            fenced = type(e).__name__
        try:
            await p.stop()
        except AIOError:
            pass
        return fenced

    assert asyncio.run(run()) == "ProducerFenced"
    # aiokafka leaves the fenced sender's futures unretrieved: collect them here, so their
    # __del__ logging does not run in the middle of a later ast.parse (a CPython 3.11 bug
    # then fails pytest's assertion rewriting with "AST constructor recursion depth mismatch")
    gc.collect()
    assert consume(b, topic, "read_committed", 4) == ["c0", "c1", "c2", "p2"]
    assert consume(b, topic, "read_uncommitted", 5) == ["a0", "c0", "c1", "c2", "p2"]
