"""How long an admin write takes to reach every node of a cluster (issue 27).

A write (a topic, an ACL, a topic config) goes through one broker that is not the active
controller (it forwards it); as soon as it is acknowledged, one thread per node asks that node,
over its own connection and every few milliseconds, whether it sees the write yet (Metadata,
DescribeAcls, DescribeConfigs: each answered from the node's own metadata image, in Kafka as
here). Per node and write: the time from the acknowledgement until the node answered with the
write (``lag_ms``; 0 when the first question already saw it) and from the request until then
(``since_send_ms``). The commit happened between the request and the acknowledgement, so the
two bound the propagation delay from the commit.

Works against any Kafka-protocol cluster (kafkawire or Apache Kafka) whose brokers run
StandardAuthorizer with the anonymous principal a super user (:data:`AUTHORIZER_PROPS`).
Used by ``tests/test_metadata_propagation.py`` and ``bench/metadata_propagation.py``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from compat_tests.wire import Connection
from protocol._generated.create_acls_request import CreateAclsRequest
from protocol._generated.create_topics_request import CreateTopicsRequest
from protocol._generated.describe_acls_request import DescribeAclsRequest
from protocol._generated.describe_configs_request import DescribeConfigsRequest
from protocol._generated.describe_quorum_request import DescribeQuorumRequest
from protocol._generated.incremental_alter_configs_request import (
    IncrementalAlterConfigsRequest,
)
from protocol._generated.metadata_request import MetadataRequest

#: what both systems need for CreateAcls / DescribeAcls (no other ACL is ever written)
AUTHORIZER_PROPS = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
}
KINDS = ("topic", "acl", "config")
#: how often each node is asked while a write is not visible there yet
POLL_INTERVAL_S = 0.002
TOPIC, LITERAL, READ, ALLOW, ANY = 2, 3, 3, 3, 1
RETENTION_BASE_MS = 86_400_000


@dataclass
class Sample:
    kind: str
    name: str
    ack_ms: float
    #: node id -> ms from the acknowledgement until the node showed the write (>= 0)
    lag_ms: dict[int, float] = field(default_factory=dict)
    #: node id -> ms from sending the write until the node showed it
    since_send_ms: dict[int, float] = field(default_factory=dict)

    @property
    def worst_lag_ms(self) -> float:
        return max(self.lag_ms.values())


def quorum_leader(address: str) -> int:
    """The metadata quorum's leader (DescribeQuorum, forwarded by a broker to a controller)."""
    req = DescribeQuorumRequest(topics=[DescribeQuorumRequest.TopicData(
        topic_name="__cluster_metadata", partitions=[DescribeQuorumRequest.PartitionData(
            partition_index=0)])])
    with Connection(address, timeout=30) as c:
        resp = c.request(req, 1)
    part = resp.topics[0].partitions[0]
    if resp.error_code or part.error_code:
        raise RuntimeError(f"DescribeQuorum: {resp.error_code}/{part.error_code}")
    return int(part.leader_id)


def _write(kind: str, name: str, value: int) -> tuple[Any, int]:
    if kind == "topic":
        return CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name=name, num_partitions=1, replication_factor=-1)], timeout_ms=30_000), 7
    if kind == "acl":
        return CreateAclsRequest(creations=[CreateAclsRequest.AclCreation(
            resource_type=TOPIC, resource_name=name, resource_pattern_type=LITERAL,
            principal="User:propagation", host="*", operation=READ,
            permission_type=ALLOW)]), 3
    return IncrementalAlterConfigsRequest(resources=[
        IncrementalAlterConfigsRequest.AlterConfigsResource(
            resource_type=TOPIC, resource_name=name, configs=[
                IncrementalAlterConfigsRequest.AlterableConfig(
                    name="retention.ms", config_operation=0, value=str(value))])]), 1


def _write_error(kind: str, resp: Any) -> int:
    if kind == "topic":
        return int(resp.topics[0].error_code)
    if kind == "acl":
        return int(resp.results[0].error_code)
    return int(resp.responses[0].error_code)


def _probe(kind: str, name: str, value: int) -> tuple[Any, int, Callable[[Any], bool]]:
    """(request, version, does the answer show the write)."""
    if kind == "topic":
        req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                              allow_auto_topic_creation=False)
        return req, 12, lambda r: r.topics[0].error_code == 0 and len(r.topics[0].partitions) == 1
    if kind == "acl":
        req = DescribeAclsRequest(resource_type_filter=TOPIC, resource_name_filter=name,
                                  pattern_type_filter=LITERAL, principal_filter=None,
                                  host_filter=None, operation=ANY, permission_type=ANY)
        return req, 3, lambda r: r.error_code == 0 and len(r.resources) == 1
    req = DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=TOPIC, resource_name=name, configuration_keys=["retention.ms"])])

    def shows(r: Any) -> bool:
        res = r.results[0]
        return res.error_code == 0 and any(
            c.name == "retention.ms" and c.value == str(value) for c in res.configs)
    return req, 4, shows


