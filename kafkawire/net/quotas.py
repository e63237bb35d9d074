"""Client quotas enforced as Kafka's ClientQuotaManager does (KIP-13, KIP-124, KIP-219).

Quotas come from the ClientQuotaRecords AlterClientQuotas stored (``MetadataImage
.client_quotas``). For a request of user U (the principal's name) and client id C, a quota key
is looked up in Kafka's order, first hit wins:

  (user=U, client-id=C), (user=U, client-id=default), (user=U),
  (user=default, client-id=C), (user=default, client-id=default), (user=default),
  (client-id=C), (client-id=default)

The matched entity is the sensor: every client sharing it shares the budget.

- ``producer_byte_rate``: the bytes of each Produce request;
- ``consumer_byte_rate``: the record bytes of each Fetch response;
- ``request_percentage``: the time spent handling requests, in percent of one thread.

A rate is measured over ``quota.window.num`` (11) samples of ``quota.window.size.seconds`` (1 s),
as Kafka's ``Rate`` (the window counts at least ``samples - 1`` full samples). When a recorded
value takes the rate over the quota, the throttle time is Kafka's
``(rate - quota) / quota * window``, at most the whole window. The response carries it in
``throttle_time_ms`` and the connection is muted for that long after the response (KIP-219:
the broker answers at once and reads nothing more from that client meanwhile).

``controller_mutation_rate`` (KIP-599: partitions created or deleted per second by
CreateTopics, CreatePartitions, DeleteTopics) is a token bucket of ``quota * samples * window``
tokens, as Kafka's ControllerMutationQuota: while the bucket is negative, a topic of a strict
request (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+) is refused with
THROTTLING_QUOTA_EXCEEDED; otherwise its partitions are taken (the bucket may go negative) and
the throttle time is the time to refill to zero. Older versions are never refused, only
throttled.

``max.connection.creation.rate`` (connections per second accepted by the broker, on the same
windows) delays accepting; an ``ip`` entity's ``connection_creation_rate`` closes connections
from that address beyond its rate, as Kafka.

Sans-I/O: callers pass ``now_ms``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kraft.image import MetadataImage, QuotaEntity

PRODUCE = "producer_byte_rate"
FETCH = "consumer_byte_rate"
REQUEST = "request_percentage"
MUTATION = "controller_mutation_rate"
BANDWIDTH = frozenset({PRODUCE, FETCH})
DEFAULT_SAMPLES = 11
DEFAULT_SAMPLE_MS = 1000


@dataclass
class Rate:
    """Kafka's SampledStat Rate: ``samples`` windows of ``sample_ms``."""

    samples: int = DEFAULT_SAMPLES
    sample_ms: int = DEFAULT_SAMPLE_MS
    #: (window start ms, value) oldest first
    windows: list[list[float]] = field(default_factory=list)

    def record(self, value: float, now_ms: int) -> None:
        w = self.windows
        if not w or now_ms - w[-1][0] >= self.sample_ms:
            w.append([float(now_ms), 0.0])
            if len(w) > self.samples:
                del w[0]
        w[-1][1] += value
        while w and now_ms - w[0][0] >= self.samples * self.sample_ms:
            del w[0]

    def window_ms(self, now_ms: int) -> float:
        if not self.windows:
            return float((self.samples - 1) * self.sample_ms)
        elapsed = now_ms - self.windows[0][0]
        full = int(elapsed // self.sample_ms)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.sample_ms
        return max(elapsed, 1.0)

    def per_second(self, now_ms: int) -> float:
        total = sum(v for start, v in self.windows
                    if now_ms - start < self.samples * self.sample_ms)
        return total * 1000.0 / self.window_ms(now_ms)

    def throttle_ms(self, bound: float, now_ms: int, capped: bool = True) -> int:
        """Kafka's throttle time for a rate over ``bound`` (0 when within it). Request and
        connection throttles are bounded by the whole window (``samples`` x ``sample_ms``);
        bandwidth throttles are not (Kafka 4.3.1 answered a 900-byte batch under a 5 B/s
        ``producer_byte_rate`` with throttle_time_ms 163800)."""
        rate = self.per_second(now_ms)
        if rate <= bound or bound <= 0:
            return 0
        ms = (rate - bound) / bound * self.window_ms(now_ms)
        return int(min(ms, self.samples * self.sample_ms) if capped else ms)


@dataclass
class TokenBucket:
    """Kafka's TokenBucket stat: ``rate`` tokens per second up to ``burst``."""

    rate: float
    burst: float
    tokens: float = 0.0
    last_ms: int = -1

    def refill(self, now_ms: int) -> None:
        if self.last_ms < 0:
            self.tokens = self.burst
        else:
            self.tokens = min(self.burst, self.tokens + (now_ms - self.last_ms) * self.rate / 1000)
        self.last_ms = now_ms

    def throttle_ms(self) -> int:
        return 0 if self.tokens >= 0 else int(-self.tokens / self.rate * 1000)


def quota_entity(image: MetadataImage, key: str, user: str,
                 client_id: str) -> tuple[QuotaEntity, float] | None:
    """The entity whose ``key`` quota applies, and the quota, in Kafka's precedence."""
    quotas = image.client_quotas
    if not quotas:
        return None
    candidates: list[QuotaEntity] = [
        (("client-id", client_id), ("user", user)),
        (("client-id", None), ("user", user)),
        (("user", user),),
        (("client-id", client_id), ("user", None)),
        (("client-id", None), ("user", None)),
        (("user", None),),
        (("client-id", client_id),),
        (("client-id", None),),
    ]
    for entity in candidates:
        values = quotas.get(entity)
        if values is not None and key in values:
            return entity, float(values[key])
    return None


class QuotaManager:
    def __init__(self, image: Callable[[], MetadataImage], samples: int = DEFAULT_SAMPLES,
                 sample_ms: int = DEFAULT_SAMPLE_MS) -> None:
        self.image = image
        self.samples = samples
        self.sample_ms = sample_ms
        self.sensors: dict[tuple[str, QuotaEntity], Rate] = {}
        self.buckets: dict[QuotaEntity, TokenBucket] = {}

    def record(self, key: str, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Record ``value`` against the quota ``key`` applying to the client; throttle ms."""
        found = quota_entity(self.image(), key, user, client_id)
        if found is None:
            return 0
        entity, bound = found
        rate = self.sensors.get((key, entity))
        if rate is None:
            rate = self.sensors[(key, entity)] = Rate(self.samples, self.sample_ms)
        rate.record(value, now_ms)
        return rate.throttle_ms(bound, now_ms, capped=key not in BANDWIDTH)

    def mutation_bucket(self, user: str, client_id: str, now_ms: int) -> TokenBucket | None:
        """The client's controller_mutation_rate bucket, refilled to ``now_ms`` (None: no
        quota)."""
        found = quota_entity(self.image(), MUTATION, user, client_id)
        if found is None:
            return None
        entity, rate = found
        burst = rate * self.samples * self.sample_ms / 1000
        bucket = self.buckets.get(entity)
        if bucket is None or bucket.rate != rate:
            bucket = self.buckets[entity] = TokenBucket(rate, burst)
        bucket.refill(now_ms)
        return bucket

    def would_throttle(self, key: str, user: str, client_id: str, value: float,
                       now_ms: int) -> bool:
        """Would recording ``value`` exceed the quota? (Fetch answers empty then.)"""
        found = quota_entity(self.image(), key, user, client_id)
        if found is None:
            return False
        entity, bound = found
        rate = self.sensors.get((key, entity))
        if rate is None:
            return False
        probe = Rate(rate.samples, rate.sample_ms, [list(w) for w in rate.windows])
        probe.record(value, now_ms)
        return probe.throttle_ms(bound, now_ms, capped=key not in BANDWIDTH) > 0


class ConnectionRate:
    """``max.connection.creation.rate`` and per-IP ``connection_creation_rate``."""

    def __init__(self, samples: int = DEFAULT_SAMPLES,
                 sample_ms: int = DEFAULT_SAMPLE_MS) -> None:
        self.broker = Rate(samples, sample_ms)
        self.per_listener: dict[str, Rate] = {}
        self.per_ip: dict[str, Rate] = {}
        self.samples, self.sample_ms = samples, sample_ms

    def accept_delay_ms(self, limit_per_s: float, now_ms: int, listener: str = "",
                        listener_limit_per_s: float | None = None) -> int:
        """Record one connection; how long to wait before accepting more: the broker-wide
        ``max.connection.creation.rate`` and the listener's
        ``listener.name.<l>.max.connection.creation.rate``."""
        self.broker.record(1, now_ms)
        delay = self.broker.throttle_ms(limit_per_s, now_ms)
        if listener_limit_per_s is not None:
            rate = self.per_listener.setdefault(listener, Rate(self.samples, self.sample_ms))
            rate.record(1, now_ms)
            delay = max(delay, rate.throttle_ms(listener_limit_per_s, now_ms))
        return delay

    def ip_exceeded(self, ip: str, limit_per_s: float | None, now_ms: int) -> bool:
        if limit_per_s is None:
            return False
        rate = self.per_ip.setdefault(ip, Rate(self.samples, self.sample_ms))
        rate.record(1, now_ms)
        return rate.throttle_ms(limit_per_s, now_ms) > 0


def ip_connection_rate(image: MetadataImage, ip: str) -> float | None:
    """An ``ip`` entity's connection_creation_rate (the address's own, else the default)."""
    for entity in ((("ip", ip),), (("ip", None),)):
        values = image.client_quotas.get(entity)
        if values is not None and "connection_creation_rate" in values:
            return float(values["connection_creation_rate"])
    return None
