"""Produce (key 0), versions 3-13; advertised from v0.

Hot path: per partition, ``protocol.records.validate_batches`` reads only batch headers and
checks CRCs in C; the log rewrites baseOffset / partitionLeaderEpoch in place in the request
frame and writes the client's bytes verbatim. No Python loop ever visits a record.

- acks must be -1, 0 or 1 (else INVALID_REQUIRED_ACKS). acks=0 gets no response at all.
  acks=-1 on a single node: the ISR is this node, so the high watermark moves with the append.
- Errors per partition: UNKNOWN_TOPIC_OR_PARTITION (v13: UNKNOWN_TOPIC_ID), CORRUPT_MESSAGE,
  INVALID_TOPIC_EXCEPTION (internal topics: only the coordinators write there),
  INVALID_RECORD, MESSAGE_TOO_LARGE (batch > max.message.bytes), INVALID_TIMESTAMP
  (message.timestamp.before/after.max.ms, checked on the batch header's timestamps),
  OUT_OF_ORDER_SEQUENCE_NUMBER / INVALID_PRODUCER_EPOCH (idempotence, in the log),
  UNSUPPORTED_COMPRESSION_TYPE (zstd before v7).
- A duplicate of one of a producer's last five batches is answered with its original offsets.
- v0-2 are advertised (librdkafka disables compression otherwise, KAFKA-18659) but refused,
  as Kafka 4 does. v13 names topics by id.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from protocol._generated.produce_request import ProduceRequest
from protocol._generated.produce_response import ProduceResponse
from protocol.errors import ErrorCode, KafkaError
from protocol.records import validate_batches

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.server import RequestContext

API_KEY = 0
VERSIONS = (3, 13)
ADVERTISED_MIN = 0

PartResp = ProduceResponse.PartitionProduceResponse
_LOG_ERRORS = {
    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.DUPLICATE_SEQUENCE_NUMBER, ErrorCode.UNKNOWN_PRODUCER_ID,
    ErrorCode.INVALID_TXN_STATE, ErrorCode.TRANSACTION_COORDINATOR_FENCED,
}


def _error(
    index: int, code: ErrorCode, message: str | None = None, log_start_offset: int = -1
) -> PartResp:
    return PartResp(
        index=index, error_code=code, base_offset=-1, log_append_time_ms=-1,
        log_start_offset=log_start_offset, error_message=message,
    )


async def handle(
    broker: Broker, ctx: RequestContext, req: ProduceRequest
) -> ProduceResponse | None:
    v = ctx.api_version
    acks = req.acks
    img = broker.image
    now_ms = int(time.time() * 1000)
    out: list[ProduceResponse.TopicProduceResponse] = []
    for td in req.topic_data:
        if v >= 13:
            topic = img.topics_by_id.get(td.topic_id)
            missing = ErrorCode.UNKNOWN_TOPIC_ID
        else:
            topic = img.topics.get(td.name)
            missing = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        parts: list[PartResp] = []
        tresp = ProduceResponse.TopicProduceResponse(
            name=td.name if v < 13 else "", topic_id=td.topic_id, partition_responses=parts
        )
        out.append(tresp)
        if acks not in (-1, 0, 1):
            parts += [_error(p.index, ErrorCode.INVALID_REQUIRED_ACKS) for p in td.partition_data]
            continue
        if topic is None:
            parts += [_error(p.index, missing) for p in td.partition_data]
            continue
        if topic.is_internal:
            # as Kafka: clients cannot append to __consumer_offsets / __transaction_state
            # (only their coordinators write there, through the coordinator runtime)
            parts += [_error(p.index, ErrorCode.INVALID_TOPIC_EXCEPTION,
                             f"Cannot append to internal topic {topic.name}")
                      for p in td.partition_data]
            continue
        cfg = broker.effective_topic_configs(topic.name)
        max_bytes = int(cfg["max.message.bytes"])
        log_append_time = cfg["message.timestamp.type"] == "LogAppendTime"
        before_ms = int(cfg["message.timestamp.before.max.ms"])
        after_ms = int(cfg["message.timestamp.after.max.ms"])
        for pd in td.partition_data:
            pimg = topic.partitions.get(pd.index)
            plog = broker.partition_log(topic.name, pd.index) if pimg is not None else None
            if pimg is None or plog is None:
                parts.append(_error(pd.index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            records = pd.records
            if records is None:
                parts.append(_error(pd.index, ErrorCode.INVALID_RECORD, "null records"))
                continue
            try:
                batches = validate_batches(
                    records, from_client=True, produce_version=v, max_message_bytes=max_bytes
                )
                if not log_append_time:
                    for _pos, h in batches:
                        if h.max_timestamp > now_ms + after_ms or (
                            h.base_timestamp >= 0 and h.base_timestamp < now_ms - before_ms
                        ):
                            raise KafkaError(
                                ErrorCode.INVALID_TIMESTAMP,
                                "Timestamp of the batch is out of range "
                                "(message.timestamp.before.max.ms / after.max.ms)",
                            )
                last_pos, last_h = batches[-1]
                info = plog.append(
                    records[: last_pos + last_h.size], batches, leader_epoch=pimg.leader_epoch, now_ms=now_ms,
                    log_append_time=log_append_time,
                )
            except KafkaError as e:
                # errors found by the log (sequence, epoch) carry the real log start offset
                lso = plog.log_start_offset if e.code in _LOG_ERRORS else -1
                parts.append(_error(pd.index, e.code, e.message or str(e), lso))
                continue
            plog.update_high_watermark(plog.log_end_offset)
            broker.notifier.notify(topic.name, pd.index)
            parts.append(
                PartResp(
                    index=pd.index,
                    error_code=ErrorCode.NONE,
                    base_offset=info.first_offset,
                    log_append_time_ms=info.log_append_time_ms,
                    log_start_offset=info.log_start_offset,
                )
            )
    if acks == 0:
        return None
    return ProduceResponse(responses=out, throttle_time_ms=0)
