"""A chain of three consume-transform-produce stages with exactly-once, while the members of each
stage's group join and leave (issue 11's "exactly-once between topics").

``src`` --stage 1--> ``s1`` --stage 2--> ``s2`` --stage 3--> ``s3``, each topic with the same
partitions. A stage is a consumer group of several member processes; each member is a
read_committed consumer plus a transactional producer (librdkafka, confluent-kafka) that, per
poll, begins a transaction, writes every record it got to the same partition number of the next
topic, adds its consumed positions with ``send_offsets_to_transaction`` (KIP-447: fenced by the
group generation, not by the transactional id) and commits. Members are separate processes; a
controller starts new ones and stops running ones (gracefully: SIGTERM, the member finishes its
transaction and leaves the group; and, with ``--kill``, some with SIGKILL, leaving an open
transaction that the coordinator aborts after ``transaction.timeout.ms``).

When stage 3 has consumed everything, each topic ``s1..s3`` is read at read_committed: every
partition must hold exactly the source partition's values, in the same order (every input
exactly once, in order per partition). ``python -m tests.eos_chain --records 100000`` runs it
on a fresh kafkawire (or ``--bootstrap`` any broker, ``--kafka`` a fresh Apache Kafka 4.3.1);
``make eos-chain`` runs the full size on both.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STAGES = 3
CLIENTS = ("confluent", "java")
JAVA_MEMBER = Path(__file__).parent / "java" / "EosChainMember.java"
#: a member's exit after SIGTERM / SIGKILL: Python's handler exits 0; the JVM 143 (128 + 15)
STOPPED = (0, 143, -signal.SIGKILL, -signal.SIGTERM)
TXN_TIMEOUT_MS = 10_000  # a killed member's open transaction is aborted after this


# -- one member (a process of its own) --------------------------------------------------------


def rewind(consumer: Any) -> None:
    """Back to what the group has committed: the aborted records come again."""
    from confluent_kafka import TopicPartition

    for tp in consumer.committed(consumer.assignment(), 30):
        consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0))


def member(bootstrap: str, src: str, dst: str, group: str, tid: str, batch: int,
           abort_ratio: float) -> int:
    from confluent_kafka import Consumer, KafkaException, Producer

    rnd = random.Random(tid)
    stop = False

    def on_term(_sig: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "session.timeout.ms": 10_000, "heartbeat.interval.ms": 1_000,
    })
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid,
                         "linger.ms": 5, "transaction.timeout.ms": TXN_TIMEOUT_MS})
    producer.init_transactions(60)
    consumer.subscribe([src])
    done = 0
    try:
        while not stop:
            msgs = consumer.consume(batch, 0.5)
            msgs = [m for m in msgs if not m.error()]
            if not msgs:
                continue
            try:
                producer.begin_transaction()
                for m in msgs:
                    producer.produce(dst, key=m.key(), value=m.value(), partition=m.partition())
                positions = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
                producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 60)
                if rnd.random() < abort_ratio:  # on purpose: these records must never show
                    producer.abort_transaction(60)
                    rewind(consumer)
                    continue
                producer.commit_transaction(60)
                done += len(msgs)
            except KafkaException as e:
                err = e.args[0]
                if not err.fatal() and err.retriable() and not err.txn_requires_abort():
                    try:  # a retriable commit: try once more, as librdkafka's docs say
                        producer.commit_transaction(60)
                        done += len(msgs)
                        continue
                    except KafkaException as e2:
                        err = e2.args[0]
                if err.fatal():
                    print(json.dumps({"tid": tid, "fatal": str(err)}), file=sys.stderr, flush=True)
                    return 2
                producer.abort_transaction(60)
                rewind(consumer)
    finally:
        consumer.close()
        producer.flush(10)
    print(json.dumps({"tid": tid, "records": done}), flush=True)
    return 0


# -- the controller ------------------------------------------------------------------------------


@dataclass
class ChainResult:
    records: int
    partitions: int
    seconds: float = 0.0
    joins: int = 0
    leaves: int = 0
    kills: int = 0
    problems: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def exact(self) -> bool:
        return not self.problems

    def line(self) -> str:
        return (f"records={self.records} partitions={self.partitions} stages={STAGES} "
                f"joins={self.joins} leaves={self.leaves} kills={self.kills} "
                f"seconds={self.seconds:.1f} read_committed={self.counts} "
                + ("exactly-once: yes" if self.exact else f"exactly-once: NO {self.problems[:5]}"))


def compile_java_member(into: Path) -> str:
    """Compile tests/java/EosChainMember.java once; the classpath to run it with."""
    from compat_tests.kafka_dist import fetch, line_for

    ln = line_for("4.x")
    fetch(ln.name)
    subprocess.run(["javac", "-cp", ln.classpath, "-d", str(into), str(JAVA_MEMBER)],
                   check=True, capture_output=True, timeout=300)
    return f"{into}:{ln.classpath}"


class Stage:
    def __init__(self, k: int, bootstrap: str, run: str, topics: list[str], batch: int,
                 logdir: Path, clients: list[str], java_cp: str | None,
                 abort_ratio: float) -> None:
        self.k, self.bootstrap, self.run = k, bootstrap, run
        self.src, self.dst = topics[k - 1], topics[k]
        self.group = f"{run}-g{k}"
        self.batch = batch
        self.logdir = logdir
        self.clients = clients
        self.java_cp = java_cp
        self.abort_ratio = abort_ratio
        self.members: list[subprocess.Popen[bytes]] = []
        self.started = 0

    def start_member(self) -> None:
        """A new member; the clients take turns (confluent = librdkafka, transaction version
        1; java = Kafka's 4.x clients, version 2)."""
        client = self.clients[(self.started + self.k) % len(self.clients)]
        self.started += 1
        tid = f"{self.run}-s{self.k}-m{self.started}-{client}"
        if client == "java":
            assert self.java_cp is not None
            cmd = ["java", "-Xmx128m", "-XX:TieredStopAtLevel=1", "-cp", self.java_cp,
                   "EosChainMember", self.bootstrap, self.src, self.dst, self.group, tid,
                   str(self.batch), str(self.abort_ratio)]
        else:
            cmd = [sys.executable, "-m", "tests.eos_chain", "member", "--bootstrap",
                   self.bootstrap, "--src", self.src, "--dst", self.dst, "--group", self.group,
                   "--tid", tid, "--batch", str(self.batch), "--abort-ratio",
                   str(self.abort_ratio)]
        log = open(self.logdir / f"{tid}.log", "wb")
        self.members.append(subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, cwd=Path(__file__).resolve().parents[1]))
        log.close()

    def stop_member(self, kill: bool) -> str | None:
        """Stop a member (never the last one): "killed", "left", or None."""
        live = [m for m in self.members if m.poll() is None]
        if len(live) <= 1:
            return None
        m = random.choice(live)
        if kill:
            m.kill()
        else:
            m.terminate()
        return "killed" if kill else "left"

    def stop_all(self) -> list[int]:
        for m in self.members:
            if m.poll() is None:
                m.terminate()
        codes = []
        for m in self.members:
            try:
                codes.append(m.wait(60))
            except subprocess.TimeoutExpired:
                m.kill()
                codes.append(m.wait())
        return codes


