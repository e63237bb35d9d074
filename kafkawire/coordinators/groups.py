"""Glue between the group coordinator (sans-I/O, ``groups/``) and the runtime.

``make_shard_factory(config)`` builds ``groups.shard.GroupShard``s with the broker's limits
(``groups.config.GroupConfig``) and random member ids; ``on_group`` runs an operation on the
shard that coordinates a group and maps the runtime's coordinator errors.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from groups.config import GroupConfig
from groups.shard import GroupShard
from kraft.acls import GROUP, READ
from protocol.coordinator import Pending
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.config.broker_config import BrokerConfig
    from kafkawire.net.server import RequestContext
    from kraft.image import MetadataImage

R = TypeVar("R")


def make_shard_factory(
    config: BrokerConfig, group_settings: Callable[[str], Mapping[str, int]] | None = None,
) -> Callable[[int], GroupShard]:
    """``group_settings(group_id)``: the group's dynamic KIP-848 settings (its group configs,
    see ``kafkawire.config.resources.group_consumer_settings``)."""
    gcfg = GroupConfig.from_values(config.values)

    def factory(partition: int) -> GroupShard:
        shard = GroupShard(partition, gcfg, lambda: str(uuid.uuid4()))
        if group_settings is not None:
            shard.consumer.group_settings = group_settings
        return shard

    return factory


#: group.version 1 enables KIP-848 consumer groups (ConsumerGroupHeartbeat/Describe)
GROUP_VERSION_CONSUMER = 1


def group_version_records(config: BrokerConfig, image: MetadataImage) -> list[Any]:
    """Finalize ``group.version=1`` on a fresh cluster, as Kafka 4.x's storage format does
    (whatever ``group.coordinator.rebalance.protocols`` says: Kafka 4.3.1 finalizes it and keeps
    listing ConsumerGroupHeartbeat/Describe in ApiVersions with ``classic`` alone, answering them
    UNSUPPORTED_VERSION). Once recorded, the level is never changed at start (UpdateFeatures may
    have lowered it)."""
    from protocol._generated.feature_level_record import FeatureLevelRecord

    if "group.version" in image.features_recorded:
        return []
    if image.features.get("group.version", 0) == GROUP_VERSION_CONSUMER:
        return []
    return [FeatureLevelRecord(name="group.version", feature_level=GROUP_VERSION_CONSUMER)]


def consumer_protocol_enabled(broker: Broker) -> bool:
    """KIP-848 groups are served when ``group.version`` >= 1 and the (deprecated) static
    ``group.coordinator.rebalance.protocols`` lists ``consumer``; otherwise Kafka answers
    ConsumerGroupHeartbeat/Describe with UNSUPPORTED_VERSION (the APIs stay advertised)."""
    if broker.image.features.get("group.version", 0) < GROUP_VERSION_CONSUMER:
        return False
    protocols = str(broker.config["group.coordinator.rebalance.protocols"]).split(",")
    return "consumer" in {p.strip() for p in protocols}


def client_host(ctx: RequestContext) -> str:
    """Kafka reports a member's host as ``/<address>``."""
    return "/" + ctx.connection.peer.rsplit(":", 1)[0]


async def on_group(
    broker: Broker, group_id: str, op: Callable[[GroupShard, int], tuple[list[Any], Any]],
    on_error: Callable[[KafkaError], R], ctx: RequestContext | None = None,
    operation: int = READ,
) -> R:
    """``op`` on the shard of ``group_id``; coordinator errors go through ``on_error``; a
    parked reply (``Pending``) is awaited, and answered once its partition's writes are
    committed (the partition-state layer's high watermark). With ``ctx``, the principal needs
    ``operation`` (READ) on the group first: else GROUP_AUTHORIZATION_FAILED through
    ``on_error``."""
    if ctx is not None and not ctx.allowed(operation, GROUP, group_id):
        return on_error(KafkaError(ErrorCode.GROUP_AUTHORIZATION_FAILED))
    runtime = broker.group_runtime
    try:
        reply: Any = await runtime.run(group_id, op)
        if isinstance(reply, Pending):  # released once the write completing it is committed
            reply = await runtime.wait(reply, runtime.partition_for(group_id))
    except KafkaError as e:
        return on_error(e)
    return reply  # type: ignore[no-any-return]


def partition_error(img: MetadataImage, name: str | None, partition: int, by_id: bool) -> ErrorCode:
    """UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID when named by id) for a partition the
    metadata does not have; NONE otherwise."""
    topic = img.topics.get(name) if name is not None else None
    if topic is None:
        return ErrorCode.UNKNOWN_TOPIC_ID if by_id else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if partition not in topic.partitions:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return ErrorCode.NONE


def topic_name(img: MetadataImage, name: str, topic_id: uuid.UUID, by_id: bool) -> str | None:
    if not by_id:
        return name
    t = img.topics_by_id.get(topic_id)
    return t.name if t is not None else None


def commit_partition(
    shard: GroupShard, img: MetadataImage, group_id: str, name: str | None, partition: Any,
    group_code: ErrorCode, now_ms: int, *, by_id: bool = False, expire_ms: int = -1,
    leader_epoch: int | None = None,
) -> tuple[ErrorCode, Any]:
    """The error and (on success) the OffsetCommit record of one partition of an OffsetCommit
    or TxnOffsetCommit request, checked in Kafka's order: unknown topic/partition, the group's
    error, ``offset.metadata.max.bytes``."""
    code = partition_error(img, name, partition.partition_index, by_id)
    if code == ErrorCode.NONE:
        code = group_code
    meta = partition.committed_metadata
    if code == ErrorCode.NONE and meta is not None and len(meta.encode()) > shard.config.offset_metadata_max_bytes:
        code = ErrorCode.OFFSET_METADATA_TOO_LARGE
    if code != ErrorCode.NONE:
        return code, None
    assert name is not None
    epoch = partition.committed_leader_epoch if leader_epoch is None else leader_epoch
    return code, shard.offset_record(
        group_id, name, partition.partition_index, partition.committed_offset, epoch, meta,
        now_ms, expire_ms,
    )
