"""RenewDelegationToken (key 39), versions 1-2: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, expiry -1, as
Kafka answers on a PLAINTEXT listener (see ``create_delegation_token``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol._generated.renew_delegation_token_request import RenewDelegationTokenRequest
from protocol._generated.renew_delegation_token_response import RenewDelegationTokenResponse
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.server import RequestContext

API_KEY = 39
VERSIONS = (1, 2)


async def handle(
    broker: Broker, ctx: RequestContext, req: RenewDelegationTokenRequest
) -> RenewDelegationTokenResponse:
    return RenewDelegationTokenResponse(
        error_code=ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED,
        expiry_timestamp_ms=-1,
        throttle_time_ms=0,
    )