def _admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def create_topics(bootstrap: str, names: list[str], partitions: int,
                  replication: int = 1) -> None:
    """``replication`` -1: the brokers' ``default.replication.factor``."""
    from confluent_kafka.admin import NewTopic

    admin = _admin(bootstrap)  # kept alive until the futures are done
    fs = admin.create_topics([NewTopic(n, partitions, replication) for n in names])
    for f in fs.values():
        f.result(60)


def write_source(bootstrap: str, topic: str, records: int, partitions: int,
                 start: int = 0) -> None:
    """Values ``start .. start + records - 1``, value i to partition i % partitions."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 20})
    for i in range(start, start + records):
        while True:
            try:
                p.produce(topic, key=str(i).encode(), value=str(i).encode(), partition=i % partitions)
                break
            except BufferError:
                p.poll(0.1)
        if i % 10_000 == 0:
            p.poll(0)
    assert p.flush(300) == 0, "source records not all delivered"


class Counter:
    """Reads a topic at read_committed as it grows and counts its records."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        from confluent_kafka import Consumer, TopicPartition

        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": f"count-{uuid.uuid4().hex[:6]}",
            "isolation.level": "read_committed", "enable.auto.commit": False})
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        self.count = 0

    def poll(self) -> int:
        for m in self.consumer.consume(5000, 0.2):
            if not m.error():
                self.count += 1
        return self.count

    def close(self, timeout_s: float = 60) -> None:
        """Bounded: once, after 100 leader kills, librdkafka's close never returned (the
        counter has a group id for nothing but never joins)."""
        t = threading.Thread(target=self.consumer.close, daemon=True)
        t.start()
        t.join(timeout_s)


