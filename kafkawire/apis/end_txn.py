"""EndTxn (key 26), versions 0-5.

Commit (``committed`` true) or abort the producer's ongoing transaction. The coordinator
writes PrepareCommit / PrepareAbort to ``__transaction_state`` and answers as soon as that is
committed; the COMMIT / ABORT markers are written to the transaction's partitions right after
(so the LSO moves a moment after the answer, as with Kafka), then CompleteCommit /
CompleteAbort.

- A retry after completion gets NONE (commit after CompleteCommit, abort after CompleteAbort);
  the other result, or EndTxn without a transaction (Empty): INVALID_TXN_STATE.
- While the markers are being written: CONCURRENT_TRANSACTIONS (the client retries).
- INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (INVALID_PRODUCER_EPOCH below v2, KIP-588),
  NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS / COORDINATOR_NOT_AVAILABLE.
- v5 is transaction version 2 (KIP-890 part 2), as in Kafka whatever the finalized level: the
  epoch is bumped by every EndTxn (the markers carry the new epoch) and the answer names the
  producer id and epoch to continue with; retries are recognised by the previous epoch, an
  abort with nothing added is allowed. Kafka's clients send v5 only when
  ``transaction.version`` 2 is finalized, which this broker does not do yet.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkawire.apis.add_partitions_to_txn import fenced_for
from kraft.acls import TRANSACTIONAL_ID, WRITE
from protocol._generated.end_txn_request import EndTxnRequest
from protocol._generated.end_txn_response import EndTxnResponse
from protocol.errors import ErrorCode, KafkaError
from txn.coordinator import InitResult

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 26
VERSIONS = (0, 5)


async def handle(broker: Broker, ctx: RequestContext, req: EndTxnRequest) -> EndTxnResponse:
    v = ctx.api_version
    tid = req.transactional_id
    pid, epoch = -1, -1
    if tid == "":
        code = ErrorCode.INVALID_REQUEST
    elif not ctx.allowed(WRITE, TRANSACTIONAL_ID, tid):
        code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    else:
        try:
            if v >= 5:  # transaction version 2: the epoch is bumped, the reply says to what
                res: InitResult = await broker.txn_coordinator.run_with_producer_id(
                    tid,
                    lambda shard, now, new_pid: shard.end_txn_v2(
                        tid, req.producer_id, req.producer_epoch, req.committed, now, new_pid
                    ),
                )
                code, pid, epoch = res
            else:
                code = await broker.txn_coordinator.run(
                    tid,
                    lambda shard, now: shard.end_txn(
                        tid, req.producer_id, req.producer_epoch, req.committed, now
                    ),
                )
        except KafkaError as e:
            code = e.code
    resp = EndTxnResponse(throttle_time_ms=0, error_code=fenced_for(code, v, 2))
    if v >= 5 and code == ErrorCode.NONE:
        resp.producer_id, resp.producer_epoch = pid, epoch
    return resp
