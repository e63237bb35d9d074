"""ShareGroupHeartbeat (key 76), version 1 (KIP-932; flexible).

Membership of a share group (``groups/share_group.py``): epoch 0 joins with the member's own
id and its subscribed topic names, -1 leaves, any other epoch must be the member's. The answer
carries the member epoch, ``share.heartbeat.interval.ms`` and, whenever it changed, the
member's assignment (topic ids and partitions; several members may share a partition). The
share partitions of the subscribed topics are initialized here (``share.auto.offset.reset``);
only initialized ones are assigned, from the next heartbeat on (as Kafka 4.1+). Errors: INVALID_REQUEST, UNKNOWN_MEMBER_ID,
FENCED_MEMBER_EPOCH, GROUP_MAX_SIZE_REACHED (``group.share.max.size``), GROUP_ID_NOT_FOUND (the
id belongs to a consumer or classic group), coordinator errors; UNSUPPORTED_VERSION while
share groups are disabled (``share.version`` 0).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from groups.share_group import HeartbeatError
from kafkawire.group_coordinator import client_host
from kafkawire.share_coordinator import now_ms
from protocol._generated.share_group_heartbeat_request import ShareGroupHeartbeatRequest
from protocol._generated.share_group_heartbeat_response import ShareGroupHeartbeatResponse
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.server import RequestContext

API_KEY = 76
VERSIONS = (1, 1)

Resp = ShareGroupHeartbeatResponse


def check_share_group(broker: Broker, group_id: str) -> None:
    """Coordinator errors for ``group_id``'s shard; GROUP_ID_NOT_FOUND when the id is taken by
    a consumer or classic group."""
    shard = broker.group_runtime.shard_for(group_id)
    if group_id in getattr(shard, "groups", {}) or group_id in getattr(
            getattr(shard, "consumer", None), "groups", {}):
        raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")


async def handle(
    broker: Broker, ctx: RequestContext, req: ShareGroupHeartbeatRequest
) -> ShareGroupHeartbeatResponse:
    svc = broker.share
    if not svc.enabled():
        return Resp(error_code=ErrorCode.UNSUPPORTED_VERSION, member_id=None, assignment=None)
    try:
        check_share_group(broker, req.group_id)
        reply = svc.groups.heartbeat(
            req.group_id, req.member_id, req.member_epoch, req.rack_id,
            req.subscribed_topic_names, ctx.client_id or "", client_host(ctx),
            svc.settings(req.group_id), lambda name: svc.assignable(req.group_id, name),
            now_ms(),
        )
    except (KafkaError, HeartbeatError) as e:
        return Resp(error_code=e.code, error_message=e.message, member_id=None, assignment=None)
    svc.rearm()
    member = svc.groups.group(req.group_id)
    m = member.members.get(req.member_id) if member is not None else None
    if m is not None:
        svc.initialize_subscribed(req.group_id, m.topics)
    assignment = None
    if reply.assignment is not None:
        assignment = Resp.Assignment(topic_partitions=[
            Resp.TopicPartitions(topic_id=tid, partitions=sorted(ps))
            for tid, ps in sorted(reply.assignment.items())
        ])
    return Resp(
        error_code=0, member_id=reply.member_id, member_epoch=reply.member_epoch,
        heartbeat_interval_ms=reply.heartbeat_interval_ms, assignment=assignment,
    )
