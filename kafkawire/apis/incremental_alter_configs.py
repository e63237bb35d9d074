"""IncrementalAlterConfigs (key 44), versions 0-1.

- Operations per key: SET (0), DELETE (1, removes the override; deleting an absent key is a
  no-op), APPEND (2) and SUBTRACT (3) for LIST configs, starting from the current override or
  the default when there is none (``cleanup.policy`` APPEND ``compact`` on a default topic gives
  ``delete,compact``). APPEND/SUBTRACT on another type: INVALID_CONFIG "Can't APPEND to key x
  because its type is not LIST.". A key named twice in one resource: INVALID_REQUEST "Error due
  to duplicate config keys"; a null value for anything but DELETE: INVALID_REQUEST "Null value
  not supported for : x"; an unknown operation: UNKNOWN_SERVER_ERROR (as Kafka).
- TOPIC (2): the resulting overrides are validated as a whole (INVALID_CONFIG with Kafka's
  messages); name checks as in AlterConfigs.
- BROKER (4): this node's id or the empty name (cluster-wide default; a broker that forwards
  checks the id itself and the controller then takes any node's id); Kafka's reconfigurable
  broker keys may change (see AlterConfigs; INVALID_REQUEST "Cannot update these configs
  dynamically: [...]" otherwise).
- GROUP (32), CLIENT_METRICS (16): validated as in ``kafkawire.config.resources``; APPEND and
  SUBTRACT are refused for all their keys, as Kafka's controller does.
- BROKER_LOGGER (8): SET/DELETE a Python logger's level (log4j level names; DELETE resets it to
  the root level), for this node only, applied at once and not persisted (as in Kafka).
- A resource named twice: INVALID_REQUEST "Duplicate resource."; an unknown type id:
  INVALID_REQUEST "Unknown resource type N". ``validate_only`` commits nothing.
- Changes are ConfigRecords through the metadata quorum; afterwards the affected partition
  logs get their new LogConfig (see AlterConfigs).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kafkawire.apis.alter_configs import (
    RESOURCE_BROKER_LOGGER,
    Outcome,
    apply_outcomes,
    broker_outcome,
    check_broker_resource,
    check_named,
    check_topic_resource,
    diff_records,
    forward_preprocessed,
    forwarded,
    guarded,
    refuse_nulls,
    resource_outcome,
)
from kafkawire.config.broker_config import BROKER_CONFIGS, TOPIC_CONFIGS, format_config_value
from kafkawire.config.entries import (
    ConfigOp,
    apply_incremental,
    topic_defaults_as_strings,
    validate_topic_overrides,
)
from kafkawire.security.authorizer import check_config_resource
from kraft.acls import ALTER_CONFIGS
from kraft.image import (
    RESOURCE_BROKER,
    RESOURCE_CLIENT_METRICS,
    RESOURCE_GROUP,
    RESOURCE_TOPIC,
    MetadataImage,
)
from protocol._generated.incremental_alter_configs_request import (
    IncrementalAlterConfigsRequest,
)
from protocol._generated.incremental_alter_configs_response import (
    IncrementalAlterConfigsResponse,
)
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.config.broker_config import BrokerConfig
    from kafkawire.net.server import RequestContext

API_KEY = 44
VERSIONS = (0, 1)

Ops = list[tuple[str, int, str | None]]

LOG4J_LEVELS = {
    "DEBUG": logging.DEBUG, "ERROR": logging.ERROR, "FATAL": logging.CRITICAL,
    "INFO": logging.INFO, "TRACE": 5, "WARN": logging.WARNING,
}


def ops_of(body: Any) -> Ops:
    ops: Ops = [(c.name, c.config_operation, c.value) for c in body]
    names = [n for n, _op, _v in ops]
    if len(set(names)) != len(names):
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    for _name, op, _v in ops:
        if op not in tuple(ConfigOp):
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR)  # what Kafka answers
    refuse_nulls([(n, v) for n, op, v in ops if op != ConfigOp.DELETE])
    return ops


def plan_topic(config: BrokerConfig, image: MetadataImage, name: str, ops: Ops) -> Outcome:
    check_topic_resource(image, name)
    old = dict(image.topic_config(name))
    kinds = {k: kind for k, (kind, _d, _s) in TOPIC_CONFIGS.items()}
    new = apply_incremental(old, ops, topic_defaults_as_strings(config, image), kinds)
    valid = validate_topic_overrides(new)
    return Outcome(RESOURCE_TOPIC, name, records=diff_records(RESOURCE_TOPIC, name, old, valid),
                   refresh=[name])


def plan_broker(config: BrokerConfig, image: MetadataImage, name: str, ops: Ops,
                any_node: bool = False) -> Outcome:
    check_broker_resource(config.node_id, name, any_node=any_node)
    old = dict(image.configs.get((RESOURCE_BROKER, name), {}))
    kinds = {k: kind for k, (kind, _d) in BROKER_CONFIGS.items()}
    defaults = {k: format_config_value(kind, d) for k, (kind, d) in BROKER_CONFIGS.items()}
    defaults.update({k: v for k, v in config.explicit.items() if k in BROKER_CONFIGS})
    return broker_outcome(config, image, name, apply_incremental(old, ops, defaults, kinds))


def plan_resource(
    config: BrokerConfig, image: MetadataImage, rtype: int, name: str, ops: Ops
) -> Outcome:
    """GROUP / CLIENT_METRICS: no key of theirs is a LIST to Kafka's controller."""
    check_named(rtype, name)
    old = dict(image.configs.get((rtype, name), {}))
    return resource_outcome(config, image, rtype, name, apply_incremental(old, ops, {}, {}))


