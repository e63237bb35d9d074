"""DescribeConfigs (key 32), versions 1-4.

- TOPIC (2): every topic config kafkawire knows (``kafkawire.config.TOPIC_CONFIGS``, Kafka's
  LogConfig names), sorted by name, with its effective value, ``read_only`` false, its source
  (DYNAMIC_TOPIC_CONFIG 1 for an override, DYNAMIC_BROKER_CONFIG 2 / DYNAMIC_DEFAULT_BROKER_CONFIG
  3 for a dynamic broker synonym, STATIC_BROKER_CONFIG 4 when the broker synonym is set in
  server.properties, DEFAULT_CONFIG 5 otherwise) and, with ``include_synonyms``, Kafka's synonym
  chain (see ``kafkawire.config_entries``). Connect and Streams read ``cleanup.policy`` this way.
  An illegal name: INVALID_TOPIC_EXCEPTION; an unknown topic: UNKNOWN_TOPIC_OR_PARTITION.
- BROKER (4): the resource named by this node id lists every broker config Kafka 4.3.1 defines
  (``kafkawire.config.BROKER_CONFIGS`` and ``kafkawire.broker_config_keys``) with its value
  (STATIC_BROKER_CONFIG when set explicitly, dynamic sources when altered at run time,
  DEFAULT_CONFIG otherwise; ``read_only`` unless it can change at run time), plus every other
  key of server.properties as Kafka lists them (``listener.name.`` overrides typed as their base
  key, unknown keys sensitive and of type UNKNOWN); the empty name is
  the cluster-wide dynamic default and lists only what was set there. Another id or a
  non-number: INVALID_REQUEST with Kafka's messages.
- BROKER_LOGGER (8): this node's Python loggers with their levels in log4j names (source
  DYNAMIC_BROKER_LOGGER_CONFIG); the empty name or another id: INVALID_REQUEST.
- CLIENT_METRICS (16): the subscription's ``metrics``, ``interval.ms``, ``match`` (set ones
  CLIENT_METRICS_CONFIG 7, others DEFAULT_CONFIG); GROUP (32): every group config, the group's
  override (DYNAMIC_GROUP_CONFIG 8) or its broker synonym's value (see
  ``kafkawire.config_resources``). An empty name: INVALID_REQUEST with Kafka's message; a
  group or subscription without configs answers the defaults, as Kafka.
- ``error_message`` is "" on success and for an unknown topic, as Kafka sends it.
- ``configuration_keys`` null or empty = all; otherwise only those keys (unknown ones are
  simply absent, as in Kafka).
- v3+: ``config_type`` (Kafka's ConfigType ids) and ``documentation`` (a short text of ours
  for topic configs when ``include_documentation``, else null).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kafkawire.authorizer import check_config_resource
from kafkawire.config_entries import (
    ConfigEntry,
    ConfigSource,
    ConfigType,
    broker_config_entries,
    topic_config_entries,
)
from kafkawire.config_resources import client_metrics_entries, group_config_entries
from kraft.acls import DESCRIBE_CONFIGS
from kraft.controller import validate_topic_name
from kraft.image import RESOURCE_BROKER, RESOURCE_CLIENT_METRICS, RESOURCE_GROUP, RESOURCE_TOPIC
from protocol._generated.describe_configs_request import DescribeConfigsRequest
from protocol._generated.describe_configs_response import DescribeConfigsResponse
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.server import RequestContext

API_KEY = 32
VERSIONS = (1, 4)

RESOURCE_BROKER_LOGGER = 8
RESOURCE_NAMES = {0: "UNKNOWN", 2: "TOPIC", 4: "BROKER", 8: "BROKER_LOGGER",
                  16: "CLIENT_METRICS", 32: "GROUP"}

Result = DescribeConfigsResponse.DescribeConfigsResult
Entry = DescribeConfigsResponse.DescribeConfigsResourceResult
Synonym = DescribeConfigsResponse.DescribeConfigsSynonym

_LOG4J_LEVELS = {
    logging.DEBUG: "DEBUG", logging.INFO: "INFO", logging.WARNING: "WARN",
    logging.ERROR: "ERROR", logging.CRITICAL: "FATAL",
}


def to_wire(e: ConfigEntry) -> Entry:
    return Entry(
        name=e.name,
        value=None if e.is_sensitive else e.value,
        read_only=e.read_only,
        config_source=int(e.source),
        is_sensitive=e.is_sensitive,
        synonyms=[Synonym(name=s.name, value=s.value, source=int(s.source)) for s in e.synonyms],
        config_type=int(e.config_type),
        documentation=e.documentation,
    )


def broker_id_of(resource_name: str) -> int:
    try:
        return int(resource_name)
    except ValueError:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            f"Broker id must be an integer, but it is: {resource_name}",
        ) from None


def logger_entries() -> list[ConfigEntry]:
    """This process's loggers with their effective levels, log4j style ('root' first)."""
    names = sorted(
        n for n, lg in logging.root.manager.loggerDict.items() if isinstance(lg, logging.Logger)
    )
    out = []
    for name in ["root", *names]:
        lg = logging.getLogger() if name == "root" else logging.getLogger(name)
        level = lg.getEffectiveLevel()
        out.append(ConfigEntry(
            name=name,
            value=_LOG4J_LEVELS.get(level, logging.getLevelName(level)),
            source=ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG,
            read_only=False,
            is_sensitive=False,
            config_type=ConfigType.UNKNOWN,
            synonyms=(),
            documentation=None,
        ))
    return out


