"""A replica cut off by a network partition (network namespaces, ``kafkawire cluster
--netns``; root only, skipped otherwise): three combined nodes, one partition with
replication factor 3 and min.insync.replicas 2, a stock client (librdkafka).

1. A follower is isolated: it leaves the ISR, acks=all produce continues with two replicas;
   after the heal it catches up, rejoins the ISR, and its segments equal the leader's.
2. A divergent tail: both followers (a majority of the quorum's voters) are cut off from the
   leader, which still takes acks=1 records from the host that they never see. Their side
   fences the old leader and elects one of them (from the ISR). After the heal, acks=all
   produce goes on at the new leader, and the old leader, now a follower whose last epoch
   diverges from the new leader's log, truncates the acks=1 tail (Kafka's semantics for
   acks=1), catches up, rejoins the ISR, and holds the new leader's bytes exactly.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kafkawire.tools.cluster import LocalCluster

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
TOPIC = "isolated"
OVERRIDES = {"replica.lag.time.max.ms": "10000"}


def isr(c: LocalCluster, exclude: int | None = None) -> tuple[int, list[int]] | None:
    """(leader, ISR) of TOPIC-0 asked of the reachable brokers, None when unknown."""
    from confluent_kafka.admin import AdminClient

    boot = ",".join(n.address for n in c.state.brokers if n.node_id != exclude)
    admin = AdminClient({"bootstrap.servers": boot})
    try:
        md = admin.list_topics(TOPIC, timeout=5)
    except Exception:  # no broker reachable right now
        return None
    p = md.topics[TOPIC].partitions.get(0)
    return None if p is None else (p.leader, sorted(p.isrs))


def wait_for(cond: Any, timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.5)
    raise TimeoutError(f"{what} within {timeout_s}s")


def produce(boot: str, prefix: str, n: int, acks: str) -> list[int]:
    """The offsets acknowledged."""
    from confluent_kafka import Producer

    acked: list[int] = []
    p = Producer({"bootstrap.servers": boot, "acks": acks, "linger.ms": 5,
                  "message.timeout.ms": 60000})
    for i in range(n):
        p.produce(TOPIC, b"%s-%d" % (prefix.encode(), i), partition=0,
                  on_delivery=lambda e, m: acked.append(m.offset()) if e is None else None)
        p.poll(0)
    assert p.flush(90) == 0
    return acked


def leader_seen_from(c: LocalCluster, node: int) -> int:
    """TOPIC-0's leader as ``node`` answers Metadata, asked from inside its own network
    namespace (the host cannot reach a partitioned node)."""
    spec = c.state.node(node)
    code = ("from kafkawire.tools.cluster import partition_leaders; "
            f"print(partition_leaders('{spec.address}', '{TOPIC}', timeout_s=3).get(0, -1))")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run(["ip", "netns", "exec", spec.netns, sys.executable, "-c", code],
                       capture_output=True, text=True, timeout=60, env=env)
    try:
        return int(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return -1


def segments(c: LocalCluster, node: int) -> bytes:
    dirs = list(c.node_dir(node).rglob(f"{TOPIC}-0"))
    assert len(dirs) == 1, dirs
    return b"".join(p.read_bytes() for p in sorted(dirs[0].glob("*.log")))


def wait_in_sync(c: LocalCluster, node: int, leader: int) -> None:
    wait_for(lambda: (s := isr(c)) is not None and node in s[1], 120, f"{node} back in the ISR")
    wait_for(lambda: segments(c, node) == segments(c, leader), 60,
             f"{node}'s segments to equal leader {leader}'s")


@pytest.mark.kafkawire_cluster(nodes=3, netns=True, overrides=OVERRIDES)
def test_isolated_replicas_leave_the_isr_and_come_back_identical(
        kafkawire_cluster: LocalCluster) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    c = kafkawire_cluster
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(60)
    leader, members = wait_for(lambda: (s := isr(c)) is not None and len(s[1]) == 3 and s,
                               60, "three replicas in sync")
    assert len(produce(c.bootstrap, "first", 200, "all")) == 200
    # 1. a follower cut off
    follower = next(n for n in members if n != leader)
    c.partition([follower])
    wait_for(lambda: (s := isr(c, follower)) is not None and follower not in s[1], 90,
             f"{follower} to leave the ISR")
    others = ",".join(n.address for n in c.state.brokers if n.node_id != follower)
    assert len(produce(others, "two-of-three", 300, "all")) == 300
    c.heal()
    wait_in_sync(c, follower, leader)
    # 2. the followers (a majority of the voters) are cut off from the leader, which still
    # takes acks=1 records from the host: a tail nobody else will ever have
    followers = [n for n in members if n != leader]
    c.partition(followers)
    tail = produce(c.state.node(leader).address, "tail", 50, "1")
    assert len(tail) == 50
    new_leader = wait_for(lambda: (n := leader_seen_from(c, followers[0])) in followers and n,
                          120, "the cut-off majority to fence the old leader and elect another")
    c.heal()
    wait_for(lambda: (s := isr(c)) is not None and s[0] == new_leader, 60,
             "every broker to see the new leader")
    after = produce(c.bootstrap, "after", 300, "all")
    assert len(after) == 300
    assert min(after) <= max(tail), "the new leader's log does not overlap the old tail"
    wait_in_sync(c, leader, new_leader)
    assert b"tail-" not in segments(c, leader)  # truncated, as Kafka does with acks=1 data
    log = (c.node_dir(leader) / "node.log").read_text(errors="replace")
    # the truncation itself (replica_fetcher): by the diverging epoch of the leader's answer
    assert f"diverges from leader {new_leader}" in log, log[-3000:]
