"""DeleteAcls (key 31), versions 1-3: SECURITY_DISABLED for every filter ("No Authorizer is
configured."), nothing matched, as Kafka without an authorizer (see ``describe_acls``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkawire.apis.create_acls import NO_AUTHORIZER
from protocol._generated.delete_acls_request import DeleteAclsRequest
from protocol._generated.delete_acls_response import DeleteAclsResponse
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.server import RequestContext

API_KEY = 31
VERSIONS = (1, 3)


async def handle(broker: Broker, ctx: RequestContext, req: DeleteAclsRequest) -> DeleteAclsResponse:
    return DeleteAclsResponse(
        throttle_time_ms=0,
        filter_results=[
            DeleteAclsResponse.DeleteAclsFilterResult(
                error_code=ErrorCode.SECURITY_DISABLED, error_message=NO_AUTHORIZER, matching_acls=[]
            )
            for _ in req.filters
        ],
    )
