"""The share-state persister (KIP-932): reads and writes a share partition's state on the share
coordinator that owns its key, wherever that is.

A share partition's state lives in ``__share_group_state``, on the partition that Kafka's
``SharePartitionKey`` (``group:topic id:partition``) hashes to, served by that partition's
leader (``groups/share_state.py``, ``kafkawire/share_state_apis.py``). Two kinds of callers
need it, on any broker:

* the **share-partition leader** (the leader of the data partition, ``ShareService``): it
  reads the state when it first serves the share partition (ReadShareGroupState, which stores
  its leader epoch so that a deposed leader's writes are fenced) and writes every change
  (WriteShareGroupState with its state epoch and leader epoch);
* the **group coordinator** (the leader of the group's ``__consumer_offsets`` partition): it
  initializes the share partitions of the subscribed topics (InitializeShareGroupState at
  start offset -1, Kafka's ``UNINITIALIZED_START_OFFSET``: the share-partition leader resolves
  ``share.auto.offset.reset`` when it loads it), reads summaries for DescribeShareGroupOffsets
  (ReadShareGroupStateSummary) and resets or deletes state (AlterShareGroupOffsets,
  DeleteShareGroupOffsets, DeleteGroups).

``SharePersister`` runs each operation on the local shard when this broker leads the key's
state partition (the same operation the API handler runs) and otherwise sends the inter-broker
API to the leader over its own connections (``PeerClients``: a slow state write does not queue
behind transaction markers). Coordinator errors (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
COORDINATOR_NOT_AVAILABLE), a leader not known yet and lost connections are retried until a
deadline, as Kafka's persister does, so a failover of the state partition's leader only delays
the callers; the topic is created on first need. Other errors (FENCED_STATE_EPOCH,
FENCED_LEADER_EPOCH, INVALID_REQUEST) raise ``KafkaError`` at once.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import trio

from kafkawire.node_client import NodeClient, NodeDisconnected, NodeUnsupportedVersion
from kafkawire.peer_clients import PeerClients
from kafkawire.share_state_apis import (
    Op,
    delete_op,
    delivery_complete_count,
    initialize_op,
    on_key,
    read_op,
    write_op,
)
from protocol.errors import ErrorCode, KafkaError
from protocol.share_state import ShareStateKey, ShareStateValue

if TYPE_CHECKING:
    from kafkawire.broker import Broker

log = logging.getLogger("kafkawire.share")

T = TypeVar("T")
Batch = tuple[int, int, int, int]
RETRIABLE = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                       ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.REQUEST_TIMED_OUT})
#: how long one operation keeps retrying coordinator errors by default (s)
DEFAULT_WAIT_S = 20.0
BACKOFF_S = 0.05
BACKOFF_MAX_S = 0.5


class Summary:
    """ReadShareGroupStateSummary's answer for one key."""

    __slots__ = ("state_epoch", "leader_epoch", "start_offset", "delivery_complete_count")

    def __init__(self, state_epoch: int, leader_epoch: int, start_offset: int,
                 complete: int) -> None:
        self.state_epoch = state_epoch
        self.leader_epoch = leader_epoch
        self.start_offset = start_offset
        self.delivery_complete_count = complete

    @property
    def exists(self) -> bool:
        """Whether the key was ever initialized: the group coordinator initializes at state
        epoch >= 1, and a share-partition leader's writes carry a start offset."""
        return self.state_epoch > 0 or self.start_offset >= 0


