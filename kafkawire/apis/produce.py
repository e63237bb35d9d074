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
- Transactional batches (request with a transactional id) that open a transaction on a
  partition are verified with the transaction coordinator first (KIP-890 part 1,
  ``transaction.partition.verification.enable``): TRANSACTION_ABORTABLE (v11+) /
  INVALID_TXN_STATE when the partition was not added, INVALID_PRODUCER_EPOCH for another
  epoch, NOT_ENOUGH_REPLICAS while the coordinator cannot answer. From v12 (transaction
  version 2, KIP-890 part 2) the write adds the partition to the transaction instead.
- Compacted topics (cleanup.policy contains ``compact``): a record without a key fails the
  partition with INVALID_RECORD and per-record ``record_errors`` (v8+), Kafka's messages. This
  inflates the batch and walks the record prefixes (~1 us per record); other topics never pay
  it (one attribute test).
- ``flush.messages``: the append that leaves that many offsets unflushed is answered after an
  fsync covering it (group commit off the event loop, ``kafkawire.log_flusher``).
- v0-2 are advertised (librdkafka disables compression otherwise, KAFKA-18659) but refused,
  as Kafka 4 does. v13 names topics by id.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from log.cleaner import keyless_records
from protocol._generated.produce_request import ProduceRequest
from protocol._generated.produce_response import ProduceResponse
from protocol.errors import ErrorCode, KafkaError
from protocol.records import DEFAULT_MAX_UNCOMPRESSED_BYTES, BatchHeader, validate_batches

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.server import RequestContext
    from log.partition_log import PartitionLog

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


class _NotVerified(KafkaError):
    """Refused before the append: carries no log start offset (Kafka's unknown append info)."""


async def _verify_transaction(
    broker: Broker, tid: str, topic: str, partition: int, plog: Any,
    batches: list[tuple[int, BatchHeader]], version: int,
) -> None:
    """Transactional batches opening a transaction on this partition must belong to a
    transaction that has the partition (KIP-890 part 1, ``kafkawire.txn_coordinator``); from
    v12 (transaction version 2) the write adds the partition itself."""
    coordinator = broker.txn_coordinator
    if version < 12 and not coordinator.verification_enabled():
        return
    for _pos, h in batches:
        if h.is_transactional and not h.is_control:
            if h.producer_id in plog.producer_state.ongoing:
                return
            if version >= 12:
                code, underlying = await coordinator.add_implicitly(
                    tid, topic, partition, h.producer_id, h.producer_epoch
                )
            else:
                code, underlying = coordinator.verify(
                    tid, topic, partition, h.producer_id, h.producer_epoch, version >= 11
                )
            if code == ErrorCode.NOT_ENOUGH_REPLICAS:
                raise _NotVerified(code, "Unable to verify the partition has been added to the "
                                         "transaction. Underlying error: " + underlying.name)
            if code != ErrorCode.NONE:
                raise _NotVerified(code, "Partition was not added to the transaction"
                                   if code in (ErrorCode.INVALID_TXN_STATE,
                                               ErrorCode.TRANSACTION_ABORTABLE) else None)
            return
def _keyless_error(
    index: int, topic: str, keyless: list[tuple[int, int]], plog: PartitionLog
) -> PartResp:
    """Kafka's answer to records without a key on a compacted topic (LogValidator)."""
    message = f"Compacted topic cannot accept message without key in topic partition {topic}-{index}"
    errors = [
        ProduceResponse.BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=message)
        for _batch, i in keyless
    ]
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{message}')" for _b, i in keyless[:3])
    resp = _error(
        index, ErrorCode.INVALID_RECORD,
        f"One or more records have been rejected due to {len(keyless)} record errors in total, "
        f"and only showing the first three errors at most: [{shown}]",
        plog.log_start_offset,
    )
    resp.record_errors = errors
    return resp


async def handle(
    broker: Broker, ctx: RequestContext, req: ProduceRequest
) -> ProduceResponse | None:
    v = ctx.api_version
    acks = req.acks
    img = broker.image
    now_ms = int(time.time() * 1000)
    out: list[ProduceResponse.TopicProduceResponse] = []
    to_flush: list[tuple[PartResp, PartitionLog]] = []  # flush.messages reached
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
        counters = broker.metrics.topic(topic.name)
        counters.total_produce += 1
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
                if req.transactional_id is not None and v >= 3:
                    await _verify_transaction(broker, req.transactional_id, topic.name,
                                              pd.index, plog, batches, v)
                if plog.config.compact:  # the only records-level check, compacted topics only
                    keyless = keyless_records(records, batches, DEFAULT_MAX_UNCOMPRESSED_BYTES)
                    if keyless:
                        parts.append(_keyless_error(pd.index, topic.name, keyless, plog))
                        continue
                last_pos, last_h = batches[-1]
                info = plog.append(
                    records[: last_pos + last_h.size], batches, leader_epoch=pimg.leader_epoch, now_ms=now_ms,
                    log_append_time=log_append_time,
                )
            except KafkaError as e:
                # errors found by the log (sequence, epoch) carry the real log start offset
                lso = -1
                if e.code in _LOG_ERRORS and not isinstance(e, _NotVerified):
                    lso = plog.log_start_offset
                parts.append(_error(pd.index, e.code, e.message or str(e), lso))
                continue
            plog.update_high_watermark(plog.log_end_offset)
            broker.notifier.notify(topic.name, pd.index)
            counters.messages_in += sum(h.records_count for _pos, h in batches)
            counters.bytes_in += last_pos + last_h.size
            resp = PartResp(
                index=pd.index,
                error_code=ErrorCode.NONE,
                base_offset=info.first_offset,
                log_append_time_ms=info.log_append_time_ms,
                log_start_offset=info.log_start_offset,
            )
            parts.append(resp)
            if plog.unflushed_messages >= plog.config.flush_messages:
                to_flush.append((resp, plog))
    if to_flush:  # as Kafka, the append that reaches flush.messages is fsynced before the answer
        assert broker.flusher is not None
        failed = await broker.flusher.wait_all_durable(
            [(plog, plog.log_end_offset) for _resp, plog in to_flush]
        )
        for resp, plog in to_flush:
            if id(plog) in failed:
                resp.error_code = ErrorCode.KAFKA_STORAGE_ERROR
                resp.error_message = failed[id(plog)]
                resp.base_offset = -1
    _count_failures(broker, out, v)
    if acks == 0:
        return None
    return ProduceResponse(responses=out, throttle_time_ms=0)


def _count_failures(broker: Broker, out: list[ProduceResponse.TopicProduceResponse],
                    version: int) -> None:
    """FailedProduceRequestsPerSec: one per failed partition, under its topic when it exists."""
    img = broker.image
    for t in out:
        failed = sum(1 for p in t.partition_responses if p.error_code)
        if failed:
            topic = img.topics_by_id.get(t.topic_id) if version >= 13 else img.topics.get(t.name)
            broker.metrics.topic(topic.name if topic is not None else None).failed_produce += failed
