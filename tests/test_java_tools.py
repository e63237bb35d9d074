"""Kafka's Java client family, through Kafka's own tools (4.3.1 and 3.9.2 lines), against a real
kafkawire broker: console producer/consumer without a group, kafka-producer-perf-test,
VerifiableProducer checked by our delivery validator, ClientCompatibilityTest, kafka-get-offsets,
kafka-dump-log on our segments and on ``__cluster_metadata``, kafka-metadata-quorum.

kafka-topics and kafka-configs are in test_admin_java_tools.py; the same tools are compared with
a real Apache Kafka by the compat stage (compat_tests/, scenarios ``java_*``).
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import pytest

from kafkawire.tools.testing import BrokerProcess
from tests.javatools import (
    Acked,
    JavaTools,
    acked_records,
    consumed_records,
    parse_events,
    read_partitions,
    require_line,
    validate_delivery,
    write_properties,
)

pytestmark = pytest.mark.slow


def new_topic(bootstrap: str, prefix: str, partitions: int = 1, **configs: str) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(name, num_partitions=partitions, replication_factor=1,
                     config={k.replace("_", "."): v for k, v in configs.items()})
    admin.create_topics([topic])[name].result(30)
    return name


# ---------------------------------------------------------------------------------------------
# the validator itself


def test_validate_delivery_finds_loss_reordering_and_duplicates() -> None:
    acked = [Acked(0, 0, None, "0"), Acked(0, 1, None, "1"), Acked(1, 0, None, "2")]
    good = {0: [(0, None, "0"), (1, None, "1")], 1: [(0, None, "2")]}
    assert validate_delivery(acked, good, idempotent=True) == []
    lost = {0: [(0, None, "0"), (1, None, "1")], 1: []}
    assert validate_delivery(acked, lost, idempotent=True) == [
        "lost: acked '2' at 1:0, log has '<missing>'"]
    swapped = {0: [(0, None, "1"), (1, None, "0")], 1: [(0, None, "2")]}
    problems = validate_delivery([], swapped, idempotent=False)
    assert problems == ["reordered: partition 0 value 0 at offset 1 after 1 at offset 0"]
    dup = {0: [(0, None, "0"), (1, None, "1"), (2, None, "1")], 1: [(0, None, "2")]}
    assert validate_delivery(acked, dup, idempotent=True) == ["duplicated: '1' at 0:1, 0:2"]
    # without idempotence a retry may store a value twice: not a reordering, not reported
    assert validate_delivery(acked, dup, idempotent=False) == []
    dup_back = {0: [(0, None, "0"), (1, None, "1"), (2, None, "0")], 1: [(0, None, "2")]}
    assert validate_delivery(acked, dup_back, idempotent=False) == []
    assert "duplicated: '0' at 0:0, 0:2" in validate_delivery(acked, dup_back, idempotent=True)


# ---------------------------------------------------------------------------------------------
# producers


def test_verifiable_producer_idempotent_no_loss_no_reorder_no_dup(
    broker: BrokerProcess, java_line: str, tmp_path: Path
) -> None:
    tools = JavaTools(java_line)
    topic = new_topic(broker.bootstrap, "vp", partitions=3)
    props = write_properties(tmp_path / "producer.properties", {
        "enable.idempotence": "true", "retries": "2147483647",
        "max.in.flight.requests.per.connection": "5",
        "linger.ms": "2", "batch.size": "4096", "compression.type": "lz4",
    })
    n = 3000
    res = tools.run(
        "verifiable-producer", "--bootstrap-server", broker.bootstrap, "--topic", topic,
        "--max-messages", str(n), "--acks", "-1", "--repeating-keys", "7",
        tools.option("producer-property-file"), str(props),
    )
    events = parse_events(res.stdout)
    names = [e["name"] for e in events]
    assert names[0] == "startup_complete" and "shutdown_complete" in names
    assert not [e for e in events if e["name"] == "producer_send_error"]
    acked = acked_records(events)
    assert len(acked) == n
    summary = next(e for e in events if e["name"] == "tool_data")
    assert summary["sent"] == n and summary["acked"] == n
    log = read_partitions(broker.bootstrap, topic)
    assert sum(len(v) for v in log.values()) == n
    assert validate_delivery(acked, log, idempotent=True) == []
    assert len({a.partition for a in acked}) == 3  # keys spread over every partition


def test_verifiable_producer_to_verifiable_consumer_group(
    broker: BrokerProcess, java_line: str, tmp_path: Path
) -> None:
    """What one line's VerifiableProducer got acked, the other line's VerifiableConsumer (a
    consumer group, committing) reads: nothing lost, nothing out of order, no duplicates."""
    producer = JavaTools(java_line)
    other = "3.9" if java_line == "4.x" else "4.x"
    require_line(other)
    consumer = JavaTools(other)
    topic = new_topic(broker.bootstrap, "vpc", partitions=4)
    props = write_properties(tmp_path / "p.properties", {
        "enable.idempotence": "true", "retries": "2147483647", "linger.ms": "1"})
    n = 1000
    res = producer.run(
        "verifiable-producer", "--bootstrap-server", broker.bootstrap, "--topic", topic,
        "--max-messages", str(n), "--repeating-keys", "10",
        producer.option("producer-property-file"), str(props),
    )
    acked = acked_records(parse_events(res.stdout))
    assert len(acked) == n
    res = consumer.run(
        "verifiable-consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic,
        "--group-id", f"g-{topic}", "--max-messages", str(n), "--verbose",
        "--reset-policy", "earliest",
    )
    events = parse_events(res.stdout)
    assert sorted(p["partition"] for e in events if e["name"] == "partitions_assigned"
                  for p in e["partitions"]) == [0, 1, 2, 3]
    assert all(e["success"] for e in events if e["name"] == "offsets_committed")
    got = consumed_records(events)
    assert validate_delivery(acked, got, idempotent=True) == []
    assert sum(len(v) for v in got.values()) == n


def test_producer_perf_test(broker: BrokerProcess, java_line: str) -> None:
    tools = JavaTools(java_line)
    topic = new_topic(broker.bootstrap, "perf", partitions=2)
    n = 20000
    res = tools.run(
        "producer-perf-test", "--topic", topic, "--num-records", str(n), "--record-size", "100",
        "--throughput", "-1", "--producer-props", f"bootstrap.servers={broker.bootstrap}",
        "acks=all", "linger.ms=5", "compression.type=zstd", "enable.idempotence=true",
    )
    final = [ln for ln in res.stdout.splitlines() if ln.startswith(f"{n} records sent")]
    assert final, res.output
    assert re.search(r"records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency", final[0])
    log = read_partitions(broker.bootstrap, topic)
    assert sum(len(v) for v in log.values()) == n
    for recs in log.values():
        assert [o for o, _k, _v in recs] == list(range(len(recs)))


# ---------------------------------------------------------------------------------------------
# console producer and consumer, without a consumer group


def test_console_roundtrip_by_partition_across_lines(
    broker: BrokerProcess, java_line: str
) -> None:
    """Produce with one line's console producer (keys and headers), read back with the other
    line's console consumer by --partition/--offset (no group), then by kafka-python."""
    producer = JavaTools(java_line)
    other = "3.9" if java_line == "4.x" else "4.x"
    require_line(other)
    consumer = JavaTools(other)
    topic = new_topic(broker.bootstrap, "console")
    rp = producer.option("reader-property")
    lines = [f"h1:a{i},h2:b{i}\tk{i}\tv{i}" for i in range(6)]
    producer.run(
        "console-producer", "--bootstrap-server", broker.bootstrap, "--topic", topic,
        rp, "parse.key=true", rp, "parse.headers=true", input="\n".join(lines) + "\n",
    )
    fp = consumer.option("formatter-property")
    res = consumer.run(
        "console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic,
        "--partition", "0", "--offset", "2", "--max-messages", "4", "--timeout-ms", "60000",
        fp, "print.key=true", fp, "print.headers=true", fp, "print.offset=true",
        fp, "print.partition=true",
    )
    assert res.stdout.strip().splitlines() == [
        f"Partition:0\tOffset:{i}\th1:a{i},h2:b{i}\tk{i}\tv{i}" for i in range(2, 6)
    ]
    assert "Processed a total of 4 messages" in res.stderr
    # earliest from the producer's own line, and "latest" sees nothing (timeout, exit 0)
    res = producer.run(
        "console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic,
        "--partition", "0", "--offset", "earliest", "--max-messages", "6", "--timeout-ms",
        "60000",
    )
    assert res.stdout.split() == [f"v{i}" for i in range(6)]
    res = producer.run(
        "console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic,
        "--partition", "0", "--offset", "latest", "--timeout-ms", "2000",
    )
    assert res.stdout.strip() == "" and "Processed a total of 0 messages" in res.stderr
    log = read_partitions(broker.bootstrap, topic)
    assert [(k, v) for _o, k, v in log[0]] == [(f"k{i}", f"v{i}") for i in range(6)]


