"""Acknowledged offsets under leader kills and CPU starvation (issue 27, defect 5): every
record an idempotent acks=all librdkafka producer had acknowledged must be read back once, at
the offset its delivery report gave.

    .venv/bin/python bench/acked_offsets.py --runs 20              # make acked-offsets
    .venv/bin/python bench/acked_offsets.py --runs 5 --combined    # 3 combined kafkawire nodes
    .venv/bin/python bench/acked_offsets.py --runs 5 --kafka       # 3 combined Kafka 4.3.1 nodes

Each run starts a fresh cluster (default: tests/replication_cluster.py's one controller and
three brokers, the shape of tests/test_replication_cluster.py), creates a topic with
replication factor 3 and ``min.insync.replicas=2``, starts ``--hogs`` CPU-bound processes
(``nice -n --hog-nice``) so that the brokers starve, and has bench/failover.py's idempotent
acks=all confluent-kafka producer write 0, 1, 2, ... to partition 0 while the partition's
leader is killed with SIGKILL ``--kills`` times (restarted, the next kill once the ISR is
full). Then the partition is read back and each acknowledged record is looked up:

* a report with an offset: the record must be at that offset (else "at another offset");
* a report without one (librdkafka's RD_KAFKA_OFFSET_INVALID, -1001, which confluent-kafka's
  ``Message.offset()`` gives as None: the messages of a request that failed with a retriable
  error, e.g. REQUEST_TIMED_OUT at the broker, were acknowledged *implicitly* when a later
  request of the producer succeeded, ``rd_kafka_dr_implicit_ack``; bench/implicit_ack.py
  shows it on kafkawire and on Kafka): the record must be there;
* no value twice, values in order.

A run that fails keeps everything under ``--out/run-N``: the nodes' logs and data (segments,
checkpoints), the producer's reports (``reports.json``: value, offset, error, time), its
librdkafka ``eos`` debug log, and Kafka's DumpLogSegments of each replica of the partition.
Passing runs are deleted. Prints one line per run and a summary; exit status 1 when a run
failed.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import failover  # noqa: E402

TOPIC = "acked"
NO_OFFSET = -1001  # librdkafka's RD_KAFKA_OFFSET_INVALID (confluent-kafka: None)


@contextmanager
def cpu_hogs(count: int, niceness: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``count`` busy-looping processes at ``nice -n niceness``, killed on exit."""
    procs = [subprocess.Popen(["nice", "-n", str(niceness), sys.executable, "-c",
                               "while True: pass"], stdin=subprocess.DEVNULL)
             for _ in range(count)]
    try:
        yield procs
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


class RecordingProducer(failover.ConfluentProducer):
    """bench/failover.py's librdkafka producer, keeping every report (value, offset, error,
    time) and librdkafka's ``eos`` debug lines (implicit acknowledgements among them)."""

    def __init__(self, bootstrap: str, topic: str, rate: float, debug_log: Path) -> None:
        failover.SequenceProducer.__init__(self, topic, rate)
        handler = logging.FileHandler(debug_log)
        self.debug_logger = logging.getLogger(f"rdkafka.{debug_log}")
        self.debug_logger.propagate = False
        self.debug_logger.setLevel(logging.DEBUG)
        self.debug_logger.addHandler(handler)
        from confluent_kafka import Producer

        self.producer = Producer({
            "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
            "linger.ms": 5, "message.timeout.ms": 300000, "retry.backoff.ms": 100,
            "retry.backoff.max.ms": 1000, "topic.metadata.refresh.interval.ms": 2000,
            "debug": "eos",
        }, logger=self.debug_logger)
        self.reports: list[tuple[int, int, str | None, float]] = []

    def _report(self, err: Any, msg: Any) -> None:
        value = int(msg.value())
        with self._lock:
            self.reports.append((value, msg.offset(), None if err is None else err.name(),
                                 time.monotonic()))
        super()._report(err, msg)


def judge(prod: failover.SequenceProducer, log: list[tuple[int, int]]) -> dict[str, Any]:
    """The check: counts, and the values lost / duplicated / at another offset."""
    where: dict[int, list[int]] = {}
    reordered = 0
    last = -1
    for offset, value in log:
        where.setdefault(value, []).append(offset)
        if value <= last:
            reordered += 1
        last = max(last, value)
    lost, moved, implicit = [], [], 0
    for value, offset in sorted(prod.acked.items()):
        found = where.get(value)
        if not found:
            lost.append(value)
        elif offset is None or offset == NO_OFFSET:
            implicit += 1
        elif offset not in found:
            moved.append((value, offset, found))
    return {
        "produced": len(prod.sent_at), "acknowledged": len(prod.acked),
        "failed": len(prod.failed), "in_log": len(log), "implicit": implicit,
        "lost": lost, "moved": moved, "reordered": reordered,
        "duplicated": [v for v, offs in where.items() if len(offs) > 1],
    }


def failed(result: dict[str, Any]) -> bool:
    return bool(result["lost"] or result["moved"] or result["duplicated"] or result["reordered"])


def dump_segments(data_dirs: list[Path], out: Path) -> None:
    """Kafka's DumpLogSegments (4.3.1) of every segment of the partition on each replica."""
    from compat_tests.kafka_dist import run_java_tool

    for d in data_dirs:
        part = d / f"{TOPIC}-0"
        logs = sorted(str(p) for p in part.glob("*.log"))
        if not logs:
            continue
        proc = run_java_tool("org.apache.kafka.tools.DumpLogSegments",
                             ["--deep-iteration", "--files", ",".join(logs)], check=False,
                             timeout=600)
        (out / f"dump-{d.parent.name}.txt").write_text(proc.stdout + proc.stderr)


