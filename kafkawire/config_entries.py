"""Configuration as the admin APIs report and change it: layers, sources and synonyms.

A topic config's value comes from the first layer that sets it:

1. the topic override (``ConfigRecord`` for resource TOPIC) -> ``DYNAMIC_TOPIC_CONFIG`` (1)
2. a dynamic config of this broker (resource BROKER named by the node id) -> ``DYNAMIC_BROKER_CONFIG`` (2)
3. the cluster-wide dynamic default (resource BROKER with an empty name) ->
   ``DYNAMIC_DEFAULT_BROKER_CONFIG`` (3)
4. ``server.properties`` / ``--override`` -> ``STATIC_BROKER_CONFIG`` (4)
5. the built-in default -> ``DEFAULT_CONFIG`` (5)

Layers 2-5 are read through the topic config's broker synonyms (``retention.ms`` ->
``log.retention.ms``, ``log.retention.minutes``, ``log.retention.hours``), exactly as Kafka's
``ServerTopicConfigSynonyms`` lists them. The synonym list DescribeConfigs returns follows
Kafka's ``ConfigHelper``: the topic override first, then, for the broker synonyms of the
highest-priority broker name, every layer in the order above, and finally everything before
the first entry named like that highest-priority name is dropped. That reproduces Kafka's
visible quirk: ``retention.ms`` on a default broker reports ``synonyms={}`` and source
``DEFAULT_CONFIG`` (its only default synonym is ``log.retention.hours``), while
``cleanup.policy`` reports ``{DEFAULT_CONFIG:log.cleanup.policy=delete}``.

Dynamic broker configs: Kafka 4.3.1's reconfigurable set (``DYNAMIC_BROKER_CONFIGS``: the
topic-config synonyms plus ``_RECONFIGURABLE`` and the SSL/SASL keys), per broker or as the
cluster default following Kafka's update modes (``PER_BROKER_CONFIGS`` only per broker), typed
and range-checked like Kafka; any other key is refused as Kafka refuses static keys
(``INVALID_REQUEST``, ``Cannot update these configs dynamically``). Under ELR a per-broker
``min.insync.replicas`` is refused and the cluster-wide one cannot be removed.

Applied at once: the topic-config synonyms (every partition's log config),
``producer.id.expiration.ms`` (partition logs), ``log.cleaner.backoff.ms`` and
``log.cleaner.io.max.bytes.per.second`` (the cleaner), ``max.connections``,
``max.connections.per.ip`` and ``max.connections.per.ip.overrides`` (the server),
``group.consumer.assignment.interval.ms`` (the KIP-848 coordinator),
``transaction.partition.verification.enable`` (Produce), ``leader.replication.throttled.rate``
and ``follower.replication.throttled.rate`` (``kafkawire.replication_quota``; dynamic-only keys
listed once set, as ``replica.alter.log.dirs.io.max.bytes.per.second``, which paces replicas
moving between log dirs, ``kafkawire.log_mover``). **Accepted but with no
mechanism in kafkawire** (stored, validated, reported; they change nothing): the thread pool
sizes (``num.io.threads``, ``num.network.threads``, ``num.recovery.threads.per.data.dir``,
``background.threads``, ``num.replica.fetchers``, ``log.cleaner.threads``), cleaner buffer sizes,
coordinator buffer sizes, the share/streams assignment
intervals, the ``remote.*`` keys, ``follower.fetch.last.tiered.offset.enable``, ``metric.reporters``, ``config.providers``,
``cordoned.log.dirs``, the listener keys (listeners stay those bound at start). The SSL/SASL
keys apply to new connections (docs/SECURITY.md).

Group and client-metrics resources are in ``kafkawire.config_resources``.

Everything here is pure: it reads a ``BrokerConfig`` and a ``MetadataImage``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from kafkawire.broker_config_keys import KAFKA_ONLY_BROKER_CONFIGS
from kafkawire.config import (
    BROKER_CONFIGS,
    INTERNAL_BROKER_CONFIGS,
    INTERNAL_TOPIC_CONFIGS,
    NO_KAFKA_DEFAULT,
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigError,
    format_config_value,
    normalize_list,
    parse_typed,
    parse_value,
    validate_topic_config,
)
from kraft.image import RESOURCE_BROKER, MetadataImage
from protocol.errors import ErrorCode, KafkaError


class ConfigSource(IntEnum):
    """``DescribeConfigsResponse.ConfigSource`` ids."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class ConfigType(IntEnum):
    """``DescribeConfigsResponse.ConfigType`` ids (DescribeConfigs v3+)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigOp(IntEnum):
    """``AlterConfigOp.OpType`` ids (IncrementalAlterConfigs)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


