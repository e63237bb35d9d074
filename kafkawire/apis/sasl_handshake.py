"""SaslHandshake (key 17), versions 0-1.

kafkawire's listeners are PLAINTEXT (no SASL). Kafka answers a SaslHandshake that reaches a
PLAINTEXT listener with ILLEGAL_SASL_STATE and no mechanisms; so do we. A client configured for
SASL then fails with Kafka's error instead of a closed connection.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol._generated.sasl_handshake_request import SaslHandshakeRequest
from protocol._generated.sasl_handshake_response import SaslHandshakeResponse
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.server import RequestContext

API_KEY = 17
VERSIONS = (0, 1)


async def handle(
    broker: Broker, ctx: RequestContext, req: SaslHandshakeRequest
) -> SaslHandshakeResponse:
    return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
