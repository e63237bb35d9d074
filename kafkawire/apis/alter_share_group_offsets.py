"""AlterShareGroupOffsets (key 91), version 0 (KIP-932; flexible).

Sets the share-partition start offset of partitions of a share group (``kafka-share-groups
--reset-offsets``): nothing stays in flight, the new state is written to
``__share_group_state``. Only while the group has no members: NON_EMPTY_GROUP otherwise (top
level). A group without state yet gets it (the tool resets a group before its first member).
Partition errors: UNKNOWN_TOPIC_OR_PARTITION; top level: GROUP_ID_NOT_FOUND (a consumer or
classic group of that id), UNSUPPORTED_VERSION while share groups are disabled, coordinator
errors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkawire.apis.share_group_heartbeat import check_share_group
from protocol._generated.alter_share_group_offsets_request import AlterShareGroupOffsetsRequest
from protocol._generated.alter_share_group_offsets_response import AlterShareGroupOffsetsResponse
from protocol.errors import ErrorCode, KafkaError
from protocol.primitives import ZERO_UUID

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 91
VERSIONS = (0, 0)

Resp = AlterShareGroupOffsetsResponse


async def handle(
    broker: Broker, ctx: RequestContext, req: AlterShareGroupOffsetsRequest
) -> AlterShareGroupOffsetsResponse:
    svc = broker.share
    try:
        if not svc.enabled():
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION)
        check_share_group(broker, req.group_id)
        g = svc.groups.group(req.group_id)
        if g is not None and g.members:
            raise KafkaError(ErrorCode.NON_EMPTY_GROUP,
                             "The group is not empty.")
        await svc.ensure_state_topic()
    except KafkaError as e:
        return Resp(error_code=e.code, error_message=e.message, responses=[])
    out = []
    for t in req.topics:
        timg = broker.image.topics.get(t.topic_name)
        parts = []
        for p in t.partitions:
            code = ErrorCode.NONE
            if timg is None or p.partition_index not in timg.partitions:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                try:
                    await svc.alter_offset(req.group_id, timg.topic_id, p.partition_index,
                                           p.start_offset)
                except KafkaError as e:
                    code = e.code
            parts.append(Resp.AlterShareGroupOffsetsResponsePartition(
                partition_index=p.partition_index, error_code=code))
        out.append(Resp.AlterShareGroupOffsetsResponseTopic(
            topic_name=t.topic_name, topic_id=timg.topic_id if timg else ZERO_UUID,
            partitions=parts))
    return Resp(error_code=0, responses=out)
