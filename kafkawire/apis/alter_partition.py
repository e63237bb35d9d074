"""AlterPartition (key 56), versions 2-3; controller listener only.

A partition leader asks the controller to change its ISR. Top level: STALE_BROKER_EPOCH when
the sender's broker epoch is not its registration's. Per partition, Kafka's checks in Kafka's
order (kraft/replication_control.py): UNKNOWN_TOPIC_ID / UNKNOWN_TOPIC_OR_PARTITION,
INVALID_REQUEST (sender not the leader, leader missing from the new ISR, bad recovery state),
FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION (stale partition epoch), INELIGIBLE_REPLICA (not a
replica, fenced, in controlled shutdown, or v3 broker epoch mismatch). On success the answer
carries the partition's state after the change (a PartitionChangeRecord bumps the partition
epoch; an unchanged ISR writes nothing).
- v2+: topics by id (v0-1, by name, are below Kafka 4's minimum).
- v3: ``new_isr_with_epochs`` (KIP-903) instead of ``new_isr``.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from kraft.replication_control import IsrMember
from protocol._generated.alter_partition_request import AlterPartitionRequest
from protocol._generated.alter_partition_response import AlterPartitionResponse
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 56
VERSIONS = (2, 3)

R = AlterPartitionResponse


async def _partition(broker: Broker, v: int, req: AlterPartitionRequest, topic_id: uuid.UUID,
                     p: AlterPartitionRequest.PartitionData) -> R.PartitionData:
    if v >= 3:
        isr = [IsrMember(s.broker_id, s.broker_epoch) for s in p.new_isr_with_epochs]
    else:
        isr = [IsrMember(b) for b in p.new_isr]
    try:
        part = await broker.controller.alter_partition(
            None, topic_id, p.partition_index, req.broker_id,
            p.leader_epoch, p.partition_epoch, isr, p.leader_recovery_state)
    except KafkaError as e:
        return R.PartitionData(partition_index=p.partition_index, error_code=e.code,
                               leader_id=-1, leader_epoch=-1, isr=[], leader_recovery_state=0,
                               partition_epoch=-1)
    return R.PartitionData(partition_index=p.partition_index, error_code=ErrorCode.NONE,
                           leader_id=part.leader, leader_epoch=part.leader_epoch,
                           isr=list(part.isr), leader_recovery_state=0,
                           partition_epoch=part.partition_epoch)


async def handle(broker: Broker, ctx: RequestContext, req: AlterPartitionRequest) -> R:
    try:
        broker.controller.check_broker_epoch(req.broker_id, req.broker_epoch)
    except KafkaError as e:
        return R(throttle_time_ms=0, error_code=e.code, topics=[])
    topics = []
    for t in req.topics:
        parts = [await _partition(broker, ctx.api_version, req, t.topic_id, p) for p in t.partitions]
        topics.append(R.TopicData(topic_id=t.topic_id, partitions=parts))
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, topics=topics)
