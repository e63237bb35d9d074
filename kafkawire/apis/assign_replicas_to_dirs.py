"""AssignReplicasToDirs (key 73), version 0; controller listener only (KIP-858).

An Apache Kafka broker reports, after creating replicas, which log directory holds each
(its AssignmentsManager retries until the controller accepts). Answered as Kafka's controller
(kraft/directories.py): top-level STALE_BROKER_EPOCH for an unknown broker or an old epoch,
NOT_CONTROLLER off the active controller; per partition UNKNOWN_TOPIC_ID,
UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER (no replica there) or NONE, the directory
recorded in the partition (PartitionChangeRecord ``directories``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol._generated.assign_replicas_to_dirs_request import AssignReplicasToDirsRequest
from protocol._generated.assign_replicas_to_dirs_response import AssignReplicasToDirsResponse
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 73
VERSIONS = (0, 0)
R = AssignReplicasToDirsResponse


async def handle(broker: Broker, ctx: RequestContext,
                 req: AssignReplicasToDirsRequest) -> AssignReplicasToDirsResponse:
    wanted = [(d.id, t.topic_id, p.partition_index)
              for d in req.directories for t in d.topics for p in t.partitions]
    try:
        results = await broker.controller.assign_replicas_to_dirs(
            req.broker_id, req.broker_epoch, wanted)
    except KafkaError as e:
        return R(throttle_time_ms=0, error_code=e.code, directories=[])
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, directories=[
        R.DirectoryData(id=d.id, topics=[R.TopicData(topic_id=t.topic_id, partitions=[
            R.PartitionData(partition_index=p.partition_index,
                            error_code=results[(d.id, t.topic_id, p.partition_index)])
            for p in t.partitions]) for t in d.topics]) for d in req.directories])