_TYPE_OF_KIND = {
    "boolean": ConfigType.BOOLEAN,
    "string": ConfigType.STRING,
    "int": ConfigType.INT,
    "short": ConfigType.SHORT,
    "long": ConfigType.LONG,
    "double": ConfigType.DOUBLE,
    "list": ConfigType.LIST,
    "class": ConfigType.CLASS,
    "password": ConfigType.PASSWORD,
}

# Topic config -> broker properties it falls back to, highest priority first (Kafka's
# ServerTopicConfigSynonyms). Configs missing here have no broker-level default.
TOPIC_BROKER_SYNONYMS: dict[str, tuple[str, ...]] = {
    "retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "segment.ms": ("log.roll.ms", "log.roll.hours"),
    "segment.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    "flush.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
}
for _name, (_kind, _default, _syn) in TOPIC_CONFIGS.items():
    if _syn is not None and _name not in TOPIC_BROKER_SYNONYMS:
        TOPIC_BROKER_SYNONYMS[_name] = (_syn,)

# Broker property -> the topic config it is the same value of (1:1 synonyms only; the
# minutes/hours variants convert units and are only type-checked).
_TOPIC_OF_BROKER: dict[str, str] = {
    names[0]: topic for topic, names in TOPIC_BROKER_SYNONYMS.items()
}

# Kafka 4.3.1's dynamically reconfigurable broker configs (``DynamicBrokerConfig``'s update
# modes, read from its jars): the topic-config synonyms above (``DynamicLogConfig``; the
# ``log.retention.hours``-style unit variants stay read-only, as in Kafka) plus these.
# True = per-broker (may be set for one broker only, never as the cluster default).
_RECONFIGURABLE: dict[str, bool] = {
    "background.threads": False, "config.providers": False, "cordoned.log.dirs": True,
    "follower.fetch.last.tiered.offset.enable": False,
    "group.consumer.assignment.interval.ms": False,
    "group.coordinator.cached.buffer.max.bytes": False,
    "group.share.assignment.interval.ms": False, "group.streams.assignment.interval.ms": False,
    "listener.security.protocol.map": True, "listeners": True,
    "log.cleaner.backoff.ms": False, "log.cleaner.dedupe.buffer.size": False,
    "log.cleaner.io.buffer.load.factor": False, "log.cleaner.io.buffer.size": False,
    "log.cleaner.io.max.bytes.per.second": False, "log.cleaner.threads": False,
    "max.connection.creation.rate": False, "max.connections": False,
    "max.connections.per.ip": False, "max.connections.per.ip.overrides": False,
    "metric.reporters": False, "num.io.threads": False, "num.network.threads": False,
    "num.recovery.threads.per.data.dir": False, "num.replica.fetchers": False,
    "principal.builder.class": True, "producer.id.expiration.ms": False,
    "remote.fetch.max.wait.ms": False, "remote.list.offsets.request.timeout.ms": False,
    "remote.log.index.file.cache.total.size.bytes": False,
    "remote.log.manager.copier.thread.pool.size": False,
    "remote.log.manager.copy.max.bytes.per.second": False,
    "remote.log.manager.expiration.thread.pool.size": False,
    "remote.log.manager.fetch.max.bytes.per.second": False,
    "remote.log.manager.follower.thread.pool.size": False, "remote.log.reader.threads": False,
    "share.coordinator.cached.buffer.max.bytes": False,
    "transaction.partition.verification.enable": False,
}
# SSL/SASL keys Kafka reconfigures per broker (its listener's security), plain or with a
# ``listener.name.<listener>.`` prefix: stored as given and read by
# kafkawire.listener_security (a changed keystore/truststore applies to new connections);
# DescribeConfigs lists them always, with Kafka's defaults (``kafkawire.broker_config_keys``;
# passwords hidden).
SECURITY_DYNAMIC_CONFIGS: frozenset[str] = frozenset({
    "sasl.enabled.mechanisms", "sasl.jaas.config", "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.min.time.before.relogin", "sasl.kerberos.principal.to.local.rules",
    "sasl.kerberos.service.name", "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.ticket.renew.window.factor", "sasl.login.refresh.buffer.seconds",
    "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter", "sasl.mechanism.inter.broker.protocol",
    "ssl.cipher.suites", "ssl.client.auth", "ssl.enabled.protocols",
    "ssl.endpoint.identification.algorithm", "ssl.engine.factory.class", "ssl.key.password",
    "ssl.keymanager.algorithm", "ssl.keystore.certificate.chain", "ssl.keystore.key",
    "ssl.keystore.location", "ssl.keystore.password", "ssl.keystore.type", "ssl.protocol",
    "ssl.provider", "ssl.secure.random.implementation", "ssl.trustmanager.algorithm",
    "ssl.truststore.certificates", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.truststore.type",
})