def read_all(bootstrap: str, topic: str, partitions: int) -> dict[int, list[str]]:
    """Every value per partition at read_committed, up to the end of each partition."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:6]}",
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  "enable.partition.eof": True})
    out: dict[int, list[str]] = {p: [] for p in range(partitions)}
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        eof: set[int] = set()
        deadline = time.monotonic() + 300
        while len(eof) < partitions and time.monotonic() < deadline:
            for m in c.consume(1000, 0.5):
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        eof.add(m.partition())
                    continue
                eof.discard(m.partition())
                out[m.partition()].append((m.value() or b"").decode())
        assert len(eof) == partitions, f"{topic}: no end of partitions {set(range(partitions)) - eof}"
    finally:
        c.close()
    return out


def run_chain(bootstrap: str, records: int, partitions: int = 3, members: int = 2,
              churn_s: float = 4.0, kill: bool = False, batch: int = 500,
              timeout_s: float = 900, seed: int | None = None,
              clients: tuple[str, ...] = CLIENTS, abort_ratio: float = 0.1,
              before_check: Callable[[], None] | None = None,
              replication: int = 1, more: Callable[[], bool] | None = None,
              logdir: Path | None = None) -> ChainResult:
    """``before_check``: called once every stage stopped, before the topics are read back
    (bench/eos_failover.py stops killing brokers there); ``replication``: the topics'
    replication factor (-1: the cluster's default); ``more``: while it says so, another
    ``records`` source records are written whenever the last stage is half-way through the
    previous ones (a run as long as bench/eos_failover.py's kills need); ``logdir``: the
    members' logs go there and stay (by default, a temporary directory removed at the end)."""
    rnd_seed = seed if seed is not None else random.randrange(1 << 30)
    random.seed(rnd_seed)
    run = f"chain-{uuid.uuid4().hex[:6]}"
    topics = [f"{run}-src"] + [f"{run}-s{k}" for k in range(1, STAGES + 1)]
    create_topics(bootstrap, topics, partitions, replication)
    write_source(bootstrap, topics[0], records, partitions)
    res = ChainResult(records, partitions)
    start = time.monotonic()
    if logdir is not None:
        logdir.mkdir(parents=True, exist_ok=True)
    with (contextlib.nullcontext(str(logdir)) if logdir is not None
          else tempfile.TemporaryDirectory(prefix="eos-chain-")) as d:
        java_cp = compile_java_member(Path(d) / "classes") if "java" in clients else None
        stages = [Stage(k, bootstrap, run, topics, batch, Path(d), list(clients), java_cp,
                        abort_ratio) for k in range(1, STAGES + 1)]
        try:
            for s in stages:
                for _ in range(members):
                    s.start_member()
            drive(bootstrap, topics, stages, res, churn_s, kill, timeout_s, more)
        finally:
            for s in stages:
                codes = s.stop_all()
                bad = [c for c in codes if c not in STOPPED]
                if bad:
                    logs = sorted(Path(d).glob(f"{run}-s{s.k}-*.log"))
                    tails = [p.read_text(errors="replace")[-500:] for p in logs]
                    res.problems.append(f"stage {s.k} members exited {bad}: {tails[:2]}")
    res.seconds = time.monotonic() - start
    if before_check is not None:
        before_check()
    want = read_all(bootstrap, topics[0], partitions)
    for topic in topics[1:]:
        got = read_all(bootstrap, topic, partitions)
        res.counts[topic.rsplit("-", 1)[1]] = sum(len(v) for v in got.values())
        for p in range(partitions):
            if got[p] != want[p]:
                dup = len(got[p]) - len(set(got[p]))
                missing = len(set(want[p]) - set(got[p]))
                res.problems.append(f"{topic}[{p}]: {len(got[p])} values for {len(want[p])}, "
                                    f"{dup} duplicated, {missing} missing, seed {rnd_seed}")
    return res


def drive(bootstrap: str, topics: list[str], stages: list[Stage], res: ChainResult,
          churn_s: float, kill: bool, timeout_s: float, more: Callable[[], bool] | None) -> None:
    """Churns members until the last topic holds ``res.records`` records at read_committed,
    writing ``more`` source records on the way while ``more()`` says so."""
    chunk, partitions = res.records, res.partitions
    next_churn = time.monotonic() + churn_s
    deadline = time.monotonic() + timeout_s
    last = Counter(bootstrap, topics[-1], partitions)
    try:
        while last.poll() < res.records:
            if more is not None and last.count >= res.records - chunk // 2 and more():
                write_source(bootstrap, topics[0], chunk, partitions, start=res.records)
                res.records += chunk
                deadline = time.monotonic() + timeout_s
            if time.monotonic() > deadline:
                res.problems.append(f"{last.count} of {res.records} through in {timeout_s}s")
                break
            if time.monotonic() >= next_churn:
                churn(stages, res, kill)
                next_churn = time.monotonic() + churn_s
    finally:
        last.close()


def churn(stages: list[Stage], res: ChainResult, kill: bool) -> None:
    """One member joins or leaves (SIGTERM; with ``kill``, sometimes SIGKILL) a random stage."""
    s = random.choice(stages)
    if random.random() < 0.5:
        s.start_member()
        res.joins += 1
    else:
        how = s.stop_member(kill=kill and random.random() < 0.25)
        res.kills += how == "killed"
        res.leaves += how == "left"


@contextmanager
def _broker(kind: str) -> Iterator[str]:
    if kind == "kafka":
        from compat_tests.kafka_dist import running_kafka

        with running_kafka(overrides={
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
        }) as b:
            yield b
    else:
        from kafkawire.tools.testing import BrokerProcess

        with tempfile.TemporaryDirectory() as d, BrokerProcess(Path(d) / "data", overrides={
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
        }).start() as bp:
            yield bp.bootstrap


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "member":
        ap = argparse.ArgumentParser()
        for opt in ("--bootstrap", "--src", "--dst", "--group", "--tid"):
            ap.add_argument(opt, required=True)
        ap.add_argument("--batch", type=int, default=500)
        ap.add_argument("--abort-ratio", type=float, default=0.0)
        a = ap.parse_args(argv[1:])
        return member(a.bootstrap, a.src, a.dst, a.group, a.tid, a.batch, a.abort_ratio)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--members", type=int, default=2, help="members per stage at the start")
    ap.add_argument("--churn-s", type=float, default=4.0, help="a join or leave every N s")
    ap.add_argument("--kill", action="store_true", help="some leaves are kill -9")
    ap.add_argument("--seed", type=int)
    ap.add_argument("--abort-ratio", type=float, default=0.1,
                    help="share of transactions members abort on purpose")
    ap.add_argument("--clients", default=",".join(CLIENTS),
                    help="member clients, taking turns (confluent, java)")
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--bootstrap")
    where.add_argument("--kafka", action="store_true", help="a fresh Apache Kafka 4.3.1")
    a = ap.parse_args(argv)
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    clients = tuple(c for c in a.clients.split(",") if c)
    assert set(clients) <= set(CLIENTS), clients
    if a.bootstrap:
        res = run_chain(a.bootstrap, a.records, a.partitions, a.members, a.churn_s, a.kill,
                        seed=a.seed, clients=clients, abort_ratio=a.abort_ratio)
    else:
        with _broker("kafka" if a.kafka else "kafkawire") as b:
            res = run_chain(b, a.records, a.partitions, a.members, a.churn_s, a.kill,
                            seed=a.seed, clients=clients, abort_ratio=a.abort_ratio)
    print(("kafka-4.3.1 " if a.kafka else "") + res.line(), flush=True)
    return 0 if res.exact else 1


if __name__ == "__main__":
    sys.exit(main())
