"""Many partitions on one node: start time, memory and open files per 1,000 partitions.

    .venv/bin/python bench/partitions.py                    # 10,000 partitions, ulimit -n 1024
    .venv/bin/python bench/partitions.py --partitions 2000 --topics 2 --nofile 256
    .venv/bin/python bench/partitions.py --partitions 100000 --topics 20 --nofile 20000 --sample 100
    .venv/bin/python bench/partitions.py --target kafka --nofile 20000   # Apache Kafka 4.3.1

Creates the partitions over a few topics (one CreateTopics each: Kafka refuses more than 10,000
metadata records per request), produces one record to every partition and consumes them all
(confluent-kafka), then restarts the broker cleanly and after kill -9, consuming everything
again each time. Prints a Markdown table: start time (process start to the first ApiVersions
answer), RSS and open descriptors after each phase, and the figures per 1,000 partitions
against the empty broker. ``run()`` is what tests/test_limits.py calls. ``--target kafka``
runs the same against Apache Kafka 4.3.1 (compat_tests/kafka_dist.py, KRaft combined node, its
start timed to the first Metadata answer) under the same open-file limit.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafkawire.tools.testing import BrokerProcess  # noqa: E402


@dataclass
class Phase:
    name: str
    start_s: float
    rss_mb: float
    open_files: int


@dataclass
class Result:
    partitions: int
    nofile: int
    phases: list[Phase] = field(default_factory=list)
    create_s: float = 0.0
    stop_s: list[float] = field(default_factory=list)
    produce_s: float = 0.0
    consume_s: float = 0.0


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _snapshot(bp: Any, name: str, start_s: float) -> Phase:
    assert bp.proc is not None
    pid = bp.proc.pid
    return Phase(name, start_s, _rss_mb(pid), len(os.listdir(f"/proc/{pid}/fd")))


#: Generous bounds for a stop or a start (fsync-bound: ~7 s and ~6 s per 1,000 partitions on a
#: loaded 2-core machine), at least 15 minutes; ``run()`` raises it for more partitions.
_WAIT_S = {"bound": 900.0}


class KafkaTarget:
    """Apache Kafka 4.3.1 with BrokerProcess's face (start, stop, kill, proc, bootstrap)."""

    def __init__(self, workdir: Path, nofile: int, heap: str = "1g") -> None:
        from compat_tests.kafka_dist import KafkaBroker

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # the JVM inherits it
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(nofile, hard), hard))
        self.kb = KafkaBroker(workdir, heap=heap)
        self.kb.format_storage()  # before the timed first start (kafkawire formats in it)

    @property
    def bootstrap(self) -> str:
        return self.kb.bootstrap

    @property
    def proc(self) -> Any:
        return self.kb.proc

    def start(self, timeout_s: float = 90.0) -> KafkaTarget:
        self.kb.start(timeout_s, format=False)
        return self

    def stop(self, timeout_s: float = 30.0) -> int:
        proc = self.kb.proc
        self.kb.stop(timeout_s)
        return proc.returncode if proc is not None else 0

    def kill(self) -> None:
        proc, self.kb.proc = self.kb.proc, None
        if proc is not None:
            proc.kill()
            proc.wait()

    def log(self) -> str:
        return ""

    def close(self) -> None:
        self.kb.stop(60)


def _timed_start(bp: Any, kill: bool = False, stops: list[float] | None = None) -> float:
    """Seconds from process start to the first ApiVersions answer (the stop before it is
    timed into ``stops``)."""
    if bp.proc is not None:
        t = time.monotonic()
        if kill:
            bp.kill()
        else:
            bp.stop(timeout_s=_WAIT_S["bound"])
        if stops is not None:
            stops.append(time.monotonic() - t)
    t = time.monotonic()
    bp.start(timeout_s=_WAIT_S["bound"])
    return time.monotonic() - t


def create_topics(bootstrap: str, topics: list[str], parts: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    # a CreateTopics of thousands of partitions may take a minute on a busy disk (a directory
    # and four files per partition): wait for it (librdkafka: 60 s by default, 300 s at most)
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 300000})
    for t in topics:  # one request per topic: at most 10,000 records per request
        admin.create_topics([NewTopic(t, parts, 1)], request_timeout=600)[t].result(600)


def produce_all(bootstrap: str, topics: list[str], parts: int, tag: str,
                sample: int = 1) -> None:
    """One record to every ``sample``-th partition of each topic, one producer per topic:
    librdkafka's broker thread serves every partition a producer has written to at each of its
    wakeups, so one producer writing to 100,000 partitions spends its time in the client
    (about 600 s, quadratic in the partitions; the broker was mostly idle)."""
    from confluent_kafka import KafkaError, Producer

    failed: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            failed.append(err)

    for t in topics:
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50,
                      "message.timeout.ms": 600000, "queue.buffering.max.messages": 1000000})
        for i in range(0, parts, sample):
            p.produce(t, value=f"{tag}-{t}-{i}".encode(), partition=i, on_delivery=on_delivery)
        p.poll(0)
        left = p.flush(600)
        # a record that outlived message.timeout.ms leaves the queue failed: flush() counts
        # it as gone, only its delivery report says it was never written
        if left or failed:
            raise RuntimeError(f"{left} records still queued, {len(failed)} failed "
                               f"({failed[:1]}) for {t}")


