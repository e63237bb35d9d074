"""Other people's integration suites against a 3-node kafkawire and a 3-node Apache Kafka (issue 27).

    python -m compat_tests.suites fetch                       # sources and builds, cached
    python -m compat_tests.suites run --system kafkawire      # every suite, one fresh cluster
    python -m compat_tests.suites run --system kafka --suite franz-go
    python -m compat_tests.suites compare                     # kafkawire's failures Kafka passes

``make suites`` runs all of it (``SYSTEMS=kafkawire,kafka``, ``SUITES=...``). Every suite runs
against a fresh 3-node cluster of the system (three combined broker+controller nodes on
loopback, ``kafka_cluster.CLUSTER_PROPS`` plus ``SUITE_PROPS``: the same properties on both
systems). The results go to ``<out>/<system>/<suite>.json`` (passed, failed, skipped test names,
seconds) and the logs beside them; ``compare`` lists, per suite, what failed on kafkawire but
passed on Kafka (and the reverse).

Suites (each fetched with its registry's own client, the versions pinned below):

* ``franz-go``: ``pkg/kgo``'s tests from the Go module proxy (``go mod download``), built once
  with ``go test -c``; run with ``KGO_SEEDS`` = the three nodes, ``KGO_TEST_RECORDS`` records
  per test (franz-go's default is 500,000; ``FRANZ_RECORDS`` here).
* ``kafka-python``: ``test/integration`` of the kafka-python sdist from PyPI (``pip
  download --no-binary``), run with pytest, ``KAFKA_URI`` = the first node (its fixtures then
  use the running cluster instead of starting Kafka), ``KAFKA_VERSION``.
* ``librdkafka``: ``tests/`` of the librdkafka that the ``node-rdkafka`` npm package vendors
  (``npm pack``), built with ``make -C tests build`` (no SASL/zstd/curl; the tests needing them
  skip), run as ``test-runner -Q -L -E -p1`` (the quick suite without the broker-less and
  socket-emulation tests, one test at a time) with
  ``test.conf``'s ``metadata.broker.list`` = the three nodes and ``TEST_KAFKA_VERSION``.
* ``confluent-kafka-python``: not runnable from a registry: its PyPI sdists prune ``tests/``
  (checked 1.9.2, 2.0.2, 2.3.0, 2.16.2), so ``fetch`` reports it and ``run`` skips it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from compat_tests.kafka_dist import cache_dir

FRANZ_GO = "github.com/twmb/franz-go"
FRANZ_GO_VERSION = "v1.22.3"
KAFKA_PYTHON_VERSION = "3.0.12"
NODE_RDKAFKA_VERSION = "3.6.1"  # vendors librdkafka 2.12.0
SUITES = ("franz-go", "kafka-python", "librdkafka")
SYSTEMS = {"kafkawire": "kafkawire", "kafka": "Apache Kafka 4.3.1", "kafka44": "Apache Kafka 4.4.0"}
KAFKA_LINES = {"kafka": ("4.x", "4.3.1"), "kafka44": ("4.4", "4.4.0")}

#: what the suites expect of a test cluster, beyond CLUSTER_PROPS, on both systems
SUITE_PROPS = {
    # librdkafka's and kafka-python's own test clusters create 4 partitions per topic, and
    # some of their tests produce to partition 3 of an auto-created topic
    "num.partitions": "4",
    "auto.create.topics.enable": "true",
    "delete.topic.enable": "true",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
}
#: per-suite bounds, seconds (a loaded 2-core machine)
TIMEOUTS = {"franz-go": 3600, "kafka-python": 2400, "librdkafka": 5400}
FRANZ_RECORDS = int(os.environ.get("FRANZ_RECORDS", "20000"))


def suites_dir() -> Path:
    d = cache_dir() / "suites"
    d.mkdir(parents=True, exist_ok=True)
    return d


def say(msg: str) -> None:
    print(f"[suites {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def sh(cmd: list[str], cwd: Path | None = None, env: dict[str, str] | None = None,
       log: Path | None = None, timeout: float | None = None) -> int:
    """Run ``cmd``; output to ``log`` (appended) or inherited. Returns the exit status (124
    after ``timeout``). In the log, a line repeated is written once with its count and lines are
    cut at 2,000 characters (a failing franz-go test repeats its error for every record:
    hundreds of MB otherwise)."""
    full_env = {**os.environ, **(env or {})}
    if log is None:
        return subprocess.run(cmd, cwd=cwd, env=full_env, timeout=timeout, check=False).returncode
    deadline = None if timeout is None else time.monotonic() + timeout
    with log.open("a", encoding="utf-8", errors="replace") as f:
        f.write(f"$ {' '.join(cmd)}\n")
        f.flush()
        proc = subprocess.Popen(cmd, cwd=cwd, env=full_env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, errors="replace")
        timer = None
        if deadline is not None:
            import threading

            timer = threading.Timer(timeout or 0, proc.kill)
            timer.daemon = True
            timer.start()
        assert proc.stdout is not None
        last, repeats = None, 0
        for line in proc.stdout:
            if line == last:
                repeats += 1
                continue
            if repeats:
                f.write(f"    [previous line {repeats} more times]\n")
            f.write(line if len(line) <= 2000 else line[:2000] + " [cut]\n")
            last, repeats = line, 0
        if repeats:
            f.write(f"    [previous line {repeats} more times]\n")
        rc = proc.wait()
        if timer is not None:
            timer.cancel()
        if deadline is not None and time.monotonic() >= deadline:
            f.write(f"\n[suites] stopped after {timeout} s\n")
            return 124
        return rc


# --- fetching and building ------------------------------------------------------------------


def franz_go_binary() -> Path:
    """``pkg/kgo``'s test binary, built once from the module proxy's franz-go."""
    root = suites_dir() / f"franz-go-{FRANZ_GO_VERSION}"
    binary = root / "kgo.test"
    if binary.exists():
        return binary
    gopath = suites_dir() / "gopath"
    env = {"GOPATH": str(gopath), "GOFLAGS": "-mod=mod"}
    out = subprocess.run(["go", "mod", "download", "-json", f"{FRANZ_GO}@{FRANZ_GO_VERSION}"],
                         env={**os.environ, **env}, capture_output=True, text=True, check=True)
    src = Path(json.loads(out.stdout)["Dir"])
    work = root / "src"
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(src, work)
    for p in work.rglob("*"):
        p.chmod(p.stat().st_mode | 0o200)
    subprocess.run(["go", "test", "-c", "-o", str(binary), "./pkg/kgo"], cwd=work,
                   env={**os.environ, **env}, check=True)
    return binary


KAFKA_PYTHON_SERVICE_SHIM = '''"""Written by kafkawire's compat_tests/suites.py: the sdist has no test/service.py."""


