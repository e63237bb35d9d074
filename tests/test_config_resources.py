"""Group configs (KIP-848), client-metrics subscriptions (KIP-714) and Kafka's reconfigurable
dynamic broker configs, against a real broker process: raw wire (error codes and Kafka's
messages), confluent-kafka's AdminClient, Kafka's kafka-configs / kafka-client-metrics of both
client lines, the KIP-848 coordinator using a group's session timeout and heartbeat interval,
a dynamic producer.id.expiration.ms, and restart survival."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import RawClient
from group_helpers import GROUP_OVERRIDES, group_broker, ready_raw

from kafkawire.testing import BrokerProcess
from protocol._generated.alter_configs_request import AlterConfigsRequest
from protocol._generated.consumer_group_describe_request import ConsumerGroupDescribeRequest
from protocol._generated.consumer_group_heartbeat_request import ConsumerGroupHeartbeatRequest
from protocol._generated.describe_configs_request import DescribeConfigsRequest
from protocol._generated.incremental_alter_configs_request import (
    IncrementalAlterConfigsRequest as IAC,
)
from protocol._generated.list_config_resources_request import ListConfigResourcesRequest
from protocol.errors import ErrorCode
from tests.javatools import JavaTools

GROUP, CLIENT_METRICS, BROKER = 32, 16, 4
SET, DELETE, APPEND = 0, 1, 2
DYNAMIC_GROUP_CONFIG, CLIENT_METRICS_CONFIG = 8, 7
DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, DEFAULT_CONFIG = 2, 3, 5


def iac(c: RawClient, rtype: int, name: str, ops: list[tuple[str, int, str | None]]
        ) -> tuple[int, str | None]:
    req = IAC(resources=[IAC.AlterConfigsResource(
        resource_type=rtype, resource_name=name,
        configs=[IAC.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops],
    )], validate_only=False)
    r = c.request(req, 1).responses[0]
    return r.error_code, r.error_message


def legacy(c: RawClient, rtype: int, name: str, configs: dict[str, str]) -> tuple[int, str | None]:
    R = AlterConfigsRequest
    req = R(resources=[R.AlterConfigsResource(
        resource_type=rtype, resource_name=name,
        configs=[R.AlterableConfig(name=k, value=v) for k, v in configs.items()])],
        validate_only=False)
    r = c.request(req, 2).responses[0]
    return r.error_code, r.error_message


def describe(c: RawClient, rtype: int, name: str, keys: list[str] | None = None) -> Any:
    R = DescribeConfigsRequest
    req = R(resources=[R.DescribeConfigsResource(resource_type=rtype, resource_name=name,
                                                 configuration_keys=keys)],
            include_synonyms=True, include_documentation=False)
    return c.request(req, 4).results[0]


def entries(c: RawClient, rtype: int, name: str, keys: list[str] | None = None) -> dict[str, Any]:
    res = describe(c, rtype, name, keys)
    assert res.error_code == 0, res
    return {e.name: e for e in res.configs}


def listed(c: RawClient, types: list[int], version: int = 1) -> list[tuple[str, int]]:
    r = c.request(ListConfigResourcesRequest(resource_types=types), version)
    assert r.error_code == 0
    return sorted((x.resource_name, x.resource_type) for x in r.config_resources)


def test_group_configs_wire(raw: RawClient) -> None:
    g = f"gc-{uuid.uuid4().hex[:8]}"
    before = entries(raw, GROUP, g)
    assert len(before) == 17
    s = before["consumer.session.timeout.ms"]
    assert (s.value, s.config_source, s.read_only, s.config_type) == ("45000", DEFAULT_CONFIG,
                                                                      False, 3)
    assert [(x.name, x.value, x.source) for x in s.synonyms] == [
        ("group.consumer.session.timeout.ms", "45000", DEFAULT_CONFIG)]
    assert iac(raw, GROUP, g, [("consumer.session.timeout.ms", SET, "50000"),
                               ("share.renew.acknowledge.enable", SET, "FALSE")]) == (0, None)
    after = entries(raw, GROUP, g, ["consumer.session.timeout.ms",
                                    "share.renew.acknowledge.enable"])
    s = after["consumer.session.timeout.ms"]
    assert (s.value, s.config_source) == ("50000", DYNAMIC_GROUP_CONFIG)
    assert [(x.name, x.value, x.source) for x in s.synonyms] == [
        ("consumer.session.timeout.ms", "50000", DYNAMIC_GROUP_CONFIG),
        ("group.consumer.session.timeout.ms", "45000", DEFAULT_CONFIG)]
    assert after["share.renew.acknowledge.enable"].value == "false"
    bad = {
        ("consumer.session.timeout.ms", "5000"): "consumer.session.timeout.ms must be greater "
        "than or equal to group.consumer.min.session.timeout.ms",
        ("consumer.heartbeat.interval.ms", "20000"): "consumer.heartbeat.interval.ms must be "
        "less than or equal to group.consumer.max.heartbeat.interval.ms",
        ("consumer.session.timeout.ms", "abc"): "Invalid value abc for configuration "
        "consumer.session.timeout.ms: Not a number of type INT",
        ("consumer.session.timeout.ms", "-1"): "Invalid value -1 for configuration "
        "consumer.session.timeout.ms: Value must be at least 1",
        ("share.isolation.level", "x"): "Invalid value x for configuration "
        "share.isolation.level: String must be one of: read_committed, read_uncommitted",
        ("streams.num.standby.replicas", "5"): "streams.num.standby.replicas must be less than "
        "or equal to group.streams.max.standby.replicas",
        ("foo", "5000"): "Unknown group config name: foo",
    }
    for (key, value), message in bad.items():
        assert iac(raw, GROUP, g, [(key, SET, value)]) == (ErrorCode.INVALID_CONFIG, message)
    assert iac(raw, GROUP, g, [("consumer.session.timeout.ms", APPEND, "1")]) == (
        ErrorCode.INVALID_CONFIG,
        "Can't APPEND to key consumer.session.timeout.ms because its type is not LIST.")
    assert iac(raw, GROUP, "", [("consumer.session.timeout.ms", SET, "50000")]) == (
        ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")
    empty = describe(raw, GROUP, "")
    assert (empty.error_code, empty.error_message) == (ErrorCode.INVALID_REQUEST,
                                                       "Group name must not be empty")
    assert (g, GROUP) in listed(raw, [GROUP])
    # legacy AlterConfigs replaces the group's whole set
    assert legacy(raw, GROUP, g, {"consumer.heartbeat.interval.ms": "6000"}) == (0, None)
    now = entries(raw, GROUP, g, ["consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"])
    assert now["consumer.session.timeout.ms"].config_source == DEFAULT_CONFIG
    assert now["consumer.heartbeat.interval.ms"].value == "6000"
    assert iac(raw, GROUP, g, [("consumer.heartbeat.interval.ms", DELETE, None)]) == (0, None)
    assert (g, GROUP) not in listed(raw, [GROUP])


def test_client_metrics_wire(raw: RawClient) -> None:
    m = f"cm-{uuid.uuid4().hex[:8]}"
    unset = entries(raw, CLIENT_METRICS, m)
    assert {k: (e.value, e.config_source) for k, e in unset.items()} == {
        "interval.ms": ("300000", DEFAULT_CONFIG), "match": ("", DEFAULT_CONFIG),
        "metrics": ("", DEFAULT_CONFIG)}
    assert iac(raw, CLIENT_METRICS, m, [
        ("metrics", SET, "org.apache.kafka.producer., org.apache.kafka.consumer.fetch"),
        ("interval.ms", SET, "5000"), ("match", SET, "client_id=app-.*")]) == (0, None)
    got = entries(raw, CLIENT_METRICS, m)
    assert got["metrics"].value == "org.apache.kafka.producer.,org.apache.kafka.consumer.fetch"
    assert (got["interval.ms"].value, got["interval.ms"].config_source) == (
        "5000", CLIENT_METRICS_CONFIG)
    assert [(s.name, s.source) for s in got["match"].synonyms] == [("match",
                                                                    CLIENT_METRICS_CONFIG)]
    assert iac(raw, CLIENT_METRICS, m, [("interval.ms", SET, "50")]) == (
        ErrorCode.INVALID_REQUEST,
        "Invalid value 50 for interval.ms, interval must be between 100 and 3600000 (1 hour)")
    assert iac(raw, CLIENT_METRICS, m, [("interval.ms", SET, "abc")]) == (
        ErrorCode.INVALID_CONFIG,
        "Invalid value abc for configuration interval.ms: Not a number of type INT")
    for bad in ("foo=bar", "client_id", "client_id=[a"):
        assert iac(raw, CLIENT_METRICS, m, [("match", SET, bad)]) == (
            ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {bad}")
    assert iac(raw, CLIENT_METRICS, m, [("other.key", SET, "1")]) == (
        ErrorCode.INVALID_REQUEST, "Unknown client metrics configuration: other.key")
    assert iac(raw, CLIENT_METRICS, m, [("metrics", APPEND, "x")])[0] == ErrorCode.INVALID_CONFIG
    assert iac(raw, CLIENT_METRICS, "", [("interval.ms", SET, "5000")]) == (
        ErrorCode.INVALID_REQUEST, "Subscription name can't be empty")
    assert (m, CLIENT_METRICS) in listed(raw, [CLIENT_METRICS])
    assert (m, CLIENT_METRICS) in listed(raw, [], version=0)
    assert iac(raw, CLIENT_METRICS, m, [("metrics", DELETE, None), ("interval.ms", DELETE, None),
                                        ("match", DELETE, None)]) == (0, None)
    assert (m, CLIENT_METRICS) not in listed(raw, [CLIENT_METRICS])


def test_dynamic_broker_configs_wire(own_broker: BrokerProcess) -> None:
    raw = RawClient(own_broker.bootstrap)
    try:
        keys = ["log.cleaner.threads", "num.io.threads", "max.connections",
                "producer.id.expiration.ms", "log.cleaner.io.max.bytes.per.second",
                "num.partitions", "group.consumer.session.timeout.ms"]
        before = entries(raw, BROKER, "1", keys)
        assert {k: e.read_only for k, e in before.items()} == {
            "log.cleaner.threads": False, "num.io.threads": False, "max.connections": False,
            "producer.id.expiration.ms": False, "log.cleaner.io.max.bytes.per.second": False,
            "num.partitions": True, "group.consumer.session.timeout.ms": True}
        assert before["log.cleaner.io.max.bytes.per.second"].value == "1.7976931348623157E308"
        for key, value in (("log.cleaner.threads", "2"), ("num.io.threads", "4"),
                           ("max.connections", "1000"), ("producer.id.expiration.ms", "3600000"),
                           ("log.cleaner.io.max.bytes.per.second", "1000000")):
            assert iac(raw, BROKER, "1", [(key, SET, value)]) == (0, None), key
            assert iac(raw, BROKER, "", [(key, SET, value)]) == (0, None), key
        got = entries(raw, BROKER, "1", keys)
        assert (got["num.io.threads"].value, got["num.io.threads"].config_source) == (
            "4", DYNAMIC_BROKER_CONFIG)
        assert [(s.source, s.value) for s in got["num.io.threads"].synonyms] == [
            (DYNAMIC_BROKER_CONFIG, "4"), (DYNAMIC_DEFAULT_BROKER_CONFIG, "4"),
            (DEFAULT_CONFIG, "8")]
        assert got["log.cleaner.io.max.bytes.per.second"].value == "1000000.0"
        assert iac(raw, BROKER, "1", [("min.insync.replicas", SET, "2")]) == (
            ErrorCode.INVALID_CONFIG,
            "Broker-level min.insync.replicas cannot be altered while ELR is enabled.")
        assert iac(raw, BROKER, "", [("min.insync.replicas", SET, "1")]) == (0, None)
        assert iac(raw, BROKER, "1", [("num.io.threads", SET, "100")]) == (
            ErrorCode.INVALID_REQUEST,
            "Invalid value org.apache.kafka.common.config.ConfigException: Dynamic thread "
            "count update validation failed for num.io.threads=100, value should not be "
            "greater than double the current value 4 for configuration Invalid dynamic "
            "configuration")
        assert iac(raw, BROKER, "1", [("max.connections", SET, "-1")]) == (
            ErrorCode.INVALID_REQUEST,
            "Invalid value -1 for configuration max.connections: Value must be at least 0")
        assert iac(raw, BROKER, "1", [("num.partitions", SET, "3")]) == (
            ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: [num.partitions]")
        assert iac(raw, BROKER, "", [("listeners", SET, "PLAINTEXT://127.0.0.1:1")]) == (
            ErrorCode.INVALID_REQUEST, "Cannot update these configs at default cluster level, "
            "broker id must be specified: [listeners]")
        assert legacy(raw, BROKER, "", {"num.io.threads": "6"}) == (
            ErrorCode.INVALID_CONFIG,
            "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.")
        # the dynamic configs are KRaft ConfigRecords: they survive a restart
        own_broker.restart()
    finally:
        raw.close()
    raw = RawClient(own_broker.bootstrap)
    try:
        got = entries(raw, BROKER, "1", keys)
        assert (got["max.connections"].value, got["max.connections"].config_source) == (
            "1000", DYNAMIC_BROKER_CONFIG)
        assert entries(raw, BROKER, "")["log.cleaner.threads"].value == "2"
    finally:
        raw.close()


def test_group_and_client_metrics_configs_survive_restart(own_broker: BrokerProcess) -> None:
    raw = RawClient(own_broker.bootstrap)
    try:
        assert iac(raw, GROUP, "g-restart", [("consumer.session.timeout.ms", SET, "55000")]) == (
            0, None)
        assert iac(raw, CLIENT_METRICS, "m-restart", [("interval.ms", SET, "7000")]) == (0, None)
    finally:
        raw.close()
    own_broker.restart(kill=True)
    raw = RawClient(own_broker.bootstrap)
    try:
        assert entries(raw, GROUP, "g-restart")["consumer.session.timeout.ms"].value == "55000"
        assert entries(raw, CLIENT_METRICS, "m-restart")["interval.ms"].value == "7000"
        assert listed(raw, [GROUP, CLIENT_METRICS]) == [("g-restart", GROUP),
                                                        ("m-restart", CLIENT_METRICS)]
    finally:
        raw.close()


@pytest.fixture(scope="module")
def short_sessions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """Group config bounds low enough to test session expiry within seconds."""
    yield from group_broker(tmp_path_factory.mktemp("kwgc") / "data", **{
        "group.consumer.min.session.timeout.ms": "1000",
        "group.consumer.min.heartbeat.interval.ms": "100",
        "group.consumer.assignment.interval.ms": "0",
    })


def _heartbeat(c: RawClient, group: str, member: str, epoch: int) -> Any:
    req = ConsumerGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=epoch)
    if epoch == 0:
        req.rebalance_timeout_ms = 30000
        req.subscribed_topic_names = ["gc-topic"]
        req.topic_partitions = []
    return c.request(req, 1)


def test_coordinator_uses_group_session_timeout_and_heartbeat_interval(
    short_sessions: BrokerProcess,
) -> None:
    assert "group.consumer.min.session.timeout.ms" not in GROUP_OVERRIDES
    c = ready_raw(short_sessions.bootstrap)
    try:
        g = f"gcs-{uuid.uuid4().hex[:6]}"
        r = _heartbeat(c, g, "m1", 0)
        assert r.error_code == 0 and r.heartbeat_interval_ms == 500  # the broker config
        assert iac(c, GROUP, g, [("consumer.heartbeat.interval.ms", SET, "700"),
                                 ("consumer.session.timeout.ms", SET, "2000")]) == (0, None)
        # applied at the member's next heartbeat, as Kafka does
        r = _heartbeat(c, g, "m1", r.member_epoch)
        assert r.error_code == 0 and r.heartbeat_interval_ms == 700
        # no heartbeat for longer than the group's 2 s session: the member is removed
        time.sleep(4)
        d = c.request(ConsumerGroupDescribeRequest(group_ids=[g]), 0).groups[0]
        assert d.members == [], d
        assert _heartbeat(c, g, "m1", r.member_epoch).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    finally:
        c.close()


def test_dynamic_producer_id_expiration(tmp_path: Any) -> None:
    """producer.id.expiration.ms changed at run time reaches the partition logs."""
    from confluent_kafka import Producer

    with BrokerProcess(tmp_path / "data", overrides={
        "producer.id.expiration.check.interval.ms": "200"}) as bp:
        raw = RawClient(bp.bootstrap)
        try:
            from protocol._generated.describe_producers_request import DescribeProducersRequest

            p = Producer({"bootstrap.servers": bp.bootstrap, "enable.idempotence": True})
            p.produce("pid-exp", b"v")
            assert p.flush(30) == 0
            req = DescribeProducersRequest(topics=[DescribeProducersRequest.TopicRequest(
                name="pid-exp", partition_indexes=[0])])

            def producers() -> int:
                return len(raw.request(req, 0).topics[0].partitions[0].active_producers)

            assert producers() == 1
            assert iac(raw, BROKER, "", [("producer.id.expiration.ms", SET, "500")]) == (0, None)
            deadline = time.monotonic() + 20
            while producers() and time.monotonic() < deadline:
                time.sleep(0.2)
            assert producers() == 0
        finally:
            raw.close()


def _java_group_configs(tools: JavaTools, b: list[str], java_line: str) -> None:
    g = f"jg-{java_line}-{uuid.uuid4().hex[:6]}"
    grp = ["--entity-type", "groups", "--entity-name", g]
    out = tools.run("configs", *b, "--alter", *grp, "--add-config",
                    "consumer.session.timeout.ms=50000").output
    assert f"Completed updating config for group {g}." in out
    out = tools.run("configs", *b, "--describe", *grp).output
    assert "consumer.session.timeout.ms=50000 sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:" \
        "consumer.session.timeout.ms=50000, DEFAULT_CONFIG:group.consumer.session.timeout.ms=" \
        "45000}" in out
    res = tools.run("configs", *b, "--alter", *grp, "--add-config",
                    "consumer.session.timeout.ms=5000", check=False)
    assert res.returncode != 0 and "must be greater than or equal to " \
        "group.consumer.min.session.timeout.ms" in res.output
    res = tools.run("configs", *b, "--alter", *grp, "--add-config", "foo=1", check=False)
    assert res.returncode != 0 and "Unknown group config name: foo" in res.output


@pytest.mark.slow
def test_java_config_tools_groups_and_client_metrics(broker: BrokerProcess,
                                                     java_line: str) -> None:
    tools = JavaTools(java_line)
    b = ["--bootstrap-server", broker.bootstrap]
    if java_line == "4.x":  # 3.9's kafka-configs has no groups entity type
        _java_group_configs(tools, b, java_line)
    m = f"jm-{java_line}-{uuid.uuid4().hex[:6]}"
    out = tools.run("client-metrics", *b, "--alter", "--name", m, "--metrics",
                    "org.apache.kafka.producer.", "--interval", "5000").output
    assert f"Altered client metrics config for {m}." in out
    out = tools.run("client-metrics", *b, "--describe", "--name", m).output
    assert "interval.ms=5000" in out and "metrics=org.apache.kafka.producer." in out
    assert m in tools.run("client-metrics", *b, "--list").output.split()
    tools.run("client-metrics", *b, "--delete", "--name", m)
    assert m not in tools.run("client-metrics", *b, "--list").output.split()
    brk = ["--entity-type", "brokers", "--entity-name", "1"]
    out = tools.run("configs", *b, "--alter", *brk, "--add-config",
                    "log.cleaner.threads=2,max.connections=1000").output
    assert "Completed updating config for broker 1." in out
    out = tools.run("configs", *b, "--describe", *brk).output
    assert "max.connections=1000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:" \
        "max.connections=1000, DEFAULT_CONFIG:max.connections=2147483647}" in out
    res = tools.run("configs", *b, "--alter", *brk, "--add-config", "min.insync.replicas=2",
                    check=False)
    assert res.returncode != 0 and "Broker-level min.insync.replicas cannot be altered while " \
        "ELR is enabled." in res.output
    tools.run("configs", *b, "--alter", *brk, "--delete-config",
              "log.cleaner.threads,max.connections")


def test_confluent_admin_dynamic_broker_and_group_configs(broker: BrokerProcess) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    res = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry("num.io.threads", "6", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(30)
    got = admin.describe_configs([ConfigResource(ResourceType.BROKER, "1")])
    entry = next(iter(got.values())).result(30)["num.io.threads"]
    assert (entry.value, entry.is_read_only) == ("6", False)
    res = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry("num.io.threads", None, incremental_operation=AlterConfigOpType.DELETE)])
    admin.incremental_alter_configs([res])[res].result(30)
    # librdkafka maps ResourceType.GROUP to the GROUP (32) config resource
    g = f"cg-{uuid.uuid4().hex[:6]}"
    res = ConfigResource(ResourceType.GROUP, g, incremental_configs=[
        ConfigEntry("consumer.heartbeat.interval.ms", "7000",
                    incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(30)
    got = admin.describe_configs([ConfigResource(ResourceType.GROUP, g)])
    assert next(iter(got.values())).result(30)["consumer.heartbeat.interval.ms"].value == "7000"


def test_dynamic_connection_limits(own_broker: BrokerProcess) -> None:
    """max.connections.per.ip closes the extra connection; max.connections makes it wait."""
    import socket

    from protocol._generated.api_versions_request import ApiVersionsRequest

    def answers(c: RawClient) -> bool:
        try:
            return c.request(ApiVersionsRequest(), 0).error_code == 0
        except (ConnectionError, OSError):
            return False

    admin = RawClient(own_broker.bootstrap)
    try:
        assert iac(admin, BROKER, "", [("max.connections.per.ip", SET, "2")]) == (0, None)
        second = RawClient(own_broker.bootstrap)
        assert answers(second)
        third = RawClient(own_broker.bootstrap)
        assert not answers(third)  # closed by the broker: the address has 2 already
        third.close()
        second.close()
        deadline = time.monotonic() + 10
        while True:  # the broker sees the close asynchronously
            again = RawClient(own_broker.bootstrap)
            if answers(again) or time.monotonic() > deadline:
                break
            again.close()
        assert answers(again)
        again.close()
        assert iac(admin, BROKER, "", [("max.connections.per.ip", DELETE, None),
                                       ("max.connections", SET, "2")]) == (0, None)
        second = RawClient(own_broker.bootstrap)
        assert answers(second)
        waiting = RawClient(own_broker.bootstrap)
        waiting.sock.settimeout(1.5)
        with pytest.raises(socket.timeout):  # not served while 2 connections are open
            waiting.request(ApiVersionsRequest(), 0)
        second.close()
        waiting.sock.settimeout(10)
        frame = waiting.recv_frame()  # served once a slot is free
        assert len(frame) > 4
        waiting.close()
        admin2 = RawClient(own_broker.bootstrap)
        assert iac(admin2, BROKER, "", [("max.connections", DELETE, None)]) == (0, None)
        admin2.close()
    finally:
        admin.close()


def test_dynamic_security_configs_per_broker_only(raw: RawClient) -> None:
    assert iac(raw, BROKER, "", [("ssl.protocol", SET, "TLSv1.2")]) == (
        ErrorCode.INVALID_REQUEST, "Cannot update these configs at default cluster level, "
        "broker id must be specified: [ssl.protocol]")
    assert iac(raw, BROKER, "1", [("ssl.protocol", SET, "TLSv1.2"),
                                  ("ssl.keystore.password", SET, "secret")]) == (0, None)
    got = entries(raw, BROKER, "1", ["ssl.protocol", "ssl.keystore.password"])
    assert (got["ssl.protocol"].value, got["ssl.protocol"].config_source) == (
        "TLSv1.2", DYNAMIC_BROKER_CONFIG)
    pw = got["ssl.keystore.password"]
    assert (pw.value, pw.is_sensitive, [s.value for s in pw.synonyms]) == (None, True, [None])
    assert iac(raw, BROKER, "1", [("ssl.protocol", DELETE, None),
                                  ("ssl.keystore.password", DELETE, None)]) == (0, None)
    # listed like every Kafka 4.3.1 broker config: back to Kafka's default
    back = entries(raw, BROKER, "1", ["ssl.protocol"])["ssl.protocol"]
    assert (back.value, back.config_source) == ("TLSv1.3", DEFAULT_CONFIG)