# Kafka's replication quotas (``DynamicConfig.Broker``, KIP-73): dynamic-only LONG configs
# (>= 0, default Long.MAX_VALUE), per broker or as the cluster default. Kafka's KafkaConfig
# does not define them, so DescribeConfigs lists them only once set, with no DEFAULT_CONFIG
# synonym (kafkawire.replication_quota enforces the first two).
REPLICATION_THROTTLE_CONFIGS: frozenset[str] = frozenset({
    "leader.replication.throttled.rate", "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
})

DYNAMIC_BROKER_CONFIGS: frozenset[str] = frozenset(
    names[0] for names in TOPIC_BROKER_SYNONYMS.values() if names[0] in BROKER_CONFIGS
) | frozenset(_RECONFIGURABLE) | SECURITY_DYNAMIC_CONFIGS | REPLICATION_THROTTLE_CONFIGS
PER_BROKER_CONFIGS: frozenset[str] = frozenset(
    k for k, per in _RECONFIGURABLE.items() if per) | SECURITY_DYNAMIC_CONFIGS

# Lowest (and highest) value Kafka's ConfigDef allows for the reconfigurable keys.
_BROKER_RANGES: dict[str, tuple[float, float | None]] = {
    "background.threads": (1, None), "group.consumer.assignment.interval.ms": (0, None),
    "group.coordinator.cached.buffer.max.bytes": (524288, None),
    "group.share.assignment.interval.ms": (0, None),
    "group.streams.assignment.interval.ms": (0, None), "log.cleaner.backoff.ms": (0, None),
    "log.cleaner.io.buffer.size": (0, None), "log.cleaner.threads": (0, None),
    "max.connection.creation.rate": (0, None), "max.connections": (0, None),
    "max.connections.per.ip": (0, None), "num.io.threads": (1, None),
    "num.network.threads": (1, None), "num.recovery.threads.per.data.dir": (1, None),
    "num.replica.fetchers": (1, None), "producer.id.expiration.ms": (1, None),
    "remote.fetch.max.wait.ms": (1, None), "remote.list.offsets.request.timeout.ms": (1, None),
    "remote.log.index.file.cache.total.size.bytes": (1, None),
    "remote.log.manager.copier.thread.pool.size": (1, None),
    "remote.log.manager.copy.max.bytes.per.second": (1, None),
    "remote.log.manager.expiration.thread.pool.size": (1, None),
    "remote.log.manager.fetch.max.bytes.per.second": (1, None),
    "remote.log.manager.follower.thread.pool.size": (1, None),
    "remote.log.reader.threads": (1, None),
    "share.coordinator.cached.buffer.max.bytes": (524288, None),
}
# Thread pools Kafka resizes at run time: a new size must stay within [current / 2, current * 2].
_THREAD_POOLS = ("background.threads", "num.io.threads", "num.network.threads",
                 "num.recovery.threads.per.data.dir")
_METRIC_REPORTERS = ("", "org.apache.kafka.common.metrics.JmxReporter")

