"""CreateDelegationToken (key 38), versions 1-3.

Kafka refuses a token request on a PLAINTEXT listener, from an anonymous SSL client or from a
token-authenticated client with DELEGATION_TOKEN_REQUEST_NOT_ALLOWED; without
``delegation.token.secret.key`` an authenticated client gets DELEGATION_TOKEN_AUTH_DISABLED.
Otherwise (``kraft.tokens``): the owner is the principal, or (v3) the requested owner, which
needs CREATE_TOKENS on that user (else DELEGATION_TOKEN_AUTHORIZATION_FAILED); renewers must be
``User:`` principals (INVALID_PRINCIPAL_TYPE); the lifetime is the smaller of the requested
``max_lifetime_ms`` and ``delegation.token.max.lifetime.ms``, the first expiry
``delegation.token.expiry.time.ms`` away. The token is a DelegationTokenRecord; the response
carries its id and HMAC (HMAC-SHA512 of the id with the secret).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from kafkawire.storage.format import uuid_to_base64
from kraft import tokens
from kraft.acls import CREATE_TOKENS, USER
from protocol._generated.create_delegation_token_request import CreateDelegationTokenRequest
from protocol._generated.create_delegation_token_response import CreateDelegationTokenResponse
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 38
VERSIONS = (1, 3)


def token_request_error(broker: Broker, ctx: RequestContext) -> ErrorCode:
    """Kafka's ``allowTokenRequests``, then "token authentication disabled" without a
    ``delegation.token.secret.key``; NONE when the request may go on."""
    security = broker.server.security
    protocol = "PLAINTEXT" if security is None else security.protocol(ctx.connection.listener)
    if protocol == "PLAINTEXT" or ctx.connection.state.get("token_authenticated") or (
            protocol == "SSL" and ctx.connection.principal == "User:ANONYMOUS"):
        return ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    if broker.token_settings()[0] is None:
        return ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
    return ErrorCode.NONE


async def handle(
    broker: Broker, ctx: RequestContext, req: CreateDelegationTokenRequest
) -> CreateDelegationTokenResponse:
    kind, _sep, name = ctx.connection.principal.partition(":")
    owner = requester = (kind, name)
    if ctx.api_version >= 3 and req.owner_principal_name:
        owner = (req.owner_principal_type or "User", req.owner_principal_name)
    resp = CreateDelegationTokenResponse(
        error_code=token_request_error(broker, ctx), principal_type=owner[0],
        principal_name=owner[1],
        token_requester_principal_type=requester[0] if ctx.api_version >= 3 else "",
        token_requester_principal_name=requester[1] if ctx.api_version >= 3 else "",
        issue_timestamp_ms=-1, expiry_timestamp_ms=-1, max_timestamp_ms=-1, token_id="",
        hmac=b"", throttle_time_ms=0)
    if resp.error_code != ErrorCode.NONE:
        return resp
    if owner != requester and not ctx.allowed(CREATE_TOKENS, USER, f"{owner[0]}:{owner[1]}"):
        resp.error_code = ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED
        return resp
    secret, max_lifetime_ms, renew_period_ms = broker.token_settings()
    assert secret is not None
    try:
        info = tokens.create(
            uuid_to_base64(uuid.uuid4()), f"{owner[0]}:{owner[1]}",
            f"{requester[0]}:{requester[1]}",
            [f"{r.principal_type}:{r.principal_name}" for r in req.renewers], broker.clock_ms(),
            req.max_lifetime_ms, max_lifetime_ms, renew_period_ms)
    except KafkaError as e:
        resp.error_code = e.code
        return resp
    async with broker.metadata_lock:
        await broker.commit_metadata([tokens.record_of(info)])
    resp.issue_timestamp_ms, resp.expiry_timestamp_ms = info.issue_ms, info.expiry_ms
    resp.max_timestamp_ms, resp.token_id = info.max_ms, info.token_id
    resp.hmac = tokens.token_hmac(secret, info.token_id)
    return resp
