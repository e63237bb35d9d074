"""Produce's KIP-890 transaction checks sent to a coordinator on another broker, batched per
broker as Kafka's ``AddPartitionsToTxnManager`` batches them.

A transactional Produce whose transaction is not known on the partition yet asks the
transaction coordinator to verify the partition (or, transaction version 2, to add it) before
the append. One AddPartitionsToTxn (v4+, broker to coordinator) per Produce, over the one
connection to that broker, queued them behind each other: a broker handles one request of a
connection at a time and each waits for its ``__transaction_state`` write to commit, so under
load the checks of many producers waited in line for seconds, past the clients' request
timeouts (issue 27: 5-12 s per check, most of the Produce timeouts of franz-go's TestTxnEtl on
3 nodes). Here the checks waiting for a broker go together, one request in flight per broker:
what arrives meanwhile goes in the next request. A transactional id appears once per request
(Kafka's rule); a second check of the same id with another producer epoch or kind waits for
the next request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import trio

from kafkawire.node_client import NodeDisconnected, NodeUnsupportedVersion
from protocol._generated.add_partitions_to_txn_request import AddPartitionsToTxnRequest
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.node_client import NodeClient

TopicPartition = tuple[str, int]
Req = AddPartitionsToTxnRequest


@dataclass(eq=False)
class _Check:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    verify_only: bool
    tp: TopicPartition
    code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR
    done: bool = False
    wake: trio.Event = field(default_factory=trio.Event)


@dataclass(eq=False)
class _Queue:
    waiting: list[_Check] = field(default_factory=list)
    busy: bool = False


class VerificationBatcher:
    """One queue per coordinator broker; the first waiter with no request in flight sends the
    queue's checks in one request, then hands the role to the next waiter."""

    def __init__(self) -> None:
        self._queues: dict[int, _Queue] = {}

    async def ask(self, broker_id: int, client: NodeClient, transactional_id: str,
                  producer_id: int, producer_epoch: int, tp: TopicPartition, *,
                  verify_only: bool) -> ErrorCode:
        """The coordinator's code for ``tp`` in the transaction (a connection failure:
        NOT_COORDINATOR, retriable for the writer)."""
        q = self._queues.setdefault(broker_id, _Queue())
        check = _Check(transactional_id, producer_id, producer_epoch, verify_only, tp)
        q.waiting.append(check)
        try:
            while not check.done:
                if q.busy:
                    await check.wake.wait()
                    check.wake = trio.Event()
                    continue
                batch = _take(q)
                q.busy = True
                try:
                    await _send(client, batch)
                finally:
                    q.busy = False
                    left = [c for c in batch if not c.done]  # cancelled mid-request
                    q.waiting[:0] = left
                    for c in batch:
                        if c.done:
                            c.wake.set()
                    if q.waiting:
                        q.waiting[0].wake.set()  # the next sender
        finally:
            if not check.done and check in q.waiting:  # cancelled while waiting
                q.waiting.remove(check)
                if not q.busy and q.waiting:
                    q.waiting[0].wake.set()
        return check.code


def _take(q: _Queue) -> list[_Check]:
    """The checks of the next request: one (id, producer, epoch, kind) per transactional id."""
    batch: list[_Check] = []
    keys: dict[str, tuple[int, int, bool]] = {}
    rest: list[_Check] = []
    for c in q.waiting:
        key = (c.producer_id, c.producer_epoch, c.verify_only)
        if keys.setdefault(c.transactional_id, key) == key:
            batch.append(c)
        else:
            rest.append(c)
    q.waiting = rest
    return batch


async def _send(client: NodeClient, batch: list[_Check]) -> None:
    by_id: dict[str, list[_Check]] = {}
    for c in batch:
        by_id.setdefault(c.transactional_id, []).append(c)
    txns = []
    for tid, checks in by_id.items():
        topics: dict[str, list[int]] = {}
        for c in checks:
            parts = topics.setdefault(c.tp[0], [])
            if c.tp[1] not in parts:
                parts.append(c.tp[1])
        first = checks[0]
        txns.append(Req.AddPartitionsToTxnTransaction(
            transactional_id=tid, producer_id=first.producer_id,
            producer_epoch=first.producer_epoch, verify_only=first.verify_only,
            topics=[Req.AddPartitionsToTxnTopic(name=t, partitions=ps)
                    for t, ps in topics.items()]))
    try:
        resp = await client.request(Req(transactions=txns))
    except (NodeDisconnected, NodeUnsupportedVersion):
        _finish(batch, ErrorCode.NOT_COORDINATOR)
        return
    if resp.error_code != ErrorCode.NONE:
        _finish(batch, ErrorCode(resp.error_code))
        return
    codes: dict[tuple[str, str, int], ErrorCode] = {}
    for t in resp.results_by_transaction:
        for tr in t.topic_results:
            for pr in tr.results_by_partition:
                codes[(t.transactional_id, tr.name, pr.partition_index)] = ErrorCode(
                    pr.partition_error_code)
    for c in batch:
        c.code = codes.get((c.transactional_id, *c.tp), ErrorCode.UNKNOWN_SERVER_ERROR)
        c.done = True


def _finish(batch: list[_Check], code: ErrorCode) -> None:
    for c in batch:
        c.code = code
        c.done = True