TOPIC_DOCS: dict[str, str] = {
    "cleanup.policy": "How old segments are discarded: 'delete' by retention time/size, "
    "'compact' keeps the last record per key; both may be listed.",
    "compression.gzip.level": "Level used when compression.type is gzip (-1 = codec default).",
    "compression.lz4.level": "Level used when compression.type is lz4.",
    "compression.type": "Final compression of the topic's batches; 'producer' keeps what the "
    "producer sent.",
    "compression.zstd.level": "Level used when compression.type is zstd.",
    "delete.retention.ms": "How long delete markers (tombstones) are kept on compacted topics.",
    "file.delete.delay.ms": "Delay before a deleted segment file is removed from disk.",
    "flush.messages": "Force an fsync after this many messages.",
    "flush.ms": "Force an fsync after this many milliseconds.",
    "follower.replication.throttled.replicas": "Replicas throttled on the follower side.",
    "index.interval.bytes": "Bytes of records between two offset index entries.",
    "leader.replication.throttled.replicas": "Replicas throttled on the leader side.",
    "local.retention.bytes": "Local size limit with tiered storage (-2 = retention.bytes).",
    "local.retention.ms": "Local time limit with tiered storage (-2 = retention.ms).",
    "max.compaction.lag.ms": "Longest time a record stays uncompacted.",
    "max.message.bytes": "Largest record batch the topic accepts.",
    "message.timestamp.after.max.ms": "How far in the future a record timestamp may be.",
    "message.timestamp.before.max.ms": "How far in the past a record timestamp may be.",
    "message.timestamp.type": "CreateTime keeps the producer's timestamp, LogAppendTime uses "
    "the broker's clock.",
    "min.cleanable.dirty.ratio": "Dirty share of the log above which compaction runs.",
    "min.compaction.lag.ms": "Shortest time a record stays uncompacted.",
    "min.insync.replicas": "Replicas that must acknowledge an acks=all write.",
    "preallocate": "Preallocate segment files on creation.",
    "remote.log.copy.disable": "Stop copying segments to tiered storage.",
    "remote.log.delete.on.disable": "Delete tiered data when tiered storage is disabled.",
    "remote.storage.enable": "Tiered storage for the topic.",
    "retention.bytes": "Largest size of a partition before old segments are deleted (-1 = no "
    "limit).",
    "retention.ms": "Longest time a segment is kept before deletion (-1 = forever).",
    "segment.bytes": "Size at which a new segment file is rolled.",
    "segment.index.bytes": "Size of the offset and time index files.",
    "segment.jitter.ms": "Random jitter subtracted from segment.ms.",
    "segment.ms": "Time after which a new segment is rolled.",
    "unclean.leader.election.enable": "Allow an out-of-sync replica to become leader.",
}


@dataclass(frozen=True)
class Synonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    is_sensitive: bool
    config_type: ConfigType
    synonyms: tuple[Synonym, ...]
    documentation: str | None


def config_type(kind: str) -> ConfigType:
    return _TYPE_OF_KIND.get(kind, ConfigType.UNKNOWN)


# ---- broker layers --------------------------------------------------------------------------
def dynamic_broker_configs(image: MetadataImage, node_id: int) -> tuple[dict[str, str], dict[str, str]]:
    """(this broker's dynamic configs, the cluster-wide dynamic defaults)."""
    return (
        dict(image.configs.get((RESOURCE_BROKER, str(node_id)), {})),
        dict(image.configs.get((RESOURCE_BROKER, ""), {})),
    )


def effective_broker_config(config: BrokerConfig, image: MetadataImage) -> BrokerConfig:
    """``config`` with the dynamic broker configs of the image layered over it."""
    per_broker, default = dynamic_broker_configs(image, config.node_id)
    if not per_broker and not default:
        return config
    raw = dict(config.explicit)
    raw.update(default)
    raw.update(per_broker)
    return BrokerConfig.from_dict(raw)


def connection_limits(
    config: BrokerConfig, image: MetadataImage
) -> tuple[int, int, dict[str, int]]:
    """(``max.connections``, ``max.connections.per.ip``, per-address overrides from
    ``max.connections.per.ip.overrides``), dynamic broker configs included."""
    overrides: dict[str, int] = {}
    for item in str(broker_value(config, image, "max.connections.per.ip.overrides") or "").split(","):
        host, _, count = item.strip().rpartition(":")
        if host and count.strip().lstrip("-").isdigit():
            overrides[host.strip()] = int(count)
    return (int(broker_value(config, image, "max.connections")),
            int(broker_value(config, image, "max.connections.per.ip")), overrides)


def broker_value(config: BrokerConfig, image: MetadataImage, key: str) -> Any:
    """One broker config's typed value: this broker's dynamic config, the cluster default,
    else the static one (cheap: no whole ``BrokerConfig`` is rebuilt)."""
    for scope in (str(config.node_id), ""):
        raw = image.configs.get((RESOURCE_BROKER, scope), {}).get(key)
        if raw is not None:
            try:
                return parse_value(BROKER_CONFIGS[key][0], raw, key)
            except ConfigError:
                break
    return config.values[key]


def broker_layers(
    config: BrokerConfig, image: MetadataImage
) -> list[tuple[ConfigSource, Mapping[str, str | None]]]:
    per_broker, default = dynamic_broker_configs(image, config.node_id)
    static_defaults = {
        k: format_config_value(kind, d)
        for k, (kind, d) in (*BROKER_CONFIGS.items(), *KAFKA_ONLY_BROKER_CONFIGS.items())
        if d is not None and k not in NO_KAFKA_DEFAULT
    }
    return [
        (ConfigSource.DYNAMIC_BROKER_CONFIG, per_broker),
        (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, default),
        (ConfigSource.STATIC_BROKER_CONFIG, config.explicit),
        (ConfigSource.DEFAULT_CONFIG, static_defaults),
    ]


