"""Issue 12's interop attempt: one cluster of Apache Kafka 4.3.1 and kafkawire nodes.

    python -m compat_tests.interop_kraft [--controllers 1] [--seconds 90] [--feature N=L] [--keep]

Two mixed clusters on loopback, built with bench/quorum.py's ``Cluster`` (the same Kafka
properties for both systems, static quorum through ``controller.quorum.voters``):

- ``kafka-broker-on-kafkawire-controllers``: kafkawire controllers, an Apache Kafka broker-only
  node that must follow their metadata log as a Raft observer, register and get unfenced;
- ``kafkawire-broker-on-kafka-controllers``: the other way round.

For each it reports how far it got (a leader, the broker registered and unfenced, a
CreateTopics through the broker, which the broker forwards to the other system's controller in
an Envelope), the answer of the controllers to the Raft Fetch a Kafka observer sends (v17,
``__cluster_metadata`` by topic id), and the warnings and errors both sides logged. The
findings go to compat_tests/FINDINGS.md ("Interop: mixed clusters").
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import shutil
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from compat_tests.wire import Connection  # noqa: E402
from protocol._generated.fetch_request import FetchRequest  # noqa: E402

_spec = importlib.util.spec_from_file_location("bench_quorum", ROOT / "bench" / "quorum.py")
assert _spec is not None and _spec.loader is not None
bq: Any = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bq)

#: Kafka's fixed topic id of ``__cluster_metadata`` (Uuid.METADATA_TOPIC_ID)
METADATA_TOPIC_ID = uuid.UUID(int=1)
#: the replica id the observer-Fetch probe uses (no node of the cluster has it)
PROBE_REPLICA_ID = 999
NOISE = re.compile(r"is defined in the broker role|DEBUG")


def _observer_fetch_request(cluster_id: str, replica_id: int, epoch: int) -> FetchRequest:
    return FetchRequest(
        cluster_id=cluster_id, replica_state=FetchRequest.ReplicaState(
            replica_id=replica_id, replica_epoch=-1),
        max_wait_ms=500, min_bytes=0, max_bytes=8 * 1024 * 1024,
        topics=[FetchRequest.FetchTopic(topic_id=METADATA_TOPIC_ID, partitions=[
            FetchRequest.FetchPartition(partition=0, current_leader_epoch=epoch, fetch_offset=0,
                                        last_fetched_epoch=0, log_start_offset=-1,
                                        partition_max_bytes=1024 * 1024)])])


def observer_fetch(address: str, cluster_id: str, replica_id: int) -> str:
    """The Fetch a Kafka broker sends as a Raft observer (v17, by topic id, from offset 0 at
    the leader's epoch, learnt from a first answer), and what the controller answers."""
    epoch, out = -1, ""
    for _ in range(2):
        try:
            with Connection(address, timeout=10) as c:
                resp = c.request(_observer_fetch_request(cluster_id, replica_id, epoch), 17)
        except (OSError, ConnectionError) as e:
            return f"connection failed: {e!r}"
        if not resp.responses:
            return f"top-level error {resp.error_code}, no partitions"
        p = resp.responses[0].partitions[0]
        out = (f"at epoch {epoch}: top-level error {resp.error_code}; partition error "
               f"{p.error_code}, high watermark {p.high_watermark}, current leader "
               f"{p.current_leader.leader_id} epoch {p.current_leader.leader_epoch}")
        if p.error_code == 0 or p.current_leader.leader_epoch == epoch:
            break
        epoch = p.current_leader.leader_epoch
    return out


def produce_consume(bootstrap: str, topic: str, timeout_s: float = 60.0) -> bool:
    """One record through the broker with confluent-kafka, read back from the start."""
    from confluent_kafka import Consumer, Producer

    p = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": int(timeout_s * 1000)})
    p.produce(topic, key=b"k", value=b"interop")
    if p.flush(timeout_s) != 0:
        return False
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "interop",
                  "auto.offset.reset": "earliest"})
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            msg = c.poll(1.0)
            if msg is not None and msg.error() is None:
                return bytes(msg.value() or b"") == b"interop"
        return False
    finally:
        c.close()


def log_lines(node: Any, limit: int = 25) -> list[str]:
    out: list[str] = []
    for name in ("server.log", "stdout.log"):
        f = node.dir / name
        if f.exists():
            for line in f.read_text(errors="replace").splitlines():
                if re.search(r"WARN|ERROR|Exception|refus|Unable|fail", line) and not \
                        NOISE.search(line):
                    out.append(line[:400])
    return out[-limit:]


def scenario(ctl: str, brk: str, controllers: int, seconds: float,
             features: list[str], keep: bool = False) -> dict[str, Any]:
    cluster = bq.Cluster(ctl, controllers=controllers, brokers=1, broker_system=brk)
    res: dict[str, Any] = {"controllers": ctl, "broker": brk, "workdir": str(cluster.workdir),
                           "features": features}
    for n in cluster.nodes:
        for f in features:
            n.format_args += ["--feature", f]
    try:
        for n in cluster.nodes:
            n.format(cluster.cluster_id)
        for n in cluster.nodes:
            n.start()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and bq.leader(cluster) is None:
            time.sleep(0.2)
        res["leader"] = bq.leader(cluster)
        while time.monotonic() < deadline and bq.live_brokers(cluster.bootstrap) < 1:
            time.sleep(0.5)
        res["broker_live"] = bq.live_brokers(cluster.bootstrap) >= 1
        if res["broker_live"]:
            res["create_topic_through_broker"] = bq.create_succeeds(cluster, "interop-topic")
            res["produce_consume"] = produce_consume(cluster.bootstrap, "interop-topic")
        # as an observer of its own id (the broker's would move the leader's view of it back)
        target = cluster.node(res["leader"][0]) if res["leader"] else cluster.controllers[0]
        res["observer_fetch"] = observer_fetch(target.address, cluster.cluster_id,
                                               PROBE_REPLICA_ID)
        res["alive"] = {n.node_id: n.proc is not None and n.proc.poll() is None
                        for n in cluster.nodes}
        res["logs"] = {f"{n.system} node {n.node_id}": log_lines(n) for n in cluster.nodes}
    finally:
        cluster.stop()
        if not keep:
            shutil.rmtree(cluster.workdir, ignore_errors=True)
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--controllers", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=90.0)
    ap.add_argument("--keep", action="store_true", help="keep the nodes' directories")
    ap.add_argument("--only", choices=["kafka-broker", "kafkawire-broker"])
    ap.add_argument("--feature", action="append", default=[],
                    help="NAME=LEVEL for every node's format (e.g. streams.version=0: Kafka "
                    "4.3.1 finalizes streams.version 1, which kafkawire brokers do not support)")
    args = ap.parse_args()
    pairs = [("kafkawire", "kafka"), ("kafka", "kafkawire")]
    if args.only == "kafka-broker":
        pairs = pairs[:1]
    elif args.only == "kafkawire-broker":
        pairs = pairs[1:]
    for ctl, brk in pairs:
        res = scenario(ctl, brk, args.controllers, args.seconds, args.feature, args.keep)
        print(f"== {brk} broker on {args.controllers} {ctl} controller(s) ({res['workdir']}) "
              f"features {args.feature}")
        for k in ("leader", "broker_live", "create_topic_through_broker", "produce_consume",
                  "observer_fetch", "alive"):
            print(f"  {k}: {res.get(k)}")
        for who, lines in res.get("logs", {}).items():
            print(f"  -- {who}: {len(lines)} warning/error lines (last shown)")
            for line in lines[-12:]:
                print(f"     {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
