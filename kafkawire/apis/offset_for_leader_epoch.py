"""OffsetForLeaderEpoch (key 23), versions 2-4.

For each partition: the end offset of the requested leader epoch (the start offset of the next
larger epoch, or the log end offset for the current epoch), from the partition's leader-epoch
cache. A requested epoch newer than any we know gives epoch -1 and offset -1. The request's
current leader epoch is checked like Fetch's (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH), then
leadership (NOT_LEADER_OR_FOLLOWER: only the leader answers, followers included), through the
partition-state layer (``log.replica.Partition.end_offset_for_epoch``).
Consumers (KIP-320) use it to detect log truncation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kraft.acls import CLUSTER, CLUSTER_ACTION, CLUSTER_NAME, DESCRIBE, TOPIC
from protocol._generated.offset_for_leader_epoch_request import OffsetForLeaderEpochRequest
from protocol._generated.offset_for_leader_epoch_response import OffsetForLeaderEpochResponse
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 23
VERSIONS = (2, 4)

Res = OffsetForLeaderEpochResponse.EpochEndOffset


async def handle(
    broker: Broker, ctx: RequestContext, req: OffsetForLeaderEpochRequest
) -> OffsetForLeaderEpochResponse:
    img = broker.image
    assert broker.replicas is not None
    topics = []
    # Kafka: a follower (replica_id >= 0) needs CLUSTER_ACTION, a consumer DESCRIBE on the topic
    follower = ctx.api_version >= 3 and req.replica_id >= 0
    cluster_ok = follower and ctx.allowed(CLUSTER_ACTION, CLUSTER, CLUSTER_NAME)

    def allowed(topic: str) -> bool:
        return cluster_ok if follower else ctx.allowed(DESCRIBE, TOPIC, topic)

    for t in req.topics:
        parts: list[Res] = []
        topics.append(OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult(topic=t.topic, partitions=parts))
        if not allowed(t.topic):
            parts += [Res(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, partition=p.partition,
                          leader_epoch=-1, end_offset=-1) for p in t.partitions]
            continue
        for p in t.partitions:
            res = Res(error_code=0, partition=p.partition, leader_epoch=-1, end_offset=-1)
            parts.append(res)
            if img.partition(t.topic, p.partition) is None:
                res.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            try:
                part = broker.replicas.hosted(t.topic, p.partition)
                res.leader_epoch, res.end_offset = part.end_offset_for_epoch(
                    p.current_leader_epoch, p.leader_epoch
                )
            except KafkaError as e:
                res.error_code = e.code
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)