def broker_synonym_names(name: str) -> tuple[str, ...]:
    """Kafka's ``DynamicBrokerConfig.brokerConfigSynonyms`` for our broker keys."""
    for group in (
        ("log.roll.ms", "log.roll.hours"),
        ("log.roll.jitter.ms", "log.roll.jitter.hours"),
        ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    ):
        if name in group:
            return group
    if name == "log.flush.interval.ms":
        return ("log.flush.interval.ms", "log.flush.scheduler.interval.ms")
    return (name,)


def synonym_chain(
    primary: str, layers: list[tuple[ConfigSource, Mapping[str, str | None]]]
) -> list[Synonym]:
    names = broker_synonym_names(primary)
    chain = [
        Synonym(n, layer[n], source)
        for source, layer in layers
        for n in names
        if n in layer
    ]
    while chain and chain[0].name != primary:
        chain.pop(0)
    return chain


# ---- topic configs --------------------------------------------------------------------------
def topic_config_entries(
    config: BrokerConfig,
    image: MetadataImage,
    overrides: Mapping[str, str],
    include_synonyms: bool = False,
    include_documentation: bool = False,
    names: Iterable[str] | None = None,
) -> list[ConfigEntry]:
    """Every topic config (or ``names``) with its effective value, source and synonyms."""
    effective = effective_broker_config(config, image)
    layers = broker_layers(config, image)
    wanted = sorted(TOPIC_CONFIGS) if names is None else [n for n in names if n in TOPIC_CONFIGS]
    out: list[ConfigEntry] = []
    for name in wanted:
        kind, _default, _syn = TOPIC_CONFIGS[name]
        synonyms: list[Synonym] = []
        if name in overrides:
            value = format_config_value(kind, _parse_topic(name, overrides[name]))
            synonyms.append(Synonym(name, value, ConfigSource.DYNAMIC_TOPIC_CONFIG))
        else:
            value = format_config_value(kind, effective.topic_default(name)[0])
        broker_names = TOPIC_BROKER_SYNONYMS.get(name)
        if broker_names:
            synonyms.extend(synonym_chain(broker_names[0], layers))
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        out.append(
            ConfigEntry(
                name=name,
                value=value,
                source=source,
                read_only=False,
                is_sensitive=False,
                config_type=config_type(kind),
                synonyms=tuple(synonyms) if include_synonyms else (),
                documentation=TOPIC_DOCS.get(name) if include_documentation else None,
            )
        )
    return out


def _parse_topic(name: str, raw: str) -> Any:
    try:
        return validate_topic_config(name, raw)
    except ConfigError:
        # A stored override we cannot parse any more: report it verbatim.
        return raw


def effective_topic_values(
    config: BrokerConfig, image: MetadataImage, overrides: Mapping[str, str]
) -> dict[str, Any]:
    """Typed effective value of every topic config (what the partition logs use)."""
    effective = effective_broker_config(config, image)
    out: dict[str, Any] = {}
    for name, (kind, _d, _s) in TOPIC_CONFIGS.items():
        if name in overrides:
            try:
                out[name] = parse_value(kind, overrides[name], name)
            except ConfigError:
                out[name] = effective.topic_default(name)[0]
        else:
            out[name] = effective.topic_default(name)[0]
    # A broker config the partition logs use too (dynamically reconfigurable in Kafka).
    out["producer.id.expiration.ms"] = int(effective.values["producer.id.expiration.ms"])
    for name, (kind, _d, _s) in INTERNAL_TOPIC_CONFIGS.items():
        if name in overrides:
            try:
                out[name] = parse_value(kind, overrides[name], name)
            except ConfigError:
                pass
    return out


