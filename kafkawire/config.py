"""Broker and topic configuration, by Kafka's property names.

``BrokerConfig.load(path, overrides)`` reads a Java-style ``server.properties`` file (``key=value``,
``#`` comments) plus ``--override key=value`` pairs. Every key we know is typed and validated;
unknown keys are reported (``BrokerConfig.unknown``), never silently dropped. Defaults serve a
single node on 127.0.0.1:9092 with data in ``./data``.

Topic configs (``TOPIC_CONFIGS``) carry Kafka's defaults and the broker property each one
falls back to (its synonym), which DescribeConfigs reports.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from kafkawire.broker_config_keys import KAFKA_ONLY_BROKER_CONFIGS

LONG_MAX = 9223372036854775807

# ---------------------------------------------------------------------------------------------
# Topic-level configs: name -> (type, default, broker synonym or None)
# type is one of: int, long, double, boolean, string, list, class, password

TopicConfigDef = tuple[str, Any, "str | None"]

TOPIC_CONFIGS: dict[str, TopicConfigDef] = {
    "cleanup.policy": ("list", "delete", "log.cleanup.policy"),
    "compression.gzip.level": ("int", -1, "compression.gzip.level"),
    "compression.lz4.level": ("int", 9, "compression.lz4.level"),
    "compression.type": ("string", "producer", "compression.type"),
    "compression.zstd.level": ("int", 3, "compression.zstd.level"),
    "delete.retention.ms": ("long", 86400000, "log.cleaner.delete.retention.ms"),
    "file.delete.delay.ms": ("long", 60000, "log.segment.delete.delay.ms"),
    "flush.messages": ("long", LONG_MAX, "log.flush.interval.messages"),
    "flush.ms": ("long", LONG_MAX, "log.flush.interval.ms"),
    "follower.replication.throttled.replicas": ("list", "", None),
    "index.interval.bytes": ("int", 4096, "log.index.interval.bytes"),
    "leader.replication.throttled.replicas": ("list", "", None),
    "local.retention.bytes": ("long", -2, "log.local.retention.bytes"),
    "local.retention.ms": ("long", -2, "log.local.retention.ms"),
    "max.compaction.lag.ms": ("long", LONG_MAX, "log.cleaner.max.compaction.lag.ms"),
    "max.message.bytes": ("int", 1048588, "message.max.bytes"),
    "message.timestamp.after.max.ms": ("long", 3600000, "log.message.timestamp.after.max.ms"),
    "message.timestamp.before.max.ms": ("long", LONG_MAX, "log.message.timestamp.before.max.ms"),
    "message.timestamp.type": ("string", "CreateTime", "log.message.timestamp.type"),
    "min.cleanable.dirty.ratio": ("double", 0.5, "log.cleaner.min.cleanable.ratio"),
    "min.compaction.lag.ms": ("long", 0, "log.cleaner.min.compaction.lag.ms"),
    "min.insync.replicas": ("int", 1, "min.insync.replicas"),
    "preallocate": ("boolean", False, "log.preallocate"),
    "remote.log.copy.disable": ("boolean", False, None),
    "remote.log.delete.on.disable": ("boolean", False, None),
    "remote.storage.enable": ("boolean", False, None),
    "retention.bytes": ("long", -1, "log.retention.bytes"),
    "retention.ms": ("long", 604800000, "log.retention.ms"),
    "segment.bytes": ("int", 1073741824, "log.segment.bytes"),
    "segment.index.bytes": ("int", 10485760, "log.index.size.max.bytes"),
    "segment.jitter.ms": ("long", 0, "log.roll.jitter.ms"),
    "segment.ms": ("long", 604800000, "log.roll.ms"),
    "unclean.leader.election.enable": ("boolean", False, "unclean.leader.election.enable"),
}

# Topic configs Kafka defines as internal (``defineInternal``): accepted by CreateTopics and the
# AlterConfigs APIs and applied, never listed by DescribeConfigs. ``internal.segment.bytes``
# overrides segment.bytes, which Kafka 4 requires to be at least 1 MiB (tests use it).
INTERNAL_TOPIC_CONFIGS: dict[str, TopicConfigDef] = {
    "internal.segment.bytes": ("int", None, None),
}

# ---------------------------------------------------------------------------------------------
# Broker configs we understand: name -> (type, default)

BROKER_CONFIGS: dict[str, tuple[str, Any]] = {
    "node.id": ("int", 1),
    "broker.id": ("int", -1),  # mirrors node.id (see BrokerConfig.from_dict)
    "process.roles": ("list", "broker,controller"),
    "listeners": ("list", "PLAINTEXT://127.0.0.1:9092"),
    "advertised.listeners": ("list", None),
    "listener.security.protocol.map": (
        "string",
        "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
        "SASL_SSL:SASL_SSL",
    ),
    "inter.broker.listener.name": ("string", None),
    "security.inter.broker.protocol": ("string", "PLAINTEXT"),
    "controller.listener.names": ("list", "CONTROLLER"),
    "controller.quorum.voters": ("list", ""),
    "controller.quorum.bootstrap.servers": ("list", ""),
    # the Raft driver (kafkawire/raft_driver.py, kraft/raft/config.py): Kafka's defaults
    "controller.quorum.election.timeout.ms": ("int", 1000),
    "controller.quorum.fetch.timeout.ms": ("int", 2000),
    "controller.quorum.election.backoff.max.ms": ("int", 1000),
    "controller.quorum.request.timeout.ms": ("int", 2000),
    "controller.quorum.retry.backoff.ms": ("int", 20),
    # broker lifecycle (kafkawire/broker_lifecycle.py, kraft/cluster_control.py)
    "broker.session.timeout.ms": ("int", 9000),
    "broker.heartbeat.interval.ms": ("int", 2000),
    "initial.broker.registration.timeout.ms": ("int", 60000),
    "broker.rack": ("string", None),
    "log.dirs": ("list", None),
    "log.dir": ("list", "./data"),
    "metadata.log.dir": ("string", None),
    "num.partitions": ("int", 1),
    "default.replication.factor": ("int", 1),
    "auto.create.topics.enable": ("boolean", True),
    "delete.topic.enable": ("boolean", True),
    "message.max.bytes": ("int", 1048588),
    "socket.request.max.bytes": ("int", 104857600),
    "socket.send.buffer.bytes": ("int", 102400),
    "socket.receive.buffer.bytes": ("int", 102400),
    "replica.fetch.max.bytes": ("int", 1048576),
    # KIP-227 fetch sessions (kafkawire/fetch_session.py): split over 8 shards, as Kafka
    "max.incremental.fetch.session.cache.slots": ("int", 1000),
    # replica fetchers (kafkawire/replica_fetcher.py)
    "replica.fetch.response.max.bytes": ("int", 10485760),
    "replica.fetch.wait.max.ms": ("int", 500),
    "replica.fetch.min.bytes": ("int", 1),
    "replica.fetch.backoff.ms": ("int", 1000),
    "replica.socket.timeout.ms": ("int", 30000),
    "fetch.max.bytes": ("int", 57671680),
    "log.segment.bytes": ("int", 1073741824),
    "log.roll.ms": ("long", None),
    "log.roll.hours": ("int", 168),
    "log.roll.jitter.ms": ("long", None),
    "log.roll.jitter.hours": ("int", 0),
    "log.retention.ms": ("long", None),
    "log.retention.minutes": ("int", None),
    "log.retention.hours": ("int", 168),
    "log.retention.bytes": ("long", -1),
    "log.retention.check.interval.ms": ("long", 300000),
    "log.cleanup.policy": ("list", "delete"),
    "log.cleaner.enable": ("boolean", True),
    "log.cleaner.delete.retention.ms": ("long", 86400000),
    "log.cleaner.min.compaction.lag.ms": ("long", 0),
    "log.cleaner.max.compaction.lag.ms": ("long", LONG_MAX),
    "log.cleaner.min.cleanable.ratio": ("double", 0.5),
    "log.cleaner.backoff.ms": ("long", 15000),
    "log.cleaner.dedupe.buffer.size": ("long", 134217728),
    "log.cleaner.io.buffer.load.factor": ("double", 0.9),
    "log.cleaner.threads": ("int", 1),
    "log.index.interval.bytes": ("int", 4096),
    "log.index.size.max.bytes": ("int", 10485760),
    "log.flush.interval.messages": ("long", LONG_MAX),
    "log.flush.interval.ms": ("long", None),
    "log.flush.scheduler.interval.ms": ("long", LONG_MAX),
    "log.flush.offset.checkpoint.interval.ms": ("int", 60000),
    "log.flush.start.offset.checkpoint.interval.ms": ("int", 60000),
    "replica.high.watermark.checkpoint.interval.ms": ("long", 5000),
    "log.initial.task.delay.ms": ("long", 30000),
    "log.message.timestamp.type": ("string", "CreateTime"),
    "log.message.timestamp.after.max.ms": ("long", 3600000),
    "log.message.timestamp.before.max.ms": ("long", LONG_MAX),
    "log.preallocate": ("boolean", False),
    "log.segment.delete.delay.ms": ("long", 60000),
    "log.local.retention.bytes": ("long", -2),
    "log.local.retention.ms": ("long", -2),
    "compression.type": ("string", "producer"),
    "compression.gzip.level": ("int", -1),
    "compression.lz4.level": ("int", 9),
    "compression.zstd.level": ("int", 3),
    "min.insync.replicas": ("int", 1),
    "unclean.leader.election.enable": ("boolean", False),
    "offsets.topic.num.partitions": ("int", 50),
    # Kafka's default is 3 (SHORT); a single node cannot satisfy it, so 1 here (docs/COORDINATORS.md)
    "offsets.topic.replication.factor": ("short", 1),
    "offsets.topic.segment.bytes": ("int", 104857600),
    "offsets.topic.compression.codec": ("int", 0),
    "offsets.retention.minutes": ("int", 10080),
    "offsets.retention.check.interval.ms": ("long", 600000),
    "offset.metadata.max.bytes": ("int", 4096),
    "offsets.commit.timeout.ms": ("int", 5000),
    "group.initial.rebalance.delay.ms": ("int", 3000),
    "group.min.session.timeout.ms": ("int", 6000),
    "group.max.session.timeout.ms": ("int", 1800000),
    "group.max.size": ("int", 2147483647),
    "group.coordinator.rebalance.protocols": ("list", "classic,consumer,streams"),
    "group.consumer.session.timeout.ms": ("int", 45000),
    "group.consumer.heartbeat.interval.ms": ("int", 5000),
    "group.consumer.assignors": ("list", "uniform,range"),
    "group.consumer.max.size": ("int", 2147483647),
    "group.consumer.migration.policy": ("string", "bidirectional"),
    "group.consumer.assignment.interval.ms": ("int", 1000),
    "transaction.state.log.num.partitions": ("int", 50),
    "transaction.state.log.replication.factor": ("short", 1),
    "transaction.state.log.min.isr": ("int", 1),
    "transaction.state.log.segment.bytes": ("int", 104857600),
    "transaction.max.timeout.ms": ("int", 900000),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": ("int", 10000),
    "transaction.remove.expired.transaction.cleanup.interval.ms": ("int", 3600000),
    "transaction.partition.verification.enable": ("boolean", True),
    # Produce with transaction version 2: the broker's own retries of CONCURRENT_TRANSACTIONS
    # while the previous transaction's markers are written (KAFKA-18654)
    "add.partitions.to.txn.retry.backoff.ms": ("int", 20),
    "add.partitions.to.txn.retry.backoff.max.ms": ("int", 100),
    "transactional.id.expiration.ms": ("int", 604800000),
    "producer.id.expiration.ms": ("int", 86400000),
    "producer.id.expiration.check.interval.ms": ("int", 600000),
    "max.connections": ("int", 2147483647),
    "num.network.threads": ("int", 3),
    "num.io.threads": ("int", 8),
    "num.recovery.threads.per.data.dir": ("int", 2),
    "queued.max.requests": ("int", 500),
    "queued.max.request.bytes": ("long", -1),
    "metadata.max.idle.interval.ms": ("int", 500),
    "metadata.log.max.record.bytes.between.snapshots": ("long", 20971520),
    "metadata.log.max.snapshot.interval.ms": ("long", 3600000),
    "metadata.max.retention.bytes": ("long", 104857600),
    "metadata.max.retention.ms": ("long", 604800000),
    "metadata.log.segment.bytes": ("int", 1073741824),
    "metadata.log.segment.ms": ("long", 604800000),
    "internal.metadata.log.segment.bytes": ("int", None),
    "group.share.enable": ("boolean", False),
    "share.coordinator.state.topic.replication.factor": ("short", 1),
    "share.coordinator.state.topic.num.partitions": ("int", 50),
    "share.coordinator.state.topic.segment.bytes": ("int", 104857600),
    "share.coordinator.state.topic.min.isr": ("short", 1),
    "connections.max.idle.ms": ("long", 600000),
    # kafkawire's own (not a Kafka key): segment and index files kept open between uses, over
    # all partitions (log/file_cache.py); capped at half the open-file limit at start.
    "log.open.files.max": ("int", 256),
    "request.timeout.ms": ("int", 30000),
    "replica.lag.time.max.ms": ("long", 30000),
    # the replication quotas' measurement windows (kafkawire/replication_quota.py); the
    # alter-log-dirs pair is reported only (replicas never move between log dirs here)
    "replication.quota.window.num": ("int", 11),
    "replication.quota.window.size.seconds": ("int", 1),
    "alter.log.dirs.replication.quota.window.num": ("int", 11),
    "alter.log.dirs.replication.quota.window.size.seconds": ("int", 1),
    # KIP-392 fetch from follower (kafkawire/apis/fetch.py): Kafka's RackAwareReplicaSelector
    "replica.selector.class": ("string", None),
    # the controller's preferred-leader balancing (kafkawire/controller_service.py)
    "auto.leader.rebalance.enable": ("boolean", True),
    "leader.imbalance.check.interval.seconds": ("long", 300),
    # the controller's periodic unclean election of leaderless partitions (internal in Kafka)
    "unclean.leader.election.interval.ms": ("long", 300000),
    "cluster.id": ("string", None),
    # Reported like Kafka (a PASSWORD: sensitive, value hidden); read per listener by
    # kafkawire.security_config.
    "sasl.jaas.config": ("password", None),
}

# Dynamically reconfigurable in Kafka (kafkawire.config_entries.DYNAMIC_BROKER_CONFIGS) and the
# bounds of the group configs (kafkawire.config_resources): type and Kafka's default.
BROKER_CONFIGS.update({
    "background.threads": ("int", 10),
    "config.providers": ("list", ""),
    "cordoned.log.dirs": ("list", ""),
    "follower.fetch.last.tiered.offset.enable": ("boolean", False),
    "group.coordinator.cached.buffer.max.bytes": ("int", 1048588),
    "log.cleaner.io.buffer.size": ("int", 524288),
    "log.cleaner.io.max.bytes.per.second": ("double", 1.7976931348623157e308),
    "max.connection.creation.rate": ("int", 2147483647),
    "max.connections.per.ip": ("int", 2147483647),
    "max.connections.per.ip.overrides": ("string", ""),
    "metric.reporters": ("list", "org.apache.kafka.common.metrics.JmxReporter"),
    "num.replica.fetchers": ("int", 1),
    "principal.builder.class": (
        "class", "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"),
    "remote.fetch.max.wait.ms": ("int", 500),
    "remote.list.offsets.request.timeout.ms": ("long", 30000),
    "remote.log.index.file.cache.total.size.bytes": ("long", 1073741824),
    "remote.log.manager.copier.thread.pool.size": ("int", 10),
    "remote.log.manager.copy.max.bytes.per.second": ("long", LONG_MAX),
    "remote.log.manager.expiration.thread.pool.size": ("int", 10),
    "remote.log.manager.fetch.max.bytes.per.second": ("long", LONG_MAX),
    "remote.log.manager.follower.thread.pool.size": ("int", 2),
    "remote.log.reader.threads": ("int", 10),
    "share.coordinator.cached.buffer.max.bytes": ("int", 1048588),
    "group.consumer.min.session.timeout.ms": ("int", 45000),
    "group.consumer.max.session.timeout.ms": ("int", 60000),
    "group.consumer.min.heartbeat.interval.ms": ("int", 5000),
    "group.consumer.max.heartbeat.interval.ms": ("int", 15000),
    "group.consumer.min.assignment.interval.ms": ("int", 0),
    "group.consumer.max.assignment.interval.ms": ("int", 15000),
    "group.share.max.size": ("int", 200),
    "group.share.max.share.sessions": ("int", 2000),
    "group.share.session.timeout.ms": ("int", 45000),
    "group.share.min.session.timeout.ms": ("int", 45000),
    "group.share.max.session.timeout.ms": ("int", 60000),
    "group.share.heartbeat.interval.ms": ("int", 5000),
    "group.share.min.heartbeat.interval.ms": ("int", 5000),
    "group.share.max.heartbeat.interval.ms": ("int", 15000),
    "group.share.assignment.interval.ms": ("int", 1000),
    "group.share.min.assignment.interval.ms": ("int", 0),
    "group.share.max.assignment.interval.ms": ("int", 15000),
    "group.share.record.lock.duration.ms": ("int", 30000),
    "group.share.min.record.lock.duration.ms": ("int", 15000),
    "group.share.max.record.lock.duration.ms": ("int", 60000),
    "group.share.delivery.count.limit": ("int", 5),
    "group.share.min.delivery.count.limit": ("int", 2),
    "group.share.max.delivery.count.limit": ("int", 10),
    "group.share.partition.max.record.locks": ("int", 2000),
    "group.share.min.partition.max.record.locks": ("int", 100),
    "group.share.max.partition.max.record.locks": ("int", 4000),
    "group.streams.session.timeout.ms": ("int", 45000),
    "group.streams.min.session.timeout.ms": ("int", 45000),
    "group.streams.max.session.timeout.ms": ("int", 60000),
    "group.streams.heartbeat.interval.ms": ("int", 5000),
    "group.streams.min.heartbeat.interval.ms": ("int", 5000),
    "group.streams.max.heartbeat.interval.ms": ("int", 15000),
    "group.streams.assignment.interval.ms": ("int", 1000),
    "group.streams.min.assignment.interval.ms": ("int", 0),
    "group.streams.max.assignment.interval.ms": ("int", 15000),
    "group.streams.num.standby.replicas": ("int", 0),
    "group.streams.max.standby.replicas": ("int", 2),
    "group.streams.initial.rebalance.delay.ms": ("int", 3000),
})

# kafkawire's own keys (Kafka has none of these): not broker configs Kafka would describe, so
# they are kept out of DescribeConfigs.
KAFKAWIRE_CONFIGS: dict[str, tuple[str, Any]] = {
    # the HTTP endpoint for /metrics (Prometheus) and /health/{live,ready}; 0 turns it off
    "metrics.port": ("int", 9404),
    # its bind address; default: the host of the first listener
    "metrics.host": ("string", None),
    # KIP-714: accept client telemetry (GetTelemetrySubscriptions, PushTelemetry) and expose it
    # on /metrics; off by default, as Kafka without a telemetry-receiving metrics reporter
    "metrics.client.telemetry.enable": ("boolean", False),
    # KIP-227: how long a fetch session must stay unused before any newcomer may evict it
    # (Kafka 4.3.1 hard-codes 120000, KafkaBroker.MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS)
    "min.incremental.fetch.session.eviction.ms": ("long", 120000),
}

# Kafka's internal configs (``defineInternal``): accepted, never listed by DescribeConfigs
# (Kafka 4.3.1 does not list these either; ``cluster.id`` is no Kafka config at all: Kafka
# keeps it in meta.properties).
INTERNAL_BROKER_CONFIGS = frozenset({
    "log.initial.task.delay.ms", "internal.metadata.log.segment.bytes", "log.open.files.max",
    "unclean.leader.election.interval.ms", "group.share.enable",
    "producer.id.expiration.check.interval.ms", "cluster.id",
})

# Keys Kafka has no default for (DescribeConfigs lists no DEFAULT_CONFIG synonym); kafkawire
# falls back to the value above so that a node starts without any configuration.
NO_KAFKA_DEFAULT: frozenset[str] = frozenset({"node.id", "process.roles",
                                              "controller.listener.names"})

# Keys accepted and reported but with no effect in kafkawire (logged once at start).
IGNORED_PREFIXES = ("confluent.", "metric.", "metrics.")
# Security keys (kafkawire.security_config, kafkawire.authorizer, kafkawire.quota_manager):
# kept as given in ``explicit`` and read there, per listener.
SECURITY_PREFIXES = ("ssl.", "sasl.", "listener.name.")
SECURITY_KEYS = frozenset({
    "authorizer.class.name", "super.users", "allow.everyone.if.no.acl.found",
    "connections.max.reauth.ms", "connection.failed.authentication.delay.ms",
    "quota.window.num", "quota.window.size.seconds",
    "delegation.token.secret.key", "delegation.token.master.key",
    "delegation.token.max.lifetime.ms", "delegation.token.expiry.time.ms",
    "delegation.token.expiry.check.interval.ms",
})


class ConfigError(Exception):
    """A configuration value that cannot be used."""


def parse_value(kind: str, raw: str, key: str) -> Any:
    raw = raw.strip()
    try:
        if kind in ("int", "long", "short"):
            return int(raw)
        if kind == "double":
            return float(raw)
        if kind == "boolean":
            low = raw.lower()
            if low not in ("true", "false"):
                raise ValueError(raw)
            return low == "true"
        if kind == "list":
            return raw
        return raw
    except ValueError:
        raise ConfigError(f"invalid value {raw!r} for {key} (expected {kind})") from None


def read_properties(path: Path) -> dict[str, str]:
    """Java .properties subset: key=value or key: value, # and ! comments, \\ continuations."""
    props: dict[str, str] = {}
    pending = ""
    for line in path.read_text().splitlines():
        s = line.strip()
        if not pending and (not s or s[0] in "#!"):
            continue
        if s.endswith("\\"):
            pending += s[:-1]
            continue
        s = pending + s
        pending = ""
        for i, ch in enumerate(s):
            if ch in "=:":
                props[s[:i].strip()] = s[i + 1 :].strip()
                break
        else:
            props[s] = ""
    return props


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int

    @staticmethod
    def parse(spec: str) -> Listener:
        name, _, rest = spec.partition("://")
        if not rest:
            raise ConfigError(f"invalid listener {spec!r}: expected NAME://host:port")
        host, _, port = rest.rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        try:
            return Listener(name.strip().upper(), host or "0.0.0.0", int(port))
        except ValueError:
            raise ConfigError(f"invalid listener port in {spec!r}") from None


