"""DeleteShareGroupOffsets (key 92), version 0 (KIP-932; flexible).

Removes a share group's state for whole topics (``kafka-share-groups --delete-offsets``): the
share partitions are forgotten and tombstoned in ``__share_group_state``. Only while the group
has no members (NON_EMPTY_GROUP, top level). Topic errors: UNKNOWN_TOPIC_OR_PARTITION; top
level: GROUP_ID_NOT_FOUND (unknown share group), UNSUPPORTED_VERSION while share groups are
disabled, coordinator errors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkawire.apis.share_group_heartbeat import check_share_group
from protocol._generated.delete_share_group_offsets_request import DeleteShareGroupOffsetsRequest
from protocol._generated.delete_share_group_offsets_response import (
    DeleteShareGroupOffsetsResponse,
)
from protocol.errors import ErrorCode, KafkaError
from protocol.primitives import ZERO_UUID

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 92
VERSIONS = (0, 0)

Resp = DeleteShareGroupOffsetsResponse


async def handle(
    broker: Broker, ctx: RequestContext, req: DeleteShareGroupOffsetsRequest
) -> DeleteShareGroupOffsetsResponse:
    svc = broker.share
    try:
        if not svc.enabled():
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION)
        check_share_group(broker, req.group_id)
        if not svc.group_known(req.group_id):
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} not found.")
        g = svc.groups.group(req.group_id)
        if g is not None and g.members:
            raise KafkaError(ErrorCode.NON_EMPTY_GROUP, "The group is not empty.")
    except KafkaError as e:
        return Resp(error_code=e.code, error_message=e.message, responses=[])
    out = []
    for t in req.topics:
        timg = broker.image.topics.get(t.topic_name)
        if timg is None:
            out.append(Resp.DeleteShareGroupOffsetsResponseTopic(
                topic_name=t.topic_name, topic_id=ZERO_UUID,
                error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            continue
        await svc.delete_offsets(req.group_id, timg.topic_id)
        out.append(Resp.DeleteShareGroupOffsetsResponseTopic(
            topic_name=t.topic_name, topic_id=timg.topic_id, error_code=0))
    return Resp(error_code=0, responses=out)
