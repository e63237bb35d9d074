"""CreateAcls (key 30), versions 1-3.

Without an authorizer (``authorizer.class.name`` unset): SECURITY_DISABLED for every creation
("No Authorizer is configured."), as Kafka. With the StandardAuthorizer: the principal needs
ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED for every creation); each ACL is
validated as Kafka's AclControlManager does (INVALID_REQUEST with its message, ``kraft.acls``)
and committed as an AccessControlEntryRecord; an ACL that already exists is not duplicated.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from kraft.acls import ALTER, CLUSTER, CLUSTER_NAME, Acl, create_acls
from protocol._generated.create_acls_request import CreateAclsRequest
from protocol._generated.create_acls_response import CreateAclsResponse
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 30
VERSIONS = (1, 3)
NO_AUTHORIZER = "No Authorizer is configured."
Result = CreateAclsResponse.AclCreationResult


async def handle(broker: Broker, ctx: RequestContext, req: CreateAclsRequest) -> CreateAclsResponse:
    if not broker.authorizer.enabled:
        return CreateAclsResponse(throttle_time_ms=0, results=[
            Result(error_code=ErrorCode.SECURITY_DISABLED, error_message=NO_AUTHORIZER)
            for _ in req.creations])
    if not ctx.allowed(ALTER, CLUSTER, CLUSTER_NAME):
        return CreateAclsResponse(throttle_time_ms=0, results=[
            Result(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=None)
            for _ in req.creations])
    acls = [Acl(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
                c.operation, c.permission_type) for c in req.creations]
    async with broker.metadata_lock:
        records, results = create_acls(broker.image.acls, acls, uuid.uuid4)
        await broker.commit_metadata(records)
    return CreateAclsResponse(throttle_time_ms=0, results=[
        Result(error_code=code, error_message=msg) for code, msg in results])
