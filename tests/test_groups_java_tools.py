"""Kafka 4.3.1's own group tools (Java kafka-clients, classic protocol) against kafkawire:
kafka-console-consumer with --group, kafka-consumer-groups (describe with lag, reset offsets,
list, delete), VerifiableConsumer and kafka-consumer-perf-test.

The jars come from the compat harness's cache (``python -m compat_tests.kafka_dist fetch``);
the tests skip when it (or java) is absent, and fail instead under ``make test``.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator

import pytest

from kafkawire.testing import BrokerProcess
from tests.javatools import require_line

pytestmark = pytest.mark.slow

GROUPS_CMD = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
VERIFIABLE_CONSUMER = "org.apache.kafka.tools.VerifiableConsumer"
CONSUMER_PERF = "org.apache.kafka.tools.ConsumerPerformance"


@pytest.fixture(autouse=True)
def _kafka_tools() -> None:
    # skips without java or the jars; fails instead under make test (KAFKAWIRE_REQUIRE_KAFKA=1)
    require_line("4.x")


def tool(main: str, *args: str, check: bool = True) -> str:
    from compat_tests.kafka_dist import run_java_tool

    p = run_java_tool(main, args, "4.x", timeout=180, check=check)
    return p.stdout + p.stderr


@pytest.fixture(scope="module")
def jbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    bp = BrokerProcess(tmp_path_factory.mktemp("kwj") / "data", overrides={
        "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "5",
    }).start()
    try:
        yield bp
    finally:
        bp.close()


def produce(bootstrap: str, topic: str, n: int, partitions: int, create: bool = False) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    if create:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, f"r{i}".encode(), partition=i % partitions)
    assert p.flush(30) == 0


def describe_rows(bootstrap: str, group: str) -> dict[int, tuple[int, int, int]]:
    """partition -> (current offset, log end offset, lag) from kafka-consumer-groups."""
    out = tool(GROUPS_CMD, "--bootstrap-server", bootstrap, "--describe", "--group", group)
    rows = {}
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 6 and cols[0] == group and cols[2].isdigit():
            cur, end, lag = cols[3], cols[4], cols[5]
            rows[int(cols[2])] = (int(cur) if cur.isdigit() else -1, int(end), int(lag) if lag.lstrip("-").isdigit() else -1)
    return rows


def test_console_consumer_group_describe_reset_delete(jbroker: BrokerProcess) -> None:
    bs = jbroker.bootstrap
    topic = f"jg-{uuid.uuid4().hex[:6]}"
    group = f"g-{topic}"
    produce(bs, topic, 60, 3, create=True)
    out = tool(CONSOLE_CONSUMER, "--bootstrap-server", bs, "--topic", topic, "--group", group,
               "--from-beginning", "--max-messages", "60", "--timeout-ms", "60000")
    assert sorted(line for line in out.splitlines() if line.startswith("r")) == sorted(f"r{i}" for i in range(60))
    assert describe_rows(bs, group) == {0: (20, 20, 0), 1: (20, 20, 0), 2: (20, 20, 0)}
    produce(bs, topic, 30, 3)
    assert describe_rows(bs, group) == {0: (20, 30, 10), 1: (20, 30, 10), 2: (20, 30, 10)}
    out = tool(GROUPS_CMD, "--bootstrap-server", bs, "--reset-offsets", "--group", group,
               "--topic", topic, "--to-earliest", "--execute")
    assert len(re.findall(rf"{re.escape(group)}\s+{re.escape(topic)}\s+\d\s+0", out)) == 3, out
    assert describe_rows(bs, group) == {0: (0, 30, 30), 1: (0, 30, 30), 2: (0, 30, 30)}
    # the console consumer resumes from the reset offsets: everything again
    out = tool(CONSOLE_CONSUMER, "--bootstrap-server", bs, "--topic", topic, "--group", group,
               "--max-messages", "90", "--timeout-ms", "60000")
    assert len([line for line in out.splitlines() if line.startswith("r")]) == 90
    assert group in tool(GROUPS_CMD, "--bootstrap-server", bs, "--list").split()
    out = tool(GROUPS_CMD, "--bootstrap-server", bs, "--delete", "--group", group)
    assert "successful" in out, out
    assert group not in tool(GROUPS_CMD, "--bootstrap-server", bs, "--list").split()


def test_verifiable_consumer_and_perf_test(jbroker: BrokerProcess) -> None:
    bs = jbroker.bootstrap
    topic = f"jv-{uuid.uuid4().hex[:6]}"
    produce(bs, topic, 300, 4, create=True)
    out = tool(VERIFIABLE_CONSUMER, "--bootstrap-server", bs, "--topic", topic,
               "--group-id", f"gv-{topic}", "--max-messages", "300")
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    names = [e["name"] for e in events]
    assert "partitions_assigned" in names
    consumed = sum(e["count"] for e in events if e["name"] == "records_consumed")
    assert consumed == 300
    commits = [e for e in events if e["name"] == "offsets_committed"]
    assert commits and all(c["success"] for c in commits)
    assigned = [p["partition"] for e in events if e["name"] == "partitions_assigned" for p in e["partitions"]]
    assert sorted(assigned) == [0, 1, 2, 3]
    out = tool(CONSUMER_PERF, "--bootstrap-server", bs, "--topic", topic, "--messages", "300",
               "--group", f"gp-{topic}", "--timeout", "60000")
    data = [line for line in out.splitlines() if re.match(r"^\d{4}-\d\d-\d\d", line)]
    assert data, out
    assert int(data[-1].split(",")[4].strip()) >= 300  # data.consumed.in.nMsg


def test_java_consumer_protocol_kip848(jbroker: BrokerProcess) -> None:
    """Java 4.3.1 consumers with group.protocol=consumer (ConsumerGroupHeartbeat), then
    kafka-consumer-groups describes the group through ConsumerGroupDescribe."""
    bs = jbroker.bootstrap
    topic = f"jk-{uuid.uuid4().hex[:6]}"
    group = f"g-{topic}"
    produce(bs, topic, 40, 2, create=True)
    out = tool(CONSOLE_CONSUMER, "--bootstrap-server", bs, "--topic", topic, "--group", group,
               "--consumer-property", "group.protocol=consumer", "--from-beginning",
               "--max-messages", "40", "--timeout-ms", "60000")
    assert len([line for line in out.splitlines() if line.startswith("r")]) == 40, out
    assert describe_rows(bs, group) == {0: (20, 20, 0), 1: (20, 20, 0)}
    out = tool(GROUPS_CMD, "--bootstrap-server", bs, "--list", "--type")
    assert re.search(rf"{re.escape(group)}\s+Consumer", out), out
    out = tool(GROUPS_CMD, "--bootstrap-server", bs, "--describe", "--group", group, "--state")
    assert re.search(r"\bEmpty\b", out) and "uniform" in out, out
