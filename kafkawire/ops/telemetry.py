"""KIP-714 client telemetry: clients push their metrics to the broker, /metrics exposes them.

Off unless ``metrics.client.telemetry.enable=true`` (Apache Kafka too advertises
GetTelemetrySubscriptions / PushTelemetry only when a telemetry-receiving metrics reporter is
configured). Then:

- The client-metrics subscriptions (``kafka-client-metrics --alter --name N --metrics P,..
  --interval MS --match client_id=regex,..``, config resource type 16) decide what a client
  sends: a subscription applies when every ``match`` selector fully matches the client
  (``client_id``, ``client_instance_id``, ``client_software_name``, ``client_software_version``,
  ``client_source_address``, ``client_source_port``; no selector: every client). The requested
  metrics are the union of the matching subscriptions' prefixes (``*``: all), the push interval
  their smallest ``interval.ms``. No matching subscription: no metrics requested, clients
  push nothing.
- GetTelemetrySubscriptions hands out a client instance id (when the client sends the zero
  uuid), the subscription id (a hash of what applies, so a changed subscription is noticed at
  the next push: UNKNOWN_SUBSCRIPTION_ID), the codecs accepted and ``telemetry.max.bytes``;
  temporality is cumulative (``delta_temporality`` false), so sums are exposed as they come.
- PushTelemetry decompresses the OTLP ``MetricsData`` protobuf (decoded here: gauges and sums;
  histograms and summaries are skipped), and /metrics shows each data point as
  ``kafka_client_<metric name with _ for .>{client_instance_id=..,client_id=..,<point
  attributes>}``. Refusals as Kafka: an unknown instance or subscription id:
  UNKNOWN_SUBSCRIPTION_ID; a push sooner than the interval after the previous one (and no
  GetTelemetrySubscriptions in between): THROTTLING_QUOTA_EXCEEDED; more than
  ``telemetry.max.bytes``: TELEMETRY_TOO_LARGE; a codec not offered:
  UNSUPPORTED_COMPRESSION_TYPE; bytes that do not decode: INVALID_RECORD. A terminating push
  is accepted once (later pushes of that instance: UNKNOWN_SUBSCRIPTION_ID); an instance
  silent for ``INSTANCE_EXPIRY_INTERVALS`` push intervals is dropped with its series.
"""

from __future__ import annotations

import re
import struct
import time
import uuid
import zlib
from dataclasses import dataclass, field
from typing import Any

from kraft.image import RESOURCE_CLIENT_METRICS, MetadataImage
from protocol.compression import decompress
from protocol.errors import ErrorCode

#: Kafka's telemetry.max.bytes default: the largest (compressed) push accepted, in bytes
TELEMETRY_MAX_BYTES = 1024 * 1024
#: the push interval when no subscription says otherwise (Kafka's interval.ms default), ms
DEFAULT_PUSH_INTERVAL_MS = 300_000
#: codecs offered, Kafka's order: zstd, lz4, gzip, snappy
ACCEPTED_COMPRESSION = [4, 3, 1, 2]
#: data points kept per client instance (a client cannot grow /metrics without bound)
SERIES_PER_CLIENT_MAX = 2000
#: an instance that has not pushed for this many push intervals is forgotten
INSTANCE_EXPIRY_INTERVALS = 3

Labels = tuple[tuple[str, str], ...]


class TelemetryError(Exception):
    def __init__(self, code: ErrorCode) -> None:
        super().__init__(code.name)
        self.code = code


@dataclass
class Subscription:
    subscription_id: int
    push_interval_ms: int
    metrics: list[str]


@dataclass
class ClientInstance:
    client: dict[str, str]
    subscription: Subscription
    last_get_ms: int
    last_push_ms: int = -1
    #: a GetTelemetrySubscriptions came after the last push (the next push may come early)
    fetched_since_push: bool = True
    terminated: bool = False
    points: dict[tuple[str, Labels], float] = field(default_factory=dict)


def _list(value: str | None) -> list[str]:
    return [x.strip() for x in (value or "").split(",") if x.strip()]


def subscription_for(image: MetadataImage, client: dict[str, str]) -> Subscription:
    """What the client-metrics subscriptions ask of this client."""
    metrics: set[str] = set()
    interval = 0
    names = []
    for (rtype, name), configs in sorted(image.configs.items()):
        if rtype != RESOURCE_CLIENT_METRICS or not _matches(_list(configs.get("match")), client):
            continue
        wanted = _list(configs.get("metrics"))
        if not wanted:
            continue
        names.append(name)
        metrics.update("" if m == "*" else m for m in wanted)
        ms = int(configs.get("interval.ms") or DEFAULT_PUSH_INTERVAL_MS)
        interval = ms if interval == 0 else min(interval, ms)
    interval = interval or DEFAULT_PUSH_INTERVAL_MS
    requested = sorted(metrics)
    digest = zlib.crc32(repr((names, requested, interval)).encode())
    sub_id = struct.unpack(">i", struct.pack(">I", digest))[0]
    return Subscription(sub_id, interval, ["*"] if "" in metrics else requested)


def _matches(selectors: list[str], client: dict[str, str]) -> bool:
    for sel in selectors:
        key, _, pattern = sel.partition("=")
        try:
            if re.fullmatch(pattern, client.get(key.strip(), "")) is None:
                return False
        except re.error:
            return False
    return True


