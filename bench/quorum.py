"""Metadata quorum figures, Apache Kafka 4.3.1 and kafkawire side by side (issue 12).

Starts a cluster of 3 dedicated controllers (``process.roles=controller``, a static quorum
through ``controller.quorum.voters``) and broker-only nodes on loopback, all with the same
properties for both systems (kafkawire reads Kafka's keys), and measures:

- **CreateTopics commit latency**: ``--creates`` sequential CreateTopics (1 partition,
  replication factor 1) sent by a client to a broker, which forwards them to the active
  controller; the time from request to answer, p50/p99/max. The answer leaves once the topic's
  records are committed by a majority of the 3 voters.
- **time to elect** after ``kill -9`` of the active controller, ``--kills`` times: from the kill
  until a surviving controller answers DescribeQuorum as leader of a newer epoch (p50/p99/max),
  and until a CreateTopics through the broker succeeds again (the client-visible outage). The
  killed controller is restarted on its data and caught up before the next kill.

Defaults are both systems' defaults (``controller.quorum.election.timeout.ms`` 1000,
``controller.quorum.fetch.timeout.ms`` 2000): a follower notices the dead leader only after
the fetch timeout, so about 2 s is the floor of the time to elect.

    python bench/quorum.py --system kafka --creates 200 --kills 10
    python bench/quorum.py --system kafkawire ...
    python bench/quorum.py --system both --json out.json

Kafka's JVMs get small heaps (controllers 256 MB, brokers 384 MB, serial GC); the jars are the
ones cached by ``python -m compat_tests.kafka_dist fetch``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from compat_tests.kafka_dist import (  # noqa: E402
    DEFAULT_BROKER_PROPS,
    java_command,
    random_cluster_id,
)
from compat_tests.wire import Connection  # noqa: E402
from kafkawire.tools.testing import free_port  # noqa: E402
from protocol._generated.create_topics_request import CreateTopicsRequest  # noqa: E402
from protocol._generated.describe_quorum_request import DescribeQuorumRequest  # noqa: E402
from protocol._generated.metadata_request import MetadataRequest  # noqa: E402
from protocol.errors import ErrorCode  # noqa: E402

CONTROLLER_HEAP = "256m"
BROKER_HEAP = "384m"
#: polling interval while waiting for a leader or a successful CreateTopics, seconds
POLL_S = 0.01
#: bounds of every wait, seconds (a loaded 2-core machine)
START_TIMEOUT_S = 180.0
ELECT_TIMEOUT_S = 60.0
MAP = "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"


class Node:
    """One process of the cluster: its properties, its start command, kill -9 and restart."""

    def __init__(self, system: str, node_id: int, role: str, workdir: Path,
                 props: dict[str, str]) -> None:
        self.system, self.node_id, self.role = system, node_id, role
        self.dir = workdir / f"node{node_id}"
        self.props = props
        self.proc: subprocess.Popen[bytes] | None = None
        #: extra arguments of the format command (e.g. ``--feature streams.version=0``)
        self.format_args: list[str] = []

    @property
    def port(self) -> int:
        return int(self.props["listeners"].rsplit(":", 1)[1])

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def write_config(self) -> Path:
        self.dir.mkdir(parents=True, exist_ok=True)
        conf = self.dir / "server.properties"
        conf.write_text("".join(f"{k}={v}\n" for k, v in self.props.items()))
        return conf

    def _kafkawire(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "kafkawire", *args, str(self.write_config())]

    def format(self, cluster_id: str) -> None:
        if self.system == "kafka":
            cmd = java_command("kafka.tools.StorageTool", [
                "format", "-t", cluster_id, "-c", str(self.write_config()), *self.format_args])
        else:
            cmd = [*self._kafkawire("format", "--cluster-id", cluster_id), *self.format_args]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
        if p.returncode != 0:
            raise RuntimeError(f"format of node {self.node_id} failed:\n{p.stdout}\n{p.stderr}")

    def start(self) -> None:
        if self.system == "kafka":
            heap = CONTROLLER_HEAP if self.role == "controller" else BROKER_HEAP
            cmd = java_command("kafka.Kafka", [str(self.write_config())], heap=heap,
                               role="server", log_file=self.dir / "server.log",
                               jvm_opts=["-Xms64m"])
        else:  # metrics.port 0: no /metrics listener (its default port is fixed)
            cmd = [*self._kafkawire("serve"), "--override", "metrics.port=0"]
        out = open(self.dir / "stdout.log", "ab")
        self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True,
                                     env={**os.environ, "PYTHONPATH": str(ROOT)})
        out.close()

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill9()
        self.proc = None

    def check_alive(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            log = (self.dir / "stdout.log").read_text(errors="replace")[-3000:]
            raise RuntimeError(f"node {self.node_id} ({self.system}) exited:\n{log}")


class Cluster:
    """``controllers`` dedicated controllers (ids 1..n) and ``brokers`` broker-only nodes."""

    def __init__(self, system: str, controllers: int = 3, brokers: int = 1,
                 workdir: Path | None = None, broker_system: str | None = None) -> None:
        """``system`` runs the controllers, ``broker_system`` (default the same) the brokers:
        mixed clusters are the interop of issue 12 (compat_tests/interop_kraft.py)."""
        self.system = system
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix=f"quorum-{system}-"))
        cports = {i: free_port() for i in range(1, controllers + 1)}
        voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in cports.items())
        common = {"controller.quorum.voters": voters, "controller.listener.names": "CONTROLLER",
                  "listener.security.protocol.map": MAP}
        self.controllers = [Node(system, i, "controller", self.workdir, {
            "process.roles": "controller", "node.id": str(i),
            "listeners": f"CONTROLLER://127.0.0.1:{p}", **common,
            "log.dirs": str(self.workdir / f"node{i}" / "data")}) for i, p in cports.items()]
        self.brokers = []
        for j in range(brokers):
            nid, port = controllers + 1 + j, free_port()
            self.brokers.append(Node(broker_system or system, nid, "broker", self.workdir, {
                "process.roles": "broker", "node.id": str(nid),
                "listeners": f"PLAINTEXT://127.0.0.1:{port}",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
                "inter.broker.listener.name": "PLAINTEXT", **common,
                "log.dirs": str(self.workdir / f"node{nid}" / "data"),
                **DEFAULT_BROKER_PROPS}))
        self.cluster_id = random_cluster_id()

    @property
    def nodes(self) -> list[Node]:
        return self.controllers + self.brokers

    @property
    def bootstrap(self) -> str:
        return self.brokers[0].address

    def start(self, timeout_s: float = START_TIMEOUT_S) -> float:
        t0 = time.monotonic()
        for n in self.nodes:
            n.format(self.cluster_id)
        for n in self.nodes:
            n.start()
        deadline = t0 + timeout_s
        wait_until(lambda: leader(self) is not None, deadline, self.nodes, "a leader")
        wait_until(lambda: live_brokers(self.bootstrap) >= len(self.brokers), deadline,
                   self.nodes, "every broker registered and unfenced")
        return time.monotonic() - t0

    def stop(self) -> None:
        for n in self.brokers + self.controllers:  # brokers first: they shut down through
            n.stop()                                # the controllers

    def node(self, node_id: int) -> Node:
        return next(n for n in self.nodes if n.node_id == node_id)


def wait_until(cond: Callable[[], bool], deadline: float, nodes: list[Node], what: str) -> None:
    while time.monotonic() < deadline:
        for n in nodes:
            n.check_alive()
        if cond():
            return
        time.sleep(0.1)
    raise TimeoutError(f"no {what} in time")


def _ask(address: str, msg: Any, version: int, timeout: float = 5.0) -> Any:
    try:
        with Connection(address, timeout=timeout) as c:
            return c.request(msg, version)
    except (OSError, ConnectionError):
        return None


def describe_quorum(address: str) -> Any:
    req = DescribeQuorumRequest(topics=[DescribeQuorumRequest.TopicData(
        topic_name="__cluster_metadata",
        partitions=[DescribeQuorumRequest.PartitionData(partition_index=0)])])
    resp = _ask(address, req, 1, timeout=2.0)
    if resp is None or resp.error_code or not resp.topics:
        return None
    part = resp.topics[0].partitions[0]
    return None if part.error_code else part


def leader(cluster: Cluster, exclude: int = -1) -> tuple[int, int] | None:
    """(leader id, epoch) as the leader itself answers DescribeQuorum (only a leader does)."""
    for n in cluster.controllers:
        if n.node_id == exclude or n.proc is None:
            continue
        part = describe_quorum(n.address)
        if part is not None and part.leader_id == n.node_id:
            return part.leader_id, part.leader_epoch
    return None


def live_brokers(bootstrap: str) -> int:
    resp = _ask(bootstrap, MetadataRequest(topics=[]), 12)
    return 0 if resp is None else len(resp.brokers)


def create_topic(conn: Connection, name: str) -> int:
    req = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=1, replication_factor=1)], timeout_ms=30_000)
    return int(conn.request(req, 7).topics[0].error_code)


def create_latencies(cluster: Cluster, count: int, prefix: str) -> list[float]:
    out: list[float] = []
    with Connection(cluster.bootstrap, timeout=60) as c:
        for i in range(count):
            t0 = time.perf_counter()
            code = create_topic(c, f"{prefix}-{i}")
            out.append((time.perf_counter() - t0) * 1000)
            if code != ErrorCode.NONE:
                raise RuntimeError(f"CreateTopics {prefix}-{i}: error {code}")
    return out


def create_succeeds(cluster: Cluster, name: str) -> bool:
    try:
        with Connection(cluster.bootstrap, timeout=5) as c:
            return create_topic(c, name) in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS)
    except (OSError, ConnectionError):
        return False


def _first_time(t0: float, deadline: float, probe: Callable[[], bool],
                out: dict[str, float], key: str) -> None:
    while time.monotonic() < deadline:
        if probe():
            out[key] = (time.monotonic() - t0) * 1000
            return
        time.sleep(POLL_S)


def kill_and_elect(cluster: Cluster, round_no: int) -> tuple[float, float]:
    """kill -9 of the active controller: (ms to a new leader, ms to a CreateTopics), each
    watched by its own thread from the moment of the kill."""
    found = leader(cluster)
    assert found is not None, "no leader before the kill"
    old_id, old_epoch = found
    victim = cluster.node(old_id)

    def elected() -> bool:
        now = leader(cluster, exclude=old_id)
        return now is not None and now[1] > old_epoch

    out: dict[str, float] = {}
    t0 = time.monotonic()
    victim.kill9()
    deadline = t0 + ELECT_TIMEOUT_S
    threads = [threading.Thread(target=_first_time, args=(t0, deadline, probe, out, key))
               for key, probe in (("elect", elected), ("create", lambda: create_succeeds(
                   cluster, f"after-kill-{round_no}")))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if "elect" not in out or "create" not in out:
        raise TimeoutError(f"kill {round_no}: no new leader / CreateTopics within "
                           f"{ELECT_TIMEOUT_S}s")
    victim.start()
    rejoin(cluster, victim)
    return out["elect"], out["create"]


def rejoin(cluster: Cluster, node: Node) -> None:
    """Wait until the restarted voter has fetched up to the leader's high watermark."""
    def caught_up() -> bool:
        found = leader(cluster)
        if found is None:
            return False
        part = describe_quorum(cluster.node(found[0]).address)
        if part is None:
            return False
        mine = [v for v in part.current_voters if v.replica_id == node.node_id]
        return bool(mine) and mine[0].log_end_offset >= part.high_watermark
    wait_until(caught_up, time.monotonic() + START_TIMEOUT_S, cluster.nodes,
               f"catch-up of node {node.node_id}")


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(round(p / 100 * len(s) + 0.5)) - 1))]


