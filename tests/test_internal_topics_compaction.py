"""The coordinators' internal topics are compacted, and what the coordinators rebuild from the
compacted logs is what they had before (issue 6: "__consumer_offsets and __transaction_state
are compacted"; ARCHITECTURE.md section 5: restart = replay).

A real broker with short cleaner intervals (segments roll every few hundred ms through the
broker-wide ``log.roll.ms``, a tiny ``log.cleaner.min.cleanable.ratio``, a short
``log.cleaner.delete.retention.ms``) and stock clients: confluent-kafka commits offsets of one
group hundreds of times, commits and deletes another group (tombstones), and runs many
transactions under one transactional.id. Once the cleaner has compacted both internal
partitions, the broker is restarted (cleanly, then with kill -9) and must still report the last
committed offset, have forgotten the deleted group, and fence the old transactional producer.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkawire.coordinators.runtime import partition_for
from kafkawire.tools.testing import BrokerProcess
from log.checkpoint import read_offsets_checkpoint

OVERRIDES = {
    "log.initial.task.delay.ms": "0",
    "log.retention.check.interval.ms": "300",
    "log.cleaner.backoff.ms": "200",
    "log.roll.ms": "300",
    "log.cleaner.min.cleanable.ratio": "0.01",
    "log.cleaner.delete.retention.ms": "500",
    "group.initial.rebalance.delay.ms": "0",
}
OFFSETS_PARTITIONS = 50  # offsets.topic.num.partitions default
TXN_PARTITIONS = 50  # transaction.state.log.num.partitions default


def wait_for(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


def count_records(bootstrap: str, topic: str, partition: int) -> int:
    """How many records a plain consumer reads from an internal partition right now."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        if hi <= lo:
            return 0
        c.assign([TopicPartition(topic, partition, lo)])
        n = 0
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF
                    return n
                continue
            n += 1
        raise AssertionError(f"could not read {topic}-{partition} to its end")
    finally:
        c.close()


def end_offset(bootstrap: str, topic: str, partition: int) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1])
    finally:
        c.close()


def committed(bootstrap: str, group: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        [tp] = c.committed([TopicPartition(topic, 0)], timeout=20)
        return int(tp.offset)
    finally:
        c.close()


def cleaned_up_to(data_dir: Path, topic: str, partition: int) -> int:
    cp = read_offsets_checkpoint(data_dir / "cleaner-offset-checkpoint") or {}
    return cp.get((topic, partition), 0)


def test_internal_topics_are_compacted_and_replay_the_same_state(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", overrides=OVERRIDES).start()
    try:
        bs = broker.bootstrap
        topic = f"in-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": bs})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        p = Producer({"bootstrap.servers": bs})
        for i in range(50):
            p.produce(topic, key=str(i).encode(), value=b"v")
        p.flush(30)

        # 1) one group commits 300 times: 300 OffsetCommit records under one key
        group = f"g-{uuid.uuid4().hex[:6]}"
        c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
        for i in range(300):
            c.commit(offsets=[TopicPartition(topic, 0, i % 50 + 1)], asynchronous=False)
            if i % 60 == 0:
                time.sleep(0.35)  # let log.roll.ms roll the internal segment
        c.commit(offsets=[TopicPartition(topic, 0, 42)], asynchronous=False)
        c.close()
        # 2) another group commits, then is deleted: tombstones for its offsets and metadata
        gone = f"gone-{uuid.uuid4().hex[:6]}"
        c = Consumer({"bootstrap.servers": bs, "group.id": gone, "enable.auto.commit": False})
        c.commit(offsets=[TopicPartition(topic, 0, 7)], asynchronous=False)
        c.close()
        admin.delete_consumer_groups([gone])[gone].result(30)
        # 3) many transactions under one transactional.id: many records under one key
        tid = f"tx-{uuid.uuid4().hex[:6]}"
        tp = Producer({"bootstrap.servers": bs, "transactional.id": tid})
        tp.init_transactions(30)
        for i in range(40):
            tp.begin_transaction()
            tp.produce(topic, key=b"t", value=str(i).encode())
            tp.commit_transaction(30)
            if i % 10 == 0:
                time.sleep(0.35)
        tp.flush(10)

        gp = partition_for(group, OFFSETS_PARTITIONS)
        xp = partition_for(tid, TXN_PARTITIONS)
        # the end offsets count every record ever written (compaction never reuses offsets)
        written_offsets = end_offset(bs, "__consumer_offsets", gp)
        written_txn = end_offset(bs, "__transaction_state", xp)
        assert written_offsets >= 300 and written_txn >= 40, (written_offsets, written_txn)
        # roll once more (new data after log.roll.ms) so everything written so far is cleanable
        time.sleep(0.4)
        c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
        c.commit(offsets=[TopicPartition(topic, 0, 43)], asynchronous=False)
        c.close()
        tp.begin_transaction()
        tp.produce(topic, key=b"t", value=b"last")
        tp.commit_transaction(30)

        wait_for(lambda: cleaned_up_to(broker.data_dir, "__consumer_offsets", gp) > 0
                 and cleaned_up_to(broker.data_dir, "__transaction_state", xp) > 0,
                 90, "the cleaner to compact both internal partitions")
        wait_for(lambda: count_records(bs, "__consumer_offsets", gp) < written_offsets // 4,
                 90, "__consumer_offsets to shrink")
        wait_for(lambda: count_records(bs, "__transaction_state", xp) < written_txn // 4,
                 90, "__transaction_state to shrink")
        assert committed(bs, group, topic) == 43

        # 4) the coordinators rebuild the same state from the compacted logs, clean or kill -9
        for kill in (False, True):
            if kill:
                broker.kill()
                broker.start()
            else:
                broker.restart()
            assert committed(bs, group, topic) == 43
            fresh_admin = AdminClient({"bootstrap.servers": bs})  # keep it alive until answered
            listed = fresh_admin.list_consumer_groups().result(30)
            assert not listed.errors, listed.errors
            names = {g.group_id for g in listed.valid}
            assert group in names and gone not in names
            # a new producer with the same transactional.id fences the old one
            fresh = Producer({"bootstrap.servers": bs, "transactional.id": tid})
            fresh.init_transactions(60)
            fresh.begin_transaction()
            fresh.produce(topic, key=b"t", value=b"after-restart")
            fresh.commit_transaction(30)
            try:
                tp.begin_transaction()
                tp.produce(topic, key=b"t", value=b"zombie")
                tp.commit_transaction(10)
                raise AssertionError("the old transactional producer was not fenced")
            except KafkaException as e:
                assert e.args[0].fatal() or "fenced" in str(e).lower(), e
            tp = fresh
    finally:
        broker.close()
