"""Replica fetchers: followers pull their partitions from the leaders (Kafka's
``ReplicaFetcherManager`` / ``ReplicaFetcherThread``).

One ``ReplicaFetcher`` task per (source broker, fetcher index): a follower partition is
assigned to fetcher ``hash(topic, partition) % num.replica.fetchers`` of its leader, as Kafka's
``getFetcherId`` does. Each fetcher loops:

- one Fetch to the leader (the highest version both sides serve, v12+ for the diverging epoch;
  ``replica_state.replica_id`` / ``replica_id`` is this broker, ``replica_epoch`` its broker
  epoch), every partition at its log end offset with ``current_leader_epoch`` and
  ``last_fetched_epoch`` (the latest epoch in its ``leader-epoch-checkpoint``);
  ``replica.fetch.max.bytes`` per partition, ``replica.fetch.response.max.bytes`` per response,
  ``replica.fetch.wait.max.ms`` / ``replica.fetch.min.bytes`` for the leader's long poll;
- each partition's answer (:func:`apply_fetched`): the batches are checked (headers and CRCs
  only, ``protocol.records.validate_batches``) and appended verbatim with the leader's offsets
  and epochs (``Partition.append_as_follower``: the producer state and transaction index
  follow), then the follower takes the leader's high watermark and log start offset; a
  ``diverging_epoch`` truncates the log to where it agrees with the leader
  (``Partition.truncation_offset``) before fetching again, and at the log end still drops
  the leader epochs starting there, as Kafka's ``truncateTo`` (an epoch this node assigned
  as a leader that wrote nothing, unknown to the new leader, would make every fetch diverge); OFFSET_OUT_OF_RANGE asks the leader
  for its log end / start offsets with ListOffsets (as a replica) and truncates to the end, or
  restarts the log at the start, as Kafka's ``handleOutOfRangeError``; leadership errors
  (NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN_LEADER_EPOCH, unknown topic) hold the partition for
  ``replica.fetch.backoff.ms``, until the metadata moves it;
- a connection failure backs off ``replica.fetch.backoff.ms`` (the NodeClient reconnects).

Replication throttle (KIP-73, ``kafkawire.replication_quota``): while this broker's
``follower.replication.throttled.rate`` is exceeded, partitions named by the topic's
``follower.replication.throttled.replicas`` that have not caught up with the leader's high
watermark are left out of the Fetch (a fetcher with nothing else to fetch waits for
``replica.fetch.backoff.ms`` or a wake-up); their appended bytes are recorded.

Each fetcher keeps a KIP-227 fetch session with its leader (``FetcherSession``, Kafka's
``FetchSessionHandler``): a full fetch (epoch 0) opens it, then each incremental fetch names
only the partitions whose fetch parameters changed (added, or fetched offset / epochs / log
start moved) and forgets those no longer fetched, and the leader answers only partitions with
news. FETCH_SESSION_ID_NOT_FOUND (e.g. the leader restarted) starts a new session with a full
fetch; any other session error (INVALID_FETCH_SESSION_EPOCH...) or a lost connection closes
the session with a full fetch naming it. A leader that creates no session (id 0) is fetched
from with full requests.

A fetch answered for a partition whose role or leader epoch changed meanwhile is dropped.
The leader is reached on the inter-broker listener (``kafkawire.inter_broker``:
``inter.broker.listener.name`` / ``security.inter.broker.protocol``, else the broker's first
non-controller listener) with that listener's TLS and SASL settings.
"""

from __future__ import annotations

import logging
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import trio

from kafkawire.fetch_session import INITIAL_EPOCH, INVALID_SESSION_ID, next_epoch
from kafkawire.inter_broker import ClientSecurity
from kafkawire.node_client import NodeClient, NodeDisconnected, NodeUnsupportedVersion
from kafkawire.peer_clients import endpoint_of
from kafkawire.replication_quota import ReplicationQuota
from kraft.image import MetadataImage
from log.replica import Partition, ReplicaRole
from protocol._generated.fetch_request import FetchRequest
from protocol._generated.fetch_response import FetchResponse
from protocol._generated.list_offsets_request import ListOffsetsRequest
from protocol.errors import ErrorCode, KafkaError
from protocol.primitives import ZERO_UUID
from protocol.records import RecordError, validate_batches

