"""ExpireDelegationToken (key 40), versions 1-2: answered like RenewDelegationToken
(DELEGATION_TOKEN_REQUEST_NOT_ALLOWED or DELEGATION_TOKEN_AUTH_DISABLED, expiry -1), as Kafka
(see ``create_delegation_token``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkawire.apis.create_delegation_token import token_request_error
from kafkawire.apis.renew_delegation_token import not_allowed
from protocol._generated.expire_delegation_token_request import ExpireDelegationTokenRequest
from protocol._generated.expire_delegation_token_response import ExpireDelegationTokenResponse

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.server import RequestContext

API_KEY = 40
VERSIONS = (1, 2)


async def handle(
    broker: Broker, ctx: RequestContext, req: ExpireDelegationTokenRequest
) -> ExpireDelegationTokenResponse:
    return not_allowed(ExpireDelegationTokenResponse, token_request_error(broker, ctx))
