"""``kafkawire cluster chaos --duration 10m``: a stock-client workload while nodes are killed,
paused, stopped and partitioned, then the history check (``kafkawire.tools.chaos_check``), a summary
and a PNG plot of throughput and latency over time with the faults marked.

Workload (confluent-kafka / librdkafka, as users run it):

- an idempotent producer at ``acks=all`` sending keys ``p1-<seq>`` round-robin over the
  topic's partitions at ``rate`` records per second;
- a transactional producer committing two transactions out of three and aborting the third
  (keys ``t1-<txn>-<i>``), so that read_committed has aborted records to skip;
- a ``read_committed`` consumer assigned every partition from the start.

Faults, one at a time, every ``interval_s`` seconds for ``hold_s`` seconds, on a node chosen
with a seeded random generator (half of the time the leader of partition 0): ``kill`` (kill -9,
then start), ``stop`` (SIGTERM, then start), ``pause`` (SIGSTOP, then SIGCONT) and, for a
cluster in network namespaces, ``partition`` (then heal). Each fault is repaired (the node
serving again) before the next one starts, so at most one node is ever down: a minority of a
3-voter quorum.

After the run the producers stop, the consumer reads until it has everything acknowledged (or
``drain_s`` passes), and the check runs. Files in ``out``: ``history.json`` (every send, read
and fault), ``summary.json``, ``summary.txt`` and ``chaos.png`` (with matplotlib, the optional
extra ``chaos``; without it the plot is skipped and the summary says so).
"""

from __future__ import annotations

import json
import random
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kafkawire.tools.chaos_check import Fault, Read, Report, Send, check, summary_text
from kafkawire.tools.cluster import ClusterError, LocalCluster

TOPIC = "chaos"
#: fault kinds and the repair each one ends with
FAULTS = ("kill", "stop", "pause", "partition")


