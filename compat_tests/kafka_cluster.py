"""A 3-node (or n-node) Apache Kafka 4.3.1 cluster on loopback, from the cached jars.

Every node is a combined KRaft ``broker,controller`` (ids 1..n, a static quorum through
``controller.quorum.voters``), with its own free client and controller ports, a small heap and
its own directory. :class:`KafkaCluster` formats the storages (in parallel), starts the JVMs,
waits (bounded) until every broker is registered and unfenced, and stops them cleanly (SIGTERM,
SIGKILL after a bound; also at interpreter exit). Single nodes can be stopped (SIGTERM: Kafka's
controlled shutdown), killed (SIGKILL) and started again on their data.

    with KafkaCluster() as cluster:          # 3 nodes, CLUSTER_PROPS
        print(cluster.bootstrap)             # "127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3"
        cluster.stop_node(2)
        cluster.start_node(2)

``python -m compat_tests.kafka_cluster [--nodes 3]`` runs one in the foreground until Ctrl-C.
Used by the 3-node compat scenarios (``scenarios_cluster.py``) and meant for benchmarks.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from compat_tests.kafka_dist import (
    KafkaDistError,
    fetch,
    free_port,
    java_command,
    random_cluster_id,
)

#: heap of each node's JVM (three of them share a 2-core machine with everything else)
NODE_HEAP = os.environ.get("KAFKAWIRE_KAFKA_CLUSTER_HEAP", "384m")
#: bounds of the waits, seconds (a loaded machine: JVMs compete for two cores)
FORMAT_TIMEOUT_S = 180.0
START_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 30.0

#: Kafka's usual settings for three brokers (the same as ``kafkawire.tools.cluster.cluster_defaults(3)``)
#: plus the harness's fast group start; both systems get exactly these in the cluster scenarios.
CLUSTER_PROPS: dict[str, str] = {
    "num.partitions": "3",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.state.log.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
}


#: what the cluster scenarios add: no automatic preferred-leader rebalance, whose periodic
#: timer could move a leader between two steps of a scenario (the scenarios elect themselves)
SCENARIO_PROPS: dict[str, str] = {**CLUSTER_PROPS, "auto.leader.rebalance.enable": "false"}


class KafkaNode:
    """One combined broker+controller of a :class:`KafkaCluster`."""

    def __init__(self, node_id: int, workdir: Path, props: dict[str, str],
                 version: str = "4.x") -> None:
        self.node_id = node_id
        #: the Kafka line (``kafka_dist.LINES``: "4.x" = 4.3.1, "4.4" = 4.4.0)
        self.version = version
        self.dir = workdir / f"node{node_id}"
        self.props = props
        self.port = free_port()
        self.controller_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def config_file(self) -> Path:
        return self.dir / "server.properties"

    @property
    def log_file(self) -> Path:
        return self.dir / "server.log"

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def write_config(self, voters: str) -> None:
        props = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},"
            f"CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.dir / "data"),
            **self.props,
        }
        self.dir.mkdir(parents=True, exist_ok=True)
        self.config_file.write_text("".join(f"{k}={v}\n" for k, v in props.items()))

    def format_command(self, cluster_id: str) -> list[str]:
        return java_command(
            "kafka.tools.StorageTool", ["format", "-t", cluster_id, "-c", str(self.config_file)],
            self.version,
        )

    def start(self, heap: str) -> None:
        cmd = java_command(
            "kafka.Kafka", [str(self.config_file)], self.version, heap=heap, role="server",
            log_file=self.log_file, jvm_opts=["-Xms64m"],
        )
        with open(self.dir / "stdout.log", "ab") as out:
            self.proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def signal_and_wait(self, sig: signal.Signals, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """Send ``sig``; SIGKILL when the node is still there after ``timeout``. Exit code."""
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return proc.returncode

    def tail(self, n: int = 30) -> str:
        parts = []
        for f in (self.dir / "stdout.log", self.log_file):
            if f.exists():
                lines = f.read_text(errors="replace").splitlines()[-n:]
                parts.append(f"--- node {self.node_id} {f.name}\n" + "\n".join(lines))
        return "\n".join(parts)


class KafkaCluster:
    """``nodes`` combined KRaft nodes of Apache Kafka 4.3.1 on loopback (see the module doc)."""

    def __init__(
        self,
        nodes: int = 3,
        *,
        overrides: dict[str, str] | None = None,
        workdir: Path | None = None,
        heap: str = NODE_HEAP,
        version: str = "4.x",
    ) -> None:
        self._own_workdir = workdir is None
        self.version = version
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="kafka-cluster-"))
        self.heap = heap
        self.cluster_id = random_cluster_id()
        props = {**CLUSTER_PROPS, **(overrides or {})}
        self.nodes = [KafkaNode(i, self.workdir, props, version) for i in range(1, nodes + 1)]
        self.voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes)
        self.start_seconds: float | None = None

    @property
    def node_ids(self) -> list[int]:
        return [n.node_id for n in self.nodes]

    @property
    def bootstrap(self) -> str:
        return ",".join(n.address for n in self.nodes)

    def node(self, node_id: int) -> KafkaNode:
        return next(n for n in self.nodes if n.node_id == node_id)

    def address(self, node_id: int) -> str:
        return self.node(node_id).address

    def live_bootstrap(self) -> str:
        return ",".join(n.address for n in self.nodes if n.running())

    # --- lifecycle ------------------------------------------------------------------------

    def format(self) -> None:
        """Format every node's storage with the cluster id, the JVMs in parallel."""
        fetch(self.version)
        procs = []
        for n in self.nodes:
            n.write_config(self.voters)
            procs.append((n, subprocess.Popen(
                n.format_command(self.cluster_id), stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
            )))
        failed = []
        for n, p in procs:
            try:
                out, _ = p.communicate(timeout=FORMAT_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                p.kill()
                out, _ = p.communicate()
            if p.returncode != 0:
                failed.append(f"node {n.node_id} ({p.returncode}): {out[-2000:]}")
        if failed:
            raise KafkaDistError("kafka-storage format failed:\n" + "\n".join(failed))

    def start(self, timeout: float = START_TIMEOUT_S) -> str:
        """Format, start every node and wait until all brokers are registered and unfenced;
        returns the bootstrap servers. Stops everything started when it fails."""
        t0 = time.monotonic()
        _live.add(self)
        try:
            self.format()
            for n in self.nodes:
                n.start(self.heap)
            self.wait_brokers(len(self.nodes), t0 + timeout)
        except BaseException:
            self.stop()
            raise
        self.start_seconds = round(time.monotonic() - t0, 2)
        return self.bootstrap

    def wait_brokers(self, count: int, deadline: float) -> None:
        """Until every running node answers Metadata listing ``count`` brokers."""
        last: object = None
        while time.monotonic() < deadline:
            for n in self.nodes:
                if n.proc is not None and n.proc.poll() is not None:
                    raise KafkaDistError(
                        f"Kafka node {n.node_id} exited with {n.proc.returncode}\n{n.tail()}"
                    )
            counts = [broker_count(n.address) for n in self.nodes if n.running()]
            if counts and all(c == count for c in counts):
                return
            last = counts
            time.sleep(0.2)
        tails = "\n".join(n.tail() for n in self.nodes)
        raise KafkaDistError(f"Kafka cluster: not {count} brokers in time ({last})\n{tails}")

    def stop_node(self, node_id: int, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM (controlled shutdown: the controller moves leadership and shrinks ISRs
        first); SIGKILL after ``timeout``. Returns the exit code."""
        return self.node(node_id).signal_and_wait(signal.SIGTERM, timeout)

    def kill_node(self, node_id: int) -> int | None:
        return self.node(node_id).signal_and_wait(signal.SIGKILL)

    def start_node(self, node_id: int, timeout: float = START_TIMEOUT_S) -> None:
        """Start a stopped node on its data and wait until all brokers are registered."""
        n = self.node(node_id)
        if not n.running():
            n.start(self.heap)
        self.wait_brokers(len(self.nodes), time.monotonic() + timeout)

    def stop(self) -> None:
        """Stop every node (SIGTERM at once, then wait; SIGKILL after the bound) and remove
        the directory (unless ``KAFKAWIRE_KEEP_LOGS`` is set or it was given)."""
        _live.discard(self)
        for n in self.nodes:
            if n.running():
                assert n.proc is not None
                n.proc.send_signal(signal.SIGTERM)
        for n in self.nodes:
            n.signal_and_wait(signal.SIGTERM)
        if self._own_workdir and not os.environ.get("KAFKAWIRE_KEEP_LOGS"):
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> KafkaCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


_live: set[KafkaCluster] = set()


@atexit.register
def _stop_leftovers() -> None:
    for c in list(_live):
        c.stop()


def broker_count(address: str) -> int:
    """How many brokers ``address`` lists in Metadata (-1 when it does not answer)."""
    from compat_tests.wire import Connection
    from protocol._generated.metadata_request import MetadataRequest

    try:
        with Connection(address, timeout=5) as c:
            return len(c.request(MetadataRequest(topics=[]), 12).brokers)
    except (OSError, ConnectionError):
        return -1


@contextlib.contextmanager
def running_kafka_cluster(
    nodes: int = 3, overrides: dict[str, str] | None = None, version: str = "4.x"
) -> Iterator[KafkaCluster]:
    with KafkaCluster(nodes, overrides=overrides, version=version) as cluster:
        yield cluster


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m compat_tests.kafka_cluster")
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--version", default="4.x", help="a Kafka line: 4.x (4.3.1) or 4.4 (4.4.0)")
    a = ap.parse_args(argv)

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)
    with KafkaCluster(a.nodes, version=a.version) as c:
        print(f"Kafka cluster on {c.bootstrap} (started in {c.start_seconds}s); "
              f"directory {c.workdir}; Ctrl-C stops it", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while all(n.running() for n in c.nodes):
                time.sleep(0.5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
