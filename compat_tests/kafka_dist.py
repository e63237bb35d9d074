"""Apache Kafka from Maven Central, for the compatibility harness.

* :func:`fetch` copies the Kafka jars (``compat_tests/pom.xml``) into a cache directory outside
  the repository: ``$KAFKAWIRE_CACHE`` or ``~/.cache/kafkawire``. Two lines are known:
  ``"4.x"`` (broker + tools, Kafka 4.3.1) and ``"3.9"`` (clients, tools and core 3.9.2, the client
  line Spark 4.x uses). A completed fetch leaves a marker; later calls do nothing.
* :class:`KafkaBroker` / :func:`running_kafka` run a real single-node KRaft broker+controller on
  free loopback ports with a small heap, and stop it cleanly.
* :func:`run_java_tool` runs one of Kafka's Java entry points (TopicCommand, ConsoleProducer,
  ProducerPerformance, ClientCompatibilityTest, DumpLogSegments...) from either line.
* ``kafka_broker`` is a session-scoped pytest fixture yielding the bootstrap address.

Command line: ``python -m compat_tests.kafka_dist fetch|start|tool|classes`` (see README.md).
No Docker engine is needed. Where one is reachable, ``KAFKAWIRE_KAFKA_DOCKER=1`` (or ``auto``)
makes :func:`running_kafka` use the official ``apache/kafka`` image through testcontainers.
"""

from __future__ import annotations

import argparse
import atexit
import base64
import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
POM = HERE / "pom.xml"

KAFKA4_VERSION = "4.3.1"
KAFKA44_VERSION = "4.4.0"
KAFKA39_VERSION = "3.9.2"

# JVM settings: the machine has two cores shared with everything else.
BROKER_HEAP = os.environ.get("KAFKAWIRE_KAFKA_HEAP", "512m")
TOOL_HEAP = os.environ.get("KAFKAWIRE_TOOL_HEAP", "256m")
COMMON_JVM_OPTS = ["-XX:+UseSerialGC", "-Djava.awt.headless=true", "-XX:-UsePerfData"]
# Short-lived tools start faster with the C1 compiler only.
TOOL_JVM_OPTS = ["-XX:TieredStopAtLevel=1", "-Xshare:auto"]


class KafkaDistError(RuntimeError):
    pass


@dataclass(frozen=True)
class Line:
    name: str
    version: str
    profile: str
    log4j2: bool  # Kafka 4 logs through log4j2; 3.x through reload4j (log4j 1 API)

    @property
    def home(self) -> Path:
        return cache_dir() / f"kafka-{self.version}"

    @property
    def libs(self) -> Path:
        return self.home / "libs"

    @property
    def classpath(self) -> str:
        return str(self.libs / "*")

    @property
    def marker(self) -> Path:
        return self.home / ".fetched.json"


LINES: dict[str, Line] = {
    "4.x": Line("4.x", KAFKA4_VERSION, "kafka4", True),
    # Kafka 4.4.0: the 4.x line's artifacts but kafka-shell (not on Maven Central for 4.4.0)
    "4.4": Line("4.4", KAFKA44_VERSION, "kafka44", True),
    "3.9": Line("3.9", KAFKA39_VERSION, "kafka39", False),
}


def line_for(version: str) -> Line:
    if version in LINES:
        return LINES[version]
    for ln in LINES.values():
        if version == ln.version:
            return ln
    for ln in LINES.values():
        if version.startswith(ln.name.rstrip("x")):
            return ln
    raise KafkaDistError(f"unknown Kafka line {version!r}; known: {', '.join(LINES)}")