def describe_resource(
    broker: Broker, res: DescribeConfigsRequest.DescribeConfigsResource,
    include_synonyms: bool, include_documentation: bool,
) -> list[ConfigEntry]:
    keys = res.configuration_keys or None
    name = res.resource_name
    if res.resource_type == RESOURCE_TOPIC:
        validate_topic_name(name)
        image = broker.image
        if name not in image.topics:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return topic_config_entries(
            broker.config, image, image.topic_config(name),
            include_synonyms, include_documentation, keys,
        )
    if res.resource_type == RESOURCE_BROKER:
        if name and broker_id_of(name) != broker.node_id:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                f"Unexpected broker id, expected {broker.node_id} or empty string, but "
                f"received {name}",
            )
        return broker_config_entries(
            broker.config, broker.image, bool(name),
            include_synonyms, include_documentation, keys,
        )
    if res.resource_type == RESOURCE_BROKER_LOGGER:
        if not name:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
        if broker_id_of(name) != broker.node_id:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                f"Unexpected broker id, expected {broker.node_id} but received {name}",
            )
        entries = logger_entries()
        return entries if keys is None else [e for e in entries if e.name in keys]
    if res.resource_type == RESOURCE_GROUP:
        return group_config_entries(broker.config, broker.image, name, include_synonyms, keys)
    if res.resource_type == RESOURCE_CLIENT_METRICS:
        return client_metrics_entries(broker.image, name, include_synonyms, keys)
    type_name = RESOURCE_NAMES.get(res.resource_type)
    if type_name is None:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            f"Unexpected resource type UNKNOWN for resource {name}",
        )
    raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {type_name}")


async def handle(
    broker: Broker, ctx: RequestContext, req: DescribeConfigsRequest
) -> DescribeConfigsResponse:
    v = ctx.api_version
    include_docs = v >= 3 and req.include_documentation
    results: list[Result] = []
    for res in req.resources:
        try:
            denied = check_config_resource(ctx, DESCRIBE_CONFIGS, res.resource_type,
                                           res.resource_name)
            if denied is not None:
                raise denied
            entries = describe_resource(broker, res, req.include_synonyms, include_docs)
        except KafkaError as e:
            results.append(Result(
                error_code=e.code, error_message=e.message if e.message is not None else "",
                resource_type=res.resource_type,
                resource_name=res.resource_name, configs=[],
            ))
            continue
        results.append(Result(
            error_code=ErrorCode.NONE, error_message="", resource_type=res.resource_type,
            resource_name=res.resource_name, configs=[to_wire(e) for e in entries],
        ))
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)
