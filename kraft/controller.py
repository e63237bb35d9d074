"""Controller logic (sans-I/O): validate admin operations against the image, emit records.

Each operation takes the current ``MetadataImage`` and returns the metadata records that carry
it out, or raises ``KafkaError`` with the code Kafka returns. The driver appends the records to
``__cluster_metadata`` through the quorum and replays them into a new image; nothing here
mutates state. Topic ids come from a caller-supplied ``uuid_factory`` so tests are
deterministic.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from kraft.image import RESOURCE_BROKER, RESOURCE_TOPIC, MetadataImage
from kraft.replication_control import place_replicas, usable_brokers
from protocol._generated.config_record import ConfigRecord
from protocol._generated.feature_level_record import FeatureLevelRecord
from protocol._generated.partition_record import PartitionRecord
from protocol._generated.producer_ids_record import ProducerIdsRecord
from protocol._generated.register_broker_record import RegisterBrokerRecord
from protocol._generated.remove_topic_record import RemoveTopicRecord
from protocol._generated.topic_record import TopicRecord
from protocol.errors import ErrorCode, KafkaError

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")

# metadata.version we finalize: 30, the level Apache Kafka 4.3 finalizes. group.version and
# transaction.version are finalized by their coordinators at start (kafkawire/coordinators/groups.py,
# kafkawire/coordinators/txn.py): they switch Kafka 4.x clients onto other protocols.
METADATA_VERSION_LEVEL = 30
PRODUCER_ID_BLOCK_SIZE = 1000


def validate_topic_name(name: str) -> None:
    """Kafka's ``Topic.validate`` with its 4.x messages (INVALID_TOPIC_EXCEPTION)."""
    if not name:
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            "Topic name is invalid: the empty string is not allowed",
        )
    if name in (".", ".."):
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic name is invalid: '{name}' is not allowed"
        )
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name is invalid: the length of '{name}' is longer than the max allowed "
            f"length {MAX_TOPIC_NAME_LENGTH}",
        )
    if not _LEGAL.match(name):
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name is invalid: '{name}' contains one or more characters other than "
            "ASCII alphanumerics, '.', '_' and '-'",
        )


def _collision_key(name: str) -> str:
    return name.replace(".", "_")


def check_topic_collision(image: MetadataImage, name: str) -> None:
    key = _collision_key(name)
    for other in image.topics:
        if other != name and _collision_key(other) == key:
            raise KafkaError(
                ErrorCode.INVALID_TOPIC_EXCEPTION,
                f"Topic '{name}' collides with existing topic: {other}",
            )


def live_brokers(image: MetadataImage) -> list[int]:
    """Brokers new replicas go to: unfenced and not in controlled shutdown."""
    return usable_brokers(image)


def assign_replicas(
    image: MetadataImage, brokers: list[int], num_partitions: int, replication_factor: int,
    start: int = 0,
) -> list[list[int]]:
    """Rack-aware placement (kraft/replication_control.py); INVALID_REPLICATION_FACTOR when
    fewer usable brokers than the replication factor."""
    return place_replicas(image, brokers, num_partitions, replication_factor, start)


def create_topic(
    image: MetadataImage,
    name: str,
    num_partitions: int,
    replication_factor: int,
    configs: dict[str, str],
    uuid_factory: Callable[[], uuid.UUID] = uuid.uuid4,
    assignments: dict[int, list[int]] | None = None,
) -> list[Any]:
    """Records creating a topic; validation errors raise KafkaError."""
    validate_topic_name(name)
    if name in image.topics:
        raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    check_topic_collision(image, name)
    brokers = live_brokers(image)
    if assignments:
        rf: int | None = None
        for p in assignments:  # request order, as Kafka reports "previous partitions"
            validate_manual_assignment(image, assignments[p], rf)
            rf = len(assignments[p])
            if not any(b in brokers for b in assignments[p]):
                raise KafkaError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"All brokers specified in the manual partition assignment for partition "
                    f"{p} are fenced or in controlled shutdown.",
                )
        if sorted(assignments) != list(range(len(assignments))):
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "partitions should be a consecutive 0-based integer sequence",
            )
        replicas = [list(assignments[p]) for p in range(len(assignments))]
    else:
        if replication_factor <= 0:
            raise KafkaError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                "Replication factor must be larger than 0, or -1 to use the default value.",
            )
        if num_partitions <= 0:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS, "Number of partitions was set to an invalid "
                "non-positive value."
            )
        replicas = assign_replicas(image, brokers, num_partitions, replication_factor)
    topic_id = uuid_factory()
    out: list[Any] = [TopicRecord(name=name, topic_id=topic_id)]
    for key, value in sorted(configs.items()):
        out.append(ConfigRecord(resource_type=RESOURCE_TOPIC, resource_name=name, name=key, value=value))
    for p, reps in enumerate(replicas):
        out.append(partition_record(topic_id, p, reps, brokers))
    return out


def partition_record(topic_id: uuid.UUID, p: int, reps: list[int], live: list[int]) -> PartitionRecord:
    isr = [b for b in reps if b in live] or list(reps)
    leader = isr[0] if isr else -1
    return PartitionRecord(
        partition_id=p,
        topic_id=topic_id,
        replicas=list(reps),
        isr=isr,
        removing_replicas=[],
        adding_replicas=[],
        leader=leader,
        leader_recovery_state=0,
        leader_epoch=0,
        partition_epoch=0,
        directories=[uuid.UUID(int=0)] * len(reps),
    )


