"""AddPartitionsToTxn (key 24), versions 0-5.

v0-3 (clients): add partitions to the producer's transaction before producing to them. The
transaction starts (Ongoing) with the first one; partitions already in it are acknowledged
without a write.
v4-5 (KIP-890 part 1, sent by brokers): several transactions per request; one with
``VerifyOnly`` only checks that the partitions are already in the transaction
(TRANSACTION_ABORTABLE for one that is not), without adding them.

- Partitions of unknown topics / partitions: UNKNOWN_TOPIC_OR_PARTITION, and the others of the
  same transaction OPERATION_NOT_ATTEMPTED (nothing is added), as Kafka.
- Coordinator answers, the same for every partition of the transaction:
  INVALID_PRODUCER_ID_MAPPING (unknown transactional id or another producer id),
  PRODUCER_FENCED (another epoch; INVALID_PRODUCER_EPOCH below v2, KIP-588),
  CONCURRENT_TRANSACTIONS (the previous transaction is still writing its markers),
  NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS / COORDINATOR_NOT_AVAILABLE,
  INVALID_REQUEST (empty transactional id).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import trio

from kraft.acls import TOPIC, TRANSACTIONAL_ID, WRITE
from protocol._generated.add_partitions_to_txn_request import AddPartitionsToTxnRequest
from protocol._generated.add_partitions_to_txn_response import AddPartitionsToTxnResponse
from protocol.errors import ErrorCode, KafkaError
from txn.records import TopicPartition

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.server import RequestContext

API_KEY = 24
VERSIONS = (0, 5)

R = AddPartitionsToTxnResponse


def fenced_for(code: ErrorCode, version: int, first_with_producer_fenced: int) -> ErrorCode:
    """PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH for clients before KIP-588."""
    if code == ErrorCode.PRODUCER_FENCED and version < first_with_producer_fenced:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code


def topic_results(errors: dict[TopicPartition, ErrorCode]) -> list[R.AddPartitionsToTxnTopicResult]:
    by_topic: dict[str, list[R.AddPartitionsToTxnPartitionResult]] = {}
    for (topic, p), code in errors.items():
        by_topic.setdefault(topic, []).append(
            R.AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=code)
        )
    return [
        R.AddPartitionsToTxnTopicResult(name=t, results_by_partition=parts)
        for t, parts in by_topic.items()
    ]


def unknown_partitions(broker: Broker, parts: Iterable[TopicPartition]) -> set[TopicPartition]:
    img = broker.image
    return {tp for tp in parts if img.partition(*tp) is None}


async def add_or_verify(
    broker: Broker,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    parts: list[TopicPartition],
    verify_only: bool,
    *,
    check_exists: bool = True,
    ctx: RequestContext | None = None,
) -> dict[TopicPartition, ErrorCode]:
    """One transaction's partitions -> their error codes (before the version mapping).
    With ``ctx``: Kafka's checks first (WRITE on the transactional id, then on each topic)."""
    denied = None if ctx is None else authorize_txn(ctx, transactional_id, parts,
                                                    check_topics=check_exists)
    if denied is not None:
        return denied
    unknown = unknown_partitions(broker, parts) if check_exists else set()
    if unknown:
        return {
            tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown
            else ErrorCode.OPERATION_NOT_ATTEMPTED
            for tp in parts
        }
    if transactional_id == "":
        return dict.fromkeys(parts, ErrorCode.INVALID_REQUEST)
    coordinator = broker.txn_coordinator
    try:
        if verify_only:
            shard = coordinator.shard_or_error(transactional_id)
            if isinstance(shard, ErrorCode):
                return dict.fromkeys(parts, shard)
            return shard.verify_partitions(transactional_id, producer_id, producer_epoch, parts)
        code: ErrorCode = await coordinator.run(
            transactional_id,
            lambda shard, now: shard.add_partitions(
                transactional_id, producer_id, producer_epoch, parts, now
            ),
        )
    except KafkaError as e:
        code = e.code
    return dict.fromkeys(parts, code)


def authorize_txn(ctx: RequestContext, transactional_id: str, parts: list[TopicPartition],
                  check_topics: bool = True) -> dict[TopicPartition, ErrorCode] | None:
    """TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition without WRITE on the
    transactional id; TOPIC_AUTHORIZATION_FAILED for the topics without WRITE and
    OPERATION_NOT_ATTEMPTED for the others; None when everything is allowed."""
    if not ctx.allowed(WRITE, TRANSACTIONAL_ID, transactional_id):
        return dict.fromkeys(parts, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not check_topics:
        return None
    denied = {t for t, _p in parts if not ctx.allowed(WRITE, TOPIC, t)}
    if not denied:
        return None
    return {tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED if tp[0] in denied
            else ErrorCode.OPERATION_NOT_ATTEMPTED for tp in parts}


def _parts(topics: list[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic]) -> list[TopicPartition]:
    return list(dict.fromkeys((t.name, p) for t in topics for p in t.partitions))


async def handle(
    broker: Broker, ctx: RequestContext, req: AddPartitionsToTxnRequest
) -> AddPartitionsToTxnResponse:
    v = ctx.api_version
    if v <= 3:
        errors = await add_or_verify(
            broker, req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
            req.v3_and_below_producer_epoch, _parts(req.v3_and_below_topics), False, ctx=ctx,
        )
        errors = {tp: fenced_for(c, v, 2) for tp, c in errors.items()}
        return AddPartitionsToTxnResponse(
            throttle_time_ms=0, results_by_topic_v3_and_below=topic_results(errors)
        )
    # the transactions of a broker's batch (KIP-890) at once: each coordinator write is appended
    # at once and their replication is waited for together, not one after the other
    results: list[Any] = [None] * len(req.transactions)

    async def one(i: int, t: Any) -> None:
        errors = await add_or_verify(
            broker, t.transactional_id, t.producer_id, t.producer_epoch, _parts(t.topics),
            t.verify_only, ctx=None if t.verify_only else ctx,
        )
        results[i] = R.AddPartitionsToTxnResult(
            transactional_id=t.transactional_id, topic_results=topic_results(errors))

    async with trio.open_nursery() as nursery:
        for i, t in enumerate(req.transactions):
            nursery.start_soon(one, i, t)
    return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=0, results_by_transaction=results)
