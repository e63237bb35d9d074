"""A local multi-node cluster of real kafkawire processes: ``kafkawire cluster up|status|down|
kill|restart|stop|start|pause|resume|partition|heal`` and the ``kafkawire_cluster`` fixture.

Layout under the cluster directory (default ``./data/cluster``)::

    cluster.json            the state file: cluster id, network mode, every node (roles,
                            addresses, ports, pid)
    node-<id>/server.properties
    node-<id>/data/         log.dirs (formatted with the cluster id by ``up``)
    node-<id>/node.log      the node's stdout and stderr

Nodes: ``--nodes N`` broker nodes; with ``--controllers 0`` (the default) the first
``min(N, 3)`` of them are combined broker+controller nodes (Kafka's ``process.roles=broker,
controller``) forming the quorum, with ``--controllers C`` there are C dedicated controllers
(ids 1..C) and N brokers (ids C+1..); ``voters`` chooses how many combined nodes vote. The
quorum is static (``controller.quorum.voters``), or with ``dynamic`` a KIP-853 quorum
(``controller.quorum.bootstrap.servers``, the controllers formatted with
``--initial-controllers``).
Each node has a client listener (brokers), a controller listener (controllers) and the
metrics/health port. With ``network = "loopback"`` every port is a free port on 127.0.0.1;
with ``network = "netns"`` (root, ``ip netns``: see ``kafkawire.cluster_net``) each node runs
in its own network namespace at its own address with Kafka's usual ports, which is what makes
network partitions possible.

The processes are detached (their own session): ``cluster up`` returns once the cluster
serves and the nodes keep running; the other commands find them through the state file (a
pid is trusted only while ``/proc/<pid>/cmdline`` still names that node's properties file).
"Serves" is: every node's ``/health/ready`` answers 200 (started, the quorum has a leader;
a broker also registered and unfenced).

Tests and scripts use the same class: ``with LocalCluster(tmp) as c: c.up(...)`` (``down()`` on
exit), ``c.node(id).address``, ``controller_ids``, ``broker_ids``, ``controller_ports``,
``controller_bootstrap``, ``kill``/``stop``/``start_node``/``restart``, ``quorum_leader()``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

STATE_FILE = "cluster.json"
DEFAULT_DIR = Path("data/cluster")
#: how long ``up`` / ``restart`` wait for the cluster to serve, in seconds
READY_TIMEOUT_S = 120.0
#: how long a SIGTERM'd node has to shut down before SIGKILL, in seconds
STOP_TIMEOUT_S = 30.0
#: the largest quorum ``up`` builds from combined nodes (Kafka's usual 3 voters)
MAX_COMBINED_VOTERS = 3
#: Kafka's usual ports, used inside a node's own network namespace
CLIENT_PORT, CONTROLLER_PORT, METRICS_PORT = 9092, 9093, 9404


class ClusterError(Exception):
    """A cluster command that cannot be carried out (one line for the user)."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@dataclass
class NodeSpec:
    node_id: int
    roles: list[str]
    host: str
    port: int  # client listener (0 for a controller-only node)
    controller_port: int  # 0 for a broker-only node
    metrics_port: int
    netns: str = ""
    pid: int = 0

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}" if self.is_broker else f"{self.host}:{self.controller_port}"


