"""A 3-node cluster beside a CPU hog, under franz-go's TestTxnEtl (issue 27, defect 7):
kafkawire and Apache Kafka in alternating pairs (``make cpu-starvation``).

For each system of each pair: start a 3-node cluster (kafkawire ``LocalCluster`` of combined
nodes, or ``compat_tests.kafka_cluster.KafkaCluster``), start ``--hogs`` busy loops (``nice -n
0 sh -c 'while :; do :; done'``), run franz-go's ``TestTxnEtl`` (a transactional producer
committing every 10,000 records, then three consume-transform-produce stages in group
transact sessions, ``KGO_TEST_RECORDS`` records, RF 3) with its debug log, stop the hogs and
count:

* client request timeouts: franz-go's "read from broker errored ... i/o timeout" (a response
  not read within the request's deadline), by request;
* transactions: time from "beginning transaction" to "end transaction response successfully
  received" of the same transactional id (p50 / p90 / max) and their number;
* quorum leader changes: leaders elected (distinct epochs) while the workload ran; kafkawire
  also logs "the controller did not run for N ms" (its event loop stalled);
* the load average at start and end, and whether the test passed.

The franz-go test binary is built once from the Go module proxy's franz-go (``--franz-go``,
default v1.22.3) into ``--work`` (default /tmp/kafkawire-franz). Every run is bounded
(``--timeout``). Figures go to docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

FRANZ_VERSION = "v1.22.3"
TIMEOUT_RE = re.compile(r"read from broker errored.*?req: (\w+).*i/o timeout")
BEGIN_RE = re.compile(r"^\[?(\d\d):(\d\d):(\d\d(?:\.\d+)?).*beginning transaction; "
                      r"transactional_id: (\S+)")
END_RE = re.compile(r"^\[?(\d\d):(\d\d):(\d\d(?:\.\d+)?).*end transaction response successfully "
                    r"received; transactional_id: ([^,\s]+)")
KW_LEADER_RE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),\d+ .*metadata quorum: "
                          r"node \d+ is Leader in epoch (\d+)", re.M)
KW_STALL_RE = re.compile(r"the controller did not run for (\d+) ms")
KAFKA_LEADER_RE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),\d+\] .*Completed "
                             r"transition to Leader.*?epoch=(\d+)", re.M)


def leader_epochs_since(text: str, pattern: re.Pattern[str], since: float) -> list[int]:
    """The epochs in which a node became the quorum leader at or after ``since`` (epoch
    seconds, local time as the logs write it): elections during the workload."""
    out = []
    for stamp, epoch in pattern.findall(text):
        if time.mktime(time.strptime(stamp, "%Y-%m-%d %H:%M:%S")) >= int(since):
            out.append(int(epoch))
    return out


@dataclass
class Run:
    system: str
    records: int
    hogs: int
    load_start: float = 0.0
    load_end: float = 0.0
    wall_s: float = 0.0
    passed: bool = False
    timeouts: dict[str, int] = field(default_factory=dict)
    txns: int = 0
    txn_p50_ms: float = 0.0
    txn_p90_ms: float = 0.0
    txn_max_ms: float = 0.0
    started_at: float = 0.0
    #: epochs with a leader elected during the workload
    leader_epochs: list[int] = field(default_factory=list)
    stalls_ms: list[int] = field(default_factory=list)
    tail: list[str] = field(default_factory=list)

    @property
    def leader_changes(self) -> int:
        """Leaders elected while the workload ran (start-up elections not counted)."""
        return len(set(self.leader_epochs))

    def line(self) -> str:
        stalls = (f"{len(self.stalls_ms)} (median {statistics.median(self.stalls_ms):.0f} ms, "
                  f"max {max(self.stalls_ms)} ms)" if self.stalls_ms else "0")
        return (f"| {self.system} | {self.load_start:.1f} -> {self.load_end:.1f} | "
                f"{'pass' if self.passed else 'FAIL'} | {self.wall_s:.0f} s | "
                f"{sum(self.timeouts.values())} {dict(self.timeouts) or ''} | {self.txns} | "
                f"{self.txn_p50_ms / 1000:.1f} / {self.txn_p90_ms / 1000:.1f} / "
                f"{self.txn_max_ms / 1000:.1f} s | {self.leader_changes} | {stalls} |")


HEADER = ("| system | load avg (start -> end) | TestTxnEtl | wall | client request timeouts "
          "| transactions | time per txn p50 / p90 / max | quorum leaders elected during the run "
          "| 'controller did not run' stalls |\n|---|---|---|---|---|---|---|---|---|")


def build_franz(work: Path, version: str) -> Path:
    binary = work / f"kgo-{version}.test"
    if binary.exists():
        return binary
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GOPATH": str(work / "gopath"), "GOFLAGS": "-mod=mod"}
    info = json.loads(subprocess.run(
        ["go", "mod", "download", "-json", f"github.com/twmb/franz-go@{version}"],
        env=env, check=True, capture_output=True, text=True, timeout=600).stdout)
    src = work / f"franz-go-{version}"
    if not src.exists():
        shutil.copytree(info["Dir"], src)
        subprocess.run(["chmod", "-R", "u+w", str(src)], check=True)
    subprocess.run(["go", "test", "-c", "-o", str(binary), "./pkg/kgo"], cwd=src, env=env,
                   check=True, timeout=1200)
    return binary


@contextmanager
def cpu_hogs(n: int) -> Iterator[None]:
    procs = [subprocess.Popen(["nice", "-n", "0", "sh", "-c", "while :; do :; done"],
                              start_new_session=True) for _ in range(n)]
    try:
        yield
    finally:
        for p in procs:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def _secs(h: str, m: str, s: str) -> float:
    return int(h) * 3600 + int(m) * 60 + float(s)


def run_franz(binary: Path, seeds: str, records: int, timeout_s: float, run: Run,
              log_path: Path) -> None:
    env = {**os.environ, "KGO_SEEDS": seeds, "KGO_TEST_RF": "3",
           "KGO_TEST_RECORDS": str(records), "KGO_LOG_LEVEL": "debug"}
    began: dict[str, float] = {}
    durations: list[float] = []
    timeouts: Counter[str] = Counter()
    tail: list[str] = []
    start = time.monotonic()
    run.started_at = time.time()
    with open(log_path, "w") as keep, subprocess.Popen(
            [str(binary), "-test.run", "^TestTxnEtl$", "-test.v", "-test.count", "1",
             "-test.timeout", f"{int(timeout_s)}s"], env=env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, errors="replace",
            cwd=binary.parent) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            m = TIMEOUT_RE.search(line)
            if m:
                timeouts[m.group(1)] += 1
                keep.write(line)
            elif (m := BEGIN_RE.search(line)) is not None:
                began[m.group(4)] = _secs(m.group(1), m.group(2), m.group(3))
                keep.write(line)
            elif (m := END_RE.search(line)) is not None:
                keep.write(line)
                t0 = began.pop(m.group(4), None)
                if t0 is not None:
                    durations.append((_secs(m.group(1), m.group(2), m.group(3)) - t0) * 1000)
            elif "DEBUG" not in line:
                keep.write(line)
            tail = (tail + [line.rstrip()])[-40:]
        proc.wait()
    run.wall_s = time.monotonic() - start
    run.passed = proc.returncode == 0 and any(x.startswith("--- PASS") for x in tail)
    run.timeouts = dict(timeouts)
    run.tail = [x for x in tail if "DEBUG" not in x][-15:]
    if durations:
        durations = [d + 86_400_000 if d < 0 else d for d in durations]  # midnight
        s = sorted(durations)
        run.txns = len(s)
        run.txn_p50_ms = s[len(s) // 2]
        run.txn_p90_ms = s[min(len(s) - 1, int(len(s) * 0.9))]
        run.txn_max_ms = s[-1]


def run_kafkawire(binary: Path, args: argparse.Namespace, out: Path) -> Run:
    from kafkawire.cluster import LocalCluster

    run = Run("kafkawire", args.records, args.hogs)
    with tempfile.TemporaryDirectory(prefix="kafkawire-starve-") as tmp:
        cluster = LocalCluster(Path(tmp))
        try:
            cluster.up(3, timeout_s=300)
            with cpu_hogs(args.hogs):
                run.load_start = os.getloadavg()[0]
                run_franz(binary, cluster.bootstrap, args.records, args.timeout, run,
                          out / "kafkawire-franz.log")
                run.load_end = os.getloadavg()[0]
            for n in cluster.broker_ids:
                text = cluster.log_path(n).read_text(errors="replace")
                run.leader_epochs += leader_epochs_since(text, KW_LEADER_RE, run.started_at)
                run.stalls_ms += [int(x) for x in KW_STALL_RE.findall(text)]
                shutil.copy(cluster.log_path(n), out / f"kafkawire-node{n}.log")
        finally:
            cluster.down()
    return run


def run_kafka(binary: Path, args: argparse.Namespace, out: Path) -> Run:
    from compat_tests.kafka_cluster import KafkaCluster

    name = {"4.x": "4.3.1", "4.4": "4.4.0"}.get(args.kafka_version, args.kafka_version)
    run = Run(f"Kafka {name}", args.records, args.hogs)
    with KafkaCluster(3, version=args.kafka_version) as cluster:
        with cpu_hogs(args.hogs):
            run.load_start = os.getloadavg()[0]
            run_franz(binary, cluster.bootstrap, args.records, args.timeout, run,
                      out / "kafka-franz.log")
            run.load_end = os.getloadavg()[0]
        for n in cluster.node_ids:
            node = cluster.node(n)
            text = "".join(p.read_text(errors="replace") for p in (
                node.log_file, node.dir / "stdout.log") if p.is_file())
            run.leader_epochs += leader_epochs_since(text, KAFKA_LEADER_RE, run.started_at)
            if node.log_file.is_file():
                shutil.copy(node.log_file, out / f"kafka-node{n}.log")
    return run


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--system", choices=["both", "kafkawire", "kafka"], default="both")
    ap.add_argument("--pairs", type=int, default=1, help="alternating kafkawire/Kafka pairs")
    ap.add_argument("--records", type=int, default=100_000, help="KGO_TEST_RECORDS")
    ap.add_argument("--hogs", type=int, default=2, help="busy loops beside the cluster")
    ap.add_argument("--timeout", type=float, default=1800, help="bound of each test run, s")
    ap.add_argument("--kafka-version", default="4.x", help='"4.x" (4.3.1) or "4.4" (4.4.0)')
    ap.add_argument("--franz-go", default=FRANZ_VERSION)
    ap.add_argument("--work", type=Path, default=Path("/tmp/kafkawire-franz"))
    ap.add_argument("--out", type=Path, default=None, help="keep logs here")
    ap.add_argument("--slow-step-ms", type=float, default=0,
                    help="kafkawire nodes log event-loop steps longer than this "
                         "(KAFKAWIRE_SLOW_STEP_MS, kafkawire/loop_monitor.py)")
    ap.add_argument("--slow-request-ms", type=float, default=0,
                    help="kafkawire nodes log requests slower than this "
                         "(KAFKAWIRE_SLOW_REQUEST_MS)")
    args = ap.parse_args()
    if args.slow_step_ms > 0:
        os.environ["KAFKAWIRE_SLOW_STEP_MS"] = str(args.slow_step_ms)
    if args.slow_request_ms > 0:
        os.environ["KAFKAWIRE_SLOW_REQUEST_MS"] = str(args.slow_request_ms)
    binary = build_franz(args.work, args.franz_go)
    out = args.out or Path(tempfile.mkdtemp(prefix="starvation-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"logs in {out}; {args.records} records, {args.hogs} busy loops", flush=True)
    print(HEADER, flush=True)
    runs: list[Run] = []
    for i in range(args.pairs):
        systems = ["kafkawire", "kafka"] if args.system == "both" else [args.system]
        if i % 2 and len(systems) == 2:
            systems.reverse()  # alternate who goes first
        for system in systems:
            pair_out = out / f"pair{i}"
            pair_out.mkdir(exist_ok=True)
            run = (run_kafkawire if system == "kafkawire" else run_kafka)(binary, args, pair_out)
            runs.append(run)
            print(run.line(), flush=True)
            (pair_out / f"{system}.json").write_text(json.dumps(
                {**asdict(run), "leader_changes": run.leader_changes}, indent=1))
            if not run.passed:
                print("  last lines: " + "\n    ".join(run.tail), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