@contextmanager
def cluster_at(args: argparse.Namespace, base: Path) -> Iterator[Any]:
    if args.kafka or args.combined:
        from bench.clusters import three_nodes

        with three_nodes("kafka" if args.kafka else "kafkawire", keep=True) as three:
            three.data_dirs = (  # type: ignore[union-attr]
                [three.workdir / f"node{n}" / "data" for n in three.broker_ids] if args.kafka
                else [three.procs.data_dir(n) for n in three.broker_ids])
            yield three
        return
    from tests.replication_cluster import replication_cluster

    with replication_cluster(brokers=3, base_dir=base) as cluster:
        cluster.data_dirs = [cluster.data_dir(n) for n in cluster.broker_ids]  # type: ignore[attr-defined]
        cluster.workdir = base  # type: ignore[attr-defined]
        yield cluster


def one_run(args: argparse.Namespace, index: int) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix=f"acked-{index}-"))
    debug_log = base / "producer-eos.log"
    started = time.monotonic()
    with cluster_at(args, base / "cluster") as cluster:
        failover.create_topic(cluster.admin_bootstrap, TOPIC, cluster.broker_ids)
        prod = RecordingProducer(cluster.bootstrap, TOPIC, args.rate, debug_log)
        figures = failover.Figures()
        with cpu_hogs(args.hogs, args.hog_nice):
            prod.start()
            try:
                failover.wait_until(lambda: bool(prod.acked), 120, "the first acknowledged record")
                for _ in range(args.kills):
                    time.sleep(args.interval)
                    failover.kill_leader(cluster, prod, TOPIC, figures, 300, clean=False)
            finally:
                prod.stop()
        log = failover.read_log(cluster.bootstrap, TOPIC)
        result = judge(prod, log)
        result["kills"] = figures.kills
        result["seconds"] = round(time.monotonic() - started, 1)
        keep = failed(result) or args.keep_all
        data_dirs = list(cluster.data_dirs)
        workdir = Path(cluster.workdir)
    if keep:
        dest = args.out / f"run-{index}"
        dest.mkdir(parents=True, exist_ok=True)
        (dest / "reports.json").write_text(json.dumps(
            {"result": result, "reports": prod.reports, "log": log}))
        shutil.copy(debug_log, dest / "producer-eos.log")
        if workdir.resolve() != (base / "cluster").resolve():
            shutil.copytree(workdir, dest / "cluster", dirs_exist_ok=True)
            data_dirs = [dest / "cluster" / d.relative_to(workdir) for d in data_dirs]
        else:
            shutil.copytree(base / "cluster", dest / "cluster", dirs_exist_ok=True)
            data_dirs = [dest / "cluster" / d.relative_to(base / "cluster") for d in data_dirs]
        dump_segments(data_dirs, dest)
        result["kept"] = str(dest)
    shutil.rmtree(base, ignore_errors=True)
    if args.kafka or args.combined:
        shutil.rmtree(workdir, ignore_errors=True)
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--kills", type=int, default=5)
    ap.add_argument("--interval", type=float, default=2.0, help="seconds between kills")
    ap.add_argument("--rate", type=float, default=300, help="records per second at most")
    ap.add_argument("--hogs", type=int, default=16, help="CPU-bound processes (0: none)")
    ap.add_argument("--hog-nice", type=int, default=5, help="their niceness")
    ap.add_argument("--out", type=Path, default=Path("data/acked-offsets"))
    ap.add_argument("--keep-all", action="store_true", help="keep passing runs too")
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--kafka", action="store_true", help="3 combined Apache Kafka 4.3.1 nodes")
    where.add_argument("--combined", action="store_true", help="3 combined kafkawire nodes")
    args = ap.parse_args()
    system = "Apache Kafka 4.3.1" if args.kafka else "kafkawire"
    bad = aborted = 0
    totals = {"acknowledged": 0, "implicit": 0, "moved": 0, "lost": 0, "duplicated": 0}
    for i in range(1, args.runs + 1):
        try:
            r = one_run(args, i)
        except Exception as e:  # the harness (a node that cannot start...): say so, go on
            aborted += 1
            print(f"run {i}/{args.runs}: aborted, {type(e).__name__}: {str(e)[-600:]}",
                  flush=True)
            continue
        bad += failed(r)
        for k in totals:
            totals[k] += r[k] if isinstance(r[k], int) else len(r[k])
        print(f"run {i}/{args.runs}: {r['kills']} kills, {r['seconds']} s, acknowledged "
              f"{r['acknowledged']} (without an offset {r['implicit']}), failed {r['failed']}, "
              f"lost {len(r['lost'])}, at another offset {len(r['moved'])}, duplicated "
              f"{len(r['duplicated'])}, reordered {r['reordered']}"
              + (f"; kept in {r['kept']}" if "kept" in r else ""), flush=True)
        if r["moved"]:
            print(f"  at another offset (value, reported, found): {r['moved'][:10]}", flush=True)
    print(f"\n{system}: {args.runs} runs of {args.kills} leader kills with {args.hogs} CPU hogs "
          f"(nice {args.hog_nice}): {bad} failed, {aborted} aborted; acknowledged {totals['acknowledged']}, of them "
          f"without an offset {totals['implicit']}; at another offset {totals['moved']}, lost "
          f"{totals['lost']}, duplicated {totals['duplicated']}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
