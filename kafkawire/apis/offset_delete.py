"""OffsetDelete (key 47), version 0.

Deletes committed offsets of a group (tombstones). Group errors (top level):
GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP (a non-consumer group with members), coordinator errors.
Per partition: UNKNOWN_TOPIC_OR_PARTITION, GROUP_SUBSCRIBED_TO_TOPIC (a Stable consumer group
whose members subscribe to the topic).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from groups.shard import GroupShard
from kafkawire.coordinators.groups import on_group, partition_error
from kraft.acls import DELETE, READ, TOPIC
from protocol._generated.offset_delete_request import OffsetDeleteRequest
from protocol._generated.offset_delete_response import OffsetDeleteResponse
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 47
VERSIONS = (0, 0)


async def handle(broker: Broker, ctx: RequestContext, req: OffsetDeleteRequest) -> OffsetDeleteResponse:
    img = broker.image

    def op(shard: GroupShard, now: int) -> tuple[list[Any], OffsetDeleteResponse]:
        code, subscribed = shard.offset_delete_check(req.group_id)
        if code != ErrorCode.NONE:
            return [], OffsetDeleteResponse(error_code=code, topics=[])
        records = []
        topics = []
        for t in req.topics:
            parts = []
            readable = ctx.allowed(READ, TOPIC, t.name)  # Kafka: READ on each topic
            for p in t.partitions:
                err = partition_error(img, t.name, p.partition_index, False)
                if not readable:
                    err = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                if err == ErrorCode.NONE and t.name in subscribed:
                    err = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                if err == ErrorCode.NONE and shard.offsets.get(req.group_id, (t.name, p.partition_index)):
                    records.append(shard.offset_tombstone(req.group_id, t.name, p.partition_index))
                parts.append(OffsetDeleteResponse.OffsetDeleteResponsePartition(
                    partition_index=p.partition_index, error_code=err))
            topics.append(OffsetDeleteResponse.OffsetDeleteResponseTopic(name=t.name, partitions=parts))
        return records, OffsetDeleteResponse(error_code=ErrorCode.NONE, topics=topics)

    def on_error(e: KafkaError) -> OffsetDeleteResponse:
        return OffsetDeleteResponse(error_code=e.code, topics=[])

    resp: OffsetDeleteResponse = await on_group(broker, req.group_id, op, on_error, ctx=ctx,
                                                  operation=DELETE)
    return resp
