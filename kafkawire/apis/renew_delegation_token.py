"""RenewDelegationToken (key 39), versions 1-2: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED on a
PLAINTEXT listener or from an anonymous SSL client, else DELEGATION_TOKEN_AUTH_DISABLED (no
token support), expiry -1, as Kafka (see ``create_delegation_token``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from kafkawire.apis.create_delegation_token import token_request_error
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


def not_allowed(response_cls: type[T], code: ErrorCode) -> T:
    """Renew and Expire share their answer's shape: an error and an expiry time
    (``create_delegation_token.token_request_error``)."""
    return response_cls(
        error_code=code,
        expiry_timestamp_ms=-1,
        throttle_time_ms=0,
    )


async def handle(
    broker: Broker, ctx: RequestContext, req: RenewDelegationTokenRequest
) -> RenewDelegationTokenResponse:
    return not_allowed(RenewDelegationTokenResponse, token_request_error(broker, ctx))
