"""Scenarios for the config resources beyond topics: group configs (KIP-848, resource type 32),
client-metrics subscriptions (KIP-714, type 16) and dynamic broker configs (type 4).

Unlike the other config scenarios these keep ``error_message``: Kafka's messages are what
``kafka-configs`` prints, so they are part of the behaviour compared.

Registered into ``compat_tests.scenarios.SCENARIOS`` when that module is imported.
"""

# ruff: noqa: B023
from __future__ import annotations

from typing import Any

from compat_tests.scenarios import (
    CONFIG_SOURCES,
    CONFIG_TYPES,
    Outcome,
    Steps,
    _java,
    _last_error_line,
    connect,
    create_topic,
    err,
    eventually,
    scenario,
)
from compat_tests.wire import Connection
from protocol._generated.alter_configs_request import AlterConfigsRequest
from protocol._generated.delete_groups_request import DeleteGroupsRequest
from protocol._generated.describe_configs_request import DescribeConfigsRequest
from protocol._generated.find_coordinator_request import FindCoordinatorRequest
from protocol._generated.incremental_alter_configs_request import (
    IncrementalAlterConfigsRequest as IAC,
)
from protocol._generated.list_config_resources_request import ListConfigResourcesRequest
from protocol._generated.offset_commit_request import OffsetCommitRequest

GROUP = 32
CLIENT_METRICS = 16
BROKER = 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
PREFIX = ""  # names are prefixed with it (probing a broker more than once)


def _results(rs: Any) -> list[list[Any]]:
    return [[r.resource_type, r.resource_name, err(r.error_code), r.error_message] for r in rs]


def iac(
    c: Connection, rtype: int, name: str, ops: list[tuple[str, int, str | None]],
    validate_only: bool = False,
) -> list[list[Any]]:
    req = IAC(
        resources=[
            IAC.AlterConfigsResource(
                resource_type=rtype, resource_name=name,
                configs=[IAC.AlterableConfig(name=k, config_operation=op, value=v)
                         for k, op, v in ops],
            )
        ],
        validate_only=validate_only,
    )
    return _results(c.request(req, 1).responses)


def legacy(c: Connection, rtype: int, name: str, configs: dict[str, str]) -> list[list[Any]]:
    R = AlterConfigsRequest
    req = R(
        resources=[R.AlterConfigsResource(
            resource_type=rtype, resource_name=name,
            configs=[R.AlterableConfig(name=k, value=v) for k, v in configs.items()],
        )],
        validate_only=False,
    )
    return _results(c.request(req, 2).responses)


def describe(
    c: Connection, rtype: int, name: str, keys: list[str] | None = None, synonyms: bool = True,
    version: int = 4,
) -> list[Any]:
    R = DescribeConfigsRequest
    res = R.DescribeConfigsResource(resource_type=rtype, resource_name=name,
                                    configuration_keys=keys)
    req = R(resources=[res], include_synonyms=synonyms, include_documentation=False)
    r = c.request(req, version).results[0]
    configs = {
        e.name: [
            e.value, CONFIG_SOURCES.get(e.config_source), e.read_only, e.is_sensitive,
            CONFIG_TYPES.get(e.config_type),
            [[s.name, s.value, CONFIG_SOURCES.get(s.source)] for s in e.synonyms],
        ]
        for e in sorted(r.configs, key=lambda e: e.name)
    }
    return [err(r.error_code), r.error_message, configs]


def list_resources(c: Connection, types: list[int], version: int = 1) -> list[Any]:
    r = c.request(ListConfigResourcesRequest(resource_types=types), version)
    return [err(r.error_code),
            sorted([x.resource_name, x.resource_type] for x in r.config_resources
                   if not x.resource_name.startswith("__"))]


def find_coordinator(c: Connection, group: str) -> str:
    r = c.request(FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), 4)
    return err(r.coordinators[0].error_code)


def _value_is(key: str, want: str | None) -> Any:
    return lambda r: r[2].get(key, [None])[0] == want


