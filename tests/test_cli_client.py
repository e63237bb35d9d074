"""The client CLI end to end: ``python -m kafkawire topic|produce|consume|group|cluster`` as
subprocesses, against kafkawire and against Apache Kafka 4.3.1 (it is a client: both must
work), plus one real terminal session in tmux and Kafka's tools by their usual names."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkawire.tools.testing import BrokerProcess, free_port

ROOT = Path(__file__).resolve().parent.parent


def kw(*args: str, stdin: str | None = None, timeout: float = 120,
       check: bool = True) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "kafkawire", *args], input=stdin, text=True,
                          capture_output=True, timeout=timeout, cwd=ROOT, env=env)
    if check:
        assert proc.returncode == 0, f"{args}: rc {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line.strip()]


@pytest.fixture(scope="module", params=["kafkawire", "kafka-4.3.1"])
def target(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if request.param == "kafkawire":
        with BrokerProcess(tmp_path_factory.mktemp("cli") / "data") as bp:
            yield bp.bootstrap
        return
    from compat_tests.kafka_dist import kafka_required, running_kafka, unavailable_reason

    reason = unavailable_reason("4.x")
    if reason is not None:
        if kafka_required():
            pytest.fail(f"Apache Kafka 4.3.1 needed but unavailable: {reason}")
        pytest.skip(f"Apache Kafka 4.3.1 unavailable: {reason}")
    with running_kafka("4.x") as bootstrap:
        yield bootstrap


def test_topics(target: str) -> None:
    b = ["--bootstrap-server", target]
    out = kw("topic", "create", "cli-t", "-p", "3", "-c", "retention.ms=3600000", *b).stdout
    assert rows(out) == [["TOPIC", "STATUS"], ["cli-t", "OK"]]
    again = kw("topic", "create", "cli-t", *b, check=False)
    assert again.returncode == 1 and "already exists" in again.stdout
    listing = rows(kw("topic", "list", *b).stdout)
    assert listing[0] == ["NAME", "PARTITIONS", "REPLICAS"] and ["cli-t", "3", "1"] in listing
    kw("topic", "alter", "cli-t", "--set", "retention.ms=1000", "--partitions", "4", *b)
    desc = kw("topic", "describe", "cli-t", *b).stdout
    assert ["cli-t", "4", "1"] in rows(desc)
    assert ["retention.ms", "1000", "DYNAMIC_TOPIC_CONFIG"] in rows(desc)
    parts = [r for r in rows(desc.split("PARTITIONS\n==========")[1])]
    assert parts[0][:2] == ["PARTITION", "LEADER"] and len(parts) == 5
    info = rows(kw("cluster", "info", *b).stdout)
    assert info[2][:3] == ["CLUSTER-ID", "CONTROLLER", "BROKERS"] and info[3][2] == "1"
    assert kw("topic", "delete", "cli-t", *b).stdout.split()[-1] == "OK"
    deadline = time.monotonic() + 30
    while ["cli-t", "4", "1"] in rows(kw("topic", "list", *b).stdout):
        assert time.monotonic() < deadline
        time.sleep(0.5)


def test_produce_consume_and_groups(target: str) -> None:
    b = ["--bootstrap-server", target]
    kw("topic", "create", "cli-r", "-p", "2", *b)
    before_ms = int(time.time() * 1000) - 1000
    lines = "".join(f"k{i}:v{i}\n" for i in range(10))
    res = kw("produce", "cli-r", "--key-separator", ":", "-H", "src=cli", *b, stdin=lines)
    assert "produced 10 records to cli-r" in res.stderr
    recs = [json.loads(x) for x in
            kw("consume", "cli-r", "-e", "-f", "json", *b).stdout.splitlines()]
    assert sorted((r["key"], r["value"]) for r in recs) == sorted(
        (f"k{i}", f"v{i}") for i in range(10))
    assert all(r["headers"] == {"src": "cli"} for r in recs)
    # the last record of each partition, by a template
    last = kw("consume", "cli-r", "-o", "-1", "-e", "-f", "%p %o %k=%v\\n", *b).stdout
    per_part = {int(p): int(o) for p, o, _kv in (x.split() for x in last.splitlines())}
    assert per_part == {r["partition"]: max(x["offset"] for x in recs
                                             if x["partition"] == r["partition"])
                        for r in recs}
    by_time = kw("consume", "cli-r", "-o", f"@{before_ms}", "-e", *b).stdout.split()
    assert sorted(by_time) == sorted(f"v{i}" for i in range(10))
    assert kw("consume", "cli-r", "-o", "@-1h", "-e", "-n", "3", *b).stdout.count("\n") == 3
    assert kw("consume", "cli-r", "-o", "end", "-e", *b).stdout == ""
    bad = kw("consume", "cli-r", "-o", "yesterday", *b, check=False)
    assert bad.returncode == 1 and "bad --offset" in bad.stderr

    # a group reads 10, commits on close: lag 0; reset to start (dry run, then execute): lag 10
    assert len(kw("consume", "cli-r", "-g", "cli-g", "-n", "10", *b).stdout.split()) == 10
    assert ["cli-g"] == [r[0] for r in rows(kw("group", "list", *b).stdout) if r[0] == "cli-g"]
    desc = rows(kw("group", "describe", "cli-g", *b).stdout)
    assert desc[2][0] == "STATE" and desc[3][-1] == "0", desc
    plan = kw("group", "reset", "cli-g", "-t", "cli-r", "--to", "start", *b).stdout
    assert "dry run" in plan and rows(kw("group", "describe", "cli-g", *b).stdout)[3][-1] == "0"
    kw("group", "reset", "cli-g", "-t", "cli-r", "--to", "start", "--execute", *b)
    desc = rows(kw("group", "describe", "cli-g", *b).stdout)
    assert desc[3][-1] == "10", desc
    kw("topic", "delete", "cli-r", *b)


def test_unknown_names_are_errors_and_create_nothing(target: str) -> None:
    """Looking at a topic or group that does not exist reports it (exit 1) and creates
    nothing, as kafka-topics (exit 1), rpk and kcat do; Kafka's kafka-consumer-groups prints
    "Group ... not found." (with exit 0; we exit 1)."""
    b = ["--bootstrap-server", target]
    for name, args in (("cli-nosuch-1", ("topic", "describe")), ("cli-nosuch-2", ("consume", "-e")),
                       ("cli-nosuch-3", ("consume", "-g", "cli-nosuch-g", "-e")),
                       ("cli-nosuch-4", ("group", "reset", "cli-nosuch-g", "--to", "start",
                                         "-t"))):
        res = kw(*args, name, *b, check=False)
        assert res.returncode == 1, (args, res.stdout, res.stderr)
        assert f"topic {name} does not exist" in res.stderr, res.stderr
        assert res.stdout == "", res.stdout  # nothing printed before the error
    group = kw("group", "describe", "cli-nosuch-g", *b, check=False)
    assert group.returncode == 1 and "group cli-nosuch-g: not found" in group.stderr
    listed = kw("topic", "list", *b).stdout
    assert "cli-nosuch" not in listed, listed


def test_mistyped_commands_and_flags_name_the_closest() -> None:
    """A mistyped flag gets the usage of the command it was given to and the closest option;
    a mistyped command the closest commands."""
    flag = kw("topic", "describe", "t", "--all-config", "--timout", "3", check=False)
    assert flag.returncode == 2
    assert "usage: kafkawire topic describe" in flag.stderr, flag.stderr
    assert "--timout: did you mean --timeout?" in flag.stderr, flag.stderr
    serve = kw("serve", "--overide", "a=b", check=False)
    assert serve.returncode == 2 and "did you mean --override?" in serve.stderr
    command = kw("topic", "lst", check=False)
    assert command.returncode == 2 and "did you mean list?" in command.stderr


def test_unreachable_cluster_is_one_line() -> None:
    res = kw("topic", "list", "--bootstrap-server", f"127.0.0.1:{free_port()}",
             "--timeout", "2", check=False)
    assert res.returncode == 1 and "cannot reach" in res.stderr
    assert "Traceback" not in res.stderr


def test_kafka_tools_by_their_names(broker: BrokerProcess) -> None:
    from compat_tests.kafka_dist import kafka_required, unavailable_reason

    reason = unavailable_reason("4.x")
    if reason is not None:
        if kafka_required():
            pytest.fail(f"Kafka's tools needed but unavailable: {reason}")
        pytest.skip(f"Kafka's tools unavailable: {reason}")
    b = ["--bootstrap-server", broker.bootstrap]
    kw("kafka-topics", *b, "--create", "--topic", "cli-java", "--partitions", "2")
    assert "cli-java" in kw("kafka-topics", *b, "--list").stdout.split()
    assert "kafka-topics" in kw("kafka-tools").stdout
    unknown = kw("kafka-nope", check=False)
    assert unknown.returncode == 2 and "unknown Kafka tool" in unknown.stderr


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_cli_in_a_terminal(broker: BrokerProcess, tmp_path: Path) -> None:
    """A real terminal: tmux runs the commands, capture-pane reads the screen."""
    session = f"kwcli{os.getpid()}"
    env = f"PYTHONPATH={ROOT}"
    py = f"{env} {sys.executable} -m kafkawire"
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "120", "-y", "40"],
                   check=True)
    try:
        script = (f"cd {ROOT}; seq 1 20000 | {py} produce cli-tty -b {broker.bootstrap}; "
                  f"{py} topic describe cli-tty -b {broker.bootstrap}; echo DONE")
        subprocess.run(["tmux", "send-keys", "-t", session, script, "Enter"], check=True)
        deadline = time.monotonic() + 120
        screen = ""
        while time.monotonic() < deadline:
            screen = subprocess.run(["tmux", "capture-pane", "-p", "-t", session],
                                    capture_output=True, text=True, check=True).stdout
            if "\nDONE" in screen:
                break
            time.sleep(0.5)
        (tmp_path / "screen.txt").write_text(screen)
        assert "produced 20000 records to cli-tty" in screen, screen
        assert "PARTITION  LEADER  REPLICAS  ISR  LOG-START-OFFSET  HIGH-WATERMARK" in screen
        assert "0          1       1         1    0                 20000" in screen
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False)
