"""Group configs (resource type 32, KIP-848) and client-metrics subscriptions (type 16, KIP-714).

Both are stored as KRaft ``ConfigRecord``s of their resource type in ``__cluster_metadata``
(replayed into ``MetadataImage.configs`` on restart), changed by IncrementalAlterConfigs and
legacy AlterConfigs (full replacement, as Kafka 4.3.1 does for both types), described by
DescribeConfigs and listed by ListConfigResources.

**Group configs** (Kafka's ``GroupConfig``): ``consumer.*``, ``share.*`` and ``streams.*``
keys. A key not set on the group reports the broker config it falls back to
(``consumer.session.timeout.ms`` -> ``group.consumer.session.timeout.ms``...) with that
config's source; a group override has source ``DYNAMIC_GROUP_CONFIG`` (8). Validation as
Kafka's: an unknown key is INVALID_CONFIG "Unknown group config name: x"; then the value's
type and ``ConfigDef`` range ("Invalid value -1 for configuration ...: Value must be at least
1"); then the broker's bounds ("consumer.session.timeout.ms must be greater than or equal to
group.consumer.min.session.timeout.ms"). An empty group name is INVALID_REQUEST. Configs
outlive the group: deleting a group leaves them, as Kafka 4.3.1 does (checked against it).
The KIP-848 coordinator reads ``consumer.session.timeout.ms``,
``consumer.heartbeat.interval.ms`` and ``consumer.assignment.interval.ms`` of the group at each
heartbeat (``group_consumer_settings``); the share and streams keys are stored and reported
only (kafkawire has no share or streams groups).

**Client metrics** (Kafka's ``ClientMetricsConfigs``): ``metrics``, ``interval.ms`` and
``match``. Unknown key: INVALID_REQUEST "Unknown client metrics configuration: x";
``interval.ms`` outside 100..3600000: INVALID_REQUEST; a ``match`` entry that is not
``selector=regex`` with a known selector and a valid regular expression: INVALID_CONFIG
"Illegal client matching pattern: x". Set keys report source ``CLIENT_METRICS_CONFIG`` (7),
unset ones ``DEFAULT_CONFIG``. kafkawire has no ClientTelemetryReceiver (neither has Kafka by
default), so GetTelemetrySubscriptions/PushTelemetry stay unadvertised and the subscriptions
are stored and reported only. Like Kafka's controller, APPEND/SUBTRACT are refused for every
key of both types ("Can't APPEND to key metrics because its type is not LIST.").

Everything here is pure: it reads a ``BrokerConfig`` and a ``MetadataImage``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from kafkawire.config import broker_config as config
from kafkawire.config.broker_config import BrokerConfig, ConfigError
from kafkawire.config.entries import (
    ConfigEntry,
    ConfigSource,
    Synonym,
    broker_layers,
    config_type,
    effective_broker_config,
    synonym_chain,
)
from kraft.image import RESOURCE_BROKER, RESOURCE_CLIENT_METRICS, RESOURCE_GROUP, MetadataImage
from protocol.errors import ErrorCode, KafkaError

# name -> (type, default, lowest allowed by the ConfigDef, broker synonym or None)
GROUP_CONFIGS: dict[str, tuple[str, Any, int | None, str | None]] = {
    "consumer.assignment.interval.ms": ("int", 1000, 0, "group.consumer.assignment.interval.ms"),
    "consumer.heartbeat.interval.ms": ("int", 5000, 1, "group.consumer.heartbeat.interval.ms"),
    "consumer.session.timeout.ms": ("int", 45000, 1, "group.consumer.session.timeout.ms"),
    "share.assignment.interval.ms": ("int", 1000, 0, "group.share.assignment.interval.ms"),
    "share.auto.offset.reset": ("string", "latest", None, None),
    "share.delivery.count.limit": ("int", 5, 2, "group.share.delivery.count.limit"),
    "share.heartbeat.interval.ms": ("int", 5000, 1, "group.share.heartbeat.interval.ms"),
    "share.isolation.level": ("string", "read_uncommitted", None, None),
    "share.partition.max.record.locks": ("int", 2000, 100,
                                         "group.share.partition.max.record.locks"),
    "share.record.lock.duration.ms": ("int", 30000, 1000, "group.share.record.lock.duration.ms"),
    "share.renew.acknowledge.enable": ("boolean", True, None, None),
    "share.session.timeout.ms": ("int", 45000, 1, "group.share.session.timeout.ms"),
    # kafkawire extension (docs/SHARE_GROUPS.md): where records archived at the delivery limit
    # are copied; empty = nowhere (Kafka 4.3 has no dead-letter queue)
    "kafkawire.share.dead.letter.topic": ("string", "", None, None),
    "streams.assignment.interval.ms": ("int", 1000, 0, "group.streams.assignment.interval.ms"),
    "streams.heartbeat.interval.ms": ("int", 5000, 1, "group.streams.heartbeat.interval.ms"),
    "streams.initial.rebalance.delay.ms": ("int", 3000, 0,
                                           "group.streams.initial.rebalance.delay.ms"),
    "streams.num.standby.replicas": ("int", 0, 0, "group.streams.num.standby.replicas"),
    "streams.session.timeout.ms": ("int", 45000, 1, "group.streams.session.timeout.ms"),
}

# Group config -> (broker config of its lower bound or None, of its upper bound or None).
_GROUP_BOUNDS: dict[str, tuple[str | None, str | None]] = {
    f"{kind}.{what}": (f"group.{kind}.min.{what}", f"group.{kind}.max.{what}")
    for kind in ("consumer", "share", "streams")
    for what in ("session.timeout.ms", "heartbeat.interval.ms", "assignment.interval.ms")
}
_GROUP_BOUNDS.update({
    "share.record.lock.duration.ms": ("group.share.min.record.lock.duration.ms",
                                      "group.share.max.record.lock.duration.ms"),
    "share.delivery.count.limit": ("group.share.min.delivery.count.limit",
                                   "group.share.max.delivery.count.limit"),
    "share.partition.max.record.locks": ("group.share.min.partition.max.record.locks",
                                         "group.share.max.partition.max.record.locks"),
    "streams.num.standby.replicas": (None, "group.streams.max.standby.replicas"),
})

#: our own group configs: listed by a describe-all only when set (Kafka has no such keys)
EXTENSION_PREFIX = "kafkawire."

_CHOICES = {"share.isolation.level": ("read_committed", "read_uncommitted")}
_DURATION = re.compile(
    r"P(?:\d+D)?(?:T(?:\d+H)?(?:\d+M)?(?:\d+(?:\.\d+)?S)?)?", re.IGNORECASE
)

CLIENT_METRICS_CONFIGS: dict[str, tuple[str, str]] = {
    "interval.ms": ("int", "300000"),
    "match": ("list", ""),
    "metrics": ("list", ""),
}
CLIENT_METRICS_INTERVAL_MS = (100, 3_600_000)  # Kafka's bounds of interval.ms
CLIENT_MATCH_SELECTORS = frozenset({
    "client_instance_id", "client_id", "client_software_name", "client_software_version",
    "client_source_address", "client_source_port",
})


def _invalid(name: str, raw: str, reason: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_CONFIG,
                      f"Invalid value {raw} for configuration {name}: {reason}")


def parse_typed(name: str, kind: str, raw: str) -> Any:
    """A value parsed like Kafka's ``ConfigDef`` (INVALID_CONFIG with its messages)."""
    try:
        return config.parse_typed(name, kind, raw)
    except ConfigError as e:
        raise KafkaError(ErrorCode.INVALID_CONFIG, str(e)) from None