def consume_all(bootstrap: str, topics: list[str], parts: int, per_partition: int,
                sample: int = 1) -> dict[tuple[str, int], list[bytes]]:
    """Everything from every ``sample``-th partition of each topic."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(t, i, 0) for t in topics for i in range(0, parts, sample)])
    got: dict[tuple[str, int], list[bytes]] = {}
    want = len(topics) * len(range(0, parts, sample))
    deadline = time.monotonic() + _WAIT_S["bound"]
    try:
        while time.monotonic() < deadline:
            for m in c.consume(5000, timeout=1):
                if m.error() is None:
                    got.setdefault((m.topic(), m.partition()), []).append(m.value())
            if len(got) == want and all(len(v) >= per_partition for v in got.values()):
                break
    finally:
        c.close()
    return got


def _check(got: dict[tuple[str, int], list[bytes]], topics: list[str], parts: int,
           tags: list[str], sample: int = 1) -> None:
    for t in topics:
        for i in range(0, parts, sample):
            values = got.get((t, i), [])
            expected = [f"{tag}-{t}-{i}".encode() for tag in tags]
            if values[: len(tags)] != expected:
                raise AssertionError(f"{t}-{i}: {values[:3]!r}, expected {expected!r}")


def run(data_dir: Path, partitions: int, topics: int, nofile: int, log: Any = print,
        target: str = "kafkawire", sample: int = 1, heap: str = "1g") -> Result:
    """``sample`` > 1: every partition gets a record, but only every ``sample``-th one is
    consumed back, gets the second record and is consumed again (a consumer without KIP-227
    fetch sessions sends every assigned partition in every Fetch; at 100,000 partitions
    that makes consuming them all take longer than the rest of the run)."""
    parts = partitions // topics
    names = [f"p{k}-{uuid.uuid4().hex[:6]}" for k in range(topics)]
    res = Result(parts * topics, nofile)
    _WAIT_S["bound"] = max(900.0, 0.03 * res.partitions)
    bp: Any = (BrokerProcess(data_dir, open_files_limit=nofile) if target == "kafkawire"
               else KafkaTarget(data_dir, nofile, heap))
    try:
        _phase(res, log, _snapshot(bp, "empty", _timed_start(bp)))
        t = time.monotonic()
        create_topics(bp.bootstrap, names, parts)
        res.create_s = time.monotonic() - t
        log(f"created {res.partitions} partitions in {res.create_s:.1f} s")
        t = time.monotonic()
        produce_all(bp.bootstrap, names, parts, "one")
        res.produce_s = time.monotonic() - t
        log(f"produced one record to each in {res.produce_s:.1f} s")
        t = time.monotonic()
        _check(consume_all(bp.bootstrap, names, parts, 1, sample), names, parts, ["one"],
               sample)
        res.consume_s = time.monotonic() - t
        _phase(res, log, _snapshot(bp, "after produce + consume", 0.0))
        _phase(res, log, _snapshot(bp, "clean restart", _timed_start(bp, stops=res.stop_s)))
        produce_all(bp.bootstrap, names, parts, "two", sample)
        _phase(res, log, _snapshot(bp, "restart after kill -9", _timed_start(bp, kill=True)))
        _check(consume_all(bp.bootstrap, names, parts, 2, sample), names, parts,
               ["one", "two"], sample)
        _phase(res, log, _snapshot(bp, "after consuming all again", 0.0))
        if "Traceback" in bp.log():
            raise AssertionError(f"traceback in the broker log:\n{bp.log()}")
    finally:
        bp.close()
    return res


def _phase(res: Result, log: Any, p: Phase) -> None:
    res.phases.append(p)
    log(f"{p.name}: start {p.start_s:.1f} s, RSS {p.rss_mb:.0f} MB, {p.open_files} open files"
        + (f" (stop before it {res.stop_s[-1]:.1f} s)" if p.name == "clean restart" else ""))


def table(res: Result) -> str:
    empty = res.phases[0]
    k = res.partitions / 1000
    lines = [
        f"{res.partitions} partitions, `ulimit -n {res.nofile}`: create {res.create_s:.1f} s, "
        f"produce one record to each {res.produce_s:.1f} s, consume them {res.consume_s:.1f} s, "
        f"clean stop {res.stop_s[0] if res.stop_s else 0:.1f} s",
        "",
        "| phase | start (s) | RSS (MB) | open files | per 1,000 partitions vs empty |",
        "|---|---|---|---|---|",
    ]
    for p in res.phases:
        start = f"{p.start_s:.1f}" if p.start_s else ""
        per = (f"{(p.start_s - empty.start_s) / k:+.2f} s, " if p.start_s and p is not empty
               else "")
        per += f"{(p.rss_mb - empty.rss_mb) / k:+.1f} MB, {(p.open_files - empty.open_files) / k:+.1f} files"
        lines.append(f"| {p.name} | {start} | {p.rss_mb:.0f} | {p.open_files} | "
                     f"{per if p is not empty else ''} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--topics", type=int, default=4)
    ap.add_argument("--nofile", type=int, default=1024)
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--target", choices=["kafkawire", "kafka"], default="kafkawire")
    ap.add_argument("--heap", default="1g", help="Kafka's -Xmx (kafka-server-start.sh: 1G)")
    ap.add_argument("--sample", type=int, default=1,
                    help="consume back (and write the second record to) every N-th partition")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kw-partitions-", dir=args.dir) as tmp:
        res = run(Path(tmp) / "data", args.partitions, args.topics, args.nofile,
                  target=args.target, sample=args.sample, heap=args.heap)
    print(table(res))


if __name__ == "__main__":
    main()