# ---------------------------------------------------------------------------------------------
# ClientCompatibilityTest, kafka-get-offsets


def test_client_compatibility_test(own_broker: BrokerProcess, java_line: str) -> None:
    """Kafka's client/broker check: admin (topics, configs, ACLs, cluster id), producer
    (idempotent), consumer (offsetsForTimes, seek). It always creates a topic ``newtopic``,
    hence a broker of its own."""
    tools = JavaTools(java_line)
    topic = new_topic(own_broker.bootstrap, "compat")
    res = tools.run(
        "client-compatibility", "--bootstrap-server", own_broker.bootstrap, "--topic", topic,
        "--offsets-for-times-supported", "true", "--cluster-id-supported", "true",
        "--expect-record-too-large-exception", "false", "--num-cluster-nodes", "1",
        "--create-topics-supported", "true", "--describe-acls-supported", "true",
        "--describe-configs-supported", "true", "--idempotent-producer-supported", "true",
        check=False,
    )
    assert res.returncode == 0, res.output[-3000:]
    assert "FAILED" not in res.output


def test_get_offsets(broker: BrokerProcess, java_line: str) -> None:
    from confluent_kafka import Producer

    tools = JavaTools(java_line)
    # records stamped in 2023: without retention.ms=-1 the broker's retention (7 days, first
    # check 30 s after start) may delete them while the module's broker runs, as Kafka would
    topic = new_topic(broker.bootstrap, "offsets", partitions=2, retention_ms="-1")
    t0 = 1_700_000_000_000
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(5):
        p.produce(topic, value=b"x", partition=0, timestamp=t0 + 1000 * i)
        p.flush(10)
    p.produce(topic, value=b"y", partition=1, timestamp=t0 + 500)
    p.flush(10)

    def offsets(*args: str) -> list[str]:
        res = tools.run("get-offsets", "--bootstrap-server", broker.bootstrap, *args)
        return sorted(res.stdout.split())

    assert offsets("--topic", topic) == [f"{topic}:0:5", f"{topic}:1:1"]
    assert offsets("--topic", topic, "--time", "-2") == [f"{topic}:0:0", f"{topic}:1:0"]
    assert offsets("--topic", topic, "--time", "-3") == [f"{topic}:0:4", f"{topic}:1:0"]
    assert offsets("--topic", topic, "--time", str(t0 + 2500)) == [f"{topic}:0:3"]
    assert offsets("--topic-partitions", f"{topic}:1", "--time", str(t0)) == [f"{topic}:1:0"]


