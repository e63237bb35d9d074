"""Spark's built-in Kafka source and sink (kafka-clients 3.9) against a real kafkawire process.

What the connector sends (protocol-facts d.4): the driver uses the Admin client (Metadata or
DescribeTopicPartitions, ListOffsets earliest/latest/by timestamp), executors use ``assign()`` +
``seek`` + Fetch with no consumer group, and the sink is an idempotent producer (InitProducerId,
Produce). One SparkSession (``spark`` in conftest.py) serves every test; the broker is one per
module, and tests use their own topics. Streams use ``Trigger.AvailableNow`` where they can.

``KAFKAWIRE_SPARK_BOOTSTRAP=host:port`` runs the same tests against another broker (e.g. Apache
Kafka, to check the tests themselves); tests that restart the broker are skipped then.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kafkawire.tools.testing import BrokerProcess
from tests.security_helpers import Pki, listeners, make_pki

pytestmark = pytest.mark.spark

PARTITIONS = 3
# Fail fast instead of Spark's 2-minute default when a fetch gets nothing back.
POLL_TIMEOUT_MS = "20000"
QUERY_TIMEOUT_S = 90.0

API_CREATE_TOPICS = 19
API_DELETE_RECORDS = 21
API_JOIN_GROUP = 11


# ---------------------------------------------------------------------------------------------
# broker, topics, producing


@dataclass
class Kafka:
    bootstrap: str
    process: BrokerProcess | None = None  # None for an external broker (no restarts)

    def api_versions(self) -> dict[int, tuple[int, int]]:
        return api_versions(self.bootstrap)


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kafka]:
    external = os.environ.get("KAFKAWIRE_SPARK_BOOTSTRAP")
    if external:
        yield Kafka(external)
        return
    # num.partitions covers auto-created topics while the broker has no CreateTopics.
    bp = BrokerProcess(
        tmp_path_factory.mktemp("kw-spark") / "data",
        # unlimited retention: some tests produce records stamped in 2023, which the default
        # retention (7 days, first check 30 s after start) would delete mid-module
        overrides={"num.partitions": str(PARTITIONS), "log.retention.ms": "-1"},
    ).start()
    try:
        yield Kafka(bp.bootstrap, bp)
    finally:
        bp.close()


def api_versions(bootstrap: str) -> dict[int, tuple[int, int]]:
    """ApiVersions v0 over a plain socket: {api_key: (min, max)}."""
    host, port = bootstrap.rsplit(":", 1)
    req = struct.pack(">hhih", 18, 0, 7, len(b"probe")) + b"probe"
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(struct.pack(">i", len(req)) + req)
        (size,) = struct.unpack(">i", _recv(s, 4))
        body = _recv(s, size)
    _corr, err, n = struct.unpack_from(">ihi", body, 0)
    assert err == 0, f"ApiVersions error {err}"
    out = {}
    for i in range(n):
        key, lo, hi = struct.unpack_from(">hhh", body, 10 + 6 * i)
        out[key] = (lo, hi)
    return out


def _recv(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def new_topic(kafka: Kafka, prefix: str, partitions: int = PARTITIONS) -> str:
    """A fresh topic with ``partitions`` partitions (CreateTopics, else auto-creation)."""
    from confluent_kafka import Producer

    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    if API_CREATE_TOPICS in kafka.api_versions():
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
        fut = admin.create_topics([NewTopic(name, partitions, 1)])[name]
        fut.result(timeout=20)
    else:
        assert partitions == PARTITIONS, "auto-created topics get the broker's num.partitions"
    # Metadata with auto-creation allowed: creates it when CreateTopics is absent and waits
    # until every partition has a leader either way.
    p = Producer({"bootstrap.servers": kafka.bootstrap})
    deadline = time.monotonic() + 20
    while True:
        md = p.list_topics(name, timeout=10).topics.get(name)
        if md is not None and md.error is None and len(md.partitions) == partitions:
            if all(pm.leader >= 0 for pm in md.partitions.values()):
                return name
        assert time.monotonic() < deadline, f"topic {name} not ready: {md}"
        time.sleep(0.2)


@dataclass
class Rec:
    partition: int
    value: str
    key: str | None = None
    ts: int | None = None  # ms since the epoch; None = now
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


def produce(bootstrap: str, topic: str, recs: Iterable[Rec], **conf: Any) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    errors: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    for r in recs:
        p.produce(
            topic,
            value=r.value.encode(),
            key=None if r.key is None else r.key.encode(),
            partition=r.partition,
            timestamp=r.ts or 0,
            headers=r.headers or None,
            on_delivery=on_delivery,
        )
    assert p.flush(30) == 0, "undelivered messages"
    assert not errors, errors


def spread(n: int, prefix: str = "v", ts0: int | None = None) -> list[Rec]:
    """``n`` records round-robin over the partitions: value ``<prefix><i>``, key ``k<i>``."""
    return [
        Rec(i % PARTITIONS, f"{prefix}{i}", f"k{i}", None if ts0 is None else ts0 + 1000 * i)
        for i in range(n)
    ]


# ---------------------------------------------------------------------------------------------
# Spark helpers


def reader(spark: Any, kafka: Kafka, stream: bool = False, **options: str) -> Any:
    r = (spark.readStream if stream else spark.read).format("kafka")
    r = r.option("kafka.bootstrap.servers", kafka.bootstrap)
    r = r.option("kafkaConsumer.pollTimeoutMs", POLL_TIMEOUT_MS)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def strings(df: Any) -> Any:
    return df.selectExpr(
        "CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", "topic",
        "partition", "offset", "timestamp", "timestampType",
        *(["headers"] if "headers" in df.columns else []),
    )


def await_query(q: Any, timeout_s: float = QUERY_TIMEOUT_S) -> None:
    finished = q.awaitTermination(timeout_s)
    if q.exception() is not None:
        raise AssertionError(f"query failed: {q.exception()}")
    if not finished:
        q.stop()
        raise AssertionError(f"query did not finish within {timeout_s}s: {q.status}")


def available_now(spark: Any, df: Any, name: str | None = None) -> tuple[list[Any], Any]:
    """Run ``df`` to the end of what is there now into a memory table; rows and the query."""
    name = name or f"q_{uuid.uuid4().hex[:10]}"
    q = strings(df).writeStream.format("memory").queryName(name).trigger(availableNow=True)
    query = q.start()
    await_query(query)
    return spark.table(name).collect(), query


def values(rows: Iterable[Any]) -> list[str]:
    return sorted(r.value for r in rows)


def wait_for(pred: Any, what: str, timeout_s: float = QUERY_TIMEOUT_S, query: Any = None) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        if query is not None and query.exception() is not None:
            raise AssertionError(f"query failed while waiting for {what}: {query.exception()}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def table_values(spark: Any, name: str) -> list[str]:
    return values(spark.table(name).collect())


# ---------------------------------------------------------------------------------------------
# batch


def test_batch_write_then_read(spark: Any, kafka: Kafka) -> None:
    topic = new_topic(kafka, "sp-batch")
    rows = [(f"k{i}", f"v{i}", i % PARTITIONS, [("h", f"{i}".encode()), ("n", None)])
            for i in range(60)]
    df = spark.createDataFrame(
        rows, "key STRING, value STRING, partition INT, headers ARRAY<STRUCT<key: STRING, value: BINARY>>"
    )
    (df.write.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap)
     .option("kafka.compression.type", "zstd").option("topic", topic).save())

    got = strings(
        reader(spark, kafka, subscribe=topic, includeHeaders="true",
               startingOffsets="earliest", endingOffsets="latest")
    ).collect()
    assert values(got) == sorted(f"v{i}" for i in range(60))
    by_part: dict[int, list[int]] = {}
    for r in got:
        assert r.topic == topic
        i = int(r.value[1:])
        assert r.key == f"k{i}" and r.partition == i % PARTITIONS
        assert [(h.key, None if h.value is None else bytes(h.value)) for h in r.headers] == [
            ("h", str(i).encode()), ("n", None)
        ]
        by_part.setdefault(r.partition, []).append(r.offset)
    # every partition: offsets 0..n-1, consecutive (Spark asserts this when it seeks)
    assert {p: sorted(o) for p, o in by_part.items()} == {p: list(range(20)) for p in range(3)}

    # a per-partition slice: [2, 5) of partition 1, all of partition 2, nothing from 0
    start = json.dumps({topic: {"1": 2, "2": -2}})
    end = json.dumps({topic: {"1": 5, "2": -1}})
    part = reader(spark, kafka, assign=json.dumps({topic: [1, 2]}),
                  startingOffsets=start, endingOffsets=end).collect()
    assert sorted((r.partition, r.offset) for r in part) == [(1, 2), (1, 3), (1, 4)] + [
        (2, o) for o in range(20)
    ]


def test_batch_reads_client_records(spark: Any, kafka: Kafka) -> None:
    """Records from librdkafka: keys, null keys, timestamps, headers, as Spark sees them."""
    topic = new_topic(kafka, "sp-client")
    ts0 = 1_700_000_000_000
    recs = [
        Rec(i % PARTITIONS, f"v{i}", None if i % 4 == 0 else f"k{i}", ts0 + i,
            [("i", str(i).encode())] if i % 2 else [])
        for i in range(30)
    ]
    produce(kafka.bootstrap, topic, recs)
    got = strings(reader(spark, kafka, subscribe=topic, includeHeaders="true")).collect()
    assert len(got) == 30
    for r in got:
        i = int(r.value[1:])
        assert r.key == (None if i % 4 == 0 else f"k{i}")
        assert int(r.timestamp.timestamp() * 1000) == ts0 + i
        assert r.timestampType == 0  # CreateTime
        assert [(h.key, bytes(h.value)) for h in (r.headers or [])] == (
            [("i", str(i).encode())] if i % 2 else []
        )

    # minPartitions splits each partition's range over several tasks: consumers seek into the
    # middle of the producer's batches and must still see every record exactly once
    split = reader(spark, kafka, subscribe=topic, minPartitions="9")
    assert split.rdd.getNumPartitions() > PARTITIONS
    assert sorted((r.partition, r.offset) for r in split.collect()) == sorted(
        (r.partition, r.offset) for r in got
    )


# ---------------------------------------------------------------------------------------------
# streaming sources


def test_stream_subscribe_earliest_with_headers(spark: Any, kafka: Kafka) -> None:
    topic = new_topic(kafka, "sp-sub")
    produce(kafka.bootstrap, topic, [
        Rec(i % PARTITIONS, f"v{i}", f"k{i}", headers=[("seq", str(i).encode())]) for i in range(45)
    ])
    rows, q = available_now(
        spark, reader(spark, kafka, stream=True, subscribe=topic, startingOffsets="earliest",
               includeHeaders="true")
    )
    assert values(rows) == sorted(f"v{i}" for i in range(45))
    assert all([(h.key, bytes(h.value)) for h in r.headers] == [("seq", r.value[1:].encode())]
               for r in rows)
    assert sum(p["numInputRows"] for p in q.recentProgress) == 45


def test_stream_subscribe_pattern(spark: Any, kafka: Kafka) -> None:
    tag = uuid.uuid4().hex[:6]
    a = new_topic(kafka, f"pat{tag}-a")
    b = new_topic(kafka, f"pat{tag}-b")
    other = new_topic(kafka, f"other{tag}")  # same tag, not the pattern
    produce(kafka.bootstrap, a, spread(9, "a"))
    produce(kafka.bootstrap, b, spread(6, "b"))
    produce(kafka.bootstrap, other, spread(3, "x"))
    rows, _ = available_now(
        spark, reader(spark, kafka, stream=True, subscribePattern=f"pat{tag}-.*",
               startingOffsets="earliest")
    )
    assert values(rows) == sorted([f"a{i}" for i in range(9)] + [f"b{i}" for i in range(6)])
    assert {r.topic for r in rows} == {a, b}


def test_stream_assign(spark: Any, kafka: Kafka) -> None:
    topic = new_topic(kafka, "sp-assign")
    produce(kafka.bootstrap, topic, spread(30))
    rows, _ = available_now(
        spark, reader(spark, kafka, stream=True, assign=json.dumps({topic: [0, 2]}),
               startingOffsets="earliest")
    )
    assert {r.partition for r in rows} == {0, 2}
    assert values(rows) == sorted(f"v{i}" for i in range(30) if i % PARTITIONS != 1)


def test_stream_starting_offsets_json(spark: Any, kafka: Kafka) -> None:
    topic = new_topic(kafka, "sp-json")
    produce(kafka.bootstrap, topic, spread(30))  # 10 per partition
    # partition 0 from offset 4, partition 1 from the earliest (-2), partition 2 from latest (-1)
    start = json.dumps({topic: {"0": 4, "1": -2, "2": -1}})
    rows, _ = available_now(
        spark, reader(spark, kafka, stream=True, subscribe=topic, startingOffsets=start)
    )
    assert sorted((r.partition, r.offset) for r in rows) == (
        [(0, o) for o in range(4, 10)] + [(1, o) for o in range(10)]
    )


def test_stream_starting_timestamp(spark: Any, kafka: Kafka) -> None:
    topic = new_topic(kafka, "sp-ts")
    ts0 = 1_700_000_000_000
    produce(kafka.bootstrap, topic, spread(30, ts0=ts0))  # value v<i> at ts0 + i s
    cut = ts0 + 12_000  # from v12 on: the first offset with timestamp >= cut, per partition
    rows, _ = available_now(
        spark, reader(spark, kafka, stream=True, subscribe=topic, startingTimestamp=str(cut))
    )
    assert values(rows) == sorted(f"v{i}" for i in range(12, 30))

    # the per-partition form, as a batch read
    by_ts = json.dumps({topic: {"0": ts0 + 3_000, "1": ts0 + 100_000, "2": ts0}})
    batch = reader(spark, kafka, subscribe=topic, startingOffsetsByTimestamp=by_ts,
                   startingOffsetsByTimestampStrategy="latest")
    # partition 1 has no record that late: the "latest" strategy starts it at the end
    assert values(strings(batch).collect()) == sorted(
        [f"v{i}" for i in range(3, 30, 3)] + [f"v{i}" for i in range(2, 30, 3)]
    )

    # both ends by timestamp (batch only): [ts0 + 5 s, ts0 + 20 s)
    window = reader(spark, kafka, subscribe=topic, startingTimestamp=str(ts0 + 5_000),
                    endingTimestamp=str(ts0 + 20_000))
    assert values(strings(window).collect()) == sorted(f"v{i}" for i in range(5, 20))


def test_stream_starting_offsets_latest(spark: Any, kafka: Kafka, tmp_path: Path) -> None:
    topic = new_topic(kafka, "sp-latest")
    produce(kafka.bootstrap, topic, spread(9, "old"))
    ckpt = tmp_path / "ckpt"
    out = tmp_path / "out"

    def run() -> Any:
        df = strings(reader(spark, kafka, stream=True, subscribe=topic, startingOffsets="latest"))
        q = (df.writeStream.format("parquet").option("path", str(out))
             .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
        await_query(q)
        return q

    run()  # pins the start at "latest" in the checkpoint; reads nothing
    produce(kafka.bootstrap, topic, spread(6, "new"))
    run()
    assert values(spark.read.parquet(str(out)).collect()) == sorted(f"new{i}" for i in range(6))


def test_max_offsets_per_trigger(spark: Any, kafka: Kafka) -> None:
    topic = new_topic(kafka, "sp-maxoff")
    produce(kafka.bootstrap, topic, spread(60))
    rows, q = available_now(
        spark, reader(spark, kafka, stream=True, subscribe=topic, startingOffsets="earliest",
               maxOffsetsPerTrigger="25")
    )
    assert values(rows) == sorted(f"v{i}" for i in range(60))
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert sum(sizes) == 60 and len(sizes) >= 3 and max(sizes) <= 25, sizes


def test_stream_deprecated_offset_fetching(spark: Any, kafka: Kafka) -> None:
    """The pre-3.4 driver path: a KafkaConsumer that subscribe()s, so a real consumer group."""
    topic = new_topic(kafka, "sp-legacy")
    produce(kafka.bootstrap, topic, spread(30))
    key = "spark.sql.streaming.kafka.useDeprecatedOffsetFetching"
    spark.conf.set(key, "true")
    try:
        rows, _ = available_now(spark, reader(spark, kafka, stream=True, subscribe=topic,
                                              startingOffsets="earliest"))
    finally:
        spark.conf.set(key, "false")
    assert values(rows) == sorted(f"v{i}" for i in range(30))


# ---------------------------------------------------------------------------------------------
# the Kafka sink and checkpoints


def test_write_stream_to_kafka_restarts_from_checkpoint(
    spark: Any, kafka: Kafka, tmp_path: Path
) -> None:
    src = new_topic(kafka, "sp-src")
    dst = new_topic(kafka, "sp-dst")
    ckpt = tmp_path / "ckpt"

    def run() -> None:
        df = reader(spark, kafka, stream=True, subscribe=src, startingOffsets="earliest",
                    maxOffsetsPerTrigger="40")
        out = df.selectExpr("key", "CONCAT('out-', CAST(value AS STRING)) AS value", "partition")
        q = (out.writeStream.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap)
             .option("kafka.compression.type", "lz4")
             .option("topic", dst).option("checkpointLocation", str(ckpt))
             .trigger(availableNow=True).start())
        await_query(q)

    produce(kafka.bootstrap, src, spread(50, "a"))
    run()
    produce(kafka.bootstrap, src, spread(50, "b"))
    run()
    run()  # nothing new: must write nothing
    got = strings(reader(spark, kafka, subscribe=dst)).collect()
    counts = Counter(r.value for r in got)
    expected = {f"out-a{i}" for i in range(50)} | {f"out-b{i}" for i in range(50)}
    assert set(counts) == expected, "lost records"
    # at-least-once: duplicates are allowed only after a failed batch, and none failed here
    assert [v for v, c in counts.items() if c > 1] == []
    for r in got:  # the "partition" column routes each record to the source's partition
        assert r.partition == int(r.value.split("-")[1][1:]) % PARTITIONS


def test_fail_on_data_loss(spark: Any, kafka: Kafka, tmp_path: Path) -> None:
    if API_DELETE_RECORDS not in kafka.api_versions():
        pytest.xfail("broker has no DeleteRecords (API 21): records cannot be removed yet")
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient
    from pyspark.errors import StreamingQueryException

    topic = new_topic(kafka, "sp-loss")
    produce(kafka.bootstrap, topic, [Rec(0, f"v{i}") for i in range(10)])

    def run(name: str, fail: bool) -> Any:
        df = reader(spark, kafka, stream=True, assign=json.dumps({topic: [0]}),
                    startingOffsets="earliest", failOnDataLoss=str(fail).lower())
        q = (strings(df).writeStream.format("parquet").option("path", str(tmp_path / name))
             .option("checkpointLocation", str(tmp_path / f"{name}.ckpt"))
             .trigger(availableNow=True).start())
        with contextlib.suppress(StreamingQueryException):  # q.exception() tells
            q.awaitTermination(QUERY_TIMEOUT_S)
        return q

    for name in ("strict", "lenient"):
        q = run(name, True)
        assert q.exception() is None
    # offsets 10..19 appear and 0..14 are deleted: the checkpoints (at 10) now point at lost data
    produce(kafka.bootstrap, topic, [Rec(0, f"v{i}") for i in range(10, 20)])
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    fut = admin.delete_records([TopicPartition(topic, 0, 15)])
    for f in fut.values():
        f.result(timeout=20)

    strict = run("strict", True)
    assert strict.exception() is not None
    assert "data loss" in str(strict.exception()).lower() or "lost" in str(strict.exception())

    lenient = run("lenient", False)
    assert lenient.exception() is None
    got = values(spark.read.parquet(str(tmp_path / "lenient")).collect())
    assert got == sorted([f"v{i}" for i in range(10)] + [f"v{i}" for i in range(15, 20)])


def test_read_committed(spark: Any, kafka: Kafka) -> None:
    from confluent_kafka import Producer

    topic = new_topic(kafka, "sp-txn")
    p = Producer({"bootstrap.servers": kafka.bootstrap,
                  "transactional.id": f"spark-txn-{uuid.uuid4().hex[:6]}"})
    p.init_transactions(30)
    for batch, commit in (("c1-", True), ("ab-", False), ("c2-", True)):
        p.begin_transaction()
        for i in range(6):
            p.produce(topic, value=f"{batch}{i}".encode(), partition=i % PARTITIONS)
        p.flush(30)
        (p.commit_transaction if commit else p.abort_transaction)(30)

    committed = reader(spark, kafka, subscribe=topic,
                       **{"kafka.isolation.level": "read_committed"})
    assert values(strings(committed).collect()) == sorted(
        [f"c1-{i}" for i in range(6)] + [f"c2-{i}" for i in range(6)]
    )
    rows, _ = available_now(spark, reader(spark, kafka, stream=True, subscribe=topic,
                                   startingOffsets="earliest",
                                   **{"kafka.isolation.level": "read_committed"}))
    assert values(rows) == sorted([f"c1-{i}" for i in range(6)] + [f"c2-{i}" for i in range(6)])
    uncommitted = reader(spark, kafka, subscribe=topic)
    assert len(uncommitted.collect()) == 18


# ---------------------------------------------------------------------------------------------
# broker restarts


@pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "kill9"])
def test_stream_survives_broker_restart(
    spark: Any, kafka: Kafka, tmp_path: Path, kill: bool
) -> None:
    if kafka.process is None:
        pytest.skip("external broker: cannot restart it")
    own = Kafka("", BrokerProcess(tmp_path / "data", overrides={"num.partitions": "3"}))
    assert own.process is not None
    own.bootstrap = own.process.start().bootstrap
    topic = new_topic(own, "sp-restart")
    name = f"q_{uuid.uuid4().hex[:10]}"
    df = strings(reader(spark, own, stream=True, subscribe=topic, startingOffsets="earliest"))
    q = df.writeStream.format("memory").queryName(name).trigger(processingTime="500 milliseconds")
    query = q.start()
    try:
        produce(own.bootstrap, topic, spread(30, "before"))
        wait_for(lambda: len(table_values(spark, name)) >= 30, "records before", query=query)
        own.process.restart(kill=kill)
        produce(own.bootstrap, topic, spread(30, "after"))
        wait_for(lambda: len(table_values(spark, name)) >= 60, "records after", query=query)
        time.sleep(1.0)  # a late duplicate would show up here
        assert table_values(spark, name) == sorted(
            [f"before{i}" for i in range(30)] + [f"after{i}" for i in range(30)]
        )
    finally:
        query.stop()
        own.process.close()


# ---------------------------------------------------------------------------------------------
# the example pipeline


def test_clickstream_example(spark: Any, kafka: Kafka, tmp_path: Path) -> None:
    """examples/clickstream end to end on this session's broker and SparkSession, small data."""
    from examples.clickstream.run import run_pipeline

    report = run_pipeline(spark, kafka.bootstrap, tmp_path, n_events=1500, seed=11)
    assert report.ok, report.summary()
    assert report.parquet_rows == report.topic_records == report.expected_windows > 50
    assert report.late_dropped == report.late_sent


