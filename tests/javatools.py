"""Kafka's own Java tools against kafkawire: runner, fixtures, output parsers, validators.

The jars come from the compat harness's cache (``compat_tests.kafka_dist``; ``make test`` fetches
them first). Without Java or the jars a test skips, except under ``KAFKAWIRE_REQUIRE_KAFKA=1``
(set by ``make test``), where it fails.

* ``java_line`` (fixture, parametrized ``4.x`` / ``3.9``) and ``JavaTools(line)``: run a tool by
  its script name (``tools.run("console-consumer", ...)``); class names differ between lines.
* ``parse_events``: the JSON lines of VerifiableProducer / VerifiableConsumer /
  TransactionalMessageCopier.
* ``read_partitions``: every record of a topic, read back with kafka-python by assign() (no
  consumer group).
* ``validate_delivery``: acked records against what the log holds: nothing acked lost, no
  reordering within a partition, no duplicates with idempotence.

* ``consumed_records``: VerifiableConsumer's ``--verbose`` records, for the same validator.

Transactions: ``transactional-message-copier`` (tests/test_exactly_once.py) and
``transactions`` (kafka-transactions, tests/test_txn_java.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from compat_tests.kafka_dist import kafka_required, run_java_tool, unavailable_reason

LINES = ("4.x", "3.9")

# kafka-<script> name -> main class per client line (4.3.1 / 3.9.2)
TOOLS: dict[str, dict[str, str]] = {
    "topics": {"*": "org.apache.kafka.tools.TopicCommand"},
    "configs": {"*": "kafka.admin.ConfigCommand"},
    "console-producer": {
        "4.x": "org.apache.kafka.tools.ConsoleProducer",
        "3.9": "kafka.tools.ConsoleProducer",
    },
    "console-consumer": {"*": "org.apache.kafka.tools.consumer.ConsoleConsumer"},
    "consumer-groups": {"*": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"},
    "producer-perf-test": {"*": "org.apache.kafka.tools.ProducerPerformance"},
    "consumer-perf-test": {"*": "org.apache.kafka.tools.ConsumerPerformance"},
    "verifiable-producer": {"*": "org.apache.kafka.tools.VerifiableProducer"},
    "verifiable-consumer": {"*": "org.apache.kafka.tools.VerifiableConsumer"},
    "transactional-message-copier": {"*": "org.apache.kafka.tools.TransactionalMessageCopier"},
    "client-compatibility": {"*": "org.apache.kafka.tools.ClientCompatibilityTest"},
    "get-offsets": {"*": "org.apache.kafka.tools.GetOffsetShell"},
    "dump-log": {
        "4.x": "org.apache.kafka.tools.DumpLogSegments",
        "3.9": "kafka.tools.DumpLogSegments",
    },
    "metadata-quorum": {"*": "org.apache.kafka.tools.MetadataQuorumCommand"},
    "log-dirs": {"*": "org.apache.kafka.tools.LogDirsCommand"},
    "cluster": {"*": "org.apache.kafka.tools.ClusterTool"},
    "broker-api-versions": {
        "4.x": "org.apache.kafka.tools.BrokerApiVersionsCommand",
        "3.9": "kafka.admin.BrokerApiVersionsCommand",
    },
    "features": {"*": "org.apache.kafka.tools.FeatureCommand"},
    "client-metrics": {"*": "org.apache.kafka.tools.ClientMetricsCommand"},
    "reassign-partitions": {"*": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"},
    "leader-election": {"*": "org.apache.kafka.tools.LeaderElectionCommand"},
    "transactions": {"*": "org.apache.kafka.tools.TransactionsCommand"},
    # KIP-932 share groups: Kafka 4.x only
    "share-groups": {"4.x": "org.apache.kafka.tools.consumer.group.ShareGroupCommand"},
    "console-share-consumer": {"4.x": "org.apache.kafka.tools.consumer.ConsoleShareConsumer"},
    "acls": {"4.x": "org.apache.kafka.tools.AclCommand", "3.9": "kafka.admin.AclCommand"},
    "delegation-tokens": {"4.x": "org.apache.kafka.tools.DelegationTokenCommand"},
}

# Option spellings that differ between the lines.
OPTIONS: dict[str, dict[str, str]] = {
    "producer-property-file": {"4.x": "--command-config", "3.9": "--producer.config"},
    "reader-property": {"4.x": "--reader-property", "3.9": "--property"},
    "formatter-property": {"4.x": "--formatter-property", "3.9": "--property"},
}

_NOISE = ("SLF4J", "log4j", "WARNING: ")


def require_line(line: str) -> None:
    """Skip (fail under KAFKAWIRE_REQUIRE_KAFKA=1) when the line's jars or Java are missing."""
    reason = unavailable_reason(line)
    if reason is None:
        return
    if kafka_required():
        pytest.fail(f"Kafka {line} tools needed but unavailable: {reason}")
    pytest.skip(f"Kafka {line} tools unavailable: {reason}")


@pytest.fixture(params=LINES)
def java_line(request: pytest.FixtureRequest) -> str:
    line = str(request.param)
    require_line(line)
    return line


