"""AlterConfigs (key 33), versions 0-2: the legacy, full-replacement config update.

- TOPIC (2): the configs given become the topic's complete set of overrides; overrides not
  named are removed (Kafka's legacy semantics). Every value is validated (INVALID_CONFIG with
  Kafka's message; a null value: "Null value not supported for topic configs: x"). An empty
  name: INVALID_REQUEST "Default topic resources are not allowed."; an illegal name:
  INVALID_TOPIC_EXCEPTION; an unknown topic: UNKNOWN_TOPIC_OR_PARTITION.
- BROKER (4): this node's id or the empty name (cluster-wide default) replaces the dynamic broker
  configs of that resource. Kafka's reconfigurable keys can change at run time
  (``kafkawire.config.entries``: topic-config synonyms, cleaner, thread pools, connection
  limits, ...); any other key fails the whole resource with INVALID_REQUEST "Cannot update
  these configs dynamically: [...]"; per-broker-only keys (``listeners``...) at the cluster
  default, a per-broker ``min.insync.replicas`` or dropping the cluster-wide one (ELR) fail
  as in Kafka. Another broker id: INVALID_REQUEST.
- GROUP (32) and CLIENT_METRICS (16): the configs given replace the resource's set, validated
  as in ``kafkawire.config.resources`` (Kafka 4.3.1 accepts both here).
- BROKER_LOGGER, unknown type ids: INVALID_REQUEST "Unknown resource type N". A resource named twice: INVALID_REQUEST
  "Duplicate resource.". A null value: INVALID_REQUEST "Null value not supported for : x".
- Changes are ConfigRecords through the metadata quorum (one batch per request);
  ``validate_only`` commits nothing. Once committed, the LogConfig of the affected topics'
  partition logs is re-derived (all topics for a broker change), so e.g. ``max.message.bytes``,
  ``retention.ms`` and ``segment.bytes`` apply at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kafkawire.config.entries import (
    check_elr_changes,
    validate_broker_changes,
    validate_topic_overrides,
)
from kafkawire.config.resources import validate_client_metrics, validate_group_configs
from kafkawire.security.authorizer import check_config_resource
from kraft import controller
from kraft.acls import ALTER_CONFIGS
from kraft.image import (
    RESOURCE_BROKER,
    RESOURCE_CLIENT_METRICS,
    RESOURCE_GROUP,
    RESOURCE_TOPIC,
    MetadataImage,
)
from kraft.partition_change import clear_elr_records
from protocol._generated.alter_configs_request import AlterConfigsRequest
from protocol._generated.alter_configs_response import AlterConfigsResponse
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.config.broker_config import BrokerConfig
    from kafkawire.net.server import RequestContext

API_KEY = 33
VERSIONS = (0, 2)

KNOWN_RESOURCE_TYPES = {2, 4, 8, 16, 32}
RESOURCE_BROKER_LOGGER = 8


@dataclass
class Outcome:
    """One resource's result plus the records and log refresh it needs."""

    resource_type: int
    resource_name: str
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    records: list[Any] = field(default_factory=list)
    refresh: list[str] | None = None  # topics whose logs need a new LogConfig; None = all


def check_topic_resource(image: MetadataImage, name: str) -> None:
    if not name:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed.")
    controller.validate_topic_name(name)
    if name not in image.topics:
        raise KafkaError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
        )


def check_broker_resource(
    node_id: int, name: str, allow_default: bool = True, any_node: bool = False
) -> None:
    """A BROKER / BROKER_LOGGER resource name: this node's id (``any_node``: any node id, on
    the controller for a forwarded request, whose broker checked it), or empty (the
    cluster-wide default) where allowed."""
    if not name and allow_default:
        return
    try:
        broker_id = int(name)
    except ValueError:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {name}"
        ) from None
    if broker_id < 0:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Invalid negative broker ID.")
    if broker_id != node_id and not any_node:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            f"Unexpected broker id, expected {node_id}, but received {name}",
        )


def refuse_nulls(configs: list[tuple[str, str | None]]) -> None:
    """Kafka's broker-side check before a change goes to the controller."""
    for name, value in configs:
        if value is None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {name}")


def diff_records(
    resource_type: int, resource_name: str, old: dict[str, str], new: dict[str, str]
) -> list[Any]:
    """ConfigRecords turning ``old`` into ``new`` (null value = delete)."""
    changes: list[tuple[str, str | None]] = [(k, None) for k in sorted(old) if k not in new]
    changes += [(k, v) for k, v in sorted(new.items()) if old.get(k) != v]
    return controller.config_changes(resource_type, resource_name, changes)


