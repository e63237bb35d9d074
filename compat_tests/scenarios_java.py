"""Scenarios running Kafka's own Java tools (both client lines) that need no consumer group:
``kafka-metadata-quorum``, console producer/consumer by partition and offset,
``kafka-get-offsets``.

Registered into ``compat_tests.scenarios.SCENARIOS`` when that module is imported.
"""

# ruff: noqa: B023
from __future__ import annotations

import json
import re
from typing import Any

from compat_tests.scenarios import (
    T0,
    Outcome,
    Rec,
    Steps,
    _java,
    _last_error_line,
    build_batch,
    connect,
    create_topic,
    list_offsets,
    produce_partition,
    scenario,
)

QUORUM_COMMAND = "org.apache.kafka.tools.MetadataQuorumCommand"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
CONSOLE_PRODUCER = {"4.x": "org.apache.kafka.tools.ConsoleProducer", "3.9": "kafka.tools.ConsoleProducer"}
GET_OFFSET_SHELL = "org.apache.kafka.tools.GetOffsetShell"
LINES = ("4.x", "3.9")


def _endpoint(ep: str) -> str:
    return re.sub(r":\d+$", ":<port>", ep)


def quorum_status(stdout: str) -> dict[str, Any]:
    """``describe --status`` lines as a dict, the volatile values replaced by what they must be."""
    out: dict[str, Any] = {}
    for line in stdout.strip().splitlines():
        key, _, value = line.partition(":")
        value = value.strip()
        if key == "ClusterId":
            value = "<cluster id>" if value else value
        elif key == "HighWatermark":
            value = "> 0" if value.isdigit() and int(value) > 0 else value
        elif key in ("CurrentVoters", "CurrentObservers"):
            nodes = json.loads(value)
            for n in nodes:
                n["endpoints"] = [_endpoint(e) for e in n.get("endpoints", [])]
            value = nodes
        out[key] = value
    return out


def quorum_replication(stdout: str) -> list[list[str]]:
    """``describe --replication`` rows; offsets and timestamps replaced by their shape."""
    rows = [ln.split("\t") for ln in stdout.strip().splitlines()]
    rows = [[c.strip() for c in r if c.strip()] for r in rows]
    if not rows:
        return rows
    header = rows[0]
    out = [header]
    for r in rows[1:]:
        cells = dict(zip(header, r, strict=False))
        if cells.get("LogEndOffset", "").isdigit():
            cells["LogEndOffset"] = "> 0" if int(cells["LogEndOffset"]) > 0 else "0"
        for k in ("LastFetchTimestamp", "LastCaughtUpTimestamp"):
            v = cells.get(k, "")
            if v.isdigit() or v.endswith(" ago"):
                cells[k] = "<time>"
        out.append([cells.get(h, "") for h in header])
    return out


@scenario
def java_metadata_quorum(bootstrap: str) -> Outcome:
    """``kafka-metadata-quorum describe --status`` / ``--replication`` (4.x and 3.9)."""
    out = Steps()
    for version in LINES:
        base = ["--bootstrap-server", bootstrap, "describe"]
        rc, so, se = _java(QUORUM_COMMAND, [*base, "--status"], version)
        out.step(f"status_{version}", lambda: [rc, quorum_status(so), _last_error_line(se)])
        rc, so, se = _java(QUORUM_COMMAND, [*base, "--replication"], version)
        out.step(
            f"replication_{version}", lambda: [rc, quorum_replication(so), _last_error_line(se)]
        )
    return out


def _relative_times(lines: list[str]) -> list[str]:
    return [
        re.sub(r"CreateTime:(\d+)", lambda m: f"CreateTime:T0{int(m.group(1)) - T0:+d}", ln)
        for ln in lines
    ]


