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

Dynamic broker configs: only the broker properties that are topic-config synonyms can be
changed at run time here (they feed the topic defaults); every other key is refused the way
Kafka refuses static keys (``INVALID_REQUEST``, ``Cannot update these configs dynamically``).

Everything here is pure: it reads a ``BrokerConfig`` and a ``MetadataImage``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

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

# Broker properties that may change at run time here: the highest-priority broker synonym of
# each topic config (Kafka's DynamicLogConfig; ``log.retention.hours`` and the other unit
# variants stay read-only, as in Kafka).
DYNAMIC_BROKER_CONFIGS: frozenset[str] = frozenset(
    names[0] for names in TOPIC_BROKER_SYNONYMS.values() if names[0] in BROKER_CONFIGS
)

# Broker properties Kafka can also change at run time but kafkawire applies only at start;
# they are reported read-only=false like Kafka but altering them is refused.
_KAFKA_DYNAMIC_ONLY: frozenset[str] = frozenset({
    "num.io.threads", "num.network.threads", "num.recovery.threads.per.data.dir",
    "max.connections", "listeners", "advertised.listeners", "listener.security.protocol.map",
    "log.cleaner.backoff.ms", "producer.id.expiration.ms", "sasl.jaas.config",
})

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


def _broker_layers(
    config: BrokerConfig, image: MetadataImage
) -> list[tuple[ConfigSource, Mapping[str, str | None]]]:
    per_broker, default = dynamic_broker_configs(image, config.node_id)
    static_defaults = {
        k: format_config_value(kind, d)
        for k, (kind, d) in BROKER_CONFIGS.items()
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


def _synonym_chain(
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
    layers = _broker_layers(config, image)
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
            synonyms.extend(_synonym_chain(broker_names[0], layers))
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
    defaults; for a node, every broker config with its effective value.
    """
    layers = _broker_layers(config, image)
    effective = effective_broker_config(config, image)
    _per, default = dynamic_broker_configs(image, config.node_id)
    listed = BROKER_CONFIGS.keys() - INTERNAL_BROKER_CONFIGS
    keys = sorted(listed) if per_broker else sorted(k for k in default if k in listed)
    if names is not None:
        wanted = set(names)
        keys = [k for k in keys if k in wanted]
    out: list[ConfigEntry] = []
    for name in keys:
        kind, _d = BROKER_CONFIGS[name]
        chain = _synonym_chain(name, layers)
        sensitive = kind == "password"
        if sensitive:  # Kafka never returns a password's value, nor its synonyms' values
            chain = [Synonym(s.name, None, s.source) for s in chain]
        if per_broker:
            value = None if sensitive else format_config_value(kind, effective.values.get(name))
        else:
            chain = [s for s in chain if s.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
            value = None if sensitive else default.get(name)
        out.append(
            ConfigEntry(
                name=name,
                value=value,
                source=chain[0].source if chain else ConfigSource.DEFAULT_CONFIG,
                read_only=name not in DYNAMIC_BROKER_CONFIGS and name not in _KAFKA_DYNAMIC_ONLY,
                is_sensitive=sensitive,
                config_type=config_type(kind),
                synonyms=tuple(chain) if include_synonyms else (),
                documentation=None,
            )
        )
    return out


def validate_broker_changes(new_configs: Mapping[str, str | None]) -> dict[str, str]:
    """Validate dynamic broker configs (the whole resource after the change).

    Raises ``KafkaError(INVALID_REQUEST)`` like Kafka's ``DynamicBrokerConfig.validateConfigs``.
    """
    nulls = sorted(k for k, v in new_configs.items() if v is None)
    if nulls:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {nulls[0]}")
    refused = sorted(k for k in new_configs if k not in DYNAMIC_BROKER_CONFIGS)
    if refused:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            "Cannot update these configs dynamically: [" + ", ".join(refused) + "]",
        )
    out: dict[str, str] = {}
    for name, raw in new_configs.items():
        assert raw is not None
        kind = BROKER_CONFIGS[name][0]
        topic_name = _TOPIC_OF_BROKER[name]
        try:
            value = validate_topic_config(topic_name, raw)
        except ConfigError as e:
            msg = str(e).replace(f"for configuration {topic_name}:", f"for configuration {name}:")
            raise KafkaError(ErrorCode.INVALID_REQUEST, msg) from None
        formatted = format_config_value(kind, value)
        out[name] = formatted if formatted is not None else raw
    return out
