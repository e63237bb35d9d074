"""Consume-transform-produce with offsets committed in the transaction (exactly-once), with
stock clients, under repeated processor crashes and broker restarts (SIGTERM and kill -9).

The processor reads an input topic at read_committed in a consumer group, writes one output
record per input record inside a transaction, adds its consumed positions with
``send_offsets_to_transaction`` (AddOffsetsToTxn + TxnOffsetCommit) and commits; some
transactions are aborted on purpose, some processors "crash" between producing and
committing, the broker is restarted in the middle. In the end the output topic, read at
read_committed, holds every input value exactly once and nothing from an aborted or crashed
transaction; read_uncommitted still shows the aborted duplicates.

With the group coordinator's side: JoinGroup, TxnOffsetCommit, OffsetFetch require_stable.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkawire.tools.testing import BrokerProcess
from tests.conftest import RawClient
from tests.test_transactions import OVERRIDES, consume

INPUTS = 240
PARTITIONS = 3


def make_topics(bootstrap: str) -> tuple[str, str]:
    src, dst = f"in-{uuid.uuid4().hex[:6]}", f"out-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(src, PARTITIONS, 1), NewTopic(dst, PARTITIONS, 1)]).values():
        f.result(30)
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(INPUTS):
        p.produce(src, value=f"v{i}".encode(), partition=i % PARTITIONS)
    assert p.flush(30) == 0
    return src, dst


@pytest.fixture
def eos_broker(tmp_path: Path) -> Any:
    """A broker of the test's own (it gets restarted)."""
    bp = BrokerProcess(tmp_path / "data", overrides=OVERRIDES).start()
    try:
        yield bp
    finally:
        bp.close()


class ConfluentProcessor:
    """One processor instance (consumer + transactional producer with a fixed id)."""

    def __init__(self, bootstrap: str, src: str, dst: str, group: str, tid: str) -> None:
        self.dst = dst
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "session.timeout.ms": 10000, "heartbeat.interval.ms": 500,
        })
        self.consumer.subscribe([src])
        self.producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid,
                                  "linger.ms": 5})
        self.producer.init_transactions(60)

    def step(self, crash: bool = False, abort: bool = False) -> int | None:
        """One transaction over what one poll returns: the records committed (0 when aborted),
        -1 for a crash with the transaction left open, None when the poll was empty."""
        msgs = [m for m in self.consumer.consume(num_messages=25, timeout=1.0) if not m.error()]
        if not msgs:
            return None
        p = self.producer
        p.begin_transaction()
        for m in msgs:
            p.produce(self.dst, value=b"out-" + (m.value() or b""), partition=m.partition())
        if crash:
            p.flush(30)
            return -1  # dies with the transaction open
        positions = self.consumer.position(self.consumer.assignment())
        p.send_offsets_to_transaction(positions, self.consumer.consumer_group_metadata(), 60)
        if abort:
            p.abort_transaction(60)
            self.rewind()
            return 0
        p.commit_transaction(60)
        return len(msgs)

    def rewind(self) -> None:
        """After an abort: back to the committed offsets (as an application must)."""
        assignment = self.consumer.assignment()
        for tp in self.consumer.committed(assignment, timeout=30):
            self.consumer.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))

    def close(self) -> None:
        try:
            self.consumer.close()
        except KafkaException:
            pass


def test_consume_transform_produce_confluent(eos_broker: BrokerProcess) -> None:
    bp = eos_broker
    b = bp.bootstrap
    src, dst = make_topics(b)
    group, tid = f"ctp-{uuid.uuid4().hex[:6]}", f"ctp-tx-{uuid.uuid4().hex[:6]}"
    done = 0
    deadline = time.monotonic() + 240
    generation = 0
    while done < INPUTS and time.monotonic() < deadline:
        proc = ConfluentProcessor(b, src, dst, group, tid)
        generation += 1
        productive = 0  # transactions this instance ran (empty polls do not count)
        try:
            while done < INPUTS and time.monotonic() < deadline:
                crash = generation <= 3 and productive == 2
                n = proc.step(crash=crash, abort=productive % 4 == 1)
                if n is None:
                    continue
                productive += 1
                if n < 0:
                    break  # crashed: the next instance fences and aborts it
                done += n
                if generation in (2, 4) and productive == 2:
                    bp.restart(kill=generation == 2)
                    # a new instance after each restart: librdkafka 2.x re-bootstraps when its
                    # only broker goes away and may then hang in send_offsets_to_transaction
                    # past its timeout (confluentinc/librdkafka#5511, #5456), with any broker
                    break
        finally:
            proc.close()
    assert done >= INPUTS, f"only {done} processed"
    assert generation >= 4  # three crashed instances, a kill -9 and a clean restart happened
    want = sorted(f"out-v{i}" for i in range(INPUTS))
    assert consume(b, dst, "read_committed", INPUTS, partitions=PARTITIONS, idle_s=3) == want
    everything = consume(b, dst, "read_uncommitted", INPUTS, partitions=PARTITIONS, idle_s=3)
    assert set(everything) == set(want) and len(everything) > INPUTS  # aborted duplicates