@scenario
def java_console_partition(bootstrap: str) -> Outcome:
    """Console producer and consumer without a consumer group: ``--partition`` and
    ``--offset`` (earliest, latest, a number), keys, headers and timestamps printed."""
    topic = "java_console_partition"
    out = Steps()
    with connect(bootstrap) as c:
        create_topic(c, topic, 2)
        recs = [
            Rec(
                value=f"v{i}".encode(),
                key=f"k{i}".encode(),
                timestamp=T0 + 10 * i,
                headers=[("h", f"x{i}".encode()), ("n", None)],
            )
            for i in range(4)
        ]
        out.step("produce_p1", lambda: produce_partition(c, topic, build_batch(recs), partition=1))
    for version in LINES:
        producer_props = "--reader-property" if version == "4.x" else "--property"
        rc, so, se = _java(
            CONSOLE_PRODUCER[version],
            [
                "--bootstrap-server",
                bootstrap,
                "--topic",
                topic,
                producer_props,
                "parse.key=true",
                producer_props,
                "key.separator=:",
            ],
            version,
            stdin="".join(f"{version}-k{i}:{version}-v{i}\n" for i in range(3)),
        )
        out.step(f"console_producer_{version}", lambda: [rc, _last_error_line(se)])
    with connect(bootstrap) as c:
        ends = {p: list_offsets(c, topic, [-1], partition=p)[0]["offset"] for p in (0, 1)}
    out.step("end_offsets", lambda: ends)

    def consume(version: str, partition: int, offset: str, count: int, timeout_ms: int) -> Any:
        prop = "--formatter-property" if version == "4.x" else "--property"
        args = ["--bootstrap-server", bootstrap, "--topic", topic, "--partition", str(partition)]
        args += ["--offset", offset, "--max-messages", str(count), "--timeout-ms", str(timeout_ms)]
        for p in ("print.key", "print.offset", "print.partition", "print.headers"):
            args += [prop, f"{p}=true"]
        if partition == 1:  # records with client timestamps (the console producer's are "now")
            args += [prop, "print.timestamp=true"]
        rc, so, se = _java(CONSOLE_CONSUMER, args, version)
        processed = re.findall(r"Processed a total of (\d+) messages", se)
        return {
            "exit_code": rc,
            "lines": _relative_times(so.strip().splitlines()),
            "processed": int(processed[-1]) if processed else None,
        }

    for version in LINES:
        out.step(f"p1_from_1_{version}", lambda: consume(version, 1, "1", 2, 30000))
        out.step(
            f"p0_earliest_{version}", lambda: consume(version, 0, "earliest", ends[0], 30000)
        )
    out.step("p1_latest_4.x", lambda: consume("4.x", 1, "latest", 1, 3000))
    return out


@scenario
def java_get_offsets(bootstrap: str) -> Outcome:
    """``kafka-get-offsets`` (GetOffsetShell): latest, earliest, max timestamp, by timestamp,
    partition and topic-partition filters (4.x and 3.9)."""
    topic = "java_get_offsets"
    out = Steps()
    with connect(bootstrap) as c:
        create_topic(c, topic, 3)
        for p in (0, 1):
            recs = [
                Rec(value=b"v", key=b"k", timestamp=T0 + 1000 * (p + 1) + 10 * i)
                for i in range(3 + p)
            ]
            produce_partition(c, topic, build_batch(recs), partition=p)
    queries = {
        "latest": ["--topic", topic, "--time", "-1"],
        "earliest": ["--topic", topic, "--time", "-2"],
        "max_timestamp": ["--topic", topic, "--time", "-3"],
        "by_time_mid": ["--topic", topic, "--time", str(T0 + 2010)],
        "by_time_after": ["--topic", topic, "--time", str(T0 + 9000)],
        "partitions_0_2": ["--topic", topic, "--partitions", "0,2"],
        "topic_partitions": ["--topic-partitions", f"{topic}:1"],
        "unknown_topic": ["--topic", "java_get_offsets-none"],
    }
    for version in LINES:
        for name, args in queries.items():
            rc, so, se = _java(GET_OFFSET_SHELL, ["--bootstrap-server", bootstrap, *args], version)
            out.step(f"{name}_{version}", lambda: [rc, sorted(so.split()), _last_error_line(se)])
    return out
