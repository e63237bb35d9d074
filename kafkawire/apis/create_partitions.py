"""CreatePartitions (key 37), versions 0-3.

- ``count`` is the new total. Fewer than now: INVALID_PARTITIONS "The topic t currently has 3
  partition(s); 2 would not be an increase."; the same: INVALID_PARTITIONS "Topic already has
  3 partition(s)." (Kafka's controller messages). Unknown topic: UNKNOWN_TOPIC_OR_PARTITION.
- ``assignments`` (one replica list per new partition) are checked like Kafka: their number
  ("Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified."),
  empty lists, unregistered or repeated brokers, and the topic's replication factor
  (INVALID_REPLICA_ASSIGNMENT). Without assignments the new partitions are placed round-robin
  over the live brokers with the topic's replication factor.
- A topic named twice: INVALID_REQUEST "Duplicate topic name.", listed first as Kafka does.
- Every result carries its topic name (the Tansu finding: one result per requested topic).
- All additions of one request are one batch of PartitionRecords; ``validate_only`` commits
  nothing. More than 10,000 records (Kafka's ``MAX_RECORDS_PER_USER_OP``): POLICY_VIOLATION
  "Unable to perform excessively large batch operation." for every topic, nothing committed.
- The new partitions' logs are created before the records are committed; if that fails, the
  topics get KAFKA_STORAGE_ERROR and nothing is committed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafkawire.apis.create_topics import THROTTLED_MESSAGE
from kraft import controller
from kraft.acls import ALTER, TOPIC
from protocol._generated.create_partitions_request import CreatePartitionsRequest
from protocol._generated.create_partitions_response import CreatePartitionsResponse
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 37
VERSIONS = (0, 3)

#: Kafka's controller bound on the metadata records of one user operation
MAX_RECORDS_PER_USER_OP = 10_000

Result = CreatePartitionsResponse.CreatePartitionsTopicResult


async def handle(
    broker: Broker, ctx: RequestContext, req: CreatePartitionsRequest
) -> CreatePartitionsResponse:
    names = [t.name for t in req.topics]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    results = [
        Result(name=n, error_code=ErrorCode.INVALID_REQUEST, error_message="Duplicate topic name.")
        for n in duplicates
    ]
    async with broker.metadata_lock:
        image = broker.image
        records: list[Any] = []
        for t in req.topics:
            if t.name in duplicates:
                continue
            if not ctx.allowed(ALTER, TOPIC, t.name):  # Kafka: ALTER on the topic
                results.append(Result(name=t.name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                      error_message=None))
                continue
            if broker.mutation_exceeded(ctx, strict=ctx.api_version >= 3):  # KIP-599
                results.append(Result(name=t.name, error_code=ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                                      error_message=THROTTLED_MESSAGE))
                continue
            assignments = (
                None if t.assignments is None else [list(a.broker_ids) for a in t.assignments]
            )
            try:
                added = controller.create_partitions(image, t.name, t.count, assignments)
            except KafkaError as e:
                results.append(Result(name=t.name, error_code=e.code, error_message=e.message))
                continue
            records.extend(added)
            if not req.validate_only:
                broker.record_mutation(ctx, t.count - len(image.topics[t.name].partitions))
            results.append(Result(name=t.name, error_code=ErrorCode.NONE, error_message=None))
        if len(records) > MAX_RECORDS_PER_USER_OP:  # Kafka's controller fails the request
            results = results[: len(duplicates)] + [
                Result(name=t.name, error_code=ErrorCode.POLICY_VIOLATION,
                       error_message="Unable to perform excessively large batch operation.")
                for t in req.topics if t.name not in duplicates
            ]
        elif records and not req.validate_only:
            try:
                await broker.commit_metadata(records)
            except KafkaError as e:  # the logs could not be created: nothing was committed
                results = [
                    r if r.error_code else Result(name=r.name, error_code=e.code,
                                                  error_message=e.message)
                    for r in results
                ]
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)
