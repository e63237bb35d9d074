"""Transaction benchmarks with confluent-kafka (librdkafka).

    .venv/bin/python bench/txn.py                       # start a kafkawire node and measure it
    .venv/bin/python bench/txn.py --bootstrap HOST:PORT # measure a running broker (Apache Kafka)

Measures, on one partition:

* commit rate of small transactions (1 record each) and their commit latency (p50/p99 of
  ``commit_transaction``, which returns once EndTxn is answered);
* transactions of 100 x 1 KiB records: transactions/s and MB/s;
* transactional produce of 1 KiB records in transactions of 10,000 (MB/s);
* consuming a log of alternately committed and aborted 1 KiB transactions at read_committed
  (aborted data skipped by the client with the AbortedTransactions list) and read_uncommitted.

Prints a Markdown table; figures go to docs/BENCHMARKS.md. Every loop is bounded.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition  # noqa: E402

from bench.run import make_topic  # noqa: E402
from kafkawire.tools.testing import BrokerProcess  # noqa: E402


def txn_producer(bootstrap: str, **extra: object) -> Producer:
    p = Producer({
        "bootstrap.servers": bootstrap, "transactional.id": f"bench-{uuid.uuid4().hex[:8]}",
        "linger.ms": 5, "batch.size": 1_000_000, "queue.buffering.max.kbytes": 1_048_576,
        "queue.buffering.max.messages": 2_000_000, **extra,
    })
    p.init_transactions(60)
    return p


def produce_all(p: Producer, topic: str, payload: bytes, n: int) -> None:
    for _ in range(n):
        while True:
            try:
                p.produce(topic, payload, partition=0)
                break
            except BufferError:
                p.poll(0.01)


def small_transactions(bootstrap: str, topic: str, count: int) -> tuple[float, float, float]:
    p = txn_producer(bootstrap, **{"linger.ms": 0})
    lat = []
    t0 = time.perf_counter()
    for _ in range(count):
        p.begin_transaction()
        p.produce(topic, b"x" * 100, partition=0)
        c0 = time.perf_counter()
        p.commit_transaction(60)
        lat.append((time.perf_counter() - c0) * 1000)
    dt = time.perf_counter() - t0
    q = statistics.quantiles(lat, n=100)
    return count / dt, q[49], q[98]


def batched_transactions(
    bootstrap: str, topic: str, txns: int, per_txn: int, size: int, abort_every: int = 0
) -> tuple[float, float]:
    p = txn_producer(bootstrap)
    payload = b"x" * size
    t0 = time.perf_counter()
    for i in range(txns):
        p.begin_transaction()
        produce_all(p, topic, payload, per_txn)
        if abort_every and i % abort_every == abort_every - 1:
            p.flush(120)
            p.abort_transaction(120)
        else:
            p.commit_transaction(120)
    dt = time.perf_counter() - t0
    return txns / dt, txns * per_txn * size / dt / 1e6


def consume_rate(bootstrap: str, topic: str, isolation: str, expect: int) -> float:
    c = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "bench-txn", "enable.auto.commit": False,
        "isolation.level": isolation, "fetch.max.bytes": 52_428_800,
        "max.partition.fetch.bytes": 10_485_760, "queued.max.messages.kbytes": 1_048_576,
    })
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = nbytes = 0
    t0 = time.perf_counter()
    deadline = t0 + 120
    while got < expect and time.perf_counter() < deadline:
        for m in c.consume(10_000, 0.5):
            if not m.error():
                got += 1
                nbytes += len(m.value() or b"")
    dt = time.perf_counter() - t0
    c.close()
    if got < expect:
        raise RuntimeError(f"consumed {got} of {expect} records at {isolation}")
    return nbytes / dt / 1e6


def measure(bootstrap: str) -> list[tuple[str, str]]:
    rows = []
    topic = make_topic(bootstrap)
    rate, p50, p99 = small_transactions(bootstrap, topic, 500)
    rows += [("small transactions (1 record) per s", f"{rate:,.0f}"),
             ("commit_transaction latency p50 (ms)", f"{p50:.2f}"),
             ("commit_transaction latency p99 (ms)", f"{p99:.2f}")]
    topic = make_topic(bootstrap)
    tps, mbs = batched_transactions(bootstrap, topic, 200, 100, 1024)
    rows += [("transactions of 100 x 1 KiB per s", f"{tps:,.0f}"),
             ("  same, MB/s", f"{mbs:.0f}")]
    topic = make_topic(bootstrap)
    _, mbs = batched_transactions(bootstrap, topic, 20, 10_000, 1024)
    rows.append(("transactional produce, 10k x 1 KiB per transaction (MB/s)", f"{mbs:.0f}"))
    topic = make_topic(bootstrap)
    batched_transactions(bootstrap, topic, 40, 5_000, 1024, abort_every=2)
    rows.append(("consume read_committed, half the transactions aborted (MB/s of visible data)",
                 f"{consume_rate(bootstrap, topic, 'read_committed', 100_000):.0f}"))
    rows.append(("consume read_uncommitted, same log (MB/s)",
                 f"{consume_rate(bootstrap, topic, 'read_uncommitted', 200_000):.0f}"))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", help="measure a running broker instead of starting one")
    args = ap.parse_args()
    if args.bootstrap:
        rows = measure(args.bootstrap)
        label = "broker"
    else:
        with tempfile.TemporaryDirectory(prefix="kw-bench-txn-") as tmp:
            bp = BrokerProcess(Path(tmp) / "data").start()
            try:
                rows = measure(bp.bootstrap)
            finally:
                bp.close()
        label = "kafkawire"
    print(f"| measure | {label} |\n|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
