"""OffsetFetch (key 9), versions 1-10 (v6+ flexible; v8+ several groups; v10 topic ids).

Committed offsets from the group's shard. ``topics`` null (v2+) = every committed offset of the
group. Unknown groups and partitions answer offset -1, metadata "" and NONE (Kafka's answer).
Leader epochs are returned from v5 (the field does not exist below). ``require_stable`` (v7+):
partitions with a pending transactional offset commit answer UNSTABLE_OFFSET_COMMIT. v1-7
carry the group's error at top level (a coordinator error: empty topics); v8+ per group.
v9+ member id/epoch are checked for consumer groups as Kafka's validateOffsetFetch (a null
member id with epoch -1 is an admin; else UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH, or
ILLEGAL_GENERATION for a classic member); classic groups do not check them.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from kraft.acls import DESCRIBE, GROUP, TOPIC
from protocol._generated.offset_fetch_request import OffsetFetchRequest
from protocol._generated.offset_fetch_response import OffsetFetchResponse
from protocol.errors import ErrorCode, KafkaError
from protocol.primitives import ZERO_UUID

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 9
VERSIONS = (1, 10)

Rows = list[tuple[str, list[tuple[int, int, int, str, ErrorCode]]]]


def fetch_group(
    broker: Broker, group_id: str, topics: list[tuple[str, list[int]]] | None, stable: bool,
    member: tuple[str | None, int] | None = None, ctx: RequestContext | None = None,
) -> tuple[ErrorCode, Rows]:
    """With ``ctx``, Kafka's checks: DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED),
    DESCRIBE on each topic (named: TOPIC_AUTHORIZATION_FAILED; all topics: left out)."""
    if ctx is not None and not ctx.allowed(DESCRIBE, GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, []
    try:
        shard = broker.group_runtime.shard_for(group_id)
    except KafkaError as e:
        return e.code, []
    if member is not None:
        code: ErrorCode = shard.validate_fetch(group_id, member[0], member[1])  # type: ignore[attr-defined]
        if code != ErrorCode.NONE:
            return code, []
    rows: Rows = shard.fetch_offsets(group_id, topics, stable)  # type: ignore[attr-defined]
    if ctx is not None and ctx.authorizer is not None:
        denied = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        checked: Rows = []
        for t, parts in rows:
            if ctx.allowed(DESCRIBE, TOPIC, t):
                checked.append((t, parts))
            elif topics is not None:
                checked.append((t, [(p, -1, -1, "", denied) for p, *_rest in parts]))
        rows = checked
    return ErrorCode.NONE, rows


async def handle(broker: Broker, ctx: RequestContext, req: OffsetFetchRequest) -> OffsetFetchResponse:
    v = ctx.api_version
    stable = bool(req.require_stable) if v >= 7 else False
    if v < 8:
        wanted = None if req.topics is None else [(t.name, list(t.partition_indexes)) for t in req.topics]
        code, rows = fetch_group(broker, req.group_id, wanted, stable, ctx=ctx)
        topics = [
            OffsetFetchResponse.OffsetFetchResponseTopic(name=t, partitions=[
                OffsetFetchResponse.OffsetFetchResponsePartition(
                    partition_index=p, committed_offset=o, committed_leader_epoch=e if v >= 5 else -1,
                    metadata=m, error_code=err,
                )
                for p, o, e, m, err in parts
            ])
            for t, parts in rows
        ]
        return OffsetFetchResponse(topics=topics, error_code=code)
    img = broker.image
    groups = []
    for g in req.groups:
        wanted = None
        unknown_ids: list[uuid.UUID] = []
        if g.topics is not None:
            wanted = []
            for rt in g.topics:
                name = rt.name
                if v >= 10:
                    found = img.topics_by_id.get(rt.topic_id)
                    if found is None:
                        unknown_ids.append(rt.topic_id)
                        continue
                    name = found.name
                wanted.append((name, list(rt.partition_indexes)))
        member = (g.member_id, g.member_epoch) if v >= 9 else None
        code, rows = fetch_group(broker, g.group_id, wanted, stable, member, ctx=ctx)
        rtopics = []
        for t, parts in rows:
            ti = img.topics.get(t)
            rtopics.append(
                OffsetFetchResponse.OffsetFetchResponseTopics(
                    name=t, topic_id=ti.topic_id if ti is not None else ZERO_UUID,
                    partitions=[
                        OffsetFetchResponse.OffsetFetchResponsePartitions(
                            partition_index=p, committed_offset=o, committed_leader_epoch=e,
                            metadata=m, error_code=err,
                        )
                        for p, o, e, m, err in parts
                    ],
                )
            )
        if v >= 10 and g.topics is not None:
            for tid in unknown_ids:
                asked = next(x for x in g.topics if x.topic_id == tid)
                rtopics.append(OffsetFetchResponse.OffsetFetchResponseTopics(
                    topic_id=tid, partitions=[
                        OffsetFetchResponse.OffsetFetchResponsePartitions(
                            partition_index=p, committed_offset=-1, committed_leader_epoch=-1,
                            metadata="", error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                        ) for p in asked.partition_indexes
                    ]))
        groups.append(OffsetFetchResponse.OffsetFetchResponseGroup(
            group_id=g.group_id, topics=rtopics if code == ErrorCode.NONE else [], error_code=code,
        ))
    return OffsetFetchResponse(groups=groups)
