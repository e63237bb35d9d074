"""Admin APIs end to end: confluent-kafka (librdkafka) and kafka-python against a real broker.

Each test uses its own topic names on the module's shared broker; tests that change
broker-level (dynamic) configs start a broker of their own.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from kafkawire.config.broker_config import TOPIC_CONFIGS
from kafkawire.tools.testing import BrokerProcess


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def ck_admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def outcome(fut: Any) -> Any:
    """The future's result, or the librdkafka error code name."""
    from confluent_kafka import KafkaException

    try:
        return fut.result(timeout=20)
    except KafkaException as e:
        return e.args[0].name()


def ck_topic_configs(admin: Any, topic: str) -> dict[str, Any]:
    from confluent_kafka.admin import ConfigResource

    [fut] = admin.describe_configs([ConfigResource("topic", topic)]).values()
    return dict(fut.result(timeout=20))


def partition_dirs(bp: BrokerProcess, topic: str) -> list[str]:
    return sorted(p.name for p in Path(bp.data_dir).iterdir() if p.name.startswith(topic + "-"))


# ---------------------------------------------------------------------------------------------
# confluent-kafka


def test_confluent_create_topics(broker: BrokerProcess) -> None:
    from confluent_kafka.admin import NewTopic

    admin = ck_admin(broker.bootstrap)
    a, b, v = name("ca"), name("cb"), name("cv")
    futs = admin.create_topics([
        NewTopic(a, 3, 1, config={"cleanup.policy": "compact", "retention.ms": "1000"}),
        NewTopic(b, -1, -1),
        NewTopic("bad!name", 1, 1),
        NewTopic(name("cbad"), 1, 1, config={"retention.ms": "abc"}),
        NewTopic(name("cunk"), 1, 1, config={"no.such.config": "1"}),
        NewTopic(name("crf"), 1, 3),
        NewTopic(name("cparts"), 0, 1),
    ], request_timeout=20)
    got = {t: outcome(f) for t, f in futs.items()}
    assert got[a] is None and got[b] is None
    assert got["bad!name"] == "TOPIC_EXCEPTION"
    assert sorted(v for k, v in got.items() if k not in (a, b, "bad!name")) == sorted(
        ["INVALID_CONFIG", "INVALID_CONFIG", "INVALID_REPLICATION_FACTOR", "INVALID_PARTITIONS"]
    )
    md = admin.list_topics(timeout=10)
    assert len(md.topics[a].partitions) == 3
    assert len(md.topics[b].partitions) == 1  # num.partitions default
    assert set(partition_dirs(broker, a)) == {f"{a}-0", f"{a}-1", f"{a}-2"}
    # existing topic, validate_only
    [dup] = admin.create_topics([NewTopic(a, 1, 1)]).values()
    assert outcome(dup) == "TOPIC_ALREADY_EXISTS"
    [vo] = admin.create_topics([NewTopic(v, 2, 1)], validate_only=True).values()
    assert outcome(vo) is None
    assert v not in admin.list_topics(timeout=10).topics
    assert partition_dirs(broker, v) == []
    cfg = ck_topic_configs(admin, a)
    assert cfg["cleanup.policy"].value == "compact"
    assert cfg["retention.ms"].value == "1000"


def test_confluent_error_messages(broker: BrokerProcess) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import NewTopic

    admin = ck_admin(broker.bootstrap)
    [f] = admin.create_topics([NewTopic(name("m"), 1, 1, config={"segment.ms": "0"})]).values()
    with pytest.raises(KafkaException) as ei:
        f.result(timeout=20)
    assert ei.value.args[0].str() == (
        "Invalid value 0 for configuration segment.ms: Value must be at least 1"
    )


