"""Produce (key 0), versions 3-13; advertised from v0.

Hot path: per partition, ``protocol.records.validate_batches`` reads only batch headers and
checks CRCs in C; the log rewrites baseOffset / partitionLeaderEpoch in place in the request
frame and writes the client's bytes verbatim. No Python loop ever visits a record.

- acks must be -1, 0 or 1 (else INVALID_REQUIRED_ACKS). acks=0 gets no response at all.
  Appends go through the partition-state layer (``log.replica``, via ``broker.replicas``):
  a partition this node does not lead gets NOT_LEADER_OR_FOLLOWER; acks=-1 with an ISR smaller
  than ``min.insync.replicas`` gets NOT_ENOUGH_REPLICAS before the append, and the answer waits
  (up to the request's ``timeout_ms``, then REQUEST_TIMED_OUT) until the high watermark passes
  the appended batches (NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below the minimum
  meanwhile). With one replica the high watermark moves with the append: no wait.
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
  version 2, KIP-890 part 2) the write adds the partition to the transaction instead;
  CONCURRENT_TRANSACTIONS (the previous transaction's markers pending) is retried in the broker
  (``add.partitions.to.txn.retry.backoff.ms`` / ``...backoff.max.ms``) before the client gets
  it (v12+ only: older versions get NOT_ENOUGH_REPLICAS, as Kafka). A producer's open transaction on the partition counts only at the epoch
  that opened it (issue 11: the next transaction's write, epoch + 1, never joins it).
- Compacted topics (cleanup.policy contains ``compact``): a record without a key fails the
  partition with INVALID_RECORD and per-record ``record_errors`` (v8+), Kafka's messages. This
  inflates the batch and walks the record prefixes (~1 us per record); other topics never pay
  it (one attribute test).
- ``flush.messages``: the append that leaves that many offsets unflushed is answered after an
  fsync covering it (group commit off the event loop, ``kafkawire.log_flusher``).
- Authorization (``kafkawire.authorizer``): WRITE on the transactional id (else every
  partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and WRITE on each topic (else
  TOPIC_AUTHORIZATION_FAILED, before the topic's existence is revealed).
- v0-2 are advertised (librdkafka disables compression otherwise, KAFKA-18659) but refused,
  as Kafka 4 does. v13 names topics by id.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import trio

from kafkawire.loop_monitor import SLOW_REQUEST_S, slow_requests
from kraft.acls import TOPIC, TRANSACTIONAL_ID, WRITE
from log.cleaner import keyless_records
from protocol._generated.produce_request import ProduceRequest
from protocol._generated.produce_response import ProduceResponse
from protocol.errors import ErrorCode, KafkaError
from protocol.records import DEFAULT_MAX_UNCOMPRESSED_BYTES, BatchHeader, validate_batches

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.replica_manager import ReplicaManager
    from kafkawire.server import RequestContext
    from log.partition_log import PartitionLog
    from log.replica import Partition

API_KEY = 0
VERSIONS = (3, 13)
ADVERTISED_MIN = 0

PartResp = ProduceResponse.PartitionProduceResponse
_LOG_ERRORS = {
    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.DUPLICATE_SEQUENCE_NUMBER, ErrorCode.UNKNOWN_PRODUCER_ID,
    ErrorCode.INVALID_TXN_STATE, ErrorCode.TRANSACTION_COORDINATOR_FENCED,
    ErrorCode.NOT_ENOUGH_REPLICAS,  # measured on a 3-node Kafka 4.3.1 (compat_tests)
}


#: answered without an error message, as Kafka's ReplicaManager does (only record validation
#: errors carry one there; the text is in our exception for logs)
_NO_MESSAGE = {ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_LEADER_OR_FOLLOWER}


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
    v12 (transaction version 2) the write adds the partition itself.

    "Opening" compares the epoch, as Kafka's ``hasOngoingTransaction(pid, epoch)``: with
    transaction version 2 every EndTxn bumps the epoch, so the first write of the next
    transaction (epoch + 1) can arrive while the previous one (epoch) still waits for its
    marker here. It is a new transaction: the coordinator answers CONCURRENT_TRANSACTIONS until
    the previous one is complete (retried here for a while, then answered as it is: version-2
    clients retry it), and the write never joins the transaction the marker will close."""
    coordinator = broker.txn_coordinator
    if version < 12 and not coordinator.verification_enabled():
        return
    for _pos, h in batches:
        if h.is_transactional and not h.is_control:
            if plog.producer_state.has_ongoing_txn(h.producer_id, h.producer_epoch):
                return
            remote = coordinator.remote_coordinator(tid)
            if remote is not None:  # the coordinator is on another broker: ask it
                code, underlying = await coordinator.verify_remote(
                    remote, tid, topic, partition, h.producer_id, h.producer_epoch, version)
                if underlying == ErrorCode.CONCURRENT_TRANSACTIONS:
                    raise _NotVerified(ErrorCode.CONCURRENT_TRANSACTIONS)
            elif version >= 12:
                code, underlying = await coordinator.add_implicitly(
                    tid, topic, partition, h.producer_id, h.producer_epoch, retry=True
                )
                if underlying == ErrorCode.CONCURRENT_TRANSACTIONS:
                    # still completing after the broker's retries: said as it is to version-2
                    # clients, which retry it (Kafka since KAFKA-18662)
                    raise _NotVerified(ErrorCode.CONCURRENT_TRANSACTIONS)
                if code == ErrorCode.NONE:
                    # the await let other tasks run (a coordinator abort, a marker): check
                    # again now, with no await between this check and the append (Kafka's
                    # verification guard)
                    code, underlying = coordinator.verify(
                        tid, topic, partition, h.producer_id, h.producer_epoch, True
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


async def _wait_for_acks(
    replicas: ReplicaManager, to_ack: list[tuple[PartResp, Partition, int, int]], timeout_ms: int
) -> None:
    """acks=all: each partition's answer waits for its high watermark to pass the append
    (Kafka's DelayedProduce); one deadline for the whole request."""
    deadline_ms = max(timeout_ms, 0)
    start = trio.current_time()
    for resp, partition, offset, min_isr in to_ack:
        left = max(0, deadline_ms - int((trio.current_time() - start) * 1000))
        code = await replicas.wait_for_high_watermark(
            partition, offset, timeout_ms=left, min_insync_replicas=min_isr
        )
        if code:  # as Kafka's DelayedProduce: the error, with the offsets of the append
            resp.error_code = code


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


@dataclass(frozen=True)
class _TopicSettings:
    """The effective topic configs a produce checks against."""

    max_message_bytes: int
    log_append_time: bool
    before_ms: int
    after_ms: int
    min_insync_replicas: int

    @classmethod
    def of(cls, cfg: dict[str, Any]) -> _TopicSettings:
        return cls(
            int(cfg["max.message.bytes"]), cfg["message.timestamp.type"] == "LogAppendTime",
            int(cfg["message.timestamp.before.max.ms"]), int(cfg["message.timestamp.after.max.ms"]),
            int(cfg["min.insync.replicas"]),
        )

    def check_timestamps(self, batches: list[tuple[int, BatchHeader]], now_ms: int) -> None:
        if self.log_append_time:
            return
        for _pos, h in batches:
            if h.max_timestamp > now_ms + self.after_ms or (
                h.base_timestamp >= 0 and h.base_timestamp < now_ms - self.before_ms
            ):
                raise KafkaError(
                    ErrorCode.INVALID_TIMESTAMP,
                    "Timestamp of the batch is out of range "
                    "(message.timestamp.before.max.ms / after.max.ms)",
                )


async def _append_partition(
    broker: Broker, req: ProduceRequest, v: int, topic: str,
    pd: ProduceRequest.PartitionProduceData, settings: _TopicSettings, now_ms: int,
) -> tuple[PartResp, Partition | None, int]:
    """One partition's append through the partition-state layer: its answer, and on success
    the partition and the offset acks=all waits for."""
    assert broker.replicas is not None
    if broker.is_offline(topic, pd.index):  # its log directory failed, or its log is missing
        return _error(pd.index, ErrorCode.KAFKA_STORAGE_ERROR), None, -1
    try:
        partition = broker.replicas.leader_partition(topic, pd.index)
    except KafkaError as e:
        return _error(pd.index, e.code), None, -1  # Kafka: no message for these
    plog = partition.log
    records = pd.records
    if records is None:
        return _error(pd.index, ErrorCode.INVALID_RECORD, "null records"), None, -1
    try:
        batches = validate_batches(records, from_client=True, produce_version=v,
                                   max_message_bytes=settings.max_message_bytes)
        settings.check_timestamps(batches, now_ms)
        if req.transactional_id is not None and v >= 3:
            started = time.perf_counter()
            await _verify_transaction(broker, req.transactional_id, topic, pd.index, plog,
                                      batches, v)
            took = time.perf_counter() - started
            if SLOW_REQUEST_S > 0 and took >= SLOW_REQUEST_S:
                remote = broker.txn_coordinator.remote_coordinator(req.transactional_id)
                slow_requests.warning("Produce of %s to %s-%d: the transaction verification "
                                      "took %.0f ms (coordinator on %s)", req.transactional_id,
                                      topic, pd.index, took * 1000,
                                      "this broker" if remote is None else f"broker {remote}")
        if plog.config.compact:  # the only records-level check, compacted topics only
            keyless = keyless_records(records, batches, DEFAULT_MAX_UNCOMPRESSED_BYTES)
            if keyless:
                return _keyless_error(pd.index, topic, keyless, plog), None, -1
        last_pos, last_h = batches[-1]
        info = partition.append_as_leader(
            records[: last_pos + last_h.size], batches, now_ms=now_ms,
            required_acks=req.acks, min_insync_replicas=settings.min_insync_replicas,
            log_append_time=settings.log_append_time,
        )
    except KafkaError as e:
        if isinstance(e.__cause__, OSError):  # a write failed: the log dir goes offline
            broker.storage_failed(e.__cause__, topic, pd.index)
        # errors found by the log (sequence, epoch) carry the real log start offset
        lso = -1
        if e.code in _LOG_ERRORS and not isinstance(e, _NotVerified):
            lso = plog.log_start_offset
        # a refused transaction verification keeps its text (Kafka's verification callback
        # names the underlying coordinator error); the layer's own refusals carry none
        message = (None if e.code in _NO_MESSAGE and not isinstance(e, _NotVerified)
                   else e.message or str(e))
        return _error(pd.index, e.code, message, lso), None, -1
    except OSError as e:  # e.g. no descriptor left to open the segment or an index
        broker.storage_failed(e, topic, pd.index)
        return _error(pd.index, ErrorCode.KAFKA_STORAGE_ERROR, str(e)), None, -1
    counters = broker.metrics.topic(topic)  # per batch, never per record
    counters.messages_in += sum(h.records_count for _pos, h in batches)
    counters.bytes_in += last_pos + last_h.size
    resp = PartResp(
        index=pd.index, error_code=ErrorCode.NONE, base_offset=info.first_offset,
        log_append_time_ms=info.log_append_time_ms, log_start_offset=info.log_start_offset,
    )
    return resp, partition, info.last_offset + 1


def _transactional(req: ProduceRequest) -> bool:
    """Does a partition's first batch have the transactional attribute (bit 4)?"""
    for td in req.topic_data:
        for pd in td.partition_data:
            records = pd.records
            if records is not None and len(records) >= 23 and records[22] & 0x10:
                return True
    return False


def _denied(ctx: RequestContext, txn_denied: bool, name: str) -> ErrorCode | None:
    """Kafka's checks: WRITE on the transactional id, then WRITE on each topic."""
    if txn_denied:
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if name and not ctx.allowed(WRITE, TOPIC, name):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return None


async def handle(
    broker: Broker, ctx: RequestContext, req: ProduceRequest
) -> ProduceResponse | None:
    v = ctx.api_version
    acks = req.acks
    img = broker.image
    now_ms = int(time.time() * 1000)
    out: list[ProduceResponse.TopicProduceResponse] = []
    to_flush: list[tuple[PartResp, PartitionLog]] = []  # flush.messages reached
    to_ack: list[tuple[PartResp, Partition, int, int]] = []  # acks=all: (resp, p, offset, min isr)
    assert broker.replicas is not None
    # Kafka checks the transactional id only when the request carries transactional batches
    txn_denied = ctx.authorizer is not None and _transactional(req) and (
        req.transactional_id is None
        or not ctx.allowed(WRITE, TRANSACTIONAL_ID, req.transactional_id))
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
        denied = _denied(ctx, txn_denied, topic.name if topic is not None else td.name)
        if denied is not None:
            parts += [_error(p.index, denied) for p in td.partition_data]
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
        broker.metrics.topic(topic.name).total_produce += 1
        settings = _TopicSettings.of(broker.effective_topic_configs(topic.name))
        for pd in td.partition_data:
            if pd.index not in topic.partitions:
                parts.append(_error(pd.index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            resp, partition, end = await _append_partition(
                broker, req, v, topic.name, pd, settings, now_ms
            )
            parts.append(resp)
            if partition is None:
                continue
            if acks == -1:
                to_ack.append((resp, partition, end, settings.min_insync_replicas))
            plog = partition.log
            if plog.unflushed_messages >= plog.config.flush_messages:
                to_flush.append((resp, plog))
    if to_ack:  # waiting on the followers is Kafka's RemoteTimeMs of the request
        waited = time.perf_counter()
        await _wait_for_acks(broker.replicas, to_ack, req.timeout_ms)
        ctx.remote_s += time.perf_counter() - waited
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
