"""Stock clients against a real kafkawire process: kafka-python, confluent-kafka, aiokafka, kcat.

Consumers here use assign() (no consumer group), so these tests need only the single-node
data path: Metadata (with auto-creation), Produce, Fetch, ListOffsets, InitProducerId.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
import uuid

import pytest

from kafkawire.tools.testing import BrokerProcess

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# ---------------------------------------------------------------------------------------------
# kafka-python


def kp_consume_all(bootstrap: str, topic: str, partitions: int, expect: int, **kw: object) -> list:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                      auto_offset_reset="earliest", consumer_timeout_ms=10000, **kw)
    try:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        c.seek_to_beginning()
        out = []
        for msg in c:
            out.append(msg)
            if len(out) >= expect:
                break
        return out
    finally:
        c.close()


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_round_trip(broker: BrokerProcess, codec: str) -> None:
    from kafka import KafkaProducer

    topic = topic_name(f"kp-{codec}")
    p = KafkaProducer(bootstrap_servers=broker.bootstrap,
                      compression_type=None if codec == "none" else codec, linger_ms=5)
    sent = []
    for i in range(200):
        key = None if i % 7 == 3 else f"k{i}".encode()
        value = None if i % 11 == 5 and i % 7 != 3 else f"value-{i}".encode() * (1 + i % 5)
        headers = [("h", f"{i}".encode()), ("n", b"")] if i % 3 == 0 else []
        sent.append((key, value, headers))
        p.send(topic, key=key, value=value, headers=headers)
    p.flush()
    p.close()
    got = kp_consume_all(broker.bootstrap, topic, 1, len(sent))
    assert [(m.key, m.value) for m in got] == [(k, v) for k, v, _ in sent]
    assert [m.offset for m in got] == list(range(len(sent)))
    for m, (_k, _v, h) in zip(got, sent, strict=True):
        assert list(m.headers) == h


def test_kafka_python_idempotent_producer_is_default(broker: BrokerProcess) -> None:
    from kafka import KafkaProducer

    topic = topic_name("kp-idem")
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True, acks="all")
    metas = [p.send(topic, value=str(i).encode()).get(10) for i in range(20)]
    p.close()
    assert [m.offset for m in metas] == list(range(20))


def test_kafka_python_offsets_for_times(broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = topic_name("kp-times")
    p = KafkaProducer(bootstrap_servers=broker.bootstrap)
    base = int(time.time() * 1000) - 100_000
    for i in range(10):
        p.send(topic, value=b"x", timestamp_ms=base + i * 1000)
        p.flush()
    p.close()
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    tp = TopicPartition(topic, 0)
    got = c.offsets_for_times({tp: base + 3500})
    assert got[tp].offset == 4 and got[tp].timestamp == base + 4000
    assert c.offsets_for_times({tp: base - 5})[tp].offset == 0
    assert c.offsets_for_times({tp: base + 10_000_000})[tp] is None
    assert c.beginning_offsets([tp])[tp] == 0 and c.end_offsets([tp])[tp] == 10
    c.close()


def test_kafka_python_message_too_large(broker: BrokerProcess) -> None:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError as KPError

    topic = topic_name("kp-large")
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, max_request_size=4_000_000,
                      retries=0)
    ok = p.send(topic, value=b"a" * 1_000_000).get(20)
    assert ok.offset == 0
    with pytest.raises(KPError) as ei:
        p.send(topic, value=b"b" * 1_100_000).get(20)
    assert "MessageSizeTooLarge" in type(ei.value).__name__ or "TOO_LARGE" in str(ei.value).upper()
    p.close()


# ---------------------------------------------------------------------------------------------
# confluent-kafka (librdkafka)


def ck_consume(bootstrap: str, topic: str, partitions: int, expect: int) -> list:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-" + topic,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    out = []
    deadline = time.time() + 30
    while len(out) < expect and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        assert m.error() is None, m.error()
        out.append(m)
    c.close()
    return out


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_round_trip(broker: BrokerProcess, codec: str) -> None:
    from confluent_kafka import Producer

    topic = topic_name(f"ck-{codec}")
    p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec,
                  "linger.ms": 5, "enable.idempotence": True})
    n = 500
    for i in range(n):
        p.produce(topic, key=f"k{i % 10}".encode(), value=f"v{i}".encode(),
                  headers=[("i", str(i).encode())])
    assert p.flush(30) == 0
    got = ck_consume(broker.bootstrap, topic, 1, n)
    assert [m.value() for m in got] == [f"v{i}".encode() for i in range(n)]
    assert [m.offset() for m in got] == list(range(n))
    assert got[5].headers() == [("i", b"5")]


def test_confluent_many_partitions_and_auto_create(broker: BrokerProcess) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = topic_name("ck-many")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=12, replication_factor=1)])[topic].result(20)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 2})
    for i in range(1200):
        p.produce(topic, value=str(i).encode(), partition=i % 12)
    assert p.flush(30) == 0
    got = ck_consume(broker.bootstrap, topic, 12, 1200)
    assert sorted(int(m.value()) for m in got) == list(range(1200))
    per = {}
    for m in got:
        per.setdefault(m.partition(), []).append(m.offset())
    assert all(offs == list(range(100)) for offs in per.values()) and len(per) == 12
    md = admin.list_topics(timeout=10)
    assert len(md.topics[topic].partitions) == 12
    assert md.controller_id == 1 and md.orig_broker_id in (1, -1)


def test_confluent_offsets_for_times(broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic = topic_name("ck-times")
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    base = int(time.time() * 1000) - 50_000
    for i in range(5):
        p.produce(topic, value=b"x", timestamp=base + i * 100)
        p.flush(10)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "t"})
    res = c.offsets_for_times([TopicPartition(topic, 0, base + 150)], timeout=10)
    assert res[0].offset == 2
    res = c.offsets_for_times([TopicPartition(topic, 0, base + 10**9)], timeout=10)
    assert res[0].offset == -1
    lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    assert (lo, hi) == (0, 5)
    c.close()


# ---------------------------------------------------------------------------------------------
# aiokafka


def test_aiokafka_round_trip(broker: BrokerProcess) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    topic = topic_name("aio")

    async def go() -> list:
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, compression_type="gzip")
        await p.start()
        try:
            for i in range(50):
                await p.send_and_wait(topic, key=b"k", value=f"m{i}".encode())
        finally:
            await p.stop()
        c = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest")
        await c.start()
        try:
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            await c.seek_to_beginning(tp)
            out = []
            while len(out) < 50:
                batch = await c.getmany(timeout_ms=5000)
                for msgs in batch.values():
                    out.extend(msgs)
            return out
        finally:
            await c.stop()

    got = asyncio.run(go())
    assert [m.value for m in got] == [f"m{i}".encode() for i in range(50)]


# ---------------------------------------------------------------------------------------------
# kcat


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed (make test installs it)")
def test_kcat_metadata_produce_consume(broker: BrokerProcess) -> None:
    topic = topic_name("kcat")
    md = subprocess.run(["kcat", "-b", broker.bootstrap, "-L", "-J"], capture_output=True,
                        text=True, timeout=30)
    assert md.returncode == 0, md.stderr
    assert '"controllerid": 1' in md.stdout.replace(" ", "").replace('"controllerid":1', '"controllerid": 1')
    lines = "\n".join(f"key{i}:value{i}" for i in range(100)) + "\n"
    prod = subprocess.run(["kcat", "-b", broker.bootstrap, "-P", "-t", topic, "-K:", "-z", "snappy"],
                          input=lines, capture_output=True, text=True, timeout=30)
    assert prod.returncode == 0, prod.stderr
    cons = subprocess.run(["kcat", "-b", broker.bootstrap, "-C", "-t", topic, "-e", "-q",
                           "-f", "%k=%s@%o\n"], capture_output=True, text=True, timeout=30)
    assert cons.returncode == 0, cons.stderr
    assert cons.stdout.splitlines() == [f"key{i}=value{i}@{i}" for i in range(100)]


# ---------------------------------------------------------------------------------------------
# durability


def _produce_acked(bootstrap: str, topic: str, n: int) -> list[int]:
    from confluent_kafka import Producer

    acked: list[int] = []

    def cb(err: object, msg: object) -> None:
        if err is None:
            acked.append(int(msg.value()))  # type: ignore[attr-defined]

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 1,
                  "enable.idempotence": True})
    for i in range(n):
        p.produce(topic, value=str(i).encode(), on_delivery=cb)
        if i % 100 == 0:
            p.poll(0)
    p.flush(30)
    return acked


@pytest.mark.parametrize("kill", [False, True], ids=["clean-restart", "kill-9"])
def test_acked_data_survives_restart(own_broker: BrokerProcess, kill: bool) -> None:
    topic = topic_name("durable")
    acked = _produce_acked(own_broker.bootstrap, topic, 3000)
    assert len(acked) == 3000
    own_broker.restart(kill=kill)
    got = ck_consume(own_broker.bootstrap, topic, 1, 3000)
    assert sorted(int(m.value()) for m in got) == sorted(acked)
    # and the log keeps going at the right offset
    more = _produce_acked(own_broker.bootstrap, topic, 10)
    assert len(more) == 10
    got = ck_consume(own_broker.bootstrap, topic, 1, 3010)
    assert [m.offset() for m in got] == list(range(3010))
