"""Apache Kafka's own command-line tools by their usual names: ``kafkawire kafka-topics ...``.

Runs the tool's main class from the Apache Kafka 4.3.1 jars with Kafka's tool JVM settings, its
arguments passed through unchanged (``--bootstrap-server`` and all). Where the jars come from,
first match wins:

1. ``$KAFKA_HOME``: an Apache Kafka installation; its ``bin/<tool>.sh`` script is executed.
2. ``$KAFKAWIRE_CACHE`` or ``~/.cache/kafkawire``: the jars the compat harness fetches from
   Maven Central (``python -m compat_tests.kafka_dist fetch`` in a clone, ``make test`` does it).

Java 17+ must be on the PATH (or ``$JAVA_HOME``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

KAFKA_VERSION = "4.3.1"
#: script name -> main class in Kafka 4.3.1
TOOL_CLASSES: dict[str, str] = {
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "kafka-client-metrics": "org.apache.kafka.tools.ClientMetricsCommand",
    "kafka-cluster": "org.apache.kafka.tools.ClusterTool",
    "kafka-configs": "kafka.admin.ConfigCommand",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-dump-log": "org.apache.kafka.tools.DumpLogSegments",
    "kafka-e2e-latency": "org.apache.kafka.tools.EndToEndLatency",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-groups": "org.apache.kafka.tools.GroupsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    "kafka-verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
}
TOOLS = sorted(TOOL_CLASSES)
#: the heap Kafka's scripts give a tool (kafka-run-class.sh: KAFKA_HEAP_OPTS default)
TOOL_HEAP = "256m"
_LOG4J2 = """status = error
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = STDERR
"""


def cache_dir() -> Path:
    env = os.environ.get("KAFKAWIRE_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "kafkawire"


def _java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    return shutil.which("java")


def tool_command(tool: str, args: list[str]) -> list[str]:
    """The command line that runs ``tool``; raises LookupError with advice when it cannot."""
    name = tool[:-3] if tool.endswith(".sh") else tool
    if name not in TOOL_CLASSES:
        raise LookupError(f"unknown Kafka tool {tool!r}; known: {', '.join(TOOLS)}")
    kafka_home = os.environ.get("KAFKA_HOME")
    if kafka_home:
        script = Path(kafka_home) / "bin" / f"{name}.sh"
        if script.exists():
            return [str(script), *args]
    home = cache_dir() / f"kafka-{KAFKA_VERSION}"
    if not (home / "libs").is_dir():
        raise LookupError(
            f"Apache Kafka {KAFKA_VERSION}'s jars are not in {home}: set KAFKA_HOME to a Kafka "
            "installation, or fetch the jars once from a kafkawire clone with "
            "`python -m compat_tests.kafka_dist fetch` (Maven and Java needed)")
    java = _java()
    if java is None:
        raise LookupError("java is not installed (Kafka's tools need Java 17+)")
    log_conf = home / "config" / "kafkawire-cli-log4j2.properties"
    if not log_conf.exists():
        log_conf.parent.mkdir(parents=True, exist_ok=True)
        log_conf.write_text(_LOG4J2)
    return [java, f"-Xmx{TOOL_HEAP}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={log_conf}",
            "-cp", str(home / "libs" / "*"), TOOL_CLASSES[name], *args]


def run_tool(tool: str, args: list[str]) -> int:
    try:
        cmd = tool_command(tool, args)
    except LookupError as e:
        print(f"kafkawire: {e}", file=sys.stderr)
        return 2
    sys.stdout.flush()
    os.execvp(cmd[0], cmd)  # replaces this process: signals and exit codes are the tool's


def list_tools(args: argparse.Namespace) -> int:
    for name in TOOLS:
        print(f"{name:28} {TOOL_CLASSES[name]}")
    return 0
