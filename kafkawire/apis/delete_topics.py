"""DeleteTopics (key 20), versions 1-6.

- v1-5 name topics in ``topic_names``; v6 in ``topics``, each by name or by topic id
  (exactly one of them: INVALID_REQUEST "Neither topic name nor id were specified." /
  "You may not specify both topic name and topic id.").
- A name or id given twice: INVALID_REQUEST "Duplicate topic name." / "Duplicate topic id.";
  a name resolving to an id also given: INVALID_REQUEST "The provided topic name maps to an
  ID that was already supplied.".
- Unknown name: UNKNOWN_TOPIC_OR_PARTITION; unknown id: UNKNOWN_TOPIC_ID (Kafka's default
  messages from v5, which carries error_message).
- Internal topics (``__consumer_offsets``...) may be deleted, as Kafka's KRaft controller allows
  with the right ACLs; ``__cluster_metadata`` is not a topic of the image, so it is unknown.
- ``delete.topic.enable=false``: every topic fails with INVALID_REQUEST (v1-2) or
  TOPIC_DELETION_DISABLED (v3+), Kafka's "Topic deletion is disabled.".
- All deletions of one request are one batch of RemoveTopicRecords through the metadata
  quorum; once committed the broker drops the partitions' logs (``sync_logs_with_image``).
  Results are in request order (Kafka shuffles them).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from kafkawire.apis.create_topics import THROTTLED_MESSAGE
from kraft import controller
from kraft.acls import DELETE, DESCRIBE, TOPIC
from kraft.image import MetadataImage
from protocol._generated.delete_topics_request import DeleteTopicsRequest
from protocol._generated.delete_topics_response import DeleteTopicsResponse
from protocol.errors import ErrorCode, KafkaError
from protocol.primitives import ZERO_UUID

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 20
VERSIONS = (1, 6)

Result = DeleteTopicsResponse.DeletableTopicResult

UNKNOWN_TOPIC_MESSAGE = "This server does not host this topic-partition."
UNKNOWN_TOPIC_ID_MESSAGE = "This server does not host this topic ID."
DELETION_DISABLED_MESSAGE = "Topic deletion is disabled."


def requested(req: DeleteTopicsRequest, version: int) -> list[tuple[str | None, uuid.UUID]]:
    if version >= 6:
        return [(t.name, t.topic_id) for t in req.topics]
    return [(n, ZERO_UUID) for n in req.topic_names]


def _result(name: str | None, topic_id: uuid.UUID, code: ErrorCode, msg: str | None) -> Result:
    return Result(name=name, topic_id=topic_id, error_code=code, error_message=msg)


def _delete_records(broker: Broker, ctx: RequestContext, image: MetadataImage,
                    to_delete: dict[uuid.UUID, str], results: list[Result]) -> list[Any]:
    """The records deleting each topic; KIP-599 refusals and errors go to ``results``."""
    v = ctx.api_version
    records: list[Any] = []
    for topic_id, name in to_delete.items():
        if broker.mutation_exceeded(ctx, strict=v >= 5):
            results.append(_result(name, topic_id, ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                                   THROTTLED_MESSAGE))
            continue
        try:
            records.extend(controller.delete_topic(image, name))
        except KafkaError as e:
            results.append(_result(name, topic_id, e.code, e.message))
            continue
        broker.record_mutation(ctx, len(image.topics[name].partitions))
        results.append(_result(name, topic_id, ErrorCode.NONE, None))
    return records


async def handle(
    broker: Broker, ctx: RequestContext, req: DeleteTopicsRequest
) -> DeleteTopicsResponse:
    v = ctx.api_version
    wanted = requested(req, v)
    if not broker.config.values.get("delete.topic.enable", True):
        code = ErrorCode.INVALID_REQUEST if v < 3 else ErrorCode.TOPIC_DELETION_DISABLED
        return DeleteTopicsResponse(
            throttle_time_ms=0,
            responses=[_result(n, i, code, DELETION_DISABLED_MESSAGE) for n, i in wanted],
        )
    results: list[Result] = []
    names: list[str] = []
    ids: list[uuid.UUID] = []
    for name, topic_id in wanted:
        if name is None:
            if topic_id == ZERO_UUID:
                results.append(_result(None, ZERO_UUID, ErrorCode.INVALID_REQUEST,
                                       "Neither topic name nor id were specified."))
            else:
                ids.append(topic_id)
        elif topic_id != ZERO_UUID:
            results.append(_result(name, topic_id, ErrorCode.INVALID_REQUEST,
                                   "You may not specify both topic name and topic id."))
        else:
            names.append(name)
    dup_names = {n for n in names if names.count(n) > 1}
    dup_ids = {i for i in ids if ids.count(i) > 1}
    results.extend(_result(n, ZERO_UUID, ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
                   for n in sorted(dup_names))
    results.extend(_result(None, i, ErrorCode.INVALID_REQUEST, "Duplicate topic id.")
                   for i in sorted(dup_ids))
    async with broker.metadata_lock:
        image = broker.image
        to_delete: dict[uuid.UUID, str] = {}
        for topic_id in dict.fromkeys(ids):
            if topic_id in dup_ids:
                continue
            topic = image.topics_by_id.get(topic_id)
            # Kafka: a topic id the principal may not DESCRIBE is unknown to it
            if topic is None or not ctx.allowed(DESCRIBE, TOPIC, topic.name):
                results.append(_result(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID,
                                       UNKNOWN_TOPIC_ID_MESSAGE))
            elif not ctx.allowed(DELETE, TOPIC, topic.name):
                results.append(_result(topic.name, topic_id,
                                       ErrorCode.TOPIC_AUTHORIZATION_FAILED, None))
            else:
                to_delete[topic_id] = topic.name
        for name in dict.fromkeys(names):
            if name in dup_names:
                continue
            found = image.topics.get(name)
            if not ctx.allowed(DELETE, TOPIC, name):  # before revealing whether it exists
                results.append(_result(name, ZERO_UUID, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                       None))
            elif found is None:
                results.append(_result(name, ZERO_UUID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                       UNKNOWN_TOPIC_MESSAGE))
            elif found.topic_id in to_delete or found.topic_id in dup_ids:
                # Kafka answers only for the name here; the id given too is dropped.
                to_delete.pop(found.topic_id, None)
                dup_ids.add(found.topic_id)
                results.append(_result(
                    name, found.topic_id, ErrorCode.INVALID_REQUEST,
                    "The provided topic name maps to an ID that was already supplied."))
            else:
                to_delete[found.topic_id] = name
        records = _delete_records(broker, ctx, image, to_delete, results)
        if records:
            await broker.commit_metadata(records)
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)