def validate_topic_overrides(configs: Mapping[str, str | None]) -> dict[str, str]:
    """Validate a full set of topic overrides; returns them normalized (Kafka's print form).

    Raises ``KafkaError(INVALID_CONFIG)`` with Kafka's message for the first bad entry.
    """
    nulls = [k for k, v in configs.items() if v is None]
    if nulls:
        raise KafkaError(
            ErrorCode.INVALID_CONFIG,
            "Null value not supported for topic configs: " + ",".join(nulls),
        )
    out: dict[str, str] = {}
    for name, raw in configs.items():
        assert raw is not None
        try:
            value = validate_topic_config(name, raw)
        except ConfigError as e:
            raise KafkaError(ErrorCode.INVALID_CONFIG, str(e)) from None
        kind = (TOPIC_CONFIGS.get(name) or INTERNAL_TOPIC_CONFIGS[name])[0]
        formatted = format_config_value(kind, value)
        out[name] = formatted if formatted is not None else raw
    return out


def apply_incremental(
    current: Mapping[str, str],
    ops: Iterable[tuple[str, int, str | None]],
    default_of: Mapping[str, str | None],
    kind_of: Mapping[str, str],
) -> dict[str, str | None]:
    """The overrides after SET/DELETE/APPEND/SUBTRACT ops (IncrementalAlterConfigs).

    APPEND/SUBTRACT work on LIST configs only and start from the current value, or the
    default when the key is not overridden (Kafka's ``ConfigurationControlManager``).
    Raises ``KafkaError`` with Kafka's code and message.
    """
    new: dict[str, str | None] = dict(current)
    for name, op, value in ops:
        if op == ConfigOp.SET:
            new[name] = value
        elif op == ConfigOp.DELETE:
            new.pop(name, None)
        elif op in (ConfigOp.APPEND, ConfigOp.SUBTRACT):
            verb = "APPEND" if op == ConfigOp.APPEND else "SUBTRACT"
            if kind_of.get(name) != "list":
                raise KafkaError(
                    ErrorCode.INVALID_CONFIG,
                    f"Can't {verb} to key {name} because its type is not LIST.",
                )
            base = (new[name] if name in new else default_of.get(name)) or ""
            items = [p.strip() for p in base.split(",") if p.strip()]
            args = [p.strip() for p in (value or "").split(",") if p.strip()]
            if op == ConfigOp.APPEND:
                items.extend(a for a in args if a not in items)
            else:
                items = [i for i in items if i not in args]
            new[name] = normalize_list(",".join(items))
        else:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown operation type {op}.")
    return new


def topic_defaults_as_strings(config: BrokerConfig, image: MetadataImage) -> dict[str, str | None]:
    """Each topic config's value without a topic override, as Kafka prints it."""
    effective = effective_broker_config(config, image)
    return {
        name: format_config_value(kind, effective.topic_default(name)[0])
        for name, (kind, _d, _s) in TOPIC_CONFIGS.items()
    }


# ---- broker configs -------------------------------------------------------------------------
def _broker_kind(name: str) -> str | None:
    """Kafka's ConfigDef type of a broker key (lower case), None for a key Kafka does not know."""
    if name in BROKER_CONFIGS:
        return BROKER_CONFIGS[name][0]
    if name in KAFKA_ONLY_BROKER_CONFIGS:
        return KAFKA_ONLY_BROKER_CONFIGS[name][0]
    if name in REPLICATION_THROTTLE_CONFIGS:
        return "long"
    return None


def _kafka_format(kind: str, raw: str | None, name: str) -> str | None:
    try:
        return format_config_value(kind, None if raw is None else parse_value(kind, raw, name))
    except ConfigError:
        return raw


def listener_base_key(name: str) -> str | None:
    """The broker key a ``listener.name.<listener>.<key>`` (or, for ``sasl.jaas.config``,
    ``listener.name.<listener>.<mechanism>.sasl.jaas.config``) overrides, if Kafka knows it."""
    if not name.startswith("listener.name."):
        return None
    rest = name[len("listener.name."):].partition(".")[2]
    if rest.endswith(".sasl.jaas.config"):
        return "sasl.jaas.config"
    return rest if _broker_kind(rest) is not None else None