# ---------------------------------------------------------------------------------------------
# kafka-dump-log on our files

BATCH_LINE = re.compile(
    r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .*?producerId: (-?\d+) .*?"
    r"isControl: (\w+) .*?compresscodec: (\w+) crc: (\d+) isvalid: (\w+)$"
)
RECORD_LINE = re.compile(r"^\| offset: (\d+) .*? headerKeys: \[(.*?)\](?: key: (\S*))? payload: (.*)$")


def dump(tools: JavaTools, *args: str) -> list[str]:
    res = tools.run("dump-log", *args)
    return res.stdout.splitlines()


def produce_codecs(bootstrap: str, topic: str) -> list[str]:
    """One batch per codec, compressible values, idempotent every other batch; returns the
    codec names. kafka-python, since librdkafka sends lz4 only to brokers that advertise
    FindCoordinator (compat_tests/FINDINGS.md)."""
    from kafka import KafkaProducer

    codecs = ["none", "gzip", "snappy", "lz4", "zstd"]
    for i, codec in enumerate(codecs):
        p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=50, batch_size=1 << 20,
                          compression_type=None if codec == "none" else codec,
                          enable_idempotence=i % 2 == 0)
        for j in range(40):
            p.send(topic, key=f"k{i}-{j}".encode(), value=(f"{codec}-{j}-" + "x" * 200).encode(),
                   partition=0, headers=[("codec", codec.encode())])
        p.flush(30)
        p.close()
    return codecs


