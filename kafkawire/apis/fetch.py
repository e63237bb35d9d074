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
- Descriptors: a response holds at most ``FETCH_RESPONSE_OPEN_FILES_MAX`` segment files open
  (for sendfile); the data of the other partitions is read into the response. A file that
  cannot be opened (no descriptor left) gives KAFKA_STORAGE_ERROR for that partition.
- Errors per partition: UNKNOWN_TOPIC_OR_PARTITION (v13+: UNKNOWN_TOPIC_ID by id),
  OFFSET_OUT_OF_RANGE, FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH for a current leader epoch
  older / newer than ours, NOT_LEADER_OR_FOLLOWER for a partition not hosted here, or not
  led here when the fetcher must read from the leader (followers; consumers before v11).
- Every read goes through the partition-state layer (``log.replica.Partition.read``). A
  ``replica_id`` (v4-14) or ``replica_state.replica_id`` (v15+) >= 0 is a follower fetch: it
  reads up to the log end offset, and its fetch offset is that follower's log end offset on
  the leader (which moves the high watermark of a partition whose ISR holds it); its broker
  epoch (v15+ ``replica_state.replica_epoch``) is kept, and a fetch from an earlier
  incarnation of that broker never brings it into the ISR (KIP-903, ``isr_manager``). A
  ``last_fetched_epoch`` (v12+) that diverges from this log is answered with
  ``diverging_epoch`` and no records (KIP-320/KIP-595), as Kafka's leader does.
- Replication throttle (KIP-73, ``kafkawire.replication_quota``): a follower outside the ISR
  fetching a partition named by ``leader.replication.throttled.replicas`` gets no records
  while ``leader.replication.throttled.rate`` is exceeded (its position still counts, and
  they do not count towards ``min_bytes``); bytes sent for throttled partitions are recorded.
- Fetch from follower (KIP-392): with ``replica.selector.class`` set to Kafka's
  ``org.apache.kafka.common.replica.RackAwareReplicaSelector``, a leader answers a consumer
  (v11+) that names a ``rack_id`` with ``preferred_read_replica``, and no records, when a
  replica in that rack (not the leader) holds the fetch offset (its log start <= offset <= its
  log end, as last fetched); the client then fetches there, up to that follower's high
  watermark. The leader in the client's rack, or none there, serves as usual.
- Authorization (``kafkawire.authorizer``): READ on each topic, else its partitions answer
  TOPIC_AUTHORIZATION_FAILED with no data.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

from kraft.acls import CLUSTER, CLUSTER_ACTION, CLUSTER_NAME, READ, TOPIC
from log.replica import FetchIsolation, Partition
from protocol._generated.fetch_request import FetchRequest
from protocol._generated.fetch_response import FetchResponse
from protocol.errors import ErrorCode, KafkaError
from protocol.primitives import ZERO_UUID

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.replication_quota import ReplicationQuota
    from kafkawire.server import RequestContext

API_KEY = 1
VERSIONS = (4, 18)

READ_COMMITTED = 1
#: Segment files one response keeps open for ``os.sendfile``; the data of further partitions is
#: copied into the response instead (a fetch of thousands of partitions must not take
#: thousands of descriptors until it is sent; their data is small then).
FETCH_RESPONSE_OPEN_FILES_MAX = 16
Part = FetchResponse.PartitionData
Aborted = FetchResponse.AbortedTransaction


@dataclass
class _Slot:
    topic: str | None
    topic_id: uuid.UUID
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int
    last_fetched_epoch: int
    log_start_offset: int
    resp: Part


@dataclass
class _Params:
    """Kafka's FetchParams: who fetches and how far it may read."""

    replica_id: int  # >= 0: a follower
    isolation: FetchIsolation
    require_leader: bool
    now_ms: int
    #: a follower's broker epoch (v15+ ``replica_state.replica_epoch``; -1 before, KIP-903)
    replica_epoch: int = -1
    held_files: int = 0  # segment files this response keeps open until it is sent
    #: (client rack, rack of each broker) when a consumer may be sent to a follower (KIP-392)
    rack_selector: tuple[str, dict[int, str | None]] | None = None
    #: follower fetches: the leader's replication throttle (KIP-73)
    quota: ReplicationQuota | None = None


def leader_throttles(quota: ReplicationQuota, p: Partition, replica_id: int, now_ms: int) -> bool:
    """Kafka's ``shouldLeaderThrottle``: a replica outside the ISR fetching a throttled
    partition while the leader's replication quota is exceeded gets no records."""
    return replica_id not in p.isr and quota.is_throttled(p.topic, p.partition) \
        and quota.is_quota_exceeded(now_ms)


RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