# ---- over SASL_SSL: Spark's Kafka source and sink (kafka-clients 3.9) over SASL_SSL with
# SCRAM-SHA-512, configured with ``kafka.security.protocol`` and friends exactly as for a secured
# Apache Kafka, against the StandardAuthorizer (in this file, not one of its own, so that the
# tests share one SparkSession when pytest-xdist spreads files over workers) ------------------
JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required " \
       'username="spark" password="spark-secret";'


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Pki]]:
    base = tmp_path_factory.mktemp("spark-sec")
    pki = make_pki(base / "pki")
    ov, ports = listeners(PLAIN="PLAINTEXT", SECURE="SASL_SSL")
    ov.update({
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS;User:spark",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.server_pem),
    })
    bp = BrokerProcess(base / "data", port=ports["PLAIN"], overrides=ov).start()
    try:
        from confluent_kafka.admin import (
            AdminClient,
            ScramCredentialInfo,
            ScramMechanism,
            UserScramCredentialUpsertion,
        )
        admin = AdminClient({"bootstrap.servers": bp.bootstrap})
        for f in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
                "spark", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                b"spark-secret")]).values():
            f.result(30)
        yield f"127.0.0.1:{ports['SECURE']}", pki
    finally:
        bp.close()


def _options(bootstrap: str, pki: Pki) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": bootstrap,
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": JAAS,
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": str(pki.ca_pem),
    }


def test_spark_batch_over_sasl_ssl(spark: Any, secured: tuple[str, Pki]) -> None:
    bootstrap, pki = secured
    topic = f"spark-sec-{uuid.uuid4().hex[:8]}"
    opts = _options(bootstrap, pki)
    rows = [(f"k{i}", f"v{i}") for i in range(20)]
    df = spark.createDataFrame(rows, ["key", "value"])
    writer = df.write.format("kafka").option("topic", topic)
    for k, v in opts.items():
        writer = writer.option(k, v)
    writer.save()
    reader = spark.read.format("kafka").option("subscribe", topic)
    for k, v in opts.items():
        reader = reader.option(k, v)
    got = sorted(r.value.decode() for r in reader.load().collect())
    assert got == sorted(v for _k, v in rows)