def broker_config_entries(
    config: BrokerConfig,
    image: MetadataImage,
    per_broker: bool,
    include_synonyms: bool = False,
    include_documentation: bool = False,
    names: Iterable[str] | None = None,
) -> list[ConfigEntry]:
    """The broker resource's configs: this node's (``per_broker``) or the cluster default.

    For the cluster default (empty resource name) Kafka lists only the keys set as dynamic
    defaults; for a node, as Kafka's ``allConfigs``: every broker config Kafka 4.3.1 defines
    (``BROKER_CONFIGS`` less internal keys, ``KAFKA_ONLY_BROKER_CONFIGS``) with its effective
    value, plus every other key given in server.properties or set dynamically: a
    ``listener.name.<listener>.`` override with its base key's type and the base key's synonyms
    after its own, any other key with no value, sensitive, of type UNKNOWN (Kafka cannot know
    whether it holds a secret).
    """
    layers = broker_layers(config, image)
    effective = effective_broker_config(config, image)
    per, default = dynamic_broker_configs(image, config.node_id)
    known = ((BROKER_CONFIGS.keys() | KAFKA_ONLY_BROKER_CONFIGS.keys()) - INTERNAL_BROKER_CONFIGS
             | {k for k in (*per, *default) if k in REPLICATION_THROTTLE_CONFIGS})
    given = {*config.explicit, *config.unknown, *per, *default} - BROKER_CONFIGS.keys()
    listed = known | (given - KAFKA_ONLY_BROKER_CONFIGS.keys())
    keys = sorted(listed) if per_broker else sorted(k for k in default if k in listed)
    if names is not None:
        wanted = set(names)
        keys = [k for k in keys if k in wanted]
    out: list[ConfigEntry] = []
    for name in keys:
        base = None if name in known else listener_base_key(name)
        kind = _broker_kind(name) or (_broker_kind(base) if base is not None else None)
        chain = synonym_chain(name, layers)
        if base is not None:
            chain += synonym_chain(base, layers)
        sensitive = kind is None or kind == "password"
        if sensitive:  # Kafka never returns a password's value, nor its synonyms' values
            chain = [Synonym(s.name, None, s.source) for s in chain]
        if per_broker:
            if name in BROKER_CONFIGS:
                current = effective.values.get(name, per.get(name, default.get(name)))
                value = None if sensitive else format_config_value(kind or "string", current)
            else:  # as given (or Kafka's default), in Kafka's format
                raw = next((s.value for s in chain if s.name == name), None)
                value = None if sensitive or kind is None else _kafka_format(kind, raw, name)
        else:
            chain = [s for s in chain if s.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
            value = None if sensitive else default.get(name)
        out.append(
            ConfigEntry(
                name=name,
                value=value,
                source=chain[0].source if chain else ConfigSource.DEFAULT_CONFIG,
                read_only=name not in DYNAMIC_BROKER_CONFIGS,
                is_sensitive=sensitive,
                config_type=config_type(kind) if kind is not None else ConfigType.UNKNOWN,
                synonyms=tuple(chain) if include_synonyms else (),
                documentation=None,
            )
        )
    return out


def listener_security_key(name: str) -> bool:
    """``listener.name.<listener>.<ssl/sasl key>`` or ``...<mechanism>.sasl.jaas.config``."""
    if not name.startswith("listener.name."):
        return False
    rest = name[len("listener.name."):].partition(".")[2]
    return rest in SECURITY_DYNAMIC_CONFIGS or rest.endswith(".sasl.jaas.config")


def validate_broker_changes(
    new_configs: Mapping[str, str | None],
    config: BrokerConfig | None = None,
    image: MetadataImage | None = None,
    resource_name: str = "1",
) -> dict[str, str]:
    """Validate dynamic broker configs (the whole resource ``resource_name`` after the change;
    the empty name is the cluster default). Returns the values to store.

    Raises ``KafkaError`` like Kafka's ``DynamicBrokerConfig.validateConfigs`` (INVALID_REQUEST)
    and its controller's ELR checks (INVALID_CONFIG). With ``config`` and ``image`` the
    thread-pool sizes are checked against the current ones (at most double, at least half).
    """
    nulls = sorted(k for k, v in new_configs.items() if v is None)
    if nulls:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {nulls[0]}")
    refused = sorted(k for k in new_configs
                     if k not in DYNAMIC_BROKER_CONFIGS and not listener_security_key(k))
    if refused:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            "Cannot update these configs dynamically: [" + ", ".join(refused) + "]",
        )
    if not resource_name:
        per_broker = sorted(k for k in new_configs
                            if k in PER_BROKER_CONFIGS or listener_security_key(k))
        if per_broker:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                "Cannot update these configs at default cluster level, broker id must be "
                "specified: [" + ", ".join(per_broker) + "]",
            )
    out: dict[str, str] = {}
    for name, raw in new_configs.items():
        assert raw is not None
        if name in _TOPIC_OF_BROKER:
            out[name] = _validate_topic_synonym(name, raw)
        elif name in SECURITY_DYNAMIC_CONFIGS or listener_security_key(name):
            out[name] = raw
        elif name in REPLICATION_THROTTLE_CONFIGS:
            out[name] = _validate_throttle_rate(name, raw)
        else:
            _validate_reconfigurable(name, raw)
            out[name] = raw.strip()
    if config is not None and image is not None:
        _check_thread_pools(config, image, resource_name, out)
    return out


