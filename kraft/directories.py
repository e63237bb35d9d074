"""KIP-858 replica directory assignment (AssignReplicasToDirs, API 73), the controller side.

A broker tells the active controller which of its log directories holds each replica it
created; the controller records it in the partition's ``directories`` (one id per replica, in
replica order; the zero id is Kafka's UNASSIGNED) with a PartitionChangeRecord. Per partition,
as Kafka's ReplicationControlManager answers: UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION,
NOT_LEADER_OR_FOLLOWER when the broker holds no replica of it, else NONE (a record only when the
directory changes). The broker epoch is checked by the caller (STALE_BROKER_EPOCH).
"""

from __future__ import annotations

import uuid
from typing import Any

from kraft.image import MetadataImage, PartitionImage
from protocol._generated.partition_change_record import PartitionChangeRecord
from protocol.errors import ErrorCode

UNASSIGNED = uuid.UUID(int=0)

#: (directory id, topic id, partition) -> error code
Assignment = tuple[uuid.UUID, uuid.UUID, int]


def directories_of(part: PartitionImage) -> list[uuid.UUID]:
    """One directory id per replica (UNASSIGNED where none was recorded)."""
    dirs = list(part.directories)
    if len(dirs) != len(part.replicas):
        dirs = [UNASSIGNED] * len(part.replicas)
    return dirs


def assign(image: MetadataImage, broker_id: int, wanted: list[Assignment]
           ) -> tuple[dict[Assignment, int], list[Any]]:
    """(error code per requested assignment, the PartitionChangeRecords to commit)."""
    results: dict[Assignment, int] = {}
    changed: dict[tuple[uuid.UUID, int], list[uuid.UUID]] = {}
    for key in wanted:
        dir_id, topic_id, index = key
        topic = image.topics_by_id.get(topic_id)
        part = topic.partitions.get(index) if topic is not None else None
        if topic is None:
            results[key] = ErrorCode.UNKNOWN_TOPIC_ID
        elif part is None:
            results[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif broker_id not in part.replicas:
            results[key] = ErrorCode.NOT_LEADER_OR_FOLLOWER
        else:
            dirs = changed.get((topic_id, index)) or directories_of(part)
            dirs[part.replicas.index(broker_id)] = dir_id
            if dirs != directories_of(part):
                changed[(topic_id, index)] = dirs
            results[key] = ErrorCode.NONE
    records = [PartitionChangeRecord(topic_id=t, partition_id=p, directories=dirs)
               for (t, p), dirs in changed.items()]
    return results, records
