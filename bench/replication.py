"""Replication figures on a cluster of real processes (kafkawire or Apache Kafka 4.3.1).

    .venv/bin/python bench/replication.py [--records 50000] [--seconds 10] [--rate-mb 1]
        [--perf-test] [--kafka | --combined]

``--kafka`` measures 3 combined Apache Kafka 4.3.1 nodes, ``--combined`` 3 combined kafkawire
nodes with the same properties (bench/clusters.py); the default is kafkawire's 1 controller +
3 brokers. ``--perf-test`` adds Kafka's kafka-producer-perf-test (the Java producer).

With one confluent-kafka (librdkafka) producer, 1 KiB records, one partition:

* produce throughput at acks=all (idempotent) to a topic with replication factor 3
  (min.insync.replicas=2) and, for reference, to one with replication factor 1 on the same
  cluster;
* produce-to-consume latency (p50/p99) at acks=all, RF=3, at a fixed rate (``--rate-mb``): the
  consumer sees a record once the high watermark passed it, i.e. once every ISR member has it.

Prints a Markdown table; the figures go to docs/BENCHMARKS.md. Every loop is bounded.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition  # noqa: E402

from bench.failover import Cluster, add_cluster_args, cluster_for, create_topic  # noqa: E402
from bench.run import round_trips  # noqa: E402

SIZE = 1024


def producer(bootstrap: str, **extra: object) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                     "linger.ms": 5, "batch.size": 1_000_000,
                     "queue.buffering.max.kbytes": 1_048_576, **extra})


def throughput(bootstrap: str, topic: str, count: int) -> tuple[float, float]:
    """(MB/s, records/s) for ``count`` 1 KiB records, until all are acknowledged."""
    p = producer(bootstrap)
    payload = b"x" * SIZE
    t0 = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                p.produce(topic, payload, partition=0)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(300) == 0, "records left unacknowledged"
    dt = time.perf_counter() - t0
    return count * SIZE / dt / 1e6, count / dt


def latency(bootstrap: str, topic: str, mb_per_s: float, seconds: float) -> tuple[float, float, int]:
    """(p50 ms, p99 ms, records) from produce to consume at a fixed rate."""
    rate = mb_per_s * 1e6 / SIZE
    p = producer(bootstrap, **{"linger.ms": 0})
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "rep-lat", "fetch.wait.max.ms": 5,
                  "fetch.min.bytes": 1, "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, OFFSET_END)])
    c.poll(1.0)
    lat = round_trips(p, c, topic, rate, SIZE, seconds, partition=0)
    p.flush(30)
    c.close()
    if not lat:
        return float("nan"), float("nan"), 0
    return lat[len(lat) // 2], lat[int(len(lat) * 0.99)], len(lat)


def perf_test(bootstrap: str, topic: str, count: int) -> str:
    """Kafka's kafka-producer-perf-test (Java producer, acks=all, idempotent, 1 KiB records,
    no throttle): its summary as "MB/s, records/s, avg / max latency"."""
    from compat_tests.kafka_dist import run_java_tool

    out = run_java_tool("org.apache.kafka.tools.ProducerPerformance", [
        "--topic", topic, "--num-records", str(count), "--record-size", str(SIZE),
        "--throughput", "-1", "--producer-props", f"bootstrap.servers={bootstrap}",
        "acks=all", "enable.idempotence=true", "linger.ms=5"], heap="512m", timeout=600).stdout
    m = PERF_SUMMARY.search(out)
    assert m is not None, out[-2000:]
    rps, mbs, avg, top = (float(g) for g in m.groups())
    return f"{mbs:.1f} MB/s, {rps:,.0f}/s (Java; latency avg {avg:.0f} / max {top:.0f} ms)"


PERF_SUMMARY = re.compile(r"\d+ records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), "
                          r"([\d.]+) ms avg latency, ([\d.]+) ms max latency")


def measure(cluster: Cluster, args: argparse.Namespace) -> list[tuple[str, str]]:
    ids = cluster.broker_ids
    for topic, replicas, min_isr in (("rf3", ids, 2), ("rf1", ids[:1], 1), ("rf3-lat", ids, 2),
                                     ("rf3-perf", ids, 2)):
        create_topic(cluster.admin_bootstrap, topic, replicas, min_isr=min_isr)
    mb3, rec3 = throughput(cluster.bootstrap, "rf3", args.records)
    mb1, rec1 = throughput(cluster.bootstrap, "rf1", args.records)
    p50, p99, n = latency(cluster.bootstrap, "rf3-lat", args.rate_mb, args.seconds)
    rows = [
        ("produce 1 KiB, acks=all, idempotent, RF=3, min.insync.replicas=2 (confluent-kafka)",
         f"{mb3:.1f} MB/s, {rec3:,.0f}/s"),
        ("same, RF=1 on the same cluster", f"{mb1:.1f} MB/s, {rec1:,.0f}/s"),
        (f"produce-to-consume at {args.rate_mb:g} MB/s, acks=all, RF=3: p50 / p99 (ms)",
         f"{p50:.1f} / {p99:.1f} ({n} records)"),
    ]
    if args.perf_test:
        rows.append(("kafka-producer-perf-test, acks=all, idempotent, RF=3, 1 KiB",
                     perf_test(cluster.bootstrap, "rf3-perf", args.perf_records or args.records)))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rate-mb", type=float, default=1.0)
    ap.add_argument("--perf-test", action="store_true",
                    help="also Kafka's kafka-producer-perf-test (needs Java and the jars)")
    ap.add_argument("--perf-records", type=int, default=0,
                    help="records for kafka-producer-perf-test (default: --records)")
    add_cluster_args(ap)
    args = ap.parse_args()
    with cluster_for(args) as cluster:
        rows = measure(cluster, args)
    name = "Apache Kafka 4.3.1 (3 combined nodes)" if args.kafka else (
        "kafkawire (3 combined nodes)" if args.combined else "kafkawire (1 + 3 brokers)")
    print(f"| measure | {name} |")
    print("|---|---|")
    for what, figure in rows:
        print(f"| {what} | {figure} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
