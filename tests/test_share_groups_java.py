"""Share groups (KIP-932) with Kafka 4.3.1's own Java tools: kafka-console-share-consumer
(KafkaShareConsumer) consumes, two of them in one group split one partition's records,
and kafka-share-groups lists, describes (offsets, members, state), resets offsets and
deletes offsets and the group."""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator

import pytest

from compat_tests.kafka_dist import java_command
from kafkawire.testing import BrokerProcess
from tests.javatools import JavaTools, require_line


@pytest.fixture(scope="module")
def tools() -> JavaTools:
    require_line("4.x")
    return JavaTools("4.x")


@pytest.fixture(scope="module")
def jbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    bp = BrokerProcess(tmp_path_factory.mktemp("sharej") / "data").start()
    try:
        yield bp
    finally:
        bp.close()


def _produce(bs: str, name: str, n: int, partitions: int = 1) -> list[str]:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    p = Producer({"bootstrap.servers": bs})
    values = [f"m{i:03d}" for i in range(n)]
    for i, v in enumerate(values):
        p.produce(name, value=v.encode(), partition=i % partitions)
        if i % 5 == 4:
            p.flush(30)
    p.flush(30)
    return values


def _reset_earliest(tools: JavaTools, bs: str, group: str, name: str) -> None:
    tools.run("share-groups", "--bootstrap-server", bs, "--reset-offsets", "--group", group,
              "--topic", name, "--to-earliest", "--execute")


def _members(bs: str, group: str, assigned: bool = False) -> int:
    """Members of the share group (``assigned``: only those whose current assignment, the one
    their last heartbeat answer gave them, holds a partition)."""
    from protocol._generated.share_group_describe_request import ShareGroupDescribeRequest
    from tests.conftest import RawClient

    d = RawClient(bs).request(ShareGroupDescribeRequest(
        group_ids=[group], include_authorized_operations=False), 1)
    return sum(1 for m in d.groups[0].members
               if not assigned or any(t.partitions for t in m.assignment.topic_partitions))


def _start_offset(bs: str, group: str, name: str) -> int:
    from protocol._generated.describe_share_group_offsets_request import (
        DescribeShareGroupOffsetsRequest as Req,
    )
    from tests.conftest import RawClient

    d = RawClient(bs).request(Req(groups=[Req.DescribeShareGroupOffsetsRequestGroup(
        group_id=group, topics=[Req.DescribeShareGroupOffsetsRequestTopic(
            topic_name=name, partitions=[0])])]), 1)
    return int(d.groups[0].topics[0].partitions[0].start_offset) if d.groups[0].topics else -1