__all__ = ["FetcherSession", "FetcherSettings", "ReplicaFetcherManager", "apply_fetched",
           "fetcher_id"]

log = logging.getLogger("kafkawire.replica_fetcher")

TopicPartition = tuple[str, int]
#: ListOffsets special timestamps
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
#: errors after which a partition waits for new metadata (backoff) before it is fetched again
_LEADERSHIP_ERRORS = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.REPLICA_NOT_AVAILABLE,
})


@dataclass(frozen=True)
class FetcherSettings:
    """The replica fetchers' configuration, by Kafka's keys."""

    num_replica_fetchers: int = 1  # num.replica.fetchers
    fetch_max_bytes: int = 1048576  # replica.fetch.max.bytes (per partition)
    response_max_bytes: int = 10485760  # replica.fetch.response.max.bytes
    wait_max_ms: int = 500  # replica.fetch.wait.max.ms
    min_bytes: int = 1  # replica.fetch.min.bytes
    backoff_ms: int = 1000  # replica.fetch.backoff.ms
    socket_timeout_ms: int = 30000  # replica.socket.timeout.ms

    @classmethod
    def from_config(cls, values: dict[str, Any]) -> FetcherSettings:
        return cls(
            num_replica_fetchers=max(1, int(values["num.replica.fetchers"])),
            fetch_max_bytes=int(values["replica.fetch.max.bytes"]),
            response_max_bytes=int(values["replica.fetch.response.max.bytes"]),
            wait_max_ms=int(values["replica.fetch.wait.max.ms"]),
            min_bytes=int(values["replica.fetch.min.bytes"]),
            backoff_ms=int(values["replica.fetch.backoff.ms"]),
            socket_timeout_ms=int(values["replica.socket.timeout.ms"]),
        )


def fetcher_id(topic: str, partition: int, num_fetchers: int) -> int:
    """Which of a source broker's fetchers serves the partition (stable across restarts)."""
    return (zlib.crc32(topic.encode()) * 31 + partition) % num_fetchers


class FetchOutcome:
    """What one partition's answer asks of its fetcher next."""

    OK = "ok"
    OUT_OF_RANGE = "out_of_range"  # ask the leader's offsets (ListOffsets), then truncate
    BACKOFF = "backoff"  # wait replica.fetch.backoff.ms (leadership moving, or an error)


def apply_fetched(p: Partition, pd: FetchResponse.PartitionData, now_ms: int) -> str:
    """Apply one partition's Fetch answer to the follower ``p``; returns a FetchOutcome."""
    code = pd.error_code
    if code == ErrorCode.OFFSET_OUT_OF_RANGE:
        return FetchOutcome.OUT_OF_RANGE
    if code != ErrorCode.NONE:
        if code not in _LEADERSHIP_ERRORS:
            log.warning("fetch of %s-%d from %d failed: %s", p.topic, p.partition, p.leader_id,
                        ErrorCode(code).name)
        return FetchOutcome.BACKOFF
    div = pd.diverging_epoch
    if div is not None and div.epoch >= 0 and div.end_offset >= 0:
        offset, _complete = p.truncation_offset(div.epoch, div.end_offset)
        if offset < p.log_end_offset:
            log.info("%s-%d diverges from leader %d at epoch %d: truncated to %d (was %d)",
                     p.topic, p.partition, p.leader_id, div.epoch, offset, p.log_end_offset)
        # always, as Kafka's truncateTo: at the log end no data goes, but the leader epoch
        # entries starting there do (an epoch this node assigned as a leader that wrote
        # nothing, which the new leader never had: kept, it made every fetch diverge again)
        p.truncate_to(offset)
        return FetchOutcome.OK  # fetch again from there (with our new last epoch)
    records = pd.records
    if records:
        buf = bytearray(records)
        try:
            batches = validate_batches(buf, from_client=False)
        except RecordError as e:
            log.error("corrupt batch from leader %d for %s-%d: %s", p.leader_id, p.topic,
                      p.partition, e)
            return FetchOutcome.BACKOFF
        leo = p.log_end_offset
        batches = [(pos, h) for pos, h in batches if h.base_offset + h.last_offset_delta >= leo]
        if batches:
            if batches[0][1].base_offset < leo:
                # the leader returned the batch holding our log end offset from its start: we
                # hold a partial batch, which never happens unless our log was cut mid-batch
                p.truncate_to(batches[0][1].base_offset)
            p.append_as_follower(buf, batches, now_ms=now_ms)
    p.update_follower_high_watermark(pd.high_watermark)
    if pd.log_start_offset >= 0:
        p.update_follower_log_start_offset(pd.log_start_offset)
    return FetchOutcome.OK


