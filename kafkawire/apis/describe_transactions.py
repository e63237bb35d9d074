"""DescribeTransactions (key 65), version 0 (``Admin.describeTransactions``,
``kafka-transactions describe``).

Per transactional id, from its coordinator: state name (Empty, Ongoing, PrepareCommit, ...),
timeout, start time (-1 before the first partition), producer id and epoch, and the partitions
of the ongoing transaction. Errors per id: TRANSACTIONAL_ID_NOT_FOUND, NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, INVALID_REQUEST (empty id); an
errored entry carries only its id and code (the other fields keep their defaults, as Kafka).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kraft.acls import DESCRIBE, TRANSACTIONAL_ID
from protocol._generated.describe_transactions_request import DescribeTransactionsRequest
from protocol._generated.describe_transactions_response import DescribeTransactionsResponse
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 65
VERSIONS = (0, 0)

R = DescribeTransactionsResponse


def describe(broker: Broker, tid: str) -> R.TransactionState:
    if tid == "":
        return R.TransactionState(error_code=ErrorCode.INVALID_REQUEST, transactional_id=tid)
    shard = broker.txn_coordinator.shard_or_error(tid)
    if isinstance(shard, ErrorCode):
        return R.TransactionState(error_code=shard, transactional_id=tid)
    d = shard.describe(tid)
    if d.error != ErrorCode.NONE:
        return R.TransactionState(error_code=d.error, transactional_id=tid)
    topics: dict[str, list[int]] = {}
    for topic, p in d.partitions:
        topics.setdefault(topic, []).append(p)
    return R.TransactionState(
        error_code=0, transactional_id=tid, transaction_state=d.state,
        transaction_timeout_ms=d.timeout_ms, transaction_start_time_ms=d.start_ms,
        producer_id=d.producer_id, producer_epoch=d.producer_epoch,
        topics=[R.TopicData(topic=t, partitions=ps) for t, ps in topics.items()],
    )


async def handle(
    broker: Broker, ctx: RequestContext, req: DescribeTransactionsRequest
) -> DescribeTransactionsResponse:
    return DescribeTransactionsResponse(
        throttle_time_ms=0,
        transaction_states=[
            describe(broker, tid) if ctx.allowed(DESCRIBE, TRANSACTIONAL_ID, tid)
            else R.TransactionState(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                    transactional_id=tid)
            for tid in req.transactional_ids],
    )
