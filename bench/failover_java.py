"""Leader kill -9 loop with Kafka's Java VerifiableProducer and VerifiableConsumer (issue 13).

    .venv/bin/python bench/failover_java.py --kills 100            # 3 combined kafkawire nodes
    .venv/bin/python bench/failover_java.py --kills 20 --kafka     # 3 combined Apache Kafka nodes

``make failover-java KILLS=100`` (``KAFKA=1`` for Apache Kafka 4.3.1). A topic of
``--partitions`` partitions with replication factor 3 and ``min.insync.replicas=2`` on a
3-node cluster (bench/clusters.py); Kafka 4.3.1's VerifiableProducer (``--acks -1``,
``enable.idempotence=true``, ``--throughput`` records/s, no keys) and VerifiableConsumer (a
consumer group, ``--verbose``: every record as a JSON event) run as Java processes from the
cached jars. Every ``--interval`` seconds the leader of one partition (each in turn) is killed
with SIGKILL and started again; the next kill waits until every partition's ISR holds all three
replicas again. Then the producer is stopped (SIGTERM: it flushes and prints its summary), the
consumer reads up to the end, and the checker (tests/javatools.py ``validate_delivery``) reads
the JSON events:

* the topic, read back from offset 0 (kafka-python, no group): every ``producer_send_success``
  is at its offset with its value (0 lost), no value twice (0 duplicates), values increasing
  with the offset within a partition (no reordering);
* the same against what VerifiableConsumer returned (each offset counted once: a consumer may
  read an offset again after a rebalance, which is no duplicate in the topic).

Also, per kill, the time from the kill to the first acknowledgement on the killed partition
(p50 / p99 / max). Prints a Markdown row; exit status 1 on any loss, duplicate or reordering.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.failover import (  # noqa: E402
    Cluster,
    add_cluster_args,
    cluster_for,
    create_topic,
    partition_state,
    wait_until,
)
from compat_tests.kafka_dist import java_command  # noqa: E402
from tests.javatools import (  # noqa: E402
    LogContents,
    acked_records,
    consumed_records,
    read_partitions,
    validate_delivery,
)

PRODUCER = "org.apache.kafka.tools.VerifiableProducer"
CONSUMER = "org.apache.kafka.tools.VerifiableConsumer"
TOPIC = "failover-java"


@dataclass
class JavaFigures:
    kills: int = 0
    acked: int = 0
    send_errors: Counter[str] = field(default_factory=Counter)
    in_log: int = 0
    consumed: int = 0
    log_problems: list[str] = field(default_factory=list)
    consumer_problems: list[str] = field(default_factory=list)
    recovery_ms: list[float] = field(default_factory=list)

    def count(self, kind: str) -> int:
        return sum(p.startswith(kind) for p in self.log_problems + self.consumer_problems)

    def markdown(self) -> str:
        rec = sorted(self.recovery_ms)

        def pct(q: float) -> str:
            return f"{rec[min(len(rec) - 1, int(q * len(rec)))]:,.0f}" if rec else "-"
        errors = sum(self.send_errors.values())
        return "\n".join([
            "| kills | acknowledged | send errors | in log | consumed (distinct offsets) | "
            "lost | duplicates | reordered | kill -> first ack on that partition p50 / p99 / "
            "max (ms) |",
            "|---|---|---|---|---|---|---|---|---|",
            f"| {self.kills} | {self.acked:,} | {errors:,} | {self.in_log:,} | "
            f"{self.consumed:,} | {self.count('lost')} | {self.count('duplicated')} | "
            f"{self.count('reordered')} | {pct(0.5)} / {pct(0.99)} / {pct(1.0)} |",
        ])


def java(main_class: str, args: list[str], out: Path) -> subprocess.Popen[bytes]:
    with open(out, "wb") as f:
        return subprocess.Popen(java_command(main_class, args, heap="256m"), stdout=f,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)


def events(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:  # the last line, cut by a kill
                pass
    return out


def start_clients(bootstrap: str, partitions: int, rate: int, workdir: Path
                  ) -> tuple[subprocess.Popen[bytes], subprocess.Popen[bytes]]:
    props = workdir / "producer.properties"
    props.write_text("enable.idempotence=true\nretries=2147483647\nlinger.ms=5\n"
                     "delivery.timeout.ms=600000\nmax.in.flight.requests.per.connection=5\n")
    producer = java(PRODUCER, [
        "--bootstrap-server", bootstrap, "--topic", TOPIC, "--max-messages", "-1",
        "--throughput", str(rate), "--acks", "-1", "--command-config", str(props)],
        workdir / "producer.jsonl")
    consumer = java(CONSUMER, [
        "--bootstrap-server", bootstrap, "--topic", TOPIC, "--group-id", "failover-java",
        "--verbose", "--reset-policy", "earliest"], workdir / "consumer.jsonl")
    return producer, consumer


def all_in_sync(bootstrap: str, partitions: int) -> bool:
    for p in range(partitions):
        s = partition_state(bootstrap, TOPIC, p)
        if s is None or s[0] < 0 or len(s[2]) != len(s[1]):
            return False
    return True


def kill_loop(cluster: Cluster, partitions: int, kills: int, interval_s: float,
              rejoin_timeout_s: float = 180, stop_at: float | None = None
              ) -> list[tuple[float, int]]:
    """Kill a partition leader ``kills`` times, or until the monotonic time ``stop_at``; (epoch
    ms of the kill, partition) per kill."""
    boot = cluster.bootstrap
    done: list[tuple[float, int]] = []
    for k in range(kills):
        if stop_at is not None and time.monotonic() >= stop_at:
            print(f"time is up after {k} kills", flush=True)
            break
        time.sleep(interval_s)
        part = k % partitions
        wait_until(lambda p=part: (s := partition_state(boot, TOPIC, p)) is not None
                   and s[0] >= 0, rejoin_timeout_s, f"a leader of partition {part}")
        state = partition_state(boot, TOPIC, part)
        assert state is not None
        done.append((time.time() * 1000, part))
        cluster.kill(state[0])
        wait_until(lambda p=part, dead=state[0]: (s := partition_state(boot, TOPIC, p))
                   is not None and s[0] not in (-1, dead), rejoin_timeout_s,
                   f"a new leader of partition {part}")
        cluster.start(state[0])
        wait_until(lambda: all_in_sync(boot, partitions), rejoin_timeout_s,
                   f"node {state[0]} back in every ISR (kill {k + 1})")
        print(f"kill {k + 1}/{kills}: node {state[0]} (leader of {part})", flush=True)
    return done


def recovery(kills: list[tuple[float, int]], evs: list[dict[str, Any]]) -> list[float]:
    """Per kill, ms to the first acknowledgement on the killed partition after it."""
    acks = sorted((int(e["timestamp"]), int(e["partition"])) for e in evs
                  if e.get("name") == "producer_send_success")
    out = []
    for at, part in kills:
        first = next((t for t, p in acks if t > at and p == part), None)
        if first is not None:
            out.append(first - at)
    return out


def stop(proc: subprocess.Popen[bytes], timeout_s: float = 120) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def distinct(consumed: LogContents) -> LogContents:
    """Each offset once, in offset order (a rebalance may hand an offset out again)."""
    return {p: sorted({o: (o, k, v) for o, k, v in recs}.values())
            for p, recs in consumed.items()}


def drain(consumer_out: Path, log: LogContents, timeout_s: float = 180) -> None:
    """Until the consumer returned the last offset of every partition (bounded)."""
    want = {p: recs[-1][0] for p, recs in log.items() if recs}

    def caught_up() -> bool:
        got = consumed_records(events(consumer_out))
        return all(p in got and max(o for o, _k, _v in got[p]) >= last
                   for p, last in want.items())
    wait_until(caught_up, timeout_s, "VerifiableConsumer to read up to the end")


def run(cluster: Cluster, partitions: int, kills: int, interval_s: float, rate: int,
        workdir: Path, stop_at: float | None = None) -> JavaFigures:
    create_topic(cluster.admin_bootstrap, TOPIC, cluster.broker_ids, partitions=partitions)
    producer, consumer = start_clients(cluster.bootstrap, partitions, rate, workdir)
    pout, cout = workdir / "producer.jsonl", workdir / "consumer.jsonl"
    fig = JavaFigures()
    try:
        wait_until(lambda: bool(acked_records(events(pout))), 120, "the first acknowledgement")
        done = kill_loop(cluster, partitions, kills, interval_s, stop_at=stop_at)
        fig.kills = len(done)
        time.sleep(interval_s)
        stop(producer)
        pev = events(pout)
        log = read_partitions(cluster.bootstrap, TOPIC, timeout_s=300)
        drain(cout, log)
    finally:
        stop(producer)
        stop(consumer)
    acked = acked_records(pev)
    fig.acked = len(acked)
    fig.send_errors = Counter(str(e.get("exception")) for e in pev
                              if e.get("name") == "producer_send_error")
    fig.in_log = sum(len(v) for v in log.values())
    got = distinct(consumed_records(events(cout)))
    fig.consumed = sum(len(v) for v in got.values())
    fig.log_problems = validate_delivery(acked, log, idempotent=True)
    fig.consumer_problems = validate_delivery(acked, got, idempotent=True)
    fig.recovery_ms = recovery(done, pev)
    return fig


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=100)
    ap.add_argument("--interval", type=float, default=3.0, help="seconds between kills")
    ap.add_argument("--rate", type=int, default=500, help="records per second (--throughput)")
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--keep", help="keep the JSON event files in this directory")
    ap.add_argument("--max-minutes", type=float,
                    help="stop killing after this long (then check what was produced)")
    add_cluster_args(ap)
    args = ap.parse_args()
    workdir = Path(args.keep or tempfile.mkdtemp(prefix="failover-java-"))
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    stop_at = started + args.max_minutes * 60 if args.max_minutes else None
    with cluster_for(args) as cluster:
        fig = run(cluster, args.partitions, args.kills, args.interval, args.rate, workdir,
                  stop_at)
    took = time.monotonic() - started
    print("Apache Kafka 4.3.1" if args.kafka else "kafkawire")
    print(fig.markdown())
    print(f"\n{took:.0f} s; send errors by exception: {dict(fig.send_errors) or 'none'}; "
          f"events in {workdir}")
    for what, problems in (("topic", fig.log_problems), ("consumer", fig.consumer_problems)):
        if problems:
            print(f"{what}: {len(problems)} problems, first 20:")
            print("\n".join(problems[:20]))
    return 0 if not fig.log_problems and not fig.consumer_problems else 1


if __name__ == "__main__":
    sys.exit(main())