def cache_dir() -> Path:
    env = os.environ.get("KAFKAWIRE_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "kafkawire"


# --- fetching -----------------------------------------------------------------------------------


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def is_fetched(version: str = "4.x") -> bool:
    return line_for(version).marker.is_file()


def fetch(version: str = "4.x", *, force: bool = False, quiet: bool = True) -> Path:
    """Copy the jars of a Kafka line into the cache (once); returns its ``libs`` directory."""
    ln = line_for(version)
    if ln.marker.is_file() and not force:
        return ln.libs
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaDistError("Maven (mvn) is needed to fetch the Kafka jars")
    with _lock(cache_dir() / ".fetch.lock"):
        if ln.marker.is_file() and not force:
            return ln.libs
        started = time.monotonic()
        staging = Path(tempfile.mkdtemp(prefix=f".kafka-{ln.version}-", dir=cache_dir()))
        cmd = [
            mvn,
            "-B",
            "-f",
            str(POM),
            f"-P{ln.profile}",
            f"-Dmaven.repo.local={cache_dir() / 'm2'}",
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={staging / 'libs'}",
        ]
        if quiet:
            cmd.insert(1, "-q")
        proc = subprocess.run(cmd, capture_output=quiet, text=True)
        if proc.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            detail = (proc.stdout or "")[-4000:] + (proc.stderr or "")[-2000:] if quiet else ""
            raise KafkaDistError(f"mvn failed ({proc.returncode}): {' '.join(cmd)}\n{detail}")
        _write_log_configs(staging / "config")
        if ln.home.exists():
            shutil.rmtree(ln.home)
        staging.rename(ln.home)
        jars = sorted(p.name for p in ln.libs.glob("*.jar"))
        ln.marker.write_text(
            json.dumps(
                {
                    "version": ln.version,
                    "fetched_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                    "seconds": round(time.monotonic() - started, 1),
                    "jars": jars,
                },
                indent=1,
            )
        )
    return ln.libs


_LOG4J2_TEMPLATE = """\
status = warn
appender.main.type = {kind}
appender.main.name = MAIN
{target}
appender.main.layout.type = PatternLayout
appender.main.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.main.ref = MAIN
logger.kafka.name = kafka
logger.kafka.level = {level}
logger.apache.name = org.apache.kafka
logger.apache.level = {level}
"""

_LOG4J1_TEMPLATE = """\
log4j.rootLogger={level}, main
log4j.appender.main={appender}
{target}
log4j.appender.main.layout=org.apache.log4j.PatternLayout
log4j.appender.main.layout.ConversionPattern=[%d] %p %m (%c)%n
"""


def _write_log_configs(conf: Path) -> None:
    """Logging configs: tools log WARN to stderr; the broker logs INFO to ``$KAFKAWIRE_LOG``."""
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "tools-log4j2.properties").write_text(
        _LOG4J2_TEMPLATE.format(
            kind="Console", target="appender.main.target = SYSTEM_ERR", level="WARN"
        )
    )
    (conf / "server-log4j2.properties").write_text(
        _LOG4J2_TEMPLATE.format(
            kind="File", target="appender.main.fileName = ${sys:kafkawire.log.file}", level="INFO"
        )
    )
    (conf / "tools-log4j.properties").write_text(
        _LOG4J1_TEMPLATE.format(
            level="WARN",
            appender="org.apache.log4j.ConsoleAppender",
            target="log4j.appender.main.Target=System.err",
        )
    )
    (conf / "server-log4j.properties").write_text(
        _LOG4J1_TEMPLATE.format(
            level="INFO",
            appender="org.apache.log4j.FileAppender",
            target="log4j.appender.main.File=${kafkawire.log.file}",
        )
    )


def _log_opts(ln: Line, role: str, log_file: Path | None = None) -> list[str]:
    conf = ln.home / "config"
    if not (conf / f"{role}-log4j2.properties").exists():
        _write_log_configs(conf)
    opts = []
    if ln.log4j2:
        opts.append(f"-Dlog4j2.configurationFile={conf / f'{role}-log4j2.properties'}")
    else:
        opts.append(f"-Dlog4j.configuration=file:{conf / f'{role}-log4j.properties'}")
    if log_file is not None:
        opts.append(f"-Dkafkawire.log.file={log_file}")
    return opts


def java_executable() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise KafkaDistError("java is not installed (Java 17+ is needed for Kafka 4)")
    return java


