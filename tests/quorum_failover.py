"""Failover of the active controller under writes, on a ``kafkawire.tools.cluster.LocalCluster`` (shared by
tests/test_quorum_failover.py and ``bench/quorum_failover.py``).

A writer thread creates topics one after the other through the controller listener of the
node it believes active (``--bootstrap-controller`` style: CreateTopics is a controller API);
on NOT_CONTROLLER or a dead connection it asks the live controllers who leads and goes there.
Each round kill -9's the active controller once a few topics went through, measures the time
until a survivor leads in a newer epoch (``elect_ms``) and until the next write is acknowledged
(``write_ms``), restarts the node and waits until every voter has caught up again.
Only topics answered NONE count as acknowledged; every one of them must survive.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from kafkawire.tools.cluster import LocalCluster
from kafkawire.tools.testing import describe_quorum_leader
from protocol._generated.create_topics_request import CreateTopicsRequest
from protocol._generated.describe_quorum_request import DescribeQuorumRequest
from protocol._generated.metadata_request import MetadataRequest
from protocol.errors import ErrorCode
from tests.conftest import RawClient

POLL_S = 0.01


@dataclass
class FailoverResult:
    acknowledged: list[str] = field(default_factory=list)
    elect_ms: list[float] = field(default_factory=list)
    write_ms: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)


def _request(addr: str, req: Any, version: int, timeout_s: float = 10.0) -> Any:
    client = RawClient(addr, "failover")
    client.sock.settimeout(timeout_s)
    try:
        return client.request(req, version)
    finally:
        client.close()


def _leader(cluster: LocalCluster, newer_than: int = -1,
            among: list[int] | None = None) -> tuple[int, int]:
    """(leader, epoch) as a live controller reports it, or (-1, -1)."""
    for node_id in among or cluster.controller_ids:
        if not cluster.pid_of(node_id):
            continue
        leader, epoch = describe_quorum_leader("127.0.0.1", cluster.controller_ports[node_id],
                                               1.0)
        if leader >= 0 and epoch > newer_than and (among is None or leader in among):
            return leader, epoch
    return -1, -1


class Writer(threading.Thread):
    def __init__(self, cluster: LocalCluster, prefix: str) -> None:
        super().__init__(daemon=True)
        self.cluster = cluster
        self.prefix = prefix
        self.stop = threading.Event()
        self.acked: list[tuple[float, str]] = []
        self.errors: dict[str, int] = {}
        self.lock = threading.Lock()

    def run(self) -> None:
        n = 0
        target = -1
        while not self.stop.is_set():
            if target < 0:
                target, _epoch = _leader(self.cluster)
                if target < 0:
                    time.sleep(POLL_S)
                    continue
            name = f"{self.prefix}-{n}"
            req = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
                name=name, num_partitions=1, replication_factor=1, assignments=[], configs=[])],
                timeout_ms=30_000, validate_only=False)
            addr = f"127.0.0.1:{self.cluster.controller_ports[target]}"
            try:
                code = int(_request(addr, req, 5).topics[0].error_code)
            except (OSError, ConnectionError):  # a timeout is an OSError
                code = -1
            with self.lock:
                if code == ErrorCode.NONE:
                    self.acked.append((time.monotonic(), name))
                else:
                    key = "disconnected" if code < 0 else ErrorCode(code).name
                    self.errors[key] = self.errors.get(key, 0) + 1
            n += 1  # never retry a name: an unanswered create may still have committed
            if code != ErrorCode.NONE:
                target = -1
                time.sleep(POLL_S)

    def acked_since(self, t: float) -> float | None:
        with self.lock:
            return next((at for at, _ in self.acked if at > t), None)

    def count(self) -> int:
        with self.lock:
            return len(self.acked)


def _caught_up(cluster: LocalCluster, leader: int) -> bool:
    """Every live voter has the leader's whole log."""
    req = DescribeQuorumRequest(topics=[DescribeQuorumRequest.TopicData(
        topic_name="__cluster_metadata",
        partitions=[DescribeQuorumRequest.PartitionData(partition_index=0)])])
    try:
        part = _request(f"127.0.0.1:{cluster.controller_ports[leader]}", req, 2) \
            .topics[0].partitions[0]
    except (OSError, ConnectionError):
        return False
    live = {i for i in cluster.controller_ids if cluster.pid_of(i)}
    return part.error_code == 0 and len(part.current_voters) == len(cluster.controller_ids) \
        and all(v.log_end_offset >= part.high_watermark for v in part.current_voters
                if v.replica_id in live)


def _wait(cond: Any, timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(POLL_S)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


def run_failover(cluster: LocalCluster, rounds: int, writes_per_round: int = 3,
                 timeout_s: float = 60.0) -> FailoverResult:
    """``rounds`` kill -9's of the active controller while a writer creates topics."""
    result = FailoverResult()
    writer = Writer(cluster, "failover")
    writer.start()
    try:
        for _ in range(rounds):
            _kill_round(cluster, writer, result, writes_per_round, timeout_s)
    finally:
        writer.stop.set()
        writer.join(60)
    result.acknowledged = [name for _, name in writer.acked]
    result.errors = dict(writer.errors)
    return result


def _kill_round(cluster: LocalCluster, writer: Writer, result: FailoverResult,
                writes: int, timeout_s: float) -> None:
    leader, epoch = _wait(lambda: (r := _leader(cluster))[0] >= 0 and r, timeout_s, "a leader")
    _wait(lambda: _caught_up(cluster, leader), timeout_s, "every voter caught up")
    goal = writer.count() + writes
    _wait(lambda: writer.count() >= goal, timeout_s, "writes before the kill")
    t0 = time.monotonic()
    cluster.kill(leader)
    survivors = [i for i in cluster.controller_ids if i != leader]
    _wait(lambda: _leader(cluster, epoch, survivors)[0] >= 0, timeout_s, "a new leader")
    result.elect_ms.append((time.monotonic() - t0) * 1000)
    acked = _wait(lambda: writer.acked_since(t0), timeout_s, "a write after the kill")
    result.write_ms.append((acked - t0) * 1000)
    cluster.start_node(leader, timeout_s)


def create_latency_ms(cluster: LocalCluster, count: int, prefix: str = "latency"
                      ) -> list[float]:
    """Milliseconds of ``count`` CreateTopics (one partition each) sent one after the other to
    the active controller's controller listener: each is answered once committed."""
    leader, _epoch = _wait(lambda: (r := _leader(cluster))[0] >= 0 and r, 60, "a leader")
    addr = f"127.0.0.1:{cluster.controller_ports[leader]}"
    client = RawClient(addr, "latency")
    out: list[float] = []
    try:
        for i in range(count):
            req = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
                name=f"{prefix}-{i}", num_partitions=1, replication_factor=1, assignments=[],
                configs=[])], timeout_ms=30_000, validate_only=False)
            t0 = time.perf_counter()
            code = int(client.request(req, 5).topics[0].error_code)
            out.append((time.perf_counter() - t0) * 1000)
            if code != ErrorCode.NONE:
                raise AssertionError(f"CreateTopics {prefix}-{i}: {ErrorCode(code).name}")
    finally:
        client.close()
    return out


def topics_on(addr: str) -> set[str]:
    req = MetadataRequest(allow_auto_topic_creation=False)
    req.topics = None  # all topics
    md = _request(addr, req, 12)
    return {t.name for t in md.topics if t.error_code == 0}


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    s = sorted(values)
    if not s:
        return float("nan")
    return s[min(len(s) - 1, max(0, math.ceil(q / 100 * len(s)) - 1))]
