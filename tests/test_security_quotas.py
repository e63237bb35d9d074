"""Client quotas enforced: a producer limited to 1 MB/s gets 1 MB/s with throttle_time_ms as
Kafka reports it, a throttled consumer, Kafka's entity precedence, and connection creation
rates. Real broker, real clients (confluent-kafka), quotas set with AlterClientQuotas."""

from __future__ import annotations

import json
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkawire.net.quotas import Rate, quota_entity
from kafkawire.tools.testing import BrokerProcess
from kraft.image import MetadataImage
from protocol._generated.alter_client_quotas_request import AlterClientQuotasRequest
from tests.conftest import RawClient

MB = 1024 * 1024


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    bp = BrokerProcess(tmp_path_factory.mktemp("quotas") / "data").start()
    try:
        yield bp
    finally:
        bp.close()


def set_quota(bootstrap: str, entity: list[tuple[str, str | None]], key: str,
              value: float | None) -> None:
    c = RawClient(bootstrap)
    try:
        R = AlterClientQuotasRequest
        r = c.request(R(entries=[R.EntryData(
            entity=[R.EntityData(entity_type=t, entity_name=n) for t, n in entity],
            ops=[R.OpData(key=key, value=value or 0.0, remove=value is None)])]), 1)
        assert r.entries[0].error_code == 0, r
    finally:
        c.close()


def test_rate_and_throttle_time_follow_kafkas_formula() -> None:
    rate = Rate(samples=11, sample_ms=1000)
    rate.record(5 * MB, 0)
    # the window counts at least 10 full samples: 5 MB over 10 s is 0.5 MB/s
    assert rate.per_second(0) == pytest.approx(0.5 * MB)
    assert rate.throttle_ms(MB, 0) == 0
    rate.record(15 * MB, 500)  # 20 MB over 0.5 s elapsed + 10 missing full samples
    assert rate.per_second(500) == pytest.approx(20 * MB / 10.5)
    # (rate - quota) / quota * window
    assert rate.throttle_ms(MB, 500) == pytest.approx((20 / 10.5 - 1) * 10500, abs=1)


def test_bandwidth_throttles_are_not_bounded_by_the_window() -> None:
    """Kafka 4.3.1 answered a ~900-byte batch under a 5 B/s producer_byte_rate with
    throttle_time_ms 163800 (compat scenario client_quotas); request throttles stay bounded by
    the 11 s of the windows."""
    rate = Rate(samples=11, sample_ms=1000)
    rate.record(900, 0)
    unbounded = rate.throttle_ms(5, 0, capped=False)
    assert unbounded == pytest.approx((90 / 5 - 1) * 10_000, abs=1)
    assert rate.throttle_ms(5, 0) == 11_000


def test_precedence_is_kafkas() -> None:
    def img(q: dict[Any, dict[str, float]]) -> MetadataImage:
        return MetadataImage(client_quotas=q)

    cid, usr = ("client-id", "c"), ("user", "u")
    q = {
        (("client-id", None),): {"producer_byte_rate": 1},
        (cid,): {"producer_byte_rate": 2},
        (("user", None),): {"producer_byte_rate": 3},
        (("client-id", None), ("user", None)): {"producer_byte_rate": 4},
        (cid, ("user", None)): {"producer_byte_rate": 5},
        (usr,): {"producer_byte_rate": 6},
        (("client-id", None), usr): {"producer_byte_rate": 7},
        (cid, usr): {"producer_byte_rate": 8},
    }
    expected = 8
    while q:
        found = quota_entity(img(q), "producer_byte_rate", "u", "c")
        assert found is not None and found[1] == expected
        q = {k: v for k, v in q.items() if v["producer_byte_rate"] != expected}
        expected -= 1
    assert quota_entity(img({}), "producer_byte_rate", "u", "c") is None