@dataclass
class BrokerConfig:
    values: dict[str, Any] = field(default_factory=dict)
    explicit: dict[str, str] = field(default_factory=dict)  # as given (static broker config)
    unknown: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path | None = None, overrides: list[str] | None = None) -> BrokerConfig:
        raw: dict[str, str] = {}
        if path is not None:
            raw.update(read_properties(path))
        for ov in overrides or []:
            if "=" not in ov:
                raise ConfigError(f"--override expects key=value, got {ov!r}")
            k, _, v = ov.partition("=")
            raw[k.strip()] = v.strip()
        return cls.from_dict(raw)

    @classmethod
    def from_dict(cls, raw: dict[str, str]) -> BrokerConfig:
        cfg = cls()
        for key, (_kind, default) in (*BROKER_CONFIGS.items(), *KAFKAWIRE_CONFIGS.items()):
            cfg.values[key] = default
        for key, value in raw.items():
            if key in KAFKAWIRE_CONFIGS:
                cfg.values[key] = parse_value(KAFKAWIRE_CONFIGS[key][0], value, key)
            elif key in BROKER_CONFIGS:
                cfg.values[key] = parse_value(BROKER_CONFIGS[key][0], value, key)
                cfg.explicit[key] = value
            elif key.startswith(SECURITY_PREFIXES) or key in SECURITY_KEYS:
                cfg.explicit[key] = value
            elif key in KAFKA_ONLY_BROKER_CONFIGS:  # a Kafka key with no effect here
                parse_value(KAFKA_ONLY_BROKER_CONFIGS[key][0], value, key)
                cfg.ignored.append(key)
                cfg.explicit[key] = value
            elif key.startswith(IGNORED_PREFIXES):
                cfg.ignored.append(key)
                cfg.explicit[key] = value
            else:
                cfg.unknown.append(key)
                cfg.explicit[key] = value  # DescribeConfigs lists it as Kafka does
        # As Kafka's KafkaConfig: node.id and broker.id name the same id; a configured one is
        # a static config under both names.
        if "broker.id" in raw and "node.id" not in raw:
            cfg.values["node.id"] = cfg.values["broker.id"]
            cfg.explicit["node.id"] = raw["broker.id"]
        elif "broker.id" not in raw:
            cfg.values["broker.id"] = cfg.values["node.id"]
            if "node.id" in raw:
                cfg.explicit["broker.id"] = raw["node.id"]
        cfg.validate()
        return cfg

    def validate(self) -> None:
        from kafkawire.quorum_config import QuorumConfigError, validate_kraft

        if self.node_id < 0:
            raise ConfigError(f"Invalid value {self.node_id} for configuration node.id: "
                              "Value must be at least 0")
        if self.socket_request_max_bytes <= 0:
            raise ConfigError("socket.request.max.bytes must be > 0")
        if self.message_max_bytes <= 0:
            raise ConfigError("message.max.bytes must be > 0")
        if self.num_partitions <= 0:
            raise ConfigError("num.partitions must be > 0")
        for spec in self.listener_specs:
            Listener.parse(spec)
        if not 0 <= self.metrics_port <= 65535:
            raise ConfigError("metrics.port must be 0 (off) or a TCP port")
        try:
            validate_kraft(self)
        except QuorumConfigError as e:
            raise ConfigError(str(e)) from None
        if int(self.values["metadata.log.segment.bytes"]) < 8 * 1024 * 1024:
            raise ConfigError(
                f"Invalid value {self.values['metadata.log.segment.bytes']} for configuration "
                "metadata.log.segment.bytes: Value must be at least 8388608")

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    # ---- typed accessors ------------------------------------------------------------------
    @property
    def metadata_log_segment_bytes(self) -> int:
        """``internal.metadata.log.segment.bytes`` when set (tests), else
        ``metadata.log.segment.bytes`` (Kafka's minimum 8 MiB is checked in ``validate``)."""
        internal = self.values["internal.metadata.log.segment.bytes"]
        return int(internal if internal is not None else self.values["metadata.log.segment.bytes"])

    @property
    def node_id(self) -> int:
        return int(self.values["node.id"])

    @property
    def metrics_port(self) -> int:
        return int(self.values["metrics.port"])

    @property
    def client_telemetry(self) -> bool:
        return bool(self.values["metrics.client.telemetry.enable"])

    @property
    def metrics_host(self) -> str:
        host = self.values["metrics.host"]
        if host:
            return str(host)
        listeners = self.broker_listeners
        return listeners[0].host if listeners else "127.0.0.1"

    @property
    def process_roles(self) -> frozenset[str]:
        return frozenset(s.strip() for s in str(self.values["process.roles"]).split(",")
                         if s.strip())

    @property
    def names_a_quorum(self) -> bool:
        """``controller.quorum.voters`` or ``controller.quorum.bootstrap.servers`` is set: a
        cluster configuration (Kafka's rules apply, the node must be formatted), not the
        implicit single node."""
        return bool(str(self.values["controller.quorum.voters"] or "").strip()
                    or str(self.values["controller.quorum.bootstrap.servers"] or "").strip())

    @property
    def listener_specs(self) -> list[str]:
        return [s.strip() for s in str(self.values["listeners"]).split(",") if s.strip()]

    @property
    def listeners(self) -> list[Listener]:
        return [Listener.parse(s) for s in self.listener_specs]

    @property
    def controller_listener_names(self) -> set[str]:
        return {s.strip().upper() for s in str(self.values["controller.listener.names"]).split(",")}

    @property
    def controller_listeners(self) -> list[Listener]:
        """The listeners a controller serves (``process.roles`` with ``controller``)."""
        if "controller" not in self.process_roles:
            return []
        return [lst for lst in self.listeners if lst.name in self.controller_listener_names]

    @property
    def broker_listeners(self) -> list[Listener]:
        return [lst for lst in self.listeners if lst.name not in self.controller_listener_names]

    @property
    def advertised_listeners(self) -> list[Listener]:
        adv = self.values["advertised.listeners"]
        if adv:
            return [Listener.parse(s.strip()) for s in str(adv).split(",") if s.strip()]
        out = []
        for lst in self.broker_listeners:
            host = lst.host
            if host in ("0.0.0.0", "", "::"):
                host = "localhost"
            out.append(Listener(lst.name, host, lst.port))
        return out

    @property
    def log_dirs(self) -> list[Path]:
        dirs = self.values["log.dirs"] or self.values["log.dir"]
        return [Path(os.path.expanduser(d.strip())) for d in str(dirs).split(",") if d.strip()]

    @property
    def metadata_log_dir(self) -> Path:
        d = self.values["metadata.log.dir"]
        return Path(d) if d else self.log_dirs[0]

    @property
    def num_partitions(self) -> int:
        return int(self.values["num.partitions"])

    @property
    def default_replication_factor(self) -> int:
        return int(self.values["default.replication.factor"])

    @property
    def auto_create_topics_enable(self) -> bool:
        return bool(self.values["auto.create.topics.enable"])

    @property
    def message_max_bytes(self) -> int:
        return int(self.values["message.max.bytes"])

    @property
    def socket_request_max_bytes(self) -> int:
        return int(self.values["socket.request.max.bytes"])

    @property
    def log_retention_ms(self) -> int:
        v = self.values
        if v["log.retention.ms"] is not None:
            return int(v["log.retention.ms"])
        if v["log.retention.minutes"] is not None:
            return int(v["log.retention.minutes"]) * 60_000
        return int(v["log.retention.hours"]) * 3_600_000

    @property
    def log_roll_ms(self) -> int:
        v = self.values
        if v["log.roll.ms"] is not None:
            return int(v["log.roll.ms"])
        return int(v["log.roll.hours"]) * 3_600_000

    # ---- topic config defaults from broker config -----------------------------------------
    def topic_default(self, name: str) -> tuple[Any, str, str | None]:
        """(value, source, synonym) of a topic config before any topic override.

        source is ``STATIC_BROKER_CONFIG`` when the broker synonym was set explicitly, else
        ``DEFAULT_CONFIG``.
        """
        kind, default, syn = TOPIC_CONFIGS[name]
        if name == "retention.ms":
            for key in ("log.retention.ms", "log.retention.minutes", "log.retention.hours"):
                if key in self.explicit:
                    return self.log_retention_ms, "STATIC_BROKER_CONFIG", key
            return self.log_retention_ms, "DEFAULT_CONFIG", "log.retention.hours"
        if name == "segment.ms":
            for key in ("log.roll.ms", "log.roll.hours"):
                if key in self.explicit:
                    return self.log_roll_ms, "STATIC_BROKER_CONFIG", key
            return self.log_roll_ms, "DEFAULT_CONFIG", "log.roll.hours"
        if syn is not None and syn in self.explicit:
            return parse_value(kind, self.explicit[syn], syn), "STATIC_BROKER_CONFIG", syn
        if syn is not None and syn in BROKER_CONFIGS and BROKER_CONFIGS[syn][1] is not None:
            return BROKER_CONFIGS[syn][1], "DEFAULT_CONFIG", syn
        return default, "DEFAULT_CONFIG", syn


