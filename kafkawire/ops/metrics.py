"""Broker metrics, exposed in Prometheus' text format under Kafka's JMX-exporter names.

Kafka publishes its metrics as JMX MBeans (``kafka.server:type=BrokerTopicMetrics,
name=MessagesInPerSec,topic=t``); most deployments scrape them through the Prometheus JMX
exporter with the widely shared ``kafka-2_0_0.yml`` / KRaft rules, which lowercase the MBean's
type and name and turn ``Count`` into ``_total`` (``kafka_server_brokertopicmetrics_
messagesin_total{topic="t"}``), ``Value`` into a gauge and a histogram's percentiles into
``{quantile="0.99"}`` gauges plus ``_count``. kafkawire emits the same series, so Kafka's
Grafana dashboards and alerts work unchanged. The full mapping is in docs/METRICS.md.

Cost: Produce and Fetch add a few integer additions per partition (record counts come from the
batch headers the hot path already parsed); every request appends its four timings to bounded
reservoirs (Kafka's histograms sample 1028 values the same way). Gauges (log sizes, group lag,
partition counts, the quorum) are computed when scraped, never maintained on the hot path.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from kraft.partition_change import configured_min_isr

if TYPE_CHECKING:
    from kafkawire.broker import Broker

#: samples kept per request histogram (Kafka's exponentially decaying reservoir keeps 1028)
RESERVOIR_SAMPLES = 1028
#: Kafka's histogram percentiles, as the JMX exporter labels them
QUANTILES = (("0.50", 0.50), ("0.75", 0.75), ("0.95", 0.95), ("0.98", 0.98),
             ("0.99", 0.99), ("0.999", 0.999))
#: the request-handler idle ratio is measured over at least this window (seconds)
IDLE_WINDOW_S = 5.0
#: kafka.server:type=KafkaServer,name=BrokerState: 3 is RUNNING (Kafka's BrokerState enum)
BROKER_STATE_STARTING = 1
BROKER_STATE_RUNNING = 3
TIMINGS = ("requestqueuetimems", "localtimems", "remotetimems", "responsesendtimems",
           "totaltimems")


@dataclass
class TopicCounters:
    messages_in: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    failed_produce: int = 0
    failed_fetch: int = 0
    total_produce: int = 0
    total_fetch: int = 0


@dataclass
class RequestStats:
    by_version: dict[int, int] = field(default_factory=dict)
    count: int = 0
    #: all requests' (queue, local, remote, send) times summed, in seconds (a summary's _sum)
    sums: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0, 0.0])
    #: recent (queue, local, remote, send) times in seconds, one tuple per request
    samples: deque[tuple[float, float, float, float]] = field(
        default_factory=lambda: deque(maxlen=RESERVOIR_SAMPLES))


class IdleMeter:
    """The event loop's idle ratio: kafkawire's request handler pool is one trio loop, so its
    idle ratio is the share of wall time that loop's thread did not use the CPU. Read from the
    thread's CPU clock when scraped (the scrape runs on the loop's thread): no per-request or
    per-tick cost."""

    def __init__(self) -> None:
        #: (wall time, thread CPU time) samples, to answer over a window >= IDLE_WINDOW_S
        self.points: deque[tuple[float, float]] = deque(maxlen=64)

    def start(self) -> None:
        """Call on the loop's thread when it starts."""
        self.points.clear()
        self.points.append((time.perf_counter(), time.thread_time()))

    def idle_ratio(self) -> float:
        now, cpu = time.perf_counter(), time.thread_time()
        if not self.points:
            self.points.append((now, cpu))
            return 1.0
        ref_t, ref_cpu = self.points[0]
        for t, c in self.points:
            if now - t < IDLE_WINDOW_S:
                break
            ref_t, ref_cpu = t, c
        if now - self.points[-1][0] >= 1.0:
            self.points.append((now, cpu))
        span = now - ref_t
        return 1.0 if span <= 0 else max(0.0, min(1.0, 1.0 - (cpu - ref_cpu) / span))