def java_command(
    main_class: str,
    args: Sequence[str],
    version: str = "4.x",
    *,
    heap: str = TOOL_HEAP,
    role: str = "tools",
    log_file: Path | None = None,
    jvm_opts: Sequence[str] = (),
) -> list[str]:
    ln = line_for(version)
    fetch(ln.name)
    extra = TOOL_JVM_OPTS if role == "tools" else []
    return [
        java_executable(),
        f"-Xmx{heap}",
        *COMMON_JVM_OPTS,
        *extra,
        *_log_opts(ln, role, log_file),
        *jvm_opts,
        "-cp",
        ln.classpath,
        main_class,
        *args,
    ]


def run_java_tool(
    main_class: str,
    args: Sequence[str] = (),
    version: str = "4.x",
    *,
    timeout: float = 300,
    check: bool = True,
    input: str | None = None,
    heap: str = TOOL_HEAP,
    jvm_opts: Sequence[str] = (),
) -> subprocess.CompletedProcess[str]:
    """Run a Kafka Java entry point (e.g. ``org.apache.kafka.tools.TopicCommand``) to completion.

    ``version`` is ``"4.x"`` or ``"3.9"``. Class names differ between the lines: in 3.9
    ConsoleProducer, DumpLogSegments and BrokerApiVersionsCommand still live in core
    (``kafka.tools.*``, ``kafka.admin.*``); in 4.x they are ``org.apache.kafka.tools.*``.
    """
    cmd = java_command(main_class, args, version, heap=heap, jvm_opts=jvm_opts)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, input=input)
    if check and proc.returncode != 0:
        raise KafkaDistError(
            f"{main_class} exited {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\n"
            f"stderr:\n{proc.stderr[-3000:]}"
        )
    return proc


def list_main_classes(version: str = "4.x", pattern: str = "") -> list[str]:
    """Classes with a ``main`` we know of, by scanning jar listings (for discovering names)."""
    import zipfile

    ln = line_for(version)
    fetch(ln.name)
    names: list[str] = []
    for jar in sorted(ln.libs.glob("kafka*.jar")):
        with zipfile.ZipFile(jar) as z:
            for n in z.namelist():
                if n.endswith(".class") and "$" not in n and pattern.lower() in n.lower():
                    names.append(n[:-6].replace("/", "."))
    return names


# --- running a broker ---------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def random_cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding (like Uuid)."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


DEFAULT_BROKER_PROPS: dict[str, str] = {
    "num.partitions": "1",
    "default.replication.factor": "1",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
}


def _wait_metadata(bootstrap: str, deadline: float, check: Callable[[], None]) -> None:
    """Wait until Metadata lists a broker (the broker is registered and unfenced)."""
    from compat_tests.wire import Connection
    from protocol._generated.metadata_request import MetadataRequest

    last: Exception | None = None
    while time.monotonic() < deadline:
        check()
        try:
            with Connection(bootstrap, timeout=5) as c:
                if c.request(MetadataRequest(topics=[]), 12).brokers:
                    return
        except (OSError, ConnectionError) as e:
            last = e
        time.sleep(0.2)
    raise TimeoutError(f"Kafka on {bootstrap} not ready in time (last error {last!r})")


