"""Kafka's own group tools (Java kafka-clients, classic protocol) of both client lines (4.3.1
and 3.9.2, the ``java_line`` fixture) against kafkawire: kafka-console-consumer with --group,
kafka-consumer-groups (describe with lag, reset offsets, list, delete), VerifiableConsumer and
kafka-consumer-perf-test; Java 4.3.1 consumers with ``group.protocol=consumer`` (KIP-848) and
both protocols in one group.

The jars come from the compat harness's cache (``python -m compat_tests.kafka_dist fetch``);
the tests skip when it (or java) is absent, and fail instead under ``make test``.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator

import pytest

from kafkawire.tools.testing import BrokerProcess
from tests.javatools import JavaTools, require_line

pytestmark = pytest.mark.slow


def tool(name: str, *args: str, line: str = "4.x", check: bool = True) -> str:
    """Run kafka-<name> of ``line``; stdout + stderr."""
    r = JavaTools(line).run(name, *args, check=check, timeout=180)
    return r.stdout + r.stderr


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


def describe_rows(bootstrap: str, group: str, line: str = "4.x") -> dict[int, tuple[int, int, int]]:
    """partition -> (current offset, log end offset, lag) from kafka-consumer-groups."""
    out = tool("consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", group, line=line)
    rows = {}
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 6 and cols[0] == group and cols[2].isdigit():
            cur, end, lag = cols[3], cols[4], cols[5]
            rows[int(cols[2])] = (int(cur) if cur.isdigit() else -1, int(end), int(lag) if lag.lstrip("-").isdigit() else -1)
    return rows


def test_console_consumer_group_describe_reset_delete(jbroker: BrokerProcess, java_line: str) -> None:
    bs = jbroker.bootstrap
    line = java_line
    topic = f"jg-{line.replace('.', '')}-{uuid.uuid4().hex[:6]}"
    group = f"g-{topic}"
    produce(bs, topic, 60, 3, create=True)
    out = tool("console-consumer", "--bootstrap-server", bs, "--topic", topic, "--group", group,
               "--from-beginning", "--max-messages", "60", "--timeout-ms", "60000", line=line)
    assert sorted(ln for ln in out.splitlines() if ln.startswith("r")) == sorted(f"r{i}" for i in range(60))
    assert describe_rows(bs, group, line) == {0: (20, 20, 0), 1: (20, 20, 0), 2: (20, 20, 0)}
    produce(bs, topic, 30, 3)
    assert describe_rows(bs, group, line) == {0: (20, 30, 10), 1: (20, 30, 10), 2: (20, 30, 10)}
    out = tool("consumer-groups", "--bootstrap-server", bs, "--reset-offsets", "--group", group,
               "--topic", topic, "--to-earliest", "--execute", line=line)
    assert len(re.findall(rf"{re.escape(group)}\s+{re.escape(topic)}\s+\d\s+0", out)) == 3, out
    assert describe_rows(bs, group, line) == {0: (0, 30, 30), 1: (0, 30, 30), 2: (0, 30, 30)}
    # the console consumer resumes from the reset offsets: everything again
    out = tool("console-consumer", "--bootstrap-server", bs, "--topic", topic, "--group", group,
               "--max-messages", "90", "--timeout-ms", "60000", line=line)
    assert len([ln for ln in out.splitlines() if ln.startswith("r")]) == 90
    assert group in tool("consumer-groups", "--bootstrap-server", bs, "--list", line=line).split()
    out = tool("consumer-groups", "--bootstrap-server", bs, "--delete", "--group", group, line=line)
    assert "successful" in out, out
    assert group not in tool("consumer-groups", "--bootstrap-server", bs, "--list", line=line).split()


def test_verifiable_consumer_and_perf_test(jbroker: BrokerProcess, java_line: str) -> None:
    bs = jbroker.bootstrap
    line = java_line
    topic = f"jv-{line.replace('.', '')}-{uuid.uuid4().hex[:6]}"
    produce(bs, topic, 300, 4, create=True)
    out = tool("verifiable-consumer", "--bootstrap-server", bs, "--topic", topic,
               "--group-id", f"gv-{topic}", "--max-messages", "300", line=line)
    events = [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]
    names = [e["name"] for e in events]
    assert "partitions_assigned" in names
    consumed = sum(e["count"] for e in events if e["name"] == "records_consumed")
    assert consumed == 300
    commits = [e for e in events if e["name"] == "offsets_committed"]
    assert commits and all(c["success"] for c in commits)
    assigned = [p["partition"] for e in events if e["name"] == "partitions_assigned" for p in e["partitions"]]
    assert sorted(assigned) == [0, 1, 2, 3]
    out = tool("consumer-perf-test", "--bootstrap-server", bs, "--topic", topic, "--messages", "300",
               "--group", f"gp-{topic}", "--timeout", "60000", line=line)
    data = [ln for ln in out.splitlines() if re.match(r"^\d{4}-\d\d-\d\d", ln)]
    assert data, out
    assert int(data[-1].split(",")[4].strip()) >= 300  # data.consumed.in.nMsg


def test_java_consumer_protocol_kip848(jbroker: BrokerProcess) -> None:
    """Java 4.3.1 consumers with group.protocol=consumer (ConsumerGroupHeartbeat), then
    kafka-consumer-groups describes the group through ConsumerGroupDescribe."""
    require_line("4.x")
    bs = jbroker.bootstrap
    topic = f"jk-{uuid.uuid4().hex[:6]}"
    group = f"g-{topic}"
    produce(bs, topic, 40, 2, create=True)
    out = tool("console-consumer", "--bootstrap-server", bs, "--topic", topic, "--group", group,
               "--consumer-property", "group.protocol=consumer", "--from-beginning",
               "--max-messages", "40", "--timeout-ms", "60000")
    assert len([ln for ln in out.splitlines() if ln.startswith("r")]) == 40, out
    assert describe_rows(bs, group) == {0: (20, 20, 0), 1: (20, 20, 0)}
    out = tool("consumer-groups", "--bootstrap-server", bs, "--list", "--type")
    assert re.search(rf"{re.escape(group)}\s+Consumer", out), out
    out = tool("consumer-groups", "--bootstrap-server", bs, "--describe", "--group", group, "--state")
    assert re.search(r"\bEmpty\b", out) and "uniform" in out, out


def test_java_classic_and_consumer_protocol_in_one_group(jbroker: BrokerProcess) -> None:
    """Two Java 4.3.1 VerifiableConsumers in one group, one classic, one with
    group.protocol=consumer: the classic group is upgraded online when the second joins, both
    own partitions, kafka-consumer-groups describes the mixed group; when the consumer-protocol
    member leaves, the group is classic again."""
    require_line("4.x")
    import subprocess
    import threading
    import time

    from compat_tests.kafka_dist import java_command

    bs = jbroker.bootstrap
    topic = f"jmix-{uuid.uuid4().hex[:6]}"
    group = f"g-{topic}"
    produce(bs, topic, 40, 4, create=True)
    tools = JavaTools("4.x")

    def start(protocol: str) -> tuple[subprocess.Popen[str], list[dict[str, object]]]:
        args = ["--bootstrap-server", bs, "--topic", topic, "--group-id", group, "--group-protocol", protocol,
                "--session-timeout", "10000"] if protocol == "classic" else [
                "--bootstrap-server", bs, "--topic", topic, "--group-id", group, "--group-protocol", protocol]
        p = subprocess.Popen(java_command(tools.main_class("verifiable-consumer"), args, "4.x"),
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        events: list[dict[str, object]] = []

        def read() -> None:
            assert p.stdout is not None
            for ln in p.stdout:
                if ln.startswith("{"):
                    events.append(json.loads(ln))

        threading.Thread(target=read, daemon=True).start()
        return p, events

    def owned(events: list[dict[str, object]]) -> set[int]:
        parts: set[int] = set()
        for e in events:
            if e["name"] == "partitions_assigned":
                parts |= {int(p["partition"]) for p in e["partitions"]}  # type: ignore[attr-defined,index]
            elif e["name"] == "partitions_revoked":
                parts -= {int(p["partition"]) for p in e["partitions"]}  # type: ignore[attr-defined,index]
        return parts

    def wait(cond: object, what: str, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if cond():  # type: ignore[operator]
                return
            time.sleep(0.3)
        raise AssertionError(f"timed out: {what}")

    classic, cev = start("classic")
    procs = [classic]
    try:
        wait(lambda: owned(cev) == {0, 1, 2, 3}, "the classic member owns everything")
        new, nev = start("consumer")
        procs.append(new)
        wait(lambda: owned(nev) and owned(cev) and owned(cev) | owned(nev) == {0, 1, 2, 3}
             and not owned(cev) & owned(nev), "both members share the partitions")
        out = tool("consumer-groups", "--bootstrap-server", bs, "--list", "--type")
        assert re.search(rf"{re.escape(group)}\s+Consumer", out), out
        out = tool("consumer-groups", "--bootstrap-server", bs, "--describe", "--group", group, "--members")
        assert len([ln for ln in out.splitlines() if ln.startswith(group)]) == 2, out
        new.terminate()
        new.wait(60)
        wait(lambda: owned(cev) == {0, 1, 2, 3}, "the classic member owns everything again")
        out = tool("consumer-groups", "--bootstrap-server", bs, "--list", "--type")
        assert re.search(rf"{re.escape(group)}\s+Classic", out), out
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(60)
                except subprocess.TimeoutExpired:
                    p.kill()