@scenario
def group_configs(bootstrap: str) -> Outcome:
    """DescribeConfigs / IncrementalAlterConfigs / AlterConfigs on GROUP resources."""
    out = Steps()
    g = f"{PREFIX}group_configs-g1"
    with connect(bootstrap) as c:
        out.step("describe_unset", lambda: describe(c, GROUP, g))
        out.step("describe_unset_no_synonyms", lambda: describe(c, GROUP, g, synonyms=False))
        out.step("validate_only", lambda: iac(
            c, GROUP, g, [("consumer.session.timeout.ms", SET, "50000")], validate_only=True))
        out.step("set", lambda: iac(c, GROUP, g, [
            ("consumer.session.timeout.ms", SET, "50000"),
            ("consumer.heartbeat.interval.ms", SET, "6000"),
        ]))
        out.step("describe_set", lambda: eventually(
            lambda: describe(c, GROUP, g), _value_is("consumer.session.timeout.ms", "50000")))
        out.step("describe_keys", lambda: describe(
            c, GROUP, g, ["consumer.session.timeout.ms", "share.auto.offset.reset", "nope"]))
        bad = [
            ("consumer.session.timeout.ms", "5000"),
            ("consumer.session.timeout.ms", "70000"),
            ("consumer.heartbeat.interval.ms", "1000"),
            ("consumer.heartbeat.interval.ms", "20000"),
            ("consumer.heartbeat.interval.ms", "50000"),
            ("consumer.session.timeout.ms", "abc"),
            ("consumer.session.timeout.ms", "-1"),
            ("consumer.assignment.interval.ms", "20000"),
            ("share.auto.offset.reset", "bogus"),
            ("share.isolation.level", "bogus"),
            ("share.renew.acknowledge.enable", "maybe"),
            ("streams.num.standby.replicas", "5"),
            ("share.record.lock.duration.ms", "500"),
            ("foo", "5000"),
        ]
        for key, value in bad:
            out.step(f"bad {key}={value}", lambda: iac(c, GROUP, g, [(key, SET, value)]))
        out.step("append_int", lambda: iac(c, GROUP, g,
                                           [("consumer.session.timeout.ms", APPEND, "1")]))
        out.step("good_others", lambda: iac(c, GROUP, g, [
            ("share.auto.offset.reset", SET, "earliest"),
            ("streams.num.standby.replicas", SET, "1"),
            ("share.renew.acknowledge.enable", SET, "FALSE"),
        ]))
        out.step("describe_others", lambda: eventually(
            lambda: describe(c, GROUP, g, ["share.auto.offset.reset",
                                           "streams.num.standby.replicas",
                                           "share.renew.acknowledge.enable"]),
            _value_is("streams.num.standby.replicas", "1")))
        out.step("empty_name", lambda: iac(c, GROUP, "",
                                           [("consumer.session.timeout.ms", SET, "50000")]))
        out.step("describe_empty_name", lambda: describe(c, GROUP, "", ["consumer.session.timeout.ms"]))
        out.step("legacy_alter", lambda: legacy(c, GROUP, g, {"consumer.session.timeout.ms": "55000"}))
        out.step("describe_after_legacy", lambda: describe(
            c, GROUP, g, ["consumer.session.timeout.ms", "share.auto.offset.reset"]))
        out.step("list", lambda: eventually(
            lambda: list_resources(c, [GROUP]), lambda r: [g, GROUP] in r[1]))
        out.step("delete_keys", lambda: iac(c, GROUP, g, [
            ("share.auto.offset.reset", DELETE, None),
            ("streams.num.standby.replicas", DELETE, None),
            ("share.renew.acknowledge.enable", DELETE, None),
            ("not.a.key", DELETE, None),
        ]))
        out.step("describe_after_delete_keys", lambda: eventually(
            lambda: describe(c, GROUP, g, ["share.auto.offset.reset",
                                           "consumer.session.timeout.ms"]),
            _value_is("share.auto.offset.reset", "latest")))
        # Configs of a group that is then deleted.
        g2 = f"{PREFIX}group_configs-g2"
        topic = f"{PREFIX}group_configs"
        create_topic(c, topic)
        R = OffsetCommitRequest
        commit = R(group_id=g2, generation_id_or_member_epoch=-1, member_id="",
                   group_instance_id=None, topics=[R.OffsetCommitRequestTopic(
                       name=topic, partitions=[R.OffsetCommitRequestPartition(
                           partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                           committed_metadata="")])])
        out.step("commit", lambda: eventually(
            lambda: (find_coordinator(c, g2),
                     err(c.request(commit, 8).topics[0].partitions[0].error_code))[1],
            lambda r: r == "NONE", timeout=30))
        out.step("set_g2", lambda: iac(c, GROUP, g2,
                                       [("consumer.session.timeout.ms", SET, "46000")]))
        out.step("describe_g2", lambda: eventually(
            lambda: describe(c, GROUP, g2, ["consumer.session.timeout.ms"]),
            _value_is("consumer.session.timeout.ms", "46000")))
        out.step("delete_group", lambda: [
            [r.group_id, err(r.error_code)]
            for r in c.request(DeleteGroupsRequest(groups_names=[g2]), 2).results])
        out.step("describe_g2_after_delete", lambda: eventually(
            lambda: describe(c, GROUP, g2, ["consumer.session.timeout.ms"]),
            _value_is("consumer.session.timeout.ms", "45000"), timeout=5))
        out.step("list_after_delete", lambda: list_resources(c, [GROUP]))
        out.step("clear", lambda: iac(c, GROUP, g, [
            ("consumer.session.timeout.ms", DELETE, None),
            ("consumer.heartbeat.interval.ms", DELETE, None),
        ]))
        out.step("list_after_clear", lambda: eventually(
            lambda: list_resources(c, [GROUP]), lambda r: [g, GROUP] not in r[1], timeout=5))
    return out


