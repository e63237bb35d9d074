"""Double kill: kill -9 two of three nodes 2 s apart, restart both, and time until every
partition's ISR is full again (issue 27, defect 4), on kafkawire or on Apache Kafka.

    .venv/bin/python bench/double_kill.py --trials 20            # 3 combined kafkawire nodes
    .venv/bin/python bench/double_kill.py --trials 8 --kafka     # 3 combined Kafka 4.3.1 nodes
    .venv/bin/python bench/double_kill.py --trials 8 --kafka --version 4.4   # Kafka 4.4.0

Three combined ``broker,controller`` nodes (bench/clusters.py, the same properties on both
systems: session timeout 4 s, RF 3, min.insync.replicas 2), a topic of ``--partitions``
partitions (default 12, leaders spread by the controller) and, unless ``--rate 0``, an
idempotent acks=all librdkafka producer writing ``--rate`` records a second over them all
along. Each trial takes the next ordered pair (A, B) of nodes: it waits until every ISR is
full, kills A with SIGKILL, kills B 2 s later (``--gap``), which also takes the metadata
quorum's majority, starts both again at once and measures

* ``serving``: from the restart until both are registered and unfenced (every node lists
  three brokers: the criterion Kafka's cluster harness uses, and /health/ready on kafkawire);
* ``full``: from the restart, and from ``serving``, until every partition of the cluster has
  all its replicas in its ISR (Metadata, asked of every running node).

A trial whose ISRs are not all full ``--isr-timeout`` seconds after ``serving`` fails: the
partitions still short are printed, the nodes' logs (and with ``--keep`` their data) are
copied to ``--out``, and the replicas missing from an ISR are restarted so that the loop can
go on. At the end the producer is flushed and every partition read back: each acknowledged
record must be there once, at the offset its delivery report gave (a report without an
offset, librdkafka's implicit acknowledgement, is only checked for presence).

Prints a Markdown table per trial and a summary (figures for docs/BENCHMARKS.md). Exit
status 1 when a trial failed or an acknowledged record is missing, duplicated or moved.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.clusters import NAMES, three_nodes  # noqa: E402
from compat_tests.wire import Connection  # noqa: E402
from protocol._generated.metadata_request import MetadataRequest  # noqa: E402

TOPIC = "double-kill"
#: librdkafka's RD_KAFKA_OFFSET_INVALID: a delivery report that carries no offset (an implicit
#: acknowledgement, bench/implicit_ack.py; confluent-kafka's Message.offset() gives None)
NO_OFFSET = -1001

PartitionState = tuple[int, tuple[int, ...], tuple[int, ...]]  # leader, replicas, ISR


def metadata(address: str, timeout_s: float = 5.0) -> Any:
    """All topics' Metadata (v12) from ``address``; None when it does not answer."""
    req = MetadataRequest(allow_auto_topic_creation=False)
    req.topics = None  # null: every topic (the constructor makes None an empty list)
    try:
        with Connection(address, timeout=timeout_s) as c:
            return c.request(req, 12)
    except (OSError, ConnectionError):
        return None


def cluster_view(addresses: list[str]) -> tuple[int, dict[tuple[str, int], PartitionState]]:
    """(brokers listed, partition states) from the first node that answers."""
    for address in addresses:
        md = metadata(address)
        if md is None:
            continue
        parts = {(t.name, p.partition_index): (p.leader_id, tuple(p.replica_nodes),
                                                tuple(p.isr_nodes))
                 for t in md.topics if not t.error_code for p in t.partitions}
        return len(md.brokers), parts
    return 0, {}


def short_isrs(parts: dict[tuple[str, int], PartitionState]) -> dict[tuple[str, int], PartitionState]:
    return {tp: s for tp, s in parts.items() if set(s[2]) != set(s[1]) or s[0] < 0}