def delete_topic(image: MetadataImage, name: str) -> list[Any]:
    topic = image.topics.get(name)
    if topic is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    return [RemoveTopicRecord(topic_id=topic.topic_id)]


def validate_manual_assignment(
    image: MetadataImage, replicas: list[int], replication_factor: int | None
) -> None:
    """Kafka's checks of one manually assigned replica list (INVALID_REPLICA_ASSIGNMENT)."""
    if not replicas:
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes an empty replica list.",
        )
    previous: int | None = None
    for b in sorted(replicas):
        if b not in image.brokers:
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes broker {b}, but no such broker is "
                "registered.",
            )
        if b == previous:
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes the broker {b} more than once.",
            )
        previous = b
    if replication_factor is not None and len(replicas) != replication_factor:
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"The manual partition assignment includes a partition with {len(replicas)} "
            f"replica(s), but this is not consistent with previous partitions, which have "
            f"{replication_factor} replica(s).",
        )


def create_partitions(
    image: MetadataImage, name: str, new_total: int, assignments: list[list[int]] | None
) -> list[Any]:
    """Records adding partitions to ``name`` up to ``new_total`` (Kafka's checks and messages)."""
    topic = image.topics.get(name)
    if topic is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    cur = len(topic.partitions)
    if new_total < cur:
        raise KafkaError(
            ErrorCode.INVALID_PARTITIONS,
            f"The topic {name} currently has {cur} partition(s); {new_total} would not be an "
            "increase.",
        )
    if new_total == cur:
        raise KafkaError(
            ErrorCode.INVALID_PARTITIONS, f"Topic already has {cur} partition(s)."
        )
    brokers = live_brokers(image)
    rf = len(topic.partitions[0].replicas) if 0 in topic.partitions else 1
    if assignments is not None:
        if len(assignments) != new_total - cur:
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Attempted to add {new_total - cur} additional partition(s), but only "
                f"{len(assignments)} assignment(s) were specified.",
            )
        for i, reps in enumerate(assignments):
            validate_manual_assignment(image, reps, rf)
            if not any(b in brokers for b in reps):
                raise KafkaError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"All brokers specified in the manual partition assignment for partition "
                    f"{cur + i} are fenced or in controlled shutdown.",
                )
        new_reps = [list(r) for r in assignments]
    else:
        new_reps = assign_replicas(image, brokers, new_total - cur, rf, start=cur)
    return [
        partition_record(topic.topic_id, cur + i, reps, brokers) for i, reps in enumerate(new_reps)
    ]


def config_changes(
    resource_type: int, resource_name: str, changes: Iterable[tuple[str, str | None]]
) -> list[Any]:
    return [
        ConfigRecord(resource_type=resource_type, resource_name=resource_name, name=k, value=v)
        for k, v in changes
    ]


def register_broker(
    broker_id: int,
    incarnation_id: uuid.UUID,
    epoch: int,
    endpoints: list[tuple[str, str, int, int]],
    rack: str | None,
    features: dict[str, tuple[int, int]],
) -> list[Any]:
    return [
        RegisterBrokerRecord(
            broker_id=broker_id,
            incarnation_id=incarnation_id,
            broker_epoch=epoch,
            end_points=[
                RegisterBrokerRecord.BrokerEndpoint(
                    name=n, host=h, port=p, security_protocol=sp
                )
                for n, h, p, sp in endpoints
            ],
            features=[
                RegisterBrokerRecord.BrokerFeature(
                    name=k, min_supported_version=lo, max_supported_version=hi
                )
                for k, (lo, hi) in sorted(features.items())
            ],
            rack=rack,
            fenced=False,
            in_controlled_shutdown=False,
            log_dirs=[],
        )
    ]


ELR_VERSION_LEVEL = 1


def bootstrap_records(min_insync_replicas: int = 1) -> list[Any]:
    """The first records of a freshly formatted cluster, as Kafka 4.3's bootstrap writes them.

    ``eligible.leader.replicas.version`` 1 (KIP-966) is finalized, and with it the cluster-wide
    dynamic ``min.insync.replicas`` (resource BROKER, empty name) Kafka requires under ELR,
    from the static ``min.insync.replicas``: DescribeConfigs then reports the source
    ``DYNAMIC_DEFAULT_BROKER_CONFIG`` as Kafka does.
    """
    return [
        FeatureLevelRecord(name="metadata.version", feature_level=METADATA_VERSION_LEVEL),
        FeatureLevelRecord(name="eligible.leader.replicas.version", feature_level=ELR_VERSION_LEVEL),
        ConfigRecord(
            resource_type=RESOURCE_BROKER,
            resource_name="",
            name="min.insync.replicas",
            value=str(min_insync_replicas),
        ),
    ]


def allocate_producer_ids(image: MetadataImage, broker_id: int, broker_epoch: int) -> tuple[int, list[Any]]:
    """(first id of the new block, records) for a block of PRODUCER_ID_BLOCK_SIZE ids."""
    start = image.next_producer_id
    return start, [
        ProducerIdsRecord(
            broker_id=broker_id,
            broker_epoch=broker_epoch,
            next_producer_id=start + PRODUCER_ID_BLOCK_SIZE,
        )
    ]