@dataclass
class ToolResult:
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        """stdout and stderr without logging-framework noise."""
        lines = (self.stdout + "\n" + self.stderr).splitlines()
        return "\n".join(ln for ln in lines if not ln.startswith(_NOISE) and "StatusLogger" not in ln)


class JavaTools:
    """Kafka's tools of one client line."""

    def __init__(self, line: str) -> None:
        self.line = line

    def main_class(self, tool: str) -> str:
        classes = TOOLS[tool]
        return classes.get(self.line, classes.get("*", ""))

    def option(self, name: str) -> str:
        return OPTIONS[name][self.line]

    def run(
        self,
        tool: str,
        *args: str,
        input: str | None = None,
        check: bool = True,
        timeout: float = 240,
    ) -> ToolResult:
        p = run_java_tool(
            self.main_class(tool), list(args), self.line, check=False, input=input, timeout=timeout
        )
        res = ToolResult(p.returncode, p.stdout, p.stderr)
        if check and p.returncode != 0:
            raise AssertionError(
                f"kafka-{tool} ({self.line}) {' '.join(args)} exited {p.returncode}:\n"
                + res.output[-4000:]
            )
        return res


def write_properties(path: Path, props: Mapping[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def parse_events(stdout: str) -> list[dict[str, Any]]:
    """The JSON event lines the verifiable tools print (one object per line)."""
    events = []
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            events.append(json.loads(line))
    return events


# --- reading a topic back and validating delivery ---------------------------------------------


@dataclass(frozen=True)
class Acked:
    partition: int
    offset: int
    key: str | None
    value: str


def acked_records(events: Iterable[Mapping[str, Any]]) -> list[Acked]:
    """VerifiableProducer's ``producer_send_success`` events, in the order printed."""
    return [
        Acked(int(e["partition"]), int(e["offset"]), e.get("key"), str(e["value"]))
        for e in events
        if e.get("name") == "producer_send_success"
    ]


LogContents = dict[int, list[tuple[int, str | None, str | None]]]


def consumed_records(events: Iterable[Mapping[str, Any]]) -> LogContents:
    """VerifiableConsumer ``--verbose`` ``record_data`` events as (offset, key, value) per
    partition, in the order consumed (a rebalance may deliver a record twice)."""
    out: LogContents = {}
    for e in events:
        if e.get("name") == "record_data":
            out.setdefault(int(e["partition"]), []).append(
                (int(e["offset"]), e.get("key"), e.get("value"))
            )
    return out


def read_partitions(bootstrap: str, topic: str, timeout_s: float = 60.0) -> LogContents:
    """Every record of ``topic`` per partition as (offset, key, value), read by assign()."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    try:
        parts = sorted(consumer.partitions_for_topic(topic) or ())
        tps = [TopicPartition(topic, p) for p in parts]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        out: LogContents = {p: [] for p in parts}
        deadline = time.monotonic() + timeout_s
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise AssertionError(f"reading {topic} back timed out at {out and len(out)}")
            for tp, msgs in consumer.poll(timeout_ms=1000).items():
                for m in msgs:
                    key = m.key.decode() if m.key is not None else None
                    value = m.value.decode() if m.value is not None else None
                    out[tp.partition].append((m.offset, key, value))
        return out
    finally:
        consumer.close()


def _int_value(value: str | None) -> int | None:
    """VerifiableProducer values are increasing integers, optionally ``<prefix>.<n>``."""
    if value is None:
        return None
    tail = value.rsplit(".", 1)[-1]
    return int(tail) if tail.lstrip("-").isdigit() else None


def validate_delivery(acked: list[Acked], log: LogContents, *, idempotent: bool) -> list[str]:
    """Problems found comparing what the producer saw acked with what the log holds.

    * lost: an acked (partition, offset) is missing from the log or holds another value;
    * reordered: within a partition, a value sent later sits at a lower offset than one sent
      earlier (values are the producer's send sequence);
    * duplicated (idempotent producers only): a value stored more than once in the topic.
    """
    problems: list[str] = []
    by_offset = {(p, o): v for p, recs in log.items() for o, _k, v in recs}
    for a in acked:
        got = by_offset.get((a.partition, a.offset), "<missing>")
        if got != a.value:
            problems.append(f"lost: acked {a.value!r} at {a.partition}:{a.offset}, log has {got!r}")
    for p, recs in sorted(log.items()):
        seen: dict[int, int] = {}  # value -> first offset
        top = -1
        for offset, _k, v in recs:
            n = _int_value(v)
            if n is None:
                continue
            # a lower value than one already stored: reordering, unless it is a retry's
            # duplicate of a value stored before (possible without idempotence only)
            if n < top and (idempotent or n not in seen):
                problems.append(
                    f"reordered: partition {p} value {n} at offset {offset} after {top} "
                    f"at offset {seen[top]}"
                )
            seen.setdefault(n, offset)
            top = max(top, n)
    if idempotent:
        where: dict[str | None, list[str]] = {}
        for p, recs in log.items():
            for o, _k, v in recs:
                where.setdefault(v, []).append(f"{p}:{o}")
        problems += [f"duplicated: {v!r} at {', '.join(ws)}" for v, ws in where.items() if len(ws) > 1]
    return problems