@scenario
def client_metrics_configs(bootstrap: str) -> Outcome:
    """Client-metrics subscriptions (KIP-714) as config resources."""
    out = Steps()
    m = f"{PREFIX}client_metrics_configs-m1"
    with connect(bootstrap) as c:
        out.step("describe_unset", lambda: describe(c, CLIENT_METRICS, m))
        out.step("list_v0_empty", lambda: list_resources(c, [], version=0))
        out.step("set", lambda: iac(c, CLIENT_METRICS, m, [
            ("metrics", SET, "org.apache.kafka.producer., org.apache.kafka.consumer.fetch"),
            ("interval.ms", SET, "5000"),
        ]))
        out.step("describe_set", lambda: eventually(
            lambda: describe(c, CLIENT_METRICS, m), _value_is("interval.ms", "5000")))
        out.step("describe_v1", lambda: describe(c, CLIENT_METRICS, m, synonyms=False, version=1))
        bad = [
            ("interval.ms", "50"),
            ("interval.ms", "99"),
            ("interval.ms", "100"),
            ("interval.ms", "1800001"),
            ("interval.ms", "abc"),
            ("match", "client_id=a.*,client_software_name=librdkafka"),
            ("match", "foo=bar"),
            ("match", "client_id"),
            ("match", "client_id=[a"),
            ("match", "client_id=a,client_id=b"),
            ("match", "client_instance_id=x"),
            ("match", "client_source_port=9"),
            ("metrics", ""),
            ("metrics", "*"),
            ("other.key", "1"),
        ]
        for key, value in bad:
            out.step(f"set {key}={value}", lambda: iac(c, CLIENT_METRICS, m, [(key, SET, value)]))
        out.step("describe_after", lambda: describe(c, CLIENT_METRICS, m, synonyms=False))
        out.step("append_metrics", lambda: iac(c, CLIENT_METRICS, m,
                                               [("metrics", APPEND, "org.apache.kafka.share.")]))
        out.step("append_interval", lambda: iac(c, CLIENT_METRICS, m,
                                                [("interval.ms", APPEND, "5")]))
        out.step("describe_appended", lambda: eventually(
            lambda: describe(c, CLIENT_METRICS, m, ["metrics"], synonyms=False),
            lambda r: "share" in (r[2].get("metrics", [""])[0] or "")))
        out.step("empty_name", lambda: iac(c, CLIENT_METRICS, "", [("interval.ms", SET, "5000")]))
        out.step("describe_empty_name", lambda: describe(c, CLIENT_METRICS, ""))
        out.step("legacy_alter", lambda: legacy(c, CLIENT_METRICS, m, {"interval.ms": "6000"}))
        out.step("list_v0", lambda: list_resources(c, [], version=0))
        out.step("list_v1_cm", lambda: list_resources(c, [CLIENT_METRICS]))
        out.step("list_v1_bad_type", lambda: list_resources(c, [CLIENT_METRICS, 99]))
        out.step("delete", lambda: iac(c, CLIENT_METRICS, m, [
            ("metrics", DELETE, None), ("interval.ms", DELETE, None), ("match", DELETE, None),
        ]))
        out.step("list_after_delete", lambda: eventually(
            lambda: list_resources(c, [CLIENT_METRICS]), lambda r: not r[1], timeout=5))
        out.step("describe_after_delete", lambda: describe(c, CLIENT_METRICS, m, synonyms=False))
    return out


