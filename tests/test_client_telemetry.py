"""KIP-714 client telemetry: librdkafka and the Java 4.x client push their metrics, driven by
client-metrics subscriptions, and /metrics shows them; refusals on the wire; off by default."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import zstandard
from conftest import RawClient

from kafkawire.ops.telemetry import decode_metrics_data
from kafkawire.tools.testing import BrokerProcess
from protocol._generated.api_versions_request import ApiVersionsRequest
from protocol._generated.get_telemetry_subscriptions_request import (
    GetTelemetrySubscriptionsRequest,
)
from protocol._generated.incremental_alter_configs_request import (
    IncrementalAlterConfigsRequest as IAC,
)
from protocol._generated.push_telemetry_request import PushTelemetryRequest
from protocol.errors import ErrorCode

ROOT = Path(__file__).resolve().parent.parent
TELEMETRY = {"metrics.client.telemetry.enable": "true"}


@pytest.fixture(scope="module")
def tbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("tel") / "data", overrides=TELEMETRY) as bp:
        yield bp


def subscribe(bootstrap: str, name: str, metrics: str, interval_ms: int = 1000,
              match: str | None = None) -> None:
    configs = [IAC.AlterableConfig(name="metrics", config_operation=0, value=metrics),
               IAC.AlterableConfig(name="interval.ms", config_operation=0,
                                   value=str(interval_ms))]
    if match is not None:
        configs.append(IAC.AlterableConfig(name="match", config_operation=0, value=match))
    raw = RawClient(bootstrap)
    try:
        resp = raw.request(IAC(resources=[IAC.AlterConfigsResource(
            resource_type=16, resource_name=name, configs=configs)], validate_only=False), 1)
        assert resp.responses[0].error_code == 0
    finally:
        raw.close()


def client_series(bp: BrokerProcess, prefix: str) -> list[str]:
    with urllib.request.urlopen(bp.metrics_url + "/metrics", timeout=10) as r:
        body = r.read().decode()
    return [line for line in body.splitlines() if line.startswith(prefix)]


def test_off_by_default(broker: BrokerProcess) -> None:
    raw = RawClient(broker.bootstrap)
    try:
        keys = {k.api_key for k in raw.request(ApiVersionsRequest(), 0).api_keys}
        assert 71 not in keys and 72 not in keys
        r = raw.request(GetTelemetrySubscriptionsRequest(client_instance_id=uuid.UUID(int=0)), 0)
        assert r.error_code == ErrorCode.UNSUPPORTED_VERSION
    finally:
        raw.close()


def test_librdkafka_pushes_subscribed_metrics(tbroker: BrokerProcess) -> None:
    from confluent_kafka import Producer

    subscribe(tbroker.bootstrap, "rdkafka-producers", "org.apache.kafka.producer.",
              match="client_id=tel-rdkafka")
    p = Producer({"bootstrap.servers": tbroker.bootstrap, "client.id": "tel-rdkafka",
                  "enable.metrics.push": True})
    deadline = time.monotonic() + 60
    found: list[str] = []
    while not found and time.monotonic() < deadline:
        p.produce("tel-rd", b"x")
        p.poll(0.2)
        found = client_series(tbroker, "kafka_client_org_apache_kafka_producer_")
    p.flush(30)
    assert found, "no pushed producer metric on /metrics"
    assert any('client_id="tel-rdkafka"' in s for s in found)
    # only what was subscribed: no consumer metrics, nothing from other prefixes
    assert not client_series(tbroker, "kafka_client_org_apache_kafka_consumer")


def test_java_client_pushes_subscribed_metrics(tbroker: BrokerProcess) -> None:
    from compat_tests.kafka_dist import kafka_required, unavailable_reason

    reason = unavailable_reason("4.x")
    if reason is not None:
        if kafka_required():
            pytest.fail(f"Kafka 4.3.1 jars needed but unavailable: {reason}")
        pytest.skip(f"Kafka 4.3.1 jars unavailable: {reason}")
    subscribe(tbroker.bootstrap, "java-producers", "org.apache.kafka.producer.",
              match="client_software_name=apache-kafka-java")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-m", "kafkawire", "kafka-producer-perf-test", "--topic", "tel-java",
         "--num-records", "8000", "--throughput", "1000", "--record-size", "100",
         "--producer-props", f"bootstrap.servers={tbroker.bootstrap}",
         "client.id=tel-java", "enable.metrics.push=true"],
        capture_output=True, text=True, timeout=180, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = [s for s in client_series(tbroker, "kafka_client_org_apache_kafka_producer_")
             if 'client_id="tel-java"' in s]
    assert found, "the Java producer's pushed metrics are not on /metrics"


def test_push_refusals(tbroker: BrokerProcess) -> None:
    subscribe(tbroker.bootstrap, "raw-clients", "org.apache.kafka.", interval_ms=60000,
              match="client_id=raw-tel")
    raw = RawClient(tbroker.bootstrap, client_id="raw-tel")
    try:
        keys = {k.api_key for k in raw.request(ApiVersionsRequest(), 0).api_keys}
        assert {71, 72} <= keys
        sub = raw.request(GetTelemetrySubscriptionsRequest(client_instance_id=uuid.UUID(int=0)), 0)
        assert sub.error_code == 0 and sub.client_instance_id.int != 0
        assert sub.requested_metrics == ["org.apache.kafka."] and sub.push_interval_ms == 60000
        assert sub.accepted_compression_types == [4, 3, 1, 2]

        def push(data: bytes, codec: int = 0, sub_id: int = sub.subscription_id,
                 iid: uuid.UUID = sub.client_instance_id, terminating: bool = False) -> int:
            r = raw.request(PushTelemetryRequest(
                client_instance_id=iid, subscription_id=sub_id, terminating=terminating,
                compression_type=codec, metrics=data), 0)
            return int(r.error_code)

        payload = otlp_gauge("org.apache.kafka.test.value", 42.0, {"node.id": "1"})
        assert push(payload, sub_id=sub.subscription_id + 1) == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        assert push(payload, iid=uuid.uuid4()) == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        assert push(payload, codec=9) == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        assert push(b"\xff\xff\xff") == ErrorCode.INVALID_RECORD
        # a GetTelemetrySubscriptions allows the next push; a second one is too soon
        raw.request(GetTelemetrySubscriptionsRequest(client_instance_id=sub.client_instance_id), 0)
        assert push(zstandard.ZstdCompressor().compress(payload), codec=4) == 0
        assert push(payload) == ErrorCode.THROTTLING_QUOTA_EXCEEDED
        assert push(b"x" * (1024 * 1024 + 1), terminating=True) == ErrorCode.TELEMETRY_TOO_LARGE
        assert push(payload, terminating=True) == 0
        assert push(payload, terminating=True) == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        series = client_series(tbroker, "kafka_client_org_apache_kafka_test_value")
        assert series == [
            f'kafka_client_org_apache_kafka_test_value{{client_id="raw-tel",'
            f'client_instance_id="{sub.client_instance_id}",node_id="1"}} 42.0']
    finally:
        raw.close()


# ---- a tiny OTLP encoder for the raw pushes ---------------------------------------------------
def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(num: int, payload: bytes) -> bytes:
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def otlp_gauge(name: str, value: float, attrs: dict[str, str]) -> bytes:
    import struct

    kvs = b"".join(_field(7, _field(1, k.encode()) + _field(2, _field(1, v.encode())))
                   for k, v in attrs.items())
    point = kvs + _varint(4 << 3 | 1) + struct.pack("<d", value)
    metric = _field(1, name.encode()) + _field(5, _field(1, point))
    return _field(1, _field(2, _field(2, metric)))


def test_otlp_decoder() -> None:
    data = otlp_gauge("a.b", 1.5, {"x.y": "z"}) + otlp_gauge("c", 2.0, {})
    assert decode_metrics_data(data) == [("a.b", (("x_y", "z"),), 1.5), ("c", (), 2.0)]
    with pytest.raises(ValueError):
        decode_metrics_data(b"\x0a\xff\x01")