class BrokerMetrics:
    """The counters the request path updates; everything else is read at scrape time."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicCounters] = {}
        #: failures naming no existing topic, and the counts of deleted topics: only in the
        #: all-topics series
        self.unattributed = TopicCounters()
        self.requests: dict[str, RequestStats] = {}
        self.connections_created: dict[str, int] = {}
        self.idle = IdleMeter()
        #: KIP-714 pushed client metrics: (client instance id, metric name, labels) -> value
        self.client_telemetry: Callable[[], dict[tuple[str, str, tuple[tuple[str, str], ...]],
                                             float]] = dict

    def topic(self, name: str | None) -> TopicCounters:
        if not name:
            return self.unattributed
        c = self.topics.get(name)
        if c is None:
            c = self.topics[name] = TopicCounters()
        return c

    def retire(self, topic: str) -> None:
        """Drop a deleted topic's series; its counts stay in the all-topics totals."""
        c = self.topics.pop(topic, None)
        if c is not None:
            for f in fields(TopicCounters):
                setattr(self.unattributed, f.name,
                        getattr(self.unattributed, f.name) + getattr(c, f.name))

    def request_done(self, name: str, version: int, queue_s: float, local_s: float,
                     remote_s: float, send_s: float) -> None:
        st = self.requests.get(name)
        if st is None:
            st = self.requests[name] = RequestStats()
        st.count += 1
        st.by_version[version] = st.by_version.get(version, 0) + 1
        st.samples.append((queue_s, local_s, remote_s, send_s))
        sums = st.sums
        sums[0] += queue_s
        sums[1] += local_s
        sums[2] += remote_s
        sums[3] += send_s

    def connection_created(self, listener: str) -> None:
        self.connections_created[listener] = self.connections_created.get(listener, 0) + 1


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    i = min(len(sorted_values) - 1, max(0, int(q * len(sorted_values) + 0.5) - 1))
    return sorted_values[i]