class Producer:
    """An idempotent acks=all librdkafka producer writing 0, 1, 2, ... round robin over the
    topic's partitions from a thread; remembers each delivery report."""

    def __init__(self, bootstrap: str, partitions: int, rate: float) -> None:
        from confluent_kafka import Producer as RdProducer

        self.partitions = partitions
        self.rate = rate
        self.producer = RdProducer({
            "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
            "linger.ms": 5, "message.timeout.ms": 600000, "retry.backoff.ms": 100,
            "retry.backoff.max.ms": 1000, "topic.metadata.refresh.interval.ms": 2000,
        })
        self.sent = 0
        self.acked: dict[int, tuple[int, int | None]] = {}  # value -> (partition, offset)
        self.failed: dict[int, str] = {}
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _report(self, err: Any, msg: Any) -> None:
        value = int(msg.value())
        with self._lock:
            if err is not None:
                self.failed[value] = err.name()
            else:
                self.acked[value] = (msg.partition(), msg.offset())

    def _run(self) -> None:
        gap = 1.0 / self.rate
        seq = 0
        while not self._stop.is_set():
            try:
                self.producer.produce(TOPIC, value=b"%d" % seq, partition=seq % self.partitions,
                                      on_delivery=self._report)
            except BufferError:
                self.producer.poll(0.05)
                continue
            seq += 1
            self.sent = seq
            self.producer.poll(0)
            time.sleep(gap)

    def start(self) -> None:
        self.thread.start()

    def stop(self, timeout_s: float = 600) -> int:
        """Stop producing and flush; returns how many are still undelivered."""
        self._stop.set()
        self.thread.join()
        return int(self.producer.flush(timeout_s))


def read_back(bootstrap: str, partitions: int) -> dict[int, list[tuple[int, int]]]:
    """value -> [(partition, offset), ...] of every record up to each high watermark."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "double-kill-check",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    out: dict[int, list[tuple[int, int]]] = {}
    try:
        highs = {p: c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1]
                 for p in range(partitions)}
        c.assign([TopicPartition(TOPIC, p, 0) for p in range(partitions)])
        done = {p for p, h in highs.items() if h == 0}
        deadline = time.monotonic() + 300
        while len(done) < partitions and time.monotonic() < deadline:
            for m in c.consume(1000, timeout=1.0):
                if m.error() is not None:
                    continue
                out.setdefault(int(m.value()), []).append((m.partition(), m.offset()))
                if m.offset() >= highs[m.partition()] - 1:
                    done.add(m.partition())
    finally:
        c.close()
    return out


@dataclass
class Trial:
    first: int
    second: int
    serving_s: float = 0.0
    full_s: float | None = None  # from the restart
    full_after_serving_s: float | None = None
    short: dict[tuple[str, int], PartitionState] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.full_s is not None


@dataclass
class Figures:
    system: str
    trials: list[Trial] = field(default_factory=list)
    acked: int = 0
    failed: int = 0
    lost: list[int] = field(default_factory=list)
    duplicated: list[int] = field(default_factory=list)
    moved: list[tuple[int, tuple[int, int], list[tuple[int, int]]]] = field(default_factory=list)
    no_offset: int = 0
    unflushed: int = 0

    @property
    def ok(self) -> bool:
        return all(t.ok for t in self.trials) and not self.lost and not self.duplicated \
            and not self.moved

    def markdown(self) -> str:
        def stats(xs: list[float]) -> str:
            if not xs:
                return "-"
            xs = sorted(xs)
            return f"{xs[len(xs) // 2]:.1f} / {xs[-1]:.1f}"
        ok = [t for t in self.trials if t.ok]
        lines = [
            "| trials | ISR full in time | serving after restart p50 / max (s) | "
            "ISR full after restart p50 / max (s) | ISR full after serving p50 / max (s) |",
            "|---|---|---|---|---|",
            f"| {len(self.trials)} | {len(ok)} | {stats([t.serving_s for t in self.trials])} | "
            f"{stats([t.full_s for t in ok if t.full_s is not None])} | "
            f"{stats([t.full_after_serving_s for t in ok if t.full_after_serving_s is not None])} |",
            "",
            f"records acknowledged {self.acked}, failed {self.failed}, unflushed {self.unflushed}; "
            f"lost {len(self.lost)}, duplicated {len(self.duplicated)}, at another offset "
            f"{len(self.moved)}, acknowledged without an offset {self.no_offset}",
        ]
        return "\n".join(lines)


def check(prod: Producer, log: dict[int, list[tuple[int, int]]], figures: Figures) -> None:
    figures.acked = len(prod.acked)
    figures.failed = len(prod.failed)
    for value, where in log.items():
        if len(where) > 1:
            figures.duplicated.append(value)
    for value, (partition, offset) in sorted(prod.acked.items()):
        found = log.get(value)
        if not found:
            figures.lost.append(value)
        elif offset is None or offset == NO_OFFSET:
            figures.no_offset += 1
        elif (partition, offset) not in found:
            figures.moved.append((value, (partition, offset), found))


def wait_full(cluster: Any, deadline: float) -> dict[tuple[str, int], PartitionState] | None:
    """Until every node answers Metadata with every partition's ISR full (None), or the
    partitions still short at ``deadline`` (as the first node that saw any short; empty when
    no node answered). Every node is asked: a restarted node may still answer from an image
    older than the others'."""
    short: dict[tuple[str, int], PartitionState] = {}
    while time.monotonic() < deadline:
        views = [cluster_view([a])[1] for a in cluster.bootstrap.split(",")]
        shorts = [short_isrs(v) for v in views if v]
        if len(shorts) == len(views) and not any(shorts):
            return None
        short = next((s for s in shorts if s), short)
        time.sleep(0.1)
    return short


