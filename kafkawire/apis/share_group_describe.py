"""ShareGroupDescribe (key 77), version 1 (KIP-932; flexible).

Per group: state (Empty, Stable), group and assignment epochs, the assignor (``simple``) and
every member with its rack, epoch, client id/host, subscribed topic names and assignment (topic
ids and names). An unknown group, or a consumer/classic group: GROUP_ID_NOT_FOUND. A group that
only has persisted share-partition state (no members since the broker started) is Empty.
``include_authorized_operations``: the principal's group operations (READ, DELETE, DESCRIBE,
DESCRIBE_CONFIGS, ALTER_CONFIGS). UNSUPPORTED_VERSION while share
groups are disabled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from groups.share_group import ASSIGNOR, ShareGroup
from kafkawire.apis.share_group_heartbeat import check_share_group
from kraft.acls import GROUP
from protocol._generated.share_group_describe_request import ShareGroupDescribeRequest
from protocol._generated.share_group_describe_response import ShareGroupDescribeResponse
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.server import RequestContext

API_KEY = 77
VERSIONS = (1, 1)

Resp = ShareGroupDescribeResponse


def _describe(broker: Broker, gid: str) -> Resp.DescribedGroup:
    svc = broker.share
    if not svc.enabled():
        raise KafkaError(ErrorCode.UNSUPPORTED_VERSION)
    check_share_group(broker, gid)
    g = svc.groups.group(gid)
    if g is None:
        if not svc.group_known(gid):
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} not found.")
        g = ShareGroup(gid)
    names = {t.topic_id: t.name for t in broker.image.topics.values()}
    members = []
    for m in g.members.values():
        tps = [Resp.TopicPartitions(topic_id=tid, topic_name=names.get(tid, ""),
                                    partitions=sorted(ps))
               for tid, ps in sorted(m.assignment.items())]
        members.append(Resp.Member(
            member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.epoch,
            client_id=m.client_id, client_host=m.client_host,
            subscribed_topic_names=sorted(m.topics),
            assignment=Resp.Assignment(topic_partitions=tps),
        ))
    return Resp.DescribedGroup(
        error_code=0, group_id=gid, group_state=g.state, group_epoch=g.epoch,
        assignment_epoch=g.assignment_epoch, assignor_name=ASSIGNOR, members=members,
    )


async def handle(
    broker: Broker, ctx: RequestContext, req: ShareGroupDescribeRequest
) -> ShareGroupDescribeResponse:
    out = []
    for gid in req.group_ids:
        try:
            d = _describe(broker, gid)
        except KafkaError as e:
            d = Resp.DescribedGroup(error_code=e.code, error_message=e.message, group_id=gid,
                                    group_state="", assignor_name="", members=[])
        if req.include_authorized_operations and d.error_code == 0:
            d.authorized_operations = ctx.operations(GROUP, gid)
        out.append(d)
    return Resp(groups=out)
