"""/metrics and /health on metrics.port, read by a real Prometheus server under a real load.

``test_prometheus_scrapes_a_loaded_broker`` starts Debian's ``prometheus`` (``make test``
installs it with the other system packages) scraping a broker every second while a
confluent-kafka producer sends at a steady pace and a consumer group reads; PromQL's
messages-in rate must be within 10 % of the rate sent, and every query of docs/METRICS.md's
dashboard list must return data.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from kafkawire.tools.testing import BrokerProcess, free_port

ROOT = Path(__file__).resolve().parent.parent
#: the load: batches of BATCH records every TICK_S seconds, for LOAD_S seconds
BATCH, TICK_S, LOAD_S = 100, 0.05, 24.0


def http_get(url: str, timeout: float = 10.0) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read().decode()


def series(text: str) -> dict[str, float]:
    """Exposition text -> {'name{labels}': value}."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


def test_health_and_metrics_endpoints(broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer, Producer

    base = broker.metrics_url
    assert http_get(base + "/health/live")[0] == 200
    status, ctype, body = http_get(base + "/health/ready")
    assert status == 200 and ctype == "application/json"
    assert json.loads(body) == {"status": "ready", "checks": {
        "started": True, "registered": True, "unfenced": True, "quorum_leader": True}}
    assert http_get(base + "/nope")[0] == 404

    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(50):
        p.produce("ops-endpoints", f"v{i}".encode())
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ops-g",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe(["ops-endpoints"])
    got = 0
    deadline = time.monotonic() + 60
    while got < 20 and time.monotonic() < deadline:
        msg = c.poll(1.0)
        if msg is not None and msg.error() is None:
            got += 1
    c.commit(asynchronous=False)
    c.close()

    status, ctype, body = http_get(base + "/metrics")
    assert status == 200 and ctype.startswith("text/plain")
    s = series(body)
    assert s['kafka_server_brokertopicmetrics_messagesin_total{topic="ops-endpoints"}'] == 50
    assert s["kafka_server_brokertopicmetrics_messagesin_total"] >= 50
    assert s['kafka_server_brokertopicmetrics_bytesout_total{topic="ops-endpoints"}'] > 0
    assert s['kafka_log_log_size{partition="0",topic="ops-endpoints"}'] == \
        s['kafka_server_brokertopicmetrics_bytesin_total{topic="ops-endpoints"}']
    lag = 'kafka_consumergroup_lag{consumergroup="ops-g",partition="0",topic="ops-endpoints"}'
    assert s[lag] == 50 - s[lag.replace("_lag{", "_current_offset{")] and s[lag] <= 30
    produce_requests = [v for k, v in s.items()
                        if k.startswith('kafka_network_requestmetrics_requests_total{request='
                                        '"Produce",version=')]
    assert produce_requests and sum(produce_requests) >= 1
    assert s['kafka_network_requestmetrics_totaltimems_count{request="FetchConsumer"}'] >= 1
    assert 0 <= s["kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent"] <= 1
    assert s["kafka_controller_kafkacontroller_activecontrollercount"] == 1
    assert s["kafka_server_raft_metrics_current_leader"] == 1
    assert s['kafka_server_socket_server_metrics_connection_count{listener="PLAINTEXT",'
             'networkProcessor="0"}'] >= 1
    # the resource series of every Prometheus client library, with their usual names
    assert s["process_resident_memory_bytes"] > 10e6 and s["process_cpu_seconds_total"] > 0
    assert 10 < s["process_open_fds"] < s["process_max_fds"]
    assert s["process_start_time_seconds"] > 0 and "python_gc_objects_collected_total" in \
        "".join(s)
    # a request timing is a summary: percentiles, _count and _sum of one family; no series
    # is left untyped
    assert "# TYPE kafka_network_requestmetrics_totaltimems summary" in body
    assert "untyped" not in body
    assert s['kafka_network_requestmetrics_totaltimems_sum{request="Produce"}'] > 0

    # a deleted topic's series go (as Kafka's); the all-topics counters keep its counts
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # outlives its futures
    admin.delete_topics(["ops-endpoints"])["ops-endpoints"].result(30)
    s = series(http_get(base + "/metrics")[2])
    assert not [k for k in s if 'topic="ops-endpoints"' in k]
    assert s["kafka_server_brokertopicmetrics_messagesin_total"] >= 50


def test_ready_is_503_until_the_broker_serves(tmp_path: Path) -> None:
    """Before storage is open and the node registered, /health/ready says 503 and why."""
    from kafkawire.broker import Broker
    from kafkawire.config.broker_config import BrokerConfig
    from kafkawire.ops.http import OpsEndpoint

    cfg = BrokerConfig.from_dict({"log.dir": str(tmp_path / "d"), "metrics.port": "0"})
    status, _ctype, body = OpsEndpoint(Broker(cfg)).route("GET", "/health/ready")
    assert status == 503
    assert json.loads(body)["checks"]["started"] is False
    assert OpsEndpoint(Broker(cfg)).route("GET", "/health/live")[0] == 200
    assert OpsEndpoint(Broker(cfg)).route("POST", "/metrics")[0] == 405


def test_metrics_port_zero_turns_the_endpoint_off(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "d", metrics_port=0) as bp:
        assert "metrics and health on" not in bp.log()
        assert "metrics.port" not in bp.log()


def test_busy_metrics_port_is_a_clear_start_error(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        busy = s.getsockname()[1]
        bp = BrokerProcess(tmp_path / "d", metrics_port=busy)
        with pytest.raises(RuntimeError, match="cannot serve metrics on 127.0.0.1"):
            bp.start()


# ---- a real Prometheus ----------------------------------------------------------------------
def dashboard_queries() -> list[str]:
    """The PromQL lines of docs/METRICS.md's ```promql blocks."""
    text = (ROOT / "docs" / "METRICS.md").read_text()
    out = []
    for block in re.findall(r"```promql\n(.*?)```", text, re.S):
        out += [q.strip() for q in block.splitlines() if q.strip() and not q.startswith("#")]
    return out


class Prometheus:
    def __init__(self, workdir: Path, target: str) -> None:
        self.port = free_port()
        workdir.mkdir(parents=True, exist_ok=True)
        cfg = workdir / "prometheus.yml"
        cfg.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: kafkawire\n    static_configs:\n"
            f"      - targets: ['{target}']\n")
        self.log = open(workdir / "prometheus.log", "wb")
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={cfg}", f"--storage.tsdb.path={workdir / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if http_get(f"http://127.0.0.1:{self.port}/-/ready", 2)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        self.close()
        raise RuntimeError("prometheus did not become ready")

    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        params = {"query": promql}
        if at is not None:
            params["time"] = f"{at:.3f}"
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode(params)
        status, _ctype, body = http_get(url)
        assert status == 200, body
        result: list[dict[str, Any]] = json.loads(body)["data"]["result"]
        return result

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def steady_load(bootstrap: str, topic: str) -> tuple[float, list[float]]:
    """BATCH records every TICK_S for LOAD_S seconds, with a consumer group reading along;
    returns (start, the time each record was acknowledged)."""
    from confluent_kafka import Consumer, Producer

    stop = threading.Event()

    def consume() -> None:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "prom-load",
                      "auto.offset.reset": "earliest"})
        c.subscribe([topic])
        while not stop.is_set():
            c.poll(0.2)
        c.close()

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    acked: list[float] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is None:
            acked.append(time.time())

    start = time.time()
    ticks = int(LOAD_S / TICK_S)
    for i in range(ticks):
        for j in range(BATCH):
            p.produce(topic, b"x" * 100, key=str(j).encode(), on_delivery=on_delivery)
        p.poll(0)
        pause = start + (i + 1) * TICK_S - time.time()
        if pause > 0:
            time.sleep(pause)
    p.flush(60)
    stop.set()
    reader.join(30)
    return start, acked


