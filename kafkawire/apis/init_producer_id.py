"""InitProducerId (key 22), versions 0-5 (v6, KIP-939, is unstable in Kafka and not served).

Without a transactional id (idempotent producers, the default of Java and kafka-python 3):
a new producer id with epoch 0, always, as Kafka does (an idempotent producer asking to bump
its epoch after an error gets a fresh id too). Ids come in blocks reserved through the metadata
log (ProducerIdsRecord), so they never repeat across restarts.

With a transactional id the transaction coordinator answers (``txn.coordinator``): a new id
gets a producer id and epoch 0; a known one gets its epoch bumped, which fences the previous
instance; an open transaction is first aborted with a bumped epoch and the client is told
CONCURRENT_TRANSACTIONS (it retries); ``transaction.timeout.ms`` must be in
(0, ``transaction.max.timeout.ms``] (else INVALID_TRANSACTION_TIMEOUT); v3+ may name the
current producer id and epoch to resume after an error (KIP-360).

- ProducerId / ProducerEpoch: both -1 or both set, else INVALID_REQUEST; an empty transactional
  id is INVALID_REQUEST.
- Coordinator errors: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
  COORDINATOR_NOT_AVAILABLE.
- PRODUCER_FENCED is answered INVALID_PRODUCER_EPOCH below v4 (KIP-588), as Kafka does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kraft.acls import CLUSTER, CLUSTER_NAME, IDEMPOTENT_WRITE, TOPIC, TRANSACTIONAL_ID, WRITE
from protocol._generated.init_producer_id_request import InitProducerIdRequest
from protocol._generated.init_producer_id_response import InitProducerIdResponse
from protocol.errors import ErrorCode, KafkaError
from txn.coordinator import InitResult, check_init_request

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 22
VERSIONS = (0, 5)


def _error(code: ErrorCode) -> InitProducerIdResponse:
    return InitProducerIdResponse(
        throttle_time_ms=0, error_code=code, producer_id=-1, producer_epoch=-1
    )


async def handle(
    broker: Broker, ctx: RequestContext, req: InitProducerIdRequest
) -> InitProducerIdResponse:
    v = ctx.api_version
    expected: tuple[int, int] | None = None
    if v >= 3 and (req.producer_id, req.producer_epoch) != (-1, -1):
        if req.producer_id == -1 or req.producer_epoch == -1:
            return _error(ErrorCode.INVALID_REQUEST)
        expected = (req.producer_id, req.producer_epoch)
    tid = req.transactional_id
    if tid is None:
        # Kafka: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic
        if not (ctx.allowed(IDEMPOTENT_WRITE, CLUSTER, CLUSTER_NAME)
                or broker.authorizer.allowed_somewhere(ctx, WRITE, TOPIC)):
            return _error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        pid = await broker.next_producer_id()
        return InitProducerIdResponse(
            throttle_time_ms=0, error_code=0, producer_id=pid, producer_epoch=0
        )
    if not ctx.allowed(WRITE, TRANSACTIONAL_ID, tid):
        return _error(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    timeout = req.transaction_timeout_ms
    code = check_init_request(tid, timeout, broker.txn_coordinator.config)
    if code != ErrorCode.NONE:
        return _error(code)
    try:
        res: InitResult = await broker.txn_coordinator.run_with_producer_id(
            tid,
            lambda shard, now, new_pid: shard.init_producer_id(
                tid, timeout, now, expected=expected, new_producer_id=new_pid
            ),
        )
    except KafkaError as e:
        return _error(e.code)
    code = res.error
    if code == ErrorCode.PRODUCER_FENCED and v < 4:
        code = ErrorCode.INVALID_PRODUCER_EPOCH
    if code != ErrorCode.NONE:
        return _error(code)
    return InitProducerIdResponse(
        throttle_time_ms=0, error_code=0, producer_id=res.producer_id,
        producer_epoch=res.producer_epoch,
    )
