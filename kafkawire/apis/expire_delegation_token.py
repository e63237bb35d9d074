"""ExpireDelegationToken (key 40), versions 1-2: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, expiry -1, as
Kafka answers on a PLAINTEXT listener (see ``create_delegation_token``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol._generated.expire_delegation_token_request import ExpireDelegationTokenRequest
from protocol._generated.expire_delegation_token_response import ExpireDelegationTokenResponse
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.server import RequestContext

API_KEY = 40
VERSIONS = (1, 2)


async def handle(
    broker: Broker, ctx: RequestContext, req: ExpireDelegationTokenRequest
) -> ExpireDelegationTokenResponse:
    return ExpireDelegationTokenResponse(
        error_code=ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED,
        expiry_timestamp_ms=-1,
        throttle_time_ms=0,
    )