def _produce_for(bootstrap: str, client_id: str, topic: str, seconds: float,
                 size: int = 10_000, skip_s: float = 0.0) -> tuple[float, list[int]]:
    """(acknowledged bytes per second after the first ``skip_s`` seconds, throttle times
    librdkafka reported)."""
    from confluent_kafka import Producer

    throttles: list[int] = []

    def stats(raw: str) -> None:
        for b in json.loads(raw).get("brokers", {}).values():
            if b.get("nodeid", -1) >= 0 and b.get("throttle", {}).get("max", 0) > 0:
                throttles.append(int(b["throttle"]["max"]))

    acked: list[tuple[float, int]] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            acked.append((time.monotonic(), len(msg.value())))

    p = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5,
                  "batch.size": 100_000,
                  "statistics.interval.ms": 1000, "stats_cb": stats,
                  "queue.buffering.max.kbytes": 4096})
    payload = b"x" * size
    start = time.monotonic()
    end = start + seconds
    while time.monotonic() < end:
        try:
            p.produce(topic, payload, on_delivery=delivered)
        except BufferError:
            p.poll(0.05)
        p.poll(0)
    p.flush(60)
    counted = sum(n for t, n in acked if start + skip_s <= t <= end)
    return counted / (seconds - skip_s), throttles


def test_producer_limited_to_1_mb_per_second(broker: BrokerProcess) -> None:
    """Kafka's window lets a new client send ~10 s of quota at once, and the rate is held
    over 11 s windows (bursts, then mutes): measured from 12 s to 45 s, three windows (the
    66 s figure in docs/SECURITY.md comes from a longer run of the same helper)."""
    topic = f"q-{uuid.uuid4().hex[:8]}"
    client = f"limited-{uuid.uuid4().hex[:6]}"
    set_quota(broker.bootstrap, [("client-id", client)], "producer_byte_rate", MB)
    _produce_for(broker.bootstrap, "warm-up", topic, 1)  # metadata, topic creation
    rate, throttles = _produce_for(broker.bootstrap, client, topic, 45, skip_s=12)
    print(f"producer with producer_byte_rate=1048576: {rate / MB:.3f} MB/s from 12 s to "
          f"45 s, throttle_time_ms max seen {max(throttles, default=0)}")
    # 0.89-1.14 MB/s over 66 s on the shared 2-core machine (load 7-11), most runs within
    # 3 % (docs/SECURITY.md); one run under two parallel full test suites gave 1.35. The
    # precise figure is a measurement (docs); this test holds the enforcement itself: the
    # rate stays near the quota, far below the unlimited client's below, with throttling seen.
    assert 0.7 * MB <= rate <= 1.5 * MB
    assert throttles and max(throttles) > 0
    # another client id is not limited
    free_rate, _ = _produce_for(broker.bootstrap, "free", topic, 4)
    assert free_rate > 2 * MB


def test_throttled_consumer(broker: BrokerProcess) -> None:
    """3 MB at 100 kB/s: Kafka's 10 s minimum window lets about 1 MB through at once, then
    fetches are answered empty with throttle_time_ms until the rate is back under."""
    from confluent_kafka import Consumer, Producer

    topic = f"qf-{uuid.uuid4().hex[:8]}"
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for _ in range(300):
        p.produce(topic, b"y" * 10_000)
    assert p.flush(60) == 0
    client = f"slow-{uuid.uuid4().hex[:6]}"
    set_quota(broker.bootstrap, [("client-id", client)], "consumer_byte_rate", 100_000)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "client.id": client,
                  "group.id": client, "auto.offset.reset": "earliest",
                  "max.partition.fetch.bytes": 100_000})
    c.subscribe([topic])
    got = 0
    start = time.monotonic()
    first = None
    while time.monotonic() - start < 15:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got += len(m.value())
            first = first or time.monotonic()
    c.close()
    assert first is not None
    elapsed = time.monotonic() - first
    print(f"consumer with consumer_byte_rate=100000: {got} bytes in {elapsed:.1f} s")
    # unthrottled, the 3 MB arrive in well under a second
    assert 100_000 < got <= 100_000 * (10 + elapsed) * 1.2