@pytest.mark.slow
def test_prometheus_scrapes_a_loaded_broker(broker: BrokerProcess, tmp_path: Path) -> None:
    if shutil.which("prometheus") is None:
        pytest.skip("Debian's prometheus package is not installed (make deps-system installs it)")
    prom = Prometheus(tmp_path / "prom", f"127.0.0.1:{broker.metrics_port}")
    try:
        start, acked = steady_load(broker.bootstrap, "prom-load")
        assert len(acked) == BATCH * int(LOAD_S / TICK_S)
        # the rate over a 10 s window in the middle of the load, as a dashboard panel shows
        # it, against the records acknowledged in that window
        mid = start + LOAD_S * 0.6
        sent_rate = sum(1 for t in acked if mid - 10 < t <= mid) / 10
        q = 'rate(kafka_server_brokertopicmetrics_messagesin_total{topic="prom-load"}[10s])'
        deadline = time.monotonic() + 30
        result = prom.query(q, mid)
        while not result and time.monotonic() < deadline:
            time.sleep(1)
            result = prom.query(q, mid)
        assert result, "prometheus has no messages-in rate"
        measured = float(result[0]["value"][1])
        print(f"messages in: PromQL rate {measured:.0f}/s, load sent {sent_rate:.0f}/s")
        assert abs(measured - sent_rate) <= 0.10 * sent_rate, (measured, sent_rate)
        # every dashboard query of docs/METRICS.md returns data during the load
        empty = [q for q in dashboard_queries() if not prom.query(q, mid)]
        deadline = time.monotonic() + 30
        while empty and time.monotonic() < deadline:  # scrapes may still be landing
            time.sleep(1)
            empty = [q for q in empty if not prom.query(q, mid)]
        assert not empty, f"queries without data: {empty}"
    finally:
        prom.close()
