"""ElectLeaders (key 43), versions 0-2 (``kafka-leader-election``).

Every partition of a single node is led by its first (preferred, and only) replica, so an
election is never needed. Answers as Kafka's controller does for partitions already led by
their preferred replica (preferred election, or an unclean one with a live leader):

- named partitions: ELECTION_NOT_NEEDED "Leader election not needed for topic partition.";
  an unknown topic: UNKNOWN_TOPIC_OR_PARTITION "No such topic as <t>"; an unknown partition:
  "No such partition as <t>-<p>";
- ``topic_partitions`` null (every partition): no results at all (Kafka leaves out the
  partitions that needed no election);
- top-level error NONE (v1+). v0 has no election type (preferred).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol._generated.elect_leaders_request import ElectLeadersRequest
from protocol._generated.elect_leaders_response import ElectLeadersResponse
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.server import RequestContext

API_KEY = 43
VERSIONS = (0, 2)

R = ElectLeadersResponse
NOT_NEEDED = "Leader election not needed for topic partition."


def _result(broker: Broker, topic: str, partition: int) -> R.PartitionResult:
    t = broker.image.topics.get(topic)
    if t is None:
        code, msg = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {topic}"
    elif partition not in t.partitions:
        code, msg = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {topic}-{partition}"
    else:
        # the preferred replica (first of the list) leads; nothing to elect
        code, msg = ErrorCode.ELECTION_NOT_NEEDED, NOT_NEEDED
    return R.PartitionResult(partition_id=partition, error_code=code, error_message=msg)


async def handle(broker: Broker, ctx: RequestContext, req: ElectLeadersRequest) -> R:
    results = [
        R.ReplicaElectionResult(
            topic=tp.topic, partition_result=[_result(broker, tp.topic, p) for p in tp.partitions]
        )
        for tp in req.topic_partitions or []
    ]
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, replica_election_results=results)
