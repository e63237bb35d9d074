"""DescribeDelegationToken (key 41), versions 1-3: no tokens; DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
or DELEGATION_TOKEN_AUTH_DISABLED as Kafka (see ``create_delegation_token``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkawire.apis.create_delegation_token import token_request_error
from protocol._generated.describe_delegation_token_request import DescribeDelegationTokenRequest
from protocol._generated.describe_delegation_token_response import (
    DescribeDelegationTokenResponse,
)

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.server import RequestContext

API_KEY = 41
VERSIONS = (1, 3)


async def handle(
    broker: Broker, ctx: RequestContext, req: DescribeDelegationTokenRequest
) -> DescribeDelegationTokenResponse:
    return DescribeDelegationTokenResponse(
        error_code=token_request_error(broker, ctx), tokens=[], throttle_time_ms=0
    )
