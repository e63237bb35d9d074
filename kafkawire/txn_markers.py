"""Writing transaction markers on the partition leader (what WriteTxnMarkers does).

One function, :func:`write_marker`, used by the WriteTxnMarkers handler (key 27) and by the
transaction coordinator's in-process marker path (a coordinator on this node whose partitions
are led here skips the network round trip; partitions led elsewhere would get WriteTxnMarkers).

A marker is a control batch with one record: key ``(version 0, type 0 ABORT / 1 COMMIT)``,
value ``(version 0, coordinator epoch)``, transactional + control attributes, the
transaction's producer id and epoch, no sequence, and this broker's clock as timestamp (as
Kafka's ``MemoryRecords.withEndTransactionMarker``). The log checks it as Kafka's producer
state does: an epoch older than the producer's (transaction version 2: not newer than the open
transaction's, the coordinator bumps the epoch for the marker) -> INVALID_PRODUCER_EPOCH, a
coordinator epoch
older than the last marker's -> TRANSACTION_COORDINATOR_FENCED; otherwise it closes the
producer's open transaction on that partition (an ABORT goes into the ``.txnindex``) and the
last stable offset moves.

Markers for ``__consumer_offsets`` partitions complete transactional offset commits: those go
through the group coordinator's runtime (``broker.group_runtime.append_marker``), which
appends the marker and replays it into the group shard of that partition.

The coordinator's path (``forward=True``) sends the marker with WriteTxnMarkers (the highest
version both serve) to the partition's leader when the metadata image names another broker
(:func:`send_marker`); a connection failure answers NOT_LEADER_OR_FOLLOWER, which the
coordinator retries with backoff, as Kafka's marker channel does with a disconnected leader.
The WriteTxnMarkers handler never forwards.

:func:`write_markers` writes the markers of one transaction to all its partitions at once, as
Kafka's marker channel does (one WriteTxnMarkers per leader broker, all brokers in parallel, and
a leader appends every marker of a request before waiting for their replication): partitions
led here are appended together and wait for the high watermark together, partitions led by
another broker go in one request per broker, all brokers at once. Written one partition after
the other, a 3-node transaction over n partitions waited n replication round trips before its
CompleteCommit, and the producer's next transaction met CONCURRENT_TRANSACTIONS meanwhile.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import trio

from kafkawire.node_client import NodeDisconnected, NodeUnsupportedVersion
from protocol._generated.write_txn_markers_request import WriteTxnMarkersRequest
from protocol.errors import ErrorCode, KafkaError
from protocol.records import ControlType, build_control_batch, iter_headers

if TYPE_CHECKING:
    from kafkawire.broker import Broker

__all__ = ["write_marker", "write_markers", "OFFSETS_TOPIC"]

TopicPartition = tuple[str, int]

OFFSETS_TOPIC = "__consumer_offsets"


def _now_ms() -> int:
    return int(time.time() * 1000)


async def write_marker(
    broker: Broker,
    topic: str,
    partition: int,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    transaction_version: int = 0,
    *,
    forward: bool = False,
) -> ErrorCode:
    """Write one marker on this node: through the group coordinator runtime for
    ``__consumer_offsets`` (its shard replays the marker: pending transactional offsets
    become visible on COMMIT and are dropped on ABORT), else straight into the log. With
    ``forward``, a partition led by another broker gets the marker over the wire."""
    part = broker.image.partition(topic, partition)
    if forward and part is not None and part.leader >= 0 and part.leader != broker.node_id:
        return await send_marker(broker, part.leader, topic, partition, producer_id,
                                 producer_epoch, commit, coordinator_epoch, transaction_version)
    if topic == OFFSETS_TOPIC:
        runtime = broker.group_runtime
        try:
            runtime.append_marker(partition, producer_id, producer_epoch, commit, coordinator_epoch)
        except KafkaError as e:
            return e.code
        code = await runtime.wait_committed(partition)
        return ErrorCode.NOT_LEADER_OR_FOLLOWER if code == ErrorCode.NOT_COORDINATOR else code
    if part is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert broker.replicas is not None
    now = _now_ms()
    kind = ControlType.COMMIT if commit else ControlType.ABORT
    batch = bytearray(
        build_control_batch(kind, producer_id, producer_epoch, coordinator_epoch, timestamp=now)
    )
    try:
        p = broker.replicas.leader_partition(topic, partition)
        info = p.append_as_leader(batch, iter_headers(batch), now_ms=now, coordinator=False,
                                  marker_transaction_version=transaction_version)
    except KafkaError as e:
        return e.code
    # as Kafka's WriteTxnMarkers, answered once the marker is replicated to the ISR
    return await broker.replicas.wait_for_high_watermark(p, info.last_offset + 1)


async def send_marker(
    broker: Broker, leader: int, topic: str, partition: int, producer_id: int,
    producer_epoch: int, commit: bool, coordinator_epoch: int, transaction_version: int,
) -> ErrorCode:
    """WriteTxnMarkers for one partition to its leader ``leader``; the partition's answer."""
    client = broker.peers.get(leader)
    if client is None:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    Req = WriteTxnMarkersRequest
    req = Req(markers=[Req.WritableTxnMarker(
        producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=commit,
        topics=[Req.WritableTxnMarkerTopic(name=topic, partition_indexes=[partition])],
        coordinator_epoch=coordinator_epoch, transaction_version=transaction_version)])
    try:
        resp = await client.request(req)
    except (NodeDisconnected, NodeUnsupportedVersion):
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    for m in resp.markers:
        for t in m.topics:
            for p in t.partitions:
                if t.name == topic and p.partition_index == partition:
                    return ErrorCode(p.error_code)
    return ErrorCode.UNKNOWN_SERVER_ERROR