@dataclass
class ClusterState:
    cluster_id: str
    network: str  # "loopback" or "netns"
    nodes: list[NodeSpec]
    overrides: dict[str, str] = field(default_factory=dict)
    net: dict[str, Any] = field(default_factory=dict)  # cluster_net's names (netns mode)
    #: a KIP-853 quorum (controller.quorum.bootstrap.servers) instead of a static one
    dynamic: bool = False
    #: the directory id of each controller (dynamic quorum), by node id as a string
    directory_ids: dict[str, str] = field(default_factory=dict)
    #: properties for single nodes, by node id as a string (JSON keys are strings)
    node_overrides: dict[str, dict[str, str]] = field(default_factory=dict)
    #: ``cluster_defaults()`` for the brokers (False: Kafka's own single-broker defaults)
    defaults: bool = True
    log_level: str = ""

    @property
    def brokers(self) -> list[NodeSpec]:
        return [n for n in self.nodes if n.is_broker]

    @property
    def controllers(self) -> list[NodeSpec]:
        return [n for n in self.nodes if n.is_controller]

    @property
    def bootstrap(self) -> str:
        return ",".join(n.address for n in self.brokers)

    def node(self, node_id: int) -> NodeSpec:
        for n in self.nodes:
            if n.node_id == node_id:
                return n
        raise ClusterError(f"no node {node_id} (nodes: {', '.join(str(n.node_id) for n in self.nodes)})")

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> ClusterState:
        raw = json.loads(text)
        raw["nodes"] = [NodeSpec(**n) for n in raw["nodes"]]
        return cls(**raw)


def plan_nodes(nodes: int, controllers: int, network: str,
               address_of: Callable[[int], str] | None = None,
               voters: int | None = None) -> list[NodeSpec]:
    """The nodes of a new cluster (see the module docstring for the roles); ``voters``: how
    many of the combined nodes vote (default ``min(nodes, 3)``)."""
    if nodes < (0 if controllers else 1):
        raise ClusterError("--nodes must be at least 1")
    if controllers < 0:
        raise ClusterError("--controllers must be 0 (combined nodes) or more")
    combined = min(nodes, MAX_COMBINED_VOTERS) if voters is None else voters
    if not controllers and not 1 <= combined <= nodes:
        raise ClusterError(f"voters must be 1..{nodes}")
    out: list[NodeSpec] = []
    total = nodes + controllers
    for node_id in range(1, total + 1):
        if controllers:
            roles = ["controller"] if node_id <= controllers else ["broker"]
        else:
            roles = ["broker", "controller"] if node_id <= combined else ["broker"]
        if network == "netns":
            assert address_of is not None
            host = address_of(node_id)
            port, cport, mport = CLIENT_PORT, CONTROLLER_PORT, METRICS_PORT
        else:
            host = "127.0.0.1"
            port, cport, mport = free_port(), free_port(), free_port()
        out.append(NodeSpec(node_id, roles, host, port if "broker" in roles else 0,
                            cport if "controller" in roles else 0, mport))
    return out


def cluster_defaults(brokers: int) -> dict[str, str]:
    """Kafka's usual settings for a cluster of this many brokers: RF 3 and min ISR 2 from three
    brokers on (``--override`` changes any of them)."""
    rf = min(brokers, 3)
    isr = 2 if rf >= 3 else 1
    return {
        "num.partitions": "3",
        "default.replication.factor": str(rf),
        "min.insync.replicas": str(isr),
        "offsets.topic.replication.factor": str(rf),
        "transaction.state.log.replication.factor": str(rf),
        "transaction.state.log.min.isr": str(isr),
        "share.coordinator.state.topic.replication.factor": str(rf),
        "share.coordinator.state.topic.min.isr": str(isr),
    }


def node_properties(state: ClusterState, node: NodeSpec, data_dir: Path) -> dict[str, str]:
    if state.dynamic:
        quorum = {"controller.quorum.bootstrap.servers": ",".join(
            f"{c.host}:{c.controller_port}" for c in state.controllers)}
    else:
        quorum = {"controller.quorum.voters": ",".join(
            f"{c.node_id}@{c.host}:{c.controller_port}" for c in state.controllers)}
    listeners, protocols = [], []
    if node.is_broker:
        bind = "0.0.0.0" if state.network == "netns" else node.host
        listeners.append(f"PLAINTEXT://{bind}:{node.port}")
        protocols.append("PLAINTEXT:PLAINTEXT")
    if node.is_controller:
        bind = "0.0.0.0" if state.network == "netns" else node.host
        listeners.append(f"CONTROLLER://{bind}:{node.controller_port}")
    protocols.append("CONTROLLER:PLAINTEXT")
    props = {
        "process.roles": ",".join(node.roles),
        "node.id": str(node.node_id),
        "listeners": ",".join(listeners),
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": ",".join(protocols),
        **quorum,
        "log.dirs": str(data_dir),
        "metrics.port": str(node.metrics_port),
        "metrics.host": "0.0.0.0" if state.network == "netns" else node.host,
    }
    if node.is_broker:
        props["advertised.listeners"] = f"PLAINTEXT://{node.host}:{node.port}"
        props["inter.broker.listener.name"] = "PLAINTEXT"
        if state.defaults:
            props.update(cluster_defaults(len(state.brokers)))
    # an override may name the node's own client address: ``{host}`` and ``{port}`` (e.g.
    # ``listeners=SECURE://{host}:{port}`` for a cluster whose broker listener is secured)
    for k, v in {**state.overrides, **state.node_overrides.get(str(node.node_id), {})}.items():
        props[k] = v.replace("{host}", node.host).replace("{port}", str(node.port))
    return props