def test_consume_transform_produce_kafka_python(eos_broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.structs import OffsetAndMetadata

    bp = eos_broker
    b = bp.bootstrap
    src, dst = make_topics(b)
    group, tid = f"kctp-{uuid.uuid4().hex[:6]}", f"kctp-tx-{uuid.uuid4().hex[:6]}"
    done = 0
    deadline = time.monotonic() + 240
    for generation in range(1, 50):
        if done >= INPUTS or time.monotonic() > deadline:
            break
        consumer = KafkaConsumer(
            src, bootstrap_servers=b, group_id=group, isolation_level="read_committed",
            enable_auto_commit=False, auto_offset_reset="earliest", max_poll_records=30,
        )
        producer = KafkaProducer(bootstrap_servers=b, transactional_id=tid)
        producer.init_transactions()
        try:
            for step in range(1, 1000):
                if done >= INPUTS or time.monotonic() > deadline:
                    break
                batch: dict[Any, list[Any]] = consumer.poll(1000)
                msgs = [m for ms in batch.values() for m in ms]
                if not msgs:
                    continue
                producer.begin_transaction()
                for m in msgs:
                    producer.send(dst, b"out-" + m.value, partition=m.partition)
                if generation <= 2 and step == 2:
                    producer.flush()
                    break  # crash with the transaction open
                offsets = {
                    tp: OffsetAndMetadata(consumer.position(tp), "", -1)
                    for tp in consumer.assignment()
                }
                producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
                producer.commit_transaction()
                done += len(msgs)
                if generation == 3 and step == 2:
                    bp.restart(kill=True)
        finally:
            consumer.close(autocommit=False)
            producer.close(timeout=1)
    assert done >= INPUTS, f"only {done} processed"
    want = sorted(f"out-v{i}" for i in range(INPUTS))
    assert consume(b, dst, "read_committed", INPUTS, partitions=PARTITIONS, idle_s=3) == want


# ---------------------------------------------------------------------------------------------
# Kafka's TransactionalMessageCopier (the tool Kafka's own EOS system tests run)

COPIER = "transactional-message-copier"


@pytest.mark.slow
@pytest.mark.parametrize("group_mode", [False, True], ids=["assign", "group-mode"])
def test_transactional_message_copier(broker: BrokerProcess, java_line: str, group_mode: bool) -> None:
    from tests.javatools import JavaTools

    b = broker.bootstrap
    src, dst = f"cin-{uuid.uuid4().hex[:6]}", f"cout-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": b})
    for f in admin.create_topics([NewTopic(src, 1, 1), NewTopic(dst, 1, 1)]).values():
        f.result(30)
    p = Producer({"bootstrap.servers": b})
    n = 600
    for i in range(n):
        p.produce(src, key=str(i).encode(), value=f"m{i}".encode(), partition=0)
    assert p.flush(30) == 0
    tid = f"copier-{uuid.uuid4().hex[:6]}"
    args = ["--input-topic", src, "--input-partition", "0", "--output-topic", dst,
            "--broker-list", b, "--transactional-id", tid,
            "--consumer-group", f"copier-g-{uuid.uuid4().hex[:6]}", "--transaction-size", "40",
            "--enable-random-aborts", "--use-group-metadata"]
    if group_mode:
        args.append("--group-mode")
    # two runs: the second resumes from the offsets the first committed in its transactions
    copier = JavaTools(java_line)
    from tests.test_transactions import describe
    first = copier.run(COPIER, *args, "--max-messages", "250").output
    assert '"stage":"ShutdownComplete"' in first, first
    second = copier.run(COPIER, *args).output
    assert '"remaining":0' in second.splitlines()[-1] or '"remaining":0' in second, second
    want = sorted(f"m{i}" for i in range(n))
    assert consume(b, dst, "read_committed", n, partitions=1, idle_s=2) == want
    # Kafka 4.x clients run transaction version 2 here (one epoch per transaction: Produce v12,
    # TxnOffsetCommit v5 and EndTxn v5); 3.9 clients version 1 (one epoch per instance)
    epoch = describe(b, tid).producer_epoch
    assert epoch >= 10 if java_line == "4.x" else epoch <= 2, epoch


# ---------------------------------------------------------------------------------------------
# UNSTABLE_OFFSET_COMMIT must clear on commit, abort and coordinator timeout (redpanda#6423)


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory: pytest.TempPathFactory) -> Any:
    bp = BrokerProcess(tmp_path_factory.mktemp("kweos") / "data", overrides=OVERRIDES).start()
    try:
        yield bp
    finally:
        bp.close()


