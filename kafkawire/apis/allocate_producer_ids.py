"""AllocateProducerIds (key 67), version 0; controller listener only.

A broker's transaction coordinator takes producer ids in blocks of 1000 from the controller:
a ProducerIdsRecord moves the cluster's next producer id past the block, and the answer is
(``producer_id_start``, ``producer_id_len`` 1000). STALE_BROKER_EPOCH for an unknown broker or
an old broker epoch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kraft.cluster_control import PRODUCER_ID_BLOCK_SIZE
from protocol._generated.allocate_producer_ids_request import AllocateProducerIdsRequest
from protocol._generated.allocate_producer_ids_response import AllocateProducerIdsResponse
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 67
VERSIONS = (0, 0)


async def handle(
    broker: Broker, ctx: RequestContext, req: AllocateProducerIdsRequest
) -> AllocateProducerIdsResponse:
    try:
        start = await broker.controller.allocate_producer_ids(req.broker_id, req.broker_epoch)
    except KafkaError as e:
        return AllocateProducerIdsResponse(throttle_time_ms=0, error_code=e.code,
                                           producer_id_start=0, producer_id_len=0)
    return AllocateProducerIdsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                       producer_id_start=start,
                                       producer_id_len=PRODUCER_ID_BLOCK_SIZE)
