"""Replication throttles (KIP-73, kafkawire.replication.throttle): the configs as Kafka 4.3.1
takes and reports them, and the quota's arithmetic. The cluster tests (a reassignment under
``kafka-reassign-partitions --throttle``) are in tests/test_replication_cluster.py.

Kafka 4.3.1, observed with its kafka-configs (2026-11-28): the three rates are accepted per
broker and as the cluster default, LONG >= 0 ("Invalid value -5 for configuration
leader.replication.throttled.rate: Value must be at least 0", "... Not a number of type
LONG", INVALID_REQUEST); unset they are not listed even by ``--describe --all``; set, they
show as ``leader.replication.throttled.rate=1000 sensitive=false
synonyms={DYNAMIC_BROKER_CONFIG:leader.replication.throttled.rate=1000}``. The topic configs
take ``*`` or ``partition:broker`` pairs ("Invalid value [bad] for configuration
leader.replication.throttled.replicas: leader.replication.throttled.replicas must be the
literal '*' or a list of replicas in the following format:
[partitionId]:[brokerId],[partitionId]:[brokerId],...", INVALID_CONFIG) and show normalized
(``[0:1, 1:2]`` -> ``0:1,1:2``).
"""

from __future__ import annotations

import pytest

from kafkawire.config.broker_config import BrokerConfig, ConfigError, validate_topic_config
from kafkawire.config.entries import ConfigSource as S
from kafkawire.config.entries import (
    Synonym,
    broker_config_entries,
    validate_broker_changes,
    validate_topic_overrides,
)
from kafkawire.replication.throttle import (
    ALL,
    LEADER_RATE,
    LEADER_REPLICAS,
    ReplicationQuota,
    throttled_partitions,
)
from kraft.image import RESOURCE_BROKER, RESOURCE_TOPIC
from protocol._generated.config_record import ConfigRecord
from protocol.errors import ErrorCode, KafkaError
from tests.test_admin_unit import cluster, with_records

RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
         "replica.alter.log.dirs.io.max.bytes.per.second")


def test_rates_are_dynamic_longs_at_least_zero() -> None:
    assert validate_broker_changes({r: " 1000 " for r in RATES}) == {r: "1000" for r in RATES}
    assert validate_broker_changes({RATES[0]: "5000"}, resource_name="") == {RATES[0]: "5000"}
    for raw, why in (("-5", "Value must be at least 0"), ("abc", "Not a number of type LONG")):
        with pytest.raises(KafkaError) as ei:
            validate_broker_changes({RATES[0]: raw})
        assert (ei.value.code, ei.value.message) == (
            ErrorCode.INVALID_REQUEST,
            f"Invalid value {raw} for configuration {RATES[0]}: {why}")


def test_rates_are_listed_only_once_set() -> None:
    cfg = BrokerConfig.from_dict({})
    img = cluster(1)
    names = {e.name for e in broker_config_entries(cfg, img, per_broker=True)}
    assert not names & set(RATES)
    assert {"replication.quota.window.num", "replication.quota.window.size.seconds"} <= names
    img = with_records(img, [
        ConfigRecord(resource_type=RESOURCE_BROKER, resource_name="1", name=RATES[0],
                     value="1000"),
        ConfigRecord(resource_type=RESOURCE_BROKER, resource_name="", name=RATES[1],
                     value="5000")])
    entries = {e.name: e for e in broker_config_entries(cfg, img, per_broker=True,
                                                        include_synonyms=True)}
    lead = entries[RATES[0]]
    assert (lead.value, lead.source, lead.read_only, lead.is_sensitive) == (
        "1000", S.DYNAMIC_BROKER_CONFIG, False, False)
    assert lead.synonyms == (Synonym(RATES[0], "1000", S.DYNAMIC_BROKER_CONFIG),)
    follow = entries[RATES[1]]
    assert (follow.value, follow.source) == ("5000", S.DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert RATES[2] not in entries
    default = {e.name: e for e in broker_config_entries(cfg, img, per_broker=False)}
    assert RATES[1] in default and RATES[0] not in default


def test_throttled_replicas_topic_config() -> None:
    key = "leader.replication.throttled.replicas"
    assert validate_topic_overrides({key: "0:1, 1:2"}) == {key: "0:1,1:2"}
    assert validate_topic_overrides({key: "*"}) == {key: "*"}
    assert validate_topic_config(key, "") == ""
    for bad, shown in (("bad", "[bad]"), ("0:x", "[0:x]"), ("0:1,*", "[0:1, *]")):
        with pytest.raises(ConfigError) as ei:
            validate_topic_config(key, bad)
        assert str(ei.value) == (
            f"Invalid value {shown} for configuration {key}: {key} must be the literal '*' or "
            "a list of replicas in the following format: "
            "[partitionId]:[brokerId],[partitionId]:[brokerId],...")
    assert throttled_partitions("0:1,1:2,2:1", 1) == frozenset({0, 2})
    assert throttled_partitions("0:1,1:2", 3) == frozenset()
    assert throttled_partitions("*", 3) is ALL


def test_quota_bites_after_its_rate_over_the_window() -> None:
    """Kafka's Rate over 11 one-second samples counts at least 10 s: at 1000 B/s the quota
    is exceeded once more than ~10 000 bytes went through in the first seconds."""
    img = with_records(cluster(1), [
        ConfigRecord(resource_type=RESOURCE_TOPIC, resource_name="t", name=LEADER_REPLICAS,
                     value="0:1,1:2")])
    state = {"img": img}
    q = ReplicationQuota(BrokerConfig.from_dict({"node.id": "1"}), lambda: state["img"],
                         LEADER_RATE, LEADER_REPLICAS)
    assert q.is_throttled("t", 0) and not q.is_throttled("t", 1)
    assert not q.is_throttled("other", 0)
    now = 1_000_000
    q.record(50_000, now)
    assert not q.is_quota_exceeded(now)  # unbounded: nothing is even counted
    state["img"] = with_records(img, [ConfigRecord(
        resource_type=RESOURCE_BROKER, resource_name="", name=LEADER_RATE, value="1000")])
    assert q.bound == 1000
    q.record(9_000, now)
    assert not q.is_quota_exceeded(now + 10)
    q.record(2_000, now + 20)
    assert q.is_quota_exceeded(now + 30)
    assert not q.is_quota_exceeded(now + 12_000)  # the window moved past it
    state["img"] = with_records(state["img"], [ConfigRecord(
        resource_type=RESOURCE_BROKER, resource_name="1", name=LEADER_RATE, value="100000")])
    q.record(11_000, now + 13_000)
    assert q.bound == 100000 and not q.is_quota_exceeded(now + 13_000)