def test_require_stable_clears_on_commit_abort_and_timeout(txn_broker: BrokerProcess) -> None:
    from protocol._generated.add_offsets_to_txn_request import AddOffsetsToTxnRequest
    from protocol._generated.find_coordinator_request import FindCoordinatorRequest
    from protocol._generated.offset_fetch_request import OffsetFetchRequest
    from protocol._generated.txn_offset_commit_request import TxnOffsetCommitRequest as TOC
    from protocol.errors import ErrorCode
    from tests.test_txn_wire import coordinator_ready, end_txn, init_txn

    b = txn_broker.bootstrap
    topic = f"st-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": b})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    group = f"stable-{uuid.uuid4().hex[:6]}"
    raw = RawClient(b)
    try:
        def begin(tid: str, timeout_ms: int = 60000) -> tuple[int, int]:
            coordinator_ready(raw, tid)
            r = init_txn(raw, tid, timeout_ms=timeout_ms)
            assert r.error_code == 0
            a = raw.request(AddOffsetsToTxnRequest(transactional_id=tid, producer_id=r.producer_id,
                                                   producer_epoch=r.producer_epoch, group_id=group), 3)
            assert a.error_code == 0
            return r.producer_id, r.producer_epoch

        def commit_offset(tid: str, pid: int, epoch: int, offset: int) -> None:
            deadline = time.monotonic() + 30
            # the group's coordinator first (its FindCoordinator creates __consumer_offsets)
            while raw.request(FindCoordinatorRequest(key=group, key_type=0), 3).error_code:
                assert time.monotonic() < deadline
                time.sleep(0.1)
            while True:
                req = TOC(transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=epoch,
                          topics=[TOC.TxnOffsetCommitRequestTopic(name=topic, partitions=[
                              TOC.TxnOffsetCommitRequestPartition(partition_index=0,
                                                                  committed_offset=offset)])])
                code = raw.request(req, 3).topics[0].partitions[0].error_code
                if code == 0:
                    return
                assert code in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                ErrorCode.NOT_COORDINATOR, ErrorCode.CONCURRENT_TRANSACTIONS), code
                assert time.monotonic() < deadline
                time.sleep(0.1)

        def fetched(stable: bool) -> tuple[int, int]:
            req = OffsetFetchRequest(group_id=group, require_stable=stable, topics=[
                OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])])
            p = raw.request(req, 7).topics[0].partitions[0]
            return p.error_code, p.committed_offset

        def until(stable_result: tuple[int, int]) -> None:
            deadline = time.monotonic() + 30
            while fetched(True) != stable_result:
                assert time.monotonic() < deadline, fetched(True)
                time.sleep(0.1)

        tid = f"st-{uuid.uuid4().hex[:6]}"
        pid, epoch = begin(tid)
        commit_offset(tid, pid, epoch, 5)
        assert fetched(True)[0] == ErrorCode.UNSTABLE_OFFSET_COMMIT
        assert fetched(False) == (0, -1)  # pending offsets are not visible
        assert end_txn(raw, tid, pid, epoch, False).error_code == 0
        until((0, -1))  # aborted: dropped
        pid, epoch = begin(tid)
        commit_offset(tid, pid, epoch, 7)
        assert end_txn(raw, tid, pid, epoch, True).error_code == 0
        until((0, 7))  # committed: visible
        # a transaction the coordinator times out (1 s; checked every 300 ms here)
        pid, epoch = begin(tid, timeout_ms=1000)
        commit_offset(tid, pid, epoch, 9)
        assert fetched(True)[0] == ErrorCode.UNSTABLE_OFFSET_COMMIT
        until((0, 7))
    finally:
        raw.close()


def test_txn_offset_commit_checks_the_transaction(txn_broker: BrokerProcess) -> None:
    """TxnOffsetCommit below v5 needs AddOffsetsToTxn first (KIP-890 part 1 verification);
    v5 adds the group's partition itself (transaction version 2)."""
    from protocol._generated.find_coordinator_request import FindCoordinatorRequest
    from protocol._generated.txn_offset_commit_request import TxnOffsetCommitRequest as TOC
    from protocol.errors import ErrorCode
    from tests.test_txn_wire import coordinator_ready, end_txn, init_txn

    b = txn_broker.bootstrap
    topic = f"toc-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": b})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    group = f"toc-{uuid.uuid4().hex[:6]}"
    raw = RawClient(b)
    try:
        deadline = time.monotonic() + 30
        while raw.request(FindCoordinatorRequest(key=group, key_type=0), 3).error_code:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        tid = f"toc-{uuid.uuid4().hex[:6]}"
        coordinator_ready(raw, tid)
        r = init_txn(raw, tid, 5)
        pid, epoch = r.producer_id, r.producer_epoch

        def commit(version: int) -> int:
            req = TOC(transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=epoch,
                      topics=[TOC.TxnOffsetCommitRequestTopic(name=topic, partitions=[
                          TOC.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=3)])])
            return int(raw.request(req, version).topics[0].partitions[0].error_code)

        assert commit(3) == ErrorCode.INVALID_TXN_STATE
        assert commit(4) == ErrorCode.TRANSACTION_ABORTABLE
        assert commit(5) == 0
        from protocol._generated.describe_transactions_request import DescribeTransactionsRequest
        d = raw.request(DescribeTransactionsRequest(transactional_ids=[tid]), 0).transaction_states[0]
        assert d.transaction_state == "Ongoing" and [t.topic for t in d.topics] == ["__consumer_offsets"]
        assert commit(3) == 0  # now part of the transaction
        e = end_txn(raw, tid, pid, epoch, True, 5)
        assert (e.error_code, e.producer_epoch) == (0, epoch + 1)
    finally:
        raw.close()
