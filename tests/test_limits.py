"""Resource limits (issue 18): Kafka's answers to oversized requests, and a broker that serves
many partitions under a low open-file limit, restarts after a clean stop and after kill -9."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from kafkawire.testing import BrokerProcess
from protocol._generated.create_partitions_request import CreatePartitionsRequest
from protocol._generated.create_topics_request import CreateTopicsRequest
from protocol._generated.metadata_request import MetadataRequest
from protocol.errors import ErrorCode
from tests.conftest import RawClient

CT = CreateTopicsRequest


def uname(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def creatable(name: str, parts: int) -> Any:
    return CT.CreatableTopic(name=name, num_partitions=parts, replication_factor=1,
                             assignments=[], configs=[])


def create(raw: RawClient, *topics: Any, validate_only: bool = False) -> Any:
    return raw.request(CT(topics=list(topics), timeout_ms=30000, validate_only=validate_only), 7)


def topic_exists(raw: RawClient, name: str) -> bool:
    req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                          allow_auto_topic_creation=False)
    [t] = raw.request(req, 12).topics
    return bool(t.error_code == ErrorCode.NONE)


@pytest.mark.parametrize("validate_only", [False, True])
def test_create_topics_over_ten_thousand_partitions(raw: RawClient, validate_only: bool) -> None:
    a, b, c = uname("big-a"), uname("big-b"), uname("big-c")
    resp = create(raw, creatable(a, 5000), creatable(b, 5000), creatable(c, 1),
                  validate_only=validate_only)
    assert [(r.name, r.error_code, r.error_message) for r in resp.topics] == [
        (n, ErrorCode.POLICY_VIOLATION, "Excessively large number of partitions per request.")
        for n in (a, b, c)
    ]
    assert not topic_exists(raw, a) and not topic_exists(raw, c)


def test_create_topics_of_exactly_ten_thousand_partitions(raw: RawClient) -> None:
    """10,000 partitions pass the partition check, but with the TopicRecord make 10,001
    metadata records: Kafka's BoundedList refuses the operation."""
    t = uname("ten-k")
    [r] = create(raw, creatable(t, 10_000)).topics
    assert (r.error_code, r.error_message) == (
        ErrorCode.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")
    assert not topic_exists(raw, t)
    [r] = create(raw, creatable(t, 2)).topics  # the name is still free
    assert r.error_code == ErrorCode.NONE


def test_create_partitions_over_the_record_limit(raw: RawClient) -> None:
    t = uname("grow")
    assert create(raw, creatable(t, 1)).topics[0].error_code == ErrorCode.NONE
    grow = CreatePartitionsRequest.CreatePartitionsTopic(name=t, count=10_002)
    grow.assignments = None  # the constructor turns None into []
    req = CreatePartitionsRequest(topics=[grow], timeout_ms=30000, validate_only=False)
    [r] = raw.request(req, 3).results
    assert (r.error_code, r.error_message) == (
        ErrorCode.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")


def _open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _produce_all(bootstrap: str, topics: list[str], parts: int, tag: str) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for t in topics:
        for i in range(parts):
            p.produce(t, value=f"{tag}-{t}-{i}".encode(), partition=i)
        p.poll(0)
    assert p.flush(120) == 0


def _consume_all(bootstrap: str, topics: list[str], parts: int) -> dict[tuple[str, int], list[bytes]]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": uname("g"),
                  "enable.auto.commit": False, "fetch.wait.max.ms": 50})
    c.assign([TopicPartition(t, i, 0) for t in topics for i in range(parts)])
    got: dict[tuple[str, int], list[bytes]] = {}
    deadline = time.monotonic() + 120
    want = len(topics) * parts
    try:
        while time.monotonic() < deadline:
            for m in c.consume(1000, timeout=1):
                if m.error() is None:
                    got.setdefault((m.topic(), m.partition()), []).append(m.value())
            if len(got) == want and all(len(v) >= 2 for v in got.values()):
                break
    finally:
        c.close()
    return got


def test_many_partitions_under_a_low_open_file_limit(tmp_path: Path) -> None:
    """600 partitions under ``ulimit -n 256``: at 3 descriptors per partition they would need
    1,800. Produce to and consume from all of them, restart cleanly and after kill -9."""
    topics, parts, limit = [uname("fd-a"), uname("fd-b"), uname("fd-c")], 200, 256
    bp = BrokerProcess(tmp_path / "data", open_files_limit=limit)
    bp.start()
    try:
        raw = RawClient(bp.bootstrap)
        resp = create(raw, *(creatable(t, parts) for t in topics))
        assert [r.error_code for r in resp.topics] == [0, 0, 0]
        raw.close()
        _produce_all(bp.bootstrap, topics, parts, "one")
        assert bp.proc is not None
        assert _open_files(bp.proc.pid) < limit
        bp.restart()
        _produce_all(bp.bootstrap, topics, parts, "two")
        bp.restart(kill=True)
        got = _consume_all(bp.bootstrap, topics, parts)
        assert len(got) == len(topics) * parts
        for (t, i), values in got.items():
            assert values[:2] == [f"one-{t}-{i}".encode(), f"two-{t}-{i}".encode()]
        assert bp.proc is not None
        assert _open_files(bp.proc.pid) < limit
        assert "Traceback" not in bp.log()
    finally:
        bp.close()
