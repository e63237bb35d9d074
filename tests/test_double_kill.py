"""Issue 27, defect 4: after kill -9 of two of three brokers, the restarted ones are back in
every ISR within seconds (Kafka 4.3.1: 0-2.2 s after both serve, 8 of 8 double kills on three
combined nodes; ``make double-kill`` runs 20 such trials on kafkawire, bench/double_kill.py).

What went wrong, forced here in a fixed order (one dedicated controller, brokers 2, 3, 4, so
that the controller stays up): broker 2, leader of the partition, is killed, then broker 3.
Broker 3 starts again at once, catches up on the metadata, and cannot register while the
session of its previous incarnation lasts (DUPLICATE_BROKER_REGISTRATION, as in Kafka). Broker
2's session ends first: it is fenced and the partition goes to the next replica of the ISR,
broker 3's previous incarnation, which still looks alive. The restarted broker 3 applies
that image and leads for a moment, its leader epoch assigned at its log end; then its own old
session ends and the partition moves on to broker 4. As a follower broker 3 fetched with
that epoch, which broker 4 never had: every answer was a diverging epoch ending at broker 3's
log end, nothing was cut, and broker 3 stayed out of the ISR until its next restart (in
``make double-kill`` the same came from the other restarted node's registration). The epoch
entries at the log end are dropped now, as Kafka's ``truncateTo`` does
(kafkawire/replica_fetcher.py).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from bench.double_kill import cluster_view, short_isrs
from kafkawire.cluster import LocalCluster

pytestmark = pytest.mark.slow

TOPIC = "dk"
#: broker 2 leads partition 0 with broker 3 next in line
ASSIGNMENT = [[2, 3, 4], [3, 4, 2], [4, 2, 3]]
SESSION_MS = 20_000


def short_anywhere(c: LocalCluster, nodes: list[int]) -> dict[tuple[str, int], Any] | None:
    """The topic's partitions whose ISR is short in any named broker's Metadata (None while
    one of them does not answer with every partition)."""
    out: dict[tuple[str, int], Any] = {}
    for n in nodes:
        _brokers, parts = cluster_view([c.node(n).address])
        mine = {tp: s for tp, s in parts.items() if tp[0] == TOPIC}
        if len(mine) != len(ASSIGNMENT):
            return None
        out.update(short_isrs(mine))
    return out


def leader_of_0(c: LocalCluster) -> int:
    parts = cluster_view([c.node(4).address])[1]
    return parts[(TOPIC, 0)][0] if (TOPIC, 0) in parts else -2


def wait_for(cond: Any, timeout_s: float, what: str, state: Any = None) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}"
                                 + (f": {state()}" if state is not None else ""))
        time.sleep(0.2)


def test_a_broker_led_while_starting_rejoins_the_isr(tmp_path: Path) -> None:
    c = LocalCluster(tmp_path / "cluster")
    try:
        c.up(3, controllers=1, overrides={
            "broker.session.timeout.ms": str(SESSION_MS), "broker.heartbeat.interval.ms": "500",
            "auto.leader.rebalance.enable": "false"}, timeout_s=240)
        brokers = [2, 3, 4]
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        admin.create_topics([NewTopic(TOPIC, len(ASSIGNMENT), replica_assignment=ASSIGNMENT,
                                      config={"min.insync.replicas": "2"})])[TOPIC].result(120)
        p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all",
                      "enable.idempotence": True, "message.timeout.ms": 120000})
        for i in range(300):
            p.produce(TOPIC, b"%d" % i, partition=i % len(ASSIGNMENT))
        assert p.flush(150) == 0
        wait_for(lambda: short_anywhere(c, brokers) == {}, 120, "full ISRs")
        assert leader_of_0(c) == 2

        c.kill(2)
        time.sleep(2)
        c.kill(3)
        c.start_node(3)  # refused registration until its old session ends
        # broker 2's session ends first: partition 0 goes to broker 3's old incarnation,
        # which the restarted broker 3 follows in its metadata (it is caught up by then);
        # then broker 3's old session ends and broker 4 leads
        wait_for(lambda: leader_of_0(c) == 4, SESSION_MS / 1000 + 90, "broker 4 to lead")
        moves = [line for line in c.log_path(1).read_text().splitlines()
                 if f"leader of {TOPIC}-0:" in line]
        assert any(line.endswith("2 -> 3") for line in moves), moves
        c.start_node(2)
        c.wait_ready([2, 3], 180)
        served = time.monotonic()
        wait_for(lambda: short_anywhere(c, brokers) == {}, 60, "brokers 2 and 3 in every ISR",
                 lambda: short_anywhere(c, brokers))
        print(f"every ISR full {time.monotonic() - served:.1f} s after brokers 2 and 3 served")
    finally:
        c.down()
