"""ShareFetch (key 78), versions 1-2 (KIP-932; flexible).

A share consumer's fetch: it acknowledges what it processed (piggybacked
``AcknowledgementBatches``) and acquires more records of the partitions of its **share
session** (``kafkawire.share_coordinator``): epoch 0 opens the session with the partitions
named, later requests add partitions and drop ``ForgottenTopicsData``, -1 closes it
(acknowledgements only; the member's other acquired records of the session go back).

Acknowledgements are applied first; records they release are not acquired again by the same
request's first attempt (as in Kafka, where the fetch runs while they are written).

Per partition the share partition (``groups/share_partition.py``) says where to read from
(its first available record); whole batches are read from the log up to the high watermark
(``share.isolation.level=read_committed``: the last stable offset, with aborted transactions
archived; control batches are acquired like data, as Kafka does), records are acquired for the member (``MaxRecords``, batch-aligned; v2
``ShareAcquireMode`` 1 = exact record limit) and answered as ``AcquiredRecords`` ranges with
their delivery counts beside the batches that hold them. ``AcquisitionLockTimeoutMs`` is the
group's ``share.record.lock.duration.ms``.

Long poll: when nothing could be acquired the request waits up to ``MaxWaitMs`` for an append
or for records released by others (acknowledgements, lock timeouts), always answered by its
deadline. Only partitions with records, errors or acknowledgement results are in the answer.

Errors: top level SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH, INVALID_REQUEST
(acknowledgements in a session-opening request, no group/member id), UNSUPPORTED_VERSION while
share groups are disabled; per partition UNKNOWN_TOPIC_ID / UNKNOWN_TOPIC_OR_PARTITION and
(``AcknowledgeErrorCode``) INVALID_RECORD_STATE / INVALID_REQUEST.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import trio

from groups.share_partition import AcquiredRange, BatchInfo
from kafkawire.share_coordinator import ShareService, now_ms
from protocol._generated.share_fetch_request import ShareFetchRequest
from protocol._generated.share_fetch_response import ShareFetchResponse
from protocol.errors import ErrorCode, KafkaError
from protocol.records import iter_headers

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.server import RequestContext

API_KEY = 78
VERSIONS = (1, 2)

Resp = ShareFetchResponse
Part = ShareFetchResponse.PartitionData
RECORD_LIMIT_MODE = 1


def ack_error_message(code: int) -> str | None:
    """Kafka's message for an acknowledgement of records not acquired by the member."""
    if code == ErrorCode.INVALID_RECORD_STATE:
        return "The batch cannot be acknowledged. The batch is not in the acquired state."
    return None


def _error(code: ErrorCode, message: str | None = None) -> Resp:
    return Resp(error_code=code, error_message=message, acquisition_lock_timeout_ms=0,
                responses=[], node_endpoints=[])


def read_partition(
    broker: Broker, svc: ShareService, group_id: str, member_id: str, tid: uuid.UUID, p: int,
    max_bytes: int, max_records: int, strict: bool, hold: list[tuple[int, int]] | None = None,
) -> tuple[int, bytes, list[AcquiredRange]]:
    """(error, record bytes, acquired ranges) of one partition."""
    t = broker.image.topics_by_id.get(tid)
    if t is None:
        return ErrorCode.UNKNOWN_TOPIC_ID, b"", []
    if p not in t.partitions:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, b"", []
    if svc.leads(tid, p) is None:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER, b"", []
    sp = svc.partitions.get((group_id, tid, p))
    plog = broker.partition_log(t.name, p)
    if sp is None or plog is None:  # its state is still being read from the share coordinator
        return ErrorCode.NONE, b"", []
    if sp.move_start(plog.log_start_offset):  # retention or DeleteRecords passed the SPSO
        svc.changed((group_id, tid, p), sp)
    committed = svc.read_committed(group_id)
    upper = plog.last_stable_offset if committed else plog.high_watermark
    if not sp.has_available(upper):
        return ErrorCode.NONE, b"", []
    start = sp.next_fetch_offset()
    try:
        res = plog.read(start, max(max_bytes, 1), max_offset=upper, min_one_message=True)
    except KafkaError:
        return ErrorCode.NONE, b"", []
    data = res.read_bytes() if res.size else b""
    headers = iter_headers(data)
    batches = [BatchInfo(h.base_offset, h.last_offset, h.producer_id, h.is_transactional,
                         h.is_control) for _pos, h in headers]
    aborted = None
    if committed and batches:
        aborted = [(a.producer_id, a.first_offset)
                   for a in plog.aborted_transactions(start, batches[-1].last_offset + 1)]
    # As Kafka, an acquisition is not written: a restart makes the records available with
    # the delivery count of their last release (written on release, lock expiry, acks).
    got = sp.acquire(member_id, batches, max_records, now_ms(), strict=strict, aborted=aborted,
                     hold=hold)
    svc.rearm()  # new acquisition locks to time
    if not got:
        return ErrorCode.NONE, b"", []
    return ErrorCode.NONE, _trim(data, headers, got), got


