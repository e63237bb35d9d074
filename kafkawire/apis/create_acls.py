"""CreateAcls (key 30), versions 1-3: SECURITY_DISABLED for every creation ("No Authorizer is
configured."), as Kafka without an authorizer (see ``describe_acls``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol._generated.create_acls_request import CreateAclsRequest
from protocol._generated.create_acls_response import CreateAclsResponse
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.server import RequestContext

API_KEY = 30
VERSIONS = (1, 3)
NO_AUTHORIZER = "No Authorizer is configured."


async def handle(broker: Broker, ctx: RequestContext, req: CreateAclsRequest) -> CreateAclsResponse:
    return CreateAclsResponse(
        throttle_time_ms=0,
        results=[
            CreateAclsResponse.AclCreationResult(
                error_code=ErrorCode.SECURITY_DISABLED, error_message=NO_AUTHORIZER
            )
            for _ in req.creations
        ],
    )
