"""AlterReplicaLogDirs (key 34), versions 1-2 (v2 flexible).

Moves a hosted replica to another directory of ``log.dirs`` (``kafkawire.log_mover``: a
future log there is filled from the current one, then swapped in). Per partition, in Kafka
4.3.1's order (``ReplicaManager.alterReplicaLogDirs``):
- ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED;
- a future directory name over 255 bytes: INVALID_TOPIC_EXCEPTION ("The topic name is too
  long.");
- a path that is not one of ``log.dirs`` (relative paths included): LOG_DIR_NOT_FOUND; an
  offline destination: KAFKA_STORAGE_ERROR;
- a partition not hosted here: REPLICA_NOT_AVAILABLE when it exists on other brokers (the
  destination is remembered: the replica is created there when it comes, as Kafka's
  ``preferredLogDirs``; ``kafka-reassign-partitions`` retries until it exists),
  UNKNOWN_TOPIC_OR_PARTITION when it does not exist; a replica in an offline directory:
  KAFKA_STORAGE_ERROR;
- the replica's own directory: NONE (a move in progress is cancelled); another one: NONE and
  the move starts (or is redirected), KAFKA_STORAGE_ERROR while any log directory is offline
  (Kafka creates no future log then).
A partition named under several directories takes the last one, as Kafka's map of requested
moves does. Results are grouped by topic in request order.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from kafkawire.metadata_log import METADATA_TOPIC
from kraft.acls import ALTER, CLUSTER, CLUSTER_NAME
from log.layout import FUTURE_DIR_SUFFIX, partition_dir_name
from protocol._generated.alter_replica_log_dirs_request import AlterReplicaLogDirsRequest
from protocol._generated.alter_replica_log_dirs_response import AlterReplicaLogDirsResponse
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.server import RequestContext

API_KEY = 34
VERSIONS = (1, 2)

R = AlterReplicaLogDirsResponse


def _resolved(path: str) -> Path | None:
    p = Path(path)
    return p.resolve() if p.is_absolute() else None


async def handle(
    broker: Broker, ctx: RequestContext, req: AlterReplicaLogDirsRequest
) -> AlterReplicaLogDirsResponse:
    assert broker.logs is not None
    configured = {Path(d).resolve() for d in broker.config.log_dirs}
    wanted: dict[tuple[str, int], str] = {}
    for d in req.dirs:
        for t in d.topics:
            for p in t.partitions:
                wanted.pop((t.name, p), None)  # the last mention counts (and orders)
                wanted[(t.name, p)] = d.path
    by_topic: dict[str, list[R.AlterReplicaLogDirPartitionResult]] = {}
    allowed = ctx.allowed(ALTER, CLUSTER, CLUSTER_NAME)  # Kafka: ALTER on the cluster
    for (topic, partition), path in wanted.items():
        if not allowed:
            code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        else:
            code = _alter(broker, topic, partition, _resolved(path), configured)
        by_topic.setdefault(topic, []).append(
            R.AlterReplicaLogDirPartitionResult(partition_index=partition, error_code=code)
        )
    return R(
        throttle_time_ms=0,
        results=[
            R.AlterReplicaLogDirTopicResult(topic_name=t, partitions=ps)
            for t, ps in by_topic.items()
        ],
    )


def _alter(broker: Broker, topic: str, partition: int, dest: Path | None,
           configured: set[Path]) -> ErrorCode:
    logs, replicas, mover = broker.logs, broker.replicas, broker.log_mover
    assert logs is not None
    if len(partition_dir_name(topic, partition)) + 1 + 32 + len(FUTURE_DIR_SUFFIX) > 255:
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    if dest is None or dest not in configured:
        return ErrorCode.LOG_DIR_NOT_FOUND
    target = next((m for m in logs.managers if m.log_dir.resolve() == dest), None)
    if target is None or target.offline:
        return ErrorCode.KAFKA_STORAGE_ERROR
    if replicas is None or mover is None or topic == METADATA_TOPIC:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    try:
        replicas.hosted(topic, partition)
    except KafkaError as e:
        if e.code != ErrorCode.NOT_LEADER_OR_FOLLOWER:
            return e.code
        logs.preferred[(topic, partition)] = target  # created there when it comes
        return ErrorCode.REPLICA_NOT_AVAILABLE
    if logs.is_offline(topic, partition):
        return ErrorCode.KAFKA_STORAGE_ERROR
    if logs.manager_of(topic, partition) is None:
        return ErrorCode.REPLICA_NOT_AVAILABLE
    try:
        mover.request(topic, partition, target)
    except KafkaError as e:
        return e.code
    except OSError as e:  # creating the future log failed: the destination's failure
        logs.mark_offline(e, target.log_dir)
        return ErrorCode.KAFKA_STORAGE_ERROR
    return ErrorCode.NONE