def _rack_selector(broker: Broker, req: FetchRequest, version: int, replica_id: int
                   ) -> tuple[str, dict[int, str | None]] | None:
    if version < 11 or replica_id >= 0 or not req.rack_id:
        return None
    if broker.config.values.get("replica.selector.class") != RACK_AWARE_SELECTOR:
        return None
    return req.rack_id, {b.broker_id: b.rack for b in broker.image.brokers.values()}


def preferred_read_replica(p: Partition, fetch_offset: int, client_rack: str,
                           racks: dict[int, str | None]) -> int:
    """KIP-392's RackAwareReplicaSelector on a leader: a replica in ``client_rack`` that holds
    ``fetch_offset`` (the leader first, else the one furthest ahead), or -1 (the leader)."""
    if not p.is_leader or racks.get(p.local_id) == client_rack:
        return -1
    best, best_end = -1, -1
    for r, f in p.followers.items():
        if r in p.isr and racks.get(r) == client_rack and f.log_start_offset <= fetch_offset \
                <= f.log_end_offset and f.log_end_offset > best_end:
            best, best_end = r, f.log_end_offset
    return best


def _params(req: FetchRequest, version: int, now_ms: int) -> _Params:
    replica_id = req.replica_state.replica_id if version >= 15 else req.replica_id
    if replica_id >= 0:
        epoch = req.replica_state.replica_epoch if version >= 15 else -1
        return _Params(replica_id, FetchIsolation.LOG_END, True, now_ms, replica_epoch=epoch)
    isolation = (
        FetchIsolation.TXN_COMMITTED if req.isolation_level == READ_COMMITTED
        else FetchIsolation.HIGH_WATERMARK
    )
    # consumers from v11 (which carry client metadata) may read from a follower (KIP-392)
    return _Params(replica_id, isolation, version < 11, now_ms)


def _failed(r: Part, code: int) -> None:
    """As Kafka: an errored partition carries default (-1) offsets and no aborted list."""
    r.error_code = code
    r.high_watermark = r.last_stable_offset = r.log_start_offset = -1
    r.aborted_transactions = None


def _read_one(p: Partition, s: _Slot, params: _Params, limit: int, first: bool) -> int:
    """One partition's part of the response; returns its record bytes."""
    r = s.resp
    if params.rack_selector is not None:
        preferred = preferred_read_replica(p, s.fetch_offset, *params.rack_selector)
        if preferred >= 0:
            r.preferred_read_replica = preferred
            r.high_watermark = p.high_watermark
            r.last_stable_offset = p.log.last_stable_offset
            r.log_start_offset = p.log.log_start_offset
            r.error_code = ErrorCode.NONE
            return 0
    read = p.read(
        params.replica_id, s.fetch_offset, max(limit, 0), isolation=params.isolation,
        now_ms=params.now_ms, current_leader_epoch=s.current_leader_epoch,
        last_fetched_epoch=s.last_fetched_epoch, replica_log_start_offset=s.log_start_offset,
        replica_epoch=params.replica_epoch, min_one_message=first, require_leader=params.require_leader,
    )
    r.high_watermark = read.high_watermark
    r.last_stable_offset = read.last_stable_offset
    r.log_start_offset = read.log_start_offset
    committed = params.isolation is FetchIsolation.TXN_COMMITTED
    r.aborted_transactions = [] if committed else None
    r.error_code = ErrorCode.NONE
    if params.quota is not None and leader_throttles(params.quota, p, params.replica_id,
                                                     params.now_ms):
        return 0  # the fetch position counted (read above); the records wait
    if read.diverging_epoch is not None:
        r.diverging_epoch = FetchResponse.EpochEndOffset(
            epoch=read.diverging_epoch[0], end_offset=read.diverging_epoch[1]
        )
        return 0
    res = read.records
    if res is None or res.size == 0:
        return 0
    if params.held_files + len(res.ranges) <= FETCH_RESPONSE_OPEN_FILES_MAX:
        r.records = res  # a ReadResult: file ranges the server sends with sendfile
        params.held_files += len(res.ranges)
    else:  # enough descriptors held by this response: copy the bytes instead
        r.records = res.read_bytes()  # OSError: KAFKA_STORAGE_ERROR in _read_all
    if committed:
        # Kafka's bound: the first index entry past the bytes read (else the next segment /
        # the log end), not the LSO; an empty read lists nothing.
        bound = p.log.fetch_upper_bound(res)
        r.aborted_transactions = [
            Aborted(producer_id=t.producer_id, first_offset=t.first_offset)
            for t in p.log.aborted_transactions(s.fetch_offset, bound)
        ]
    return res.size