def truncate_out_of_range(p: Partition, leader_end: int, leader_start: int) -> None:
    """Kafka's ``fetchOffsetAndTruncate``: a log past the leader's end is cut to it (possible
    only after an unclean election); a log that ends before the leader's start restarts there."""
    leo = p.log_end_offset
    if leader_end < leo:
        log.warning("%s-%d: log end %d is past leader %d's end %d: truncated", p.topic,
                    p.partition, leo, p.leader_id, leader_end)
        p.truncate_to(leader_end)
    elif leader_start > leo:
        log.info("%s-%d: log end %d is below leader %d's start %d: restarted there", p.topic,
                 p.partition, leo, p.leader_id, leader_start)
        p.truncate_fully_and_start_at(leader_start)


#: what a fetcher sends for a partition: (fetch offset, current leader epoch, last fetched
#: epoch, log start offset); a change makes an incremental fetch name the partition again
PartitionData = tuple[int, int, int, int]
_SESSION_ERRORS = frozenset({
    ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH,
    ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR,
})


@dataclass
class FetcherSession:
    """The fetching side of a KIP-227 session (Kafka's ``FetchSessionHandler``), sans I/O."""

    session_id: int = INVALID_SESSION_ID
    epoch: int = INITIAL_EPOCH  # INITIAL_EPOCH: the next fetch is a full one
    #: the partitions the leader's session holds, with the data it holds for them
    held: dict[TopicPartition, PartitionData] = field(default_factory=dict)

    def build(self, wanted: dict[TopicPartition, PartitionData]
              ) -> tuple[list[TopicPartition], list[TopicPartition]]:
        """(partitions to name, partitions to forget) for the next fetch of ``wanted``."""
        if self.epoch == INITIAL_EPOCH:
            return list(wanted), []
        held = self.held
        send = [tp for tp, d in wanted.items() if held.get(tp) != d]
        return send, [tp for tp in held if tp not in wanted]

    def on_response(self, wanted: dict[TopicPartition, PartitionData], error: int,
                    session_id: int) -> None:
        """After the answer to a fetch built from ``wanted``."""
        if error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
            self.reset(close=False)
        elif error:
            self.reset(close=True)
        elif session_id == INVALID_SESSION_ID:  # no session (declined, or closed)
            self.reset(close=False)
        else:
            self.session_id = session_id
            self.epoch = next_epoch(self.epoch)
            self.held = dict(wanted)

    def reset(self, close: bool = True) -> None:
        """The next fetch is a full one; ``close`` names the current session so that the
        leader closes it."""
        if not close:
            self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self.held = {}


@dataclass
class _Fetched:
    """A partition as it was when its fetch was sent."""

    partition: Partition
    leader_epoch: int
    delayed_until_ms: int = 0
    #: caught up with the leader's high watermark at the last answer (Kafka's
    #: ``isReplicaInSync``): such a partition is never throttled
    in_sync: bool = False


