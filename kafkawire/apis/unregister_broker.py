"""UnregisterBroker (key 64), version 0; broker and controller listeners
(``kafka-cluster unregister --id N``).

Removes a broker's registration (UnregisterBrokerRecord) after taking it out of every ISR and
leadership. BROKER_ID_NOT_REGISTERED "Broker ID N is not currently registered" when unknown.
Kafka's brokers forward it to the active controller; here the controller is this node.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol._generated.unregister_broker_request import UnregisterBrokerRequest
from protocol._generated.unregister_broker_response import UnregisterBrokerResponse
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 64
VERSIONS = (0, 0)


async def handle(
    broker: Broker, ctx: RequestContext, req: UnregisterBrokerRequest
) -> UnregisterBrokerResponse:
    try:
        await broker.controller.unregister(req.broker_id)
    except KafkaError as e:
        return UnregisterBrokerResponse(throttle_time_ms=0, error_code=e.code,
                                        error_message=e.message)
    return UnregisterBrokerResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                    error_message=None)
