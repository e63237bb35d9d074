"""ListOffsets (key 2), versions 1-11.

Special timestamps: -1 latest (the high watermark, or the last stable offset at
read_committed, v2+), -2 earliest (log start offset), -3 max timestamp (v7+: the offset and
timestamp of the record with the largest timestamp), -4 earliest local (v8+, = earliest here,
no tiered storage), -5 latest tiered (v9+: -1, nothing is tiered), -6 earliest pending upload
(v11: -1). Any other timestamp: the earliest offset whose record timestamp is >= it, through the
time index (KIP-79); when none is below the visible end the answer is offset -1, timestamp -1.
Special-timestamp answers carry timestamp -1, as Kafka's do. Answered by the partition-state
layer (``log.replica.Partition.offset_for_timestamp``): NOT_LEADER_OR_FOLLOWER off the leader,
FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH for a stale / future current leader epoch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kraft.acls import DESCRIBE, TOPIC
from log.replica import FetchIsolation
from protocol._generated.list_offsets_request import ListOffsetsRequest
from protocol._generated.list_offsets_response import ListOffsetsResponse
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 2
VERSIONS = (1, 11)

LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3
EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -4, -5, -6
# the first ListOffsets version that knows each special timestamp (older: UNSUPPORTED_VERSION)
MIN_VERSION_FOR = {MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9, EARLIEST_PENDING_UPLOAD: 11}

SPECIAL = frozenset({LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED,
                     EARLIEST_PENDING_UPLOAD})
CONSUMER_REPLICA_ID, DEBUGGING_REPLICA_ID = -1, -2

Part = ListOffsetsResponse.ListOffsetsPartitionResponse


async def handle(
    broker: Broker, ctx: RequestContext, req: ListOffsetsRequest
) -> ListOffsetsResponse:
    v = ctx.api_version
    read_committed = v >= 2 and req.isolation_level == 1
    img = broker.image
    assert broker.replicas is not None
    # as Kafka: consumers (-1) read up to the high watermark or LSO, other replica ids to the
    # log end; everyone but the debugging id (-2) must ask the leader
    consumer = req.replica_id == CONSUMER_REPLICA_ID
    isolation = (
        FetchIsolation.LOG_END if not consumer
        else FetchIsolation.TXN_COMMITTED if read_committed else FetchIsolation.HIGH_WATERMARK
    )
    only_leader = req.replica_id != DEBUGGING_REPLICA_ID
    topics = []
    for t in req.topics:
        parts: list[Part] = []
        topics.append(ListOffsetsResponse.ListOffsetsTopicResponse(name=t.name, partitions=parts))
        if not ctx.allowed(DESCRIBE, TOPIC, t.name):  # Kafka: DESCRIBE on each topic
            parts += [Part(partition_index=p.partition_index,
                           error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, timestamp=-1,
                           offset=-1, leader_epoch=-1) for p in t.partitions]
            continue
        for p in t.partitions:
            resp = Part(partition_index=p.partition_index, error_code=0, timestamp=-1, offset=-1,
                        leader_epoch=-1)
            parts.append(resp)
            if img.partition(t.name, p.partition_index) is None:
                resp.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            ts = p.timestamp
            try:
                part = broker.replicas.hosted(t.name, p.partition_index)
                code = part.check(p.current_leader_epoch, require_leader=only_leader)
                if code:
                    raise KafkaError(code)
                if ts in MIN_VERSION_FOR and v < MIN_VERSION_FOR[ts]:
                    raise KafkaError(ErrorCode.UNSUPPORTED_VERSION)
                if ts < 0 and ts not in SPECIAL:
                    raise KafkaError(ErrorCode.INVALID_REQUEST)
                if ts in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
                    continue  # nothing is tiered: offset -1
                found = part.offset_for_timestamp(
                    ts, isolation, current_leader_epoch=p.current_leader_epoch,
                    require_leader=only_leader, consumer=consumer,
                )
            except KafkaError as e:
                resp.error_code = e.code
                continue
            if found is not None:
                resp.offset, resp.timestamp, resp.leader_epoch = found
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)