class KafkaBroker:
    """A real single-node Apache Kafka (KRaft combined broker+controller) on loopback."""

    def __init__(
        self,
        workdir: Path | None = None,
        *,
        version: str = "4.x",
        overrides: dict[str, str] | None = None,
        heap: str = BROKER_HEAP,
    ) -> None:
        self.line = line_for(version)
        self._own_workdir = workdir is None
        self.workdir = (
            Path(tempfile.mkdtemp(prefix="kafka-compat-")) if workdir is None else workdir
        )
        self.port = free_port()
        self.controller_port = free_port()
        self.heap = heap
        self.props: dict[str, str] = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},"
            f"CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.workdir / "data"),
            **DEFAULT_BROKER_PROPS,
            **(overrides or {}),
        }
        self.proc: subprocess.Popen[bytes] | None = None
        self.cluster_id = random_cluster_id()
        self.start_seconds: float | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def config_file(self) -> Path:
        return self.workdir / "server.properties"

    @property
    def log_file(self) -> Path:
        return self.workdir / "server.log"

    def write_config(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        lines = [f"{k}={v}" for k, v in self.props.items()]
        self.config_file.write_text("\n".join(lines) + "\n")

    def format_storage(self) -> None:
        self.write_config()
        # Static quorum (controller.quorum.voters): no --standalone; works on 3.9 and 4.x.
        cmd = java_command(
            "kafka.tools.StorageTool",
            ["format", "-t", self.cluster_id, "-c", str(self.config_file)],
            self.line.name,
        )
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise KafkaDistError(f"kafka-storage format failed:\n{proc.stdout}\n{proc.stderr}")

    def start(self, timeout: float = 90.0, *, format: bool = True) -> str:
        """Format the storage (unless ``format`` is False: a restart) and start the broker;
        returns once it answers Metadata."""
        t0 = time.monotonic()
        if format:
            self.format_storage()
        cmd = java_command(
            "kafka.Kafka",
            [str(self.config_file)],
            self.line.name,
            heap=self.heap,
            role="server",
            log_file=self.log_file,
            jvm_opts=["-Xms64m"],
        )
        out = open(self.workdir / "stdout.log", "wb")
        self.proc = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        out.close()
        _live.add(self)
        try:
            self._wait_ready(t0 + timeout)
        except BaseException:
            self.stop()
            raise
        self.start_seconds = round(time.monotonic() - t0, 2)
        return self.bootstrap

    def _wait_ready(self, deadline: float) -> None:
        def check_alive() -> None:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise KafkaDistError(
                    f"Kafka exited with {self.proc.returncode} while starting\n{self.tail()}"
                )

        try:
            _wait_metadata(self.bootstrap, deadline, check_alive)
        except TimeoutError as e:
            raise KafkaDistError(f"{e}\n{self.tail()}") from None

    def tail(self, n: int = 40) -> str:
        parts = []
        for f in (self.workdir / "stdout.log", self.log_file):
            if f.exists():
                parts.append(
                    f"--- {f}\n" + "\n".join(f.read_text(errors="replace").splitlines()[-n:])
                )
        return "\n".join(parts)

    def stop(self, timeout: float = 30.0) -> None:
        proc, self.proc = self.proc, None
        _live.discard(self)
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._own_workdir and not os.environ.get("KAFKAWIRE_KEEP_LOGS"):
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> KafkaBroker:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


_live: set[KafkaBroker] = set()


@atexit.register
def _stop_leftovers() -> None:
    for b in list(_live):
        b.stop(timeout=10)


@contextlib.contextmanager
def running_kafka(
    version: str = "4.x",
    overrides: dict[str, str] | None = None,
) -> Iterator[str]:
    """Start a real Kafka, yield its bootstrap address, stop it afterwards.

    The jar path (Maven Central + local Java) is the default. ``KAFKAWIRE_KAFKA_DOCKER=1`` uses
    the official image instead; ``=auto`` does so only when Java or Maven is missing and a
    Docker engine answers.
    """
    mode = os.environ.get("KAFKAWIRE_KAFKA_DOCKER", "0")
    if mode == "auto":
        no_jars = shutil.which("mvn") is None and not is_fetched(version)
        mode = "1" if (no_jars or shutil.which("java") is None) and docker_available() else "0"
    if mode == "1":
        with _docker_kafka(overrides) as bootstrap:
            yield bootstrap
        return
    with KafkaBroker(version=version, overrides=overrides) as broker:
        yield broker.bootstrap


def docker_available() -> bool:
    """True when a Docker engine answers (testcontainers' docker client)."""
    try:
        import docker

        docker.from_env(timeout=3).ping()
        return True
    except Exception:
        return False


def _docker_env_name(prop: str) -> str:
    # The apache/kafka image maps KAFKA_* variables to properties; the properties used here
    # contain only dots, which every documented convention maps to single underscores.
    assert "_" not in prop and "-" not in prop, prop
    return "KAFKA_" + prop.upper().replace(".", "_")


@contextlib.contextmanager
def _docker_kafka(overrides: dict[str, str] | None) -> Iterator[str]:
    """The official ``apache/kafka`` image (only where a Docker engine is reachable; this path
    is not exercised on machines without Docker)."""
    from testcontainers.core.container import DockerContainer

    port = free_port()
    props = {
        "node.id": "1",
        "process.roles": "broker,controller",
        "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.quorum.voters": "1@localhost:9093",
        **DEFAULT_BROKER_PROPS,
        **(overrides or {}),
    }
    container = DockerContainer(f"apache/kafka:{KAFKA4_VERSION}").with_bind_ports(9092, port)
    for k, v in props.items():
        container.with_env(_docker_env_name(k), v)
    with container:
        bootstrap = f"127.0.0.1:{port}"
        _wait_metadata(bootstrap, time.monotonic() + 120, lambda: None)
        yield bootstrap


# --- for tests ----------------------------------------------------------------------------------

REQUIRE_ENV = "KAFKAWIRE_REQUIRE_KAFKA"


def unavailable_reason(version: str = "4.x") -> str | None:
    """Why Kafka's jars of ``version`` cannot be used here (fetching them if needed), or None."""
    try:
        java_executable()
        fetch(version)
    except KafkaDistError as e:
        return str(e).splitlines()[0]
    return None


def kafka_required() -> bool:
    """``make test`` sets KAFKAWIRE_REQUIRE_KAFKA=1: tests needing Kafka's jars must not skip."""
    return os.environ.get(REQUIRE_ENV) == "1"


# --- pytest fixture -----------------------------------------------------------------------------

try:
    import pytest
except ImportError:  # pragma: no cover - the module also works without pytest
    pass
else:

    @pytest.fixture(scope="session")
    def kafka_broker() -> Iterator[str]:
        """Bootstrap address of a real Apache Kafka 4.x, started once per session."""
        try:
            fetch("4.x")
        except KafkaDistError as e:
            pytest.fail(f"cannot fetch Apache Kafka: {e}")
        with running_kafka() as bootstrap:
            yield bootstrap


# --- command line -------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m compat_tests.kafka_dist")
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch", help="download the jars into the cache (no-op when cached)")
    f.add_argument("--line", action="append", choices=sorted(LINES), help="default: all")
    f.add_argument("--force", action="store_true")
    f.add_argument("--verbose", action="store_true")
    s = sub.add_parser("start", help="run a broker in the foreground until Ctrl-C")
    s.add_argument("--line", default="4.x", choices=sorted(LINES))
    t = sub.add_parser("tool", help="run a Java main class: tool [--line 3.9] CLASS [ARGS...]")
    t.add_argument("--line", default="4.x", choices=sorted(LINES))
    t.add_argument("main_class")
    t.add_argument("args", nargs=argparse.REMAINDER)
    c = sub.add_parser("classes", help="list classes in the Kafka jars matching a pattern")
    c.add_argument("--line", default="4.x", choices=sorted(LINES))
    c.add_argument("pattern", nargs="?", default="")
    sub.add_parser("where", help="print the cache directory")
    a = ap.parse_args(argv)

    if a.cmd == "fetch":
        for name in a.line or sorted(LINES, reverse=True):
            t0 = time.monotonic()
            cached = is_fetched(name) and not a.force
            libs = fetch(name, force=a.force, quiet=not a.verbose)
            state = "cached" if cached else f"fetched in {time.monotonic() - t0:.1f}s"
            print(f"Kafka {line_for(name).version}: {libs} ({state})")
    elif a.cmd == "start":

        def interrupt(signum: int, frame: object) -> None:
            raise KeyboardInterrupt

        # Also when started in the background (SIGINT ignored) or stopped with kill.
        signal.signal(signal.SIGINT, interrupt)
        signal.signal(signal.SIGTERM, interrupt)
        with KafkaBroker(version=a.line) as b:
            print(
                f"Kafka {b.line.version} on {b.bootstrap} (started in {b.start_seconds}s); "
                f"logs in {b.workdir}; Ctrl-C stops it",
                flush=True,
            )
            with contextlib.suppress(KeyboardInterrupt):
                while b.proc is not None and b.proc.poll() is None:
                    time.sleep(0.5)
    elif a.cmd == "tool":
        cmd = java_command(a.main_class, a.args, a.line)
        return subprocess.call(cmd)
    elif a.cmd == "classes":
        print("\n".join(list_main_classes(a.line, a.pattern)))
    elif a.cmd == "where":
        print(cache_dir())
    return 0


if __name__ == "__main__":
    sys.exit(main())
