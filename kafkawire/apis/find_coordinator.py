"""FindCoordinator (key 10), versions 0-6.

Key types 0 (group -> ``__consumer_offsets``), 1 (transaction -> ``__transaction_state``) and,
from v6, 2 (share: a ``group:topicId:partition`` key -> ``__share_group_state``, KIP-932);
any other type fails the whole request with INVALID_REQUEST (v0-3: top-level error, node -1;
v4+: every coordinator key carries the error), as Kafka's ``CoordinatorType.forId`` does.
v4+ batches keys (``coordinator_keys``); v0-3 ask for one ``key``.

The coordinator of a key is the leader of partition ``abs(hash(key)) % partitions`` of the
internal topic (``kafkawire.coordinators.runtime``). A missing internal topic is created and
that request is answered COORDINATOR_NOT_AVAILABLE (Kafka answers the same while its
auto-creation runs); the client retries. A partition without a live leader:
COORDINATOR_NOT_AVAILABLE. A shard still loading is NOT reported here (Kafka returns the
leader; the coordinator request itself then answers COORDINATOR_LOAD_IN_PROGRESS).
v1-3 carry an error message (Kafka sends ``Errors.message()``: "NONE" on success).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kraft.acls import DESCRIBE, GROUP, TRANSACTIONAL_ID
from protocol._generated.find_coordinator_request import FindCoordinatorRequest
from protocol._generated.find_coordinator_response import FindCoordinatorResponse
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 10
VERSIONS = (0, 6)

MESSAGES = {
    ErrorCode.NONE: "NONE",
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
    ErrorCode.INVALID_REQUEST: "Unexpected key type",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "Transactional Id authorization failed.",
}
NO_NODE = (-1, "", -1)


SHARE_KEY_TYPE = 2


async def coordinator_of(
    broker: Broker, ctx: RequestContext, key_type: int, key: str
) -> tuple[ErrorCode, tuple[int, str, int]]:
    runtime = broker.coordinators_by_key_type.get(key_type)
    if runtime is None or (key_type == SHARE_KEY_TYPE and ctx.api_version < 6):
        return ErrorCode.INVALID_REQUEST, NO_NODE
    # Kafka: DESCRIBE on the group / the transactional id
    if key_type == 0 and not ctx.allowed(DESCRIBE, GROUP, key):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, NO_NODE
    if key_type == 1 and not ctx.allowed(DESCRIBE, TRANSACTIONAL_ID, key):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, NO_NODE
    code = await runtime.ensure_topic()
    if code != ErrorCode.NONE:
        return code, NO_NODE
    leader = runtime.leader_of(runtime.partition_for(key))
    b = broker.image.brokers.get(leader)
    ep = None
    if b is not None:
        ep = next((e for e in b.endpoints if e.listener == ctx.connection.listener), None)
    if ep is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, NO_NODE
    return ErrorCode.NONE, (leader, ep.host, ep.port)


async def handle(
    broker: Broker, ctx: RequestContext, req: FindCoordinatorRequest
) -> FindCoordinatorResponse:
    v = ctx.api_version
    if v < 4:
        code, (node, host, port) = await coordinator_of(broker, ctx, req.key_type, req.key)
        return FindCoordinatorResponse(
            error_code=code, error_message=MESSAGES.get(code, code.name),
            node_id=node, host=host, port=port,
        )
    out = []
    for key in req.coordinator_keys:
        code, (node, host, port) = await coordinator_of(broker, ctx, req.key_type, key)
        out.append(
            FindCoordinatorResponse.Coordinator(
                key=key, node_id=node, host=host, port=port, error_code=code,
                error_message=None if code == ErrorCode.NONE else MESSAGES.get(code, code.name),
            )
        )
    return FindCoordinatorResponse(coordinators=out)
