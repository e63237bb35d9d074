"""Fetch (key 1), versions 4-18.

- Each partition's data is the whole batch containing ``fetch_offset`` and the batches after
  it, located through the sparse offset index and sent from the segment file with
  ``os.sendfile`` (the response carries ``FileRecords`` placeholders, see ``server``).
- Limits: ``partition_max_bytes`` per partition and ``max_bytes`` (v3+) for the response; the
  first batch of the first non-empty partition is returned whole even when it is larger
  (KIP-74), so a consumer can always make progress.
- Long poll: if fewer than ``min_bytes`` are available the request parks on the append
  notifier until data arrives or ``max_wait_ms`` passes; it is always answered by its deadline.
- Visibility: up to the high watermark (read_uncommitted: aborted data included, as Kafka) or
  the last stable offset (read_committed, v4+). AbortedTransactions is null for
  read_uncommitted; at read_committed it lists (producer id, first offset) of the aborted
  transactions overlapping [fetch offset, upper bound) from the segments' ``.txnindex``, with
  Kafka's upper bound (the first offset-index entry past the bytes read, else the next segment's
  base offset, else the log end offset), and is empty when nothing is returned.
- Fetch sessions (KIP-227) are declined: every response has session id 0, so clients keep
  sending full fetch requests. A request naming a session id we never issued gets
  FETCH_SESSION_ID_NOT_FOUND.
- Errors per partition: UNKNOWN_TOPIC_OR_PARTITION (v13+: UNKNOWN_TOPIC_ID by id),
  OFFSET_OUT_OF_RANGE, FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH for a current leader epoch
  older / newer than ours.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

from protocol._generated.fetch_request import FetchRequest
from protocol._generated.fetch_response import FetchResponse
from protocol.errors import ErrorCode, KafkaError
from protocol.primitives import ZERO_UUID

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.server import RequestContext

API_KEY = 1
VERSIONS = (4, 18)

READ_COMMITTED = 1
Part = FetchResponse.PartitionData
Aborted = FetchResponse.AbortedTransaction


def check_leader_epoch(requested: int, current: int) -> ErrorCode:
    """-1 means the client knows no epoch; any other value must be the leader's."""
    if requested == -1 or requested == current:
        return ErrorCode.NONE
    return ErrorCode.FENCED_LEADER_EPOCH if requested < current else ErrorCode.UNKNOWN_LEADER_EPOCH


@dataclass
class _Slot:
    topic: str | None
    topic_id: uuid.UUID
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int
    resp: Part


def _read_all(broker: Broker, slots: list[_Slot], max_bytes: int, isolation: int) -> int:
    """Fill each slot's response; returns the number of record bytes gathered."""
    total = 0
    first_data = True
    img = broker.image
    for s in slots:
        r = s.resp
        r.records = b""
        if s.topic is None:
            continue
        pimg = img.partition(s.topic, s.partition)
        plog = broker.partition_log(s.topic, s.partition) if pimg is not None else None
        if pimg is None or plog is None:
            r.error_code = (
                ErrorCode.UNKNOWN_TOPIC_ID if s.topic_id != ZERO_UUID and pimg is None
                else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
            continue
        code = check_leader_epoch(s.current_leader_epoch, pimg.leader_epoch)
        if code:
            r.error_code = code
            continue
        hw = plog.high_watermark
        lso = plog.last_stable_offset
        r.high_watermark = hw
        r.last_stable_offset = lso
        r.log_start_offset = plog.log_start_offset
        r.aborted_transactions = [] if isolation == READ_COMMITTED else None
        r.error_code = ErrorCode.NONE
        limit = min(s.partition_max_bytes, max_bytes - total)
        if limit <= 0 and not first_data:
            continue
        upper = lso if isolation == READ_COMMITTED else hw
        try:
            res = plog.read(
                s.fetch_offset, max(limit, 0), max_offset=upper, min_one_message=first_data
            )
        except KafkaError as e:
            # as Kafka: an errored partition carries default (-1) offsets and no aborted list
            r.error_code = e.code
            r.high_watermark = r.last_stable_offset = r.log_start_offset = -1
            r.aborted_transactions = None
            continue
        if res.size > 0:
            r.records = res  # a ReadResult: file ranges the server sends with sendfile
            total += res.size
            first_data = False
            if isolation == READ_COMMITTED:
                # Kafka's bound: the first index entry past the bytes read (else the next
                # segment / the log end), not the LSO; an empty read lists nothing.
                bound = plog.fetch_upper_bound(res)
                r.aborted_transactions = [
                    Aborted(producer_id=t.producer_id, first_offset=t.first_offset)
                    for t in plog.aborted_transactions(s.fetch_offset, bound)
                ]
    return total


async def handle(broker: Broker, ctx: RequestContext, req: FetchRequest) -> FetchResponse:
    v = ctx.api_version
    if v >= 7 and req.session_id != 0:
        return FetchResponse(
            error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=0, responses=[]
        )
    isolation = req.isolation_level
    max_bytes = req.max_bytes if v >= 3 else 2**31 - 1
    img = broker.image
    slots: list[_Slot] = []
    out: list[FetchResponse.FetchableTopicResponse] = []
    for ft in req.topics:
        if v >= 13:
            topic_img = img.topics_by_id.get(ft.topic_id)
            name = topic_img.name if topic_img is not None else None
        else:
            name = ft.topic
        parts: list[Part] = []
        out.append(
            FetchResponse.FetchableTopicResponse(
                topic=ft.topic if v < 13 else "", topic_id=ft.topic_id, partitions=parts
            )
        )
        for fp in ft.partitions:
            resp = Part(
                partition_index=fp.partition,
                error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if name is None else 0,
                high_watermark=-1,
                last_stable_offset=-1,
                log_start_offset=-1,
                aborted_transactions=None,
                preferred_read_replica=-1,
                records=b"",
            )
            if name is None and v >= 13:
                resp.error_code = ErrorCode.UNKNOWN_TOPIC_ID
            parts.append(resp)
            slots.append(
                _Slot(name, ft.topic_id, fp.partition, fp.fetch_offset, fp.partition_max_bytes,
                      fp.current_leader_epoch, resp)
            )
    deadline = trio.current_time() + max(req.max_wait_ms, 0) / 1000.0
    keys = [(s.topic, s.partition) for s in slots if s.topic is not None]
    while True:
        total = _read_all(broker, slots, max_bytes, isolation)
        errors = any(s.resp.error_code for s in slots)
        if total >= req.min_bytes or errors or req.max_wait_ms <= 0 or not keys:
            break
        if trio.current_time() >= deadline:
            break
        waited = trio.current_time()
        await broker.notifier.wait_any(keys, deadline)
        ctx.remote_s += trio.current_time() - waited
    _count(broker, slots)
    return FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=out)


def _count(broker: Broker, slots: list[_Slot]) -> None:
    """BytesOutPerSec, FailedFetchRequestsPerSec and TotalFetchRequestsPerSec per topic."""
    metrics = broker.metrics
    topics = broker.image.topics
    seen: set[str] = set()
    for s in slots:
        c = metrics.topic(s.topic if s.topic in topics else None)
        if s.topic is not None and s.topic not in seen:
            seen.add(s.topic)
            c.total_fetch += 1
        if s.resp.error_code:
            c.failed_fetch += 1
        elif not isinstance(s.resp.records, (bytes, bytearray)):
            c.bytes_out += s.resp.records.size
