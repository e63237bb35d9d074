"""CreateTopics (key 19), versions 2-7.

- Topics are checked in request order as Kafka's controller does: name (INVALID_TOPIC_EXCEPTION,
  incl. collisions of '.' and '_'), existence (TOPIC_ALREADY_EXISTS, "Topic 'x' already
  exists."), configs (INVALID_CONFIG with Kafka's ConfigDef message; null values refused), then
  partitions and replicas. ``num_partitions``/``replication_factor`` -1 mean the broker's
  ``num.partitions`` / ``default.replication.factor``. Manual assignments need both at -1
  (INVALID_REQUEST otherwise) and are validated like Kafka (INVALID_REPLICA_ASSIGNMENT).
- A name given twice in one request: INVALID_REQUEST "Duplicate topic name." for it, appended
  after the other results. ``__cluster_metadata``: INVALID_REQUEST "Creation of internal topic
  __cluster_metadata is prohibited." (Kafka 4.x).
- All successful creations of one request are committed as one batch of metadata records
  (atomic, like Kafka's controller). ``validate_only`` runs every check and answers exactly as
  a real creation would (with a would-be topic id), committing nothing.
- v5+: each created topic reports num_partitions, replication_factor and every topic config
  with its value, source and flags (sorted by name); v7 adds the topic id. Failed topics keep
  num_partitions/replication_factor at -1 and no configs.
- Limits as Kafka's controller: more than 10,000 partitions asked for in one request (counted
  before any other check) -> POLICY_VIOLATION "Excessively large number of partitions per
  request." for every topic; more than 10,000 metadata records (e.g. one topic of exactly
  10,000 partitions: its TopicRecord makes 10,001) -> POLICY_VIOLATION "Unable to perform
  excessively large batch operation.". Nothing is committed either way.
- The partition logs are created before the records are committed; if that fails (no
  descriptors, a full disk), the created topics get KAFKA_STORAGE_ERROR and nothing is committed.
- ``timeout_ms`` is not waited on: creation completes before the response on a single node.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafkawire.config.entries import topic_config_entries, validate_topic_overrides
from kafkawire.metadata.quorum import METADATA_TOPIC
from kraft import controller
from kraft.acls import CLUSTER, CLUSTER_NAME, CREATE, DESCRIBE_CONFIGS, TOPIC
from kraft.image import MetadataImage
from protocol._generated.create_topics_request import CreateTopicsRequest
from protocol._generated.create_topics_response import CreateTopicsResponse
from protocol._generated.partition_record import PartitionRecord
from protocol._generated.topic_record import TopicRecord
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.config.broker_config import BrokerConfig
    from kafkawire.net.server import RequestContext

API_KEY = 19
THROTTLED_MESSAGE = "The throttling quota has been exceeded."
VERSIONS = (2, 7)

#: Kafka's controller limits (not configurable in Kafka): partitions per CreateTopics request
#: (``MAX_PARTITIONS_PER_BATCH``) and metadata records per user operation
#: (``MAX_RECORDS_PER_USER_OP``). Both are answered with POLICY_VIOLATION for every topic.
MAX_PARTITIONS_PER_REQUEST = 10_000
MAX_RECORDS_PER_USER_OP = 10_000

Result = CreateTopicsResponse.CreatableTopicResult
ResultConfig = CreateTopicsResponse.CreatableTopicConfigs


def error_result(name: str, code: ErrorCode, message: str | None) -> Result:
    return Result(name=name, error_code=code, error_message=message)


def plan_topic(
    config: BrokerConfig, image: MetadataImage, topic: CreateTopicsRequest.CreatableTopic
) -> tuple[list[Any], dict[str, str]]:
    """(metadata records, normalized config overrides) creating ``topic``, or KafkaError."""
    name = topic.name
    controller.validate_topic_name(name)
    if name in image.topics:
        raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    controller.check_topic_collision(image, name)
    requested: dict[str, str | None] = {}
    for c in topic.configs:
        requested[c.name] = c.value
    configs = validate_topic_overrides(requested)
    assignments: dict[int, list[int]] | None = None
    if topic.assignments:
        if topic.replication_factor != -1:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                "A manual partition assignment was specified, but replication factor was not "
                "set to -1.",
            )
        if topic.num_partitions != -1:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                "A manual partition assignment was specified, but numPartitions was not set "
                "to -1.",
            )
        assignments = {}
        for a in topic.assignments:
            if a.partition_index in assignments:
                raise KafkaError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    "Found multiple manual partition assignments for partition "
                    f"{a.partition_index}",
                )
            assignments[a.partition_index] = list(a.broker_ids)
        num_partitions, replication_factor = -1, -1
    else:
        rf = topic.replication_factor
        if rf < -1 or rf == 0:
            raise KafkaError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                "Replication factor must be larger than 0, or -1 to use the default value.",
            )
        if topic.num_partitions < -1 or topic.num_partitions == 0:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS,
                "Number of partitions was set to an invalid non-positive value.",
            )
        num_partitions = (
            config.num_partitions if topic.num_partitions == -1 else topic.num_partitions
        )
        replication_factor = config.default_replication_factor if rf == -1 else rf
    records = controller.create_topic(
        image, name, num_partitions, replication_factor, configs, assignments=assignments
    )
    return records, configs


def success_result(
    config: BrokerConfig,
    image: MetadataImage,
    name: str,
    records: list[Any],
    configs: dict[str, str],
    version: int,
) -> Result:
    topic_rec = next(r for r in records if isinstance(r, TopicRecord))
    parts = [r for r in records if isinstance(r, PartitionRecord)]
    res = Result(name=name, topic_id=topic_rec.topic_id, error_code=0, error_message=None)
    if version >= 5:
        res.num_partitions = len(parts)
        res.replication_factor = len(parts[0].replicas) if parts else -1
        res.configs = [
            ResultConfig(
                name=e.name,
                value=None if e.is_sensitive else e.value,
                read_only=e.read_only,
                config_source=int(e.source),
                is_sensitive=e.is_sensitive,
            )
            for e in topic_config_entries(config, image, configs)
        ]
    return res


async def handle(
    broker: Broker, ctx: RequestContext, req: CreateTopicsRequest
) -> CreateTopicsResponse:
    v = ctx.api_version
    counts: dict[str, int] = {}
    for t in req.topics:
        counts[t.name] = counts.get(t.name, 0) + 1
    duplicates = [n for n in counts if counts[n] > 1]
    results: list[Result] = []
    tail: list[Result] = [
        error_result(n, ErrorCode.INVALID_REQUEST, "Duplicate topic name.") for n in duplicates
    ]
    wanted = [t for t in req.topics if counts[t.name] == 1 and t.name != METADATA_TOPIC]
    tail += [
        error_result(t.name, ErrorCode.INVALID_REQUEST,
                     f"Creation of internal topic {METADATA_TOPIC} is prohibited.")
        for t in req.topics if counts[t.name] == 1 and t.name == METADATA_TOPIC
    ]
    if requested_partitions(wanted, broker.config.num_partitions) > MAX_PARTITIONS_PER_REQUEST:
        return _refuse_all(wanted, tail, "Excessively large number of partitions per request.")
    cluster_create = ctx.allowed(CREATE, CLUSTER, CLUSTER_NAME)
    async with broker.metadata_lock:
        image = broker.image
        all_records: list[Any] = []
        for t in wanted:
            if not cluster_create and not ctx.allowed(CREATE, TOPIC, t.name):
                results.append(error_result(t.name, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                            "Authorization failed."))
                continue
            if broker.mutation_exceeded(ctx, strict=v >= 6):  # KIP-599
                results.append(error_result(t.name, ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                                            THROTTLED_MESSAGE))
                continue
            try:
                records, configs = plan_topic(broker.config, image, t)
            except KafkaError as e:
                results.append(error_result(t.name, e.code, e.message))
                continue
            if not req.validate_only:
                broker.record_mutation(ctx, sum(1 for r in records
                                                if isinstance(r, PartitionRecord)))
            result = success_result(broker.config, image, t.name, records, configs, v)
            if v >= 5 and not ctx.allowed(DESCRIBE_CONFIGS, TOPIC, t.name):
                result.topic_config_error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                result.configs = []
            results.append(result)
            all_records.extend(records)
        if len(all_records) > MAX_RECORDS_PER_USER_OP:
            return _refuse_all(wanted, tail, "Unable to perform excessively large batch operation.")
        if all_records and not req.validate_only:
            try:
                await broker.commit_metadata(all_records)
            except KafkaError as e:  # the logs could not be created: nothing was committed
                results = [
                    r if r.error_code else error_result(r.name, e.code, e.message) for r in results
                ]
    return CreateTopicsResponse(throttle_time_ms=0, topics=results + tail)


def requested_partitions(topics: list[CreateTopicsRequest.CreatableTopic], default: int) -> int:
    """Partitions asked for by the request, counted as Kafka's controller does before any other
    check (assignments, else num_partitions, -1 meaning ``num.partitions``)."""
    total = 0
    for t in topics:
        if t.assignments:
            total += len(t.assignments)
        elif t.num_partitions == -1:
            total += default
        elif t.num_partitions > 0:
            total += t.num_partitions
    return total


def _refuse_all(
    topics: list[CreateTopicsRequest.CreatableTopic], tail: list[Result], message: str
) -> CreateTopicsResponse:
    """Kafka's controller fails the whole request: every topic gets POLICY_VIOLATION."""
    results = [error_result(t.name, ErrorCode.POLICY_VIOLATION, message) for t in topics]
    return CreateTopicsResponse(throttle_time_ms=0, topics=results + tail)
