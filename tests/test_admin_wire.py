"""Admin APIs on the wire: every version we serve, with this repo's codecs over a socket."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from kafkawire.config.broker_config import TOPIC_CONFIGS
from kafkawire.tools.testing import BrokerProcess
from protocol._generated.alter_configs_request import AlterConfigsRequest
from protocol._generated.create_partitions_request import CreatePartitionsRequest
from protocol._generated.create_topics_request import CreateTopicsRequest
from protocol._generated.delete_topics_request import DeleteTopicsRequest
from protocol._generated.describe_cluster_request import DescribeClusterRequest
from protocol._generated.describe_configs_request import DescribeConfigsRequest
from protocol._generated.describe_log_dirs_request import DescribeLogDirsRequest
from protocol._generated.describe_topic_partitions_request import (
    DescribeTopicPartitionsRequest,
)
from protocol._generated.incremental_alter_configs_request import (
    IncrementalAlterConfigsRequest,
)
from protocol.errors import ErrorCode
from protocol.primitives import ZERO_UUID
from tests.conftest import RawClient

CT = CreateTopicsRequest


def nulled(obj: Any, **fields: None) -> Any:
    """Generated constructors turn None arrays into []; set the null afterwards."""
    for k in fields:
        setattr(obj, k, None)
    return obj
DC = DescribeConfigsRequest
IAC = IncrementalAlterConfigsRequest


def uname(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def creatable(name: str, parts: int = 1, rf: int = 1, **configs: str) -> Any:
    return CT.CreatableTopic(
        name=name, num_partitions=parts, replication_factor=rf, assignments=[],
        configs=[CT.CreatableTopicConfig(name=k.replace("_", "."), value=v)
                 for k, v in configs.items()],
    )


def create(raw: RawClient, *topics: Any, version: int = 7, validate_only: bool = False) -> Any:
    return raw.request(CT(topics=list(topics), timeout_ms=10000, validate_only=validate_only),
                       version)


def describe_topic(raw: RawClient, topic: str, version: int = 4, synonyms: bool = True,
                   keys: list[str] | None = None, docs: bool = False) -> Any:
    resp = raw.request(DC(resources=[DC.DescribeConfigsResource(
        resource_type=2, resource_name=topic, configuration_keys=keys)],
        include_synonyms=synonyms, include_documentation=docs), version)
    return resp.results[0]


@pytest.mark.parametrize("version", range(2, 8))
def test_create_topics_every_version(raw: RawClient, version: int) -> None:
    t = uname(f"ct{version}")
    resp = create(raw, creatable(t, 2, 1, cleanup_policy="compact"), version=version)
    [r] = resp.topics
    assert (r.name, r.error_code, r.error_message) == (t, 0, None)
    if version >= 5:
        assert (r.num_partitions, r.replication_factor) == (2, 1)
        names = [c.name for c in r.configs]
        assert names == sorted(TOPIC_CONFIGS)
        cp = next(c for c in r.configs if c.name == "cleanup.policy")
        assert (cp.value, cp.config_source, cp.read_only, cp.is_sensitive) == (
            "compact", 1, False, False)
        rm = next(c for c in r.configs if c.name == "retention.ms")
        assert (rm.value, rm.config_source) == ("604800000", 5)
    if version >= 7:
        assert r.topic_id != ZERO_UUID
    again = create(raw, creatable(t), version=version).topics[0]
    assert again.error_code == ErrorCode.TOPIC_ALREADY_EXISTS
    assert again.error_message == f"Topic '{t}' already exists."
    if version >= 5:
        assert (again.num_partitions, again.replication_factor, again.configs) == (-1, -1, [])


def test_create_topics_request_level_rules(raw: RawClient) -> None:
    a, b = uname("dup"), uname("ok")
    resp = create(raw, creatable(a), creatable(b), creatable(a), creatable("__cluster_metadata"))
    got = [(r.name, r.error_code, r.error_message) for r in resp.topics]
    assert got[0][:2] == (b, 0)
    assert (a, ErrorCode.INVALID_REQUEST, "Duplicate topic name.") in got
    assert ("__cluster_metadata", ErrorCode.INVALID_REQUEST,
            "Creation of internal topic __cluster_metadata is prohibited.") in got
    # defaults from the broker and validate_only answering like a real creation
    v = uname("vo")
    resp = create(raw, creatable(v, -1, -1), validate_only=True)
    r = resp.topics[0]
    assert (r.error_code, r.num_partitions, r.replication_factor) == (0, 1, 1)
    assert r.topic_id != ZERO_UUID
    assert create(raw, creatable(v, 3, 1)).topics[0].num_partitions == 3


def test_create_topics_manual_assignment(raw: RawClient) -> None:
    t = uname("man")
    topic = CT.CreatableTopic(name=t, num_partitions=-1, replication_factor=-1, configs=[],
                              assignments=[CT.CreatableReplicaAssignment(partition_index=i,
                                                                         broker_ids=[1])
                                           for i in (1, 0)])
    r = create(raw, topic).topics[0]
    assert (r.error_code, r.num_partitions, r.replication_factor) == (0, 2, 1)
    bad = CT.CreatableTopic(name=uname("man"), num_partitions=-1, replication_factor=-1,
                            configs=[], assignments=[CT.CreatableReplicaAssignment(
                                partition_index=0, broker_ids=[9])])
    r = create(raw, bad).topics[0]
    assert r.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert r.error_message == ("The manual partition assignment includes broker 9, but no such "
                               "broker is registered.")


@pytest.mark.parametrize("version", range(1, 7))
def test_delete_topics_every_version(raw: RawClient, broker: BrokerProcess, version: int) -> None:
    t = uname(f"dt{version}")
    topic_id = create(raw, creatable(t, 2)).topics[0].topic_id
    missing = uname("missing")
    if version >= 6:
        req = DeleteTopicsRequest(timeout_ms=5000, topics=[
            DeleteTopicsRequest.DeleteTopicState(name=None, topic_id=topic_id),
            DeleteTopicsRequest.DeleteTopicState(name=missing, topic_id=ZERO_UUID),
            DeleteTopicsRequest.DeleteTopicState(name=None, topic_id=uuid.uuid4()),
        ])
    else:
        req = DeleteTopicsRequest(timeout_ms=5000, topic_names=[t, missing])
    resp = raw.request(req, version)
    got = {(r.name, r.error_code) for r in resp.responses}
    assert (t, 0) in got
    assert (missing, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) in got
    if version >= 6:
        assert (None, ErrorCode.UNKNOWN_TOPIC_ID) in got
        ok = next(r for r in resp.responses if r.name == t)
        assert ok.topic_id == topic_id
    if version >= 5:
        miss = next(r for r in resp.responses if r.name == missing)
        assert miss.error_message == "This server does not host this topic-partition."
    assert not list(Path(broker.data_dir).glob(f"{t}-*"))


def test_delete_topics_v6_invalid_combinations(raw: RawClient) -> None:
    t = uname("dv6")
    tid = create(raw, creatable(t)).topics[0].topic_id
    S = DeleteTopicsRequest.DeleteTopicState
    resp = raw.request(DeleteTopicsRequest(timeout_ms=5000, topics=[
        S(name=None, topic_id=ZERO_UUID), S(name=t, topic_id=tid), S(name="x", topic_id=ZERO_UUID),
        S(name="x", topic_id=ZERO_UUID),
    ]), 6)
    got = sorted((r.error_code, r.error_message or "") for r in resp.responses)
    assert got == sorted([
        (ErrorCode.INVALID_REQUEST, "Neither topic name nor id were specified."),
        (ErrorCode.INVALID_REQUEST, "You may not specify both topic name and topic id."),
        (ErrorCode.INVALID_REQUEST, "Duplicate topic name."),
    ])


@pytest.mark.parametrize("version", range(0, 4))
def test_create_partitions_every_version(raw: RawClient, version: int) -> None:
    t = uname(f"cp{version}")
    create(raw, creatable(t, 1))
    P = CreatePartitionsRequest
    resp = raw.request(P(topics=[
        nulled(P.CreatePartitionsTopic(name=t, count=3), assignments=None),
        nulled(P.CreatePartitionsTopic(name=uname("none"), count=3), assignments=None),
    ], timeout_ms=5000, validate_only=False), version)
    assert [(r.name, r.error_code) for r in resp.results] == [
        (t, 0), (resp.results[1].name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    resp = raw.request(P(topics=[
        nulled(P.CreatePartitionsTopic(name=t, count=2), assignments=None),
        nulled(P.CreatePartitionsTopic(name=t, count=5), assignments=None),
    ], timeout_ms=5000, validate_only=False), version)
    assert [(r.name, r.error_code, r.error_message) for r in resp.results] == [
        (t, ErrorCode.INVALID_REQUEST, "Duplicate topic name.")]
    resp = raw.request(P(topics=[P.CreatePartitionsTopic(
        name=t, count=4, assignments=[P.CreatePartitionsAssignment(broker_ids=[1])])],
        timeout_ms=5000, validate_only=True), version)
    assert resp.results[0].error_code == 0
    resp = raw.request(P(topics=[nulled(P.CreatePartitionsTopic(name=t, count=2),
                                        assignments=None)],
                         timeout_ms=5000, validate_only=False), version)
    assert (resp.results[0].error_code, resp.results[0].error_message) == (
        ErrorCode.INVALID_PARTITIONS,
        f"The topic {t} currently has 3 partition(s); 2 would not be an increase.")


@pytest.mark.parametrize("version", range(1, 5))
def test_describe_configs_every_version(raw: RawClient, version: int) -> None:
    t = uname(f"dc{version}")
    create(raw, creatable(t, 1, 1, retention_ms="1000"))
    r = describe_topic(raw, t, version, docs=True)
    assert (r.error_code, r.error_message, r.resource_type, r.resource_name) == (0, "", 2, t)
    by_name = {c.name: c for c in r.configs}
    assert set(by_name) == set(TOPIC_CONFIGS)
    cp = by_name["cleanup.policy"]
    assert (cp.value, cp.config_source, cp.read_only) == ("delete", 5, False)
    assert [(s.name, s.value, s.source) for s in cp.synonyms] == [
        ("log.cleanup.policy", "delete", 5)]
    rm = by_name["retention.ms"]
    assert (rm.value, rm.config_source) == ("1000", 1)
    assert [(s.name, s.value, s.source) for s in rm.synonyms] == [("retention.ms", "1000", 1)]
    if version >= 3:
        assert (cp.config_type, rm.config_type) == (7, 5)
        assert cp.documentation
    keyed = describe_topic(raw, t, version, synonyms=False, keys=["cleanup.policy", "nope"])
    assert [(c.name, c.synonyms) for c in keyed.configs] == [("cleanup.policy", [])]


def test_describe_configs_errors_and_broker(raw: RawClient) -> None:
    R = DC.DescribeConfigsResource
    resp = raw.request(DC(resources=[
        R(resource_type=2, resource_name=uname("none"), configuration_keys=None),
        R(resource_type=2, resource_name="bad name", configuration_keys=None),
        R(resource_type=4, resource_name="1", configuration_keys=["num.partitions"]),
        R(resource_type=4, resource_name="7", configuration_keys=None),
        R(resource_type=4, resource_name="x", configuration_keys=None),
        R(resource_type=4, resource_name="", configuration_keys=None),
        R(resource_type=8, resource_name="1", configuration_keys=None),
        R(resource_type=8, resource_name="", configuration_keys=None),
        R(resource_type=99, resource_name="q", configuration_keys=None),
    ], include_synonyms=True, include_documentation=False), 4)
    codes = [(r.error_code, r.error_message) for r in resp.results]
    assert codes[0] == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "")
    assert codes[1][0] == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert codes[2] == (0, "")
    assert [(c.name, c.value, c.read_only, c.config_type) for c in resp.results[2].configs] == [
        ("num.partitions", "1", True, 3)]
    assert codes[3] == (ErrorCode.INVALID_REQUEST,
                        "Unexpected broker id, expected 1 or empty string, but received 7")
    assert codes[4] == (ErrorCode.INVALID_REQUEST, "Broker id must be an integer, but it is: x")
    # a fresh cluster has Kafka's ELR bootstrap config: min.insync.replicas as a dynamic
    # cluster default
    assert codes[5] == (0, "")
    assert [(c.name, c.value, c.config_source) for c in resp.results[5].configs] == [
        ("min.insync.replicas", "1", 3)]
    assert codes[6] == (0, "")
    loggers = {c.name: c for c in resp.results[6].configs}
    assert loggers["root"].config_source == 6 and loggers["root"].value
    assert codes[7] == (ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
    assert codes[8][0] == ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize("version", range(0, 3))
def test_alter_configs_every_version(raw: RawClient, version: int) -> None:
    t = uname(f"ac{version}")
    create(raw, creatable(t, 1, 1, retention_ms="1000"))
    A = AlterConfigsRequest

    def alter(rtype: int, rname: str, validate_only: bool = False, **cfg: str | None) -> Any:
        return raw.request(A(resources=[A.AlterConfigsResource(
            resource_type=rtype, resource_name=rname,
            configs=[A.AlterableConfig(name=k.replace("_", "."), value=v) for k, v in cfg.items()],
        )], validate_only=validate_only), version).responses[0]

    r = alter(2, t, segment_ms="100000")
    assert (r.error_code, r.resource_type, r.resource_name) == (0, 2, t)
    by_name = {c.name: c for c in describe_topic(raw, t).configs}
    assert by_name["segment.ms"].value == "100000"
    assert by_name["retention.ms"].config_source == 5  # removed: full replacement
    r = alter(2, t, validate_only=True, segment_ms="1")
    assert r.error_code == 0
    assert {c.name: c.value for c in describe_topic(raw, t).configs}["segment.ms"] == "100000"
    r = alter(2, t, retention_ms=None)
    assert (r.error_code, r.error_message) == (
        ErrorCode.INVALID_REQUEST, "Null value not supported for : retention.ms")
    r = alter(2, "", retention_ms="1")
    assert (r.error_code, r.error_message) == (
        ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed.")
    r = alter(4, "1", num_partitions="3")
    assert (r.error_code, r.error_message) == (
        ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: [num.partitions]")
    r = alter(77, "x", a="b")
    assert (r.error_code, r.error_message) == (ErrorCode.INVALID_REQUEST,
                                               "Unknown resource type 77")


@pytest.mark.parametrize("version", range(0, 2))
def test_incremental_alter_configs_every_version(raw: RawClient, version: int) -> None:
    t = uname(f"iac{version}")
    create(raw, creatable(t))

    def alter(*ops: tuple[str, int, str | None], rtype: int = 2, rname: str | None = None,
              validate_only: bool = False) -> Any:
        res = IAC.AlterConfigsResource(
            resource_type=rtype, resource_name=t if rname is None else rname,
            configs=[IAC.AlterableConfig(name=n, config_operation=op, value=v)
                     for n, op, v in ops])
        return raw.request(IAC(resources=[res], validate_only=validate_only), version).responses[0]

    assert alter(("cleanup.policy", 2, "compact"), ("retention.ms", 0, "5000")).error_code == 0
    values = {c.name: c.value for c in describe_topic(raw, t).configs}
    assert (values["cleanup.policy"], values["retention.ms"]) == ("delete,compact", "5000")
    assert alter(("retention.ms", 0, "1"), validate_only=True).error_code == 0
    assert {c.name: c.value for c in describe_topic(raw, t).configs}["retention.ms"] == "5000"
    r = alter(("retention.ms", 0, "1"), ("retention.ms", 1, None))
    assert (r.error_code, r.error_message) == (ErrorCode.INVALID_REQUEST,
                                               "Error due to duplicate config keys")
    r = alter(("segment.bytes", 0, "big"))
    assert (r.error_code, r.error_message) == (
        ErrorCode.INVALID_CONFIG,
        "Invalid value big for configuration segment.bytes: Not a number of type INT")
    r = alter(("retention.ms", 0, "1"), rname=uname("none"))
    assert r.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # broker logger levels change at once
    assert alter(("kafkawire.broker", 0, "DEBUG"), rtype=8, rname="1").error_code == 0
    loggers = raw.request(DC(resources=[DC.DescribeConfigsResource(
        resource_type=8, resource_name="1", configuration_keys=["kafkawire.broker"])],
        include_synonyms=False, include_documentation=False), 4).results[0].configs
    assert [(c.name, c.value) for c in loggers] == [("kafkawire.broker", "DEBUG")]
    assert alter(("kafkawire.broker", 1, None), rtype=8, rname="1").error_code == 0
    assert alter(("kafkawire.broker", 0, "LOUD"), rtype=8, rname="1").error_code == (
        ErrorCode.INVALID_CONFIG)


def test_dynamic_broker_defaults_feed_topic_configs(own_broker: BrokerProcess) -> None:
    raw = RawClient(own_broker.bootstrap)
    try:
        t = uname("dyn")
        create(raw, creatable(t))
        res = IAC.AlterConfigsResource(resource_type=4, resource_name="", configs=[
            IAC.AlterableConfig(name="log.retention.ms", config_operation=0, value="7200000"),
            IAC.AlterableConfig(name="message.max.bytes", config_operation=0, value="2000000"),
        ])
        assert raw.request(IAC(resources=[res], validate_only=False), 1).responses[0].error_code == 0
        by_name = {c.name: c for c in describe_topic(raw, t).configs}
        rm = by_name["retention.ms"]
        assert (rm.value, rm.config_source) == ("7200000", 3)
        assert [(s.name, s.source) for s in rm.synonyms][0] == ("log.retention.ms", 3)
        assert by_name["max.message.bytes"].value == "2000000"
        default = raw.request(DC(resources=[DC.DescribeConfigsResource(
            resource_type=4, resource_name="", configuration_keys=None)],
            include_synonyms=True, include_documentation=False), 4).results[0]
        assert sorted((c.name, c.value, c.config_source) for c in default.configs) == [
            ("log.retention.ms", "7200000", 3), ("message.max.bytes", "2000000", 3),
            ("min.insync.replicas", "1", 3)]
        # survives a restart: the ConfigRecords are in the metadata log
        raw.close()
        own_broker.restart()
        raw = RawClient(own_broker.bootstrap)
        assert {c.name: c.value for c in describe_topic(raw, t).configs}["retention.ms"] == (
            "7200000")
        # a per-broker value beats the cluster default; a static key is refused
        res = IAC.AlterConfigsResource(resource_type=4, resource_name="1", configs=[
            IAC.AlterableConfig(name="log.retention.ms", config_operation=0, value="60000"),
        ])
        assert raw.request(IAC(resources=[res], validate_only=False), 1).responses[0].error_code == 0
        rm = {c.name: c for c in describe_topic(raw, t).configs}["retention.ms"]
        assert (rm.value, rm.config_source) == ("60000", 2)
        res = IAC.AlterConfigsResource(resource_type=4, resource_name="1", configs=[
            IAC.AlterableConfig(name="log.dirs", config_operation=0, value="/x"),
        ])
        r = raw.request(IAC(resources=[res], validate_only=False), 1).responses[0]
        assert (r.error_code, r.error_message) == (
            ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: [log.dirs]")
    finally:
        raw.close()


@pytest.mark.parametrize("version", range(0, 3))
def test_describe_cluster_every_version(raw: RawClient, broker: BrokerProcess,
                                        version: int) -> None:
    resp = raw.request(DescribeClusterRequest(include_cluster_authorized_operations=False,
                                              endpoint_type=1, include_fenced_brokers=True),
                       version)
    assert (resp.error_code, resp.controller_id) == (0, 1)
    assert resp.cluster_id
    assert [(b.broker_id, b.host, b.port, b.is_fenced if version >= 2 else False)
            for b in resp.brokers] == [(1, "127.0.0.1", broker.port, False)]
    assert resp.cluster_authorized_operations == -2147483648
    ops = raw.request(DescribeClusterRequest(include_cluster_authorized_operations=True,
                                             endpoint_type=1), version)
    assert ops.cluster_authorized_operations > 0
    if version >= 1:
        assert resp.endpoint_type == 1
        bad = raw.request(DescribeClusterRequest(endpoint_type=2), version)
        assert bad.error_code == ErrorCode.MISMATCHED_ENDPOINT_TYPE
        bad = raw.request(DescribeClusterRequest(endpoint_type=9), version)
        assert bad.error_code == ErrorCode.UNSUPPORTED_ENDPOINT_TYPE


def test_describe_topic_partitions_pages(raw: RawClient) -> None:
    a, b = uname("pa"), uname("pb")
    create(raw, creatable(a, 3), creatable(b, 2))
    R = DescribeTopicPartitionsRequest
    missing = uname("pz")
    names = [a, b, missing]
    seen: list[tuple[str, int]] = []
    cursor = None
    for _ in range(10):
        resp = raw.request(R(topics=[R.TopicRequest(name=n) for n in names],
                             response_partition_limit=2, cursor=cursor), 0)
        for t in resp.topics:
            if t.name == missing:
                assert t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            assert t.error_code == 0 and t.topic_id != ZERO_UUID
            seen.extend((t.name, p.partition_index) for p in t.partitions)
            assert all(p.leader_id == 1 and p.replica_nodes == [1] for p in t.partitions)
        if resp.next_cursor is None:
            break
        cursor = R.Cursor(topic_name=resp.next_cursor.topic_name,
                          partition_index=resp.next_cursor.partition_index)
    assert seen == [(a, 0), (a, 1), (a, 2), (b, 0), (b, 1)]


@pytest.mark.parametrize("version", range(1, 6))
def test_describe_log_dirs_every_version(raw: RawClient, broker: BrokerProcess,
                                         version: int) -> None:
    t = uname(f"ld{version}")
    create(raw, creatable(t, 2))
    T = DescribeLogDirsRequest.DescribableLogDirTopic
    resp = raw.request(DescribeLogDirsRequest(topics=[T(topic=t, partitions=[1, 5])]), version)
    [d] = resp.results
    assert d.error_code == 0
    assert Path(d.log_dir) == Path(broker.data_dir).resolve()
    assert [(x.name, [(p.partition_index, p.partition_size, p.offset_lag, p.is_future_key)
                      for p in x.partitions]) for x in d.topics] == [(t, [(1, 0, 0, False)])]
    if version >= 4:
        assert d.total_bytes > 0 and 0 <= d.usable_bytes <= d.total_bytes
    everything = raw.request(nulled(DescribeLogDirsRequest(), topics=None), version).results[0]
    names = {x.name for x in everything.topics}
    assert t in names and "__cluster_metadata" not in names