def check_elr_changes(
    image: MetadataImage, resource_name: str, old: Mapping[str, str], new: Mapping[str, str]
) -> None:
    """Kafka's controller under ELR (``eligible.leader.replicas.version`` >= 1): no
    per-broker ``min.insync.replicas``, and the cluster-wide one cannot be removed."""
    if image.features.get("eligible.leader.replicas.version", 0) < 1:
        return
    key = "min.insync.replicas"
    if resource_name and key in new and new.get(key) != old.get(key):
        raise KafkaError(ErrorCode.INVALID_CONFIG,
                         "Broker-level min.insync.replicas cannot be altered while ELR is "
                         "enabled.")
    if not resource_name and key in old and key not in new:
        raise KafkaError(ErrorCode.INVALID_CONFIG,
                         "Cluster-level min.insync.replicas cannot be removed while ELR is "
                         "enabled.")


def _validate_topic_synonym(name: str, raw: str) -> str:
    kind = BROKER_CONFIGS[name][0]
    topic_name = _TOPIC_OF_BROKER[name]
    try:
        value = validate_topic_config(topic_name, raw)
    except ConfigError as e:
        msg = str(e).replace(f"for configuration {topic_name}:", f"for configuration {name}:")
        raise KafkaError(ErrorCode.INVALID_REQUEST, msg) from None
    formatted = format_config_value(kind, value)
    return formatted if formatted is not None else raw


def _bad(name: str, raw: str, reason: str) -> KafkaError:  # Kafka's broker-side wording
    return KafkaError(ErrorCode.INVALID_REQUEST,
                      f"Invalid value {raw} for configuration {name}: {reason}")


def _dynamic_failure(reason: str) -> KafkaError:
    """How Kafka reports a reconfiguration its components refuse."""
    return KafkaError(
        ErrorCode.INVALID_REQUEST,
        f"Invalid value org.apache.kafka.common.config.ConfigException: {reason} for "
        "configuration Invalid dynamic configuration",
    )


def _validate_throttle_rate(name: str, raw: str) -> str:
    try:
        value = parse_typed(name, "long", raw)
    except ConfigError as e:
        raise KafkaError(ErrorCode.INVALID_REQUEST, str(e)) from None
    if value < 0:
        raise _bad(name, raw, "Value must be at least 0")
    return str(value)


def _validate_reconfigurable(name: str, raw: str) -> None:
    text = raw.strip()
    try:
        value = parse_typed(name, BROKER_CONFIGS[name][0], raw)
    except ConfigError as e:
        raise KafkaError(ErrorCode.INVALID_REQUEST, str(e)) from None
    bounds = _BROKER_RANGES.get(name)
    if bounds is not None:
        lo, hi = bounds
        if value < lo:
            raise _bad(name, raw, f"Value must be at least {int(lo)}")
        if hi is not None and value > hi:
            raise _bad(name, raw, f"Value must be no more than {int(hi)}")
    if name == "max.connections.per.ip.overrides":
        for item in (p.strip() for p in text.split(",") if p.strip()):
            count = item.rpartition(":")[2].strip()
            if not count.lstrip("-").isdigit():
                raise KafkaError(ErrorCode.INVALID_REQUEST, f'For input string: "{count}"')
    if name == "metric.reporters" and any(
        c not in _METRIC_REPORTERS for c in normalize_list(text).split(",")
    ):
        raise _dynamic_failure(
            "Validation of dynamic config update of Set(metric.reporters) failed with class "
            "class kafka.server.DynamicMetricsReporters"
        )


def _check_thread_pools(
    config: BrokerConfig, image: MetadataImage, resource_name: str, new: Mapping[str, str]
) -> None:
    per_broker, _default = dynamic_broker_configs(image, config.node_id)
    current = effective_broker_config(config, image).values
    for name in _THREAD_POOLS:
        if name not in new:
            continue
        if not resource_name and name in per_broker:
            continue  # this broker keeps its own value
        cur, want = int(current[name]), int(new[name])
        if want == cur:
            continue
        if want > cur * 2:
            raise _dynamic_failure(
                f"Dynamic thread count update validation failed for {name}={want}, value "
                f"should not be greater than double the current value {cur}")
        if want < cur // 2:
            raise _dynamic_failure(
                f"Dynamic thread count update validation failed for {name}={want}, value "
                f"should be at least half the current value {cur}")
