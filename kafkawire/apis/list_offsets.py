"""ListOffsets (key 2), versions 1-11.

Special timestamps: -1 latest (the high watermark, or the last stable offset at
read_committed, v2+), -2 earliest (log start offset), -3 max timestamp (v7+: the offset and
timestamp of the record with the largest timestamp), -4 earliest local (v8+, = earliest here,
no tiered storage), -5 latest tiered (v9+: -1, nothing is tiered), -6 earliest pending upload
(v11: -1). Any other timestamp: the earliest offset whose record timestamp is >= it, through the
time index (KIP-79); when none is below the visible end the answer is offset -1, timestamp -1.
Special-timestamp answers carry timestamp -1, as Kafka's do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkawire.apis.fetch import check_leader_epoch
from kraft.acls import DESCRIBE, TOPIC
from protocol._generated.list_offsets_request import ListOffsetsRequest
from protocol._generated.list_offsets_response import ListOffsetsResponse
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.server import RequestContext

API_KEY = 2
VERSIONS = (1, 11)

LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3
EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -4, -5, -6
# the first ListOffsets version that knows each special timestamp (older: UNSUPPORTED_VERSION)
MIN_VERSION_FOR = {MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9, EARLIEST_PENDING_UPLOAD: 11}

Part = ListOffsetsResponse.ListOffsetsPartitionResponse


def _epoch(e: int | None) -> int:
    return -1 if e is None else e


async def handle(
    broker: Broker, ctx: RequestContext, req: ListOffsetsRequest
) -> ListOffsetsResponse:
    v = ctx.api_version
    read_committed = v >= 2 and req.isolation_level == 1
    img = broker.image
    topics = []
    for t in req.topics:
        parts: list[Part] = []
        topics.append(ListOffsetsResponse.ListOffsetsTopicResponse(name=t.name, partitions=parts))
        if not ctx.allowed(DESCRIBE, TOPIC, t.name):  # Kafka: DESCRIBE on each topic
            parts += [Part(partition_index=p.partition_index,
                           error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, timestamp=-1,
                           offset=-1, leader_epoch=-1) for p in t.partitions]
            continue
        for p in t.partitions:
            resp = Part(partition_index=p.partition_index, error_code=0, timestamp=-1, offset=-1,
                        leader_epoch=-1)
            parts.append(resp)
            pimg = img.partition(t.name, p.partition_index)
            plog = broker.partition_log(t.name, p.partition_index) if pimg else None
            if pimg is None or plog is None:
                resp.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            code = check_leader_epoch(p.current_leader_epoch, pimg.leader_epoch)
            if code:
                resp.error_code = code
                continue
            upper = plog.last_stable_offset if read_committed else plog.high_watermark
            ts = p.timestamp
            if ts in MIN_VERSION_FOR and v < MIN_VERSION_FOR[ts]:
                resp.error_code = ErrorCode.UNSUPPORTED_VERSION
                continue
            try:
                if ts == LATEST:
                    resp.offset = upper
                    resp.leader_epoch = pimg.leader_epoch
                elif ts in (EARLIEST, EARLIEST_LOCAL):
                    resp.offset = plog.log_start_offset
                    e = plog.epoch_for_offset(plog.log_start_offset)
                    resp.leader_epoch = pimg.leader_epoch if e is None else e
                elif ts in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
                    resp.offset = -1
                elif ts == MAX_TIMESTAMP:
                    found = plog.max_timestamp(max_offset=upper)
                    if found is not None and found[0] < upper:
                        resp.offset, resp.timestamp = found
                        resp.leader_epoch = _epoch(plog.epoch_for_offset(found[0]))
                elif ts < 0:
                    resp.error_code = ErrorCode.INVALID_REQUEST
                else:
                    found = plog.offset_for_timestamp(ts, max_offset=upper)
                    if found is not None and found[0] < upper:
                        resp.offset, resp.timestamp = found
                        resp.leader_epoch = _epoch(plog.epoch_for_offset(found[0]))
            except KafkaError as e:
                resp.error_code = e.code
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)
