"""ExpireDelegationToken (key 40), versions 1-2: like RenewDelegationToken; a negative
``expiry_time_period_ms`` expires the token at once (RemoveDelegationTokenRecord), otherwise
its expiry becomes ``now + period`` (at most its max time)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkawire.apis.renew_delegation_token import change
from protocol._generated.expire_delegation_token_request import ExpireDelegationTokenRequest
from protocol._generated.expire_delegation_token_response import ExpireDelegationTokenResponse

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 40
VERSIONS = (1, 2)


async def handle(
    broker: Broker, ctx: RequestContext, req: ExpireDelegationTokenRequest
) -> ExpireDelegationTokenResponse:
    code, expiry = await change(broker, ctx, bytes(req.hmac), req.expiry_time_period_ms, False)
    return ExpireDelegationTokenResponse(error_code=code, expiry_timestamp_ms=expiry,
                                         throttle_time_ms=0)