# ---- group configs --------------------------------------------------------------------------
def validate_group_configs(config: BrokerConfig, image: MetadataImage,
                           configs: Mapping[str, str | None]) -> dict[str, str]:
    """A group's complete set of overrides, validated (Kafka's ``GroupConfig.validate``)."""
    for name in configs:
        if name not in GROUP_CONFIGS:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown group config name: {name}")
    broker = effective_broker_config(config, image).values
    out: dict[str, str] = {}
    for name, raw in configs.items():
        assert raw is not None
        kind, _default, lowest, _syn = GROUP_CONFIGS[name]
        value = parse_typed(name, kind, raw)
        if lowest is not None and value < lowest:
            raise _invalid(name, raw, f"Value must be at least {lowest}")
        if name in _CHOICES and value not in _CHOICES[name]:
            raise _invalid(name, raw, "String must be one of: " + ", ".join(_CHOICES[name]))
        if name == "share.auto.offset.reset":
            _check_auto_offset_reset(name, raw)
        low_key, high_key = _GROUP_BOUNDS.get(name, (None, None))
        if low_key is not None and value < int(broker[low_key]):
            raise KafkaError(ErrorCode.INVALID_CONFIG,
                             f"{name} must be greater than or equal to {low_key}")
        if high_key is not None and value > int(broker[high_key]):
            raise KafkaError(ErrorCode.INVALID_CONFIG,
                             f"{name} must be less than or equal to {high_key}")
        out[name] = _format(kind, value) or ""
    return out


def _check_auto_offset_reset(name: str, raw: str) -> None:
    text = raw.strip().lower()
    if text in ("earliest", "latest"):
        return
    if text.startswith("by_duration:"):
        duration = raw.strip()[len("by_duration:"):]
        if duration and not duration.startswith("-") and _DURATION.fullmatch(duration) \
                and duration.upper() not in ("P", "PT"):
            return
    raise _invalid(name, raw, f"Invalid value `{raw}` for configuration {name}. The value "
                   "must be either 'earliest', 'latest' or of the format "
                   "'by_duration:<PnDTnHnMn.nS>'.")


