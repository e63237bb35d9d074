"""CreateDelegationToken (key 38), versions 1-3.

Delegation tokens need an authenticated (SASL, or SSL with a client certificate) connection;
Kafka refuses a token request on a PLAINTEXT listener or from an anonymous SSL client with
DELEGATION_TOKEN_REQUEST_NOT_ALLOWED before looking at it. kafkawire does not issue tokens
(Kafka without ``delegation.token.secret.key``): an authenticated client gets
DELEGATION_TOKEN_AUTH_DISABLED, as from such a Kafka. The principal fields are those of
Kafka's answer: the connection's principal, or the requested owner (v3).
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


def token_request_error(broker: Broker, ctx: RequestContext) -> ErrorCode:
    """Kafka's ``allowTokenRequests``, then "token authentication disabled"."""
    security = broker.server.security
    protocol = "PLAINTEXT" if security is None else security.protocol(ctx.connection.listener)
    if protocol == "PLAINTEXT" or (
            protocol == "SSL" and ctx.connection.principal == "User:ANONYMOUS"):
        return ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    return ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED


async def handle(
    broker: Broker, ctx: RequestContext, req: CreateDelegationTokenRequest
) -> CreateDelegationTokenResponse:
    kind, _sep, name = ctx.connection.principal.partition(":")
    owner = (kind, name)
    requester = ("", "")
    if ctx.api_version >= 3:
        requester = owner
        if req.owner_principal_name:
            owner = (req.owner_principal_type or "User", req.owner_principal_name)
    return CreateDelegationTokenResponse(
        error_code=token_request_error(broker, ctx),
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
