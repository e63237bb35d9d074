"""RenewDelegationToken (key 39), versions 1-2: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, expiry -1,
as Kafka answers on a PLAINTEXT listener (see ``create_delegation_token``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from protocol._generated.expire_delegation_token_response import ExpireDelegationTokenResponse
from protocol._generated.renew_delegation_token_request import RenewDelegationTokenRequest
from protocol._generated.renew_delegation_token_response import RenewDelegationTokenResponse
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.server import RequestContext

API_KEY = 39
VERSIONS = (1, 2)

T = TypeVar("T", RenewDelegationTokenResponse, ExpireDelegationTokenResponse)


def not_allowed(response_cls: type[T]) -> T:
    """Renew and Expire share their answer's shape: an error and an expiry time."""
    return response_cls(
        error_code=ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED,
        expiry_timestamp_ms=-1,
        throttle_time_ms=0,
    )


async def handle(
    broker: Broker, ctx: RequestContext, req: RenewDelegationTokenRequest
) -> RenewDelegationTokenResponse:
    return not_allowed(RenewDelegationTokenResponse)
