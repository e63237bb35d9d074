"""Consume-transform-produce with exactly-once under partition leader kills (issue 13).

    .venv/bin/python bench/eos_failover.py --records 20000 --kill-every 8          # kafkawire
    .venv/bin/python bench/eos_failover.py --records 20000 --kill-every 8 --kafka  # Kafka 4.3.1
    .venv/bin/python bench/eos_failover.py --records 20000 --kill-every 3 --kills 100

tests/eos_chain.py's chain (``src`` -> ``s1`` -> ``s2`` -> ``s3``, three stages of
transactional members: librdkafka and Kafka's Java 4.x clients taking turns, each poll one
transaction with ``send_offsets_to_transaction``, 10 % aborted on purpose, members joining and
leaving) on a 3-node cluster (bench/clusters.py: 3 combined nodes, RF=3,
``min.insync.replicas=2``, ``__transaction_state`` and ``__consumer_offsets`` with RF=3).
Meanwhile, every ``--kill-every`` seconds, the leader of a random partition of the chain's
topics is killed with SIGKILL, started again once another replica leads, and the next kill
waits until every ISR is full again (a kill may hit the transaction or group coordinator of
some member). The chain's own check then reads every topic at read_committed: each partition
holds exactly the source partition's values, in order (0 lost, 0 duplicated, 0 aborted records
returned). With ``--kills N`` the run lasts until N leaders were killed: another ``--records``
source records are written whenever the chain's last stage is half-way through the previous
ones, as long as kills are missing.
"""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import KafkaException  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402

from bench.clusters import KafkaCluster, KafkawireCluster, three_nodes  # noqa: E402
from bench.failover import wait_until  # noqa: E402
from tests.eos_chain import run_chain  # noqa: E402


def leaders(bootstrap: str, prefix: str = "") -> dict[tuple[str, int], tuple[int, int, int]]:
    """(topic, partition) -> (leader, replicas, in-sync) of the topics named ``prefix...``."""
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return {(t.topic, p.id): (p.leader, len(p.replicas), len(p.isrs))
            for t in md.topics.values() if t.topic.startswith(prefix)
            for p in t.partitions.values()}


class Killer(threading.Thread):
    """Kills a chain partition's leader every ``every_s`` seconds until ``halt`` is set."""

    def __init__(self, cluster: KafkaCluster | KafkawireCluster, every_s: float,
                 target: int | None = None, stop_at: float | None = None) -> None:
        super().__init__(daemon=True)
        self.cluster, self.every_s, self.target = cluster, every_s, target
        self.stop_at = stop_at  # time.monotonic() after which no kill starts
        self.halt = threading.Event()
        self.kills = 0
        self.problems: list[str] = []

    def run(self) -> None:
        while not self.halt.wait(self.every_s):
            if not self.wants_more():
                return
            try:
                self.kill_one(self.cluster.bootstrap)
            except (KafkaException, TimeoutError, RuntimeError) as e:
                self.problems.append(f"kill {self.kills}: {e!r}")
                for node in self.cluster.broker_ids:  # whatever happened, all nodes up again
                    if self.cluster.pid(node) is None:
                        self.cluster.start(node)

    def wants_more(self) -> bool:
        return (self.target is None or self.kills < self.target) and (
            self.stop_at is None or time.monotonic() < self.stop_at)

    def kill_one(self, boot: str) -> None:
        chain = {k: v for k, v in leaders(boot, "chain-").items() if v[0] >= 0}
        if not chain:
            return
        (topic, part), (dead, _r, _i) = random.choice(sorted(chain.items()))
        self.cluster.kill(dead)
        self.kills += 1
        wait_until(lambda: leaders(boot, topic).get((topic, part), (-1, 0, 0))[0]
                   not in (-1, dead), 120, f"a new leader of {topic}-{part}")
        self.cluster.start(dead)
        wait_until(lambda: all(i == r for _l, r, i in leaders(boot).values()), 180,
                   f"node {dead} back in every ISR")
        print(f"kill {self.kills}: node {dead} (leader of {topic}-{part})", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--kill-every", type=float, default=8.0, help="seconds between kills")
    ap.add_argument("--churn-s", type=float, default=6.0, help="a member joins or leaves every N s")
    ap.add_argument("--kills", type=int,
                    help="kill this many leaders: --records more source records are written "
                         "each time the chain is half-way through, until the kills are done")
    ap.add_argument("--max-minutes", type=float,
                    help="no kill starts after this long (the chain then finishes and is checked)")
    ap.add_argument("--kafka", action="store_true", help="3 combined Apache Kafka 4.3.1 nodes")
    ap.add_argument("--keep", action="store_true",
                    help="keep the nodes' directories and the members' logs (printed at the "
                         "end), for a run whose check fails")
    args = ap.parse_args()
    stop_at = time.monotonic() + args.max_minutes * 60 if args.max_minutes else None
    system = "kafka" if args.kafka else "kafkawire"
    with three_nodes(system, keep=args.keep) as cluster:
        logdir = cluster.workdir / "members" if args.keep else None
        killer = Killer(cluster, args.kill_every, args.kills, stop_at)
        killer.start()

        def stop_killing() -> None:
            killer.halt.set()
            killer.join(600)
        try:
            res = run_chain(cluster.bootstrap, args.records, churn_s=args.churn_s,
                            before_check=stop_killing, replication=3,
                            more=None if args.kills is None else killer.wants_more,
                            logdir=logdir)
        finally:
            stop_killing()
    # a member that stopped on a fatal client error (e.g. fenced after the coordinator aborted
    # its transaction at transaction.timeout.ms while a leader was down) is the client's
    # documented behaviour, not a broker fault: reported, but the verdict is on the data
    data = [p for p in res.problems if "members exited" not in p]
    exits = [p for p in res.problems if "members exited" in p]
    print(f"{system}: leader kills={killer.kills} records={res.records} "
          f"seconds={res.seconds:.0f} joins={res.joins} leaves={res.leaves} "
          f"read_committed={res.counts} lost/duplicated/aborted: "
          f"{'none' if not data else data[:5]}; stages with members that exited on a client "
          f"error: {len(exits)}", flush=True)
    for p in exits:
        print(f"member exit: {p[:600]}")
    for p in killer.problems:
        print(f"killer: {p}")
    if args.keep:
        print(f"kept: the nodes and the members' logs in {cluster.workdir}")
    return 0 if not data else 1


if __name__ == "__main__":
    sys.exit(main())