def format_config_value(kind: str, value: Any) -> str | None:
    """A config value as Kafka prints it in DescribeConfigs."""
    if value is None:
        return None
    if kind == "boolean":
        return "true" if value else "false"
    if kind == "double":
        return java_double(float(value))
    return str(value)


def java_double(v: float) -> str:
    """``Double.toString``: shortest digits, scientific ``1.0E7`` outside [1e-3, 1e7)."""
    if v == 0 or 1e-3 <= abs(v) < 1e7 or v != v or v in (float("inf"), float("-inf")):
        return repr(v) if v == v and abs(v) != float("inf") else (
            "NaN" if v != v else ("Infinity" if v > 0 else "-Infinity"))
    d = Decimal(repr(v))
    _sign, digits, _exp = d.as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    return f"{'-' if v < 0 else ''}{text[0]}.{text[1:] or '0'}E{d.adjusted()}"


# Range checks of Kafka's LogConfig definitions: name -> (at least, at most or None).
_TOPIC_RANGES: dict[str, tuple[float, float | None]] = {
    "segment.bytes": (1048576, None),  # Kafka 4.x (internal.segment.bytes for smaller)
    "internal.segment.bytes": (14, None),
    "segment.ms": (1, None),
    "segment.jitter.ms": (0, None),
    "segment.index.bytes": (4, None),
    "flush.messages": (1, None),
    "flush.ms": (0, None),
    "retention.ms": (-1, None),
    "max.message.bytes": (0, None),
    "index.interval.bytes": (0, None),
    "delete.retention.ms": (0, None),
    "min.compaction.lag.ms": (0, None),
    "max.compaction.lag.ms": (1, None),
    "file.delete.delay.ms": (0, None),
    "min.cleanable.dirty.ratio": (0, 1),
    "min.insync.replicas": (1, None),
    "message.timestamp.before.max.ms": (0, None),
    "message.timestamp.after.max.ms": (0, None),
    "local.retention.ms": (-2, None),
    "local.retention.bytes": (-2, None),
    "compression.lz4.level": (1, 17),
    "compression.zstd.level": (-131072, 22),
}

