"""ElectLeaders (key 43), versions 0-2 (``kafka-leader-election``).

Elections are decided by the controller logic (``kraft.replication_control.elect_leader``) and
committed as PartitionChangeRecords through ``ControllerService.elect_leader``:
- PREFERRED (0; v0 has no type): the first replica leads when it is in the ISR and usable;
  already leading: ELECTION_NOT_NEEDED "Leader election not needed for topic partition.";
  not in the ISR or not usable: PREFERRED_LEADER_NOT_AVAILABLE.
- UNCLEAN (1): only for a partition without a leader: an ISR member, else any usable replica
  (which becomes the ISR); a live leader: ELECTION_NOT_NEEDED; none: ELIGIBLE_LEADERS_NOT_AVAILABLE.
- An unknown topic: UNKNOWN_TOPIC_OR_PARTITION "No such topic as <t>"; an unknown partition:
  "No such partition as <t>-<p>".
- ``topic_partitions`` null (every partition): results only for the partitions that needed an
  election (Kafka leaves the others out).
- top-level error NONE (v1+).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol._generated.elect_leaders_request import ElectLeadersRequest
from protocol._generated.elect_leaders_response import ElectLeadersResponse
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 43
VERSIONS = (0, 2)

R = ElectLeadersResponse
async def _result(broker: Broker, kind: int, topic: str, partition: int) -> R.PartitionResult:
    t = broker.image.topics.get(topic)
    code, msg = ErrorCode.NONE, None
    if t is None:
        code, msg = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {topic}"
    elif partition not in t.partitions:
        code, msg = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {topic}-{partition}"
    else:
        try:
            await broker.controller.elect_leader(topic, partition, kind)
        except KafkaError as e:
            code, msg = e.code, e.message
    return R.PartitionResult(partition_id=partition, error_code=code, error_message=msg)


async def handle(broker: Broker, ctx: RequestContext, req: ElectLeadersRequest) -> R:
    kind = req.election_type if ctx.api_version >= 1 else 0
    results = []
    if req.topic_partitions is None:
        for name, t in sorted(broker.image.topics.items()):
            parts = [await _result(broker, kind, name, p) for p in sorted(t.partitions)]
            parts = [r for r in parts if r.error_code != ErrorCode.ELECTION_NOT_NEEDED]
            if parts:
                results.append(R.ReplicaElectionResult(topic=name, partition_result=parts))
    else:
        for tp in req.topic_partitions:
            results.append(R.ReplicaElectionResult(
                topic=tp.topic,
                partition_result=[await _result(broker, kind, tp.topic, p)
                                  for p in tp.partitions]))
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, replica_election_results=results)