def summary(values: list[float]) -> dict[str, float]:
    return {"n": len(values), "p50": round(pct(values, 50), 1), "p99": round(pct(values, 99), 1),
            "max": round(max(values), 1) if values else float("nan"),
            "mean": round(statistics.fmean(values), 1) if values else float("nan")}


def run_system(system: str, creates: int, kills: int, brokers: int,
               broker_system: str | None = None, features: tuple[str, ...] = ()
               ) -> dict[str, Any]:
    cluster = Cluster(system, brokers=brokers, broker_system=broker_system)
    for n in cluster.nodes:
        for f in features:
            n.format_args += ["--feature", f]
    if broker_system:
        system = f"{system} controllers, {broker_system} broker"
    try:
        started = cluster.start()
        print(f"[{system}] 3 controllers + {brokers} broker(s) up in {started:.1f}s "
              f"({cluster.workdir})", flush=True)
        create_latencies(cluster, min(20, creates), "warmup")
        lat = create_latencies(cluster, creates, "bench")
        print(f"[{system}] CreateTopics ms {summary(lat)}", flush=True)
        elect, outage = [], []
        for k in range(kills):
            e, o = kill_and_elect(cluster, k)
            elect.append(e)
            outage.append(o)
            print(f"[{system}] kill {k + 1}/{kills}: new leader after {e:.0f} ms, "
                  f"CreateTopics ok after {o:.0f} ms", flush=True)
        return {"system": system, "start_s": round(started, 1),
                "create_ms": summary(lat), "elect_ms": summary(elect),
                "create_after_kill_ms": summary(outage)}
    finally:
        cluster.stop()
        if not os.environ.get("KAFKAWIRE_KEEP_LOGS"):
            shutil.rmtree(cluster.workdir, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--system", choices=["kafka", "kafkawire", "both"], default="both")
    ap.add_argument("--creates", type=int, default=200)
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--brokers", type=int, default=1)
    ap.add_argument("--broker-system", choices=["kafka", "kafkawire"],
                    help="run the brokers with the other system (a mixed cluster, issue 12)")
    ap.add_argument("--feature", action="append", default=[],
                    help="NAME=LEVEL for every node's format (streams.version=0 lets kafkawire "
                    "brokers join Apache Kafka 4.3.1 controllers)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    systems = ["kafka", "kafkawire"] if args.system == "both" else [args.system]
    results = []
    for s in systems:
        try:
            results.append(run_system(s, args.creates, args.kills, args.brokers,
                                      args.broker_system, tuple(args.feature)))
        except (RuntimeError, TimeoutError) as e:
            print(f"[{s}] failed: {e}", flush=True)
            results.append({"system": s, "error": str(e)[:2000]})
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0 if all("error" not in r for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
