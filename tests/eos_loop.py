"""The issue-11 loop: one transactional producer, one partition, rounds of "begin, produce one
record, commit; begin, produce one record, abort" with no pause between EndTxn and the next
produce, then a read_committed read of the partition.

Clean means: no EndTxn (or send) error in any round, and read_committed holds exactly the
committed values ``c0 .. c<n-1>`` in order and none of the aborted ``a<i>`` (read_uncommitted
still holds both). Clients: librdkafka (confluent-kafka), kafka-python and aiokafka use
transaction version 1; Kafka's Java 4.x producer (``tests/java/EosLoop.java``) uses version 2
against a broker that finalized it (kafkawire does; so does Kafka 4.3.1).

Used by ``tests/test_eos_loop.py`` (a bounded number of rounds) and by ``make eos-soak``::

    python -m tests.eos_loop --rounds 1000 [--client confluent ...] [--bootstrap HOST:PORT]

which starts its own kafkawire (or uses ``--bootstrap``, e.g. an Apache Kafka) and prints one
line per client: rounds, errors, committed/aborted records seen at read_committed, seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

CLIENTS = ("confluent", "kafka-python", "aiokafka", "java")
JAVA_SOURCE = Path(__file__).parent / "java" / "EosLoop.java"


@dataclass
class LoopResult:
    client: str
    rounds: int
    errors: list[str] = field(default_factory=list)
    committed_seen: list[str] = field(default_factory=list)  # read_committed, in order
    uncommitted_seen: int = 0
    seconds: float = 0.0

    @property
    def aborted_visible(self) -> list[str]:
        return [v for v in self.committed_seen if v.startswith("a")]

    @property
    def clean(self) -> bool:
        want = [f"c{i}" for i in range(self.rounds)]
        return not self.errors and self.committed_seen == want

    def line(self) -> str:
        return (f"{self.client}: rounds={self.rounds} errors={len(self.errors)} "
                f"committed_visible={len(self.committed_seen) - len(self.aborted_visible)} "
                f"aborted_visible={len(self.aborted_visible)} "
                f"read_uncommitted={self.uncommitted_seen} seconds={self.seconds:.1f}"
                + ("" if self.clean else f" NOT CLEAN {self.errors[:3]}"))


def create_topic(bootstrap: str, name: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(60)


# -- the loops, one per client ---------------------------------------------------------------


def loop_confluent(bootstrap: str, topic: str, tid: str, rounds: int) -> list[str]:
    from confluent_kafka import KafkaException, Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 0})
    p.init_transactions(60)
    errors = []
    for i in range(rounds):
        step = "send"
        try:
            p.begin_transaction()
            p.produce(topic, value=f"c{i}".encode(), partition=0)
            step = "commit"
            p.commit_transaction(60)
            p.begin_transaction()
            step = "send"
            p.produce(topic, value=f"a{i}".encode(), partition=0)
            if p.flush(60) != 0:
                raise RuntimeError("flush left messages")
            step = "abort"
            p.abort_transaction(60)
        except (KafkaException, RuntimeError) as e:
            errors.append(f"round {i} {step}: {e}")
            if isinstance(e, KafkaException) and e.args[0].fatal():
                break
            try:
                p.abort_transaction(60)
            except KafkaException as e2:
                errors.append(f"round {i} abort after error: {e2}")
                break
    p.flush(10)
    return errors


def loop_kafka_python(bootstrap: str, topic: str, tid: str, rounds: int) -> list[str]:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid, linger_ms=0)
    p.init_transactions()
    errors = []
    try:
        for i in range(rounds):
            step = "send"
            try:
                p.begin_transaction()
                p.send(topic, value=f"c{i}".encode(), partition=0)
                step = "commit"
                p.commit_transaction()
                p.begin_transaction()
                step = "send"
                p.send(topic, value=f"a{i}".encode(), partition=0).get(60)
                step = "abort"
                p.abort_transaction()
            except KafkaError as e:
                errors.append(f"round {i} {step}: {e!r}")
                break  # kafka-python's transaction manager has no clean retry path
    finally:
        p.close(10)
    return errors


def loop_aiokafka(bootstrap: str, topic: str, tid: str, rounds: int) -> list[str]:
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError

    async def run() -> list[str]:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid, linger_ms=0)
        await p.start()
        errors = []
        try:
            for i in range(rounds):
                step = "send"
                try:
                    await p.begin_transaction()
                    await p.send(topic, value=f"c{i}".encode(), partition=0)
                    step = "commit"
                    await p.commit_transaction()
                    await p.begin_transaction()
                    step = "send"
                    await p.send_and_wait(topic, value=f"a{i}".encode(), partition=0)
                    step = "abort"
                    await p.abort_transaction()
                except KafkaError as e:
                    errors.append(f"round {i} {step}: {e!r}")
                    break
        finally:
            await p.stop()
        return errors

    return asyncio.run(run())


def loop_java(bootstrap: str, topic: str, tid: str, rounds: int) -> list[str]:
    from compat_tests.kafka_dist import fetch, line_for

    ln = line_for("4.x")
    fetch(ln.name)
    proc = subprocess.run(
        ["java", "-Xmx256m", "-cp", ln.classpath, str(JAVA_SOURCE), bootstrap, topic, tid,
         str(rounds)],
        capture_output=True, text=True, timeout=120 + rounds * 2,
    )
    lines = proc.stdout.splitlines()
    errors = [ln_[6:] for ln_ in lines if ln_.startswith("ERROR ")]
    if proc.returncode != 0 or not any(ln_.startswith("DONE ") for ln_ in lines):
        errors.append(f"java exited {proc.returncode}: {proc.stderr[-2000:]}")
    return errors


LOOPS: dict[str, Callable[[str, str, str, int], list[str]]] = {
    "confluent": loop_confluent,
    "kafka-python": loop_kafka_python,
    "aiokafka": loop_aiokafka,
    "java": loop_java,
}


# -- reading back ----------------------------------------------------------------------------


def read_partition(bootstrap: str, topic: str, isolation: str, timeout_s: float = 60) -> list[str]:
    """Every value of partition 0 visible at ``isolation``, in offset order (up to the end
    offset at that isolation level)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"eos-{uuid.uuid4().hex[:6]}",
                  "isolation.level": isolation, "enable.auto.commit": False,
                  "enable.partition.eof": True})
    try:
        tp = TopicPartition(topic, 0, 0)
        c.assign([tp])
        got: list[str] = []
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    return got
                continue
            got.append((m.value() or b"").decode())
        raise AssertionError(f"no end of partition {topic}-0 at {isolation} in {timeout_s}s")
    finally:
        c.close()