@dataclass
class ReplicaFetcher:
    """The partitions fetched from one source broker by one fetcher."""

    manager: ReplicaFetcherManager
    source_id: int
    index: int
    partitions: dict[TopicPartition, _Fetched] = field(default_factory=dict)
    woken: trio.Event = field(default_factory=trio.Event)
    client: NodeClient | None = None
    endpoint: tuple[str, int] | None = None
    cancel: trio.CancelScope = field(default_factory=trio.CancelScope)
    session: FetcherSession = field(default_factory=FetcherSession)

    def wake(self) -> None:
        self.woken.set()

    def _client(self) -> NodeClient | None:
        ep = self.manager.endpoint_of(self.source_id)
        if ep is None:
            return None
        if self.client is None or ep != self.endpoint:
            if self.client is not None:
                self.manager.nursery.start_soon(self.client.aclose)
            m = self.manager
            self.client = NodeClient(
                ep[0], ep[1], f"broker-{m.node_id}-fetcher-{self.index}", m.clock_ms,
                request_timeout_ms=m.settings.socket_timeout_ms,
                security=m.security() if m.security is not None else None)
            self.endpoint = ep
            self.session.reset(close=False)
        return self.client

    async def run(self) -> None:
        with self.cancel:
            try:
                while True:
                    await self._run_once()
            finally:
                if self.client is not None:
                    with trio.CancelScope(shield=True):
                        await self.client.aclose()

    async def _run_once(self) -> None:
        now = self.manager.clock_ms()
        ready = {tp: f for tp, f in self.partitions.items()
                 if f.delayed_until_ms <= now and not self.manager.throttled(tp, f, now)}
        client = self._client()
        if not ready or client is None:
            self.woken = trio.Event()
            due = min((f.delayed_until_ms for f in self.partitions.values()
                       if f.delayed_until_ms > now), default=None)
            wait_s = self.manager.settings.backoff_ms / 1000 if due is None or client is None \
                else max(0.0, (due - now) / 1000)
            with trio.move_on_after(wait_s):
                await self.woken.wait()
            return
        wanted = self.manager.partition_data(ready)
        send, forget = self.session.build(wanted)
        req = self.manager.build_fetch(ready, wanted, send, forget, self.session)
        try:
            resp = await client.request(req)
        except (NodeDisconnected, NodeUnsupportedVersion) as e:
            log.info("replica fetcher %d-%d: %s", self.source_id, self.index, e)
            self.session.reset()
            await trio.sleep(self.manager.settings.backoff_ms / 1000)
            return
        self.session.on_response(wanted, resp.error_code, resp.session_id)
        if resp.error_code in _SESSION_ERRORS:  # the next fetch is a full one, at once
            log.info("fetch session %d with %d: %s", req.session_id, self.source_id,
                     ErrorCode(resp.error_code).name)
            return
        if resp.error_code != ErrorCode.NONE:
            log.warning("fetch from %d failed: %s", self.source_id,
                        ErrorCode(resp.error_code).name)
            await trio.sleep(self.manager.settings.backoff_ms / 1000)
            return
        out_of_range = self._apply(ready, resp)
        for tp in out_of_range:
            await self._handle_out_of_range(client, tp)

    def _apply(self, sent: dict[TopicPartition, _Fetched], resp: Any) -> list[TopicPartition]:
        img = self.manager.image()
        now = self.manager.clock_ms()
        out_of_range: list[TopicPartition] = []
        for t in resp.responses:
            name = t.topic
            if not name:
                ti = img.topics_by_id.get(t.topic_id)
                name = ti.name if ti is not None else ""
            for pd in t.partitions:
                tp = (name, pd.partition_index)
                f = sent.get(tp)
                if f is None or self.partitions.get(tp) is not f:
                    continue
                p = f.partition
                if p.role is not ReplicaRole.FOLLOWER or p.leader_epoch != f.leader_epoch:
                    continue  # became leader, or a new epoch: the answer is stale
                try:
                    outcome = apply_fetched(p, pd, now)
                    self.manager.after_fetched(tp, f, pd, now)
                except KafkaError as e:
                    log.warning("%s-%d: appending from leader %d failed: %s", name,
                                pd.partition_index, self.source_id, e)
                    outcome = FetchOutcome.BACKOFF
                if outcome == FetchOutcome.BACKOFF:
                    f.delayed_until_ms = now + self.manager.settings.backoff_ms
                elif outcome == FetchOutcome.OUT_OF_RANGE:
                    out_of_range.append(tp)
        return out_of_range

    async def _handle_out_of_range(self, client: NodeClient, tp: TopicPartition) -> None:
        f = self.partitions.get(tp)
        if f is None:
            return
        try:
            end = await self._leader_offset(client, f, LATEST_TIMESTAMP)
            start = await self._leader_offset(client, f, EARLIEST_TIMESTAMP)
            p = f.partition
            if p.role is ReplicaRole.FOLLOWER and p.leader_epoch == f.leader_epoch:
                truncate_out_of_range(p, end, start)
        except (NodeDisconnected, NodeUnsupportedVersion, KafkaError) as e:
            log.info("%s-%d: leader offsets from %d: %s", tp[0], tp[1], self.source_id, e)
            f.delayed_until_ms = self.manager.clock_ms() + self.manager.settings.backoff_ms

    async def _leader_offset(self, client: NodeClient, f: _Fetched, timestamp: int) -> int:
        p = f.partition
        req = ListOffsetsRequest(
            replica_id=self.manager.node_id, isolation_level=0,
            topics=[ListOffsetsRequest.ListOffsetsTopic(name=p.topic, partitions=[
                ListOffsetsRequest.ListOffsetsPartition(
                    partition_index=p.partition, current_leader_epoch=f.leader_epoch,
                    timestamp=timestamp)])])
        resp = await client.request(req)
        pr = resp.topics[0].partitions[0]
        if pr.error_code != ErrorCode.NONE:
            raise KafkaError(ErrorCode(pr.error_code))
        return int(pr.offset)