class Workload:
    """The producers and the consumer, each on its own thread, recording into lists."""

    def __init__(self, bootstrap: str, partitions: int, rate: float, t0: float) -> None:
        self.bootstrap = bootstrap
        self.partitions = partitions
        self.rate = rate
        self.t0 = t0
        self.sends: list[Send] = []
        self.reads: list[Read] = []
        self.stop_producing = threading.Event()
        self.stop_consuming = threading.Event()
        self.errors: list[str] = []
        self._lock = threading.Lock()

    def now(self) -> float:
        return time.monotonic() - self.t0

    def _client_conf(self) -> dict[str, Any]:
        # log_level 2: connection errors are what a fault is; the check judges the history
        return {"bootstrap.servers": self.bootstrap, "socket.timeout.ms": 10000,
                "reconnect.backoff.max.ms": 1000, "log_level": 2}

    def produce_idempotent(self) -> None:
        from confluent_kafka import Producer

        p = Producer({**self._client_conf(), "acks": "all", "enable.idempotence": True,
                      "linger.ms": 5, "message.timeout.ms": 120000,
                      "request.timeout.ms": 15000})
        seq = 0
        period = 1.0 / self.rate
        next_at = time.monotonic()
        while not self.stop_producing.is_set():
            send = Send(key=f"p1-{seq}", partition=seq % self.partitions, sent_s=self.now())
            self.sends.append(send)

            def done(err: Any, msg: Any, send: Send = send) -> None:
                if err is None:
                    send.acked_s, send.offset = self.now(), msg.offset()
                else:
                    send.error = str(err)

            try:
                p.produce(TOPIC, key=send.key.encode(), value=send.key.encode(),
                          partition=send.partition, on_delivery=done)
            except BufferError:
                send.error = "local queue full"
            seq += 1
            p.poll(0)
            next_at += period
            delay = next_at - time.monotonic()
            if delay > 0:
                p.poll(delay)
        p.flush(150)

    def produce_transactions(self, per_txn: int = 5) -> None:
        from confluent_kafka import KafkaException, Producer

        p = Producer({**self._client_conf(), "transactional.id": f"chaos-{int(self.t0)}",
                      "transaction.timeout.ms": 60000, "message.timeout.ms": 60000})
        while True:  # a coordinator may be unavailable for a while (retriable: try again)
            try:
                p.init_transactions(30)
                break
            except KafkaException as e:
                err = e.args[0] if e.args else None
                if self.stop_producing.is_set() or err is None or not err.retriable():
                    self.errors.append(f"transactional producer: init_transactions: {e}")
                    return
        txn = 0
        while not self.stop_producing.is_set():
            batch = [Send(key=f"t1-{txn}-{i}", partition=(txn + i) % self.partitions,
                          sent_s=self.now(), txn="unknown") for i in range(per_txn)]
            self.sends.extend(batch)
            abort = txn % 3 == 2
            try:
                p.begin_transaction()
                for s in batch:
                    p.produce(TOPIC, key=s.key.encode(), value=s.key.encode(),
                              partition=s.partition)
                if abort:
                    p.abort_transaction(60)
                else:
                    p.commit_transaction(60)
                outcome = "aborted" if abort else "committed"
            except KafkaException as e:
                outcome = "aborted" if abort else "unknown"
                if not self._recover(p, e):
                    for s in batch:
                        s.txn = outcome
                    return
            for s in batch:
                s.txn, s.acked_s = outcome, self.now()
            txn += 1
            time.sleep(0.2)

    def _recover(self, p: Any, e: Any) -> bool:
        """After a failed transaction: abort it if the client allows, else give up."""
        err = e.args[0] if e.args else None
        if err is not None and err.txn_requires_abort():
            try:
                p.abort_transaction(60)
                return True
            except Exception as again:  # noqa: BLE001 (any client error ends this producer)
                self.errors.append(f"transactional producer: abort failed: {again}")
                return False
        if err is not None and err.retriable():
            return True
        self.errors.append(f"transactional producer stopped: {e}")
        return False

    def consume(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        c = Consumer({**self._client_conf(), "group.id": f"chaos-{int(self.t0)}",
                      "isolation.level": "read_committed", "enable.auto.commit": False,
                      "auto.offset.reset": "earliest"})
        c.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(self.partitions)])
        try:
            while not self.stop_consuming.is_set():
                for m in c.consume(500, 0.5):
                    if m.error() is None:
                        self.reads.append(Read(m.partition() or 0, m.offset() or 0,
                                               (m.key() or b"").decode(), self.now()))
        finally:
            c.close()


class FaultInjector:
    def __init__(self, cluster: LocalCluster, seed: int, interval_s: float, hold_s: float,
                 t0: float) -> None:
        self.cluster = cluster
        self.rng = random.Random(seed)
        self.interval_s = interval_s
        self.hold_s = hold_s
        self.t0 = t0
        self.faults: list[Fault] = []
        self.stop = threading.Event()
        self.errors: list[str] = []

    def kinds(self) -> list[str]:
        kinds = ["kill", "stop", "pause"]
        if self.cluster.state.network == "netns":
            kinds.append("partition")
        return kinds

    def target(self) -> int:
        nodes = [n.node_id for n in self.cluster.state.nodes]
        if self.rng.random() < 0.5:
            try:
                return self.cluster.leader_of(TOPIC, 0, timeout_s=5.0)
            except ClusterError:
                pass
        return self.rng.choice(nodes)

    def run(self) -> None:
        while not self.stop.wait(self.interval_s):
            kind, node = self.rng.choice(self.kinds()), self.target()
            fault = Fault(kind, [node], time.monotonic() - self.t0)
            self.faults.append(fault)
            try:
                self.inject(kind, node)
                self.stop.wait(self.hold_s)
            except ClusterError as e:
                self.errors.append(f"{kind} {node}: {e}")
            finally:
                try:
                    self.repair(kind, node)
                except ClusterError as e:
                    self.errors.append(f"repair of {kind} {node}: {e}")
                fault.end_s = time.monotonic() - self.t0

    def inject(self, kind: str, node: int) -> None:
        c = self.cluster
        if kind == "kill":
            c.kill(node)
        elif kind == "stop":
            c.stop(node)
        elif kind == "pause":
            c.pause(node)
        else:
            c.partition([node])

    def repair(self, kind: str, node: int) -> None:
        c = self.cluster
        if kind in ("kill", "stop"):
            c.start_node(node)
            c.wait_ready([node], timeout_s=120)
        elif kind == "pause":
            if c.node_state(node) == "paused":
                c.resume(node)
        else:
            c.heal()


