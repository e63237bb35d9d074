"""librdkafka's implicit acknowledgement, on kafkawire and on Apache Kafka: the delivery report
of a record whose produce request failed with a retriable error, and that a later request of
the same idempotent producer proved written, carries no offset (RD_KAFKA_OFFSET_INVALID,
-1001, which confluent-kafka's ``Message.offset()`` returns as None). A checker comparing report offsets with the log must not count those as "at another
offset" (issue 27, defect 5).

    .venv/bin/python bench/implicit_ack.py            # 3 combined kafkawire nodes
    .venv/bin/python bench/implicit_ack.py --kafka    # 3 combined Apache Kafka 4.3.1 nodes

A topic with one partition, replication factor 3, ``min.insync.replicas=2``; an idempotent
acks=all confluent-kafka producer with ``request.timeout.ms`` ``--timeout-ms`` (2000). One
follower is stopped (SIGSTOP) for ``--pause`` seconds (3): it is still in the ISR (the lag
time is 30 s), so the high watermark waits for it. Record A goes out, then record B in a
request of its own. The broker answers A's request with REQUEST_TIMED_OUT (its acks=all wait
ends first; A stays written), reads B's request only then (one request at a time per
connection, in both brokers), and answers it with success once the follower is back.
librdkafka retries nothing: B's success acknowledges A implicitly. Printed: each report's
offset and error, and where A and B are in the log.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import failover  # noqa: E402
from bench.clusters import NAMES, three_nodes  # noqa: E402

TOPIC = "implicit-ack"


def run(cluster: Any, timeout_ms: int, pause_s: float) -> dict[str, Any]:
    from confluent_kafka import Producer

    failover.create_topic(cluster.admin_bootstrap, TOPIC, cluster.broker_ids)
    leader, replicas, _isr = failover.partition_state(cluster.bootstrap, TOPIC) or (-1, [], [])
    follower = next(r for r in replicas if r != leader)
    reports: dict[str, tuple[int, str | None]] = {}

    def report(err: Any, msg: Any) -> None:
        reports[msg.value().decode()] = (msg.offset(), None if err is None else err.name())

    p = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True,
                  "acks": "all", "linger.ms": 0, "request.timeout.ms": timeout_ms,
                  "message.timeout.ms": 120000, "retry.backoff.ms": 100,
                  "debug": "eos", "log_level": 7})
    for i in range(3):
        p.produce(TOPIC, b"warm-up-%d" % i, partition=0, on_delivery=report)
    assert p.flush(60) == 0, "warm-up not acknowledged"
    pid = cluster.pid(follower)
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    try:
        p.produce(TOPIC, b"A", partition=0, on_delivery=report)
        p.poll(0.2)
        p.produce(TOPIC, b"B", partition=0, on_delivery=report)
        deadline = time.monotonic() + pause_s
        while time.monotonic() < deadline:
            p.poll(0.05)
    finally:
        os.kill(pid, signal.SIGCONT)
    left = p.flush(120)
    log = read_values(cluster.bootstrap)
    return {"leader": leader, "paused": follower, "unflushed": left, "reports": reports,
            "log": log}


def read_values(bootstrap: str) -> list[tuple[int, str]]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "implicit-ack",
                  "enable.auto.commit": False})
    try:
        _low, high = c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=30)
        c.assign([TopicPartition(TOPIC, 0, 0)])
        out: list[tuple[int, str]] = []
        deadline = time.monotonic() + 60
        while (not out or out[-1][0] < high - 1) and time.monotonic() < deadline:
            for m in c.consume(100, timeout=1.0):
                if m.error() is None:
                    out.append((m.offset(), m.value().decode()))
        return out
    finally:
        c.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kafka", action="store_true")
    ap.add_argument("--version", default="4.x")
    ap.add_argument("--timeout-ms", type=int, default=2000)
    ap.add_argument("--pause", type=float, default=3.0)
    args = ap.parse_args()
    system = "kafka" if args.kafka else "kafkawire"
    with three_nodes(system, version=args.version) as cluster:
        r = run(cluster, args.timeout_ms, args.pause)
    name = NAMES[system] if system == "kafkawire" or args.version == "4.x" else "Apache Kafka 4.4.0"
    where = {v: o for o, v in r["log"]}
    print(f"{name}: leader {r['leader']}, follower {r['paused']} stopped {args.pause:g} s, "
          f"request.timeout.ms {args.timeout_ms}")
    for v in ("A", "B"):
        offset, err = r["reports"].get(v, (None, "no report"))
        print(f"  {v}: report offset {offset}, error {err}; in the log at {where.get(v)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