def test_console_share_consumers_split_a_partition(tools: JavaTools, jbroker: BrokerProcess) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    bs = jbroker.bootstrap
    name, group = "jq-" + uuid.uuid4().hex[:6], "jg-" + uuid.uuid4().hex[:6]
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    args = ["--bootstrap-server", bs, "--topic", name, "--group", group,
            "--timeout-ms", "15000", "--consumer-property", "max.poll.records=2"]
    def start() -> subprocess.Popen[str]:
        return subprocess.Popen(java_command(tools.main_class("console-share-consumer"), args,
                                             "4.x"),
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    # The first consumer's first heartbeat initializes the share partition and its next one
    # (a heartbeat interval later) brings the assignment; it has it once the share partition
    # has a start offset (set at its first ShareFetch, share.auto.offset.reset=latest). The
    # second consumer joins an initialized group: its first heartbeat answer assigns it.
    procs = [start()]
    deadline = time.monotonic() + 120
    while _start_offset(bs, group, name) < 0 and time.monotonic() < deadline:
        time.sleep(0.5)
    procs.append(start())
    while _members(bs, group, assigned=True) < 2 and time.monotonic() < deadline:
        time.sleep(0.5)
    p = Producer({"bootstrap.servers": bs})
    values = [f"m{i:03d}" for i in range(40)]
    for i in range(0, 40, 2):
        for v in values[i:i + 2]:
            p.produce(name, value=v.encode())
        p.flush(30)
        time.sleep(0.1)
    outs = [pr.communicate(timeout=240)[0] for pr in procs]
    lines = [[ln for ln in out.splitlines() if ln.startswith("m")] for out in outs]
    got = lines[0] + lines[1]
    assert sorted(got) == values, (len(got), len(set(got)))  # each record once, none lost
    assert all(lines), [len(x) for x in lines]  # both consumers had a share


def test_kafka_share_groups_describe_reset_delete(tools: JavaTools, jbroker: BrokerProcess) -> None:
    bs = jbroker.bootstrap
    name, group = "jq-" + uuid.uuid4().hex[:6], "jg-" + uuid.uuid4().hex[:6]
    _produce(bs, name, 10, partitions=2)
    _reset_earliest(tools, bs, group, name)
    out = tools.run("share-groups", "--bootstrap-server", bs, "--list").output
    assert group in out.split()
    out = tools.run("share-groups", "--bootstrap-server", bs, "--describe", "--group", group).output
    rows = {tuple(ln.split()[1:5]) for ln in out.splitlines() if ln.startswith(group)}
    assert rows == {(name, "0", "0", "5"), (name, "1", "0", "5")}, out
    r = subprocess.run(java_command(tools.main_class("console-share-consumer"),
                                    ["--bootstrap-server", bs, "--topic", name, "--group", group,
                                     "--max-messages", "10", "--timeout-ms", "30000"], "4.x"),
                       capture_output=True, text=True, timeout=240)
    assert len([ln for ln in r.stdout.splitlines() if ln.startswith("m")]) == 10
    deadline = time.monotonic() + 60
    while True:  # acknowledgements of the last poll are sent when the consumer closes
        out = tools.run("share-groups", "--bootstrap-server", bs, "--describe", "--group",
                        group).output
        lags = [ln.split()[4] for ln in out.splitlines() if ln.startswith(group)]
        if lags == ["0", "0"] or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert lags == ["0", "0"], out
    out = tools.run("share-groups", "--bootstrap-server", bs, "--describe", "--group", group,
                    "--state").output
    assert "Empty" in out
    tools.run("share-groups", "--bootstrap-server", bs, "--delete-offsets", "--group", group,
              "--topic", name)
    tools.run("share-groups", "--bootstrap-server", bs, "--delete", "--group", group)
    out = tools.run("share-groups", "--bootstrap-server", bs, "--list").output
    assert group not in out.split()


def test_console_share_consumer_release_then_reject(tools: JavaTools, jbroker: BrokerProcess) -> None:
    """KafkaShareConsumer (kafka-console-share-consumer --release / --reject, printing the
    delivery count): released records come back with delivery count 2, rejected ones never."""
    bs = jbroker.bootstrap
    name, group = "jq-" + uuid.uuid4().hex[:6], "jg-" + uuid.uuid4().hex[:6]
    values = _produce(bs, name, 3)
    _reset_earliest(tools, bs, group, name)

    def run(*extra: str, messages: int = 3, timeout_ms: int = 30000) -> list[str]:
        args = ["--bootstrap-server", bs, "--topic", name, "--group", group,
                "--max-messages", str(messages), "--timeout-ms", str(timeout_ms),
                "--formatter-property", "print.delivery=true", *extra]
        r = subprocess.run(java_command(tools.main_class("console-share-consumer"), args, "4.x"),
                           capture_output=True, text=True, timeout=240)
        return [ln for ln in r.stdout.splitlines() if ln.strip().endswith(tuple(values))]

    first = run("--release")
    assert sorted(first) == sorted(f"Delivery:1\t{v}" for v in values), first
    second = run("--reject")
    assert sorted(second) == sorted(f"Delivery:2\t{v}" for v in values), second
    assert run(messages=1, timeout_ms=5000) == []