def _read_all(broker: Broker, slots: list[_Slot], max_bytes: int, params: _Params) -> int:
    """Fill each slot's response; returns the number of record bytes gathered."""
    assert broker.replicas is not None
    total = 0
    img = broker.image
    for s in slots:
        r = s.resp
        r.records = b""
        if s.topic is None:
            continue
        if img.partition(s.topic, s.partition) is None:
            r.error_code = (
                ErrorCode.UNKNOWN_TOPIC_ID if s.topic_id != ZERO_UUID
                else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
            continue
        if broker.is_offline(s.topic, s.partition):
            _failed(r, ErrorCode.KAFKA_STORAGE_ERROR)
            continue
        limit = min(s.partition_max_bytes, max_bytes - total)
        try:
            p = broker.replicas.hosted(s.topic, s.partition)
            total += _read_one(p, s, params, limit, total == 0)
        except KafkaError as e:
            _failed(r, e.code)
        except OSError:  # e.g. no descriptor left to open the segment
            r.records = b""
            _failed(r, ErrorCode.KAFKA_STORAGE_ERROR)
    return total


async def handle(broker: Broker, ctx: RequestContext, req: FetchRequest) -> FetchResponse:
    v = ctx.api_version
    if ctx.connection.listener_type == "controller":
        return await _raft_fetch(broker, req, v)
    if v >= 7 and req.session_id != 0:
        return FetchResponse(
            error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=0, responses=[]
        )
    params = _params(req, v, int(time.time() * 1000))
    params.rack_selector = _rack_selector(broker, req, v, params.replica_id)
    params.quota = broker.leader_quota if params.replica_id >= 0 else None
    max_bytes = req.max_bytes if v >= 3 else 2**31 - 1
    img = broker.image
    slots: list[_Slot] = []
    out: list[FetchResponse.FetchableTopicResponse] = []
    replica = req.replica_state.replica_id if v >= 15 and req.replica_state else req.replica_id
    # Kafka: a follower needs CLUSTER_ACTION on the cluster, a consumer READ on each topic
    follower_ok = replica >= 0 and ctx.allowed(CLUSTER_ACTION, CLUSTER, CLUSTER_NAME)
    for ft in req.topics:
        if v >= 13:
            topic_img = img.topics_by_id.get(ft.topic_id)
            name = topic_img.name if topic_img is not None else None
        else:
            name = ft.topic
        denied = name is not None and not (
            follower_ok if replica >= 0 else ctx.allowed(READ, TOPIC, name))
        if denied:
            name = None
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
            if denied:
                resp.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            parts.append(resp)
            slots.append(
                _Slot(name, ft.topic_id, fp.partition, fp.fetch_offset, fp.partition_max_bytes,
                      fp.current_leader_epoch, fp.last_fetched_epoch, fp.log_start_offset, resp)
            )
    deadline = trio.current_time() + max(req.max_wait_ms, 0) / 1000.0
    keys = [(s.topic, s.partition) for s in slots if s.topic is not None]
    while True:
        total = _read_all(broker, slots, max_bytes, params)
        errors = any(s.resp.error_code or s.resp.preferred_read_replica >= 0 for s in slots)
        if total >= req.min_bytes or errors or req.max_wait_ms <= 0 or not keys:
            break
        if trio.current_time() >= deadline:
            break
        waited = trio.current_time()
        await broker.notifier.wait_any(keys, deadline)
        ctx.remote_s += trio.current_time() - waited
    _count(broker, slots)
    _record_throttled(params.quota, slots, params.now_ms)
    return FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=out)


def _record_throttled(quota: ReplicationQuota | None, slots: list[_Slot], now_ms: int) -> None:
    """The record bytes sent to a follower for throttled partitions count against the
    leader's replication quota (Kafka's ``sizeOfThrottledPartitions``)."""
    if quota is None:
        return
    total = 0
    for s in slots:
        recs = s.resp.records
        if s.topic is not None and recs and quota.is_throttled(s.topic, s.partition):
            total += len(recs) if isinstance(recs, (bytes, bytearray)) else recs.size
    quota.record(total, now_ms)


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


async def _raft_fetch(broker: Broker, req: FetchRequest, version: int) -> FetchResponse:
    """A controller listener serves only the Raft Fetch of ``__cluster_metadata`` (KIP-595):
    the node's Raft replica answers it (kraft/raft/replication.py), parking it up to its max
    wait when there is nothing new."""
    from kafkawire.raft_driver import raft_answer

    replica = req.replica_state.replica_id if version >= 15 and req.replica_state \
        else req.replica_id
    resp = await raft_answer(broker.quorum, replica, req)
    if not isinstance(resp, FetchResponse):
        return FetchResponse(error_code=ErrorCode.REQUEST_TIMED_OUT, responses=[])
    return resp
