"""TxnOffsetCommit (key 28), versions 0-5 (v3+ flexible).

The group side of transactional offset commits: the offsets are appended to the group's
``__consumer_offsets`` partition as a TRANSACTIONAL batch carrying the producer's id and epoch.
They stay pending (invisible to OffsetFetch; UNSTABLE_OFFSET_COMMIT with require_stable) until
a COMMIT marker of that producer lands on that partition (WriteTxnMarkers, through
``CoordinatorRuntime.append_marker``), and are dropped on ABORT.
Checks: unknown topics/partitions UNKNOWN_TOPIC_OR_PARTITION; v3+ group member fields are
validated like OffsetCommit's (generation -1 without a member is always accepted: producers
without group metadata); offset.metadata.max.bytes. The transaction coordinator's side
(``TxnCoordinator.check_offsets_partition``): v5 adds the group's partition to the transaction
(transaction version 2), older versions must have added it with AddOffsetsToTxn (KIP-890 part 1
verification: INVALID_TXN_STATE, TRANSACTION_ABORTABLE from v4, INVALID_PRODUCER_EPOCH).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from groups.shard import GroupShard
from kafkawire.coordinators.groups import commit_partition
from kafkawire.coordinators.runtime import now_ms
from kraft.acls import GROUP, READ, TOPIC, TRANSACTIONAL_ID, WRITE
from protocol._generated.txn_offset_commit_request import TxnOffsetCommitRequest
from protocol._generated.txn_offset_commit_response import TxnOffsetCommitResponse
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 28
VERSIONS = (0, 5)

RTopic = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
RPart = TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition


async def handle(broker: Broker, ctx: RequestContext, req: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    v = ctx.api_version
    img = broker.image
    runtime = broker.group_runtime

    def answer(codes: dict[tuple[str, int], ErrorCode]) -> TxnOffsetCommitResponse:
        return TxnOffsetCommitResponse(topics=[
            RTopic(name=t.name, partitions=[
                RPart(partition_index=p.partition_index, error_code=codes[(t.name, p.partition_index)])
                for p in t.partitions
            ])
            for t in req.topics
        ])

    keys = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]
    # Kafka: WRITE on the transactional id, READ on the group, READ on each topic
    if not ctx.allowed(WRITE, TRANSACTIONAL_ID, req.transactional_id):
        return answer(dict.fromkeys(keys, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    if not ctx.allowed(READ, GROUP, req.group_id):
        return answer(dict.fromkeys(keys, ErrorCode.GROUP_AUTHORIZATION_FAILED))
    denied = {t.name for t in req.topics if not ctx.allowed(READ, TOPIC, t.name)}
    if denied:
        return answer({k: ErrorCode.TOPIC_AUTHORIZATION_FAILED if k[0] in denied
                       else ErrorCode.OPERATION_NOT_ATTEMPTED for k in keys})
    try:
        partition = runtime.partition_for(req.group_id)
        shard = runtime.check(partition).shard
        assert isinstance(shard, GroupShard)
    except KafkaError as e:
        return answer({k: e.code for k in keys})
    # the transaction's side first: v5 adds the group's partition to the transaction
    # (transaction version 2), older versions check that AddOffsetsToTxn did (KIP-890 part 1)
    code = await broker.txn_coordinator.check_offsets_partition(
        req.transactional_id, partition, req.producer_id, req.producer_epoch, v
    )
    if code != ErrorCode.NONE:
        return answer({k: code for k in keys})
    now = now_ms()
    generation, member, instance = (req.generation_id, req.member_id, req.group_instance_id) if v >= 3 else (-1, "", None)
    group_code = shard.validate_commit(req.group_id, generation, member, instance, True, now,
                                       partitions=[(t.name, p.partition_index) for t in req.topics for p in t.partitions])
    codes: dict[tuple[str, int], ErrorCode] = {}
    records = []
    for t in req.topics:
        for p in t.partitions:
            code, rec = commit_partition(
                shard, img, req.group_id, t.name, p, group_code, now,
                leader_epoch=None if v >= 2 else -1,
            )
            if rec is not None:
                records.append(rec)
            codes[(t.name, p.partition_index)] = code
    if records:
        try:
            runtime.append(
                partition, records, producer_id=req.producer_id,
                producer_epoch=req.producer_epoch, transactional=True,
            )
        except KafkaError as e:
            return answer({k: e.code for k in keys})
        code = await runtime.wait_committed(partition)
        if code:
            return answer({k: code for k in keys})
    return answer(codes)
