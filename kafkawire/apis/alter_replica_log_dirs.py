"""AlterReplicaLogDirs (key 34), versions 1-2 (v2 flexible).

A partition log lives in one directory of ``log.dirs`` (the one DescribeLogDirs lists it
under; new partitions go to the directory with the fewest, see log/dirs.py). Replicas are not
moved between directories:
- the destination is the directory the replica is in: NONE (already there, as Kafka answers);
- another directory of ``log.dirs``, or the replica's directory is offline:
  KAFKA_STORAGE_ERROR (moving a replica between log dirs, Kafka's ``-future`` logs and
  ReplicaAlterLogDirsThread, is not implemented: README "Not yet");
- a path that is not one of ``log.dirs`` (relative paths included): LOG_DIR_NOT_FOUND;
- a topic or partition that does not exist here: UNKNOWN_TOPIC_OR_PARTITION.
The directory is checked before the partition. A partition named under several directories
takes the last one, as Kafka's map of requested moves does. Results are grouped by topic in
request order.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from kraft.acls import ALTER, CLUSTER, CLUSTER_NAME
from protocol._generated.alter_replica_log_dirs_request import AlterReplicaLogDirsRequest
from protocol._generated.alter_replica_log_dirs_response import AlterReplicaLogDirsResponse
from protocol.errors import ErrorCode

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
    for (topic, partition), path in wanted.items():
        dest = _resolved(path)
        if not ctx.allowed(ALTER, CLUSTER, CLUSTER_NAME):  # Kafka: ALTER on the cluster
            code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        elif dest is None or dest not in configured:
            code = ErrorCode.LOG_DIR_NOT_FOUND
        elif broker.replicas is None or broker.replicas.partition(topic, partition) is None:
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif (m := broker.logs.manager_of(topic, partition)) is None or m.offline \
                or m.log_dir.resolve() != dest:
            code = ErrorCode.KAFKA_STORAGE_ERROR
        else:
            code = ErrorCode.NONE
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