def wait_serving(cluster: Any, nodes: list[int], deadline: float) -> None:
    """Until every node answers Metadata listing all three brokers (registered and unfenced:
    the criterion of Kafka's cluster harness, used here for both systems)."""
    addresses = cluster.bootstrap.split(",")
    while time.monotonic() < deadline:
        for n in nodes:
            if cluster.pid(n) is None:
                raise RuntimeError(f"node {n} exited")
        if all(cluster_view([a])[0] == 3 for a in addresses):
            return
        time.sleep(0.1)
    raise TimeoutError(f"nodes {nodes} not serving in time")


def save_evidence(cluster: Any, out: Path, label: str, data: bool) -> Path:
    dest = out / label
    dest.mkdir(parents=True, exist_ok=True)
    for f in cluster.log_files():
        if f.exists():
            shutil.copy(f, dest / f"{f.parent.name}-{f.name}")
    if data:
        shutil.copytree(cluster.workdir, dest / "workdir", dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("*.jar"))
    return dest


def run_trial(cluster: Any, first: int, second: int, gap_s: float, isr_timeout_s: float,
              serve_timeout_s: float) -> Trial:
    trial = Trial(first, second)
    cluster.kill(first)
    time.sleep(gap_s)
    cluster.kill(second)
    restarted = time.monotonic()
    cluster.launch(first)
    cluster.launch(second)
    wait_serving(cluster, [first, second], restarted + serve_timeout_s)
    serving = time.monotonic()
    trial.serving_s = serving - restarted
    short = wait_full(cluster, serving + isr_timeout_s)
    if short is not None:
        trial.short = short
    else:
        done = time.monotonic()
        trial.full_s = done - restarted
        trial.full_after_serving_s = done - serving
    return trial


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--kafka", action="store_true", help="Apache Kafka instead of kafkawire")
    ap.add_argument("--version", default="4.x", help="the Kafka line: 4.x (4.3.1) or 4.4")
    ap.add_argument("--partitions", type=int, default=12)
    ap.add_argument("--rate", type=float, default=200, help="records a second (0: none)")
    ap.add_argument("--gap", type=float, default=2.0, help="seconds between the two kills")
    ap.add_argument("--isr-timeout", type=float, default=90.0,
                    help="seconds after both serve for every ISR to be full")
    ap.add_argument("--out", type=Path, default=Path("data/double-kill"),
                    help="where a failed trial's logs go")
    ap.add_argument("--keep", action="store_true", help="also copy the nodes' data on failure")
    args = ap.parse_args()
    system = "kafka" if args.kafka else "kafkawire"
    name = NAMES[system] if system == "kafkawire" or args.version == "4.x" else "Apache Kafka 4.4.0"
    figures = Figures(name)
    pairs = list(itertools.permutations([1, 2, 3], 2))
    with three_nodes(system, version=args.version) as cluster:
        boot = cluster.bootstrap
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": boot})  # alive until the answer
        futs = admin.create_topics(
            [NewTopic(TOPIC, num_partitions=args.partitions, replication_factor=3,
                      config={"min.insync.replicas": "2"})], request_timeout=60)
        futs[TOPIC].result(120)
        short = wait_full(cluster, time.monotonic() + 120)
        if short is not None:
            raise SystemExit(f"the ISRs never filled: {short}")
        prod = Producer(boot, args.partitions, args.rate) if args.rate > 0 else None
        if prod is not None:
            prod.start()
        started = time.monotonic()
        try:
            for i in range(args.trials):
                first, second = pairs[i % len(pairs)]
                short = wait_full(cluster, time.monotonic() + 180)
                if short is not None:
                    print(f"trial {i + 1}: ISRs not full before the kill: {short}", flush=True)
                trial = run_trial(cluster, first, second, args.gap, args.isr_timeout, 240)
                figures.trials.append(trial)
                if trial.ok:
                    print(f"trial {i + 1}: kill {first}, {args.gap:g} s, kill {second}; both "
                          f"serving {trial.serving_s:.1f} s after the restart; every ISR full "
                          f"{trial.full_s:.1f} s after it ({trial.full_after_serving_s:.1f} s "
                          "after serving)", flush=True)
                    continue
                where = save_evidence(cluster, args.out, f"{system}-trial-{i + 1}", args.keep)
                print(f"trial {i + 1}: kill {first}, kill {second}: ISRs still short "
                      f"{args.isr_timeout:g} s after serving: "
                      + "; ".join(f"{t}-{p} leader {s[0]} isr {list(s[2])} of {list(s[1])}"
                                  for (t, p), s in sorted(trial.short.items()))
                      + f" (logs in {where})", flush=True)
                missing = {r for s in trial.short.values() for r in s[1] if r not in s[2]}
                for node in sorted(missing):  # only a restart brought such a node back
                    cluster.kill(node)
                    cluster.launch(node)
                wait_serving(cluster, sorted(missing), time.monotonic() + 240)
        finally:
            if prod is not None:
                figures.unflushed = prod.stop()
        took = time.monotonic() - started
        if prod is not None:
            log = read_back(boot, args.partitions)
            check(prod, log, figures)
            if figures.lost or figures.duplicated or figures.moved:
                where = save_evidence(cluster, args.out, f"{system}-records", args.keep)
                (where / "records.json").write_text(json.dumps({
                    "acked": {str(v): a for v, a in prod.acked.items()},
                    "log": {str(v): w for v, w in log.items()},
                    "lost": figures.lost, "moved": figures.moved}))
                print(f"records' evidence in {where}", flush=True)
    print(f"\n{name}: {len(figures.trials)} double kills in {took:.0f} s, {args.partitions} "
          f"partitions, {args.rate:g} records/s")
    print(figures.markdown())
    for label, items in (("LOST", figures.lost), ("DUPLICATED", figures.duplicated),
                         ("AT ANOTHER OFFSET", figures.moved)):
        if items:
            print(f"{label} (first 20): {items[:20]}")
    if figures.lost and prod is not None:
        print("lost, as their reports gave them (value: partition, offset): "
              + ", ".join(f"{v}: {prod.acked[v]}" for v in figures.lost[:20]))
    return 0 if figures.ok else 1


if __name__ == "__main__":
    sys.exit(main())
