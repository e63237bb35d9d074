"""Replication figures on a cluster of real processes (1 combined controller + 3 brokers).

    .venv/bin/python bench/replication.py [--records 50000] [--seconds 10] [--rate-mb 1]

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
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition  # noqa: E402

from bench.failover import create_topic  # noqa: E402
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rate-mb", type=float, default=1.0)
    args = ap.parse_args()
    from tests.replication_cluster import replication_cluster

    with replication_cluster(brokers=3) as c:
        create_topic(c.admin_bootstrap, "rf3", c.broker_ids)
        create_topic(c.admin_bootstrap, "rf1", c.broker_ids[:1], min_isr=1)
        create_topic(c.admin_bootstrap, "rf3-lat", c.broker_ids)
        mb3, rec3 = throughput(c.bootstrap, "rf3", args.records)
        mb1, rec1 = throughput(c.bootstrap, "rf1", args.records)
        p50, p99, n = latency(c.bootstrap, "rf3-lat", args.rate_mb, args.seconds)
    print("| measure | kafkawire |")
    print("|---|---|")
    print(f"| produce 1 KiB, acks=all, idempotent, RF=3 (MB/s, records/s) | "
          f"{mb3:.1f} MB/s, {rec3:,.0f}/s |")
    print(f"| same, RF=1 on the same cluster (MB/s, records/s) | {mb1:.1f} MB/s, {rec1:,.0f}/s |")
    print(f"| produce-to-consume at {args.rate_mb:g} MB/s, acks=all, RF=3: p50 / p99 (ms) | "
          f"{p50:.1f} / {p99:.1f} ({n} records) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