class _Prober(threading.Thread):
    """Asks one node, again and again, until it shows the write or ``deadline``."""

    def __init__(self, address: str, kind: str, name: str, value: int,
                 deadline: float) -> None:
        super().__init__(daemon=True)
        self.address, self.deadline = address, deadline
        self.req, self.version, self.shows = _probe(kind, name, value)
        self.conn = Connection(address, timeout=30)
        self.go = threading.Event()
        self.seen_at: float | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.go.wait()
            while time.monotonic() < self.deadline:
                if self.shows(self.conn.request(self.req, self.version)):
                    self.seen_at = time.monotonic()
                    return
                time.sleep(POLL_INTERVAL_S)
        except BaseException as e:  # reported by ``measure``
            self.error = e
        finally:
            self.conn.close()


def measure(nodes: dict[int, str], via: int, rounds: int, kinds: tuple[str, ...] = KINDS,
            prefix: str = "propagation", timeout_s: float = 30.0) -> list[Sample]:
    """``rounds`` writes of each kind through node ``via`` (its broker address in ``nodes``),
    one after the other; for each, when every node showed it. Raises when a write fails or a
    node does not show it within ``timeout_s``."""
    out: list[Sample] = []
    config_topic = f"{prefix}-configs"
    if "config" in kinds:  # the topic whose retention.ms the config writes change
        _one(nodes, via, "topic", config_topic, 0, timeout_s)
    with Connection(nodes[via], timeout=60) as writer:
        for i in range(rounds):
            for kind in kinds:
                name = config_topic if kind == "config" else f"{prefix}-{kind}-{i}"
                out.append(_one(nodes, via, kind, name, RETENTION_BASE_MS + i, timeout_s,
                                writer))
    return out


def _one(nodes: dict[int, str], via: int, kind: str, name: str, value: int,
         timeout_s: float, writer: Connection | None = None) -> Sample:
    deadline = time.monotonic() + timeout_s
    probers = {n: _Prober(addr, kind, name, value, deadline) for n, addr in nodes.items()}
    for p in probers.values():
        p.start()
    req, version = _write(kind, name, value)
    conn = writer or Connection(nodes[via], timeout=60)
    try:
        sent = time.monotonic()
        resp = conn.request(req, version)
        acked = time.monotonic()
    finally:
        if writer is None:
            conn.close()
    err = _write_error(kind, resp)
    for p in probers.values():
        if err:
            p.deadline = 0.0
        p.go.set()
    for p in probers.values():
        p.join(timeout_s + 5)
    if err:
        raise RuntimeError(f"{kind} {name} through node {via}: error {err}")
    sample = Sample(kind, name, (acked - sent) * 1000)
    for n, p in probers.items():
        if p.error is not None:
            raise RuntimeError(f"node {n} ({p.address}): {p.error!r}") from p.error
        if p.seen_at is None:
            raise AssertionError(f"{kind} {name} not on node {n} within {timeout_s} s")
        sample.lag_ms[n] = max(0.0, (p.seen_at - acked) * 1000)
        sample.since_send_ms[n] = (p.seen_at - sent) * 1000
    return sample


def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))]


def summary(samples: list[Sample]) -> dict[str, dict[str, float]]:
    """Per kind: p50 / p90 / max of the slowest node's lag after the acknowledgement and
    since the request, and of the acknowledgement itself (ms)."""
    out: dict[str, dict[str, float]] = {}
    for kind in sorted({s.kind for s in samples}):
        ss = [s for s in samples if s.kind == kind]
        lags = [s.worst_lag_ms for s in ss]
        sends = [max(s.since_send_ms.values()) for s in ss]
        acks = [s.ack_ms for s in ss]
        out[kind] = {"n": len(ss),
                     "lag_p50": percentile(lags, 50), "lag_p90": percentile(lags, 90),
                     "lag_max": max(lags),
                     "send_p50": percentile(sends, 50), "send_max": max(sends),
                     "ack_p50": percentile(acks, 50)}
    return out


def table(title: str, samples: list[Sample]) -> str:
    lines = [f"{title}", "| write | n | ack p50 | slowest node after ack: p50 | p90 | max "
             "| after request: p50 | max |", "|---|---|---|---|---|---|---|---|"]
    for kind, f in summary(samples).items():
        lines.append(f"| {kind} | {f['n']:.0f} | {f['ack_p50']:.0f} ms | {f['lag_p50']:.0f} ms "
                     f"| {f['lag_p90']:.0f} ms | {f['lag_max']:.0f} ms | {f['send_p50']:.0f} ms "
                     f"| {f['send_max']:.0f} ms |")
    return "\n".join(lines)