def test_dump_log_reads_our_segments_and_indexes(
    own_broker: BrokerProcess, java_line: str
) -> None:
    tools = JavaTools(java_line)
    topic = new_topic(own_broker.bootstrap, "dump", index_interval_bytes="1024")
    codecs = produce_codecs(own_broker.bootstrap, topic)
    seg = Path(own_broker.data_dir) / f"{topic}-0" / "00000000000000000000.log"
    for when in ("live", "after clean shutdown"):
        out = dump(tools, "--files", str(seg), "--deep-iteration", "--print-data-log")
        batches = [m.groups() for ln in out if (m := BATCH_LINE.match(ln))]
        assert [b[5] for b in batches] == codecs, when
        assert all(b[7] == "true" for b in batches), when  # CRC valid
        assert [int(b[2]) for b in batches] == [40] * 5
        assert [int(b[0]) for b in batches] == [40 * i for i in range(5)]
        assert [b[3] != "-1" for b in batches] == [True, False, True, False, True]  # idempotent
        recs = [m.groups() for ln in out if (m := RECORD_LINE.match(ln))]
        assert [int(r[0]) for r in recs] == list(range(200)), when
        assert recs[41][1:] == ("codec", "k1-1", "gzip-1-" + "x" * 200)
        for suffix in (".index", ".timeindex"):
            checked = dump(tools, "--files", str(seg.with_suffix(suffix)), "--index-sanity-check")
            assert checked[-1].endswith(f"{suffix} passed sanity check."), (when, checked)
            index = dump(tools, "--files", str(seg.with_suffix(suffix)))
            assert not any("Mismatch" in ln or "error" in ln.lower() for ln in index), index
            entries = [ln for ln in index if ln.startswith(("offset:", "timestamp:"))]
            assert len(entries) >= 2, (when, index)  # the 1 KiB index interval
        # offset index entries point at batch starts: (last offset of the batch, its position)
        starts = {int(m.group(2)): int(p.group(1)) for ln in out
                  if (m := BATCH_LINE.match(ln)) and (p := re.search(r" position: (\d+) ", ln))}
        for ln in dump(tools, "--files", str(seg.with_suffix(".index")))[1:]:
            off, pos = (int(x) for x in re.findall(r"\d+", ln))
            assert starts.get(off) == pos, (ln, starts)
        if when == "live":
            own_broker.stop()


