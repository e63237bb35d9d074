"""Three dedicated controllers and a broker as real processes: kill -9 of the active controller,
five times, while topics are created through the controller listeners. Every acknowledged
CreateTopics survives and a survivor leads each time (election and first-write times are
printed; ``bench/quorum_failover.py`` runs longer and reports p50/p99). Kafka's own
``kafka-metadata-quorum --bootstrap-controller describe --status / --replication`` shows the
real voters, observer, lags and leader."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkawire.tools.cluster import LocalCluster
from kafkawire.tools.testing import describe_quorum_leader
from tests.javatools import JavaTools
from tests.quorum_failover import percentile, run_failover, topics_on
from tests.test_quorum_cluster import describe_quorum, wait_for

ROUNDS = 5


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path_factory.mktemp("failover")) as c:
        c.up(1, 3, defaults=False, timeout_s=180)
        yield c


def test_kill_the_active_controller_repeatedly_while_creating_topics(
        cluster: LocalCluster) -> None:
    result = run_failover(cluster, ROUNDS)
    assert len(result.elect_ms) == ROUNDS and len(result.write_ms) == ROUNDS
    print(f"election ms p50 {percentile(result.elect_ms, 50):.0f} "
          f"p99 {percentile(result.elect_ms, 99):.0f}; first write after the kill ms p50 "
          f"{percentile(result.write_ms, 50):.0f} p99 {percentile(result.write_ms, 99):.0f}; "
          f"{len(result.acknowledged)} acknowledged, other answers {result.errors}")
    assert len(result.acknowledged) >= ROUNDS * 3
    broker = cluster.node(cluster.broker_ids[0]).address
    wanted = set(result.acknowledged)
    wait_for(lambda: wanted <= topics_on(broker), timeout_s=60,
             what="every acknowledged topic on the broker")


def test_kafka_metadata_quorum_tool_shows_the_quorum(cluster: LocalCluster) -> None:
    tools = JavaTools("4.x")
    leader = cluster.quorum_leader()
    out = wait_for(lambda: (o := tools.run(
        "metadata-quorum", "--bootstrap-controller", cluster.controller_bootstrap,
        "describe", "--status").output) and "CurrentObservers:       [{\"id\": 4" in o and o,
        timeout_s=120, what="describe --status with the broker as observer")
    assert re.search(rf"LeaderId:\s+{leader}\b", out), out
    assert f"ClusterId:              {cluster.cluster_id}" in out, out
    for v in cluster.controller_ids:
        assert f'{{"id": {v}, ' in out.split("CurrentVoters:", 1)[1].split("\n", 1)[0], out
    rep = tools.run("metadata-quorum", "--bootstrap-controller", cluster.controller_bootstrap,
                    "describe", "--replication").output
    rows = [ln.split() for ln in rep.splitlines() if re.match(r"^\d+\s", ln)]
    status = {int(r[0]): r[-1] for r in rows}
    assert status.get(leader) == "Leader", rep
    assert {status.get(v) for v in cluster.controller_ids if v != leader} == {"Follower"}, rep
    assert status.get(4) == "Observer", rep


def test_sigterm_of_the_leader_hands_over_by_end_quorum_epoch(cluster: LocalCluster) -> None:
    leader = cluster.quorum_leader()
    _l, epoch = describe_quorum_leader("127.0.0.1", cluster.controller_ports[leader])
    survivors = [i for i in cluster.controller_ids if i != leader]
    t0 = time.monotonic()
    assert cluster.stop(leader) == 0
    new = wait_for(lambda: next((r[0] for i in survivors if (r := describe_quorum_leader(
        "127.0.0.1", cluster.controller_ports[i]))[0] in survivors and r[1] > epoch), None),
        timeout_s=60, what="a new leader")
    print(f"leader {leader} stopped: {new} leads {(time.monotonic() - t0) * 1000:.0f} ms after "
          "the SIGTERM")
    assert "resigned the leadership of epoch" in cluster.log_path(leader).read_text()
    cluster.start_node(leader, timeout_s=120)


def test_five_controllers_keep_going_with_two_killed(tmp_path: Path) -> None:
    """Five voters (majority three): the active controller and one more killed, a survivor
    leads and commits; the two come back and catch up."""
    with LocalCluster(tmp_path) as c:
        c.up(1, 5, defaults=False, timeout_s=180)
        result = run_failover(c, 1)
        assert len(result.elect_ms) == 1
        leader = c.quorum_leader()
        victim = next(i for i in c.controller_ids if i != leader)
        c.kill(victim)
        more = run_failover(c, 1)
        broker = c.node(c.broker_ids[0]).address
        wanted = set(result.acknowledged) | set(more.acknowledged)
        wait_for(lambda: wanted <= topics_on(broker), what="every acknowledged topic")
        c.start_node(victim, timeout_s=120)
        ctrl = f"127.0.0.1:{c.controller_ports[c.quorum_leader()]}"
        wait_for(lambda: (p := describe_quorum(ctrl)).error_code == 0 and len(
            p.current_voters) == 5 and all(v.log_end_offset >= p.high_watermark
                                           for v in p.current_voters),
            timeout_s=120, what="all five voters caught up")
