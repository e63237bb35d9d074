"""DescribeDelegationToken (key 41), versions 1-3: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, no
tokens, as Kafka answers on a PLAINTEXT listener (see ``create_delegation_token``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol._generated.describe_delegation_token_request import DescribeDelegationTokenRequest
from protocol._generated.describe_delegation_token_response import (
    DescribeDelegationTokenResponse,
)
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.server import RequestContext

API_KEY = 41
VERSIONS = (1, 3)


async def handle(
    broker: Broker, ctx: RequestContext, req: DescribeDelegationTokenRequest
) -> DescribeDelegationTokenResponse:
    return DescribeDelegationTokenResponse(
        error_code=ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, tokens=[], throttle_time_ms=0
    )