def replace_topic_configs(
    image: MetadataImage, name: str, configs: dict[str, str | None]
) -> Outcome:
    check_topic_resource(image, name)
    new = validate_topic_overrides(configs)
    old = dict(image.topic_config(name))
    return Outcome(RESOURCE_TOPIC, name, records=diff_records(RESOURCE_TOPIC, name, old, new),
                   refresh=[name])


def replace_broker_configs(
    config: BrokerConfig, image: MetadataImage, name: str, configs: dict[str, str | None],
    any_node: bool = False,
) -> Outcome:
    check_broker_resource(config.node_id, name, any_node=any_node)
    return broker_outcome(config, image, name, configs)


def broker_outcome(
    config: BrokerConfig, image: MetadataImage, name: str, configs: Mapping[str, str | None]
) -> Outcome:
    """The records turning broker resource ``name``'s dynamic configs into ``configs``."""
    new = validate_broker_changes(configs, config, image, name)
    old = dict(image.configs.get((RESOURCE_BROKER, name), {}))
    check_elr_changes(image, name, old, new)
    return Outcome(RESOURCE_BROKER, name, records=diff_records(RESOURCE_BROKER, name, old, new),
                   refresh=None)


def check_named(rtype: int, name: str) -> None:
    """Kafka refuses default (empty-named) group and client-metrics resources."""
    if name:
        return
    if rtype == RESOURCE_GROUP:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")
    raise KafkaError(ErrorCode.INVALID_REQUEST, "Subscription name can't be empty")


def resource_outcome(
    config: BrokerConfig, image: MetadataImage, rtype: int, name: str,
    configs: Mapping[str, str | None],
) -> Outcome:
    """Records setting group / client-metrics resource ``name`` to ``configs`` (validated)."""
    check_named(rtype, name)
    if rtype == RESOURCE_GROUP:
        new = validate_group_configs(config, image, configs)
    else:
        new = validate_client_metrics(configs)
    old = dict(image.configs.get((rtype, name), {}))
    return Outcome(rtype, name, records=diff_records(rtype, name, old, new), refresh=[])


def dedupe(
    resources: list[tuple[int, str, Any]],
) -> tuple[list[tuple[int, str, Any]], list[Outcome]]:
    """(resources named once, INVALID_REQUEST outcomes for those named more than once)."""
    seen: dict[tuple[int, str], int] = {}
    for rtype, rname, _body in resources:
        seen[(rtype, rname)] = seen.get((rtype, rname), 0) + 1
    unique = [r for r in resources if seen[(r[0], r[1])] == 1]
    dups = [
        Outcome(t, n, ErrorCode.INVALID_REQUEST, "Duplicate resource.")
        for (t, n), c in seen.items() if c > 1
    ]
    return unique, dups


Plan = Callable[[MetadataImage, int, str, Any], Outcome]


def guarded(broker: Broker, ctx: RequestContext, plan: Plan) -> Plan:
    """``plan`` behind Kafka's ALTER_CONFIGS check of the resource; a change of this broker's
    TLS settings must give usable contexts (else INVALID_CONFIG, as Kafka's SslFactory
    validation), and is then applied to new connections."""
    def check(image: MetadataImage, rtype: int, rname: str, body: Any) -> Outcome:
        denied = check_config_resource(ctx, ALTER_CONFIGS, rtype, rname)
        if denied is not None:
            raise denied
        outcome = plan(image, rtype, rname, body)
        if rtype == RESOURCE_BROKER and rname == str(broker.node_id) and outcome.records:
            new = dict(image.configs.get((RESOURCE_BROKER, rname), {}))
            for rec in outcome.records:
                if rec.value is None:
                    new.pop(rec.name, None)
                else:
                    new[rec.name] = rec.value
            assert broker.server.security is not None
            problem = broker.server.security.validate_dynamic(new)
            if problem is not None:
                raise KafkaError(ErrorCode.INVALID_CONFIG, problem)
        return outcome
    return check


async def apply_outcomes(
    broker: Broker,
    resources: list[tuple[int, str, Any]],
    plan: Callable[[MetadataImage, int, str, Any], Outcome],
    validate_only: bool,
) -> list[Outcome]:
    """Plan every resource against one image, commit all records in one batch, refresh logs."""
    unique, outcomes = dedupe(resources)
    async with broker.metadata_lock:
        image = broker.image
        planned: list[Outcome] = []
        for rtype, rname, body in unique:
            if rtype not in KNOWN_RESOURCE_TYPES:
                planned.append(Outcome(rtype, rname, ErrorCode.INVALID_REQUEST,
                                       f"Unknown resource type {rtype}"))
                continue
            try:
                planned.append(plan(image, rtype, rname, body))
            except KafkaError as e:
                planned.append(Outcome(rtype, rname, e.code, e.message))
        records = [r for o in planned if o.error == ErrorCode.NONE for r in o.records]
        records += clear_elr_records(image, records)  # KIP-966: min ISR changed
        if records and not validate_only:
            await broker.commit_metadata(records)
            if any(o.refresh is None for o in planned if o.records):
                broker.refresh_log_configs(None)
            else:
                broker.refresh_log_configs(
                    [t for o in planned if o.records and o.refresh for t in o.refresh]
                )
    return planned + outcomes