async def write_markers(
    broker: Broker,
    partitions: Sequence[TopicPartition],
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    transaction_version: int = 0,
    *,
    forward: bool = False,
) -> dict[TopicPartition, ErrorCode]:
    """One transaction's marker on every partition of ``partitions``, all at once (see the
    module doc); the code of each partition."""
    results: dict[TopicPartition, ErrorCode] = {}
    by_leader: dict[int, list[TopicPartition]] = {}
    local: list[TopicPartition] = []
    for tp in dict.fromkeys(partitions):
        part = broker.image.partition(*tp)
        if forward and part is not None and part.leader >= 0 and part.leader != broker.node_id:
            by_leader.setdefault(part.leader, []).append(tp)
        else:
            local.append(tp)

    async def here(tp: TopicPartition) -> None:
        results[tp] = await write_marker(broker, tp[0], tp[1], producer_id, producer_epoch,
                                         commit, coordinator_epoch, transaction_version)

    async def there(leader: int, tps: list[TopicPartition]) -> None:
        results.update(await send_markers(broker, leader, tps, producer_id, producer_epoch,
                                          commit, coordinator_epoch, transaction_version))

    if len(local) == 1 and not by_leader:
        await here(local[0])
        return results
    async with trio.open_nursery() as nursery:
        for tp in local:
            nursery.start_soon(here, tp)
        for leader, tps in by_leader.items():
            nursery.start_soon(there, leader, tps)
    return results


async def send_markers(
    broker: Broker, leader: int, partitions: Sequence[TopicPartition], producer_id: int,
    producer_epoch: int, commit: bool, coordinator_epoch: int, transaction_version: int,
) -> dict[TopicPartition, ErrorCode]:
    """One WriteTxnMarkers for ``partitions`` to their leader ``leader``: each partition's
    answer (NOT_LEADER_OR_FOLLOWER for all when the leader cannot be reached)."""
    client = broker.peers.get(leader)
    if client is None:
        return dict.fromkeys(partitions, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    Req = WriteTxnMarkersRequest
    topics: dict[str, list[int]] = {}
    for topic, p in partitions:
        topics.setdefault(topic, []).append(p)
    req = Req(markers=[Req.WritableTxnMarker(
        producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=commit,
        topics=[Req.WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                for t, ps in topics.items()],
        coordinator_epoch=coordinator_epoch, transaction_version=transaction_version)])
    try:
        resp = await client.request(req)
    except (NodeDisconnected, NodeUnsupportedVersion):
        return dict.fromkeys(partitions, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    out = dict.fromkeys(partitions, ErrorCode.UNKNOWN_SERVER_ERROR)
    for m in resp.markers:
        for t in m.topics:
            for pr in t.partitions:
                if (t.name, pr.partition_index) in out:
                    out[(t.name, pr.partition_index)] = ErrorCode(pr.error_code)
    return out
