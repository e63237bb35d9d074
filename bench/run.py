"""kafkawire benchmarks with one confluent-kafka producer and consumer.

    .venv/bin/python bench/run.py                       # start a kafkawire node and measure it
    .venv/bin/python bench/run.py --target kafka        # the same against Apache Kafka 4.3.1
    .venv/bin/python bench/run.py --target both         # both, one after the other, side by side
    .venv/bin/python bench/run.py --bootstrap HOST:PORT # measure a running broker
    .venv/bin/python bench/run.py --tls                 # clients over TLS (an SSL listener)

``--target kafka`` runs a real single-node KRaft Apache Kafka from the compat harness's jars
(``compat_tests.kafka_dist``, fetched once into ``~/.cache/kafkawire``) on this machine, with
the same client (confluent-kafka) and the same workload.

Measures: produce MB/s with 1 KiB records, consume MB/s, 100-byte records/s produced,
produce-to-consume latency percentiles at a steady rate, the broker's idle RSS, and how long it
takes from process start until it answers ApiVersions. Prints a Markdown table; figures go to
docs/BENCHMARKS.md. All traffic stays on 127.0.0.1 and every loop is bounded in count and time.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from kafkawire.tools.testing import BrokerProcess, api_versions_ok, free_port  # noqa: E402


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


#: extra client settings (``--tls``: security.protocol=SSL and the test CA)
CLIENT_CONF: dict[str, Any] = {}

#: the "1 KiB records" of the throughput rows (1024-byte values)
RECORD_1K = 1024
#: passes of the consume measurement (the median is reported)
CONSUME_PASSES = 3


def make_topic(bootstrap: str, partitions: int = 1) -> str:
    name = f"bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap, **CLIENT_CONF})
    try:
        admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[
            name
        ].result(30)
    except Exception:  # brokers without CreateTopics: auto-create through Metadata
        admin.list_topics(name, timeout=30)
    return name


def produce_throughput(bootstrap: str, topic: str, size: int, count: int) -> tuple[float, float]:
    p = Producer({
        "bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576, "queue.buffering.max.messages": 2_000_000,
        "acks": "1", "compression.type": "none", "enable.idempotence": False, **CLIENT_CONF,
    })
    payload = b"x" * size
    t0 = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                p.produce(topic, payload)
                break
            except BufferError:
                p.poll(0.01)
    p.flush(120)
    dt = time.perf_counter() - t0
    return size * count / dt / 1e6, count / dt


def consume_throughput(bootstrap: str, topic: str, count: int) -> float:
    c = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
        "fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 10_485_760,
        "queued.max.messages.kbytes": 1_048_576, **CLIENT_CONF,
    })
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = 0
    nbytes = 0
    t0 = time.perf_counter()
    deadline = t0 + 120
    while got < count and time.perf_counter() < deadline:
        for m in c.consume(10000, 1.0):
            if m.error() is None:
                got += 1
                nbytes += len(m.value() or b"")
    dt = time.perf_counter() - t0
    c.close()
    return nbytes / dt / 1e6


def kcat_consume_throughput(bootstrap: str, topic: str, nbytes: int) -> float | None:
    """MB/s of kcat (librdkafka without a Python loop per record) reading the topic to
    /dev/null: what the broker serves when the client is not the bottleneck. None without
    kcat."""
    exe = shutil.which("kcat") or shutil.which("kafkacat")
    if exe is None or CLIENT_CONF:
        return None
    cmd = [exe, "-b", bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q",
           "-X", "fetch.max.bytes=52428800", "-X", "max.partition.fetch.bytes=10485760"]
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True, timeout=300)
    return nbytes / (time.perf_counter() - t0) / 1e6


def round_trips(p: Producer, c: Consumer, topic: str, rate: float, size: int, seconds: float,
                **produce_kw: Any) -> list[float]:
    """Produce ``size``-byte records stamped with their send time at ``rate`` per second for
    ``seconds`` while consuming them; the produce-to-consume times in ms, sorted."""
    lat: list[float] = []
    sent = 0
    start = time.perf_counter()
    end = start + seconds
    while time.perf_counter() < end:
        due = int((time.perf_counter() - start) * rate)
        while sent < due:
            p.produce(topic, time.perf_counter_ns().to_bytes(8, "big") + b"x" * (size - 8),
                      **produce_kw)
            sent += 1
        p.poll(0)
        for m in c.consume(1000, 0.001):
            if m.error() is None and m.value():
                lat.append((time.perf_counter_ns() - int.from_bytes(m.value()[:8], "big")) / 1e6)
    lat.sort()
    return lat


def latency(bootstrap: str, topic: str, mb_per_s: float, seconds: float) -> dict[str, float]:
    size = 1024
    rate = mb_per_s * 1e6 / size
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "1", **CLIENT_CONF})
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "lat", "fetch.wait.max.ms": 5,
                  "fetch.min.bytes": 1, "enable.auto.commit": False, **CLIENT_CONF})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    c.poll(0.5)
    lat = round_trips(p, c, topic, rate, size, seconds)
    p.flush(10)
    c.close()
    if not lat:
        return {"p50": float("nan"), "p99": float("nan")}
    return {"p50": lat[len(lat) // 2], "p99": lat[int(len(lat) * 0.99)],
            "mean": statistics.fmean(lat), "n": float(len(lat))}


class Target:
    """A broker to measure: started here (kafkawire or Apache Kafka) or given by address."""

    def __init__(self, kind: str, bootstrap: str | None = None, kafka_heap: str = "1g",
                 tls_keystore: Path | None = None) -> None:
        self.kind = kind
        #: a PEM keystore (key + chain): serve the clients on an SSL listener
        self.tls_keystore = tls_keystore
        self.bootstrap = bootstrap or ""
        self.kafka_heap = kafka_heap
        self.pid: int | None = None
        self.ready_s: float | None = None
        self._stop: list[Any] = []

    def start(self) -> None:
        if self.kind == "external":
            return
        t0 = time.perf_counter()
        tls_port = free_port()
        tls_props = {} if self.tls_keystore is None else {
            "ssl.keystore.type": "PEM", "ssl.keystore.location": str(self.tls_keystore)}
        if self.kind == "kafkawire":
            port = free_port()
            if tls_props:
                tls_props.update({
                    "listeners": f"PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{tls_port}"})
            bp = BrokerProcess(Path(tempfile.mkdtemp(prefix="kw-bench-")) / "data", port=port,
                               overrides=tls_props)
            bp.start()
            self._stop.append(bp.close)
            assert bp.proc is not None
            self.bootstrap, self.pid = bp.bootstrap, bp.proc.pid
            if tls_props:
                self.bootstrap = f"127.0.0.1:{tls_port}"
        else:  # Apache Kafka 4.x from the compat harness's jars, same machine, same client
            from compat_tests.kafka_dist import KafkaBroker

            kb = KafkaBroker(version="4.x", heap=self.kafka_heap)
            if tls_props:
                kb.props.update(tls_props)
                kb.props["listeners"] += f",SSL://127.0.0.1:{tls_port}"
                kb.props["advertised.listeners"] += f",SSL://127.0.0.1:{tls_port}"
                kb.props["listener.security.protocol.map"] += ",SSL:SSL"
            kb.start()
            self._stop.append(kb.stop)
            assert kb.proc is not None
            self.bootstrap, self.pid = kb.bootstrap, kb.proc.pid
            if tls_props:
                self.bootstrap = f"127.0.0.1:{tls_port}"
        self.ready_s = time.perf_counter() - t0

    def stop(self) -> None:
        for fn in self._stop:
            fn()
        self._stop.clear()


def measure(target: Target, args: argparse.Namespace) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    target.start()
    try:
        bootstrap = target.bootstrap
        if target.pid is not None:
            time.sleep(1.0)
            rows.append(("ready after start (s)", f"{target.ready_s:.2f}"))
            rows.append(("idle RSS (MB)", f"{rss_mb(target.pid):.1f}"))
        host, port = bootstrap.rsplit(":", 1)
        assert CLIENT_CONF or api_versions_ok(host, int(port))
        topic = make_topic(bootstrap)
        n = args.mb * 1_000_000 // RECORD_1K
        mbs, _ = produce_throughput(bootstrap, topic, RECORD_1K, n)
        rows.append(("produce 1 KiB records (MB/s)", f"{mbs:.0f}"))
        # one pass varies by 2x from run to run on this 2-core machine (client and broker
        # share it): the median of CONSUME_PASSES passes over the same records
        passes = sorted(consume_throughput(bootstrap, topic, n) for _ in range(CONSUME_PASSES))
        rows.append((f"consume 1 KiB records, median of {CONSUME_PASSES} passes (MB/s)",
                     f"{passes[len(passes) // 2]:.0f}"))
        kcat = kcat_consume_throughput(bootstrap, topic, n * RECORD_1K)
        if kcat is not None:
            rows.append(("consume 1 KiB records with kcat, values to /dev/null (MB/s)",
                         f"{kcat:.0f}"))
        topic2 = make_topic(bootstrap)
        _, rps = produce_throughput(bootstrap, topic2, 100, args.small)
        rows.append(("produce 100 B records (records/s)", f"{rps:,.0f}"))
        topic3 = make_topic(bootstrap)
        lat = latency(bootstrap, topic3, 10.0, args.latency_s)
        rows.append(("produce->consume latency at 10 MB/s p50 (ms)", f"{lat['p50']:.2f}"))
        rows.append(("produce->consume latency at 10 MB/s p99 (ms)", f"{lat['p99']:.2f}"))
        if target.pid is not None:
            rows.append(("RSS after the run (MB)", f"{rss_mb(target.pid):.1f}"))
    finally:
        target.stop()
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", help="measure a running broker at HOST:PORT instead")
    ap.add_argument(
        "--target",
        choices=["kafkawire", "kafka", "both"],
        default="kafkawire",
        help="start and measure kafkawire, Apache Kafka 4.x (compat_tests' jars), or both "
        "one after the other (side-by-side table)",
    )
    ap.add_argument("--kafka-heap", default="1g", help="Apache Kafka's -Xmx (kafka's default 1g)")
    ap.add_argument("--mb", type=int, default=1000, help="MB to produce with 1 KiB records")
    ap.add_argument("--small", type=int, default=2_000_000, help="100-byte records to produce")
    ap.add_argument("--latency-s", type=float, default=10.0, help="seconds of latency sampling")
    ap.add_argument("--tls", action="store_true",
                    help="clients over TLS: the broker(s) get an SSL listener with a test CA")
    args = ap.parse_args()
    keystore = None
    if args.tls:
        from tests.security_helpers import make_pki

        pki = make_pki(Path(tempfile.mkdtemp(prefix="bench-pki-")))
        keystore = pki.server_pem
        CLIENT_CONF.update({"security.protocol": "SSL", "ssl.ca.location": str(pki.ca_pem)})
    if args.bootstrap:
        kinds = ["external"]
    elif args.target == "both":
        kinds = ["kafkawire", "kafka"]
    else:
        kinds = [args.target]
    results = {
        kind: dict(measure(Target(kind, args.bootstrap, args.kafka_heap, keystore), args))
        for kind in kinds
    }
    names = {"kafkawire": "kafkawire", "kafka": "Apache Kafka 4.3.1", "external": args.bootstrap}
    measures = list(dict.fromkeys(m for rows in results.values() for m in rows))
    print("| measure | " + " | ".join(names[k] for k in kinds) + " |")
    print("|---|" + "---|" * len(kinds))
    for m in measures:
        print(f"| {m} | " + " | ".join(results[k].get(m, "") for k in kinds) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
