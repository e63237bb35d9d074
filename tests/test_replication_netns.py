"""A replica cut off by a network partition (network namespaces, ``kafkawire cluster
--netns``; root only, skipped otherwise): three combined nodes, one partition with
replication factor 3 and min.insync.replicas 2, a stock client (librdkafka).

1. A follower is isolated: it leaves the ISR, acks=all produce continues with two replicas;
   after the heal it catches up, rejoins the ISR, and its segments equal the leader's.
2. A divergent tail: the followers are frozen for a moment while the leader takes acks=1
   records they never fetch, then the leader is isolated. The controller fences it and elects
   a follower (from the ISR); acks=all produce continues on it. After the heal the old leader
   is a follower whose last epoch diverges from the new leader's log: it truncates the acks=1
   tail (Kafka's semantics for acks=1), catches up, rejoins the ISR, and holds the new
   leader's bytes exactly.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from kafkawire.cluster import LocalCluster

pytestmark = pytest.mark.slow

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
    # 2. the leader holds a tail nobody fetched, then is cut off
    frozen = [n for n in members if n != leader]
    for n in frozen:
        c.pause(n)
    try:
        tail = produce(c.state.node(leader).address, "tail", 50, "1")
    finally:
        c.partition([leader])
        for n in frozen:
            c.resume(n)
    assert len(tail) == 50
    new_leader = wait_for(lambda: (s := isr(c, leader)) is not None and s[0] in frozen
                          and s[0], 120, "a new leader from the ISR")
    rest = ",".join(c.state.node(n).address for n in frozen)
    after = produce(rest, "after", 300, "all")
    assert len(after) == 300
    assert min(after) <= max(tail), "the new leader's log does not overlap the old tail"
    c.heal()
    wait_in_sync(c, leader, new_leader)
    log = (c.node_dir(leader) / "node.log").read_text(errors="replace")
    assert f"diverges from leader {new_leader}" in log or "truncated" in log, log[-3000:]