class ExternalService:
    """A broker someone else runs (KAFKA_URI): nothing to start, stop or wait for."""

    def __init__(self, host, port):
        self.host, self.port = host, port

    def start(self):
        pass

    def stop(self):
        pass

    def wait_for(self, pattern, timeout=30):
        return True

    def dump_logs(self):
        pass


class SpawnedService:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("set KAFKA_URI: spawning brokers is not supported here")
'''


def kafka_python_tests() -> Path:
    """The kafka-python sdist (its ``test/`` directory), extracted once."""
    root = suites_dir() / f"kafka-python-{KAFKA_PYTHON_VERSION}"
    if (root / "test" / "service.py").exists():
        return root
    dl = suites_dir() / "dl"
    dl.mkdir(exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                    "-q", f"kafka-python=={KAFKA_PYTHON_VERSION}", "-d", str(dl)], check=True)
    (sdist,) = dl.glob(f"kafka_python-{KAFKA_PYTHON_VERSION}.tar.gz")
    with tempfile.TemporaryDirectory(dir=suites_dir()) as tmp:
        with tarfile.open(sdist) as tf:
            tf.extractall(tmp, filter="data")
        shutil.move(str(Path(tmp) / f"kafka_python-{KAFKA_PYTHON_VERSION}"), root)
    # its tests import ``test.testutil``: without an __init__.py the standard library's own
    # ``test`` package wins over the sdist's namespace package
    (root / "test" / "__init__.py").touch()
    # the sdist lacks test/service.py, which its fixtures import; against a running broker
    # (KAFKA_URI) they only construct an ExternalService, whose start/stop do nothing: our own
    # stand-in, which refuses to spawn brokers
    (root / "test" / "service.py").write_text(KAFKA_PYTHON_SERVICE_SHIM)
    return root


def librdkafka_tests() -> Path:
    """librdkafka's ``tests/`` built (``test-runner``), from the node-rdkafka npm package."""
    root = suites_dir() / f"librdkafka-node-rdkafka-{NODE_RDKAFKA_VERSION}"
    runner = root / "tests" / "test-runner"
    if runner.exists():
        return root / "tests"
    dl = suites_dir() / "dl"
    dl.mkdir(exist_ok=True)
    tgz = dl / f"node-rdkafka-{NODE_RDKAFKA_VERSION}.tgz"
    if not tgz.exists():
        subprocess.run(["npm", "pack", f"node-rdkafka@{NODE_RDKAFKA_VERSION}", "--silent"],
                       cwd=dl, check=True, stdout=subprocess.DEVNULL)
    if not root.exists():
        with tempfile.TemporaryDirectory(dir=suites_dir()) as tmp:
            with tarfile.open(tgz) as tf:
                tf.extractall(tmp, filter="data")
            shutil.move(str(Path(tmp) / "package" / "deps" / "librdkafka"), root)
    log = suites_dir() / f"librdkafka-build-{NODE_RDKAFKA_VERSION}.log"
    steps = [
        ["./configure", "--disable-gssapi", "--disable-curl", "--disable-zstd",
         "--disable-lz4-ext", "--disable-sasl"],
        ["make", "-j2", "libs"],
        ["make", "-C", "tests", "-j2", "build"],
    ]
    for cmd in steps:
        if sh(["nice", "-n", "10", *cmd], cwd=root, log=log) != 0:
            raise RuntimeError(f"building librdkafka failed: {cmd} (see {log})")
    return root / "tests"


def fetch(suites: list[str]) -> None:
    for s in suites:
        say(f"fetching {s}")
        {"franz-go": franz_go_binary, "kafka-python": kafka_python_tests,
         "librdkafka": librdkafka_tests}[s]()
    say("confluent-kafka-python: not fetched (its PyPI sdists carry no tests/)")


# --- clusters -------------------------------------------------------------------------------


@contextlib.contextmanager
def three_nodes(system: str, workdir: Path) -> Iterator[list[str]]:
    """A fresh 3-node cluster of ``system``; yields the nodes' addresses."""
    from compat_tests.kafka_cluster import CLUSTER_PROPS

    props = {**CLUSTER_PROPS, **SUITE_PROPS}
    if system == "kafkawire":
        from kafkawire.cluster import LocalCluster

        cluster = LocalCluster(workdir / "kafkawire")
        try:
            cluster.up(3, 0, "loopback", props, timeout_s=240.0)
            yield [cluster.state.node(i).address for i in cluster.broker_ids]
        finally:
            if cluster.state_path.exists():
                cluster.down()
    else:
        from compat_tests.kafka_cluster import KafkaCluster
        from compat_tests.kafka_dist import fetch as fetch_kafka

        line, _ = KAFKA_LINES[system]
        fetch_kafka(line)
        kc = KafkaCluster(3, overrides=SUITE_PROPS, workdir=workdir / system, version=line)
        try:
            kc.start()
            yield [kc.address(i) for i in kc.node_ids]
        finally:
            kc.stop()


# --- running ----------------------------------------------------------------------------------


@dataclass
class SuiteResult:
    suite: str
    system: str
    passed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    seconds: float = 0.0
    exit_status: int = 0
    note: str = ""

    def line(self) -> str:
        return (f"{self.suite} on {SYSTEMS[self.system]}: {len(self.passed)} passed, "
                f"{len(self.failed)} failed, {len(self.skipped)} skipped "
                f"({self.seconds:.0f} s){' - ' + self.note if self.note else ''}")


_GO_RESULT = re.compile(r"^\s*--- (PASS|FAIL|SKIP): (\S+)")


def run_franz_go(addresses: list[str], res: SuiteResult, log: Path) -> None:
    binary = franz_go_binary()
    env = {"KGO_SEEDS": ",".join(addresses), "KGO_TEST_RECORDS": str(FRANZ_RECORDS),
           "KGO_LOG_LEVEL": "none"}
    res.note = f"KGO_TEST_RECORDS={FRANZ_RECORDS}"
    res.exit_status = sh([str(binary), "-test.v", "-test.timeout", f"{TIMEOUTS['franz-go']}s",
                          "-test.count", "1"],
                         # some tests read the package's sources (config.go)
                         cwd=binary.parent / "src" / "pkg" / "kgo", env=env, log=log,
                         timeout=TIMEOUTS["franz-go"] + 120)
    for line in log.read_text(errors="replace").splitlines():
        m = _GO_RESULT.match(line)
        if m:
            kind, name = m.groups()
            {"PASS": res.passed, "FAIL": res.failed, "SKIP": res.skipped}[kind].append(name)


def run_kafka_python(addresses: list[str], system: str, res: SuiteResult, log: Path) -> None:
    root = kafka_python_tests()
    junit = log.with_suffix(".xml")
    version = KAFKA_LINES.get(system, ("", "4.3.1"))[1]
    # KAFKA_ROOT: the fixtures insist on a Kafka directory even when they spawn nothing
    env = {"KAFKA_URI": f"kafka://{addresses[0]}", "KAFKA_VERSION": version,
           "PYTHONPATH": str(root), "KAFKA_ROOT": str(cache_dir())}
    res.exit_status = sh([sys.executable, "-m", "pytest", "test/integration", "-p",
                          "no:cacheprovider", "-p", "no:kafkawire", "-q", "-rfE",
                          "-o", "addopts=", "--timeout", "300", f"--junitxml={junit}"],
                         cwd=root, env=env, log=log, timeout=TIMEOUTS["kafka-python"])
    if not junit.exists():
        res.note = "no junit report"
        return
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        if case.find("skipped") is not None:
            res.skipped.append(name)
        elif case.find("failure") is not None or case.find("error") is not None:
            res.failed.append(name)
        else:
            res.passed.append(name)


#: a row of test-runner's closing summary table (``| 0001_multiobj | PASSED | 1.234s |``) or
#: its line at the end of each test (``===== Test 0001_multiobj PASSED =====``)
_RDK_RESULT = re.compile(r"^(?:\|\s+|.*=+ Test )(\d{4}_\S+)\s+(?:\|\s+)?(PASSED|FAILED|SKIPPED)\b")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def run_librdkafka(addresses: list[str], system: str, res: SuiteResult, log: Path) -> None:
    tests = librdkafka_tests()
    conf = log.with_suffix(".conf")
    conf.write_text(f"metadata.broker.list={','.join(addresses)}\n"
                    "test.timeout.multiplier=3\n")
    version = KAFKA_LINES.get(system, ("", "4.3.1"))[1]
    # the runner links the shared librdkafka it was built with (as run-test.sh sets it up)
    libs = f"{tests.parent / 'src'}:{tests.parent / 'src-cpp'}"
    env = {"RDKAFKA_TEST_CONF": str(conf), "TEST_KAFKA_VERSION": version,
           "LD_LIBRARY_PATH": libs,
           "TESTS_SKIP": os.environ.get("RDK_TESTS_SKIP", "")}
    # -Q quick mode, -L without the broker-less (mock cluster) tests, -E without the socket
    # emulation ones (as `make quick`), -p1 one test at a time
    res.exit_status = sh(["./test-runner", "-Q", "-L", "-E", "-p1"], cwd=tests, env=env, log=log,
                         timeout=TIMEOUTS["librdkafka"])
    parse_librdkafka(log, res)


def parse_librdkafka(log: Path, res: SuiteResult) -> None:
    seen: dict[str, str] = {}
    for line in log.read_text(errors="replace").splitlines():
        m = _RDK_RESULT.match(_ANSI.sub("", line).strip())
        if m:
            seen[m.group(1)] = m.group(2)
    res.passed, res.failed, res.skipped = [], [], []
    for name, state in seen.items():
        {"PASSED": res.passed, "FAILED": res.failed, "SKIPPED": res.skipped}[state].append(name)


def run(system: str, suites: list[str], out: Path) -> list[SuiteResult]:
    results = []
    for suite in suites:
        d = out / system
        d.mkdir(parents=True, exist_ok=True)
        log = d / f"{suite}.log"
        log.write_text("")
        res = SuiteResult(suite, system)
        start = time.monotonic()
        say(f"{suite} on {SYSTEMS[system]}: starting a fresh 3-node cluster")
        with tempfile.TemporaryDirectory(prefix=f"suites-{system}-") as tmp, \
                three_nodes(system, Path(tmp)) as addresses:
            say(f"{suite} on {SYSTEMS[system]}: {','.join(addresses)}; log {log}")
            if suite == "franz-go":
                run_franz_go(addresses, res, log)
            elif suite == "kafka-python":
                run_kafka_python(addresses, system, res, log)
            elif suite == "librdkafka":
                run_librdkafka(addresses, system, res, log)
        res.seconds = time.monotonic() - start
        (d / f"{suite}.json").write_text(json.dumps(asdict(res), indent=1) + "\n")
        say(res.line())
        results.append(res)
    return results


def compare(out: Path, reference: str = "kafka") -> int:
    """Print each suite's counts per system and kafkawire's failures the reference passed."""
    for suite in SUITES:
        got = {}
        for system in SYSTEMS:
            f = out / system / f"{suite}.json"
            if f.exists():
                got[system] = json.loads(f.read_text())
        if not got:
            continue
        print(f"\n## {suite}")
        for system, r in got.items():
            print(f"  {SYSTEMS[system]}: {len(r['passed'])} passed, {len(r['failed'])} failed, "
                  f"{len(r['skipped'])} skipped, {r['seconds']:.0f} s")
        if "kafkawire" in got and reference in got:
            ours, theirs = got["kafkawire"], got[reference]
            only_ours = [n for n in ours["failed"] if n in theirs["passed"]]
            only_theirs = [n for n in theirs["failed"] if n in ours["passed"]]
            both = [n for n in ours["failed"] if n in theirs["failed"]]
            print(f"  failed on kafkawire, passed on {SYSTEMS[reference]}: {only_ours or 'none'}")
            print(f"  failed on {SYSTEMS[reference]}, passed on kafkawire: "
                  f"{only_theirs or 'none'}")
            print(f"  failed on both: {both or 'none'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch")
    f.add_argument("--suite", default=",".join(SUITES))
    r = sub.add_parser("run")
    r.add_argument("--system", default="kafkawire,kafka",
                   help=f"comma-separated, of {','.join(SYSTEMS)}")
    r.add_argument("--suite", default=",".join(SUITES))
    r.add_argument("--out", default="data/suites")
    c = sub.add_parser("compare")
    c.add_argument("--out", default="data/suites")
    c.add_argument("--reference", default="kafka")
    args = ap.parse_args(argv)
    if args.cmd == "fetch":
        fetch(args.suite.split(","))
        return 0
    if args.cmd == "compare":
        return compare(Path(args.out), args.reference)
    suites = [s for s in args.suite.split(",") if s]
    bad = [s for s in suites if s not in SUITES]
    if bad:
        ap.error(f"unknown suites {bad}; known {SUITES}")
    fetch(suites)
    for system in args.system.split(","):
        run(system, suites, Path(args.out))
    return compare(Path(args.out))


if __name__ == "__main__":
    sys.exit(main())
