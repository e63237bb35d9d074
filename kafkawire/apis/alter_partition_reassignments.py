"""AlterPartitionReassignments (key 45), versions 0-1 (``kafka-reassign-partitions``).

Checked per partition in Kafka's order, with Kafka's codes and messages: unknown topic
(UNKNOWN_TOPIC_OR_PARTITION "Unable to find a topic named <t>."), unknown partition ("Unable to
find partition <t>:<p>."), a cancellation (null replicas) with nothing in progress
(NO_REASSIGNMENT_IN_PROGRESS), then the replica list (INVALID_REPLICA_ASSIGNMENT: empty,
a broker twice, an unregistered broker: ``kraft.controller.validate_manual_assignment``). A
list equal to the current replicas is a no-op (NONE).

A new list starts a reassignment on the active controller (Kafka's KRaft way,
``kraft.replication_control.reassign``): the replicas become the target plus the original ones
not in it, with adding/removing replicas recorded; new replicas are created as followers,
fetch from the leader and join the ISR (AlterPartition), and the controller then drops the
removed replicas (a removed leader hands over to a target replica in the ISR). Null replicas
cancel a reassignment in progress. Replication throttles (``leader.replication.throttled.rate``
and the like, which ``kafka-reassign-partitions --throttle`` sets as configs) are applied by
the leaders and fetchers (``kafkawire.replication.throttle``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kraft.controller import validate_manual_assignment
from protocol._generated.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
)
from protocol._generated.alter_partition_reassignments_response import (
    AlterPartitionReassignmentsResponse,
)
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 45
VERSIONS = (0, 1)

R = AlterPartitionReassignmentsResponse


def _check(broker: Broker, topic: str, partition: int, replicas: list[int] | None) -> None:
    img = broker.image
    t = img.topics.get(topic)
    if t is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {topic}.")
    p = t.partitions.get(partition)
    if p is None:
        raise KafkaError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {topic}:{partition}."
        )
    if replicas is None:
        if not p.adding_replicas and not p.removing_replicas:
            raise KafkaError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)
        return
    validate_manual_assignment(img, replicas, None)


async def handle(
    broker: Broker, ctx: RequestContext, req: AlterPartitionReassignmentsRequest
) -> R:
    responses = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            code, msg = ErrorCode.NONE, None
            try:
                _check(broker, t.name, p.partition_index, p.replicas)
                await broker.controller.reassign(t.name, p.partition_index, p.replicas)
            except KafkaError as e:
                code, msg = e.code, e.message
            parts.append(R.ReassignablePartitionResponse(
                partition_index=p.partition_index, error_code=code, error_message=msg
            ))
        responses.append(R.ReassignableTopicResponse(name=t.name, partitions=parts))
    return R(
        throttle_time_ms=0,
        allow_replication_factor_change=req.allow_replication_factor_change
        if ctx.api_version >= 1 else True,
        error_code=ErrorCode.NONE,
        error_message=None,
        responses=responses,
    )