def write_properties(path: Path, props: dict[str, str], comment: str) -> None:
    lines = [f"# {comment}"] + [f"{k}={v}" for k, v in props.items()]
    path.write_text("\n".join(lines) + "\n")


# ---- process inspection --------------------------------------------------------------------
def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def _proc_state(pid: int) -> str:
    """The kernel's one-letter state (R, S, T for stopped, Z...), '' when gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rpartition(")")[2].split()[0]


def api_versions_ok(host: str, port: int, timeout_s: float = 1.0) -> bool:
    """True when something answers a Kafka ApiVersions v0 request there."""
    req = struct.pack(">hhih", 18, 0, 1, 4) + b"ping"
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as s:
            s.sendall(struct.pack(">i", len(req)) + req)
            head = s.recv(8)
            return len(head) >= 8 and struct.unpack(">ii", head)[1] == 1
    except OSError:
        return False


def health(host: str, port: int, path: str = "/health/ready", timeout_s: float = 2.0
           ) -> tuple[int, dict[str, Any]]:
    """(HTTP status, JSON body) of a node's ops endpoint; (0, {}) when nothing answers."""
    url = f"http://{'127.0.0.1' if host == '0.0.0.0' else host}:{port}{path}"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as r:  # noqa: S310 (our own node)
            return int(r.status), json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        try:
            return int(e.code), json.loads(e.read() or b"{}")
        except ValueError:
            return int(e.code), {}
    except (OSError, ValueError):
        return 0, {}


