"""The trio driver of the metadata quorum: runs one ``kraft.raft.RaftNode`` over the network.

The node is sans-I/O (``kraft/raft/``); this carries out what it asks:

- ``run`` is the one task that polls it: it fsyncs what the node appended (off the event
  loop: the log defers the node's own inline flushes to it), calls ``poll(now)``, sends the
  requests it returns, and sleeps until the deadline it names or until something happens
  (``wake``: a request or response handled, an append).
- Requests to peers go over ``NodeClient`` connections to the peer's controller listener
  (``controller.quorum.voters``), two per peer: one for Fetch/FetchSnapshot (a Fetch may
  wait at the leader up to ``fetch_max_wait_ms``), one for Vote, BeginQuorumEpoch and
  EndQuorumEpoch, so an election is never stuck behind a parked Fetch. Each travels at the
  version ``kraft.raft.messages.WIRE_VERSION`` names; a failed connection forgets the request
  at once (the node retries on its own schedule) instead of letting it time out.
- Requests from peers arrive through the API handlers (Vote, BeginQuorumEpoch,
  EndQuorumEpoch, FetchSnapshot, the metadata Fetch, DescribeQuorum): ``request`` hands the
  body to the node and waits for its answer (a parked Fetch waits at most its max wait).
- After every step ``on_change`` runs (the metadata quorum applies what was committed).

The questions other parts ask: ``leader_id`` / ``is_leader`` (who is the active
controller), ``epoch``, ``high_watermark``, ``wait_for_leader``, ``wait_for_change``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import trio

from kafkawire.net.node_client import NodeClient, NodeDisconnected, NodeUnsupportedVersion
from kafkawire.security.inter_broker import ClientSecurity
from kraft.raft import messages as m
from kraft.raft.node import RaftNode
from kraft.raft.state import RaftState

log = logging.getLogger("kafkawire.raft")

#: how long ``request`` waits for the node's answer beyond a Fetch's own max wait
ANSWER_SLACK_MS = 5_000
_FETCHES = (m.FetchRequest, m.FetchSnapshotRequest)


class RaftDriver:
    def __init__(self, node: RaftNode, peers: dict[int, tuple[str, int]],
                 clock: Callable[[], int], on_change: Callable[[], None],
                 client_id: str = "raft",
                 security: Callable[[], ClientSecurity] | None = None) -> None:
        self.node = node
        #: TLS / SASL of the controller listener the voters talk over, read at each new
        #: connection (``kafkawire.security.inter_broker.controller_security``)
        self.security = security
        #: node id -> (host, port) of its controller listener
        self.peers = dict(peers)
        self.clock = clock
        self.on_change = on_change
        self.client_id = client_id
        self._clients: dict[tuple[int, bool], NodeClient] = {}
        self._waiting: dict[int, tuple[trio.Event, list[Any]]] = {}
        self._next_inbound = 0
        self._wakeup = trio.Event()
        self._changed = trio.Event()
        self._nursery: trio.Nursery | None = None
        self._last_state: tuple[RaftState, int, int] | None = None
        #: the highest high watermark a leader announced to us in a Fetch answer (-1: none)
        self.leader_high_watermark = -1

    # ---- what the rest of the node asks -----------------------------------------------------
    @property
    def leader_id(self) -> int:
        return self.node.leader_id

    @property
    def epoch(self) -> int:
        return self.node.epoch

    @property
    def is_leader(self) -> bool:
        return self.node.is_leader

    @property
    def high_watermark(self) -> int:
        return self.node.high_watermark

    def leader_address(self) -> tuple[str, int] | None:
        """The controller listener of the current leader, when known."""
        return self.peers.get(self.node.leader_id)

    async def wait_for_change(self) -> None:
        """Until the node's state, epoch, leader or high watermark next changes."""
        await self._changed.wait()

    async def wait_for_leader(self) -> int:
        while self.node.leader_id < 0:
            await self.wait_for_change()
        return self.node.leader_id

    # ---- the loop ---------------------------------------------------------------------------
    def wake(self) -> None:
        self._wakeup.set()

    def step(self) -> None:
        """Poll the node once now and carry out what it asks (also usable before ``run``,
        e.g. for a lone voter's election at start-up)."""
        msgs, _deadline = self.node.poll(self.clock())
        self._dispatch(msgs)
        self._after()

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            try:
                await self._loop()
            finally:
                self._nursery = None
                for client in self._clients.values():
                    with trio.CancelScope(shield=True):
                        await client.aclose()

    async def _loop(self) -> None:
        node = self.node
        flush_now = getattr(node.log, "flush_now", node.log.flush)
        if hasattr(node.log, "defer_flush"):
            node.log.defer_flush = True
        while True:
            if node.log.flushed_end_offset < node.log.end_offset:
                # what the leader appended, or a follower took from a Fetch answer: durable
                # before the node counts it (leader) or reports it in its next Fetch
                await trio.to_thread.run_sync(flush_now)
            now = self.clock()
            msgs, deadline = node.poll(now)
            self._dispatch(msgs)
            self._after()
            if msgs:
                await trio.sleep(0)
                continue
            with trio.move_on_after(max(deadline - self.clock(), 0) / 1000):
                await self._wakeup.wait()
            self._wakeup = trio.Event()

    def _after(self) -> None:
        node = self.node
        state = (node.state, node.epoch, node.leader_id)
        if state != self._last_state:
            log.info("metadata quorum: node %s is %s in epoch %s (leader %s)", node.node_id,
                     node.state.value, node.epoch, node.leader_id)
            self._last_state = state
            # A Fetch still on its way to a former leader (perhaps waiting out a reconnect
            # backoff to a dead node) must not hold back the first Fetch to the new one.
            for corr, f in list(node.inflight.items()):
                if f.kind in _FETCHES and f.dst != node.leader_id:
                    del node.inflight[corr]
            self.wake()
        self.on_change()
        self._changed.set()
        self._changed = trio.Event()

    # ---- outbound ---------------------------------------------------------------------------
    def _dispatch(self, msgs: list[m.RaftMessage]) -> None:
        for msg in msgs:
            if msg.is_request:
                if self._nursery is None:
                    self.node.inflight.pop(msg.correlation_id, None)
                    continue
                self._nursery.start_soon(self._send, msg)
            else:
                waiting = self._waiting.pop(msg.correlation_id, None)
                if waiting is not None:
                    if isinstance(msg.body, m.FetchResponse):
                        self._add_leader_endpoint(msg.body)
                    waiting[1].append(msg.body)
                    waiting[0].set()

    def _add_leader_endpoint(self, resp: m.FetchResponse) -> None:
        """Name the current leader's controller listener (``node_endpoints``, Fetch v16+), so
        a replica that knows only bootstrap servers can reach the leader (KIP-853)."""
        leader = self.node.leader_id
        addr = self.peers.get(leader)
        if leader >= 0 and addr is not None and not resp.node_endpoints:
            resp.node_endpoints = [m.FetchResponse.NodeEndpoint(
                node_id=leader, host=addr[0], port=addr[1], rack=None)]

    def _learn_endpoints(self, resp: m.FetchResponse) -> None:
        for e in resp.node_endpoints or []:
            if e.node_id >= 0 and e.node_id not in self.peers:
                self.peers[e.node_id] = (e.host, int(e.port))

    def _client(self, dst: int, fetch: bool) -> NodeClient | None:
        key = (dst, fetch)
        client = self._clients.get(key)
        addr = self.peers.get(dst)
        if client is not None and addr is not None and (client.host, client.port) != addr:
            # the voter moved (a VotersRecord from UpdateRaftVoter, KIP-853): a connection
            # cached for its old listener would keep failing, and a leader no follower can
            # reach resigns at each check-quorum while it keeps winning the votes
            self._clients.pop(key)
            if self._nursery is not None:
                self._nursery.start_soon(client.aclose)
            client = None
        if client is None:
            if addr is None:
                return None
            client = NodeClient(addr[0], addr[1], f"{self.client_id}-{self.node.node_id}",
                                self.clock,
                                request_timeout_ms=self.node.config.request_timeout_ms
                                + self.node.config.fetch_max_wait_ms,
                                reconnect_backoff_max_ms=self.node.config.election_timeout_ms,
                                security=self.security() if self.security else None)
            self._clients[key] = client
        return client

    async def _send(self, msg: m.RaftMessage) -> None:
        node = self.node
        client = self._client(msg.dst, isinstance(msg.body, _FETCHES))
        if client is None:
            log.warning("no address for node %s (not in controller.quorum.voters)", msg.dst)
            node.inflight.pop(msg.correlation_id, None)
            return
        try:
            resp = await client.request(msg.body, m.WIRE_VERSION[type(msg.body)])
        except (NodeDisconnected, NodeUnsupportedVersion) as e:
            if node.inflight.pop(msg.correlation_id, None) is not None:
                if isinstance(msg.body, _FETCHES):
                    node.fetch_backoff_until_ms = self.clock() + node.config.retry_backoff_ms
                log.debug("%s to node %s failed: %s", type(msg.body).__name__, msg.dst, e)
            self.wake()
            return
        if isinstance(resp, m.FetchResponse):
            self._learn_endpoints(resp)
            part = m.only_partition(list(resp.responses))
            if isinstance(part, m.FetchResponse.PartitionData) and part.error_code == 0:
                self.leader_high_watermark = max(self.leader_high_watermark,
                                                 int(part.high_watermark))
        node.handle(self.clock(), m.RaftMessage(msg.dst, node.node_id, msg.correlation_id, resp))
        self._drain()

    def _drain(self) -> None:
        """Send what handling a message queued (answers, a follower's next request) and let
        the loop poll the node again."""
        out, self.node.outbox = self.node.outbox, []
        self._dispatch(out)
        self._after()
        self.wake()

    # ---- inbound ----------------------------------------------------------------------------
    async def request(self, src: int, body: Any, wait_ms: int | None = None) -> Any:
        """Hand a request from a peer to the node; its answer (None if it never came within
        ``wait_ms``, by default ``ANSWER_SLACK_MS`` plus a Fetch's own wait)."""
        self._next_inbound += 1
        corr = self._next_inbound
        done = trio.Event()
        box: list[Any] = []
        self._waiting[corr] = (done, box)
        self.node.handle(self.clock(), m.RaftMessage(src, self.node.node_id, corr, body))
        self._drain()
        if wait_ms is None:
            wait_ms = ANSWER_SLACK_MS
            if isinstance(body, m.FetchRequest):
                wait_ms += min(int(body.max_wait_ms), self.node.config.fetch_max_wait_ms)
        with trio.move_on_after(wait_ms / 1000):
            await done.wait()
        self._waiting.pop(corr, None)
        return box[0] if box else None


async def raft_answer(quorum: Any, src: int, body: Any) -> Any | None:
    """For the API handlers of the KRaft requests (Vote, BeginQuorumEpoch, EndQuorumEpoch,
    FetchSnapshot, the metadata Fetch): the answer of the node's Raft replica to ``body`` from
    replica ``src``; None when the node runs no driver yet (starting) or never answered."""
    driver = getattr(quorum, "driver", None)
    if not isinstance(driver, RaftDriver):
        return None
    return await driver.request(src, body)
