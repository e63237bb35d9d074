"""ShareAcknowledge (key 79), versions 1-2 (KIP-932; flexible).

Acknowledgements without a fetch, within the member's share session: the epoch must be the
session's next one (it moves on), or -1 to acknowledge and close the session (the member's
other acquired records of the session go back). Each ``AcknowledgementBatch`` is applied
all-or-nothing (``groups/share_partition.py``): accept, release, reject, gap, and v2 renew
(``IsRenewAck``) which extends the acquisition lock. Per partition: INVALID_RECORD_STATE for
records not acquired by this member, INVALID_REQUEST for a malformed batch,
UNKNOWN_TOPIC_OR_PARTITION / UNKNOWN_TOPIC_ID. Top level: SHARE_SESSION_NOT_FOUND,
INVALID_SHARE_SESSION_EPOCH (epoch 0 opens no session here), UNSUPPORTED_VERSION while share
groups are disabled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafkawire.apis.share_fetch import (
    ack_error_message,
    current_leader,
    flush_acknowledged,
    node_endpoints,
)
from protocol._generated.share_acknowledge_request import ShareAcknowledgeRequest
from protocol._generated.share_acknowledge_response import ShareAcknowledgeResponse
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.server import RequestContext

API_KEY = 79
VERSIONS = (1, 2)

Resp = ShareAcknowledgeResponse


def _error(code: ErrorCode, message: str | None = None) -> Resp:
    return Resp(error_code=code, error_message=message, responses=[], node_endpoints=[])


async def handle(
    broker: Broker, ctx: RequestContext, req: ShareAcknowledgeRequest
) -> ShareAcknowledgeResponse:
    svc = broker.share
    if not svc.enabled():
        return _error(ErrorCode.UNSUPPORTED_VERSION)
    gid, mid = req.group_id or "", req.member_id or ""
    if not gid or not mid:
        return _error(ErrorCode.INVALID_REQUEST)
    if req.share_session_epoch == 0:
        return _error(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
    try:
        s = svc.session(gid, mid, req.share_session_epoch, ctx.connection.conn_id)
    except KafkaError as e:
        return _error(e.code, e.message)
    renew = ctx.api_version >= 2 and req.is_renew_ack
    topics = []
    answered: dict[tuple[Any, int], Any] = {}
    for t in req.topics:
        parts = []
        for ap in t.partitions:
            if not ap.acknowledgement_batches:
                continue  # as Kafka: only partitions with acknowledgements are answered
            code = svc.acknowledge(gid, mid, t.topic_id, ap.partition_index,
                                   ap.acknowledgement_batches, renew)
            if t.topic_id not in broker.image.topics_by_id:
                code = ErrorCode.UNKNOWN_TOPIC_ID
            pd = Resp.PartitionData(
                partition_index=ap.partition_index, error_code=code,
                error_message=ack_error_message(code),
                current_leader=current_leader(broker, t.topic_id, ap.partition_index,
                                              Resp.LeaderIdAndEpoch))
            parts.append(pd)
            answered[(t.topic_id, ap.partition_index)] = pd
        if parts:
            topics.append(Resp.ShareAcknowledgeTopicResponse(topic_id=t.topic_id,
                                                             partitions=parts))
    if req.share_session_epoch == -1:
        svc.close_session(s)
    await flush_acknowledged(svc, gid, list(s.partitions), answered, "error_code")
    resp = Resp(error_code=0, responses=topics, node_endpoints=node_endpoints(
        broker, ctx, answered.values(), Resp.NodeEndpoint))
    if ctx.api_version >= 2:
        resp.acquisition_lock_timeout_ms = svc.limits(gid).record_lock_duration_ms
    return resp