def run_loop(client: str, bootstrap: str, rounds: int) -> LoopResult:
    topic = f"eos-{client}-{uuid.uuid4().hex[:6]}"
    tid = f"eos-{client}-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic)
    start = time.monotonic()
    res = LoopResult(client, rounds)
    res.errors = LOOPS[client](bootstrap, topic, tid, rounds)
    res.seconds = time.monotonic() - start
    wait_stable(bootstrap, topic)
    res.committed_seen = read_partition(bootstrap, topic, "read_committed")
    res.uncommitted_seen = len(read_partition(bootstrap, topic, "read_uncommitted"))
    return res


def wait_stable(bootstrap: str, topic: str, timeout_s: float = 60) -> None:
    """Until the last transaction's marker is in (LSO == high watermark)."""
    from confluent_kafka import Consumer, TopicPartition

    deadline = time.monotonic() + timeout_s
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos-lso",
                  "isolation.level": "read_committed"})
    try:
        while True:
            lo, lso = c.get_watermark_offsets(TopicPartition(topic, 0), 30, cached=False)
            cu = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos-hw",
                           "isolation.level": "read_uncommitted"})
            try:
                _lo, hw = cu.get_watermark_offsets(TopicPartition(topic, 0), 30, cached=False)
            finally:
                cu.close()
            if lso == hw or time.monotonic() > deadline:
                return
            time.sleep(0.1)
    finally:
        c.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=1000)
    ap.add_argument("--client", action="append", choices=CLIENTS)
    ap.add_argument("--bootstrap", help="an existing broker (default: start a kafkawire)")
    a = ap.parse_args(argv)
    clients = a.client or list(CLIENTS)
    results = []
    if a.bootstrap:
        results = [run_loop(c, a.bootstrap, a.rounds) for c in clients]
    else:
        from kafkawire.tools.testing import BrokerProcess

        with tempfile.TemporaryDirectory() as d, BrokerProcess(Path(d) / "data").start() as bp:
            for c in clients:
                results.append(run_loop(c, bp.bootstrap, a.rounds))
                print(results[-1].line(), flush=True)
        return 0 if all(r.clean for r in results) else 1
    for r in results:
        print(r.line(), flush=True)
    return 0 if all(r.clean for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
