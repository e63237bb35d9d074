"""DescribeDelegationToken (key 41), versions 1-3: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED /
DELEGATION_TOKEN_AUTH_DISABLED as CreateDelegationToken; else the live tokens whose owner is
in ``owners`` (null: every owner) that the principal owns, requested or may renew, or may
DESCRIBE (ACL on the DELEGATION_TOKEN resource named by the token id), with their HMACs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkawire.apis.create_delegation_token import token_request_error
from kraft import tokens
from kraft.acls import DELEGATION_TOKEN, DESCRIBE
from protocol._generated.describe_delegation_token_request import DescribeDelegationTokenRequest
from protocol._generated.describe_delegation_token_response import (
    DescribeDelegationTokenResponse,
)
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 41
VERSIONS = (1, 3)


async def handle(
    broker: Broker, ctx: RequestContext, req: DescribeDelegationTokenRequest
) -> DescribeDelegationTokenResponse:
    code = token_request_error(broker, ctx)
    resp = DescribeDelegationTokenResponse(error_code=code, tokens=[], throttle_time_ms=0)
    if code != ErrorCode.NONE:
        return resp
    secret = broker.token_settings()[0]
    assert secret is not None
    owners = None if req.owners is None else {
        f"{o.principal_type}:{o.principal_name}" for o in req.owners}
    me, now = ctx.connection.principal, broker.clock_ms()
    R = DescribeDelegationTokenResponse
    for info in sorted(broker.image.tokens.values(), key=lambda t: t.issue_ms):
        if info.expiry_ms < now or (owners is not None and info.owner not in owners):
            continue
        if me not in (info.owner, info.requester, *info.renewers) and not ctx.allowed(
                DESCRIBE, DELEGATION_TOKEN, info.token_id, log_denied=False):
            continue
        owner, requester = info.owner.split(":", 1), info.requester.split(":", 1)
        resp.tokens.append(R.DescribedDelegationToken(
            principal_type=owner[0], principal_name=owner[1],
            token_requester_principal_type=requester[0],
            token_requester_principal_name=requester[1], issue_timestamp=info.issue_ms,
            expiry_timestamp=info.expiry_ms, max_timestamp=info.max_ms,
            token_id=info.token_id, hmac=tokens.token_hmac(secret, info.token_id),
            renewers=[R.DescribedDelegationTokenRenewer(
                principal_type=r.split(":", 1)[0], principal_name=r.split(":", 1)[1])
                for r in info.renewers]))
    return resp
