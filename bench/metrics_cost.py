"""What metrics cost: produce throughput with /metrics scraped every second vs. a baseline.

    .venv/bin/python bench/metrics_cost.py                         # baseline: metrics.port=0
    .venv/bin/python bench/metrics_cost.py --baseline-tree ../main  # baseline: a tree without
                                                                    # the metrics code at all

Each round starts a fresh broker per variant (baseline, then scraped) and measures 1 KiB
records (MB/s) and 100-byte records (records/s), each for ``--seconds``, with one
confluent-kafka producer set up as in bench/run.py; the "scraped" variant has a thread fetching /metrics every
SCRAPE_INTERVAL_S meanwhile. Rounds alternate the variants so that load from other processes
hits both alike; medians are reported. All traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Producer  # noqa: E402

from bench.run import make_topic  # noqa: E402
from kafkawire.tools.testing import BrokerProcess, api_versions_ok, free_port  # noqa: E402

SCRAPE_INTERVAL_S = 1.0


class TreeBroker:
    """``python -m kafkawire serve`` from another source tree (the baseline without metrics)."""

    def __init__(self, tree: Path, data: Path) -> None:
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        env = dict(os.environ, PYTHONPATH=str(tree))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kafkawire", "serve", "--override",
             f"listeners=PLAINTEXT://127.0.0.1:{self.port}", "--override", f"log.dir={data}"],
            cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while not api_versions_ok("127.0.0.1", self.port):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("baseline broker did not start")
            time.sleep(0.1)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def cpu_s(pid: int) -> float:
    """User + system CPU seconds the process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def produce_for(bootstrap: str, size: int, seconds: float) -> tuple[float, float, int]:
    """Produce ``size``-byte records as fast as one producer can for ``seconds``; returns
    (MB/s, records/s, records) acknowledged (bench/run.py's producer settings)."""
    p = Producer({
        "bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576, "queue.buffering.max.messages": 2_000_000,
        "acks": "1", "compression.type": "none", "enable.idempotence": False,
    })
    topic, payload, acked = make_topic(bootstrap), b"x" * size, [0]

    def done(err: object, _msg: object) -> None:
        if err is None:
            acked[0] += 1

    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(1000):
            try:
                p.produce(topic, payload, on_delivery=done)
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    p.flush(120)
    dt = time.perf_counter() - t0
    return size * acked[0] / dt / 1e6, acked[0] / dt, acked[0]


def scrape(url: str, stop: threading.Event, count: list[int]) -> None:
    while not stop.wait(SCRAPE_INTERVAL_S):
        with urllib.request.urlopen(url, timeout=10) as r:
            r.read()
        count[0] += 1


Result = tuple[float, float, int, float, float]


def run_variant(kind: str, args: argparse.Namespace, tmp: Path) -> Result:
    """(MB/s 1 KiB, records/s 100 B, scrapes, broker CPU us per 1 KiB record, per 100 B one)"""
    data = tmp / f"{kind}-{time.monotonic_ns()}"
    stop, scrapes = threading.Event(), [0]
    if kind == "baseline" and args.baseline_tree:
        broker: TreeBroker | BrokerProcess = TreeBroker(Path(args.baseline_tree), data)
    elif kind == "baseline":
        broker = BrokerProcess(data, metrics_port=0).start()
    else:
        broker = BrokerProcess(data).start()
    scraper = None
    try:
        if kind == "scraped":
            assert isinstance(broker, BrokerProcess)
            scraper = threading.Thread(target=scrape, daemon=True,
                                       args=(broker.metrics_url + "/metrics", stop, scrapes))
            scraper.start()
        assert broker.proc is not None
        pid = broker.proc.pid
        c0 = cpu_s(pid)
        mb_s, _, n1k = produce_for(broker.bootstrap, 1024, args.seconds)
        c1 = cpu_s(pid)
        _, rec_s, n100 = produce_for(broker.bootstrap, 100, args.seconds)
        c2 = cpu_s(pid)
    finally:
        stop.set()
        if scraper is not None:
            scraper.join(15)
        broker.close()
    return mb_s, rec_s, scrapes[0], (c1 - c0) / n1k * 1e6, (c2 - c1) / n100 * 1e6


def scrape_cost(tmp: Path, scrapes: int) -> tuple[float, int]:
    """Broker CPU milliseconds per /metrics scrape (a broker with __consumer_offsets' 50
    partitions, 10 topics of 4 partitions, a consumer group and traffic on every request
    type the clients use), and the size of one scrape in bytes. CPU counters are immune to
    the load other processes put on the machine, unlike throughput."""
    from confluent_kafka import Consumer

    with BrokerProcess(tmp / "scrape-cost") as broker:
        p = Producer({"bootstrap.servers": broker.bootstrap})
        topics = [make_topic(broker.bootstrap, 4) for _ in range(10)]
        for topic in topics:
            for _ in range(100):
                p.produce(topic, b"x" * 100)
        p.flush(60)
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "scrape-g",
                      "auto.offset.reset": "earliest"})
        c.subscribe(topics)
        deadline, got = time.monotonic() + 60, 0
        while time.monotonic() < deadline and got < 500:
            msg = c.poll(1.0)
            got += msg is not None and msg.error() is None
        c.commit(asynchronous=False)
        c.close()
        url = broker.metrics_url + "/metrics"
        with urllib.request.urlopen(url, timeout=10) as r:
            size = len(r.read())
        assert broker.proc is not None
        time.sleep(1)
        c0 = cpu_s(broker.proc.pid)
        for _ in range(scrapes):
            with urllib.request.urlopen(url, timeout=10) as r:
                r.read()
        return (cpu_s(broker.proc.pid) - c0) / scrapes * 1000, size


