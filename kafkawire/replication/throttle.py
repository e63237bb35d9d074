"""Replication throttles, as Kafka's ``ReplicationQuotaManager`` (KIP-73).

Two quotas per broker, each a byte rate over ``replication.quota.window.num`` (11) samples of
``replication.quota.window.size.seconds`` (1 s), measured like every Kafka quota (the window
counts at least ``samples - 1`` full samples, so a throttle starts to bite after about ten
seconds' worth of its rate has gone through):

- LEADER, bound ``leader.replication.throttled.rate``: a partition this broker leads is
  throttled when the topic's ``leader.replication.throttled.replicas`` names it on this broker
  (``partition:broker`` pairs with this broker's id) or is ``*``. A follower fetch of a
  throttled partition from a replica OUTSIDE the ISR gets no records while the quota is
  exceeded (its fetch position still counts); the record bytes returned for throttled
  partitions are recorded (``kafkawire.apis.fetch``).
- FOLLOWER, bound ``follower.replication.throttled.rate``: a partition this broker follows
  is throttled when ``follower.replication.throttled.replicas`` names it on this broker or is
  ``*``. While the quota is exceeded, the fetcher leaves throttled partitions that are not
  caught up with the leader's high watermark out of its Fetch requests; the bytes it
  appends for throttled partitions are recorded (``kafkawire.replication.replica_fetcher``).

Both bounds are dynamic broker configs (per broker or cluster default, LONG >= 0, default
``Long.MAX_VALUE``: unbounded), read from the metadata image whenever it changes, as are the
topic configs. ``replica.alter.log.dirs.io.max.bytes.per.second`` (Kafka's third replication
quota, for moving replicas between log directories) is enforced by ``kafkawire.storage.mover``
(a byte rate per move, not this module's windowed quota).

``kafka-reassign-partitions --execute --throttle N`` sets both rates to N on every broker that
takes part and the two topic configs (leader: the current replicas, follower: the new ones);
``--verify`` removes them once the reassignment is done.

Sans-I/O: callers pass ``now_ms``.
"""

from __future__ import annotations

from collections.abc import Callable

from kafkawire.config.broker_config import BrokerConfig
from kafkawire.net.quotas import Rate
from kraft.image import RESOURCE_BROKER, MetadataImage

__all__ = [
    "FOLLOWER_RATE", "FOLLOWER_REPLICAS", "LEADER_RATE", "LEADER_REPLICAS", "ReplicationQuota",
    "throttled_partitions",
]

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
UNBOUNDED = 9223372036854775807  # Long.MAX_VALUE, Kafka's default for both rates
#: every partition of the topic (the ``*`` wildcard)
ALL = frozenset({-1})


def throttled_partitions(value: str, broker_id: int) -> frozenset[int]:
    """The partitions a ``*.replication.throttled.replicas`` value throttles on
    ``broker_id`` (Kafka's ``parseThrottledPartitions``); :data:`ALL` for ``*``."""
    items = [p.strip() for p in value.split(",") if p.strip()]
    if items == ["*"]:
        return ALL
    out: set[int] = set()
    for item in items:
        part, _, broker = item.partition(":")
        try:
            if int(broker) == broker_id:
                out.add(int(part))
        except ValueError:
            continue  # validated on the way in; an old stored value is skipped
    return frozenset(out)


def dynamic_rate(image: MetadataImage, broker_id: int, key: str) -> int:
    """A replication rate: this broker's dynamic config, else the cluster default, else
    unbounded (they are dynamic-only configs in Kafka, not read from server.properties)."""
    for scope in (str(broker_id), ""):
        raw = image.configs.get((RESOURCE_BROKER, scope), {}).get(key)
        if raw is not None:
            try:
                return int(raw.strip())
            except ValueError:
                break  # validated on the way in
    return UNBOUNDED


class ReplicationQuota:
    """One side's replication quota on broker ``config.node_id``."""

    def __init__(self, config: BrokerConfig, image: Callable[[], MetadataImage],
                 rate_key: str, replicas_key: str) -> None:
        self.config = config
        self.image = image
        self.rate_key = rate_key
        self.replicas_key = replicas_key
        samples = int(config.values.get("replication.quota.window.num", 11))
        sample_s = int(config.values.get("replication.quota.window.size.seconds", 1))
        self.rate = Rate(samples=max(1, samples), sample_ms=max(1, sample_s) * 1000)
        self._seen: MetadataImage | None = None
        self._bound = float(UNBOUNDED)
        self._topics: dict[str, frozenset[int]] = {}

    def _refresh(self) -> None:
        img = self.image()
        if img is self._seen:
            return
        self._seen = img
        self._bound = float(dynamic_rate(img, self.config.node_id, self.rate_key))
        self._topics = {}

    @property
    def bound(self) -> float:
        """Bytes per second (``Long.MAX_VALUE``: unbounded)."""
        self._refresh()
        return self._bound

    def is_throttled(self, topic: str, partition: int) -> bool:
        """The topic config names this partition on this broker (or is ``*``)."""
        self._refresh()
        parts = self._topics.get(topic)
        if parts is None:
            value = self._seen.topic_config(topic).get(self.replicas_key, "") \
                if self._seen is not None else ""
            parts = self._topics[topic] = throttled_partitions(value, self.config.node_id)
        return parts is ALL or partition in parts

    def is_quota_exceeded(self, now_ms: int) -> bool:
        bound = self.bound
        return bound < UNBOUNDED and self.rate.per_second(now_ms) > bound

    def record(self, nbytes: int, now_ms: int) -> None:
        if nbytes > 0 and self.bound < UNBOUNDED:
            self.rate.record(float(nbytes), now_ms)


def replication_quotas(config: BrokerConfig, image: Callable[[], MetadataImage]
                       ) -> tuple[ReplicationQuota, ReplicationQuota]:
    """A broker's (leader, follower) replication quotas."""
    return (ReplicationQuota(config, image, LEADER_RATE, LEADER_REPLICAS),
            ReplicationQuota(config, image, FOLLOWER_RATE, FOLLOWER_REPLICAS))
