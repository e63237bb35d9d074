"""Run the clickstream pipeline end to end and check its numbers.

    python -m examples.clickstream [--events N] [--seed S] [--bootstrap HOST:PORT] [--workdir DIR]

1. Starts a kafkawire broker (unless ``--bootstrap`` names one) and creates the topics.
2. Produces the first half of the seeded click events (idempotent confluent-kafka producer,
   keyed by user, Kafka timestamp = event time) and runs the aggregation job once.
3. Produces the rest plus a heartbeat that moves the watermark past every window, runs the job
   again (it resumes from its checkpoint), then produces a few late events for a closed window
   and runs it a third time: Spark must drop exactly those.
4. Archives the results topic to Parquet.
5. Compares the Parquet rows and the results topic with the aggregates computed in plain Python
   from the same seed: same windows, same counts, no duplicates, late events dropped.

Exit code 0 when everything matches.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from examples.clickstream import pipeline
from examples.clickstream.events import Event, Key, Stream, expected_aggregates, generate

PARTITIONS = 3
QUERY_TIMEOUT_S = 180.0


@dataclass
class Report:
    events: int
    late_sent: int
    expected_windows: int
    parquet_rows: int = 0
    topic_records: int = 0
    late_dropped: int = 0
    problems: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        lines = [
            f"events produced:        {self.events} (+1 heartbeat, +{self.late_sent} late)",
            f"expected windows:       {self.expected_windows} (window x page)",
            f"parquet rows:           {self.parquet_rows}",
            f"results-topic records:  {self.topic_records}",
            f"late events dropped:    {self.late_dropped} of {self.late_sent}",
            "timings:                "
            + ", ".join(f"{k} {v:.1f}s" for k, v in self.timings.items()),
        ]
        lines += [f"PROBLEM: {p}" for p in self.problems] or ["OK: all aggregates match"]
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Kafka side (confluent-kafka)


def ensure_topic(bootstrap: str, name: str, partitions: int = PARTITIONS) -> None:
    """Create ``name`` (CreateTopics), or let the broker auto-create it if it cannot."""
    from confluent_kafka import KafkaException, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        admin.create_topics([NewTopic(name, partitions, 1)], request_timeout=10)[name].result(15)
    except KafkaException as e:
        if "TOPIC_ALREADY_EXISTS" not in str(e) and "already exists" not in str(e):
            print(f"  CreateTopics for {name} failed ({e}); relying on auto-creation")
    probe = Producer({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 30
    while True:
        md = probe.list_topics(name, timeout=10).topics.get(name)
        if md is not None and md.error is None and md.partitions:
            if all(p.leader >= 0 for p in md.partitions.values()):
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"topic {name} did not become available: {md}")
        time.sleep(0.2)


def produce(bootstrap: str, topic: str, events: list[Event]) -> None:
    from confluent_kafka import Producer

    p = Producer({
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 20,
        "compression.type": "lz4",
    })
    failures: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(str(err))

    for e in events:
        p.produce(topic, key=e.user.encode(), value=e.to_json(), timestamp=e.ts,
                  on_delivery=on_delivery)
        p.poll(0)
    if p.flush(60) != 0 or failures:
        raise RuntimeError(f"produce to {topic} failed: {failures[:3]}")


@contextmanager
def kafkawire_broker(workdir: Path, bootstrap: str | None) -> Iterator[str]:
    if bootstrap:
        yield bootstrap
        return
    from kafkawire.tools.testing import BrokerProcess

    with BrokerProcess(
        workdir / "kafkawire-data", overrides={"num.partitions": str(PARTITIONS)}
    ) as broker:
        print(f"kafkawire broker on {broker.bootstrap} (log: {broker.log_path})")
        yield broker.bootstrap


# ---------------------------------------------------------------------------------------------
# the pipeline


def _await(query: Any) -> Any:
    if not query.awaitTermination(QUERY_TIMEOUT_S):
        query.stop()
        raise RuntimeError(f"query {query.name} did not finish: {query.status}")
    return query


def _dropped_by_watermark(query: Any) -> int:
    return sum(
        op.get("numRowsDroppedByWatermark", 0)
        for p in query.recentProgress
        for op in p.get("stateOperators", [])
    )


def run_pipeline(
    spark: Any, bootstrap: str, workdir: Path, n_events: int = 4000, seed: int = 7
) -> Report:
    tag = f"{seed}-{n_events}-{int(time.time() * 1000) % 10**8}"
    clicks, results = f"clicks-{tag}", f"pageviews-1m-{tag}"
    stream: Stream = generate(n_events, seed)
    expected = expected_aggregates(stream.events)
    report = Report(len(stream.events), len(stream.late), len(expected))
    t0 = time.monotonic()

    def lap(name: str) -> None:
        nonlocal t0
        report.timings[name] = time.monotonic() - t0
        t0 = time.monotonic()

    for topic in (clicks, results):
        ensure_topic(bootstrap, topic)
    ckpt = workdir / "checkpoints"
    half = len(stream.events) // 2

    produce(bootstrap, clicks, stream.events[:half])
    lap("produce-1")
    _await(pipeline.start_pageviews(spark, bootstrap, clicks, results, ckpt / "pageviews"))
    lap("aggregate-1")
    produce(bootstrap, clicks, stream.events[half:] + [stream.heartbeat])
    _await(pipeline.start_pageviews(spark, bootstrap, clicks, results, ckpt / "pageviews"))
    lap("aggregate-2")
    produce(bootstrap, clicks, stream.late)
    late_run = _await(
        pipeline.start_pageviews(spark, bootstrap, clicks, results, ckpt / "pageviews")
    )
    report.late_dropped = _dropped_by_watermark(late_run)
    lap("aggregate-late")

    parquet_dir = workdir / "pageviews-parquet"
    _await(pipeline.start_archive(spark, bootstrap, results, parquet_dir, ckpt / "archive"))
    lap("archive")

    parquet = spark.read.parquet(str(parquet_dir)).collect()
    topic_rows = pipeline.read_results_topic(spark, bootstrap, results)
    report.parquet_rows, report.topic_records = len(parquet), len(topic_rows)
    for where, rows in (("parquet", parquet), ("results topic", topic_rows)):
        report.problems += compare(where, rows, expected)
    if report.late_dropped != len(stream.late):
        report.problems.append(
            f"watermark dropped {report.late_dropped} rows, expected {len(stream.late)}"
        )
    lap("verify")
    return report


def compare(where: str, rows: list[Any], expected: dict[Key, tuple[int, int]]) -> list[str]:
    problems = []
    got: dict[Key, tuple[int, int]] = {}
    for r in rows:
        key = (int(r.window_start), str(r.page))
        if key in got:
            problems.append(f"{where}: window {key} appears more than once")
        if int(r.window_end) - int(r.window_start) != 60_000:
            problems.append(f"{where}: window {key} is not one minute long")
        got[key] = (int(r.views), int(r.dwell_ms))
    missing = sorted(set(expected) - set(got))
    extra = sorted(set(got) - set(expected))
    wrong = sorted(k for k in set(got) & set(expected) if got[k] != expected[k])
    if missing:
        problems.append(f"{where}: {len(missing)} windows missing, e.g. {missing[:3]}")
    if extra:
        problems.append(f"{where}: {len(extra)} unexpected windows, e.g. {extra[:3]}")
    for k in wrong[:5]:
        problems.append(f"{where}: {k} has (views, dwell) {got[k]}, expected {expected[k]}")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m examples.clickstream", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=20_000, help="click events (default 20000)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--bootstrap", help="use this broker instead of starting kafkawire")
    ap.add_argument("--workdir", type=Path, help="keep checkpoints and Parquet here")
    args = ap.parse_args(argv)

    from compat_tests.spark_deps import local_spark_session

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="clickstream-"))
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with kafkawire_broker(workdir, args.bootstrap) as bootstrap:
        spark = local_spark_session("clickstream", workdir=workdir / "spark")
        try:
            report = run_pipeline(spark, bootstrap, workdir, args.events, args.seed)
        finally:
            spark.stop()
    print(report.summary())
    print(f"total {time.monotonic() - started:.1f}s")
    if args.workdir is None and report.ok:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        print(f"Parquet output: {workdir / 'pageviews-parquet'}; checkpoints: {workdir}")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