def test_dump_log_reads_our_cluster_metadata(own_broker: BrokerProcess, java_line: str) -> None:
    tools = JavaTools(java_line)
    topic = new_topic(own_broker.bootstrap, "meta", partitions=2, retention_ms="123456")
    log = Path(own_broker.data_dir) / "__cluster_metadata-0" / "00000000000000000000.log"
    out = dump(tools, "--cluster-metadata-decoder", "--files", str(log))
    payloads = []
    failures = []
    control = []
    for ln in out:
        if ln.startswith("| offset:") and " payload: " not in ln:
            control.append(ln)  # a Raft control record (LeaderChange), printed by type
        elif ln.startswith("| offset:"):
            body = ln.split(" payload: ", 1)[1]
            if body.startswith("{"):
                payloads.append(json.loads(body))
            else:
                failures.append(body)
    batches = [m.groups() for ln in out if (m := BATCH_LINE.match(ln))]
    assert batches and all(b[7] == "true" for b in batches)
    # Each start opens a Raft epoch with a LeaderChange control record, as Kafka's KRaft does.
    # (Kafka 4 prints it decoded, Kafka 3.9 by type only.)
    assert control
    if java_line == "3.9":
        assert all(ln.endswith("controlType: LEADER_CHANGE(2)") for ln in control)
    else:
        changes = [json.loads(ln.split(" LeaderChange: ", 1)[1]) for ln in control]
        assert all(c["leaderId"] == 1 and c["grantingVoters"] == [{"voterId": 1}]
                   for c in changes)
    types = [p["type"] for p in payloads]
    if java_line == "3.9":
        # Kafka 3.9 cannot read RegisterBrokerRecord v4 (metadata.version 30); it fails the
        # same way on Apache Kafka 4.3's own log. Everything else decodes.
        assert failures and all("Failed to deserialize record" in f for f in failures)
        assert "REGISTER_BROKER_RECORD" not in types
    else:
        assert failures == []
        reg = next(p for p in payloads if p["type"] == "REGISTER_BROKER_RECORD")
        assert reg["data"]["brokerId"] == 1
        assert reg["data"]["endPoints"][0]["port"] == own_broker.port
    assert {"type": "FEATURE_LEVEL_RECORD", "version": 0,
            "data": {"name": "metadata.version", "featureLevel": 30}} in payloads
    topic_rec = next(p for p in payloads if p["type"] == "TOPIC_RECORD"
                     and p["data"]["name"] == topic)
    tid = topic_rec["data"]["topicId"]
    parts = [p["data"] for p in payloads if p["type"] == "PARTITION_RECORD"
             and p["data"]["topicId"] == tid]
    assert [(p["partitionId"], p["leader"], p["replicas"]) for p in parts] == [
        (0, 1, [1]), (1, 1, [1])]
    cfg = [p["data"] for p in payloads if p["type"] == "CONFIG_RECORD"]
    assert {"resourceType": 2, "resourceName": topic, "name": "retention.ms",
            "value": "123456"} in cfg


# ---------------------------------------------------------------------------------------------
# kafka-metadata-quorum (DescribeQuorum)


def quorum_status(tools: JavaTools, bootstrap: str) -> dict[str, str]:
    res = tools.run("metadata-quorum", "--bootstrap-server", bootstrap, "describe", "--status")
    return {k.strip(): v.strip() for k, _, v in
            (ln.partition(":") for ln in res.stdout.strip().splitlines())}


def metadata_end_offset(tools: JavaTools, data_dir: str) -> int:
    log = Path(data_dir) / "__cluster_metadata-0" / "00000000000000000000.log"
    last = [m.groups() for ln in dump(tools, "--files", str(log)) if (m := BATCH_LINE.match(ln))]
    return int(last[-1][1]) + 1


def test_metadata_quorum_describe(own_broker: BrokerProcess, java_line: str) -> None:
    tools = JavaTools(java_line)
    new_topic(own_broker.bootstrap, "quorum")
    status = quorum_status(tools, own_broker.bootstrap)
    leo = metadata_end_offset(tools, str(own_broker.data_dir))
    assert status["LeaderId"] == "1" and status["LeaderEpoch"] == "1"
    assert status["HighWatermark"] == str(leo)
    assert status["MaxFollowerLag"] == "0" and status["CurrentObservers"] == "[]"
    voters = json.loads(status["CurrentVoters"])
    assert [(v["id"], v["endpoints"]) for v in voters] == [
        (1, [f"PLAINTEXT://127.0.0.1:{own_broker.port}"])]
    res = tools.run("metadata-quorum", "--bootstrap-server", own_broker.bootstrap, "describe",
                    "--replication")
    rows = [ln.split() for ln in res.stdout.strip().splitlines()]
    assert rows[0][:4] == ["NodeId", "DirectoryId", "LogEndOffset", "Lag"]
    assert rows[1][:4] == ["1", "AAAAAAAAAAAAAAAAAAAAAA", str(leo), "0"] and rows[1][-1] == "Leader"
    # the quorum epoch is bumped on every start (quorum-state), the log end offset kept
    own_broker.restart()
    status = quorum_status(tools, own_broker.bootstrap)
    assert status["LeaderEpoch"] == "2"
    assert int(status["HighWatermark"]) > leo  # this start's broker registration