class SharePersister:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._peers: PeerClients | None = None

    def peers(self) -> PeerClients:
        if self._peers is None:
            b = self.broker
            self._peers = PeerClients(
                b.node_id, lambda: b.image, b.inter_broker_listener, b.clock_ms,
                int(b.config["request.timeout.ms"]), b.inter_broker_security)
        return self._peers

    async def aclose(self) -> None:
        if self._peers is not None:
            await self._peers.aclose()

    # ---- the operations ---------------------------------------------------------------------
    async def read(self, key: ShareStateKey, leader_epoch: int,
                   wait_s: float = DEFAULT_WAIT_S) -> ShareStateValue | None:
        """The stored state (None: never initialized), storing ``leader_epoch`` as the key's
        leader epoch when newer."""
        from protocol._generated.read_share_group_state_request import (
            ReadShareGroupStateRequest as Req,
        )

        async def remote(c: NodeClient) -> ShareStateValue | None:
            resp = await c.request(Req(group_id=key.group_id, topics=[Req.ReadStateData(
                topic_id=key.topic_id, partitions=[Req.PartitionData(
                    partition=key.partition, leader_epoch=leader_epoch)])]))
            r = _one(resp)
            if r.start_offset < 0 and r.state_epoch == 0 and not r.state_batches:
                return None
            return ShareStateValue(
                state_epoch=r.state_epoch, leader_epoch=leader_epoch,
                start_offset=r.start_offset,
                state_batches=[(b.first_offset, b.last_offset, b.delivery_state,
                                b.delivery_count) for b in r.state_batches])

        reply = await self._call(key, read_op(leader_epoch, update_epoch=True), remote, wait_s)
        return reply if isinstance(reply, ShareStateValue) else None

    async def summary(self, key: ShareStateKey, wait_s: float = DEFAULT_WAIT_S) -> Summary:
        from protocol._generated.read_share_group_state_summary_request import (
            ReadShareGroupStateSummaryRequest as Req,
        )

        async def remote(c: NodeClient) -> Summary:
            resp = await c.request(Req(group_id=key.group_id, topics=[Req.ReadStateSummaryData(
                topic_id=key.topic_id, partitions=[Req.PartitionData(
                    partition=key.partition, leader_epoch=-1)])]))
            r = _one(resp)
            return Summary(r.state_epoch, r.leader_epoch, r.start_offset,
                           r.delivery_complete_count)

        reply = await self._call(key, read_op(-1, update_epoch=False), remote, wait_s)
        if isinstance(reply, Summary):
            return reply
        if reply is None:
            return Summary(0, -1, -1, -1)
        return Summary(reply.state_epoch, reply.leader_epoch, reply.start_offset,
                       delivery_complete_count(reply))

    async def write(self, key: ShareStateKey, state_epoch: int, leader_epoch: int, start: int,
                    batches: list[Batch], wait_s: float = DEFAULT_WAIT_S) -> None:
        from protocol._generated.write_share_group_state_request import (
            WriteShareGroupStateRequest as Req,
        )

        async def remote(c: NodeClient) -> None:
            _one(await c.request(Req(group_id=key.group_id, topics=[Req.WriteStateData(
                topic_id=key.topic_id, partitions=[Req.PartitionData(
                    partition=key.partition, state_epoch=state_epoch,
                    leader_epoch=leader_epoch, start_offset=start,
                    state_batches=[Req.StateBatch(first_offset=b[0], last_offset=b[1],
                                                  delivery_state=b[2], delivery_count=b[3])
                                   for b in batches])])])))

        await self._call(key, write_op(state_epoch, leader_epoch, start, batches), remote,
                         wait_s)

    async def initialize(self, key: ShareStateKey, state_epoch: int, start: int,
                         wait_s: float = DEFAULT_WAIT_S) -> None:
        from protocol._generated.initialize_share_group_state_request import (
            InitializeShareGroupStateRequest as Req,
        )

        async def remote(c: NodeClient) -> None:
            _one(await c.request(Req(group_id=key.group_id, topics=[Req.InitializeStateData(
                topic_id=key.topic_id, partitions=[Req.PartitionData(
                    partition=key.partition, state_epoch=state_epoch,
                    start_offset=start)])])))

        await self._call(key, initialize_op(state_epoch, start), remote, wait_s, mutates=True)

    async def delete(self, key: ShareStateKey, wait_s: float = DEFAULT_WAIT_S) -> None:
        from protocol._generated.delete_share_group_state_request import (
            DeleteShareGroupStateRequest as Req,
        )

        async def remote(c: NodeClient) -> None:
            _one(await c.request(Req(group_id=key.group_id, topics=[Req.DeleteStateData(
                topic_id=key.topic_id, partitions=[Req.PartitionData(
                    partition=key.partition)])])))

        await self._call(key, delete_op(), remote, wait_s, mutates=True)

    # ---- routing and retries ----------------------------------------------------------------
    def coordinator_of(self, key: ShareStateKey) -> int:
        """The broker leading the key's ``__share_group_state`` partition, -1 when none."""
        rt = self.broker.share_runtime
        if rt.topic.name not in self.broker.image.topics:
            return -1
        return rt.leader_of(rt.partition_for(key.coordinator_key()))

    async def _call(self, key: ShareStateKey, op: Op,
                    remote: Callable[[NodeClient], Awaitable[T]], wait_s: float,
                    mutates: bool = False) -> Any:
        b = self.broker
        deadline = trio.current_time() + wait_s
        backoff = BACKOFF_S
        last: object = "no leader"
        while True:
            leader = self.coordinator_of(key)
            try:
                if b.share_runtime.topic.name not in b.image.topics:
                    await b.share_runtime.ensure_topic()  # created on first need
                    last = "creating the topic"
                elif leader == b.node_id:
                    code, reply = await on_key(b, key.group_id, key.topic_id, key.partition,
                                               op, mutates=mutates)
                    if code == ErrorCode.NONE:
                        return reply
                    raise KafkaError(code)
                elif leader >= 0:
                    client = self.peers().get(leader)
                    if client is not None:
                        return await remote(client)
                    last = f"no endpoint of broker {leader}"
            except KafkaError as e:
                if e.code not in RETRIABLE:
                    raise
                last = e.code.name
            except (NodeDisconnected, NodeUnsupportedVersion) as e:
                last = str(e)
            if trio.current_time() >= deadline:
                log.info("share state of %s: coordinator %d not available: %s",
                         key.coordinator_key(), leader, last)
                raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                 f"share coordinator of {key.coordinator_key()}: {last}")
            await trio.sleep(backoff)
            backoff = min(backoff * 2, BACKOFF_MAX_S)


def _one(resp: Any) -> Any:
    """The only partition result of a one-key response; its error raised as KafkaError."""
    r = resp.results[0].partitions[0]
    if r.error_code != ErrorCode.NONE:
        raise KafkaError(ErrorCode(r.error_code), getattr(r, "error_message", None))
    return r


def key_of(group_id: str, topic_id: uuid.UUID, partition: int) -> ShareStateKey:
    return ShareStateKey(group_id, topic_id, partition)
