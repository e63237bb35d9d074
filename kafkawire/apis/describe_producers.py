"""DescribeProducers (key 61), version 0 (``Admin.describeProducers``, ``kafka-transactions
describe-producers``).

Answered by the partition leader from the partition's producer state (``log/producer_state``):
every producer id the partition remembers, with its epoch, last sequence (-1 when none), the
timestamp of its last batch, the coordinator epoch of its last marker and the first offset of
its open transaction (-1 when none). Producers are listed by id.

Errors per partition: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kraft.acls import READ, TOPIC
from protocol._generated.describe_producers_request import DescribeProducersRequest
from protocol._generated.describe_producers_response import DescribeProducersResponse
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 61
VERSIONS = (0, 0)

R = DescribeProducersResponse


def _partition(broker: Broker, topic: str, index: int) -> R.PartitionResponse:
    resp = R.PartitionResponse(partition_index=index, error_code=0, active_producers=[])
    if broker.image.partition(topic, index) is None:
        resp.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return resp
    assert broker.replicas is not None
    try:
        plog = broker.replicas.leader_partition(topic, index).log
    except KafkaError as err:
        resp.error_code = err.code
        return resp
    producers = plog.producer_state.producers
    for pid in sorted(producers):
        e = producers[pid]
        first = e.current_txn_first_offset
        resp.active_producers.append(
            R.ProducerState(
                producer_id=pid,
                producer_epoch=e.producer_epoch,
                last_sequence=e.last_seq,
                last_timestamp=e.last_timestamp_ms,
                coordinator_epoch=e.coordinator_epoch,
                current_txn_start_offset=-1 if first is None else first,
            )
        )
    return resp


async def handle(
    broker: Broker, ctx: RequestContext, req: DescribeProducersRequest
) -> DescribeProducersResponse:
    topics = [
        R.TopicResponse(
            name=t.name, partitions=[
                _partition(broker, t.name, p) if ctx.allowed(READ, TOPIC, t.name)
                else R.PartitionResponse(partition_index=p, active_producers=[],
                                         error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                for p in t.partition_indexes])
        for t in req.topics
    ]
    return DescribeProducersResponse(throttle_time_ms=0, topics=topics)