def test_connection_creation_rate_per_ip(broker: BrokerProcess) -> None:
    # the limited clients connect from 127.0.0.2, the admin from 127.0.0.1
    set_quota(broker.bootstrap, [("ip", "127.0.0.2")], "connection_creation_rate", 5)
    try:
        closed = 0
        for _ in range(120):
            with socket.create_connection(("127.0.0.1", broker.port), timeout=10,
                                          source_address=("127.0.0.2", 0)) as s:
                s.settimeout(5)
                s.sendall(b"\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x01\x00\x00")
                try:
                    if not s.recv(4):
                        closed += 1
                except ConnectionError:
                    closed += 1
        # 120 connections at once are over 5/s (50 over the 10 s minimum window)
        assert 50 <= closed <= 80
        c = RawClient(broker.bootstrap)  # other addresses are not limited
        c.close()
    finally:
        set_quota(broker.bootstrap, [("ip", "127.0.0.2")], "connection_creation_rate", None)


def test_request_percentage(broker: BrokerProcess) -> None:
    """A client id limited to 0.01 % of a thread is throttled after a few requests, the
    response carries throttle_time_ms and the connection is muted that long."""
    from protocol._generated.metadata_request import MetadataRequest

    client = f"busy-{uuid.uuid4().hex[:6]}"
    set_quota(broker.bootstrap, [("client-id", client)], "request_percentage", 0.01)
    c = RawClient(broker.bootstrap, client_id=client)
    try:
        throttle = 0
        for _ in range(200):
            throttle = c.request(MetadataRequest(topics=[]), 12).throttle_time_ms
            if throttle > 0:
                break
        assert throttle > 0
        start = time.monotonic()
        c.request(MetadataRequest(topics=[]), 12)  # read only after the mute
        assert time.monotonic() - start >= min(throttle, 11_000) / 1000 * 0.9
    finally:
        c.close()
    other = RawClient(broker.bootstrap, client_id="not-limited")
    try:
        assert other.request(MetadataRequest(topics=[]), 12).throttle_time_ms == 0
    finally:
        other.close()


def test_controller_mutation_rate(broker: BrokerProcess) -> None:
    """KIP-599: 1 partition/s with an 11-partition burst: two 10-partition topics go through
    (the second one throttled), the third is refused with THROTTLING_QUOTA_EXCEEDED."""
    from protocol._generated.create_topics_request import CreateTopicsRequest

    client = f"mutator-{uuid.uuid4().hex[:6]}"
    set_quota(broker.bootstrap, [("client-id", client)], "controller_mutation_rate", 1)
    # a fresh connection per request: the throttled one stays muted until the bucket refills
    answers = []
    for i in range(3):
        c = RawClient(broker.bootstrap, client_id=client)
        try:
            r = c.request(CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
                name=f"{client}-{i}", num_partitions=10, replication_factor=1)],
                timeout_ms=30000), 7)
            answers.append((r.topics[0].error_code, r.throttle_time_ms > 0))
        finally:
            c.close()
    assert answers[0] == (0, False)
    assert answers[1] == (0, True)
    assert answers[2] == (89, True)  # THROTTLING_QUOTA_EXCEEDED


def test_listener_connection_creation_rate(tmp_path: Path) -> None:
    """listener.name.<l>.max.connection.creation.rate: beyond 2/s (20 in the 10 s minimum
    window) that listener accepts more slowly; another listener is not slowed."""
    from kafkawire.tools.testing import api_versions_ok
    from tests.security_helpers import listeners

    ov, ports = listeners(PLAIN="PLAINTEXT", SLOW="PLAINTEXT")
    ov["listener.name.slow.max.connection.creation.rate"] = "2"

    def connect_many(port: int, n: int) -> float:
        start = time.monotonic()
        for _ in range(n):
            assert api_versions_ok("127.0.0.1", port, timeout_s=30)
        return time.monotonic() - start

    with BrokerProcess(tmp_path / "data", port=ports["PLAIN"], overrides=ov):
        fast = connect_many(ports["PLAIN"], 40)
        slow = connect_many(ports["SLOW"], 40)
    print(f"40 connections: {fast:.1f} s unlimited, {slow:.1f} s at 2/s")
    assert slow >= 3.0 and slow > 2 * fast