class LocalCluster:
    """The processes of one cluster directory (see the module docstring)."""

    def __init__(self, directory: str | Path = DEFAULT_DIR) -> None:
        self.dir = Path(directory).resolve()
        self.state_path = self.dir / STATE_FILE
        self._state: ClusterState | None = None
        #: (monotonic time, description) of every fault and repair this object made
        self.events: list[tuple[float, str]] = []
        #: the processes this object started (between fork and exec a child's cmdline is
        #: still ours, so these are judged by ``poll``)
        self._procs: dict[int, subprocess.Popen[bytes]] = {}

    # ---- state ------------------------------------------------------------------------
    @property
    def state(self) -> ClusterState:
        if self._state is None:
            if not self.state_path.exists():
                raise ClusterError(f"no cluster in {self.dir} (start one with `kafkawire "
                                   f"cluster up --dir {self.dir}`)")
            self._state = ClusterState.from_json(self.state_path.read_text())
        return self._state

    def save(self) -> None:
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(self.state.to_json())
        tmp.replace(self.state_path)

    def node_dir(self, node_id: int) -> Path:
        return self.dir / f"node-{node_id}"

    def props_path(self, node_id: int) -> Path:
        return self.node_dir(node_id) / "server.properties"

    def log_path(self, node_id: int) -> Path:
        return self.node_dir(node_id) / "node.log"

    @property
    def bootstrap(self) -> str:
        return self.state.bootstrap

    # ---- the layout, for tests and scripts ------------------------------------------------
    def node(self, node_id: int) -> NodeSpec:
        """One node: ``address`` (its client listener, or its controller listener for a
        controller-only node), ``port``, ``controller_port``, ``roles``."""
        return self.state.node(node_id)

    def data_dir(self, node_id: int) -> Path:
        """The node's ``log.dirs``."""
        return self.node_dir(node_id) / "data"

    @property
    def cluster_id(self) -> str:
        return self.state.cluster_id

    @property
    def controller_ids(self) -> list[int]:
        return [n.node_id for n in self.state.controllers]

    @property
    def broker_ids(self) -> list[int]:
        return [n.node_id for n in self.state.brokers]

    @property
    def controller_ports(self) -> dict[int, int]:
        return {n.node_id: n.controller_port for n in self.state.controllers}

    @property
    def controller_bootstrap(self) -> str:
        """The controller listeners (``--bootstrap-controller``)."""
        return ",".join(f"{n.host}:{n.controller_port}" for n in self.state.controllers)

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.state_path.exists():
            self.down()

    def _event(self, text: str) -> None:
        self.events.append((time.monotonic(), text))

    # ---- create -------------------------------------------------------------------------
    def create(self, nodes: int, controllers: int = 0, network: str = "loopback",
               overrides: dict[str, str] | None = None, *, voters: int | None = None,
               dynamic: bool = False, node_overrides: dict[int, dict[str, str]] | None = None,
               defaults: bool = True, cluster_id: str | None = None, log_level: str = ""
               ) -> ClusterState:
        """Plan, write and format a new cluster (no process started). ``voters``: how many
        combined nodes vote; ``dynamic``: a KIP-853 quorum; ``node_overrides[id]``: properties
        of one node; ``defaults``: ``cluster_defaults()``; ``log_level``: the nodes'
        ``--log-level`` (default ``$KAFKAWIRE_LOG_LEVEL``)."""
        from kafkawire.storage import random_uuid

        if self.state_path.exists():
            raise ClusterError(f"{self.dir} already holds a cluster (`kafkawire cluster down "
                               f"--purge --dir {self.dir}` removes it)")
        if network not in ("loopback", "netns"):
            raise ClusterError(f"network must be loopback or netns, not {network!r}")
        self.dir.mkdir(parents=True, exist_ok=True)
        net: dict[str, Any] = {}
        address_of = None
        if network == "netns":
            from kafkawire import cluster_net

            net = cluster_net.plan(self.dir)
            address_of = lambda node_id: cluster_net.node_address(net, node_id)  # noqa: E731
        planned = plan_nodes(nodes, controllers, network, address_of, voters)
        state = ClusterState(
            cluster_id or random_uuid(), network, planned, dict(overrides or {}), net,
            dynamic=dynamic, node_overrides={str(k): dict(v) for k, v in
                                             (node_overrides or {}).items()},
            defaults=defaults, log_level=log_level)
        if dynamic:
            state.directory_ids = {str(n.node_id): random_uuid() for n in state.controllers}
        self._state = state
        for node in planned:
            self._write_node(node)
        if network == "netns":
            from kafkawire import cluster_net

            cluster_net.create(net, [n.node_id for n in planned])
            for node in planned:
                node.netns = cluster_net.netns_name(net, node.node_id)
        self.save()
        return state

    def _write_node(self, node: NodeSpec) -> None:

        nd = self.node_dir(node.node_id)
        nd.mkdir(parents=True, exist_ok=True)
        props = node_properties(self.state, node, nd / "data")
        write_properties(self.props_path(node.node_id), props,
                         f"kafkawire cluster {self.state.cluster_id}, node {node.node_id} "
                         f"({', '.join(node.roles)}); written by `kafkawire cluster up`")
        self.format_node(node.node_id)

    def format_node(self, node_id: int) -> None:
        """``kafkawire format`` of the node's log directory with the cluster id (after its disk
        was lost, say); a dynamic quorum's controllers with ``--initial-controllers``."""
        from kafkawire.config import BrokerConfig
        from kafkawire.storage import FormatOptions, format_storage

        state, node = self.state, self.state.node(node_id)
        initial = None
        if state.dynamic and node.is_controller:
            initial = ",".join(
                f"{c.node_id}@{c.host}:{c.controller_port}:{state.directory_ids[str(c.node_id)]}"
                for c in state.controllers)
        opts = FormatOptions(cluster_id=state.cluster_id, initial_controllers=initial)
        cfg = BrokerConfig.load(self.props_path(node_id), [])
        format_storage(cfg, opts, lambda _s: None, int(time.time() * 1000))

    # ---- processes ------------------------------------------------------------------------
    def pid_of(self, node_id: int) -> int:
        """The node's live pid, 0 when it is not running."""
        node = self.state.node(node_id)
        if not node.pid:
            return 0
        proc = self._procs.get(node.pid)
        if proc is not None:
            return 0 if proc.poll() is not None or _proc_state(node.pid) == "Z" else node.pid
        cmd = _cmdline(node.pid)
        if str(self.props_path(node_id)) not in cmd or _proc_state(node.pid) in ("", "Z", "X"):
            return 0
        return node.pid

    def node_state(self, node_id: int) -> str:
        pid = self.pid_of(node_id)
        if not pid:
            return "stopped"
        return "paused" if _proc_state(pid) == "T" else "running"

    def start_node(self, node_id: int, timeout_s: float | None = None) -> int:
        """Start a stopped node (a no-op for a running one); returns its pid. With
        ``timeout_s``, returns once it serves (``wait_ready``)."""
        pid = self._launch(node_id)
        if timeout_s is not None:
            self.wait_ready([node_id], timeout_s)
        return pid

    def _launch(self, node_id: int) -> int:
        node = self.state.node(node_id)
        pid = self.pid_of(node_id)
        if pid:
            return pid
        cmd = [sys.executable, "-m", "kafkawire", "serve"]
        level = self.state.log_level or os.environ.get("KAFKAWIRE_LOG_LEVEL")
        cmd += (["--log-level", level] if level else []) + [str(self.props_path(node_id))]
        if node.netns:
            cmd = ["ip", "netns", "exec", node.netns, *cmd]
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        with open(self.log_path(node_id), "ab") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env,
                                    stdin=subprocess.DEVNULL, start_new_session=True,
                                    cwd=self.node_dir(node_id))
        node.pid = proc.pid  # `ip netns exec` execs the command: the same pid
        self._procs[proc.pid] = proc
        self.save()
        self._event(f"start {node_id}")
        return proc.pid

    def start_all(self) -> None:
        for node in self.state.nodes:
            self.start_node(node.node_id)

    def signal_node(self, node_id: int, sig: signal.Signals) -> bool:
        pid = self.pid_of(node_id)
        if not pid:
            return False
        os.kill(pid, sig)
        return True

    def _wait_gone(self, node_id: int, pid: int, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            proc = self._procs.get(pid)
            if proc is not None:
                proc.poll()  # our own child: reap it, or it stays a zombie
            if not self.pid_of(node_id):
                return True
            time.sleep(0.05)
        return False

    def kill(self, node_id: int) -> None:
        """kill -9 the node (no chance to flush or close anything)."""
        pid = self.pid_of(node_id)
        if not pid:
            raise ClusterError(f"node {node_id} is not running")
        os.kill(pid, signal.SIGKILL)
        self._wait_gone(node_id, pid, STOP_TIMEOUT_S)
        self._event(f"kill {node_id}")

    def stop(self, node_id: int, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM (Kafka's controlled shutdown), SIGKILL if it is still there after
        ``timeout_s``. A paused node is resumed first so that it can shut down. Returns the
        exit code of a process this object started (0: a clean shutdown), else None."""
        pid = self.pid_of(node_id)
        if not pid:
            return None
        os.kill(pid, signal.SIGCONT)
        os.kill(pid, signal.SIGTERM)
        if not self._wait_gone(node_id, pid, timeout_s):
            os.kill(pid, signal.SIGKILL)
            self._wait_gone(node_id, pid, STOP_TIMEOUT_S)
        self._event(f"stop {node_id}")
        proc = self._procs.get(pid)
        try:  # seen as a zombie before poll() reaped it: reap it now
            return None if proc is None else proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return None

    def restart(self, node_id: int, hard: bool = False, wait: bool = True,
                timeout_s: float = READY_TIMEOUT_S) -> None:
        """Stop (SIGTERM; ``hard``: kill -9) and start again; with ``wait``, return once the
        node serves again."""
        if hard and self.pid_of(node_id):
            self.kill(node_id)
        else:
            self.stop(node_id)
        self.start_node(node_id)
        self._event(f"restart {node_id}")
        if wait:
            self.wait_ready([node_id], timeout_s)

    def pause(self, node_id: int) -> None:
        """SIGSTOP: the process stays, its sockets stay open, it answers nothing."""
        if not self.signal_node(node_id, signal.SIGSTOP):
            raise ClusterError(f"node {node_id} is not running")
        self._wait_proc_state(node_id, paused=True)
        self._event(f"pause {node_id}")

    def resume(self, node_id: int) -> None:
        if not self.signal_node(node_id, signal.SIGCONT):
            raise ClusterError(f"node {node_id} is not running")
        self._wait_proc_state(node_id, paused=False)
        self._event(f"resume {node_id}")

    def _wait_proc_state(self, node_id: int, paused: bool, timeout_s: float = 10.0) -> None:
        """Signals arrive asynchronously: until the kernel shows the process (un)stopped."""
        deadline = time.monotonic() + timeout_s
        while (self.node_state(node_id) == "paused") != paused:
            if time.monotonic() > deadline:
                raise ClusterError(f"node {node_id} did not {'stop' if paused else 'resume'}")
            time.sleep(0.01)

    def partition(self, node_ids: Iterable[int]) -> None:
        """Cut these nodes off from the others and from the host's clients (they still reach
        each other): network namespaces only."""
        ids = sorted(set(node_ids))
        for node_id in ids:
            self.state.node(node_id)
        if self.state.network != "netns":
            raise ClusterError("partitions need a cluster in network namespaces "
                               "(`kafkawire cluster up --netns`, as root)")
        from kafkawire import cluster_net

        cluster_net.partition(self.state.net, ids)
        self.state.net["partitioned"] = ids
        self.save()
        self._event(f"partition {','.join(map(str, ids))}")

    def heal(self) -> None:
        if self.state.network != "netns":
            return
        from kafkawire import cluster_net

        cluster_net.heal(self.state.net, [n.node_id for n in self.state.nodes])
        self.state.net["partitioned"] = []
        self.save()
        self._event("heal")

    def down(self, purge: bool = False) -> None:
        """Stop every node (SIGTERM, then SIGKILL), remove the namespaces; ``purge`` also
        deletes the cluster directory."""
        pids = {n.node_id: self.pid_of(n.node_id) for n in self.state.nodes}
        for pid in pids.values():
            if pid:
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for node_id, pid in pids.items():
            if pid and not self._wait_gone(node_id, pid, max(0.1, deadline - time.monotonic())):
                os.kill(pid, signal.SIGKILL)
                self._wait_gone(node_id, pid, STOP_TIMEOUT_S)
        for node in self.state.nodes:
            node.pid = 0
        if self.state.network == "netns":
            from kafkawire import cluster_net

            cluster_net.destroy(self.state.net, [n.node_id for n in self.state.nodes])
        if purge:
            shutil.rmtree(self.dir, ignore_errors=True)
            self._state = None
        else:
            self.save()

    # ---- readiness ----------------------------------------------------------------------------
    def node_ready(self, node_id: int) -> bool:
        node = self.state.node(node_id)
        if not self.pid_of(node_id):
            return False
        # /health/ready: started, registered and unfenced (brokers), the quorum has a leader
        return health(node.host, node.metrics_port)[0] == 200

    def wait_ready(self, node_ids: Iterable[int] | None = None,
                   timeout_s: float = READY_TIMEOUT_S) -> None:
        """Until every named node (default: all) serves; ``ClusterError`` naming the nodes
        that do not (and the tail of their logs) after ``timeout_s``, or at once when a node
        exited."""
        waiting = sorted(node_ids) if node_ids is not None else [n.node_id for n in self.state.nodes]
        deadline = time.monotonic() + timeout_s
        while waiting:
            for node_id in list(waiting):
                if not self.pid_of(node_id):
                    raise ClusterError(f"node {node_id} exited; its log ends:\n"
                                       f"{self.log_tail(node_id)}")
                if self.node_ready(node_id):
                    waiting.remove(node_id)
            if not waiting:
                return
            if time.monotonic() > deadline:
                tails = "\n".join(f"--- node {i}:\n{self.log_tail(i)}" for i in waiting)
                raise ClusterError(f"nodes {waiting} not ready after {timeout_s:g}s\n{tails}")
            time.sleep(0.2)

    def log_tail(self, node_id: int, lines: int = 15) -> str:
        try:
            text = self.log_path(node_id).read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def up(self, nodes: int, controllers: int = 0, network: str = "loopback",
           overrides: dict[str, str] | None = None, timeout_s: float = READY_TIMEOUT_S,
           **layout: Any) -> str:
        """Create (or, for an existing stopped cluster, start again) and wait until it serves;
        returns the bootstrap servers. ``layout``: ``create``'s keyword arguments."""
        if self.state_path.exists():
            running = [n.node_id for n in self.state.nodes if self.pid_of(n.node_id)]
            if self.state.network == "netns":
                from kafkawire import cluster_net

                cluster_net.create(self.state.net, [n.node_id for n in self.state.nodes])
        else:
            self.create(nodes, controllers, network, overrides, **layout)
            running = []
        try:
            self.start_all()
            self.wait_ready(timeout_s=timeout_s)
        except BaseException:
            if not running:  # leave nothing half-started behind
                self.down()
            raise
        return self.bootstrap

    def leader_of(self, topic: str, partition: int = 0, timeout_s: float = 30.0) -> int:
        """The node leading ``topic``'s ``partition``, waiting (up to ``timeout_s``) while the
        partition has no leader or no broker answers."""
        deadline = time.monotonic() + timeout_s
        while True:
            live = ",".join(n.address for n in self.state.brokers
                            if self.node_state(n.node_id) == "running")
            try:
                leader = partition_leaders(live, topic, timeout_s=2.0).get(partition, -1)
            except ClusterError:
                leader = -1
            if leader >= 0:
                return leader
            if time.monotonic() > deadline:
                raise ClusterError(f"{topic}-{partition} has no leader after {timeout_s:g}s")
            time.sleep(0.2)

    def quorum_leader(self, timeout_s: float = 30.0, not_node: int | None = None) -> int:
        """The metadata quorum's leader (the active controller) as the running controllers
        report it (DescribeQuorum), waiting up to ``timeout_s`` for one (other than
        ``not_node``, e.g. a leader just killed). The brokers' client listeners are asked
        too (they forward it to the leader): the only way in when the controller listener
        needs TLS or SASL."""
        deadline = time.monotonic() + timeout_s
        while True:
            up = [n for n in self.state.nodes
                  if n.node_id != not_node and self.node_state(n.node_id) == "running"]
            live = [f"{n.host}:{n.controller_port}" for n in up if n.is_controller]
            live += [f"{n.host}:{n.port}" for n in up if n.is_broker]
            leader, _epoch = describe_quorum_leader(live, timeout_s=2.0)
            if leader >= 0 and leader != not_node:
                return leader
            if time.monotonic() > deadline:
                raise ClusterError(f"no quorum leader after {timeout_s:g}s")
            time.sleep(0.2)

    def status_rows(self) -> list[dict[str, Any]]:
        rows = []
        partitioned = set(self.state.net.get("partitioned", []))
        for n in self.state.nodes:
            st = self.node_state(n.node_id)
            ready = "-"
            if st == "running":
                ready = "yes" if self.node_ready(n.node_id) else "no"
            rows.append({
                "node": n.node_id, "roles": ",".join(n.roles), "address": n.address,
                "controller": f"{n.host}:{n.controller_port}" if n.is_controller else "-",
                "metrics": f"{n.host}:{n.metrics_port}", "pid": self.pid_of(n.node_id) or "-",
                "state": st + (" (partitioned)" if n.node_id in partitioned else ""),
                "ready": ready,
            })
        return rows


# ---- look-ups without a client library (leader_of, quorum_leader) ---------------------------
METADATA_VERSION = 8  # the last non-flexible Metadata version
DESCRIBE_QUORUM_VERSION = 1


def kafka_request(address: str, req: Any, version: int, timeout_s: float = 5.0) -> Any:
    """One request with this repo's generated codecs over a plain socket; the decoded
    response. ``OSError`` when nothing answers."""
    import importlib

    from protocol._generated import API_INFO, RESPONSES
    from protocol._generated.request_header import RequestHeader

    key = req.API_KEY
    flexible = 0 <= API_INFO[key][3] <= version
    hdr = RequestHeader(request_api_key=key, request_api_version=version, correlation_id=7,
                        client_id="kafkawire-cluster")
    payload = hdr.encode(2 if flexible else 1) + req.encode(version)
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=timeout_s) as s:
        s.sendall(struct.pack(">i", len(payload)) + payload)
        frame = _recv_frame(s)
    pos = 5 if flexible and key != 18 else 4  # correlation id (+ tagged fields)
    mod, cls = RESPONSES[key]
    resp_cls = getattr(importlib.import_module(f"protocol._generated.{mod}"), cls)
    return resp_cls.decode(frame[pos:], version)


def partition_leaders(bootstrap: str, topic: str, timeout_s: float = 5.0) -> dict[int, int]:
    """``{partition: leader id}`` of ``topic`` (-1: no leader) from the first broker of
    ``bootstrap`` that answers a Metadata request; ``ClusterError`` when none does or the
    topic is unknown."""
    from protocol._generated.metadata_request import MetadataRequest

    req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                          allow_auto_topic_creation=False)
    errors = []
    for address in bootstrap.split(","):
        try:
            resp = kafka_request(address, req, METADATA_VERSION, timeout_s)
        except OSError as e:
            errors.append(f"{address}: {e}")
            continue
        for t in resp.topics:
            if t.name == topic:
                if t.error_code:
                    raise ClusterError(f"topic {topic}: error code {t.error_code}")
                return {p.partition_index: p.leader_id for p in t.partitions}
        raise ClusterError(f"topic {topic} not in the metadata of {address}")
    raise ClusterError(f"no broker answered ({'; '.join(errors)})")


def describe_quorum_leader(addresses: list[str], timeout_s: float = 5.0) -> tuple[int, int]:
    """(leader id, leader epoch) of the metadata quorum from the first controller listener
    that answers DescribeQuorum without an error; (-1, -1) when none does."""
    from protocol._generated.describe_quorum_request import DescribeQuorumRequest

    req = DescribeQuorumRequest(topics=[DescribeQuorumRequest.TopicData(
        topic_name="__cluster_metadata",
        partitions=[DescribeQuorumRequest.PartitionData(partition_index=0)])])
    for address in addresses:
        try:
            resp = kafka_request(address, req, DESCRIBE_QUORUM_VERSION, timeout_s)
        except (OSError, ValueError):
            continue
        if resp.error_code:
            continue
        for t in resp.topics:
            for p in t.partitions:
                if not p.error_code and p.leader_id >= 0:
                    return int(p.leader_id), int(p.leader_epoch)
    return -1, -1


def _recv_frame(s: socket.socket) -> bytes:
    def exact(n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = s.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed by the broker")
            buf += chunk
        return bytes(buf)

    (size,) = struct.unpack(">i", exact(4))
    return exact(size)
