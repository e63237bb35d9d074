"""The replica manager (kafkawire/replication/replica_manager.py) on real logs and real metadata images:
roles from the image, Kafka's errors for partitions not hosted or not led here, and acks=all
waits released by follower fetches, timed out, or failed by a leadership change. Three
replica managers stand for three brokers; the "fetcher" is a few lines of test code using the
partition-state layer the way the replica fetcher will."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
import trio.testing

from kafkawire.replication.purgatory import AppendNotifier
from kafkawire.replication.replica_manager import ReplicaManager
from kraft import controller
from kraft.image import MetadataImage, apply
from log.config import LogConfig
from log.manager import LogManager
from log.replica import FetchIsolation, Partition, ReplicaRole
from protocol.errors import ErrorCode, KafkaError
from protocol.records import iter_headers
from tests.batchutil import build_batch

NOW = 1_700_000_000_000
CFG = LogConfig(segment_bytes=1 << 20)


def cluster(*broker_ids: int) -> MetadataImage:
    img = apply(MetadataImage(), controller.bootstrap_records(), 0, 1)
    for b in broker_ids:
        recs = controller.register_broker(
            b, uuid.uuid4(), 1, [("PLAINTEXT", "localhost", 9000 + b, 0)], None, {}
        )
        img = apply(img, recs, img.offset + 1, 1)
    return img


def with_topic(img: MetadataImage, name: str, partitions: int, rf: int,
               assignments: dict[int, list[int]] | None = None) -> MetadataImage:
    recs = controller.create_topic(img, name, partitions, rf, {}, assignments=assignments)
    return apply(img, recs, img.offset + len(recs), 1)


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[dict[int, ReplicaManager]]:
    out = {}
    for n in (1, 2, 3):
        logs = LogManager.open(tmp_path / f"n{n}", NOW, default_config=CFG)
        out[n] = ReplicaManager(logs, n, AppendNotifier())
    yield out
    for rm in out.values():
        rm.logs.close()


def apply_all(nodes: dict[int, ReplicaManager], img: MetadataImage) -> None:
    for rm in nodes.values():
        rm.apply_image(img, NOW, lambda _t: CFG)


def leader_of(nodes: dict[int, ReplicaManager], topic: str) -> tuple[int, Partition]:
    for n, rm in nodes.items():
        p = rm.partition(topic, 0)
        if p is not None and p.is_leader:
            return n, p
    raise AssertionError("no leader")


def fetch_round(nodes: dict[int, ReplicaManager], topic: str) -> None:
    """Every follower of ``topic``-0 fetches once from the leader and takes its high watermark."""
    _, lead = leader_of(nodes, topic)
    for n, rm in nodes.items():
        p = rm.partition(topic, 0)
        if p is None or p.is_leader:
            continue
        read = lead.read(n, p.log_end_offset, 1 << 20, isolation=FetchIsolation.LOG_END,
                         now_ms=NOW, current_leader_epoch=p.leader_epoch)
        if read.records is not None and read.records.size:
            data = bytearray(read.records.read_bytes())
            p.append_as_follower(data, iter_headers(data), now_ms=NOW)
        p.update_follower_high_watermark(read.high_watermark)


def produce(p: Partition, n: int, min_isr: int = 2) -> int:
    buf = build_batch([NOW] * n)
    info = p.append_as_leader(buf, iter_headers(buf), now_ms=NOW, required_acks=-1,
                              min_insync_replicas=min_isr)
    return info.last_offset + 1


def test_roles_and_errors_follow_the_image(nodes: dict[int, ReplicaManager]) -> None:
    img = with_topic(cluster(1, 2, 3), "r3", 1, 3)
    img = with_topic(img, "only2", 1, 1, assignments={0: [2]})
    apply_all(nodes, img)
    n, lead = leader_of(nodes, "r3")
    assert lead.isr == frozenset({1, 2, 3}) and lead.replicas == img.partition("r3", 0).replicas
    for m, rm in nodes.items():
        p = rm.partition("r3", 0)
        assert p is not None and p.role is (ReplicaRole.LEADER if m == n else ReplicaRole.FOLLOWER)
        assert p.leader_id == n
    rm1 = nodes[1]
    with pytest.raises(KafkaError) as ei:
        rm1.leader_partition("nope", 0)
    assert ei.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert rm1.partition("only2", 0) is None  # hosted on node 2 only
    with pytest.raises(KafkaError) as ei:
        rm1.leader_partition("only2", 0)
    assert ei.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    follower = next(m for m in nodes if m != n)
    with pytest.raises(KafkaError) as ei:
        nodes[follower].leader_partition("r3", 0)
    assert ei.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    with pytest.raises(KafkaError) as ei:
        nodes[n].leader_partition("r3", 0, current_leader_epoch=lead.leader_epoch + 1)
    assert ei.value.code == ErrorCode.UNKNOWN_LEADER_EPOCH
    # the topic goes away: its replicas go offline and its logs are deleted
    recs = controller.delete_topic(img, "r3")
    apply_all(nodes, apply(img, recs, img.offset + len(recs), 1))
    assert all(rm.partition("r3", 0) is None and rm.logs.get("r3", 0) is None
               for rm in nodes.values())
    assert lead.role is ReplicaRole.OFFLINE


def test_acks_all_waits_for_the_followers(nodes: dict[int, ReplicaManager]) -> None:
    apply_all(nodes, with_topic(cluster(1, 2, 3), "r3", 1, 3))
    n, lead = leader_of(nodes, "r3")
    rm = nodes[n]
    results: list[ErrorCode] = []

    async def main() -> None:
        end = produce(lead, 3)
        assert lead.high_watermark == 0
        async with trio.open_nursery() as nursery:
            async def waiter() -> None:
                results.append(await rm.wait_for_high_watermark(
                    lead, end, timeout_ms=60_000, min_insync_replicas=2))
            nursery.start_soon(waiter)
            await trio.testing.wait_all_tasks_blocked()
            assert results == []
            fetch_round(nodes, "r3")  # followers fetch the data: their LEO is not known yet
            await trio.testing.wait_all_tasks_blocked()
            assert results == [] and lead.high_watermark == 0
            fetch_round(nodes, "r3")  # the next fetch offsets tell the leader
        assert results == [ErrorCode.NONE] and lead.high_watermark == end
        fetch_round(nodes, "r3")
        assert all(rm2.partition("r3", 0).high_watermark == end  # type: ignore[union-attr]
                   for rm2 in nodes.values())

    trio.run(main)


def test_acks_all_times_out_or_fails_on_leadership_loss(nodes: dict[int, ReplicaManager]) -> None:
    apply_all(nodes, with_topic(cluster(1, 2, 3), "r3", 1, 3))
    n, lead = leader_of(nodes, "r3")
    rm = nodes[n]

    async def main() -> None:
        end = produce(lead, 2)
        assert await rm.wait_for_high_watermark(lead, end, timeout_ms=1500) == \
            ErrorCode.REQUEST_TIMED_OUT
        assert lead.waiting == 0
        got: list[ErrorCode] = []
        async with trio.open_nursery() as nursery:
            async def waiter() -> None:
                got.append(await rm.wait_for_high_watermark(lead, end, timeout_ms=60_000))
            nursery.start_soon(waiter)
            await trio.testing.wait_all_tasks_blocked()
            other = next(m for m in nodes if m != n)
            lead.become_follower(other, lead.leader_epoch + 1, lead.isr, lead.replicas)
        assert got == [ErrorCode.NOT_LEADER_OR_FOLLOWER]

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_fetch_long_polls_are_woken_by_the_partition(nodes: dict[int, ReplicaManager]) -> None:
    apply_all(nodes, with_topic(cluster(1, 2, 3), "r1", 1, 1, assignments={0: [1]}))
    rm = nodes[1]
    p = rm.leader_partition("r1", 0)

    async def main() -> None:
        woken: list[bool] = []
        async with trio.open_nursery() as nursery:
            async def poll() -> None:
                woken.append(await rm.notifier.wait_any([("r1", 0)], trio.current_time() + 60))
            nursery.start_soon(poll)
            await trio.testing.wait_all_tasks_blocked()
            produce(p, 1, min_isr=1)
        assert woken == [True] and p.high_watermark == 1

    trio.run(main)
