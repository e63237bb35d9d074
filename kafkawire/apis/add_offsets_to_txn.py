"""AddOffsetsToTxn (key 25), versions 0-4.

``send_offsets_to_transaction`` starts here: the ``__consumer_offsets`` partition of the
group (``abs(hash(group id)) % offsets.topic.num.partitions``, the group coordinator's
partition) joins the producer's transaction, so the transaction's markers also go to it and
the TxnOffsetCommit that follows (sent to the group coordinator) becomes visible on commit
and is dropped on abort. Errors as AddPartitionsToTxn (PRODUCER_FENCED is
INVALID_PRODUCER_EPOCH below v2).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkawire.apis.add_partitions_to_txn import add_or_verify, fenced_for
from kafkawire.coordinators.txn_markers import OFFSETS_TOPIC
from kraft.acls import GROUP, READ, TRANSACTIONAL_ID, WRITE
from protocol._generated.add_offsets_to_txn_request import AddOffsetsToTxnRequest
from protocol._generated.add_offsets_to_txn_response import AddOffsetsToTxnResponse
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 25
VERSIONS = (0, 4)


async def handle(
    broker: Broker, ctx: RequestContext, req: AddOffsetsToTxnRequest
) -> AddOffsetsToTxnResponse:
    # Kafka only computes the partition here: __consumer_offsets may not exist yet
    partition = broker.group_runtime.partition_for(req.group_id)
    if ctx.allowed(WRITE, TRANSACTIONAL_ID, req.transactional_id) and not ctx.allowed(
            READ, GROUP, req.group_id):  # Kafka: WRITE on the transactional id, READ on the group
        return AddOffsetsToTxnResponse(throttle_time_ms=0,
                                       error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    errors = await add_or_verify(
        broker, req.transactional_id, req.producer_id, req.producer_epoch,
        [(OFFSETS_TOPIC, partition)], False, check_exists=False, ctx=ctx,
    )
    (code,) = errors.values()
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=fenced_for(code, ctx.api_version, 2))
