"""CreateDelegationToken (key 38), versions 1-3.

Delegation tokens need an authenticated (SASL, or SSL with client auth) connection; Kafka
refuses every token request that arrives on a PLAINTEXT listener with
DELEGATION_TOKEN_REQUEST_NOT_ALLOWED before looking at it, and kafkawire's listeners are all
PLAINTEXT. The principal fields are those of Kafka's answer: the connection's principal
``User:ANONYMOUS``, or the requested owner (v3).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol._generated.create_delegation_token_request import CreateDelegationTokenRequest
from protocol._generated.create_delegation_token_response import CreateDelegationTokenResponse
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.server import RequestContext

API_KEY = 38
VERSIONS = (1, 3)
ANONYMOUS = ("User", "ANONYMOUS")


async def handle(
    broker: Broker, ctx: RequestContext, req: CreateDelegationTokenRequest
) -> CreateDelegationTokenResponse:
    owner = ANONYMOUS
    requester = ("", "")
    if ctx.api_version >= 3:
        requester = ANONYMOUS
        if req.owner_principal_name:
            owner = (req.owner_principal_type or "User", req.owner_principal_name)
    return CreateDelegationTokenResponse(
        error_code=ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED,
        principal_type=owner[0],
        principal_name=owner[1],
        token_requester_principal_type=requester[0],
        token_requester_principal_name=requester[1],
        issue_timestamp_ms=-1,
        expiry_timestamp_ms=-1,
        max_timestamp_ms=-1,
        token_id="",
        hmac=b"",
        throttle_time_ms=0,
    )
