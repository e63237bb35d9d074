"""Kafka's own admin tools (Java AdminClient) against kafkawire: kafka-topics, kafka-configs,
kafka-log-dirs, kafka-cluster.

The jars come from the compatibility harness's cache (``tests/javatools.py``); the tests skip
without them or without ``java``, and fail instead under ``make test``
(KAFKAWIRE_REQUIRE_KAFKA=1). Kafka 4.3.1's TopicCommand describes topics with
DescribeTopicPartitions; 3.9.2 is the client line Spark 4.x ships.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from kafkawire.tools.testing import BrokerProcess
from tests.javatools import JavaTools, require_line

pytestmark = pytest.mark.slow

LINES = {"4.3.1": "4.x", "3.9.2": "3.9"}


def tool(version: str, name: str, *args: str, check: bool = True) -> str:
    """stdout+stderr of a kafka-<name> tool of the given Kafka version."""
    return JavaTools(LINES[version]).run(name, *args, check=check).output


TOPIC_COMMAND = "topics"
CONFIG_COMMAND = "configs"
LOG_DIRS_COMMAND = "log-dirs"
CLUSTER_TOOL = "cluster"


@pytest.fixture(params=list(LINES))
def kafka_line(request: pytest.FixtureRequest) -> str:
    require_line(LINES[request.param])
    return str(request.param)


def test_kafka_topics_lifecycle(broker: BrokerProcess, kafka_line: str) -> None:
    bs = ["--bootstrap-server", broker.bootstrap]
    t = f"jt-{uuid.uuid4().hex[:8]}"
    out = tool(kafka_line, TOPIC_COMMAND, *bs, "--create", "--topic", t, "--partitions", "3",
               "--config", "cleanup.policy=compact")
    assert f"Created topic {t}." in out
    out = tool(kafka_line, TOPIC_COMMAND, *bs, "--describe", "--topic", t)
    # min.insync.replicas: the cluster-level dynamic default (ELR), listed as Kafka lists it
    assert "PartitionCount: 3" in out
    assert "Configs: min.insync.replicas=1,cleanup.policy=compact" in out
    assert out.count("Leader: 1") == 3
    tool(kafka_line, TOPIC_COMMAND, *bs, "--alter", "--topic", t, "--partitions", "5")
    assert "PartitionCount: 5" in tool(kafka_line, TOPIC_COMMAND, *bs, "--describe", "--topic", t)
    out = tool(kafka_line, TOPIC_COMMAND, *bs, "--alter", "--topic", t, "--partitions", "2",
               check=False)
    assert f"The topic {t} currently has 5 partition(s); 2 would not be an increase." in out
    out = tool(kafka_line, TOPIC_COMMAND, *bs, "--create", "--topic", t, check=False)
    assert f"Topic '{t}' already exists." in out
    assert t in tool(kafka_line, TOPIC_COMMAND, *bs, "--list").split()
    tool(kafka_line, TOPIC_COMMAND, *bs, "--delete", "--topic", t)
    assert t not in tool(kafka_line, TOPIC_COMMAND, *bs, "--list").split()
    assert not list(Path(broker.data_dir).glob(f"{t}-*"))


def test_kafka_configs_topic(broker: BrokerProcess, kafka_line: str) -> None:
    bs = ["--bootstrap-server", broker.bootstrap]
    t = f"jc-{uuid.uuid4().hex[:8]}"
    tool(kafka_line, TOPIC_COMMAND, *bs, "--create", "--topic", t)
    ent = ["--entity-type", "topics", "--entity-name", t]
    out = tool(kafka_line, CONFIG_COMMAND, *bs, "--describe", *ent, "--all")
    lines = [line.strip() for line in out.splitlines()]
    assert ("cleanup.policy=delete sensitive=false "
            "synonyms={DEFAULT_CONFIG:log.cleanup.policy=delete}") in lines
    assert "retention.ms=604800000 sensitive=false synonyms={}" in lines
    tool(kafka_line, CONFIG_COMMAND, *bs, "--alter", *ent,
         "--add-config", "retention.ms=1000,cleanup.policy=[compact,delete]")
    out = tool(kafka_line, CONFIG_COMMAND, *bs, "--describe", *ent)
    lines = [line.strip() for line in out.splitlines()]
    assert "retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000}" in lines
    assert any(line.startswith("cleanup.policy=compact,delete ") for line in lines)
    tool(kafka_line, CONFIG_COMMAND, *bs, "--alter", *ent, "--delete-config", "retention.ms")
    out = tool(kafka_line, CONFIG_COMMAND, *bs, "--describe", *ent)
    assert "retention.ms" not in out
    out = tool(kafka_line, CONFIG_COMMAND, *bs, "--alter", *ent, "--add-config",
               "segment.ms=0", check=False)
    assert "Invalid value 0 for configuration segment.ms: Value must be at least 1" in out


def test_kafka_configs_brokers_log_dirs_cluster(own_broker: BrokerProcess) -> None:
    version = "4.3.1"
    require_line(LINES[version])
    bs = ["--bootstrap-server", own_broker.bootstrap]
    tool(version, CONFIG_COMMAND, *bs, "--alter", "--entity-type", "brokers", "--entity-default",
         "--add-config", "log.retention.ms=7200000")
    out = tool(version, CONFIG_COMMAND, *bs, "--describe", "--entity-type", "brokers",
               "--entity-default")
    assert ("log.retention.ms=7200000 sensitive=false "
            "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000}") in out
    out = tool(version, CONFIG_COMMAND, *bs, "--alter", "--entity-type", "brokers",
               "--entity-name", "1", "--add-config", "num.partitions=4", check=False)
    assert "Cannot update these configs dynamically: [num.partitions]" in out
    out = tool(version, CONFIG_COMMAND, *bs, "--describe", "--entity-type", "brokers",
               "--entity-name", "1", "--all")
    assert "num.partitions=1 sensitive=false synonyms={DEFAULT_CONFIG:num.partitions=1}" in out
    t = f"jl-{uuid.uuid4().hex[:8]}"
    tool(version, TOPIC_COMMAND, *bs, "--create", "--topic", t, "--partitions", "2")
    out = tool(version, LOG_DIRS_COMMAND, *bs, "--describe", "--topic-list", t)
    assert f'"partition":"{t}-0"' in out and f'"partition":"{t}-1"' in out
    assert str(Path(own_broker.data_dir).resolve()) in out
    out = tool(version, CLUSTER_TOOL, "cluster-id", *bs)
    assert out.strip().startswith("Cluster ID: ")
