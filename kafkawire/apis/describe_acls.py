"""DescribeAcls (key 29), versions 1-3.

Without an authorizer: SECURITY_DISABLED, "No Authorizer is configured on the broker", no
resources (Kafka's ClientCompatibilityTest counts that answer as "describeAcls supported").
With the StandardAuthorizer: DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED), then
the ACLs matching the filter (``kraft.acls.AclFilter``: ANY / MATCH / null fields), grouped by
resource pattern.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kraft.acls import CLUSTER, CLUSTER_NAME, DESCRIBE, AclFilter, describe_acls
from protocol._generated.describe_acls_request import DescribeAclsRequest
from protocol._generated.describe_acls_response import DescribeAclsResponse
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 29
VERSIONS = (1, 3)


async def handle(
    broker: Broker, ctx: RequestContext, req: DescribeAclsRequest
) -> DescribeAclsResponse:
    if not broker.authorizer.enabled:
        return DescribeAclsResponse(
            throttle_time_ms=0, error_code=ErrorCode.SECURITY_DISABLED,
            error_message="No Authorizer is configured on the broker", resources=[])
    if not ctx.allowed(DESCRIBE, CLUSTER, CLUSTER_NAME):
        return DescribeAclsResponse(throttle_time_ms=0,
                                    error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                    error_message=None, resources=[])
    flt = AclFilter(req.resource_type_filter, req.resource_name_filter,
                    req.pattern_type_filter, req.principal_filter, req.host_filter,
                    req.operation, req.permission_type)
    grouped: dict[tuple[int, str, int], list[DescribeAclsResponse.AclDescription]] = {}
    for acl in describe_acls(broker.image.acls, flt):
        grouped.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(
            DescribeAclsResponse.AclDescription(
                principal=acl.principal, host=acl.host, operation=acl.operation,
                permission_type=acl.permission_type))
    return DescribeAclsResponse(throttle_time_ms=0, error_code=0, error_message=None, resources=[
        DescribeAclsResponse.DescribeAclsResource(resource_type=t, resource_name=n,
                                                  pattern_type=p, acls=acls)
        for (t, n, p), acls in grouped.items()])