class BrokerCollector(Collector):
    """Builds every series from the broker's state when Prometheus scrapes."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def collect(self) -> Iterator[Metric]:
        m = self.broker.metrics
        if self.broker.quorum is not None:  # as Kafka, a deleted topic's series go with it
            for gone in set(m.topics) - set(self.broker.image.topics):
                m.retire(gone)
        yield from topic_families(m.topics, m.unattributed)
        yield from request_families(m.requests)
        yield from self.partition_families()
        yield from self.log_families()
        yield from self.connection_families()
        yield from self.quorum_families()
        yield from self.group_lag_families()
        yield from telemetry_families(m.client_telemetry())

    # ---- replica manager, controller ----------------------------------------------------
    def partition_families(self) -> Iterator[Metric]:
        b = self.broker
        img = b.image if b.quorum is not None else None
        led = under = offline = under_min_isr = total = offline_replicas = 0
        topics = 0
        if img is not None:
            topics = len(img.topics)
            static_min_isr = int(b.config["min.insync.replicas"])
            for t in img.topics.values():
                min_isr: int | None = None  # the topic's (a config lookup once per topic)
                for p in t.partitions.values():
                    total += 1
                    if b.node_id in p.replicas and b.logs is not None and b.replicas is not None \
                            and b.is_offline(t.name, p.partition):
                        offline_replicas += 1
                    if p.leader < 0:
                        offline += 1
                    if p.leader == b.node_id:
                        led += 1
                        if len(p.isr) < len(p.replicas):
                            under += 1
                        if min_isr is None:
                            min_isr = configured_min_isr(img, t.name, static_min_isr)
                        if len(p.isr) < min(min_isr, len(p.replicas)):
                            under_min_isr += 1
        rm = "kafka_server_replicamanager_"
        yield gauge(rm + "partitioncount", "Partitions on this broker", total)
        yield gauge(rm + "leadercount", "Partitions led by this broker", led)
        yield gauge(rm + "underreplicatedpartitions", "Led partitions whose ISR is smaller "
                    "than their replica set", under)
        yield gauge(rm + "underminisrpartitioncount", "Led partitions below min.insync.replicas",
                    under_min_isr)
        yield gauge(rm + "offlinereplicacount", "Replicas on offline log dirs",
                    offline_replicas)
        fs = "kafka_server_fetchsessioncache_"
        sessions = b.fetch_sessions
        yield gauge(fs + "numincrementalfetchsessions", "KIP-227 fetch sessions cached",
                    sessions.num_sessions)
        yield gauge(fs + "numincrementalfetchpartitionscached",
                    "Partitions held by the cached fetch sessions",
                    sessions.num_partitions_cached)
        yield counter(fs + "incrementalfetchsessionevictions",
                      "Fetch sessions evicted to make room for others", sessions.evictions)
        isr = getattr(b, "isr", None)
        yield counter(rm + "isrshrinks", "ISR shrinks of partitions this broker leads",
                      isr.shrinks if isr is not None else 0)
        yield counter(rm + "isrexpands", "ISR expansions of partitions this broker leads",
                      isr.expands if isr is not None else 0)
        kc = "kafka_controller_kafkacontroller_"
        controller = 1 if b.started.is_set() else 0
        yield gauge(kc + "activecontrollercount", "1 on the active controller", controller)
        yield gauge(kc + "offlinepartitionscount", "Partitions without a leader", offline)
        yield gauge(kc + "globaltopiccount", "Topics in the cluster", topics)
        yield gauge(kc + "globalpartitioncount", "Partitions in the cluster", total)
        fenced = 0
        if img is not None:
            fenced = sum(1 for br in img.brokers.values() if br.fenced)
            yield gauge(kc + "activebrokercount", "Unfenced brokers",
                        len(img.brokers) - fenced)
        yield gauge(kc + "fencedbrokercount", "Fenced brokers", fenced)
        state = BROKER_STATE_RUNNING if b.started.is_set() else BROKER_STATE_STARTING
        yield gauge("kafka_server_kafkaserver_brokerstate", "3 = RUNNING", state)
        idle = b.metrics.idle.idle_ratio()
        yield gauge("kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent",
                    "Fraction of time the request handlers (the event loop) are idle", idle)
        yield gauge("kafka_network_socketserver_networkprocessoravgidle_percent",
                    "Fraction of time the network processors (the event loop) are idle", idle)

    # ---- logs -----------------------------------------------------------------------------
    def log_families(self) -> Iterator[Metric]:
        labels = ["topic", "partition"]
        size = GaugeMetricFamily("kafka_log_log_size", "Partition size in bytes", labels=labels)
        leo = GaugeMetricFamily("kafka_log_log_logendoffset", "Log end offset", labels=labels)
        lso = GaugeMetricFamily("kafka_log_log_logstartoffset", "Log start offset",
                                labels=labels)
        segs = GaugeMetricFamily("kafka_log_log_numlogsegments", "Segments", labels=labels)
        logs = self.broker.logs
        if logs is not None:  # as Kafka, an offline dir's logs go (iterated: online ones)
            for (topic, partition), plog in sorted(logs, key=lambda e: e[0]):
                if topic == "__cluster_metadata":  # Kafka's raft log is not a kafka.log Log
                    continue
                lv = [topic, str(partition)]
                size.add_metric(lv, plog.size_bytes)
                leo.add_metric(lv, plog.log_end_offset)
                lso.add_metric(lv, plog.log_start_offset)
                segs.add_metric(lv, len(plog.segments))
        yield from (size, leo, lso, segs)

    # ---- connections ----------------------------------------------------------------------
    def connection_families(self) -> Iterator[Metric]:
        b = self.broker
        labels = ["listener", "networkProcessor"]
        count = GaugeMetricFamily("kafka_server_socket_server_metrics_connection_count",
                                  "Open connections", labels=labels)
        created = GaugeMetricFamily(
            "kafka_server_socket_server_metrics_connection_creation_total",
            "Connections accepted since start", labels=labels)
        per_listener: dict[str, int] = {lst.name: 0 for lst in b.config.broker_listeners}
        for conn in b.server.connections:
            per_listener[conn.listener] = per_listener.get(conn.listener, 0) + 1
        for name, n in sorted(per_listener.items()):
            count.add_metric([name, "0"], n)
            created.add_metric([name, "0"], b.metrics.connections_created.get(name, 0))
        yield count
        yield created

    # ---- metadata quorum (KIP-595 raft-metrics, KIP-835 controller metadata metrics) ------
    def quorum_families(self) -> Iterator[Metric]:
        q = self.broker.quorum
        if q is None or q.log is None:
            return
        leo = q.log_end_offset()
        hw = q.partition.high_watermark if q.partition is not None else leo
        applied = q.image.offset
        rf = "kafka_server_raft_metrics_"
        yield gauge(rf + "current_leader", "Node id of the quorum leader", self.broker.node_id)
        yield gauge(rf + "current_epoch", "Quorum leader epoch", q.epoch)
        yield gauge(rf + "high_watermark", "Quorum high watermark", hw)
        yield gauge(rf + "log_end_offset", "Metadata log end offset", leo)
        yield gauge(rf + "current_state", "1 = leader (kafkawire: a one-voter quorum)", 1)
        kc = "kafka_controller_kafkacontroller_"
        yield gauge(kc + "lastappliedrecordoffset", "Last metadata record applied", applied)
        yield gauge(kc + "lastcommittedrecordoffset", "Last metadata record committed",
                    hw - 1)
        yield gauge("kafka_server_raft_metrics_lag",
                    "Committed metadata records not yet applied to the image (offsets)",
                    max(0, hw - 1 - applied))

    # ---- consumer groups (kafka_exporter's names) -----------------------------------------
    def group_lag_families(self) -> Iterator[Metric]:
        labels = ["consumergroup", "topic", "partition"]
        lag = GaugeMetricFamily("kafka_consumergroup_lag",
                                "High watermark minus the committed offset", labels=labels)
        cur = GaugeMetricFamily("kafka_consumergroup_current_offset", "Committed offset",
                                labels=labels)
        b = self.broker
        for _p, shard in b.group_runtime.loaded_shards():
            store = getattr(shard, "offsets", None)
            if store is None:
                continue
            for group, offsets in sorted(store.committed.items()):
                for (topic, partition), om in sorted(offsets.items()):
                    p = b.replicas.partition(topic, partition) if b.replicas is not None else None
                    lv = [group, topic, str(partition)]
                    cur.add_metric(lv, om.offset)
                    if p is not None:  # the high watermark of the partition-state layer
                        lag.add_metric(lv, max(0, p.high_watermark - om.offset))
        yield lag
        yield cur


def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, value=value)


_TOPIC_SERIES = (
    ("messagesin", "messages_in", "Messages appended"),
    ("bytesin", "bytes_in", "Bytes appended by producers"),
    ("bytesout", "bytes_out", "Record bytes sent to consumers"),
    ("failedproducerequests", "failed_produce", "Failed produce (per partition)"),
    ("failedfetchrequests", "failed_fetch", "Failed fetch (per partition)"),
    ("totalproducerequests", "total_produce", "Produce requests (per topic)"),
    ("totalfetchrequests", "total_fetch", "Fetch requests (per topic)"),
)


def topic_families(topics: dict[str, TopicCounters], other: TopicCounters) -> Iterator[Metric]:
    """Per topic and, without a topic label, for all topics (Kafka's two MBeans)."""
    for short, attr, doc in _TOPIC_SERIES:
        fam = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{short}", doc,
                                  labels=["topic"])
        total = getattr(other, attr)
        for name, c in sorted(topics.items()):
            v = getattr(c, attr)
            total += v
            fam.add_metric([name], v)
        all_topics = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{short}", doc)
        all_topics.add_metric([], total)
        fam.samples.extend(all_topics.samples)
        yield fam


