"""Produce's KIP-890 checks sent to a transaction coordinator on another broker go in batches,
one AddPartitionsToTxn in flight per broker (kafkawire/txn_verification.py, as Kafka's
AddPartitionsToTxnManager). Before, each check was its own request on the one connection to
that broker, handled one after the other there, each waiting for its __transaction_state
write: under load, checks queued for 5-12 s and Produce requests timed out (issue 27).

Against a real broker: 24 concurrent checks of 24 transactions reach the coordinator in at most
3 requests, all answered NONE; the broker handled the batch's transactions together."""

from __future__ import annotations

import time
from typing import Any

import trio

from kafkawire.node_client import NodeClient
from kafkawire.testing import BrokerProcess
from kafkawire.txn_verification import VerificationBatcher
from protocol._generated.create_topics_request import CreateTopicsRequest
from protocol.errors import ErrorCode
from tests.conftest import RawClient
from tests.test_txn_wire import coordinator_ready, init_txn

TXNS = 24


class CountingClient(NodeClient):
    """A real NodeClient that notes how many transactions each request carried."""

    sent: list[int]

    async def request(self, request: Any, version: int | None = None,
                      timeout_ms: int | None = None) -> Any:
        self.sent.append(len(request.transactions))
        return await super().request(request, version, timeout_ms)


def _clock_ms() -> int:
    return int(time.monotonic() * 1000)


def test_concurrent_checks_for_one_coordinator_go_in_batches(broker: BrokerProcess) -> None:
    raw = RawClient(f"127.0.0.1:{broker.port}")
    topic = "txn-verify-batches"
    created = raw.request(CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=topic, num_partitions=1, replication_factor=1)], timeout_ms=30_000), 7)
    assert created.topics[0].error_code in (0, ErrorCode.TOPIC_ALREADY_EXISTS)
    tids = [f"verify-batch-{i}" for i in range(TXNS)]
    coordinator_ready(raw, tids[0])
    producers = {}
    for tid in tids:
        r = init_txn(raw, tid)
        assert r.error_code == 0, r
        producers[tid] = (int(r.producer_id), int(r.producer_epoch))

    async def main() -> tuple[list[int], dict[str, ErrorCode], dict[str, ErrorCode]]:
        client = CountingClient("127.0.0.1", broker.port, "test", _clock_ms,
                                request_timeout_ms=60_000)
        client.sent = []
        batcher = VerificationBatcher()
        added: dict[str, ErrorCode] = {}
        verified: dict[str, ErrorCode] = {}

        async def check(tid: str, verify_only: bool, out: dict[str, ErrorCode]) -> None:
            pid, epoch = producers[tid]
            out[tid] = await batcher.ask(1, client, tid, pid, epoch, (topic, 0),
                                         verify_only=verify_only)
        try:
            async with trio.open_nursery() as nursery:
                for tid in tids:  # transaction version 2: the check adds the partition
                    nursery.start_soon(check, tid, False, added)
            async with trio.open_nursery() as nursery:
                for tid in tids:  # and now it is in every transaction
                    nursery.start_soon(check, tid, True, verified)
        finally:
            await client.aclose()
        return client.sent, added, verified

    sent, added, verified = trio.run(main)
    assert added == dict.fromkeys(tids, ErrorCode.NONE), added
    assert verified == dict.fromkeys(tids, ErrorCode.NONE), verified
    assert sum(sent) == 2 * TXNS, sent
    assert len(sent) <= 6, sent  # 2 x (the first check alone, then the rest together)