# Dynamic broker keys compared (values independent of ports and paths).
DYNAMIC_KEYS = [
    "log.cleaner.threads", "log.cleaner.io.max.bytes.per.second", "num.io.threads",
    "num.network.threads", "max.connections", "max.connections.per.ip",
    "producer.id.expiration.ms", "background.threads", "log.cleaner.backoff.ms",
    "group.consumer.assignment.interval.ms", "metric.reporters", "min.insync.replicas",
    "log.retention.ms", "message.max.bytes", "num.replica.fetchers",
    "transaction.partition.verification.enable", "max.connections.per.ip.overrides",
    "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.size",
    "max.connection.creation.rate", "config.providers", "node.id", "num.partitions",
    "offsets.retention.minutes", "group.consumer.session.timeout.ms",
]


@scenario
def dynamic_broker_configs(bootstrap: str) -> Outcome:
    """Kafka's dynamically reconfigurable broker configs: per broker and cluster default."""
    out = Steps()
    with connect(bootstrap) as c:
        out.step("describe_before", lambda: describe(c, BROKER, "1", DYNAMIC_KEYS))
        good = [
            ("log.cleaner.threads", "2"),
            ("log.cleaner.io.max.bytes.per.second", "1000000"),
            ("num.io.threads", "4"),
            ("max.connections", "1000"),
            ("max.connections.per.ip", "500"),
            ("producer.id.expiration.ms", "3600000"),
            ("background.threads", "5"),
            ("group.consumer.assignment.interval.ms", "2000"),
            ("log.cleaner.backoff.ms", "10000"),
        ]
        for key, value in good:
            out.step(f"per_broker {key}", lambda: iac(c, BROKER, "1", [(key, SET, value)]))
            out.step(f"default {key}", lambda: iac(c, BROKER, "", [(key, SET, value)]))
        # the cluster default set last has reached the broker (as a synonym)
        out.step("describe_set", lambda: eventually(
            lambda: describe(c, BROKER, "1", DYNAMIC_KEYS),
            lambda r: len(r[2]["log.cleaner.backoff.ms"][5]) == 3))
        out.step("describe_default", lambda: describe(c, BROKER, "", DYNAMIC_KEYS))
        bad = [
            ("1", "min.insync.replicas", "2"),
            ("1", "num.io.threads", "0"),
            ("1", "num.io.threads", "100"),
            ("1", "num.io.threads", "1"),
            ("1", "num.network.threads", "7"),
            ("1", "log.cleaner.threads", "-1"),
            ("1", "log.cleaner.threads", "abc"),
            ("1", "max.connections", "-1"),
            ("1", "producer.id.expiration.ms", "0"),
            ("1", "log.cleaner.io.max.bytes.per.second", "fast"),
            ("1", "node.id", "2"),
            ("1", "num.partitions", "3"),
            ("", "listeners", "PLAINTEXT://127.0.0.1:1"),
            ("", "max.connections.per.ip.overrides", "127.0.0.1:5"),
            ("", "max.connections.per.ip.overrides", "not-an-ip:x"),
            ("", "metric.reporters", "no.such.Reporter"),
            ("", "num.replica.fetchers", "0"),
        ]
        for name, key, value in bad:
            out.step(f"set {name or 'default'} {key}={value}",
                     lambda: iac(c, BROKER, name, [(key, SET, value)]))
        out.step("default min.insync.replicas", lambda: iac(
            c, BROKER, "", [("min.insync.replicas", SET, "1")]))
        out.step("legacy_default_no_min_isr", lambda: legacy(
            c, BROKER, "", {"log.cleaner.threads": "2", "num.io.threads": "6"}))
        out.step("legacy_default", lambda: legacy(c, BROKER, "", {
            "log.cleaner.threads": "2", "num.io.threads": "6", "min.insync.replicas": "1"}))
        out.step("describe_after_legacy", lambda: eventually(
            lambda: describe(c, BROKER, "", DYNAMIC_KEYS),
            _value_is("num.io.threads", "6")))
        out.step("legacy_default_clear", lambda: legacy(c, BROKER, "", {"min.insync.replicas": "1"}))
        out.step("clear_per_broker", lambda: iac(c, BROKER, "1", [
            (k, DELETE, None) for k, _ in good]))
        out.step("describe_cleared", lambda: eventually(
            lambda: describe(c, BROKER, "1", DYNAMIC_KEYS),
            _value_is("log.cleaner.backoff.ms", "15000")))
    return out


