"""Kafka's own admin tools (Java AdminClient) against kafkawire: kafka-topics, kafka-configs,
kafka-log-dirs, kafka-cluster.

The jars come from the compatibility harness's cache (``$KAFKAWIRE_CACHE`` or
``~/.cache/kafkawire``, ``kafka-<version>/libs``); the tests are skipped when it is absent or
when no ``java`` is installed. Kafka 4.3.1's TopicCommand describes topics with
DescribeTopicPartitions; 3.9.2 is the client line Spark 4.x ships.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from kafkawire.testing import BrokerProcess

pytestmark = pytest.mark.slow

CACHE = Path(os.environ.get("KAFKAWIRE_CACHE", Path.home() / ".cache" / "kafkawire"))
LINES = {"4.3.1": CACHE / "kafka-4.3.1" / "libs", "3.9.2": CACHE / "kafka-3.9.2" / "libs"}
JVM = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xmx256m", "-Djava.awt.headless=true"]

TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
CONFIG_COMMAND = "kafka.admin.ConfigCommand"
LOG_DIRS_COMMAND = "org.apache.kafka.tools.LogDirsCommand"
CLUSTER_TOOL = "org.apache.kafka.tools.ClusterTool"


def available(version: str) -> bool:
    libs = LINES[version]
    return shutil.which("java") is not None and libs.is_dir() and any(libs.glob("kafka-clients*"))


def tool(version: str, main: str, *args: str, check: bool = True) -> str:
    cmd = ["java", *JVM, "-cp", f"{LINES[version]}/*", main, *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    out = "\n".join(
        line for line in (p.stdout + p.stderr).splitlines()
        if not line.startswith(("SLF4J", "log4j")) and "StatusLogger" not in line
    )
    if check and p.returncode != 0:
        raise AssertionError(f"{main} {args} exited {p.returncode}:\n{out}")
    return out


@pytest.fixture(params=["4.3.1", "3.9.2"])
def kafka_line(request: pytest.FixtureRequest) -> str:
    if not available(request.param):
        pytest.skip(f"Kafka {request.param} jars or java not available")
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
    if not available(version):
        pytest.skip("Kafka 4.3.1 jars or java not available")
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
