"""SaslAuthenticate (key 36), versions 0-2: on a PLAINTEXT listener Kafka answers
ILLEGAL_SASL_STATE, "SaslAuthenticate request received after successful authentication";
so do we (see ``sasl_handshake``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol._generated.sasl_authenticate_request import SaslAuthenticateRequest
from protocol._generated.sasl_authenticate_response import SaslAuthenticateResponse
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.server import RequestContext

API_KEY = 36
VERSIONS = (0, 2)


async def handle(
    broker: Broker, ctx: RequestContext, req: SaslAuthenticateRequest
) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(
        error_code=ErrorCode.ILLEGAL_SASL_STATE,
        error_message="SaslAuthenticate request received after successful authentication",
        auth_bytes=b"",
        session_lifetime_ms=0,
    )
