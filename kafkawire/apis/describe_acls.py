"""DescribeAcls (key 29), versions 1-3.

kafkawire has no authorizer (``authorizer.class.name`` unset in Kafka's terms), so every ACL
request is answered as Kafka answers it without one: SECURITY_DISABLED, "No Authorizer is
configured on the broker", no resources. Kafka's ClientCompatibilityTest counts that answer as
"describeAcls supported".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol._generated.describe_acls_request import DescribeAclsRequest
from protocol._generated.describe_acls_response import DescribeAclsResponse
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.server import RequestContext

API_KEY = 29
VERSIONS = (1, 3)


async def handle(
    broker: Broker, ctx: RequestContext, req: DescribeAclsRequest
) -> DescribeAclsResponse:
    return DescribeAclsResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.SECURITY_DISABLED,
        error_message="No Authorizer is configured on the broker",
        resources=[],
    )
