"""pytest plugin: a real kafkawire broker for your tests.

Installed with kafkawire (entry point ``pytest11``), it offers:

- ``kafkawire_bootstrap`` (session): ``"127.0.0.1:<port>"`` of a broker running as a subprocess
  with its data in a temporary directory, shared by the session.
- ``kafkawire_broker`` (function): a fresh ``BrokerProcess`` of your own (restart it, kill -9 it).
- ``BrokerProcess`` for scripts: ``with BrokerProcess(data_dir) as b: use(b.bootstrap)``.
- ``InProcessBroker``: the same broker on a background thread of this process (no fork/exec),
  for quick unit-style tests.
- ``kafkawire_cluster`` (function): a cluster of real kafkawire processes
  (``kafkawire.tools.cluster.LocalCluster``, also for scripts and tests that build their own
  layout: ``with LocalCluster(dir) as c: c.up(...)``) with fault methods: ``kill(node)``, ``restart(node,
  hard=False)``, ``stop``/``start_node``, ``pause``/``resume`` (SIGSTOP/SIGCONT),
  ``partition(*nodes)``/``heal()`` (network namespaces: root only, else the test is skipped),
  ``leader_of(topic, partition)``, ``bootstrap``. Size it with a marker:
  ``@pytest.mark.kafkawire_cluster(nodes=3, controllers=0, netns=False, overrides={...})``
  (default: 3 combined broker+controller nodes on loopback)::

      def test_survives_leader_loss(kafkawire_cluster):
          produce(kafkawire_cluster.bootstrap, "orders", acks="all")
          kafkawire_cluster.kill(kafkawire_cluster.leader_of("orders", 0))
          assert nothing_lost(kafkawire_cluster.bootstrap, "orders")

Options: ``--kafkawire-in-process`` makes ``kafkawire_bootstrap`` use the in-process broker.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkawire.tools.cluster import api_versions_ok as api_versions_ok
from kafkawire.tools.cluster import describe_quorum_leader as _quorum_leader


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class BrokerProcess:
    """A kafkawire broker as a child process (``python -m kafkawire serve``)."""

    def __init__(
        self,
        data_dir: str | Path | None = None,
        port: int | None = None,
        overrides: dict[str, str] | None = None,
        log_file: str | Path | None = None,
        log_level: str | None = None,
        metrics_port: int | None = None,
        open_files_limit: int | None = None,
    ) -> None:
        #: the broker's soft open-file limit (``ulimit -n``); None: inherited
        self.open_files_limit = open_files_limit
        #: the broker's ``--log-level``; ``KAFKAWIRE_LOG_LEVEL`` (e.g. DEBUG, which traces
        #: every request and response) when not given
        self.log_level = log_level or os.environ.get("KAFKAWIRE_LOG_LEVEL")
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="kafkawire-")
            data_dir = self._tmp.name
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.overrides = dict(overrides or {})
        #: /metrics and /health on this port (``metrics.port``; 0: off); a free one by default
        if "metrics.port" in self.overrides:
            self.metrics_port = int(self.overrides.pop("metrics.port"))
        else:
            self.metrics_port = free_port() if metrics_port is None else metrics_port
        self.log_path = Path(log_file) if log_file else self.data_dir.parent / (
            self.data_dir.name + ".broker.log"
        )
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def metrics_url(self) -> str:
        """``http://127.0.0.1:<metrics port>`` (append /metrics, /health/ready, /health/live)."""
        return f"http://127.0.0.1:{self.metrics_port}"

    def command(self) -> list[str]:
        props = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dir": str(self.data_dir),
            "metrics.port": str(self.metrics_port),
            **self.overrides,
        }
        cmd = [sys.executable, "-m", "kafkawire", "serve"]
        if self.log_level:
            cmd += ["--log-level", self.log_level]
        for k, v in props.items():
            cmd += ["--override", f"{k}={v}"]
        return cmd

    def start(self, timeout_s: float = 30.0) -> BrokerProcess:
        """Start the broker process and wait until it answers ApiVersions. A no-op while it
        runs (``with BrokerProcess(...).start() as bp`` must not start a second one)."""
        if self.proc is not None and self.proc.poll() is None:
            return self
        self.launch()
        return self.wait_ready(timeout_s)

    def format(self, cluster_id: str, *args: str) -> None:
        """``kafkawire format --cluster-id ID [args]`` with this node's settings (a cluster
        node must be formatted before its first start)."""
        serve = self.command()
        cmd = [*serve[:3], "format", "--cluster-id", cluster_id, *args]
        cmd += [a for i, a in enumerate(serve) if a == "--override" or (
            i > 0 and serve[i - 1] == "--override")]
        p = subprocess.run(cmd, capture_output=True, text=True, env=self._env(), timeout=120)
        if p.returncode != 0:
            raise RuntimeError(f"kafkawire format failed: {p.stderr or p.stdout}")

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        return env

    def launch(self) -> None:
        """Start the process without waiting for it (``wait_ready`` waits)."""
        if self.proc is not None and self.proc.poll() is None:
            return
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        out = open(self.log_path, "ab")
        env = self._env()
        self.proc = subprocess.Popen(
            self.command(), stdout=out, stderr=subprocess.STDOUT, env=env,
            preexec_fn=self._limit_open_files if self.open_files_limit else None,
        )
        out.close()

    def wait_ready(self, timeout_s: float = 30.0) -> BrokerProcess:
        """Until the process answers ApiVersions on ``port`` (a broker listener answers once
        the node is registered and unfenced); RuntimeError when it exits or times out."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kafkawire exited with {self.proc.returncode}:\n{self.log()}")
            if api_versions_ok("127.0.0.1", self.port):
                return self
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"kafkawire did not start within {timeout_s}s:\n{self.log()}")

    def _limit_open_files(self) -> None:  # runs in the child before exec
        import resource

        _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (self.open_files_limit or _soft, hard))

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-5000:]
        except OSError:
            return ""

    def stop(self, timeout_s: float = 20.0) -> int:
        """SIGTERM and wait: a clean shutdown. Returns the exit code."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        rc = self.proc.returncode
        self.proc = None
        return int(rc)

    def kill(self) -> None:
        """kill -9: no chance to flush or close anything."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        self.proc = None

    def restart(self, kill: bool = False) -> BrokerProcess:
        if kill:
            self.kill()
        else:
            self.stop()
        return self.start()

    def close(self) -> None:
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def describe_quorum_leader(host: str, port: int, timeout_s: float = 5.0) -> tuple[int, int]:
    """(leader id, epoch) from DescribeQuorum on a controller listener; (-1, -1) when the
    node does not answer or knows no leader."""
    return _quorum_leader([f"{host}:{port}"], timeout_s)

class InProcessBroker:
    """A kafkawire broker on a background thread with its own trio loop."""

    def __init__(self, data_dir: str | Path, port: int | None = None, **overrides: str) -> None:
        self.port = port or free_port()
        self.props = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dir": str(data_dir),
            **overrides,
        }
        self._thread: threading.Thread | None = None
        self._token: Any = None
        self._cancel: Any = None
        self._error: BaseException | None = None
        #: the running ``kafkawire.broker.Broker`` (tests that hold one of its parts)
        self.broker: Any = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 30.0) -> InProcessBroker:
        import trio

        from kafkawire.broker import Broker
        from kafkawire.config.broker_config import BrokerConfig

        cfg = BrokerConfig.from_dict(self.props)
        ready = threading.Event()

        async def main() -> None:
            self._token = trio.lowlevel.current_trio_token()
            async with trio.open_nursery() as nursery:
                self._cancel = nursery.cancel_scope
                self.broker = Broker(cfg)
                await nursery.start(self.broker.run)
                ready.set()

        def runner() -> None:
            try:
                trio.run(main)
            except BaseException as e:  # reported by start()
                self._error = e
                ready.set()

        self._thread = threading.Thread(target=runner, name="kafkawire", daemon=True)
        self._thread.start()
        if not ready.wait(timeout_s) or self._error is not None:
            raise RuntimeError(f"in-process kafkawire failed to start: {self._error!r}")
        return self

    def stop(self) -> None:
        if self._thread is None:
            return
        if self._token is not None and self._cancel is not None:
            try:
                self._token.run_sync_soon(self._cancel.cancel)
            except RuntimeError:
                pass
        self._thread.join(30)
        self._thread = None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "kafkawire_cluster(nodes=3, controllers=0, netns=False, overrides=None): "
        "the size and network of the kafkawire_cluster fixture")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kafkawire")
    group.addoption(
        "--kafkawire-in-process",
        action="store_true",
        default=False,
        help="run the kafkawire_bootstrap broker on a thread of the test process",
    )


@pytest.fixture(scope="session")
def kafkawire_bootstrap(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    data = tmp_path_factory.mktemp("kafkawire-data")
    if request.config.getoption("--kafkawire-in-process"):
        ib = InProcessBroker(data).start()
        try:
            yield ib.bootstrap
        finally:
            ib.stop()
        return
    bp = BrokerProcess(data).start()
    try:
        yield bp.bootstrap
    finally:
        bp.close()


@pytest.fixture
def kafkawire_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    bp = BrokerProcess(tmp_path / "data").start()
    try:
        yield bp
    finally:
        bp.close()


@pytest.fixture
def kafkawire_cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A running ``kafkawire.tools.cluster.LocalCluster`` (see the module docstring), stopped and
    its namespaces removed after the test."""
    from kafkawire.tools.cluster import LocalCluster
    from kafkawire.tools.cluster_net import available

    marker = request.node.get_closest_marker("kafkawire_cluster")
    opts: dict[str, Any] = dict(marker.kwargs) if marker is not None else {}
    netns = bool(opts.get("netns", False))
    if netns:
        why = available()
        if why is not None:
            pytest.skip(f"kafkawire_cluster(netns=True): {why}")
    cluster = LocalCluster(tmp_path / "cluster")
    try:
        cluster.up(int(opts.get("nodes", 3)), int(opts.get("controllers", 0)),
                   "netns" if netns else "loopback", dict(opts.get("overrides") or {}),
                   timeout_s=float(opts.get("timeout_s", 180.0)))
        yield cluster
    finally:
        if cluster.state_path.exists():
            cluster.down()
