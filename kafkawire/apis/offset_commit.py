"""OffsetCommit (key 8), versions 2-10 (v2-7 non-flexible; v8+ flexible; v10 names topics by id).

Offsets are written as OffsetCommit records to the group's ``__consumer_offsets`` partition
and answered once appended. Checks, in Kafka's order: topics/partitions the metadata does not
know get UNKNOWN_TOPIC_OR_PARTITION (v10: UNKNOWN_TOPIC_ID) before the group is consulted;
then the group: a simple commit (generation -1, no member) is accepted for an Empty or new
group and UNKNOWN_MEMBER_ID for an active one; members are validated (UNKNOWN_MEMBER_ID,
FENCED_INSTANCE_ID, ILLEGAL_GENERATION; REBALANCE_IN_PROGRESS while CompletingRebalance;
ILLEGAL_GENERATION for a generation >= 0 on an unknown group); metadata longer than
``offset.metadata.max.bytes``: OFFSET_METADATA_TOO_LARGE. v2-4 ``retention_time_ms`` sets an
explicit expiry (OffsetCommitValue v1), as Kafka.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from groups.shard import GroupShard
from kafkawire.coordinators.groups import commit_partition, on_group, partition_error, topic_name
from kraft.acls import READ, TOPIC
from protocol._generated.offset_commit_request import OffsetCommitRequest
from protocol._generated.offset_commit_response import OffsetCommitResponse
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 8
VERSIONS = (2, 10)

RTopic = OffsetCommitResponse.OffsetCommitResponseTopic
RPart = OffsetCommitResponse.OffsetCommitResponsePartition


async def handle(broker: Broker, ctx: RequestContext, req: OffsetCommitRequest) -> OffsetCommitResponse:
    v = ctx.api_version
    by_id = v >= 10
    img = broker.image

    def all_failed(code: ErrorCode) -> OffsetCommitResponse:
        return OffsetCommitResponse(
            topics=[
                RTopic(name=t.name, topic_id=t.topic_id, partitions=[
                    RPart(partition_index=p.partition_index, error_code=code) for p in t.partitions
                ])
                for t in req.topics
            ]
        )

    def op(shard: GroupShard, now: int) -> tuple[list[Any], OffsetCommitResponse]:
        # Kafka answers the partitions the metadata does not know first (KafkaApis adds them
        # to the response builder before the coordinator's answer), grouped by topic; the
        # coordinator validates the commit against the others (KIP-1251's assignment epochs)
        known: list[tuple[Any, Any, Any]] = []
        unknown: list[tuple[Any, Any, Any]] = []
        by_topic: dict[tuple[str, Any], list[RPart]] = {}
        for t in req.topics:
            name = topic_name(img, t.name, t.topic_id, by_id)
            if not ctx.allowed(READ, TOPIC, name or t.name):  # Kafka: READ on each topic
                by_topic[(t.name, t.topic_id)] = [RPart(
                    partition_index=p.partition_index,
                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED) for p in t.partitions]
                continue
            for p in t.partitions:
                ok = partition_error(img, name, p.partition_index, by_id) == ErrorCode.NONE
                (known if ok else unknown).append((t, name, p))
        group_code = shard.validate_commit(
            req.group_id, req.generation_id_or_member_epoch, req.member_id,
            req.group_instance_id, False, now, api_version=v,
            partitions=[(name, p.partition_index) for _t, name, p in known],
        )
        expire = -1
        if 2 <= v <= 4 and req.retention_time_ms != -1:
            expire = now + req.retention_time_ms
        records = []
        for t, name, p in unknown:
            code, _rec = commit_partition(
                shard, img, req.group_id, name, p, group_code, now, by_id=by_id, expire_ms=expire)
            by_topic.setdefault((t.name, t.topic_id), []).append(
                RPart(partition_index=p.partition_index, error_code=code))
        for t, name, p in known:
            code, rec = commit_partition(
                shard, img, req.group_id, name, p, group_code, now, by_id=by_id, expire_ms=expire
            )
            if rec is not None:
                records.append(rec)
            by_topic.setdefault((t.name, t.topic_id), []).append(
                RPart(partition_index=p.partition_index, error_code=code))
        topics = [RTopic(name=n, topic_id=tid, partitions=parts) for (n, tid), parts in by_topic.items()]
        return records, OffsetCommitResponse(topics=topics)

    def on_error(e: KafkaError) -> OffsetCommitResponse:
        return all_failed(e.code)

    resp: OffsetCommitResponse = await on_group(broker, req.group_id, op, on_error, ctx=ctx,
                                                  operation=READ)
    return resp