def _trim(data: bytes, headers: list[Any], got: list[AcquiredRange]) -> bytes:
    """The batches that hold acquired records (whole batches, from the first such one)."""
    lo, hi = got[0].first_offset, got[-1].last_offset
    first = next(pos for pos, h in headers if h.last_offset >= lo)
    end = max(pos + h.size for pos, h in headers if h.base_offset <= hi)
    return data[first:end]


def _session_partitions(s: Any, req: ShareFetchRequest) -> None:
    for ft in req.forgotten_topics_data:
        gone = {(ft.topic_id, p) for p in ft.partitions}
        s.partitions = [tp for tp in s.partitions if tp not in gone]
    for t in req.topics:
        for fp in t.partitions:
            if (t.topic_id, fp.partition_index) not in s.partitions:
                s.partitions.append((t.topic_id, fp.partition_index))


async def handle(broker: Broker, ctx: RequestContext, req: ShareFetchRequest) -> ShareFetchResponse:
    svc: ShareService = broker.share
    if not svc.enabled():
        return _error(ErrorCode.UNSUPPORTED_VERSION)
    gid, mid = req.group_id or "", req.member_id or ""
    has_acks = any(fp.acknowledgement_batches for t in req.topics for fp in t.partitions)
    if not gid or not mid:
        return _error(ErrorCode.INVALID_REQUEST)
    if req.share_session_epoch == 0 and has_acks:
        return _error(ErrorCode.INVALID_REQUEST, "Acknowledge data present on initial fetch "
                      "request")
    try:
        s = svc.session(gid, mid, req.share_session_epoch, ctx.connection.conn_id)
    except KafkaError as e:
        return _error(e.code, e.message)
    deadline = trio.current_time() + max(req.max_wait_ms, 0) / 1000.0
    parts: dict[tuple[uuid.UUID, int], Part] = {}
    renew = ctx.api_version >= 2 and req.is_renew_ack

    def part(tid: uuid.UUID, p: int) -> Part:
        if (tid, p) not in parts:
            parts[(tid, p)] = Part(
                partition_index=p, error_code=0, acknowledge_error_code=0, records=b"",
                acquired_records=[], current_leader=current_leader(broker, tid, p))
        return parts[(tid, p)]

    hold: dict[tuple[uuid.UUID, int], list[tuple[int, int]]] = {}
    acked: dict[tuple[uuid.UUID, int], Part] = {}
    for t in req.topics:
        for fp in t.partitions:
            if fp.acknowledgement_batches:
                code = svc.acknowledge(gid, mid, t.topic_id, fp.partition_index,
                                       fp.acknowledgement_batches, renew)
                pd = part(t.topic_id, fp.partition_index)
                pd.acknowledge_error_code = code
                pd.acknowledge_error_message = ack_error_message(code)
                acked[(t.topic_id, fp.partition_index)] = pd
                if code == ErrorCode.NONE:
                    hold[(t.topic_id, fp.partition_index)] = [
                        (b.first_offset, b.last_offset) for b in fp.acknowledgement_batches
                        if 2 in b.acknowledge_types]
    if req.share_session_epoch == -1:
        svc.close_session(s)
    else:
        _session_partitions(s, req)
        led = [(gid, tid, p) for tid, p in s.partitions if svc.leads(tid, p) is not None]
        await svc.load(led, deadline - trio.current_time())
        await _fetch(broker, svc, req, ctx.api_version, s.partitions, part, hold, deadline)
    await flush_acknowledged(svc, gid, list(s.partitions), acked)
    lock_ms = svc.limits(gid).record_lock_duration_ms
    by_topic: dict[uuid.UUID, list[Part]] = {}
    for (tid, _p), pd in parts.items():
        by_topic.setdefault(tid, []).append(pd)
    return Resp(
        error_code=0, acquisition_lock_timeout_ms=lock_ms,
        node_endpoints=node_endpoints(broker, ctx, parts.values(), Resp.NodeEndpoint),
        responses=[Resp.ShareFetchableTopicResponse(topic_id=tid, partitions=ps)
                   for tid, ps in by_topic.items()],
    )