def create_topic(cluster: LocalCluster, partitions: int, rf: int) -> None:
    """The workload's topic (min.insync.replicas 2 from RF 3 on, else 1), through the cluster's
    bootstrap: any broker forwards CreateTopics to the active controller."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    config = {"min.insync.replicas": "2" if rf >= 3 else "1"}
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    fut = admin.create_topics([NewTopic(TOPIC, partitions, rf, config=config)])[TOPIC]
    try:
        fut.result(60)
    except Exception as e:  # noqa: BLE001 (the client's KafkaException)
        if "TOPIC_ALREADY_EXISTS" in str(e) or "already exists" in str(e):
            return
        raise ClusterError(f"cannot create topic {TOPIC}: {e}") from e


def run(cluster: LocalCluster, duration_s: float, out: Path, seed: int = 1,
        interval_s: float = 10.0, hold_s: float = 5.0, rate: float = 200.0,
        partitions: int = 3, drain_s: float = 120.0, gap_s: float = 1.0,
        replication_factor: int | None = None) -> Report:
    """One chaos run against a running cluster (see the module docstring); the topic's
    replication factor is min(3, brokers) unless given."""
    out.mkdir(parents=True, exist_ok=True)
    rf = replication_factor or min(3, len(cluster.state.brokers))
    create_topic(cluster, partitions, rf)
    t0 = time.monotonic()
    wl = Workload(cluster.bootstrap, partitions, rate, t0)
    fi = FaultInjector(cluster, seed, interval_s, hold_s, t0)
    threads = {name: threading.Thread(target=fn, name=f"chaos-{name}", daemon=True)
               for name, fn in (("consumer", wl.consume), ("producer", wl.produce_idempotent),
                                ("txn", wl.produce_transactions), ("faults", fi.run))}
    for t in threads.values():
        t.start()
    time.sleep(duration_s)
    fi.stop.set()
    threads["faults"].join()
    wl.stop_producing.set()
    threads["producer"].join(180)
    threads["txn"].join(180)
    acked = {s.key for s in wl.sends if s.acknowledged}
    deadline = time.monotonic() + drain_s
    while time.monotonic() < deadline and not acked <= {r.key for r in list(wl.reads)}:
        time.sleep(0.5)
    wl.stop_consuming.set()
    threads["consumer"].join(30)
    rep = check(wl.sends, wl.reads, fi.faults, gap_s)
    setup = (f"cluster: {len(cluster.state.nodes)} nodes ({cluster.state.network}), topic "
             f"{TOPIC}: {partitions} partitions, replication factor {rf}, seed {seed}")
    write_outputs(out, rep, wl, fi, duration_s, setup)
    return rep


def write_outputs(out: Path, rep: Report, wl: Workload, fi: FaultInjector, duration_s: float,
                  setup: str) -> None:
    history = {"sends": [asdict(s) for s in wl.sends], "reads": [asdict(r) for r in wl.reads],
               "faults": [asdict(f) for f in fi.faults]}
    (out / "history.json").write_text(json.dumps(history))
    summary = rep.to_dict()
    summary.update(duration_s=duration_s, setup=setup, fault_errors=fi.errors,
                   client_errors=wl.errors)
    text = setup + "\n" + summary_text(rep, duration_s)
    for line in fi.errors + wl.errors:
        text += f"note: {line}\n"
    try:
        from kafkawire.tools.chaos_plot import plot

        plot(out / "chaos.png", wl.sends, fi.faults, rep, duration_s)
        text += f"plot: {out / 'chaos.png'}\n"
    except ImportError:
        text += "plot: skipped (matplotlib is not installed: pip install 'kafkawire[chaos]')\n"
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "summary.txt").write_text(text)
