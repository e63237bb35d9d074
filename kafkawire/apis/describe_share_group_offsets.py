"""DescribeShareGroupOffsets (key 90), versions 0-1 (KIP-932; flexible).

Per group and topic partition: the share-partition start offset and the leader epoch of its
persisted state, and (v1, KIP-1226) the lag: the records below the high watermark from the
start offset on that are not delivery complete (acknowledged or archived). A partition without
state: start offset -1. ``Topics`` null: every partition the group has state for. Group errors:
GROUP_ID_NOT_FOUND (no such share group), UNSUPPORTED_VERSION while share groups are disabled,
coordinator errors; partition errors: UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkawire.apis.share_group_heartbeat import check_share_group
from protocol._generated.describe_share_group_offsets_request import (
    DescribeShareGroupOffsetsRequest,
)
from protocol._generated.describe_share_group_offsets_response import (
    DescribeShareGroupOffsetsResponse,
)
from protocol.errors import ErrorCode, KafkaError
from protocol.primitives import ZERO_UUID

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.server import RequestContext

API_KEY = 90
VERSIONS = (0, 1)

Resp = DescribeShareGroupOffsetsResponse


async def _group(broker: Broker, req_group: DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup) -> Resp.DescribeShareGroupOffsetsResponseGroup:
    svc = broker.share
    gid = req_group.group_id
    img = broker.image
    if req_group.topics is None:
        wanted: dict[str, list[int]] = {}
        for _g, tid, p in sorted(svc.group_keys(gid), key=str):
            t = img.topics_by_id.get(tid)
            if t is not None:
                wanted.setdefault(t.name, [])
                if p not in wanted[t.name]:
                    wanted[t.name].append(p)
    else:
        wanted = {t.topic_name: list(t.partitions) for t in req_group.topics}
    topics = []
    for name, parts in sorted(wanted.items()):
        t = img.topics.get(name)
        out_parts = []
        for p in sorted(parts):
            if t is None or p not in t.partitions:
                out_parts.append(Resp.DescribeShareGroupOffsetsResponsePartition(
                    partition_index=p, start_offset=-1, leader_epoch=-1, lag=-1,
                    error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            try:
                start, epoch, lag = await svc.offsets_of(gid, t.topic_id, p)
            except KafkaError as e:
                out_parts.append(Resp.DescribeShareGroupOffsetsResponsePartition(
                    partition_index=p, start_offset=-1, leader_epoch=-1, lag=-1,
                    error_code=e.code))
                continue
            out_parts.append(Resp.DescribeShareGroupOffsetsResponsePartition(
                partition_index=p, start_offset=start, leader_epoch=epoch, lag=lag,
                error_code=0))
        topics.append(Resp.DescribeShareGroupOffsetsResponseTopic(
            topic_name=name, topic_id=t.topic_id if t is not None else ZERO_UUID,
            partitions=out_parts))
    return Resp.DescribeShareGroupOffsetsResponseGroup(group_id=gid, topics=topics, error_code=0)


async def handle(
    broker: Broker, ctx: RequestContext, req: DescribeShareGroupOffsetsRequest
) -> DescribeShareGroupOffsetsResponse:
    out = []
    for g in req.groups:
        try:
            if not broker.share.enabled():
                raise KafkaError(ErrorCode.UNSUPPORTED_VERSION)
            check_share_group(broker, g.group_id)
            if not broker.share.group_known(g.group_id):
                raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND,
                                 f"Group {g.group_id} not found.")
            out.append(await _group(broker, g))
        except KafkaError as e:
            out.append(Resp.DescribeShareGroupOffsetsResponseGroup(
                group_id=g.group_id, topics=[], error_code=e.code, error_message=e.message))
    return Resp(groups=out)