def test_confluent_describe_configs_every_config(broker: BrokerProcess) -> None:
    from confluent_kafka.admin import ConfigResource, ConfigSource, NewTopic

    admin = ck_admin(broker.bootstrap)
    t = name("dc")
    [f] = admin.create_topics([NewTopic(t, 1, 1, config={"segment.bytes": "1048576"})]).values()
    assert outcome(f) is None
    cfg = ck_topic_configs(admin, t)
    assert set(cfg) == set(TOPIC_CONFIGS)
    cp = cfg["cleanup.policy"]
    assert cp.value == "delete"
    assert cp.source == ConfigSource.DEFAULT_CONFIG.value
    assert cp.is_default and not cp.is_read_only and not cp.is_sensitive
    assert [(s.name, s.value, s.source) for s in cp.synonyms.values()] == [
        ("log.cleanup.policy", "delete", ConfigSource.DEFAULT_CONFIG.value)
    ]
    sb = cfg["segment.bytes"]
    assert sb.value == "1048576" and sb.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert cfg["retention.ms"].value == "604800000"
    assert cfg["max.message.bytes"].value == "1048588"
    # the broker resource: this node's configs
    [bf] = admin.describe_configs([ConfigResource("broker", "1")]).values()
    bcfg = bf.result(timeout=20)
    assert bcfg["num.partitions"].value == "1"
    assert bcfg["num.partitions"].is_read_only
    assert bcfg["listeners"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    # unknown topic
    [uf] = admin.describe_configs([ConfigResource("topic", name("nope"))]).values()
    assert outcome(uf) == "UNKNOWN_TOPIC_OR_PART"


def test_confluent_alter_configs_replaces_all_overrides(broker: BrokerProcess) -> None:
    from confluent_kafka.admin import ConfigResource, ConfigSource, NewTopic

    admin = ck_admin(broker.bootstrap)
    t = name("ac")
    [f] = admin.create_topics([NewTopic(t, 1, 1, config={"retention.ms": "5000"})]).values()
    assert outcome(f) is None
    [f] = admin.alter_configs([ConfigResource("topic", t, set_config={"segment.ms": "100000"})]
                              ).values()
    assert outcome(f) is None
    cfg = ck_topic_configs(admin, t)
    assert cfg["segment.ms"].value == "100000"
    assert cfg["retention.ms"].value == "604800000"  # dropped: legacy full replacement
    assert cfg["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    # validate_only and a bad value
    [f] = admin.alter_configs([ConfigResource("topic", t, set_config={"segment.ms": "200000"})],
                              validate_only=True).values()
    assert outcome(f) is None
    assert ck_topic_configs(admin, t)["segment.ms"].value == "100000"
    [f] = admin.alter_configs([ConfigResource("topic", t, set_config={"segment.ms": "x"})]
                              ).values()
    assert outcome(f) == "INVALID_CONFIG"
    [f] = admin.alter_configs([ConfigResource("topic", name("nope"), set_config={"a": "b"})]
                              ).values()
    assert outcome(f) == "UNKNOWN_TOPIC_OR_PART"


def test_confluent_incremental_alter_configs(broker: BrokerProcess) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

    admin = ck_admin(broker.bootstrap)
    t = name("ic")
    [f] = admin.create_topics([NewTopic(t, 1, 1, config={"retention.ms": "5000"})]).values()
    assert outcome(f) is None

    def alter(*entries: tuple[str, str | None, Any]) -> Any:
        res = ConfigResource("topic", t, incremental_configs=[
            ConfigEntry(n, v, incremental_operation=op) for n, v, op in entries
        ])
        [fut] = admin.incremental_alter_configs([res]).values()
        return outcome(fut)

    assert alter(("segment.ms", "100000", AlterConfigOpType.SET),
                 ("cleanup.policy", "compact", AlterConfigOpType.APPEND)) is None
    cfg = ck_topic_configs(admin, t)
    assert cfg["segment.ms"].value == "100000"
    assert cfg["retention.ms"].value == "5000"  # untouched: incremental
    assert cfg["cleanup.policy"].value == "delete,compact"
    assert alter(("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT),
                 ("retention.ms", None, AlterConfigOpType.DELETE)) is None
    cfg = ck_topic_configs(admin, t)
    assert cfg["cleanup.policy"].value == "compact"
    assert cfg["retention.ms"].value == "604800000"
    assert alter(("retention.ms", "1", AlterConfigOpType.APPEND)) == "INVALID_CONFIG"
    assert alter(("retention.ms", "-5", AlterConfigOpType.SET)) == "INVALID_CONFIG"


def test_confluent_create_partitions(broker: BrokerProcess) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewPartitions, NewTopic

    admin = ck_admin(broker.bootstrap)
    t = name("cp")
    [f] = admin.create_topics([NewTopic(t, 1, 1)]).values()
    assert outcome(f) is None
    futs = admin.create_partitions([NewPartitions(t, 4)])
    assert outcome(futs[t]) is None
    assert len(admin.list_topics(t, timeout=10).topics[t].partitions) == 4
    [f] = admin.create_partitions([NewPartitions(t, 2)]).values()
    assert outcome(f) == "INVALID_PARTITIONS"
    [f] = admin.create_partitions([NewPartitions(t, 4)]).values()
    assert outcome(f) == "INVALID_PARTITIONS"
    [f] = admin.create_partitions([NewPartitions(t, 6, [[1]])]).values()
    assert outcome(f) == "INVALID_REPLICA_ASSIGNMENT"
    [f] = admin.create_partitions([NewPartitions(t, 5)], validate_only=True).values()
    assert outcome(f) is None
    assert len(admin.list_topics(t, timeout=10).topics[t].partitions) == 4
    [f] = admin.create_partitions([NewPartitions(name("nope"), 5)]).values()
    assert outcome(f) == "UNKNOWN_TOPIC_OR_PART"
    # the new partitions take writes
    p = Producer({"bootstrap.servers": broker.bootstrap, "topic.metadata.refresh.interval.ms": 500})
    delivered: list[Any] = []
    p.produce(t, b"v", partition=3, on_delivery=lambda err, msg: delivered.append((err, msg)))
    p.flush(20)
    assert delivered and delivered[0][0] is None and delivered[0][1].partition() == 3


def test_confluent_delete_topics_removes_logs(broker: BrokerProcess) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic

    admin = ck_admin(broker.bootstrap)
    t = name("del")
    [f] = admin.create_topics([NewTopic(t, 2, 1)]).values()
    assert outcome(f) is None
    p = Producer({"bootstrap.servers": broker.bootstrap})
    p.produce(t, b"x", partition=0)
    p.flush(20)
    assert partition_dirs(broker, t) == [f"{t}-0", f"{t}-1"]
    futs = admin.delete_topics([t, name("nope")], operation_timeout=10)
    res = {k: outcome(v) for k, v in futs.items()}
    assert res[t] is None
    assert [x for x in res.values() if x is not None] == ["UNKNOWN_TOPIC_OR_PART"]
    assert t not in admin.list_topics(timeout=10).topics
    assert partition_dirs(broker, t) == []
    # the name can be used again, from scratch
    [f] = admin.create_topics([NewTopic(t, 1, 1)]).values()
    assert outcome(f) is None
    assert len(admin.list_topics(t, timeout=10).topics[t].partitions) == 1


def test_confluent_describe_cluster_and_topics(broker: BrokerProcess) -> None:
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import NewTopic

    admin = ck_admin(broker.bootstrap)
    cl = admin.describe_cluster(request_timeout=10).result(timeout=20)
    assert cl.controller is not None and cl.controller.id == 1
    assert [(n.id, n.port) for n in cl.nodes] == [(1, broker.port)]
    assert cl.cluster_id
    t = name("dt")
    [f] = admin.create_topics([NewTopic(t, 2, 1)]).values()
    assert outcome(f) is None
    [fd] = admin.describe_topics(TopicCollection([t])).values()
    desc = fd.result(timeout=20)
    assert desc.name == t and [p.id for p in desc.partitions] == [0, 1]
    assert all(p.leader.id == 1 for p in desc.partitions)
    assert t in admin.list_topics(timeout=10).topics


def test_altered_config_applies_to_partition_logs(broker: BrokerProcess) -> None:
    """The segment size changed at run time (internal.segment.bytes: segment.bytes is at least
    1 MiB in Kafka 4): the existing log rolls at the new size."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

    admin = ck_admin(broker.bootstrap)
    t = name("roll")
    [f] = admin.create_topics([NewTopic(t, 1, 1)]).values()
    assert outcome(f) is None
    res = ConfigResource("topic", t, incremental_configs=[
        ConfigEntry("internal.segment.bytes", "1024", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("max.message.bytes", "4000", incremental_operation=AlterConfigOpType.SET),
    ])
    [fut] = admin.incremental_alter_configs([res]).values()
    assert outcome(fut) is None
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0,
                  "message.max.bytes": 100000})
    errors: list[Any] = []
    for _ in range(8):
        p.produce(t, b"x" * 400, partition=0, on_delivery=lambda e, m: errors.append(e))
        p.flush(20)
    p.produce(t, b"y" * 6000, partition=0, on_delivery=lambda e, m: errors.append(e))
    p.flush(20)
    assert errors[:8] == [None] * 8
    assert errors[8] is not None and errors[8].name() == "MSG_SIZE_TOO_LARGE"
    segments = list((Path(broker.data_dir) / f"{t}-0").glob("*.log"))
    assert len(segments) >= 3


# ---------------------------------------------------------------------------------------------
# kafka-python


def kp_admin(bootstrap: str) -> Any:
    from kafka import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20000)


def test_kafka_python_create_describe_alter_delete(broker: BrokerProcess) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = kp_admin(broker.bootstrap)
    try:
        t, v = name("kp"), name("kpv")
        admin.create_topics([NewTopic(t, 2, 1, topic_configs={"cleanup.policy": "compact"})])
        admin.create_topics([NewTopic(v, 1, 1)], validate_only=True)
        topics = set(admin.list_topics())
        assert t in topics and v not in topics
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([NewTopic(t, 1, 1)])
        res = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t)],
                                     config_filter="all")
        flat = _flatten_kp(res)
        assert set(TOPIC_CONFIGS) <= set(flat)
        assert flat["cleanup.policy"]["value"] == "compact"
        assert flat["retention.ms"]["value"] == "604800000"
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, t,
                                            configs={"retention.ms": "12345"})])
        flat = _flatten_kp(admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, t)], config_filter="all"))
        assert flat["retention.ms"]["value"] == "12345"
        admin.create_partitions({t: NewPartitions(total_count=3)})
        desc = admin.describe_topics([t])
        assert len(desc[0]["partitions"]) == 3
        admin.delete_topics([t])
        deadline = time.time() + 10
        while t in set(admin.list_topics()) and time.time() < deadline:
            time.sleep(0.1)
        assert t not in set(admin.list_topics())
        assert partition_dirs(broker, t) == []
    finally:
        admin.close()


def _flatten_kp(res: Any) -> dict[str, dict[str, Any]]:
    """kafka-python 3 describe_configs result -> {config name: entry dict}."""
    out: dict[str, dict[str, Any]] = {}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "value" in node and isinstance(node.get("value"), str | None) and (
                "source" in node or "config_source" in node or "read_only" in node
            ):
                return
            for k, val in node.items():
                if isinstance(val, dict) and ("value" in val) and (
                    "source" in val or "config_source" in val or "read_only" in val
                ):
                    out[k] = val
                else:
                    walk(val)
        elif isinstance(node, list | tuple):
            for x in node:
                walk(x)

    walk(res)
    return out


def test_kafka_python_describe_cluster_and_log_dirs(broker: BrokerProcess) -> None:
    from kafka.admin import NewTopic

    admin = kp_admin(broker.bootstrap)
    try:
        cl = admin.describe_cluster()
        assert cl["controller_id"] == 1
        assert [b["node_id"] if "node_id" in b else b["broker_id"] for b in cl["brokers"]] == [1]
        t = name("ld")
        admin.create_topics([NewTopic(t, 2, 1)])
        dirs = admin.describe_log_dirs()
        text = repr(dirs)
        assert t in text and str(Path(broker.data_dir).resolve()) in text
    finally:
        admin.close()