def request_cpu(args: argparse.Namespace, tmp: Path, requests: int) -> dict[str, float]:
    """Broker CPU microseconds per one-record produce request (linger.ms=0, one request in
    flight: the most requests per record, so per-request bookkeeping weighs most), for the
    baseline and for this tree with metrics on, alternating, median of the rounds."""
    out: dict[str, list[float]] = {"baseline": [], "scraped": []}
    for r in range(max(args.rounds, 3)):
        for kind in (("baseline", "scraped") if r % 2 == 0 else ("scraped", "baseline")):
            data = tmp / f"req-{kind}-{r}"
            broker: TreeBroker | BrokerProcess
            if kind == "baseline" and args.baseline_tree:
                broker = TreeBroker(Path(args.baseline_tree), data)
            else:
                broker = BrokerProcess(data, metrics_port=0 if kind == "baseline" else None)
                broker.start()
            try:
                p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0,
                              "max.in.flight": 1, "acks": "1"})
                topic = make_topic(broker.bootstrap)
                p.produce(topic, b"warm-up")
                p.flush(30)
                assert broker.proc is not None
                c0 = cpu_s(broker.proc.pid)
                for _ in range(requests):
                    p.produce(topic, b"x" * 100)
                    p.flush(30)
                out[kind].append((cpu_s(broker.proc.pid) - c0) / requests * 1e6)
            finally:
                broker.close()
    return {k: statistics.median(v) for k, v in out.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10.0, help="length of each pass")
    ap.add_argument("--baseline-tree", help="a kafkawire source tree without metrics")
    ap.add_argument("--scrapes", type=int, default=200, help="scrapes for the CPU cost")
    ap.add_argument("--requests", type=int, default=3000,
                    help="one-record produce requests per CPU-per-request pass")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kw-metrics-bench-") as tmp:
        ms, size = scrape_cost(Path(tmp), args.scrapes)
    print(f"one scrape: {ms:.2f} ms of broker CPU, {size} bytes; scraped every "
          f"{SCRAPE_INTERVAL_S:g} s: {ms / SCRAPE_INTERVAL_S / 10:.2f} % of one core", flush=True)
    with tempfile.TemporaryDirectory(prefix="kw-metrics-bench-") as tmp:
        per_req = request_cpu(args, Path(tmp), args.requests)
    print(f"broker CPU per one-record produce request: baseline {per_req['baseline']:.0f} us, "
          f"metrics on {per_req['scraped']:.0f} us "
          f"({100 * (per_req['scraped'] / per_req['baseline'] - 1):+.1f} %)", flush=True)
    if args.rounds <= 0:
        return 0
    results: dict[str, list[Result]] = {"baseline": [], "scraped": []}
    with tempfile.TemporaryDirectory(prefix="kw-metrics-bench-") as tmp:
        for r in range(args.rounds):
            order = ("baseline", "scraped") if r % 2 == 0 else ("scraped", "baseline")
            for kind in order:
                res = run_variant(kind, args, Path(tmp))
                results[kind].append(res)
                print(f"round {r + 1} {kind:8}: {res[0]:7.1f} MB/s (1 KiB), "
                      f"{res[1]:9.0f} records/s (100 B), {res[2]} scrapes; broker CPU "
                      f"{res[3]:.2f} us/record (1 KiB), {res[4]:.3f} us/record (100 B)",
                      flush=True)
    med = {k: [statistics.median(x[i] for x in v) for i in range(5)]
           for k, v in results.items()}
    base, scr = med["baseline"], med["scraped"]
    for name, m in (("baseline", base), ("scraped ", scr)):
        print(f"median {name}: {m[0]:.1f} MB/s, {m[1]:.0f} records/s; broker CPU "
              f"{m[3]:.2f} / {m[4]:.3f} us per record (1 KiB / 100 B)")
    print(f"throughput cost: {100 * (1 - scr[0] / base[0]):+.1f} % (1 KiB), "
          f"{100 * (1 - scr[1] / base[1]):+.1f} % (100 B); broker CPU per record: "
          f"{100 * (scr[3] / base[3] - 1):+.1f} % (1 KiB), {100 * (scr[4] / base[4] - 1):+.1f} %"
          " (100 B)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