@scenario
def java_config_tools(bootstrap: str) -> Outcome:
    """kafka-configs (groups, client-metrics, brokers) and kafka-client-metrics, 4.x."""
    out = Steps()
    cc = "kafka.admin.ConfigCommand"
    cm = "org.apache.kafka.tools.ClientMetricsCommand"
    base = ["--bootstrap-server", bootstrap]

    def run(main: str, args: list[str], version: str = "4.x") -> list[Any]:
        rc, so, se = _java(main, base + args, version)
        return [rc, so.strip().splitlines(), _last_error_line(se)]

    grp = ["--entity-type", "groups", "--entity-name", "java_config_tools-g"]
    out.step("group_alter", lambda: run(cc, ["--alter", *grp, "--add-config",
                                             "consumer.session.timeout.ms=50000"]))
    out.step("group_describe", lambda: run(cc, ["--describe", *grp]))
    out.step("group_bad", lambda: run(cc, ["--alter", *grp, "--add-config",
                                           "consumer.session.timeout.ms=5000"]))
    out.step("group_unknown", lambda: run(cc, ["--alter", *grp, "--add-config", "foo=5000"]))
    out.step("group_delete", lambda: run(cc, ["--alter", *grp, "--delete-config",
                                              "consumer.session.timeout.ms"]))
    out.step("cm_alter", lambda: run(cm, ["--alter", "--name", "java_config_tools-m",
                                          "--metrics", "org.apache.kafka.producer.",
                                          "--interval", "5000"]))
    out.step("cm_describe", lambda: run(cm, ["--describe", "--name", "java_config_tools-m"]))
    out.step("cm_list", lambda: run(cm, ["--list"]))
    out.step("cm_delete", lambda: run(cm, ["--delete", "--name", "java_config_tools-m"]))
    out.step("cm_list_after", lambda: run(cm, ["--list"]))
    # 3.9's kafka-configs has no groups entity type; its client-metrics tool does the same.
    for step, main, args in (
        ("3.9_cm_alter", cm, ["--alter", "--name", "java_config_tools-m39", "--metrics",
                              "org.apache.kafka.consumer.", "--interval", "6000"]),
        ("3.9_cm_list", cm, ["--list"]),
        ("3.9_cm_delete", cm, ["--delete", "--name", "java_config_tools-m39"]),
    ):
        out.step(step, lambda: run(main, args, "3.9"))
    brk = ["--entity-type", "brokers", "--entity-name", "1"]
    out.step("broker_alter", lambda: run(cc, ["--alter", *brk, "--add-config",
                                              "log.cleaner.threads=2,max.connections=1000"]))
    out.step("broker_min_isr", lambda: run(cc, ["--alter", *brk, "--add-config",
                                                "min.insync.replicas=2"]))
    out.step("broker_describe", lambda: run(cc, ["--describe", *brk]))
    out.step("broker_delete", lambda: run(cc, ["--alter", *brk, "--delete-config",
                                               "log.cleaner.threads,max.connections"]))
    return out


