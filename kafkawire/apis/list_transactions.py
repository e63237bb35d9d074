"""ListTransactions (key 66), versions 0-2 (``Admin.listTransactions``,
``kafka-transactions list``).

The transactions of every ``__transaction_state`` partition this node coordinates, filtered as
Kafka's ``listTransactionStates``: by state names (unknown names come back in
UnknownStateFilters; a filter naming only unknown states matches nothing), by producer ids,
v1 ``DurationFilter`` (only transactions running longer than that many ms; -1 none), v2
``TransactionalIdPattern`` (a regular expression the whole id must match; null or empty:
none; an invalid one: INVALID_REGULAR_EXPRESSION). COORDINATOR_LOAD_IN_PROGRESS while a
partition is loading.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

from kraft.acls import DESCRIBE, TRANSACTIONAL_ID
from protocol._generated.list_transactions_request import ListTransactionsRequest
from protocol._generated.list_transactions_response import ListTransactionsResponse
from protocol.errors import ErrorCode
from txn.coordinator import TxnShard, state_names_to_filter

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 66
VERSIONS = (0, 2)


async def handle(
    broker: Broker, ctx: RequestContext, req: ListTransactionsRequest
) -> ListTransactionsResponse:
    v = ctx.api_version
    resp = ListTransactionsResponse(throttle_time_ms=0, error_code=0)
    runtime = broker.txn_runtime
    if any(not slot.loaded for slot in runtime.slots.values()):
        resp.error_code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return resp
    pattern = None
    if v >= 2 and req.transactional_id_pattern:
        try:
            pattern = re.compile(req.transactional_id_pattern)
        except re.error:
            resp.error_code = ErrorCode.INVALID_REGULAR_EXPRESSION
            return resp
    known, unknown = state_names_to_filter(req.state_filters)
    resp.unknown_state_filters = unknown
    now = int(time.time() * 1000)
    duration = req.duration_filter if v >= 1 else -1
    for _partition, shard in runtime.loaded_shards():
        if not isinstance(shard, TxnShard):
            continue
        for tid, pid, state in shard.list_transactions(
            known, req.producer_id_filters, now, duration, pattern,
            any_state_filter=bool(req.state_filters),
        ):
            if not ctx.allowed(DESCRIBE, TRANSACTIONAL_ID, tid, log_denied=False):  # Kafka lists only these
                continue
            resp.transaction_states.append(
                ListTransactionsResponse.TransactionState(
                    transactional_id=tid, producer_id=pid, transaction_state=state
                )
            )
    return resp