def apply_logger_ops(node_id: int, name: str, ops: Ops, validate_only: bool) -> None:
    """Set logger levels at once (never persisted, as Kafka's BROKER_LOGGER)."""
    check_broker_resource(node_id, name, allow_default=False)
    changes: list[tuple[logging.Logger, int | None]] = []
    known = logging.root.manager.loggerDict
    for logger_name, op, value in ops:
        if logger_name != "root" and logger_name not in known:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Logger {logger_name} does not exist!")
        lg = logging.getLogger() if logger_name == "root" else logging.getLogger(logger_name)
        if op == ConfigOp.SET:
            level = LOG4J_LEVELS.get((value or "").upper())
            if level is None:
                raise KafkaError(
                    ErrorCode.INVALID_CONFIG,
                    f"Cannot set the log level of {logger_name} to {value} as it is not a "
                    "supported log level. Valid log levels are "
                    + ", ".join(LOG4J_LEVELS),
                )
            changes.append((lg, level))
        elif op == ConfigOp.DELETE:
            if logger_name == "root":
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Removing the log level of the root "
                                 "logger is not allowed")
            changes.append((lg, None))
        else:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                f"{ConfigOp(op).name} operation is not allowed for the BROKER_LOGGER resource",
            )
    if not validate_only:
        for lg, level in changes:
            lg.setLevel(logging.NOTSET if level is None else level)


async def handle(
    broker: Broker, ctx: RequestContext, req: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
    def plan(image: MetadataImage, rtype: int, rname: str, body: Any) -> Outcome:
        ops = ops_of(body)
        if rtype == RESOURCE_TOPIC:
            return plan_topic(broker.config, image, rname, ops)
        if rtype == RESOURCE_BROKER:
            return plan_broker(broker.config, image, rname, ops, forwarded(ctx))
        if rtype == RESOURCE_BROKER_LOGGER:
            apply_logger_ops(broker.node_id, rname, ops, req.validate_only)
            return Outcome(rtype, rname)
        if rtype in (RESOURCE_GROUP, RESOURCE_CLIENT_METRICS):
            return plan_resource(broker.config, image, rtype, rname, ops)
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {rtype}.")

    resources = [(r.resource_type, r.resource_name, r.configs) for r in req.resources]
    outcomes = await apply_outcomes(broker, resources, guarded(broker, ctx, plan), req.validate_only)
    return IncrementalAlterConfigsResponse(
        throttle_time_ms=0,
        responses=[
            IncrementalAlterConfigsResponse.AlterConfigsResourceResponse(
                error_code=o.error, error_message=o.message,
                resource_type=o.resource_type, resource_name=o.resource_name,
            )
            for o in outcomes
        ],
    )


async def forward(
    broker: Broker, ctx: RequestContext, req: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
    """On a broker that is not the active controller (Kafka's ``ConfigAdminManager.preprocess``):
    a BROKER resource naming another node is refused here, BROKER_LOGGER resources are this
    node's loggers and applied here; the rest goes to the active controller."""
    def local(rtype: int, rname: str, body: Any) -> Outcome | None:
        if rtype == RESOURCE_BROKER and rname:
            check_broker_resource(broker.node_id, rname)
        elif rtype == RESOURCE_BROKER_LOGGER:
            denied = check_config_resource(ctx, ALTER_CONFIGS, rtype, rname)
            if denied is not None:
                raise denied
            apply_logger_ops(broker.node_id, rname, ops_of(body), req.validate_only)
            return Outcome(rtype, rname)
        return None

    resp: IncrementalAlterConfigsResponse = await forward_preprocessed(broker, ctx, req, local)
    return resp
