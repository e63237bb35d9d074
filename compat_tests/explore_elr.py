"""What Apache Kafka 4.3.1 does with KIP-966 ELR in three corners (docs/FINDINGS.md section F):

A. a reassignment that completes while a replica is fenced and in ELR (min ISR 3 on RF 3,
   node K killed, replicas [L, C, K] -> [L, C]);
B. the periodic unclean election (``unclean.leader.election.interval.ms``) of a leaderless
   partition whose only live replica is outside ISR and ELR, once its topic gets
   ``unclean.leader.election.enable=true`` (RF 1 on K, K killed, reassigned to [L]);
C. a follower killed with SIGKILL and restarted at once: (C1) the active controller, whose
   successor has no session for it (it registers at once), (C2) a plain broker whose session is
   still valid (DUPLICATE_BROKER_REGISTRATION until it expires). The ISR, leader and high
   watermark of its partitions over time, and the controllers' log lines.

``python -m compat_tests.explore_elr [--system kafka|kafkawire]`` prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from compat_tests.kafka_cluster import SCENARIO_PROPS, KafkaCluster
from compat_tests.scenarios import connect, produce_partition, simple_records
from compat_tests.scenarios_cluster import creatable, create_and_wait, dtp, fetch_at
from compat_tests.wire import Connection, build_batch
from protocol._generated.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest as APR,
)
from protocol._generated.describe_quorum_request import DescribeQuorumRequest as DQ
from protocol._generated.incremental_alter_configs_request import (
    IncrementalAlterConfigsRequest as IAC,
)

INTERVAL_MS = 5000
PROPS = {**SCENARIO_PROPS, "unclean.leader.election.interval.ms": str(INTERVAL_MS)}
T0 = time.monotonic()


def now() -> float:
    return round(time.monotonic() - T0, 2)


def active_controller(address: str) -> int:
    with connect(address) as c:
        r = c.request(DQ(topics=[DQ.TopicData(topic_name="__cluster_metadata", partitions=[
            DQ.PartitionData(partition_index=0)])]), 1)
    return int(r.topics[0].partitions[0].leader_id)


def part(c: Connection, topic: str) -> dict[str, Any]:
    t = dtp(c, [topic])[0]
    p = t["partitions"][0]
    return {k: p[k] for k in ("leader_id", "leader_epoch", "replica_nodes", "isr_nodes",
                              "eligible_leader_replicas", "last_known_elr", "offline_replicas")}


def wait(fn: Callable[[], Any], ok: Callable[[Any], bool], bound: float = 90.0) -> Any:
    deadline = time.monotonic() + bound
    while True:
        try:
            v = fn()
        except (OSError, ConnectionError) as e:
            v = {"error": str(e)}
        if (not isinstance(v, dict) or "error" not in v) and ok(v) or time.monotonic() > deadline:
            return v
        time.sleep(0.1)


def reassign(c: Connection, topic: str, replicas: list[int] | None) -> Any:
    r = c.request(APR(topics=[APR.ReassignableTopic(name=topic, partitions=[
        APR.ReassignablePartition(partition_index=0, replicas=replicas)])]), 0)
    return [r.error_code, r.responses[0].partitions[0].error_code]


def set_unclean(c: Connection, topic: str) -> Any:
    r = c.request(IAC(resources=[IAC.AlterConfigsResource(
        resource_type=2, resource_name=topic, configs=[IAC.AlterableConfig(
            name="unclean.leader.election.enable", config_operation=0, value="true")])]), 1)
    return r.responses[0].error_code


def produce(address: str, topic: str, n: int) -> Any:
    with connect(address) as c:
        return produce_partition(c, topic, build_batch(simple_records(n)), acks=-1)


def timeline(cluster: Any, topic: str, lead: int, seconds: float) -> list[Any]:
    """(t, leader, isr, elr, high watermark, log end offset) each time one of the first four
    changes, over ``seconds``, while one record a 0.5 s goes to ``lead`` with acks=1 (the log
    end offset is the last acks=1 offset + 1)."""
    out: list[Any] = []
    last = None
    leo = -1
    deadline = time.monotonic() + seconds
    next_produce = 0.0
    while time.monotonic() < deadline:
        try:
            if time.monotonic() >= next_produce:
                with connect(cluster.address(lead)) as pc:
                    r = produce_partition(pc, topic, build_batch(simple_records(1)), acks=1)
                if r.get("error_code") == "NONE":
                    leo = int(r["base_offset"]) + 1
                next_produce = time.monotonic() + 0.5
            with connect(cluster.address(lead)) as c:
                p = part(c, topic)
            hw = fetch_at(cluster.address(lead), topic, 0)["high_watermark"]
        except (OSError, ConnectionError, KeyError, IndexError) as e:
            p, hw = {"error": type(e).__name__}, None
        row = (p.get("leader_id"), p.get("isr_nodes"), p.get("eligible_leader_replicas"), hw)
        if row != last:
            out.append([now(), *row, leo])
            last = row
        time.sleep(0.1)
    return out


def grep(path: Path, pattern: str, limit: int = 12) -> list[str]:
    if not path.exists():
        return []
    rx = re.compile(pattern)
    return [ln[:300] for ln in path.read_text(errors="replace").splitlines() if rx.search(ln)][
        -limit:]


def run(cluster: Any, out: dict[str, Any], parts: str) -> None:
    ids = cluster.node_ids
    ctrl = active_controller(cluster.address(ids[0]))
    others = [i for i in ids if i != ctrl]
    lead, k = others[0], others[1]
    out["nodes"] = {"active_controller": ctrl, "leader": lead, "killed_in_a_b": k}
    a = cluster.address
    with connect(a(lead)) as c:
        create_and_wait(c, creatable("elrA", assignments=[[lead, ctrl, k]],
                                     configs={"min.insync.replicas": "3"}), cluster)
        create_and_wait(c, creatable("elrB", assignments=[[k]]), cluster)
        create_and_wait(c, creatable("elrC", assignments=[[lead, k, ctrl]]), cluster)
        if "a" not in parts:
            produce(a(lead), "elrC", 5)
            run_c(cluster, out, lead)
            return
        for t in ("elrA", "elrC"):
            produce(a(lead), t, 5)
        produce(a(k), "elrB", 5)
        out["A0_before"] = part(c, "elrA")
        cluster.kill_node(k)
        out["A1_killed"] = wait(lambda: part(c, "elrA"), lambda p: k not in p["isr_nodes"])
        out["B1_killed"] = wait(lambda: part(c, "elrB"), lambda p: p["leader_id"] == -1)
        out["A2_reassign"] = reassign(c, "elrA", [lead, ctrl])
        out["A3_after"] = wait(lambda: part(c, "elrA"), lambda p: k not in p["replica_nodes"])
        out["B2_reassign"] = reassign(c, "elrB", [lead])
        time.sleep(INTERVAL_MS / 1000 * 2)
        out["B3_after_two_intervals"] = part(c, "elrB")
        t0 = time.monotonic()
        out["B4_set_unclean"] = set_unclean(c, "elrB")
        out["B5_led"] = wait(lambda: part(c, "elrB"), lambda p: p["leader_id"] >= 0)
        out["B5_seconds_after_config"] = round(time.monotonic() - t0, 2)
        out["B6_settled"] = wait(lambda: part(c, "elrB"), lambda p: k not in p["replica_nodes"],
                                 bound=20)
    cluster.start_node(k)
    with connect(a(lead)) as c:
        out["A4_k_back"] = wait(lambda: part(c, "elrA"), lambda p: False, bound=10)
        wait(lambda: part(c, "elrC"), lambda p: len(p["isr_nodes"]) == 3)
        produce(a(lead), "elrC", 5)
    run_c(cluster, out, lead)


def run_c(cluster: Any, out: dict[str, Any], lead: int) -> None:
    ids = cluster.node_ids
    a = cluster.address
    with connect(a(lead)) as c:
        out["C0_before"] = part(c, "elrC")
    for label in ("C1_active_controller", "C2_broker"):
        active = active_controller(a(lead))
        followers = [i for i in ids if i != lead]
        victim = active if label.startswith("C1") and active != lead else next(
            i for i in followers if i != active)
        out[f"{label}_victim"] = victim
        cluster.kill_node(victim)
        out[f"{label}_killed_and_started_at"] = now()
        out[f"{label}_killed_at_wall"] = time.strftime("%H:%M:%S", time.gmtime())
        cluster.node(victim).start(cluster.heap)
        out[f"{label}_timeline"] = timeline(cluster, "elrC", lead, 45)
        cluster.wait_brokers(3, time.monotonic() + 120)
    for n in ids:
        log = cluster.node(n).log_file
        out[f"log_{n}"] = grep(log, r"UncleanShutdown|handleBrokerShutdown|DUPLICATE_BROKER|"
                                    r"Fencing broker|ISR updated|Shrinking ISR|Expanding ISR|"
                                    r"Activated periodic|Truncating|truncat|"
                                    r"Registered broker|RegisterBroker|[Uu]nfenc", limit=60)


class KafkawireTarget:
    """``kafkawire.tools.cluster.LocalCluster`` (3 combined nodes, this checkout) with the calls
    ``run`` makes of a ``KafkaCluster``."""

    heap = ""

    def __init__(self, tmp: Path) -> None:
        from kafkawire.tools.cluster import LocalCluster

        self.cluster = LocalCluster(tmp / "cluster")
        self.cluster.up(3, 0, "loopback", dict(PROPS), timeout_s=180.0)

    @property
    def node_ids(self) -> list[int]:
        return [n.node_id for n in self.cluster.state.brokers]

    def address(self, node_id: int) -> str:
        return str(self.cluster.state.node(node_id).address)

    def kill_node(self, node_id: int) -> None:
        self.cluster.kill(node_id)

    def start_node(self, node_id: int) -> None:
        self.cluster.start_node(node_id, timeout_s=120)

    def wait_brokers(self, count: int, deadline: float) -> None:
        self.cluster.wait_ready(None, max(1.0, deadline - time.monotonic()))

    def node(self, node_id: int) -> Any:
        target = self

        class _Node:
            log_file = self.cluster.log_path(node_id)

            def start(self, heap: str) -> None:
                target.cluster.start_node(node_id)

        return _Node()

    def stop(self) -> None:
        self.cluster.down()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--system", default="kafka", choices=["kafka", "kafkawire"])
    ap.add_argument("--parts", default="abc", help="'abc' (all) or 'c'")
    args = ap.parse_args()
    out: dict[str, Any] = {"system": args.system, "props": PROPS}
    if args.system == "kafka":
        cluster: Any = KafkaCluster(3, overrides=PROPS)
        cluster.start()
    else:
        import tempfile

        cluster = KafkawireTarget(Path(tempfile.mkdtemp(prefix="kw-explore-elr-")))
    try:
        run(cluster, out, args.parts)
    finally:
        cluster.stop()
        print(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
