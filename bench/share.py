"""Share group figures (KIP-932): records per second received and acknowledged by 1, 4 and 16
share consumers (confluent-kafka's ShareConsumer, one process each, implicit acknowledgement)
on ONE partition, for kafkawire and/or Apache Kafka 4.3.1 on the same machine.

    .venv/bin/python bench/share.py [--records N] [--consumers 1,4,16] [--target kafkawire|kafka|both]

Per run: a fresh topic with one partition is filled with N 100-byte records, a new group is
reset to the earliest offset (AlterShareGroupOffsets, as kafka-share-groups does), the
consumer processes are started and connected, then subscribe together (joining is measured)
and the clock stops when every record has been received and the last
acknowledgements are committed (``commit_sync``). A record received twice (redelivery) is
counted once.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

VALUE = b"x" * 100


def _consumer(bs: str, group: str, topic: str, total: int, seen: Any, ready: Any,
              go: Any, done: Any) -> None:
    from confluent_kafka import ShareConsumer

    c = ShareConsumer({"bootstrap.servers": bs, "group.id": group, "log_level": 0})
    ready.release()
    go.wait()
    c.subscribe([topic])  # after the start: joining is part of the measured time
    while seen.value < total:
        got = sum(1 for m in c.poll(0.2) if m.error() is None)
        if got:
            with seen.get_lock():
                seen.value += got
    c.commit_sync(30)
    done.release()
    c.close()


def fill(bs: str, topic: str, n: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)
    p = Producer({"bootstrap.servers": bs, "linger.ms": 5, "batch.num.messages": 500})
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value=VALUE)
                break
            except BufferError:
                p.poll(0.05)
    p.flush(120)


def reset_earliest(bs: str, group: str, topic: str) -> None:
    from compat_tests.wire import Connection
    from protocol._generated.alter_share_group_offsets_request import (
        AlterShareGroupOffsetsRequest as A,
    )
    from protocol._generated.find_coordinator_request import FindCoordinatorRequest

    c = Connection(bs)
    try:
        deadline = time.monotonic() + 60
        while True:
            c.request(FindCoordinatorRequest(key=group, key_type=0), 3)  # creates the topic
            r = c.request(A(group_id=group, topics=[A.AlterShareGroupOffsetsRequestTopic(
                topic_name=topic, partitions=[A.AlterShareGroupOffsetsRequestPartition(
                    partition_index=0, start_offset=0)])]), 0)
            code = r.error_code or r.responses[0].partitions[0].error_code
            if code == 0:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"AlterShareGroupOffsets: error {code}")
            time.sleep(0.5)
    finally:
        c.close()


def run_one(bs: str, consumers: int, records: int) -> float:
    topic = "bench-share-" + uuid.uuid4().hex[:6]
    group = "bench-sg-" + uuid.uuid4().hex[:6]
    fill(bs, topic, records)
    reset_earliest(bs, group, topic)
    ctx = mp.get_context("spawn")
    seen = ctx.Value("q", 0)
    ready, done = ctx.Semaphore(0), ctx.Semaphore(0)
    go = ctx.Event()
    procs = [ctx.Process(target=_consumer, args=(bs, group, topic, records, seen, ready, go, done))
             for _ in range(consumers)]
    for p in procs:
        p.start()
    for _ in procs:
        ready.acquire(timeout=120)
    t0 = time.perf_counter()
    go.set()
    for _ in procs:
        done.acquire(timeout=600)
    elapsed = time.perf_counter() - t0
    for p in procs:
        p.join(60)
        if p.is_alive():
            p.kill()
    return records / elapsed


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--consumers", default="1,4,16")
    ap.add_argument("--target", default="kafkawire", choices=["kafkawire", "kafka", "both"])
    args = ap.parse_args()
    counts = [int(x) for x in args.consumers.split(",")]
    targets = ["kafkawire", "kafka"] if args.target == "both" else [args.target]
    results: dict[str, dict[int, float]] = {}
    for target in targets:
        stop: Any
        if target == "kafkawire":
            from kafkawire.tools.testing import BrokerProcess, free_port

            bp = BrokerProcess(Path(tempfile.mkdtemp(prefix="kw-bench-")) / "data",
                               port=free_port()).start()
            bs, stop = bp.bootstrap, bp.close
        else:
            from compat_tests.kafka_dist import KafkaBroker

            kb = KafkaBroker(version="4.x")
            kb.start()
            bs, stop = kb.bootstrap, kb.stop
        try:
            results[target] = {n: run_one(bs, n, args.records) for n in counts}
        finally:
            stop()
    print(f"| share consumers on 1 partition ({args.records} x 100 B) | "
          + " | ".join(targets) + " |")
    print("|---|" + "---|" * len(targets))
    for n in counts:
        print(f"| {n} | " + " | ".join(f"{results[t][n]:,.0f} rec/s" for t in targets) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