def request_families(requests: dict[str, RequestStats]) -> Iterator[Metric]:
    rate = CounterMetricFamily("kafka_network_requestmetrics_requests", "Requests",
                               labels=["request", "version"])
    for name, st in sorted(requests.items()):
        for version, n in sorted(st.by_version.items()):
            rate.add_metric([name, str(version)], n)
    yield rate
    columns = {name: ([list(col) for col in zip(*st.samples, strict=True)]
                      if st.samples else [[], [], [], []])
               for name, st in requests.items()}
    # one Prometheus summary per timing: the percentiles (``{quantile=...}``, the JMX
    # exporter's names for Kafka's histogram), ``_count`` (requests measured, a counter) and
    # ``_sum`` (their total time in ms)
    for i, timing in enumerate(TIMINGS):
        family = f"kafka_network_requestmetrics_{timing}"
        summary = Metric(family, f"{timing} percentiles over the last {RESERVOIR_SAMPLES} "
                         "requests, requests measured and their total time", "summary")
        for name, st in sorted(requests.items()):
            cols = columns[name]
            raw = [sum(x) for x in zip(*cols, strict=True)] if i == 4 else cols[i]
            values = sorted(v * 1000.0 for v in raw)
            for label, qv in QUANTILES:
                summary.add_sample(family, {"request": name, "quantile": label},
                                   percentile(values, qv))
            summary.add_sample(family + "_count", {"request": name}, st.count)
            total_s = sum(st.sums) if i == 4 else st.sums[i]
            summary.add_sample(family + "_sum", {"request": name}, total_s * 1000.0)
        yield summary


def telemetry_families(
    points: dict[tuple[str, str, tuple[tuple[str, str], ...]], float],
) -> Iterable[Metric]:
    """KIP-714 client metrics pushed to this broker, one gauge family per metric name."""
    fams: dict[str, Metric] = {}
    for (instance, name, labels), value in sorted(points.items()):
        prom = "kafka_client_" + "".join(ch if ch.isalnum() else "_" for ch in name)
        fam = fams.get(prom)
        if fam is None:
            fam = fams[prom] = Metric(prom, f"client metric {name} (KIP-714 push)", "gauge")
        fam.add_sample(prom, {"client_instance_id": instance, **dict(labels)}, value)
    return fams.values()