class ReplicaFetcherManager:
    """Keeps one fetcher per (leader, index) for the follower partitions of this broker."""

    def __init__(self, node_id: int, settings: FetcherSettings, clock_ms: Callable[[], int],
                 image: Callable[[], MetadataImage], broker_epoch: Callable[[], int],
                 listener_name: Callable[[], str | None],
                 quota: ReplicationQuota | None = None,
                 security: Callable[[], ClientSecurity] | None = None) -> None:
        self.node_id = node_id
        self.settings = settings
        self.clock_ms = clock_ms
        self.image = image
        self.broker_epoch = broker_epoch
        self.listener_name = listener_name
        self.quota = quota
        self.security = security
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._rotation = 0
        self._nursery: trio.Nursery | None = None

    @property
    def nursery(self) -> trio.Nursery:
        assert self._nursery is not None
        return self._nursery

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    def throttled(self, tp: TopicPartition, f: _Fetched, now_ms: int) -> bool:
        """Kafka's ``shouldFollowerThrottle``: a partition not caught up, named by
        ``follower.replication.throttled.replicas``, while ``follower.replication.throttled
        .rate`` is exceeded, is left out of the next Fetch."""
        q = self.quota
        return q is not None and not f.in_sync and q.is_throttled(*tp) \
            and q.is_quota_exceeded(now_ms)

    def after_fetched(self, tp: TopicPartition, f: _Fetched, pd: FetchResponse.PartitionData,
                      now_ms: int) -> None:
        """Record a throttled partition's bytes; note whether it has caught up."""
        f.in_sync = pd.error_code == ErrorCode.NONE and pd.high_watermark >= 0 \
            and f.partition.log_end_offset >= pd.high_watermark
        q = self.quota
        if q is not None and pd.records and q.is_throttled(*tp):
            q.record(len(pd.records), now_ms)

    def endpoint_of(self, broker_id: int) -> tuple[str, int] | None:
        return endpoint_of(self.image(), broker_id, self.listener_name())

    def update(self, partitions: list[tuple[TopicPartition, Partition]]) -> None:
        """Fetch every follower partition from its leader (after each metadata image)."""
        if self._nursery is None:
            return
        wanted: dict[tuple[int, int], dict[TopicPartition, Partition]] = {}
        for tp, p in partitions:
            if p.role is ReplicaRole.FOLLOWER and p.leader_id >= 0 and p.leader_id != self.node_id:
                key = (p.leader_id, fetcher_id(tp[0], tp[1], self.settings.num_replica_fetchers))
                wanted.setdefault(key, {})[tp] = p
        for key, fetcher in list(self.fetchers.items()):
            if key not in wanted:
                fetcher.cancel.cancel()
                del self.fetchers[key]
        for key, parts in wanted.items():
            found = self.fetchers.get(key)
            if found is None:
                found = self.fetchers[key] = ReplicaFetcher(self, key[0], key[1])
                self.nursery.start_soon(found.run)
            fetcher = found
            old = fetcher.partitions
            fetcher.partitions = {
                tp: old[tp] if tp in old and old[tp].partition is p
                and old[tp].leader_epoch == p.leader_epoch else _Fetched(p, p.leader_epoch)
                for tp, p in parts.items()
            }
            fetcher.wake()

    def partition_data(self, parts: dict[TopicPartition, _Fetched]
                       ) -> dict[TopicPartition, PartitionData]:
        """What a fetch sends for each partition, in a fair order: rotated on each fetch, as
        only the first partition of a response may return a batch above its partition limit
        (KIP-74) until the leader's session rotates them itself."""
        ordered = sorted(parts.items())
        self._rotation = (self._rotation + 1) % max(1, len(ordered))
        ordered = ordered[self._rotation:] + ordered[:self._rotation]
        out: dict[TopicPartition, PartitionData] = {}
        for tp, f in ordered:
            p = f.partition
            latest = p.log.leader_epochs.latest_epoch()
            out[tp] = (p.log_end_offset, f.leader_epoch, -1 if latest is None else latest,
                       p.log.log_start_offset)
        return out

    def build_fetch(self, parts: dict[TopicPartition, _Fetched],
                    wanted: dict[TopicPartition, PartitionData], send: list[TopicPartition],
                    forget: list[TopicPartition], session: FetcherSession) -> FetchRequest:
        s = self.settings
        img = self.image()
        topics: dict[str, FetchRequest.FetchTopic] = {}

        def topic_id(topic: str) -> uuid.UUID:
            ti = img.topics.get(topic)
            return ti.topic_id if ti is not None else ZERO_UUID

        for tp in send:
            topic, partition = tp
            offset, leader_epoch, last_epoch, log_start = wanted[tp]
            ft = topics.get(topic)
            if ft is None:
                ft = topics[topic] = FetchRequest.FetchTopic(
                    topic=topic, topic_id=topic_id(topic), partitions=[])
            assert ft.partitions is not None
            ft.partitions.append(FetchRequest.FetchPartition(
                partition=partition, current_leader_epoch=leader_epoch, fetch_offset=offset,
                last_fetched_epoch=last_epoch, log_start_offset=log_start,
                partition_max_bytes=s.fetch_max_bytes))
        forgotten: dict[str, FetchRequest.ForgottenTopic] = {}
        for topic, partition in forget:
            fg = forgotten.get(topic)
            if fg is None:
                fg = forgotten[topic] = FetchRequest.ForgottenTopic(
                    topic=topic, topic_id=topic_id(topic), partitions=[])
            fg.partitions.append(partition)
        return FetchRequest(
            replica_id=self.node_id,
            replica_state=FetchRequest.ReplicaState(replica_id=self.node_id,
                                                    replica_epoch=self.broker_epoch()),
            max_wait_ms=s.wait_max_ms, min_bytes=s.min_bytes, max_bytes=s.response_max_bytes,
            isolation_level=0, session_id=session.session_id, session_epoch=session.epoch,
            topics=list(topics.values()), forgotten_topics_data=list(forgotten.values()),
            rack_id="")
