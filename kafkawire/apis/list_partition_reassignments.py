"""ListPartitionReassignments (key 46), version 0 (``kafka-reassign-partitions --list``).

The partitions with a reassignment in progress (replicas, adding, removing), all of them or
those named; a named partition that is not moving (or unknown) is left out, as Kafka does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kraft.replication_control import reassignments
from protocol._generated.list_partition_reassignments_request import (
    ListPartitionReassignmentsRequest,
)
from protocol._generated.list_partition_reassignments_response import (
    ListPartitionReassignmentsResponse,
)
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 46
VERSIONS = (0, 0)


async def handle(
    broker: Broker, ctx: RequestContext, req: ListPartitionReassignmentsRequest
) -> ListPartitionReassignmentsResponse:
    R = ListPartitionReassignmentsResponse
    wanted = None if req.topics is None else {
        (t.name, p) for t in req.topics for p in t.partition_indexes}
    topics: dict[str, list[ListPartitionReassignmentsResponse.OngoingPartitionReassignment]] = {}
    for name, part in reassignments(broker.image):
        if wanted is not None and (name, part.partition) not in wanted:
            continue
        topics.setdefault(name, []).append(R.OngoingPartitionReassignment(
            partition_index=part.partition, replicas=list(part.replicas),
            adding_replicas=list(part.adding_replicas),
            removing_replicas=list(part.removing_replicas)))
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
             topics=[R.OngoingTopicReassignment(name=n, partitions=ps)
                     for n, ps in sorted(topics.items())])