def forwarded(ctx: RequestContext) -> bool:
    """Did the request come in an Envelope from a broker (which checked its BROKER names)?"""
    return ctx.connection.listener_type == "controller"


async def forward_preprocessed(broker: Broker, ctx: RequestContext, req: Any,
                               local: Callable[[int, str, Any], Outcome | None]) -> Any:
    """Kafka's broker side of (Incremental)AlterConfigs (``ConfigAdminManager.preprocess``):
    ``local(type, name, configs)`` answers the resources this broker decides itself (a BROKER
    resource naming another node: INVALID_REQUEST; BROKER_LOGGER: applied here), the others
    go to the active controller; the answers come in the request's order."""
    assert broker.forwarding is not None
    answers: list[tuple[int, str, ErrorCode, str | None] | None] = []
    remaining = []
    for r in req.resources:
        try:
            o = local(r.resource_type, r.resource_name, r.configs)
        except KafkaError as e:
            o = Outcome(r.resource_type, r.resource_name, e.code, e.message)
        if o is None:
            remaining.append(r)
            answers.append(None)
        else:
            answers.append((o.resource_type, o.resource_name, o.error, o.message))
    forwarded_answers: list[Any] = []
    if remaining:
        req.resources = remaining  # the rest of the request, as Kafka forwards it
        resp = await broker.forwarding.forward(ctx, req)
        if len(resp.responses) != len(remaining):  # a whole-request error: every item has it
            return resp
        forwarded_answers = list(resp.responses)
    else:
        from kafkawire.apis import REGISTRY

        resp = REGISTRY[ctx.api_key].response_cls(throttle_time_ms=0, responses=[])
    item_cls = type(resp).AlterConfigsResourceResponse
    merged = []
    it = iter(forwarded_answers)
    for a in answers:
        if a is None:
            merged.append(next(it))
        else:
            merged.append(item_cls(resource_type=a[0], resource_name=a[1], error_code=a[2],
                                   error_message=a[3]))
    resp.responses = merged
    return resp


def plan_legacy(
    broker: Broker, any_node: bool = False
) -> Callable[[MetadataImage, int, str, Any], Outcome]:
    def plan(image: MetadataImage, rtype: int, rname: str, body: Any) -> Outcome:
        configs: dict[str, str | None] = {c.name: c.value for c in body}
        if rtype == RESOURCE_BROKER_LOGGER:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown resource type {rtype}")
        refuse_nulls([(n, v) for n, v in configs.items()])
        if rtype == RESOURCE_TOPIC:
            return replace_topic_configs(image, rname, configs)
        if rtype == RESOURCE_BROKER:
            return replace_broker_configs(broker.config, image, rname, configs, any_node)
        if rtype in (RESOURCE_GROUP, RESOURCE_CLIENT_METRICS):
            return resource_outcome(broker.config, image, rtype, rname, configs)
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {rtype}.")

    return plan


async def handle(
    broker: Broker, ctx: RequestContext, req: AlterConfigsRequest
) -> AlterConfigsResponse:
    resources = [(r.resource_type, r.resource_name, r.configs) for r in req.resources]
    plan = plan_legacy(broker, forwarded(ctx))
    outcomes = await apply_outcomes(broker, resources, guarded(broker, ctx, plan),
                                    req.validate_only)
    return AlterConfigsResponse(
        throttle_time_ms=0,
        responses=[
            AlterConfigsResponse.AlterConfigsResourceResponse(
                error_code=o.error, error_message=o.message,
                resource_type=o.resource_type, resource_name=o.resource_name,
            )
            for o in outcomes
        ],
    )


async def forward(broker: Broker, ctx: RequestContext, req: AlterConfigsRequest
                  ) -> AlterConfigsResponse:
    """On a broker that is not the active controller: a BROKER resource naming another node is
    refused here (Kafka's ``ConfigAdminManager.preprocess``), the rest is forwarded."""
    def local(rtype: int, rname: str, body: Any) -> Outcome | None:
        if rtype == RESOURCE_BROKER and rname:
            check_broker_resource(broker.node_id, rname)
        return None

    resp: AlterConfigsResponse = await forward_preprocessed(broker, ctx, req, local)
    return resp
