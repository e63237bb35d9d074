"""DeleteRecords (key 21), versions 0-2 (v2 is flexible).

Moves a partition's log start offset up to the requested offset (Kafka's
``Partition.deleteRecordsOnLeader``); segments entirely below it are deleted at once (Kafka
leaves that to its retention thread: the visible outcome is the same).

- offset -1 means the high watermark.
- offset above the high watermark, or below -1: OFFSET_OUT_OF_RANGE, low watermark -1.
- offset at or below the current log start offset: NONE, nothing changes, the answer carries the
  current low watermark (the log start offset; one replica here).
- cleanup.policy without ``delete`` (a compact-only topic): POLICY_VIOLATION.
- internal topics (``__consumer_offsets``, ``__transaction_state``, ``__share_group_state``):
  INVALID_TOPIC_EXCEPTION, as Kafka's ReplicaManager refuses them.
- unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION; not led here: NOT_LEADER_OR_FOLLOWER
  (through the partition-state layer, ``log.replica.Partition.delete_records``).
- ``timeout_ms`` is not waited for: with one replica the low watermark moves at once.

The log-start-offset checkpoint is written (off the event loop) before the answer, so a crash
right after a successful DeleteRecords never brings the deleted records back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kraft.acls import DELETE, TOPIC
from protocol._generated.delete_records_request import DeleteRecordsRequest
from protocol._generated.delete_records_response import DeleteRecordsResponse
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 21
VERSIONS = (0, 2)

HIGH_WATERMARK = -1
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})

Result = DeleteRecordsResponse.DeleteRecordsPartitionResult


async def handle(
    broker: Broker, ctx: RequestContext, req: DeleteRecordsRequest
) -> DeleteRecordsResponse:
    img = broker.image
    assert broker.replicas is not None
    topics: list[DeleteRecordsResponse.DeleteRecordsTopicResult] = []
    changed = False
    for t in req.topics:
        parts: list[Result] = []
        topics.append(DeleteRecordsResponse.DeleteRecordsTopicResult(name=t.name, partitions=parts))
        if not ctx.allowed(DELETE, TOPIC, t.name):  # Kafka: DELETE on the topic
            parts += [Result(partition_index=p.partition_index, low_watermark=-1,
                             error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                      for p in t.partitions]
            continue
        for p in t.partitions:
            res = Result(partition_index=p.partition_index, low_watermark=-1, error_code=0)
            parts.append(res)
            if img.partition(t.name, p.partition_index) is None:
                res.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            if t.name in INTERNAL_TOPICS:
                res.error_code = ErrorCode.INVALID_TOPIC_EXCEPTION
                continue
            try:
                part = broker.replicas.leader_partition(t.name, p.partition_index)
                before = part.log.log_start_offset
                res.low_watermark = part.delete_records(
                    HIGH_WATERMARK if p.offset == HIGH_WATERMARK else p.offset
                )
            except KafkaError as e:
                res.error_code = e.code
                continue
            if res.low_watermark != before:
                changed = True
    if changed and broker.flusher is not None:
        await broker.flusher.checkpoint_log_start_offsets()
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)