def group_config_entries(
    config: BrokerConfig, image: MetadataImage, group: str,
    include_synonyms: bool = False, names: Iterable[str] | None = None,
) -> list[ConfigEntry]:
    """Every group config (or ``names``) of ``group``: its override or the broker default."""
    if not group:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Group name must not be empty")
    overrides = image.configs.get((RESOURCE_GROUP, group), {})
    layers = broker_layers(config, image)
    effective = effective_broker_config(config, image).values
    wanted = sorted(n for n in GROUP_CONFIGS if not n.startswith(EXTENSION_PREFIX)
                    or n in overrides) if names is None else [
        n for n in names if n in GROUP_CONFIGS]
    out: list[ConfigEntry] = []
    for name in wanted:
        kind, default, _low, syn = GROUP_CONFIGS[name]
        chain: list[Synonym] = []
        if name in overrides:
            chain.append(Synonym(name, overrides[name], ConfigSource.GROUP_CONFIG))
        if syn is not None:
            chain.extend(synonym_chain(syn, layers))
            fallback = _format(kind, effective.get(syn, default))
        else:
            fallback = _format(kind, default)
            chain.append(Synonym(name, fallback, ConfigSource.DEFAULT_CONFIG))
        value = overrides[name] if name in overrides else fallback
        out.append(ConfigEntry(
            name=name, value=value,
            source=chain[0].source if chain else ConfigSource.DEFAULT_CONFIG,
            read_only=False, is_sensitive=False, config_type=config_type(kind),
            synonyms=tuple(chain) if include_synonyms else (), documentation=None,
        ))
    return out


def _format(kind: str, value: Any) -> str | None:
    if value is None:
        return None
    if kind == "boolean":
        return "true" if value else "false"
    return str(value)


def group_consumer_settings(config: BrokerConfig, image: MetadataImage,
                            group: str) -> dict[str, int]:
    """The KIP-848 settings a consumer group runs with: its group configs, else the dynamic
    broker default of ``group.consumer.assignment.interval.ms``, else the coordinator's."""
    out: dict[str, int] = {}
    for scope in ((RESOURCE_BROKER, ""), (RESOURCE_BROKER, str(config.node_id))):
        raw = image.configs.get(scope, {}).get("group.consumer.assignment.interval.ms")
        if raw is not None:
            out["consumer.assignment.interval.ms"] = int(raw)
    for name, raw in image.configs.get((RESOURCE_GROUP, group), {}).items():
        if name.startswith("consumer."):
            try:
                out[name] = int(raw)
            except ValueError:
                continue
    return out


# ---- client metrics -------------------------------------------------------------------------
def validate_client_metrics(configs: Mapping[str, str | None]) -> dict[str, str]:
    """A subscription's complete set of configs, validated (``ClientMetricsConfigs.validate``)."""
    for name in configs:
        if name not in CLIENT_METRICS_CONFIGS:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"Unknown client metrics configuration: {name}")
    out: dict[str, str] = {}
    for name, raw in configs.items():
        assert raw is not None
        kind = CLIENT_METRICS_CONFIGS[name][0]
        value = parse_typed(name, kind, raw)
        if name == "interval.ms":
            low, high = CLIENT_METRICS_INTERVAL_MS
            if not low <= value <= high:
                raise KafkaError(
                    ErrorCode.INVALID_REQUEST,
                    f"Invalid value {raw.strip()} for interval.ms, interval must be between "
                    f"{low} and {high} (1 hour)")
        if name == "match":
            for item in (p for p in str(value).split(",") if p):
                _check_match(item)
        out[name] = str(value)
    return out


def _check_match(item: str) -> None:
    selector, eq, pattern = item.partition("=")
    ok = bool(eq) and selector.strip() in CLIENT_MATCH_SELECTORS and bool(pattern.strip())
    if ok:
        try:
            re.compile(pattern.strip())
        except re.error:
            ok = False
    if not ok:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {item}")


def client_metrics_entries(
    image: MetadataImage, name: str, include_synonyms: bool = False,
    names: Iterable[str] | None = None,
) -> list[ConfigEntry]:
    if not name:
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         "Client metrics subscription name must not be empty")
    current = image.configs.get((RESOURCE_CLIENT_METRICS, name), {})
    wanted = sorted(CLIENT_METRICS_CONFIGS) if names is None else [
        n for n in names if n in CLIENT_METRICS_CONFIGS]
    out: list[ConfigEntry] = []
    for key in wanted:
        kind, default = CLIENT_METRICS_CONFIGS[key]
        if key in current:
            value, source = current[key], ConfigSource.CLIENT_METRICS_CONFIG
            chain: tuple[Synonym, ...] = (Synonym(key, value, source),)
        else:
            value, source, chain = default, ConfigSource.DEFAULT_CONFIG, ()
        out.append(ConfigEntry(
            name=key, value=value, source=source, read_only=False, is_sensitive=False,
            config_type=config_type(kind), synonyms=chain if include_synonyms else (),
            documentation=None,
        ))
    return out
