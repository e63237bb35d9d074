"""Leader kill -9 under an idempotent acks=all producer: 0 acknowledged records lost, 0
duplicates, order kept (the checker used by tests/test_replication_cluster.py and
``make failover``).

    .venv/bin/python bench/failover.py --kills 100       # 1 controller + 3 brokers, RF=3
    .venv/bin/python bench/failover.py --kills 20 --kafka     # 3 combined Apache Kafka nodes
    .venv/bin/python bench/failover.py --kills 20 --combined  # 3 combined kafkawire nodes

One confluent-kafka (librdkafka) producer with ``enable.idempotence=true`` and ``acks=all``
writes sequence numbers ``0, 1, 2, ...`` as values to one partition of a topic with
replication factor 3 and ``min.insync.replicas=2``, from its own thread, as fast as its queue
allows (bounded by ``--rate``). Every ``--interval`` seconds the checker finds the partition's
leader (a fresh AdminClient each time, as users do), kills it with SIGKILL, restarts it, and
waits until the ISR holds all three replicas again before the next kill. At the end it reads
the whole partition from offset 0 to the high watermark and checks:

* every value whose delivery report succeeded is in the log, at the offset the report gave
  (a report without an offset, librdkafka's implicit acknowledgement of a request that failed
  with a retriable error once a later one succeeded, is only looked for: bench/implicit_ack.py);
* no value appears twice;
* the values in the log are strictly increasing (no reordering).

It also measures, per kill, the time from the kill to the first successful delivery report of
a record produced after the kill. Prints a Markdown summary (figures for docs/BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import bisect
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


@dataclass
class Figures:
    kills: int = 0
    produced: int = 0
    acked: int = 0
    failed: int = 0
    in_log: int = 0
    lost: list[int] = field(default_factory=list)
    duplicates: list[int] = field(default_factory=list)
    reordered: int = 0
    wrong_offset: int = 0
    #: acknowledged without an offset (librdkafka's RD_KAFKA_OFFSET_INVALID, None in
    #: confluent-kafka: an implicit acknowledgement), found in the log
    no_offset: int = 0
    recovery_ms: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    consumer_rewinds: int = 0  # records a live consumer returned again (kafka-python)
    consumer_errors: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.lost and not self.duplicates and not self.reordered \
            and not self.wrong_offset

    def markdown(self) -> str:
        rec = sorted(self.recovery_ms)
        def pct(q: float) -> str:
            return f"{rec[min(len(rec) - 1, int(q * len(rec)))]:.0f}" if rec else "-"
        return "\n".join([
            "| kills | produced | acknowledged | failed | in log | lost | duplicates | "
            "reordered | kill -> first ack p50 / p99 / max (ms) |",
            "|---|---|---|---|---|---|---|---|---|",
            f"| {self.kills} | {self.produced} | {self.acked} | {self.failed} | {self.in_log} "
            f"| {len(self.lost)} | {len(self.duplicates)} | {self.reordered} | "
            f"{pct(0.5)} / {pct(0.99)} / {f'{rec[-1]:.0f}' if rec else '-'} |",
        ])


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})


def partition_state(bootstrap: str, topic: str, partition: int = 0
                    ) -> tuple[int, list[int], list[int]] | None:
    """(leader, replicas, isr) from Metadata, or None when it cannot be read now."""
    try:
        md = admin(bootstrap).list_topics(topic, timeout=10)
    except KafkaException:
        return None
    t = md.topics.get(topic)
    if t is None or t.error is not None or partition not in t.partitions:
        return None
    p = t.partitions[partition]
    return p.leader, list(p.replicas), list(p.isrs)


def wait_until(cond: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.2)
    raise TimeoutError(f"timed out after {timeout_s}s waiting for {what}")


def create_topic(bootstrap: str, topic: str, replicas: list[int], min_isr: int = 2,
                 partitions: int = 1) -> None:
    """``partitions`` partitions on ``replicas`` (the brokers the checker may kill), the
    preferred leader rotating over them."""
    rf = len(replicas)
    assignment = [replicas[i % rf:] + replicas[:i % rf] for i in range(partitions)]
    client = admin(bootstrap)  # kept alive until the answer
    futs = client.create_topics([NewTopic(
        topic, num_partitions=partitions, replica_assignment=assignment,
        config={"min.insync.replicas": str(min_isr)})], request_timeout=30)
    futs[topic].result(60)
    for p in range(partitions):
        wait_until(lambda p=p: (s := partition_state(bootstrap, topic, p)) is not None
                   and len(s[2]) == rf and s[0] >= 0, 60,
                   f"{topic}-{p} to have {rf} in-sync replicas")


class SequenceProducer:
    """Produces 0, 1, 2, ... from a thread; remembers each delivery report. A client family
    is a subclass: ``_send`` one value (False when the client's queue is full), ``_poll``,
    ``_flush``."""

    def __init__(self, topic: str, rate: float) -> None:
        self.topic = topic
        self.rate = rate
        self.sent_at: list[float] = []
        self.acked: dict[int, int | None] = {}  # value -> offset (None: the report had none)
        self.failed: dict[int, str] = {}
        self.ack_times: list[tuple[float, int]] = []  # (time, value)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _send(self, seq: int) -> bool:
        raise NotImplementedError

    def _poll(self, timeout_s: float) -> None:
        """Serves the client's delivery callbacks (librdkafka's poll)."""

    def _flush(self, timeout_s: float) -> None:
        raise NotImplementedError

    def _acked(self, value: int, offset: int | None) -> None:
        with self._lock:
            self.acked[value] = offset
            self.ack_times.append((time.monotonic(), value))

    def _failed(self, value: int, error: str) -> None:
        with self._lock:
            self.failed[value] = error

    def _run(self) -> None:
        seq = 0
        gap = 1.0 / self.rate if self.rate > 0 else 0.0
        while not self._stop.is_set():
            if not self._send(seq):
                self._poll(0.05)
                continue
            self.sent_at.append(time.monotonic())
            seq += 1
            self._poll(0)
            if gap:
                time.sleep(gap)

    def start(self) -> None:
        self.thread.start()

    def stop(self, flush_timeout_s: float = 300) -> None:
        self._stop.set()
        self.thread.join()
        self._flush(flush_timeout_s)

    def first_ack_after(self, t: float) -> float | None:
        """When the first record produced after ``t`` was acknowledged."""
        with self._lock:
            times = self.ack_times
            i = bisect.bisect_left(times, (t, -1))  # acknowledged after t, in time order
            for at, value in times[i:]:
                if value < len(self.sent_at) and self.sent_at[value] >= t:
                    return at
        return None


class ConfluentProducer(SequenceProducer):
    """confluent-kafka (librdkafka), idempotent, acks=all."""

    def __init__(self, bootstrap: str, topic: str, rate: float) -> None:
        super().__init__(topic, rate)
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
            "linger.ms": 5, "message.timeout.ms": 300000, "retry.backoff.ms": 100,
            "retry.backoff.max.ms": 1000, "topic.metadata.refresh.interval.ms": 2000,
        })

    def _report(self, err: Any, msg: Any) -> None:
        if err is not None:
            self._failed(int(msg.value()), err.name())
        else:
            self._acked(int(msg.value()), msg.offset())

    def _send(self, seq: int) -> bool:
        try:
            self.producer.produce(self.topic, value=b"%d" % seq, partition=0,
                                  on_delivery=self._report)
        except BufferError:
            return False
        return True

    def _poll(self, timeout_s: float) -> None:
        self.producer.poll(timeout_s)

    def _flush(self, timeout_s: float) -> None:
        self.producer.flush(timeout_s)


class KafkaPythonProducer(SequenceProducer):
    """kafka-python's KafkaProducer, idempotent, acks=all (its callbacks run on its sender
    thread)."""

    def __init__(self, bootstrap: str, topic: str, rate: float) -> None:
        from kafka import KafkaProducer

        super().__init__(topic, rate)
        self.producer = KafkaProducer(
            bootstrap_servers=bootstrap, enable_idempotence=True, acks="all", linger_ms=5,
            delivery_timeout_ms=300000, request_timeout_ms=30000, retry_backoff_ms=100,
            metadata_max_age_ms=2000, max_block_ms=300000)

    def _send(self, seq: int) -> bool:
        fut = self.producer.send(self.topic, value=b"%d" % seq, partition=0)
        fut.add_callback(lambda md, v=seq: self._acked(v, md.offset))
        fut.add_errback(lambda e, v=seq: self._failed(v, type(e).__name__))
        return True

    def _flush(self, timeout_s: float) -> None:
        self.producer.flush(timeout_s)
        self.producer.close(timeout=30)


CLIENTS = ("confluent", "kafka-python")


def sequence_producer(client: str, bootstrap: str, topic: str, rate: float) -> SequenceProducer:
    if client == "kafka-python":
        return KafkaPythonProducer(bootstrap, topic, rate)
    return ConfluentProducer(bootstrap, topic, rate)


def read_log(bootstrap: str, topic: str) -> list[tuple[int, int]]:
    """(offset, value) of every record up to the high watermark."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "failover-check",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        _low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        c.assign([TopicPartition(topic, 0, 0)])
        out: list[tuple[int, int]] = []
        deadline = time.monotonic() + 300
        while (not out or out[-1][0] < high - 1) and time.monotonic() < deadline:
            for m in c.consume(1000, timeout=1.0):
                if m.error() is None:
                    out.append((m.offset(), int(m.value())))
        return out
    finally:
        c.close()


