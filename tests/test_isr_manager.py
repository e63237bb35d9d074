"""The ISR manager (kafkawire/isr_manager.py) with three replica managers on real logs and a
real metadata image; the controller channel is a stand-in that holds each AlterPartition
until the test lets it answer, the way a loaded controller answers late.

While the leader's request to add a caught-up replica is in flight, the high watermark counts
that replica too (Kafka's "maximal" ISR, KIP-497: ``maybeIncrementLeaderHW`` takes the
pending ISR's members). Without it, records appended meanwhile were committed (and
acknowledged at acks=all) with the other follower alone; the controller then added a replica
that lacked them, and when the leader died next that replica could be elected and the
acknowledged records were gone.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest
import trio

from kafkawire.broker_lifecycle import IsrChange, IsrChangeResult
from kafkawire.isr_manager import IsrManager
from kafkawire.purgatory import AppendNotifier
from kafkawire.replica_manager import ReplicaManager
from kraft.cluster_control import HeartbeatReply, Registration
from kraft.image import MetadataImage
from log.manager import LogManager
from log.replica import Partition
from protocol.errors import ErrorCode
from tests.test_replica_manager import CFG, NOW, cluster, fetch_round, produce, with_topic

LAG_MS = 30_000


class HeldChannel:
    """AlterPartition answered only when ``release`` is set: the change the leader asked
    for, with the next partition epoch."""

    def __init__(self) -> None:
        self.asked: list[IsrChange] = []
        self.release = trio.Event()

    async def register(self, reg: Registration) -> int:
        raise NotImplementedError

    async def heartbeat(self, broker_id: int, broker_epoch: int, metadata_offset: int,
                        want_fence: bool, want_shut_down: bool) -> HeartbeatReply:
        raise NotImplementedError

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> int:
        raise NotImplementedError

    async def alter_partition(self, broker_id: int, broker_epoch: int, change: IsrChange
                              ) -> IsrChangeResult:
        self.asked.append(change)
        await self.release.wait()
        return IsrChangeResult(ErrorCode.NONE, broker_id, change.leader_epoch,
                               tuple(m.broker_id for m in change.new_isr),
                               change.partition_epoch + 1)


async def bounded(main: Callable[[], Awaitable[None]]) -> None:
    with trio.fail_after(30):
        await main()


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[dict[int, ReplicaManager]]:
    out = {}
    for n in (1, 2, 3):
        logs = LogManager.open(tmp_path / f"n{n}", NOW, default_config=CFG)
        out[n] = ReplicaManager(logs, n, AppendNotifier())
    yield out
    for rm in out.values():
        rm.logs.close()


def fetch_from(nodes: dict[int, ReplicaManager], lead: Partition, n: int) -> None:
    """Only node ``n`` fetches once."""
    fetch_round({1: nodes[1], n: nodes[n]}, "t")
    assert lead.is_leader


def test_the_high_watermark_waits_for_a_replica_being_added(
        nodes: dict[int, ReplicaManager]) -> None:
    img: MetadataImage = with_topic(cluster(1, 2, 3), "t", 1, 3, {0: [1, 2, 3]})
    for rm in nodes.values():
        rm.apply_image(img, NOW, lambda _t: CFG)
    lead = nodes[1].partition("t", 0)
    assert lead is not None and lead.is_leader
    lead.update_isr(frozenset({1, 2}), NOW)  # node 3 was out of the ISR
    channel = HeldChannel()
    isr = IsrManager(nodes[1], lambda: channel, lambda: 1, lambda: img, lambda: NOW, LAG_MS)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(isr.run)
            produce(lead, 3)
            fetch_from(nodes, lead, 2)
            fetch_from(nodes, lead, 2)
            assert lead.high_watermark == 3
            fetch_from(nodes, lead, 3)
            fetch_from(nodes, lead, 3)  # node 3 caught up: the leader asks to add it
            while not channel.asked:
                await trio.sleep(0.01)
            assert [m.broker_id for m in channel.asked[0].new_isr] == [1, 2, 3]
            # meanwhile: five more records, and only node 2 fetches them
            end = produce(lead, 5)
            fetch_from(nodes, lead, 2)
            fetch_from(nodes, lead, 2)
            node3 = nodes[3].partition("t", 0)
            assert node3 is not None and node3.log_end_offset == 3
            assert lead.high_watermark == 3, "committed without the replica being added"
            channel.release.set()
            while lead.isr != {1, 2, 3}:
                await trio.sleep(0.01)
            assert lead.high_watermark == 3
            fetch_from(nodes, lead, 3)
            fetch_from(nodes, lead, 3)  # (a fetch reports the position it was sent at)
            assert lead.high_watermark == end
            nursery.cancel_scope.cancel()

    trio.run(bounded, main)


def test_a_refused_addition_releases_the_high_watermark(
        nodes: dict[int, ReplicaManager]) -> None:
    img: MetadataImage = with_topic(cluster(1, 2, 3), "t", 1, 3, {0: [1, 2, 3]})
    for rm in nodes.values():
        rm.apply_image(img, NOW, lambda _t: CFG)
    lead = nodes[1].partition("t", 0)
    assert lead is not None
    lead.update_isr(frozenset({1, 2}), NOW)

    class Refusing(HeldChannel):
        async def alter_partition(self, broker_id: int, broker_epoch: int, change: IsrChange
                                  ) -> IsrChangeResult:
            self.asked.append(change)
            await self.release.wait()
            return IsrChangeResult(ErrorCode.INELIGIBLE_REPLICA)

    channel = Refusing()
    isr = IsrManager(nodes[1], lambda: channel, lambda: 1, lambda: img, lambda: NOW, LAG_MS)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(isr.run)
            fetch_from(nodes, lead, 3)
            while not channel.asked:
                await trio.sleep(0.01)
            end = produce(lead, 4)
            fetch_from(nodes, lead, 2)
            fetch_from(nodes, lead, 2)
            assert lead.high_watermark == 0
            channel.release.set()
            while lead.high_watermark != end:  # refused: the committed ISR alone again
                await trio.sleep(0.01)
            assert lead.isr == {1, 2}
            nursery.cancel_scope.cancel()

    trio.run(bounded, main)
