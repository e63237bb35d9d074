"""ListPartitionReassignments (key 46), version 0 (``kafka-reassign-partitions --list``).

No reassignment is ever in progress on a single node (AlterPartitionReassignments can only
confirm the current replicas, which completes at once), so the answer lists no topics, for
named partitions and unknown topics alike, as Kafka's answer when nothing is moving.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol._generated.list_partition_reassignments_request import (
    ListPartitionReassignmentsRequest,
)
from protocol._generated.list_partition_reassignments_response import (
    ListPartitionReassignmentsResponse,
)
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.server import RequestContext

API_KEY = 46
VERSIONS = (0, 0)


async def handle(
    broker: Broker, ctx: RequestContext, req: ListPartitionReassignmentsRequest
) -> ListPartitionReassignmentsResponse:
    return ListPartitionReassignmentsResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, topics=[]
    )
