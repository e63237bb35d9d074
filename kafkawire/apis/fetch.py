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
- Fetch sessions (KIP-227, v7+; the cache and its rules are ``kafkawire.replication.fetch_session``,
  Kafka's FetchManager): epoch 0 is a full fetch that creates a session when the cache has
  room (``max.incremental.fetch.session.cache.slots``, 8 shards, eviction by Kafka's rules);
  epoch > 0 is an incremental fetch of that session: the partitions named are added or
  updated, ``forgotten_topics_data`` (v13+ by topic id) dropped, every partition of the session
  is read, and the answer carries only those with news (records, a new high watermark or log
  start offset, an error, a preferred read replica, a diverging epoch); partitions that
  returned records move to the end of the session's order (fairness within ``max_bytes``).
  Epoch -1 is sessionless (session id 0) and closes a session it names. Session errors
  (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, FETCH_SESSION_TOPIC_ID_ERROR when
  a v13+ fetch meets a session made by names or the reverse) are top-level, with session id
  0 and no partitions, as Kafka answers.
- Cost per partition: a consumer's partition with nothing to return (fetch offset at the
  visible end) is answered from its offsets (``Partition.idle_offsets``) without reading the
  log; so is a follower's when it is in the ISR and fetches again at the log end offset it
  already reported, with the same log start offset, broker epoch and last fetched epoch
  (``Partition.idle_follower_offsets``: its last fetch and caught-up times move, which keeps
  it in the ISR; the high watermark, which only a new follower offset could move, and the
  ISR expansion and divergence checks are left to ``read``, which every other fetch takes).
  In an incremental fetch an idle partition whose offsets the session already reported gets
  no answer object at all; answers are made per partition only when needed.
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
- Replication throttle (KIP-73, ``kafkawire.replication.throttle``): a follower outside the ISR
  fetching a partition named by ``leader.replication.throttled.replicas`` gets no records
  while ``leader.replication.throttled.rate`` is exceeded (its position still counts, and
  they do not count towards ``min_bytes``); bytes sent for throttled partitions are recorded.
- Fetch from follower (KIP-392): with ``replica.selector.class`` set to Kafka's
  ``org.apache.kafka.common.replica.RackAwareReplicaSelector``, a leader answers a consumer
  (v11+) that names a ``rack_id`` with ``preferred_read_replica``, and no records, when a
  replica in that rack (not the leader) holds the fetch offset (its log start <= offset <= its
  log end, as last fetched); the client then fetches there, up to that follower's high
  watermark. The leader in the client's rack, or none there, serves as usual.
- Authorization (``kafkawire.security.authorizer``): READ on each topic, else its partitions answer
  TOPIC_AUTHORIZATION_FAILED with no data.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

from kafkawire.replication.fetch_session import (
    FINAL_EPOCH,
    INVALID_SESSION_ID,
    CachedPartition,
    ContextKind,
    FetchContext,
    Outcome,
    PartitionKey,
)
from kraft.acls import CLUSTER, CLUSTER_ACTION, CLUSTER_NAME, READ, TOPIC
from log.replica import FetchIsolation, Partition
from protocol._generated.fetch_request import FetchRequest
from protocol._generated.fetch_response import FetchResponse
from protocol.errors import ErrorCode, KafkaError
from protocol.primitives import ZERO_UUID

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext
    from kafkawire.replication.throttle import ReplicationQuota

API_KEY = 1
VERSIONS = (4, 18)

READ_COMMITTED = 1
#: Segment files one response keeps open for ``os.sendfile``; the data of further partitions is
#: copied into the response instead (a fetch of thousands of partitions must not take
#: thousands of descriptors until it is sent; their data is small then).
FETCH_RESPONSE_OPEN_FILES_MAX = 16
Part = FetchResponse.PartitionData
Aborted = FetchResponse.AbortedTransaction


class _Fetch:
    """This fetch's partitions (the request's, or an incremental fetch's whole session) and
    their answers, each made only when needed: an idle partition of an incremental fetch that
    the session already knows about gets none."""

    __slots__ = ("answers", "denied", "parts", "unknown")

    def __init__(self, parts: list[CachedPartition], denied: dict[str, int], v: int) -> None:
        self.parts = parts
        self.answers: list[Part | None] = [None] * len(parts)
        #: topics this client may not read, with their error
        self.denied = denied
        self.unknown = ErrorCode.UNKNOWN_TOPIC_ID if v >= 13 \
            else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def answer(self, i: int) -> Part:
        r = self.answers[i]
        if r is None:
            cp = self.parts[i]
            error = self.unknown if cp.topic is None else self.denied.get(cp.topic, 0)
            r = self.answers[i] = Part(
                partition_index=cp.partition, error_code=error, high_watermark=-1,
                last_stable_offset=-1, log_start_offset=-1, aborted_transactions=None,
                preferred_read_replica=-1, records=b"", diverging_epoch=_NO_DIVERGING,
                current_leader=_NO_LEADER, snapshot_id=_NO_SNAPSHOT)
        return r


#: shared defaults of every answer (never mutated: a diverging epoch gets its own)
_NO_DIVERGING = FetchResponse.EpochEndOffset()
_NO_LEADER = FetchResponse.LeaderIdAndEpoch()
_NO_SNAPSHOT = FetchResponse.SnapshotId()


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


def _read_one(p: Partition, cp: CachedPartition, r: Part, params: _Params, limit: int,
              first: bool) -> int:
    """One partition's part of the response; returns its record bytes."""
    if params.rack_selector is not None:
        preferred = preferred_read_replica(p, cp.fetch_offset, *params.rack_selector)
        if preferred >= 0:
            r.preferred_read_replica = preferred
            r.high_watermark = p.high_watermark
            r.last_stable_offset = p.log.last_stable_offset
            r.log_start_offset = p.log.log_start_offset
            r.error_code = ErrorCode.NONE
            return 0
    read = p.read(
        params.replica_id, cp.fetch_offset, max(limit, 0), isolation=params.isolation,
        now_ms=params.now_ms, current_leader_epoch=cp.current_leader_epoch,
        last_fetched_epoch=cp.last_fetched_epoch,
        replica_log_start_offset=cp.fetcher_log_start_offset,
        replica_epoch=params.replica_epoch, min_one_message=first,
        require_leader=params.require_leader,
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
            for t in p.log.aborted_transactions(cp.fetch_offset, bound)
        ]
    return res.size


def _idle(p: Partition, cp: CachedPartition, params: _Params) -> tuple[int, int] | None:
    """(high watermark, log start offset) of a partition with nothing to return and nothing
    to change but a follower's fetch times, answered without reading; None: read it."""
    if params.replica_id >= 0:
        return p.idle_follower_offsets(
            params.replica_id, cp.fetch_offset, cp.current_leader_epoch,
            cp.last_fetched_epoch, cp.fetcher_log_start_offset, params.replica_epoch,
            params.now_ms)
    if cp.last_fetched_epoch >= 0:
        return None
    return p.idle_offsets(cp.fetch_offset, params.isolation, cp.current_leader_epoch,
                          params.require_leader)


def _read_all(broker: Broker, f: _Fetch, max_bytes: int, params: _Params, lazy: bool) -> int:
    """Fill each partition's answer; returns the number of record bytes gathered. ``lazy``:
    an incremental fetch, where an unchanged idle partition gets no answer at all. A
    partition with nothing to return is answered from its offsets without reading the log
    (``Partition.idle_offsets`` for a consumer, ``Partition.idle_follower_offsets`` for an
    in-sync follower at the log end): the cheap path, per partition."""
    assert broker.replicas is not None and broker.logs is not None
    total = 0
    hosted = broker.replicas.partitions
    fast = params.rack_selector is None and not (
        broker.replicas.offline_logs or broker.logs.any_offline)
    committed = params.isolation is FetchIsolation.TXN_COMMITTED
    denied = f.denied
    answers = f.answers
    for i, cp in enumerate(f.parts):
        name = cp.topic
        if name is None or (denied and name in denied):
            f.answer(i)
            continue
        key = (name, cp.partition)
        p = hosted.get(key) if fast else None
        idle = _idle(p, cp, params) if p is not None else None
        if idle is not None and p is not None:
            r = answers[i]
            if r is None:
                if lazy and cp.high_watermark == idle[0] \
                        and cp.local_log_start_offset == idle[1]:
                    continue  # the session knows all of it: not in the answer
                r = f.answer(i)
            r.records, r.error_code = b"", ErrorCode.NONE
            r.high_watermark, r.log_start_offset = idle
            r.last_stable_offset = p.log.last_stable_offset
            r.aborted_transactions = [] if committed else None
            continue
        total += _read_slow(broker, f, i, key, max_bytes - total, params, total == 0)
    return total


def _read_slow(broker: Broker, f: _Fetch, i: int, key: tuple[str, int], room: int,
               params: _Params, first: bool) -> int:
    """One partition through ``Partition.read`` (or its error); returns its record bytes."""
    assert broker.replicas is not None
    cp = f.parts[i]
    r = f.answer(i)
    r.records = b""
    if broker.image.partition(*key) is None:
        r.error_code = (
            ErrorCode.UNKNOWN_TOPIC_ID if cp.topic_id != ZERO_UUID
            else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        )
        return 0
    if broker.is_offline(*key):
        _failed(r, ErrorCode.KAFKA_STORAGE_ERROR)
        return 0
    try:
        p = broker.replicas.hosted(*key)
        return _read_one(p, cp, r, params, min(cp.max_bytes, room), first)
    except KafkaError as e:
        _failed(r, e.code)
    except OSError:  # e.g. no descriptor left to open the segment
        r.records = b""
        _failed(r, ErrorCode.KAFKA_STORAGE_ERROR)
    return 0


def _request_partitions(broker: Broker, req: FetchRequest, v: int) -> list[CachedPartition]:
    """The partitions a request names (v13+: by topic id; a name of None for an unknown id)."""
    by_id = broker.image.topics_by_id
    out: list[CachedPartition] = []
    for ft in req.topics:
        if v >= 13:
            ti = by_id.get(ft.topic_id)
            name = ti.name if ti is not None else None
        else:
            name = ft.topic
        tid = ft.topic_id
        out.extend(
            CachedPartition(name, tid, fp.partition, fp.fetch_offset, fp.partition_max_bytes,
                            fp.current_leader_epoch, fp.last_fetched_epoch, fp.log_start_offset)
            for fp in ft.partitions)
    return out


def _forgotten(req: FetchRequest, v: int) -> list[PartitionKey]:
    if v < 7 or not req.forgotten_topics_data:
        return []
    return [(ft.topic_id if v >= 13 else ft.topic, p)
            for ft in req.forgotten_topics_data for p in ft.partitions]


def _new_context(broker: Broker, req: FetchRequest, v: int, replica: int,
                 now_ms: int) -> FetchContext:
    session_id, epoch = (req.session_id, req.session_epoch) if v >= 7 else (0, FINAL_EPOCH)
    by_id = broker.image.topics_by_id

    def resolve(topic_id: uuid.UUID) -> str | None:
        ti = by_id.get(topic_id)
        return ti.name if ti is not None else None

    return broker.fetch_sessions.new_context(
        v, session_id, epoch, replica >= 0, _request_partitions(broker, req, v),
        _forgotten(req, v), now_ms, resolve)


def _denied(ctx: RequestContext, parts: list[CachedPartition], replica: int
            ) -> dict[str, int]:
    """The topics this client may not read: TOPIC_AUTHORIZATION_FAILED for their partitions.
    Kafka: a follower needs CLUSTER_ACTION on the cluster, a consumer READ on each topic."""
    names = {cp.topic for cp in parts if cp.topic is not None}
    if replica >= 0:
        if ctx.allowed(CLUSTER_ACTION, CLUSTER, CLUSTER_NAME):
            return {}
        return dict.fromkeys(names, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    return {n: ErrorCode.TOPIC_AUTHORIZATION_FAILED for n in names
            if not ctx.allowed(READ, TOPIC, n)}


async def handle(broker: Broker, ctx: RequestContext, req: FetchRequest) -> FetchResponse:
    v = ctx.api_version
    if ctx.connection.listener_type == "controller":
        return await _raft_fetch(broker, req, v)
    now_ms = broker.clock_ms()
    params = _params(req, v, now_ms)
    params.rack_selector = _rack_selector(broker, req, v, params.replica_id)
    params.quota = broker.leader_quota if params.replica_id >= 0 else None
    fctx = _new_context(broker, req, v, params.replica_id, now_ms)
    if fctx.kind is ContextKind.SESSION_ERROR:
        return FetchResponse(throttle_time_ms=0, error_code=fctx.error,
                             session_id=INVALID_SESSION_ID, responses=[])
    f = _Fetch(fctx.partitions, _denied(ctx, fctx.partitions, params.replica_id), v)
    lazy = fctx.kind is ContextKind.INCREMENTAL
    max_bytes = req.max_bytes if v >= 3 else 2**31 - 1
    deadline = trio.current_time() + max(req.max_wait_ms, 0) / 1000.0
    keys: list[tuple[str, int]] | None = None
    while True:
        total = _read_all(broker, f, max_bytes, params, lazy)
        if total >= req.min_bytes or req.max_wait_ms <= 0 or _stop_waiting(f):
            break
        if keys is None:
            keys = [(cp.topic, cp.partition) for cp in f.parts
                    if cp.topic is not None and cp.topic not in f.denied]
        if not keys or trio.current_time() >= deadline:
            break
        waited = trio.current_time()
        await broker.notifier.wait_any(keys, deadline)
        ctx.remote_s += trio.current_time() - waited
    outcomes = {i: _outcome(r) for i, r in enumerate(f.answers) if r is not None}
    answer = broker.fetch_sessions.answer(fctx, broker.clock_ms(), outcomes)
    _count(broker, f)
    _record_throttled(params.quota, f, params.now_ms)
    return FetchResponse(throttle_time_ms=0, error_code=answer.error,
                         session_id=answer.session_id,
                         responses=_responses(f, answer.include, v))


def _record_throttled(quota: ReplicationQuota | None, f: _Fetch, now_ms: int) -> None:
    """The record bytes sent to a follower for throttled partitions count against the
    leader's replication quota (Kafka's ``sizeOfThrottledPartitions``)."""
    if quota is None:
        return
    total = 0
    for i, r in enumerate(f.answers):
        topic = f.parts[i].topic
        if r is None or topic is None or not r.records:
            continue
        if quota.is_throttled(topic, f.parts[i].partition):
            recs = r.records
            total += len(recs) if isinstance(recs, (bytes, bytearray)) else recs.size
    quota.record(total, now_ms)


def _stop_waiting(f: _Fetch) -> bool:
    """Errors and preferred read replicas are answered at once."""
    for r in f.answers:
        if r is not None and (r.error_code or r.preferred_read_replica >= 0):
            return True
    return False


def _outcome(r: Part) -> Outcome:
    rec = r.records
    size = len(rec) if isinstance(rec, (bytes, bytearray)) else rec.size
    return (size, r.high_watermark, r.log_start_offset, r.error_code,
            r.preferred_read_replica >= 0, r.diverging_epoch.epoch >= 0)


def _responses(f: _Fetch, include: set[int] | None, v: int
               ) -> list[FetchResponse.FetchableTopicResponse]:
    """The answered partitions, consecutive ones of a topic under one entry (as Kafka)."""
    out: list[FetchResponse.FetchableTopicResponse] = []
    prev: object = None
    parts: list[Part] = []
    indexes = range(len(f.parts)) if include is None else sorted(include)
    for i in indexes:
        cp = f.parts[i]
        key = cp.topic_id if v >= 13 else cp.topic
        if not out or key != prev:
            parts = []
            out.append(FetchResponse.FetchableTopicResponse(
                topic=cp.topic or "" if v < 13 else "", topic_id=cp.topic_id, partitions=parts))
            prev = key
        parts.append(f.answer(i))
    return out


def _count(broker: Broker, f: _Fetch) -> None:
    """BytesOutPerSec, FailedFetchRequestsPerSec and TotalFetchRequestsPerSec per topic."""
    metrics = broker.metrics
    topics = broker.image.topics
    denied = f.denied
    for name in {cp.topic for cp in f.parts if cp.topic is not None}:
        if name not in denied:
            metrics.topic(name if name in topics else None).total_fetch += 1
    for i, r in enumerate(f.answers):
        if r is None:
            continue
        topic = f.parts[i].topic
        c = metrics.topic(topic if topic in topics and topic not in denied else None)
        if r.error_code:
            c.failed_fetch += 1
        elif not isinstance(r.records, (bytes, bytearray)):
            c.bytes_out += r.records.size


async def _raft_fetch(broker: Broker, req: FetchRequest, version: int) -> FetchResponse:
    """A controller listener serves only the Raft Fetch of ``__cluster_metadata`` (KIP-595):
    the node's Raft replica answers it (kraft/raft/replication.py), parking it up to its max
    wait when there is nothing new."""
    from kafkawire.metadata.raft_driver import raft_answer

    replica = req.replica_state.replica_id if version >= 15 and req.replica_state \
        else req.replica_id
    resp = await raft_answer(broker.quorum, replica, req)
    if not isinstance(resp, FetchResponse):
        return FetchResponse(error_code=ErrorCode.REQUEST_TIMED_OUT, responses=[])
    return resp
