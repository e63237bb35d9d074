"""DeleteAcls (key 31), versions 1-3.

Without an authorizer: SECURITY_DISABLED for every filter ("No Authorizer is configured."),
nothing matched, as Kafka. With the StandardAuthorizer: ALTER on the cluster (else
CLUSTER_AUTHORIZATION_FAILED per filter); each filter removes the ACLs it matches
(RemoveAccessControlEntryRecord) and lists them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkawire.apis.create_acls import NO_AUTHORIZER
from kraft.acls import ALTER, CLUSTER, CLUSTER_NAME, AclFilter, delete_acls
from protocol._generated.delete_acls_request import DeleteAclsRequest
from protocol._generated.delete_acls_response import DeleteAclsResponse
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 31
VERSIONS = (1, 3)
Result = DeleteAclsResponse.DeleteAclsFilterResult


async def handle(broker: Broker, ctx: RequestContext, req: DeleteAclsRequest) -> DeleteAclsResponse:
    if not broker.authorizer.enabled or not ctx.allowed(ALTER, CLUSTER, CLUSTER_NAME):
        code, msg = ((ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER) if not
                     broker.authorizer.enabled else (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None))
        return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
            Result(error_code=code, error_message=msg, matching_acls=[]) for _ in req.filters])
    filters = [AclFilter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
                         f.principal_filter, f.host_filter, f.operation, f.permission_type)
               for f in req.filters]
    async with broker.metadata_lock:
        records, matched = delete_acls(broker.image.acls, filters)
        await broker.commit_metadata(records)
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
        Result(error_code=0, error_message=None, matching_acls=[
            DeleteAclsResponse.DeleteAclsMatchingAcl(
                error_code=0, error_message=None, resource_type=a.resource_type,
                resource_name=a.resource_name, pattern_type=a.pattern_type,
                principal=a.principal, host=a.host, operation=a.operation,
                permission_type=a.permission_type) for a in acls])
        for acls in matched])
