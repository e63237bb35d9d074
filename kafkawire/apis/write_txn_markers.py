"""WriteTxnMarkers (key 27), versions 1-2 (v0 was removed in Kafka 4.0, KIP-724).

Sent by a transaction coordinator to the partition leaders of a transaction, and by
``Admin.abortTransaction`` (``kafka-transactions abort``) to close a hanging transaction.
Every listed partition gets a COMMIT (``transaction_result`` true) or ABORT marker with the
producer id, epoch and coordinator epoch (``kafkawire.txn_markers``).

- Errors per partition: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER,
  INVALID_PRODUCER_EPOCH (older than the producer's epoch on that partition),
  TRANSACTION_COORDINATOR_FENCED (older coordinator epoch than the last marker's).
- v2 adds ``TransactionVersion`` (KIP-1228): with 2 the marker's epoch must be newer than the
  epoch of the producer's open transaction on the partition (the coordinator bumped it for the
  marker), else INVALID_PRODUCER_EPOCH, as Kafka 4.3.1; the same epoch with nothing open is a
  retry and is written (KAFKA-19999). Below 2 it must not be older.
- Results keep the request's order; Kafka groups them by producer id (a map), so two markers
  for one producer id in one request are answered as two entries here.
- As Kafka's, every marker of the request is appended first and the answer waits for their
  replication together (the partitions are written concurrently), not one after the other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from kafkawire.txn_markers import write_marker
from kraft.acls import CLUSTER, CLUSTER_ACTION, CLUSTER_NAME
from protocol._generated.write_txn_markers_request import WriteTxnMarkersRequest
from protocol._generated.write_txn_markers_response import WriteTxnMarkersResponse
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.server import RequestContext

API_KEY = 27
VERSIONS = (1, 2)

R = WriteTxnMarkersResponse


async def handle(
    broker: Broker, ctx: RequestContext, req: WriteTxnMarkersRequest
) -> WriteTxnMarkersResponse:
    markers: list[R.WritableTxnMarkerResult] = []
    cluster_ok = ctx.allowed(CLUSTER_ACTION, CLUSTER, CLUSTER_NAME)

    async def write(m: WriteTxnMarkersRequest.WritableTxnMarker, topic: str,
                    result: R.WritableTxnMarkerPartitionResult) -> None:
        result.error_code = await write_marker(
            broker, topic, result.partition_index, m.producer_id, m.producer_epoch,
            m.transaction_result, m.coordinator_epoch,
            m.transaction_version if ctx.api_version >= 2 else 0,
        )

    async with trio.open_nursery() as nursery:
        for m in req.markers:
            topics: list[R.WritableTxnMarkerTopicResult] = []
            for t in m.topics:
                parts = []
                for p in t.partition_indexes:
                    # Kafka: CLUSTER_ACTION on the cluster (brokers only)
                    result = R.WritableTxnMarkerPartitionResult(
                        partition_index=p, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
                    if cluster_ok:
                        nursery.start_soon(write, m, t.name, result)
                    parts.append(result)
                topics.append(R.WritableTxnMarkerTopicResult(name=t.name, partitions=parts))
            markers.append(R.WritableTxnMarkerResult(producer_id=m.producer_id, topics=topics))
    return WriteTxnMarkersResponse(markers=markers)