_TOPIC_CHOICES: dict[str, tuple[str, ...]] = {
    "compression.type": ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    "message.timestamp.type": ("CreateTime", "LogAppendTime"),
}

_KIND_NAMES = {"int": "INT", "long": "LONG", "double": "DOUBLE", "short": "SHORT"}


def _invalid(name: str, raw: str, reason: str) -> ConfigError:
    return ConfigError(f"Invalid value {raw} for configuration {name}: {reason}")


def normalize_list(raw: str) -> str:
    """A LIST config value as Kafka prints it: items trimmed, joined by ','."""
    return ",".join(p.strip() for p in raw.split(",") if p.strip())


def parse_typed(name: str, kind: str, raw: str) -> Any:
    """A value parsed like Kafka's ``ConfigDef``; ConfigError with its message otherwise
    ("Invalid value abc for configuration x: Not a number of type INT")."""
    text = raw.strip()
    if kind in ("int", "long", "short"):
        bits = {"int": 31, "long": 63, "short": 15}[kind]
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not -(1 << bits) <= value < (1 << bits):
            raise _invalid(name, raw, f"Not a number of type {_KIND_NAMES[kind]}")
        return value
    if kind == "double":
        try:
            return float(text)
        except ValueError:
            raise _invalid(name, raw, "Not a number of type DOUBLE") from None
    if kind == "boolean":
        if text.lower() not in ("true", "false"):
            raise _invalid(name, raw, "Expected value to be either true or false")
        return text.lower() == "true"
    if kind == "list":
        return normalize_list(text)
    return text


