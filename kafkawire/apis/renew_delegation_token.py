"""RenewDelegationToken (key 39), versions 1-2: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED /
DELEGATION_TOKEN_AUTH_DISABLED as CreateDelegationToken; else the token of the HMAC
(DELEGATION_TOKEN_NOT_FOUND), renewed by its owner or a renewer
(DELEGATION_TOKEN_OWNER_MISMATCH) before it expires (DELEGATION_TOKEN_EXPIRED) until
``now + renew_period_ms`` (-1: ``delegation.token.expiry.time.ms``), at most its max time."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkawire.apis.create_delegation_token import token_request_error
from kraft import tokens
from protocol._generated.renew_delegation_token_request import RenewDelegationTokenRequest
from protocol._generated.renew_delegation_token_response import RenewDelegationTokenResponse
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 39
VERSIONS = (1, 2)

async def change(broker: Broker, ctx: RequestContext, mac: bytes, period_ms: int,
                 renewing: bool) -> tuple[ErrorCode, int]:
    """(error, new expiry ms) of a renewal or an expiry (``kraft.tokens``)."""
    code = token_request_error(broker, ctx)
    if code != ErrorCode.NONE:
        return code, -1
    secret, _max_lifetime_ms, renew_period_ms = broker.token_settings()
    assert secret is not None
    now = broker.clock_ms()
    async with broker.metadata_lock:
        try:
            info = tokens.by_hmac(broker.image.tokens, secret, mac)
            if renewing:
                records, expiry = tokens.renew(info, ctx.connection.principal, period_ms, now,
                                               renew_period_ms)
            else:
                records, expiry = tokens.expire(info, ctx.connection.principal, period_ms, now)
        except KafkaError as e:
            return e.code, -1
        await broker.commit_metadata(records)
    return ErrorCode.NONE, expiry


async def handle(
    broker: Broker, ctx: RequestContext, req: RenewDelegationTokenRequest
) -> RenewDelegationTokenResponse:
    code, expiry = await change(broker, ctx, bytes(req.hmac), req.renew_period_ms, True)
    return RenewDelegationTokenResponse(error_code=code, expiry_timestamp_ms=expiry,
                                        throttle_time_ms=0)
