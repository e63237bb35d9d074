"""InitProducerId (key 22), versions 0-5 (v6, KIP-939, is unstable in Kafka and not served).

Without a transactional id (idempotent producers, the default of Java and kafka-python 3):
a new producer id with epoch 0, always, as Kafka does (an idempotent producer asking to bump
its epoch after an error gets a fresh id too). Ids come in blocks reserved through the metadata
log (ProducerIdsRecord), so they never repeat across restarts.
With a transactional id the request belongs to the transaction coordinator
(``broker.txn_coordinator``); while none is configured the answer is
COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol._generated.init_producer_id_request import InitProducerIdRequest
from protocol._generated.init_producer_id_response import InitProducerIdResponse
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.server import RequestContext

API_KEY = 22
VERSIONS = (0, 5)


async def handle(
    broker: Broker, ctx: RequestContext, req: InitProducerIdRequest
) -> InitProducerIdResponse:
    if req.transactional_id is not None:
        txn = getattr(broker, "txn_coordinator", None)
        if txn is None:
            return InitProducerIdResponse(
                error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, producer_id=-1, producer_epoch=-1
            )
        return await txn.init_producer_id(ctx, req)  # type: ignore[no-any-return]
    pid = await broker.next_producer_id()
    return InitProducerIdResponse(
        throttle_time_ms=0, error_code=0, producer_id=pid, producer_epoch=0
    )