class KafkaPythonReader:
    """kafka-python's KafkaConsumer reading the partition from offset 0 on a thread of its own
    all through the kills (no group: assign and seek), keeping (offset, value) of each record;
    ``rewinds`` counts records it returned again at an offset it had passed."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from kafka import KafkaConsumer
        from kafka import TopicPartition as KTP

        self.bootstrap = bootstrap
        self.tp = KTP(topic, 0)
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
            auto_offset_reset="earliest", metadata_max_age_ms=2000, request_timeout_ms=30000)
        self.consumer.assign([self.tp])
        self.consumer.seek(self.tp, 0)
        self.records: dict[int, int] = {}
        self.position = 0
        self.rewinds = 0
        self.errors: dict[str, int] = {}
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        from kafka.errors import KafkaError

        while not self._stop.is_set():
            try:
                batches = self.consumer.poll(timeout_ms=500, max_records=5000)
            except KafkaError as e:
                name = type(e).__name__
                self.errors[name] = self.errors.get(name, 0) + 1
                time.sleep(0.2)
                continue
            for recs in batches.values():
                for r in recs:
                    if r.offset < self.position:
                        self.rewinds += 1
                    self.records[r.offset] = int(r.value)
                    self.position = r.offset + 1

    def start(self) -> None:
        self.thread.start()

    def high_watermark(self) -> int:
        from kafka import KafkaConsumer

        c = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None)
        try:
            return int(c.end_offsets([self.tp])[self.tp])
        finally:
            c.close()

    def stop(self, timeout_s: float = 300) -> list[tuple[int, int]]:
        """Once it has read up to the high watermark: (offset, value) in offset order."""
        high = self.high_watermark()
        try:
            wait_until(lambda: self.position >= high, timeout_s,
                       f"the kafka-python consumer to read up to offset {high}")
        finally:
            self._stop.set()
            self.thread.join()
            self.consumer.close()
        return sorted(self.records.items())


def check(prod: SequenceProducer, log: list[tuple[int, int]], figures: Figures) -> None:
    figures.produced = len(prod.sent_at)
    figures.acked = len(prod.acked)
    figures.failed = len(prod.failed)
    for name in prod.failed.values():
        figures.errors[name] = figures.errors.get(name, 0) + 1
    figures.in_log = len(log)
    where: dict[int, int] = {}
    last = -1
    for offset, value in log:
        if value in where:
            figures.duplicates.append(value)
        where[value] = offset
        if value <= last:
            figures.reordered += 1
        last = max(last, value)
    for value, offset in prod.acked.items():
        if value not in where:
            figures.lost.append(value)
        elif offset is None or offset < 0:
            figures.no_offset += 1  # nothing to compare: it is there
        elif where[value] != offset:
            figures.wrong_offset += 1


class Cluster:
    """What the checker needs of a cluster: a bootstrap list, and kill -9 / start by node id."""

    bootstrap: str
    admin_bootstrap: str  # where CreateTopics goes
    broker_ids: list[int]  # the nodes that may be killed (not the controller)

    def kill(self, node_id: int) -> None: ...

    def stop(self, node_id: int) -> None: ...

    def start(self, node_id: int) -> None: ...


def kill_leader(cluster: Cluster, prod: SequenceProducer, topic: str, figures: Figures,
                rejoin_timeout_s: float, clean: bool) -> None:
    """One kill (``clean``: a SIGTERM): the leader dies, the producer's first acknowledgement
    after it is timed, the node starts again and the next kill waits for a full ISR."""
    boot = cluster.bootstrap
    state = partition_state(boot, topic)
    if state is None or state[0] < 0:
        wait_until(lambda: (s := partition_state(boot, topic)) is not None and s[0] >= 0,
                   rejoin_timeout_s, "a leader")
        state = partition_state(boot, topic)
    assert state is not None
    leader = state[0]
    killed_at = time.monotonic()
    if clean:
        cluster.stop(leader)
    else:
        cluster.kill(leader)
    figures.kills += 1
    wait_until(lambda t=killed_at: prod.first_ack_after(t) is not None, rejoin_timeout_s,
               "an acknowledgement after the kill")
    first = prod.first_ack_after(killed_at)
    assert first is not None
    figures.recovery_ms.append((first - killed_at) * 1000)
    cluster.start(leader)
    wait_until(lambda: (s := partition_state(boot, topic)) is not None
               and len(s[2]) == len(s[1]), rejoin_timeout_s,
               f"node {leader} back in the ISR")


def run(cluster: Cluster, topic: str, kills: int, interval_s: float = 3.0, rate: float = 500,
        rejoin_timeout_s: float = 120, clean: bool = False, client: str = "confluent",
        log: Callable[[str], None] | None = None) -> Figures:
    """Kill the partition leader ``kills`` times under load (``clean``: stop it with SIGTERM,
    a controlled shutdown, instead of kill -9); returns the figures. ``client``: the producer's
    client family (``CLIENTS``); with kafka-python a kafka-python consumer reads the partition
    all along and its records are checked, otherwise the partition is read back at the end."""
    figures = Figures()
    prod = sequence_producer(client, cluster.bootstrap, topic, rate)
    reader = KafkaPythonReader(cluster.bootstrap, topic) if client == "kafka-python" else None
    prod.start()
    if reader is not None:
        reader.start()
    try:
        wait_until(lambda: bool(prod.acked), 60, "the first acknowledged record")
        for k in range(kills):
            time.sleep(interval_s)
            kill_leader(cluster, prod, topic, figures, rejoin_timeout_s, clean)
            if log is not None:
                log(f"kill {k + 1}/{kills}: {figures.recovery_ms[-1]:.0f} ms to the first ack")
    finally:
        prod.stop()
    if reader is not None:
        records = reader.stop()
        figures.consumer_rewinds = reader.rewinds
        figures.consumer_errors = dict(reader.errors)
    else:
        records = read_log(cluster.bootstrap, topic)
    check(prod, records, figures)
    return figures


@contextmanager
def cluster_for(args: argparse.Namespace) -> Iterator[Cluster]:
    """``--kafka``: 3 combined Apache Kafka 4.3.1 nodes; ``--combined``: 3 combined kafkawire
    nodes (bench/clusters.py); default: 1 controller + 3 brokers of kafkawire."""
    if args.kafka or args.combined:
        from bench.clusters import three_nodes

        with three_nodes("kafka" if args.kafka else "kafkawire") as three:
            yield three
        return
    from tests.replication_cluster import replication_cluster

    with replication_cluster(brokers=3) as cluster:
        yield cluster


def add_cluster_args(ap: argparse.ArgumentParser) -> None:
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--kafka", action="store_true",
                       help="3 combined Apache Kafka 4.3.1 nodes (bench/clusters.py)")
    where.add_argument("--combined", action="store_true",
                       help="3 combined kafkawire nodes, the shape of --kafka")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=100)
    ap.add_argument("--interval", type=float, default=3.0, help="seconds between kills")
    ap.add_argument("--rate", type=float, default=500, help="records per second at most")
    ap.add_argument("--client", choices=CLIENTS, default="confluent",
                    help="the producer's (and with kafka-python the consumer's) client")
    ap.add_argument("--clean", action="store_true",
                    help="stop leaders with SIGTERM (controlled shutdown) instead of kill -9")
    add_cluster_args(ap)
    args = ap.parse_args()
    with cluster_for(args) as cluster:
        create_topic(cluster.admin_bootstrap, "failover", cluster.broker_ids)
        started = time.monotonic()
        figures = run(cluster, "failover", args.kills, args.interval, args.rate,
                      clean=args.clean, client=args.client,
                      log=lambda line: print(line, flush=True))
        took = time.monotonic() - started
    print(f"{'Apache Kafka 4.3.1' if args.kafka else 'kafkawire'}, client {args.client}")
    print(figures.markdown())
    print(f"\n{took:.0f} s; failed deliveries by error: {figures.errors or 'none'}; "
          f"acknowledged without an offset (implicitly): {figures.no_offset}; at another "
          f"offset: {figures.wrong_offset}")
    if args.client == "kafka-python":
        print(f"consumer: {figures.consumer_rewinds} records returned again, "
              f"poll errors {figures.consumer_errors or 'none'}")
    if figures.lost:
        print(f"LOST (first 20): {figures.lost[:20]}")
    if figures.duplicates:
        print(f"DUPLICATES (first 20): {figures.duplicates[:20]}")
    return 0 if figures.ok else 1


if __name__ == "__main__":
    sys.exit(main())