THROTTLE_KEYS = [
    "leader.replication.throttled.rate", "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second", "replication.quota.window.num",
    "replication.quota.window.size.seconds", "alter.log.dirs.replication.quota.window.num",
]
TOPIC = 2


@scenario
def replication_throttle_configs(bootstrap: str) -> Outcome:
    """KIP-73's replication throttles as configs: the dynamic-only broker rates (listed once
    set, only with their dynamic synonym) and the topic's throttled-replica lists; errors as
    kafka-configs prints them. Everything set is removed again (the broker is shared)."""
    out = Steps()
    rates = THROTTLE_KEYS[:3]
    with connect(bootstrap) as c:
        out.step("describe_before", lambda: describe(c, BROKER, "1", THROTTLE_KEYS))
        out.step("set_per_broker", lambda: iac(c, BROKER, "1", [
            (k, SET, v) for k, v in zip(rates, ("1000", "2000", "3000"), strict=True)]))
        out.step("set_default", lambda: iac(c, BROKER, "", [(rates[0], SET, "5000")]))
        out.step("describe_broker", lambda: eventually(
            lambda: describe(c, BROKER, "1", THROTTLE_KEYS),
            lambda r: len(r[2].get(rates[0], [None] * 5 + [[]])[5]) == 2))
        out.step("describe_default", lambda: describe(c, BROKER, "", THROTTLE_KEYS))
        for value in ("-5", "abc", " 7 "):
            out.step(f"set rate {value!r}", lambda: iac(c, BROKER, "1", [(rates[1], SET, value)]))
        topic = f"{PREFIX}replication_throttle_configs"
        out.step("create", lambda: err(create_topic(c, topic, 2).error_code))
        for value in ("0:1, 1:1", "*", "", "bad", "0:x", "0:1,*"):
            out.step(f"set replicas {value!r}", lambda: iac(
                c, TOPIC, topic, [("leader.replication.throttled.replicas", SET, value)]))
        out.step("set follower *", lambda: iac(
            c, TOPIC, topic, [("follower.replication.throttled.replicas", SET, "*")]))
        out.step("describe_topic", lambda: eventually(
            lambda: describe(c, TOPIC, topic, ["leader.replication.throttled.replicas",
                                               "follower.replication.throttled.replicas"]),
            _value_is("follower.replication.throttled.replicas", "*")))
        out.step("clear_per_broker", lambda: iac(c, BROKER, "1", [(k, DELETE, None)
                                                                  for k in rates]))
        out.step("clear_default", lambda: iac(c, BROKER, "", [(rates[0], DELETE, None)]))
        out.step("describe_cleared", lambda: eventually(
            lambda: describe(c, BROKER, "1", THROTTLE_KEYS),
            lambda r: rates[0] not in r[2]))
    return out
