"""Admin APIs: the pure parts (config layering and validation, controller checks, paging)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kafkawire.apis import REGISTRY
from kafkawire.apis.create_topics import plan_topic
from kafkawire.apis.describe_log_dirs import select
from kafkawire.apis.describe_topic_partitions import describe
from kafkawire.apis.incremental_alter_configs import ops_of
from kafkawire.config.broker_config import (
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigError,
    validate_topic_config,
)
from kafkawire.config.entries import (
    DYNAMIC_BROKER_CONFIGS,
    ConfigSource,
    ConfigType,
    Synonym,
    apply_incremental,
    broker_config_entries,
    effective_topic_values,
    topic_config_entries,
    validate_broker_changes,
    validate_topic_overrides,
)
from kraft import controller
from kraft.image import RESOURCE_BROKER, MetadataImage, apply
from protocol._generated.config_record import ConfigRecord
from protocol._generated.create_topics_request import CreateTopicsRequest
from protocol._generated.describe_log_dirs_request import DescribeLogDirsRequest
from protocol._generated.describe_topic_partitions_request import (
    DescribeTopicPartitionsRequest,
)
from protocol.errors import ErrorCode, KafkaError

S = ConfigSource


def cluster(*broker_ids: int) -> MetadataImage:
    img = apply(MetadataImage(), controller.bootstrap_records(), 0, 1)
    for b in broker_ids:
        recs = controller.register_broker(
            b, uuid.uuid4(), 1, [("PLAINTEXT", "localhost", 9000 + b, 0)], None, {}
        )
        img = apply(img, recs, img.offset + 1, 1)
    return img


def with_topic(img: MetadataImage, name: str, partitions: int, rf: int = 1,
               configs: dict[str, str] | None = None) -> MetadataImage:
    recs = controller.create_topic(img, name, partitions, rf, configs or {})
    return apply(img, recs, img.offset + len(recs), 1)


def with_records(img: MetadataImage, recs: list[Any]) -> MetadataImage:
    return apply(img, recs, img.offset + len(recs), 1)


def entry(entries: list[Any], name: str) -> Any:
    return next(e for e in entries if e.name == name)


# ---- every API we serve is registered with the versions of the brief ------------------------
@pytest.mark.parametrize(("key", "lo", "hi"), [
    (19, 2, 7), (20, 1, 6), (37, 0, 3), (32, 1, 4), (33, 0, 2), (44, 0, 1), (60, 0, 2),
    (75, 0, 0), (35, 1, 5),
])
def test_registered_versions(key: int, lo: int, hi: int) -> None:
    h = REGISTRY[key]
    assert (h.min_version, h.max_version) == (lo, hi)


# ---- topic config validation: Kafka's messages ----------------------------------------------
@pytest.mark.parametrize(("name", "raw", "message"), [
    ("retention.ms", "abc", "Invalid value abc for configuration retention.ms: Not a number of "
                            "type LONG"),
    ("segment.bytes", "1.5", "Invalid value 1.5 for configuration segment.bytes: Not a number of "
                             "type INT"),
    ("preallocate", "yes", "Invalid value yes for configuration preallocate: Expected value to "
                           "be either true or false"),
    ("segment.ms", "0", "Invalid value 0 for configuration segment.ms: Value must be at least 1"),
    ("retention.ms", "-2", "Invalid value -2 for configuration retention.ms: Value must be at "
                           "least -1"),
    ("min.cleanable.dirty.ratio", "2", "Invalid value 2.0 for configuration "
     "min.cleanable.dirty.ratio: Value must be no more than 1"),
    ("compression.gzip.level", "10", "Invalid value 10 for configuration compression.gzip.level: "
     "Value must be between 1 and 9 or equal to -1"),
    ("cleanup.policy", "remove", "Invalid value remove for configuration cleanup.policy: String "
                                 "must be one of: compact, delete"),
    ("compression.type", "brotli", "Invalid value brotli for configuration compression.type: "
     "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"),
    ("no.such.config", "1", "Unknown topic config name: no.such.config"),
])
def test_topic_config_errors(name: str, raw: str, message: str) -> None:
    with pytest.raises(ConfigError) as ei:
        validate_topic_config(name, raw)
    assert str(ei.value) == message


def test_topic_config_values_are_normalized() -> None:
    assert validate_topic_overrides({"cleanup.policy": " compact , delete"}) == {
        "cleanup.policy": "compact,delete"
    }
    assert validate_topic_overrides({"preallocate": "TRUE", "min.cleanable.dirty.ratio": "1"}) == {
        "preallocate": "true", "min.cleanable.dirty.ratio": "1.0",
    }
    with pytest.raises(KafkaError) as ei:
        validate_topic_overrides({"retention.ms": None, "segment.ms": None})
    assert ei.value.code == ErrorCode.INVALID_CONFIG
    assert ei.value.message == "Null value not supported for topic configs: retention.ms,segment.ms"


# ---- DescribeConfigs entries: sources and synonyms as Kafka reports them ---------------------
def test_topic_entries_cover_every_config_with_default_source() -> None:
    cfg = BrokerConfig.from_dict({})
    entries = topic_config_entries(cfg, cluster(1), {}, include_synonyms=True)
    assert [e.name for e in entries] == sorted(TOPIC_CONFIGS)
    cp = entry(entries, "cleanup.policy")
    assert (cp.value, cp.source, cp.read_only, cp.is_sensitive) == ("delete", S.DEFAULT_CONFIG,
                                                                   False, False)
    assert cp.synonyms == (Synonym("log.cleanup.policy", "delete", S.DEFAULT_CONFIG),)
    assert cp.config_type == ConfigType.LIST
    # Kafka's quirk: the only default synonym (log.retention.hours) is dropped.
    rm = entry(entries, "retention.ms")
    assert (rm.value, rm.source, rm.synonyms) == ("604800000", S.DEFAULT_CONFIG, ())
    assert entry(entries, "segment.ms").value == "604800000"
    assert entry(entries, "max.message.bytes").synonyms == (
        Synonym("message.max.bytes", "1048588", S.DEFAULT_CONFIG),
    )
    assert entry(entries, "min.cleanable.dirty.ratio").value == "0.5"
    assert entry(entries, "preallocate").value == "false"
    assert entry(entries, "remote.storage.enable").synonyms == ()
    assert entry(entries, "retention.ms").config_type == ConfigType.LONG
    assert all(e.documentation is None for e in entries)
    docs = topic_config_entries(cfg, cluster(1), {}, include_documentation=True)
    assert all(e.documentation for e in docs)


def test_topic_entries_override_static_and_dynamic_layers() -> None:
    cfg = BrokerConfig.from_dict({"log.cleanup.policy": "compact", "log.retention.ms": "1000",
                                  "log.retention.hours": "2"})
    img = cluster(1)
    entries = topic_config_entries(cfg, img, {"cleanup.policy": "delete"}, include_synonyms=True)
    cp = entry(entries, "cleanup.policy")
    assert cp.source == S.DYNAMIC_TOPIC_CONFIG and cp.value == "delete"
    assert cp.synonyms == (
        Synonym("cleanup.policy", "delete", S.DYNAMIC_TOPIC_CONFIG),
        Synonym("log.cleanup.policy", "compact", S.STATIC_BROKER_CONFIG),
        Synonym("log.cleanup.policy", "delete", S.DEFAULT_CONFIG),
    )
    rm = entry(entries, "retention.ms")
    assert rm.value == "1000" and rm.source == S.STATIC_BROKER_CONFIG
    assert rm.synonyms == (
        Synonym("log.retention.ms", "1000", S.STATIC_BROKER_CONFIG),
        Synonym("log.retention.hours", "2", S.STATIC_BROKER_CONFIG),
        Synonym("log.retention.hours", "168", S.DEFAULT_CONFIG),
    )
    # dynamic default then per-broker configs win over server.properties
    img = with_records(img, [
        ConfigRecord(resource_type=RESOURCE_BROKER, resource_name="", name="log.retention.ms",
                     value="2000"),
        ConfigRecord(resource_type=RESOURCE_BROKER, resource_name="1",
                     name="log.cleanup.policy", value="compact,delete"),
    ])
    entries = topic_config_entries(cfg, img, {}, include_synonyms=True)
    rm = entry(entries, "retention.ms")
    assert (rm.value, rm.source) == ("2000", S.DYNAMIC_DEFAULT_BROKER_CONFIG)
    cp = entry(entries, "cleanup.policy")
    assert (cp.value, cp.source) == ("compact,delete", S.DYNAMIC_BROKER_CONFIG)
    assert effective_topic_values(cfg, img, {})["retention.ms"] == 2000
    assert effective_topic_values(cfg, img, {"retention.ms": "5"})["retention.ms"] == 5


def test_static_hours_only_reports_default_source_like_kafka() -> None:
    cfg = BrokerConfig.from_dict({"log.retention.hours": "1"})
    rm = entry(topic_config_entries(cfg, cluster(1), {}, include_synonyms=True), "retention.ms")
    assert (rm.value, rm.source, rm.synonyms) == ("3600000", S.DEFAULT_CONFIG, ())


def test_broker_entries() -> None:
    cfg = BrokerConfig.from_dict({"num.partitions": "3", "log.retention.hours": "24"})
    img = cluster(1)
    entries = broker_config_entries(cfg, img, per_broker=True, include_synonyms=True)
    npart = entry(entries, "num.partitions")
    assert (npart.value, npart.source, npart.read_only) == ("3", S.STATIC_BROKER_CONFIG, True)
    assert npart.synonyms == (Synonym("num.partitions", "3", S.STATIC_BROKER_CONFIG),
                              Synonym("num.partitions", "1", S.DEFAULT_CONFIG))
    hours = entry(entries, "log.retention.hours")
    assert (hours.value, hours.source, hours.read_only) == ("24", S.STATIC_BROKER_CONFIG, True)
    assert not entry(entries, "log.retention.ms").read_only
    ms = entry(entries, "log.retention.ms")
    assert (ms.value, ms.source, ms.synonyms) == (None, S.DEFAULT_CONFIG, ())
    dflt = entry(entries, "delete.topic.enable")
    assert (dflt.value, dflt.source) == ("true", S.DEFAULT_CONFIG)
    # the bootstrap's cluster default (Kafka writes it for ELR)
    [mir] = broker_config_entries(cfg, img, per_broker=False)
    assert (mir.name, mir.value, mir.source) == ("min.insync.replicas", "1",
                                                 S.DYNAMIC_DEFAULT_BROKER_CONFIG)
    img = with_records(img, [ConfigRecord(resource_type=RESOURCE_BROKER, resource_name="",
                                          name="message.max.bytes", value="2000000")])
    only = entry(broker_config_entries(cfg, img, per_broker=False, include_synonyms=True),
                 "message.max.bytes")
    assert (only.name, only.value, only.source) == ("message.max.bytes", "2000000",
                                                    S.DYNAMIC_DEFAULT_BROKER_CONFIG)
    mm = entry(broker_config_entries(cfg, img, per_broker=True), "message.max.bytes")
    assert (mm.value, mm.source) == ("2000000", S.DYNAMIC_DEFAULT_BROKER_CONFIG)


def test_broker_dynamic_changes() -> None:
    assert "log.retention.ms" in DYNAMIC_BROKER_CONFIGS
    assert "num.partitions" not in DYNAMIC_BROKER_CONFIGS
    assert validate_broker_changes({"log.cleanup.policy": "compact, delete"}) == {
        "log.cleanup.policy": "compact,delete"
    }
    with pytest.raises(KafkaError) as ei:
        validate_broker_changes({"num.partitions": "3", "log.dirs": "/x"})
    assert ei.value.code == ErrorCode.INVALID_REQUEST
    assert ei.value.message == "Cannot update these configs dynamically: [log.dirs, num.partitions]"
    with pytest.raises(KafkaError) as ei:
        validate_broker_changes({"log.retention.ms": "x"})
    assert (ei.value.code, ei.value.message) == (
        ErrorCode.INVALID_REQUEST,
        "Invalid value x for configuration log.retention.ms: Not a number of type LONG")
    with pytest.raises(KafkaError) as ei:
        validate_broker_changes({"log.cleanup.policy": "foo"})
    assert ei.value.message == ("Invalid value foo for configuration log.cleanup.policy: String "
                                "must be one of: compact, delete")
    assert "log.retention.hours" not in DYNAMIC_BROKER_CONFIGS


# ---- IncrementalAlterConfigs operations ------------------------------------------------------
def test_apply_incremental_ops() -> None:
    kinds = {k: kind for k, (kind, _d, _s) in TOPIC_CONFIGS.items()}
    defaults = {"cleanup.policy": "delete", "retention.ms": "604800000"}
    cur = {"retention.ms": "1000", "segment.ms": "50"}
    new = apply_incremental(cur, [("retention.ms", 0, "2000"), ("segment.ms", 1, None),
                                  ("cleanup.policy", 2, "compact")], defaults, kinds)
    assert new == {"retention.ms": "2000", "cleanup.policy": "delete,compact"}
    new = apply_incremental(new, [("cleanup.policy", 3, "delete"), ("flush.ms", 1, None)],
                            defaults, kinds)
    assert new == {"retention.ms": "2000", "cleanup.policy": "compact"}
    new = apply_incremental({}, [("cleanup.policy", 2, "delete")], defaults, kinds)
    assert new == {"cleanup.policy": "delete"}
    with pytest.raises(KafkaError) as ei:
        apply_incremental({}, [("retention.ms", 2, "1")], defaults, kinds)
    assert ei.value.code == ErrorCode.INVALID_CONFIG
    assert ei.value.message == "Can't APPEND to key retention.ms because its type is not LIST."


def test_incremental_duplicate_keys_and_unknown_ops() -> None:
    class C:
        def __init__(self, name: str, op: int) -> None:
            self.name, self.config_operation, self.value = name, op, "1"

    with pytest.raises(KafkaError) as ei:
        ops_of([C("a", 0), C("a", 1)])
    assert (ei.value.code, ei.value.message) == (ErrorCode.INVALID_REQUEST,
                                                 "Error due to duplicate config keys")
    with pytest.raises(KafkaError) as ei:
        ops_of([C("a", 7)])
    assert ei.value.code == ErrorCode.UNKNOWN_SERVER_ERROR


# ---- CreateTopics planning ------------------------------------------------------------------
def topic(name: str, parts: int = -1, rf: int = -1, configs: dict[str, str | None] | None = None,
          assignments: dict[int, list[int]] | list[tuple[int, list[int]]] | None = None
          ) -> CreateTopicsRequest.CreatableTopic:
    t = CreateTopicsRequest.CreatableTopic(name=name, num_partitions=parts, replication_factor=rf)
    t.configs = [CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                 for k, v in (configs or {}).items()]
    pairs = list(assignments.items()) if isinstance(assignments, dict) else (assignments or [])
    t.assignments = [CreateTopicsRequest.CreatableReplicaAssignment(partition_index=p, broker_ids=b)
                     for p, b in pairs]
    return t


def plan_error(img: MetadataImage, t: CreateTopicsRequest.CreatableTopic,
               cfg: BrokerConfig | None = None) -> tuple[ErrorCode, str | None]:
    with pytest.raises(KafkaError) as ei:
        plan_topic(cfg or BrokerConfig.from_dict({}), img, t)
    return ei.value.code, ei.value.message


def test_plan_topic_defaults_and_configs() -> None:
    cfg = BrokerConfig.from_dict({"num.partitions": "4"})
    records, configs = plan_topic(cfg, cluster(1), topic("a", configs={"cleanup.policy": "compact"}))
    parts = [r for r in records if type(r).__name__ == "PartitionRecord"]
    assert len(parts) == 4 and all(p.replicas == [1] for p in parts)
    assert configs == {"cleanup.policy": "compact"}
    assert any(type(r).__name__ == "ConfigRecord" and r.value == "compact" for r in records)


@pytest.mark.parametrize(("t", "code", "message"), [
    (topic("a", 0, 1), ErrorCode.INVALID_PARTITIONS,
     "Number of partitions was set to an invalid non-positive value."),
    (topic("a", 1, 0), ErrorCode.INVALID_REPLICATION_FACTOR,
     "Replication factor must be larger than 0, or -1 to use the default value."),
    (topic("a", 1, 3), ErrorCode.INVALID_REPLICATION_FACTOR,
     "Unable to replicate the partition 3 time(s): The target replication factor of 3 cannot be "
     "reached because only 2 broker(s) are registered or some brokers have all their log "
     "directories cordoned."),
    (topic("..", 1, 1), ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is invalid: '..' is not allowed"),
    (topic("a b"), ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is invalid: 'a b' contains one "
     "or more characters other than ASCII alphanumerics, '.', '_' and '-'"),
    (topic("exists", 1, 1), ErrorCode.TOPIC_ALREADY_EXISTS, "Topic 'exists' already exists."),
    (topic("ex_ists", 1, 1), ErrorCode.INVALID_TOPIC_EXCEPTION,
     "Topic 'ex_ists' collides with existing topic: ex.ists"),
    (topic(""), ErrorCode.INVALID_TOPIC_EXCEPTION,
     "Topic name is invalid: the empty string is not allowed"),
    (topic("x", configs={"retention.ms": None}), ErrorCode.INVALID_CONFIG,
     "Null value not supported for topic configs: retention.ms"),
    (topic("x", configs={"nope": "1"}), ErrorCode.INVALID_CONFIG, "Unknown topic config name: nope"),
    (topic("x", 2, -1, assignments={0: [1]}), ErrorCode.INVALID_REQUEST,
     "A manual partition assignment was specified, but numPartitions was not set to -1."),
    (topic("x", -1, 1, assignments={0: [1]}), ErrorCode.INVALID_REQUEST,
     "A manual partition assignment was specified, but replication factor was not set to -1."),
    (topic("x", assignments=[(0, [1]), (0, [2])]), ErrorCode.INVALID_REPLICA_ASSIGNMENT,
     "Found multiple manual partition assignments for partition 0"),
    (topic("x", assignments={0: [1], 2: [2]}), ErrorCode.INVALID_REPLICA_ASSIGNMENT,
     "partitions should be a consecutive 0-based integer sequence"),
    (topic("x", assignments={0: [1, 2], 1: [1]}), ErrorCode.INVALID_REPLICA_ASSIGNMENT,
     "The manual partition assignment includes a partition with 1 replica(s), but this is not "
     "consistent with previous partitions, which have 2 replica(s)."),
    (topic("x", assignments={0: [1, 1]}), ErrorCode.INVALID_REPLICA_ASSIGNMENT,
     "The manual partition assignment includes the broker 1 more than once."),
    (topic("x", assignments={0: [5]}), ErrorCode.INVALID_REPLICA_ASSIGNMENT,
     "The manual partition assignment includes broker 5, but no such broker is registered."),
    (topic("x", assignments={0: []}), ErrorCode.INVALID_REPLICA_ASSIGNMENT,
     "The manual partition assignment includes an empty replica list."),
])
def test_plan_topic_errors(t: CreateTopicsRequest.CreatableTopic, code: ErrorCode,
                           message: str | None) -> None:
    img = with_topic(with_topic(cluster(1, 2), "exists", 1), "ex.ists", 1)
    assert plan_error(img, t) == (code, message)


def test_plan_topic_manual_assignment() -> None:
    records, _ = plan_topic(BrokerConfig.from_dict({}), cluster(1, 2),
                            topic("m", assignments={1: [2, 1], 0: [1, 2]}))
    parts = sorted((r.partition_id, r.replicas, r.leader) for r in records
                   if type(r).__name__ == "PartitionRecord")
    assert parts == [(0, [1, 2], 1), (1, [2, 1], 2)]


# ---- CreatePartitions checks ----------------------------------------------------------------
@pytest.mark.parametrize(("count", "assignments", "code", "message"), [
    (2, None, ErrorCode.INVALID_PARTITIONS,
     "The topic t currently has 3 partition(s); 2 would not be an increase."),
    (3, None, ErrorCode.INVALID_PARTITIONS, "Topic already has 3 partition(s)."),
    (5, [[1]], ErrorCode.INVALID_REPLICA_ASSIGNMENT,
     "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified."),
    (4, [[1, 2]], ErrorCode.INVALID_REPLICA_ASSIGNMENT,
     "The manual partition assignment includes a partition with 2 replica(s), but this is not "
     "consistent with previous partitions, which have 1 replica(s)."),
    (4, [[7]], ErrorCode.INVALID_REPLICA_ASSIGNMENT,
     "The manual partition assignment includes broker 7, but no such broker is registered."),
])
def test_create_partitions_errors(count: int, assignments: list[list[int]] | None,
                                  code: ErrorCode, message: str) -> None:
    img = with_topic(cluster(1, 2), "t", 3)
    with pytest.raises(KafkaError) as ei:
        controller.create_partitions(img, "t", count, assignments)
    assert (ei.value.code, ei.value.message) == (code, message)


def test_create_partitions_unknown_and_ok() -> None:
    img = with_topic(cluster(1, 2), "t", 1)
    with pytest.raises(KafkaError) as ei:
        controller.create_partitions(img, "nope", 3, None)
    assert ei.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    recs = controller.create_partitions(img, "t", 3, [[2], [1]])
    assert [(r.partition_id, r.replicas) for r in recs] == [(1, [2]), (2, [1])]


# ---- DescribeTopicPartitions paging ---------------------------------------------------------
def dtp(img: MetadataImage, names: list[str], limit: int,
        cursor: tuple[str, int] | None = None) -> Any:
    req = DescribeTopicPartitionsRequest(
        topics=[DescribeTopicPartitionsRequest.TopicRequest(name=n) for n in names],
        response_partition_limit=limit,
    )
    if cursor is not None:
        req.cursor = DescribeTopicPartitionsRequest.Cursor(topic_name=cursor[0],
                                                           partition_index=cursor[1])
    return describe(img, req, "PLAINTEXT")


def summary(resp: Any) -> tuple[list[tuple[str, int, list[int]]], tuple[str, int] | None]:
    topics = [(t.name, t.error_code, [p.partition_index for p in t.partitions])
              for t in resp.topics]
    cur = resp.next_cursor
    return topics, (None if cur is None else (cur.topic_name, cur.partition_index))


def test_describe_topic_partitions_paging() -> None:
    img = with_topic(with_topic(with_topic(cluster(1), "b", 3), "a", 2), "c", 1)
    assert summary(dtp(img, [], 100)) == (
        [("a", 0, [0, 1]), ("b", 0, [0, 1, 2]), ("c", 0, [0])], None)
    assert summary(dtp(img, [], 3)) == ([("a", 0, [0, 1]), ("b", 0, [0])], ("b", 1))
    assert summary(dtp(img, [], 3, ("b", 1))) == ([("b", 0, [1, 2]), ("c", 0, [0])], None)
    assert summary(dtp(img, [], 2)) == ([("a", 0, [0, 1])], ("b", 0))
    assert summary(dtp(img, [], 0)) == ([("a", 0, [0])], ("a", 1))
    assert summary(dtp(img, ["c", "zz", "a"], 10)) == (
        [("a", 0, [0, 1]), ("c", 0, [0]), ("zz", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, [])], None)
    assert summary(dtp(img, ["a"], 10, ("b", 0))) == (
        [("a", ErrorCode.INVALID_REQUEST, [])], None)
    assert summary(dtp(img, ["a"], 10, ("a", -1))) == (
        [("a", ErrorCode.INVALID_REQUEST, [])], None)
    assert summary(dtp(img, ["bad/name"], 10))[0] == [
        ("bad/name", ErrorCode.INVALID_TOPIC_EXCEPTION, [])]
    p = dtp(img, ["a"], 10).topics[0]
    assert p.topic_authorized_operations > 0 and not p.is_internal
    part = p.partitions[0]
    assert (part.leader_id, part.replica_nodes, part.isr_nodes, part.offline_replicas,
            part.eligible_leader_replicas, part.last_known_elr) == (1, [1], [1], [], [], [])
    other_listener = describe(img, DescribeTopicPartitionsRequest(
        topics=[DescribeTopicPartitionsRequest.TopicRequest(name="a")],
        response_partition_limit=10), "SSL").topics[0].partitions[0]
    assert (other_listener.leader_id, other_listener.offline_replicas) == (-1, [1])


# ---- DescribeLogDirs selection --------------------------------------------------------------
def test_describe_log_dirs_selection() -> None:
    sizes = [(("b", 0), (5, 0, False)), (("a", 0), (10, 0, False)), (("a", 1), (0, 0, False)),
             (("b", 1), (3, 7, True))]  # a future replica: its lag and the flag
    assert [(t.name, [(p.partition_index, p.partition_size, p.offset_lag, p.is_future_key)
                      for p in t.partitions]) for t in select(sizes, None)] == [
        ("a", [(0, 10, 0, False), (1, 0, 0, False)]), ("b", [(0, 5, 0, False), (1, 3, 7, True)])]
    req = [DescribeLogDirsRequest.DescribableLogDirTopic(topic="a", partitions=[1, 7]),
           DescribeLogDirsRequest.DescribableLogDirTopic(topic="zz", partitions=[0])]
    assert [(t.name, [p.partition_index for p in t.partitions])
            for t in select(sizes, req)] == [("a", [1])]