class TelemetryManager:
    def __init__(self) -> None:
        self.instances: dict[uuid.UUID, ClientInstance] = {}

    def get_subscription(self, image: MetadataImage, instance_id: uuid.UUID,
                         client: dict[str, str], now_ms: int) -> tuple[uuid.UUID, Subscription]:
        self.expire(now_ms)
        if instance_id.int == 0:
            instance_id = uuid.uuid4()
        client = {**client, "client_instance_id": str(instance_id)}
        sub = subscription_for(image, client)
        inst = self.instances.get(instance_id)
        if inst is None:
            self.instances[instance_id] = ClientInstance(client, sub, now_ms)
        else:
            inst.client, inst.subscription, inst.last_get_ms = client, sub, now_ms
            inst.fetched_since_push = True
        return instance_id, sub

    def push(self, image: MetadataImage, instance_id: uuid.UUID, subscription_id: int,
             terminating: bool, codec: int, data: bytes, now_ms: int) -> None:
        inst = self.instances.get(instance_id)
        if inst is None or inst.terminated:
            raise TelemetryError(ErrorCode.UNKNOWN_SUBSCRIPTION_ID)
        current = subscription_for(image, inst.client)
        if subscription_id != inst.subscription.subscription_id or \
                current.subscription_id != subscription_id:
            inst.subscription = current
            raise TelemetryError(ErrorCode.UNKNOWN_SUBSCRIPTION_ID)
        if (not terminating and not inst.fetched_since_push
                and now_ms - inst.last_push_ms < current.push_interval_ms):
            raise TelemetryError(ErrorCode.THROTTLING_QUOTA_EXCEEDED)
        if len(data) > TELEMETRY_MAX_BYTES:
            raise TelemetryError(ErrorCode.TELEMETRY_TOO_LARGE)
        if codec != 0 and codec not in ACCEPTED_COMPRESSION:
            raise TelemetryError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
        inst.last_push_ms, inst.fetched_since_push = now_ms, False
        try:
            raw = decompress(codec, data, 16 * TELEMETRY_MAX_BYTES) if codec else data
            points = decode_metrics_data(raw)
        except Exception:  # any undecodable payload is the client's fault
            raise TelemetryError(ErrorCode.INVALID_RECORD) from None
        if terminating:  # its last values stay on /metrics until the instance expires
            inst.terminated = True
        for name, labels, value in points:
            if not _wanted(name, current.metrics):
                continue
            key = (name, labels)
            if key in inst.points or len(inst.points) < SERIES_PER_CLIENT_MAX:
                inst.points[key] = value

    def expire(self, now_ms: int) -> None:
        for iid, inst in list(self.instances.items()):
            last = max(inst.last_push_ms, inst.last_get_ms)
            if now_ms - last > INSTANCE_EXPIRY_INTERVALS * inst.subscription.push_interval_ms:
                del self.instances[iid]

    def series(self) -> dict[tuple[str, str, Labels], float]:
        """(client instance id, metric name, labels) -> value, for /metrics."""
        self.expire(int(time.time() * 1000))
        out: dict[tuple[str, str, Labels], float] = {}
        for iid, inst in self.instances.items():
            extra = (("client_id", inst.client.get("client_id", "")),)
            for (name, labels), value in inst.points.items():
                out[(str(iid), name, extra + labels)] = value
        return out


def _wanted(name: str, prefixes: list[str]) -> bool:
    return "*" in prefixes or any(name.startswith(p) for p in prefixes)


# ---- OTLP protobuf (opentelemetry.proto.metrics.v1.MetricsData), just what we expose -------
def _fields(buf: bytes) -> list[tuple[int, int, Any]]:
    """(field number, wire type, value) of one protobuf message."""
    out: list[tuple[int, int, Any]] = []
    pos, n = 0, len(buf)
    while pos < n:
        key, pos = _varint(buf, pos)
        num, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            size, pos = _varint(buf, pos)
            value, pos = buf[pos:pos + size], pos + size
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"protobuf wire type {wire}")
        if pos > n:
            raise ValueError("truncated protobuf")
        out.append((num, wire, value))
    return out


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ValueError("bad varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _attributes(kvs: list[bytes]) -> Labels:
    out = []
    for kv in kvs:
        key, value = "", ""
        for num, _w, v in _fields(kv):
            if num == 1:
                key = v.decode()
            elif num == 2:
                value = _any_value(v)
        out.append((re.sub(r"[^a-zA-Z0-9_]", "_", key), value))
    return tuple(sorted(out))


def _any_value(buf: bytes) -> str:
    for num, _w, v in _fields(buf):
        if num == 1:
            return str(v.decode())
        if num in (2, 3):
            return str(v)
        if num == 4:
            return repr(struct.unpack("<d", v)[0])
    return ""


def _number_points(buf: bytes) -> list[tuple[Labels, float]]:
    out = []
    for num, _w, dp in _fields(buf):
        if num != 1:
            continue
        value: float | None = None
        attrs: list[bytes] = []
        for f, _w2, v in _fields(dp):
            if f == 4:
                value = struct.unpack("<d", v)[0]
            elif f == 6:
                value = float(struct.unpack("<q", v)[0])
            elif f == 7:
                attrs.append(v)
        if value is not None:
            out.append((_attributes(attrs), value))
    return out


def decode_metrics_data(buf: bytes) -> list[tuple[str, Labels, float]]:
    """(metric name, point attributes, value) of every gauge and sum data point."""
    out: list[tuple[str, Labels, float]] = []
    for num, _w, rm in _fields(buf):
        if num != 1:
            continue
        for f, _w2, sm in _fields(rm):
            if f != 2:
                continue
            for g, _w3, metric in _fields(sm):
                if g != 2:
                    continue
                name = ""
                points: list[tuple[Labels, float]] = []
                for h, _w4, v in _fields(metric):
                    if h == 1:
                        name = v.decode()
                    elif h in (5, 7):  # gauge, sum
                        points += _number_points(v)
                out += [(name, labels, value) for labels, value in points]
    return out