async def flush_acknowledged(svc: ShareService, gid: str, tps: list[tuple[uuid.UUID, int]],
                             acked: dict[tuple[uuid.UUID, int], Any],
                             field: str = "acknowledge_error_code") -> None:
    """Write what this request changed (``tps`` and the acknowledged partitions) before
    answering; an acknowledgement whose write failed is answered with the share
    coordinator's error in ``field``."""
    keys = sorted({(gid, tid, p) for tid, p in [*tps, *acked]}, key=str)
    errors = await svc.flush(keys)
    for (_g, tid, p), code in errors.items():
        pd = acked.get((tid, p))
        if pd is not None and getattr(pd, field) == ErrorCode.NONE and \
                code not in (ErrorCode.FENCED_STATE_EPOCH, ErrorCode.FENCED_LEADER_EPOCH):
            setattr(pd, field, code)


def current_leader(broker: Broker, topic_id: uuid.UUID, partition: int,
                   cls: Any = Resp.LeaderIdAndEpoch) -> Any:
    """The partition's leader and leader epoch in the image (-1, -1 when unknown)."""
    t = broker.image.topics_by_id.get(topic_id)
    p = t.partitions.get(partition) if t is not None else None
    return cls(leader_id=p.leader if p is not None else -1,
                                 leader_epoch=p.leader_epoch if p is not None else -1)


def node_endpoints(broker: Broker, ctx: RequestContext, parts: Any, cls: Any) -> list[Any]:
    """The leaders named in partitions answered NOT_LEADER_OR_FOLLOWER, on the listener the
    request came in on (so that the client moves them without a metadata round trip)."""
    ids = sorted({pd.current_leader.leader_id for pd in parts
                  if pd.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
                  and pd.current_leader is not None and pd.current_leader.leader_id >= 0})
    out = []
    for node in ids:
        reg = broker.image.brokers.get(node)
        if reg is None or reg.fenced:
            continue
        ep = next((e for e in reg.endpoints if e.listener == ctx.connection.listener), None)
        if ep is not None:
            out.append(cls(node_id=node, host=ep.host, port=ep.port, rack=reg.rack))
    return out


def leader_epoch(broker: Broker, topic_id: uuid.UUID, partition: int) -> int:
    """The partition's leader epoch in the image, -1 when unknown (a lookup, not a walk of
    every partition per request)."""
    t = broker.image.topics_by_id.get(topic_id)
    p = t.partitions.get(partition) if t is not None else None
    return p.leader_epoch if p is not None else -1


async def _fetch(
    broker: Broker, svc: ShareService, req: ShareFetchRequest, v: int,
    partitions: list[tuple[uuid.UUID, int]], part: Any,
    hold: dict[tuple[uuid.UUID, int], list[tuple[int, int]]], deadline: float,
) -> None:
    """Acquire for the session's partitions, long-polling while nothing could be. Records
    released by this request's acknowledgements are left out of the first attempt (Kafka
    applies acknowledgements while the fetch runs: it does not see them available yet)."""
    gid, mid = req.group_id or "", req.member_id or ""
    strict = v >= 2 and req.share_acquire_mode == RECORD_LIMIT_MODE
    max_records = req.max_records if req.max_records > 0 else 500
    by_id = broker.image.topics_by_id
    keys = [(by_id[tid].name, p) for tid, p in partitions if tid in by_id]
    while True:
        total, left, failed = 0, max_records, False
        for tid, p in partitions:
            if left <= 0 or total >= req.max_bytes:
                break
            code, data, got = read_partition(broker, svc, gid, mid, tid, p,
                                             req.max_bytes - total, left, strict,
                                             hold.get((tid, p)))
            if code or got:
                pd: Part = part(tid, p)
                pd.error_code = code
                pd.records = data
                pd.acquired_records = [
                    Resp.AcquiredRecords(first_offset=a.first_offset, last_offset=a.last_offset,
                                         delivery_count=a.delivery_count) for a in got]
                total += len(data)
                left -= sum(a.last_offset - a.first_offset + 1 for a in got)
                failed = failed or code != ErrorCode.NONE
        if total or failed or left < max_records or req.max_wait_ms <= 0 or not keys:
            return
        if trio.current_time() >= deadline:
            return
        hold = {}
        await broker.notifier.wait_any(keys, deadline)