def validate_topic_config(name: str, raw: str | None) -> Any:
    """Parse a topic config value; raises ConfigError for unknown names or bad values.

    The messages are Kafka's (``ConfigDef`` parsing and validators): ``Unknown topic config
    name: x``, ``Invalid value abc for configuration retention.ms: Not a number of type LONG``,
    ``... Value must be at least 1``, ``... String must be one of: ...``.
    """
    definition = TOPIC_CONFIGS.get(name) or INTERNAL_TOPIC_CONFIGS.get(name)
    if definition is None:
        raise ConfigError(f"Unknown topic config name: {name}")
    kind, _default, _syn = definition
    if raw is None:
        return None
    value = parse_typed(name, kind, raw)
    if name == "cleanup.policy":
        parts = [p for p in str(value).split(",") if p]
        bad = [p for p in parts if p not in ("delete", "compact")]
        if bad:
            raise _invalid(name, raw, "String must be one of: compact, delete")
    if name in _THROTTLED_REPLICAS:
        _check_throttled_replicas(name, str(value))
    choices = _TOPIC_CHOICES.get(name)
    if choices is not None and value not in choices:
        raise _invalid(name, raw, "String must be one of: " + ", ".join(choices))
    if name == "compression.gzip.level" and value != -1 and not 1 <= value <= 9:
        raise _invalid(name, raw, "Value must be between 1 and 9 or equal to -1")
    bounds = _TOPIC_RANGES.get(name)
    if bounds is not None:
        lo, hi = bounds
        # Kafka prints the parsed value (2 -> 2.0 for a DOUBLE) and the bound as declared.
        shown = repr(float(value)) if kind == "double" else str(value)
        if value < lo:
            raise _invalid(name, shown, f"Value must be at least {_num(lo)}")
        if hi is not None and value > hi:
            raise _invalid(name, shown, f"Value must be no more than {_num(hi)}")
    return value


_THROTTLED_REPLICAS = ("leader.replication.throttled.replicas",
                       "follower.replication.throttled.replicas")
_REPLICA_ITEM = re.compile(r"([0-9]+:[0-9]+)?")


def _check_throttled_replicas(name: str, value: str) -> None:
    """Kafka's ``ThrottledReplicaListValidator``: ``*`` or ``partition:broker`` pairs (the
    message shows the parsed list as Java prints it)."""
    items = value.split(",") if value else []
    if items == ["*"] or all(_REPLICA_ITEM.fullmatch(i) for i in items):
        return
    raise _invalid(name, "[" + ", ".join(items) + "]",
                   f"{name} must be the literal '*' or a list of replicas in the following "
                   "format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))
