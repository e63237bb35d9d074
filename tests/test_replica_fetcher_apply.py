"""The follower's side of a Fetch answer (kafkawire.replica_fetcher.apply_fetched) and the
leader's ISR decisions (Partition.wanted_isr), on real logs: the leader's answers are built
from ``Partition.read`` exactly as the Fetch handler fills them, encoded and decoded with the
Fetch v18 codec, then applied to a follower."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkawire.replica_fetcher import FetchOutcome, apply_fetched, fetcher_id, truncate_out_of_range
from log.config import LogConfig
from log.partition_log import PartitionLog
from log.replica import FetchIsolation, Partition, broker_epoch_isr_eligible
from protocol._generated.fetch_response import FetchResponse
from protocol.errors import ErrorCode, KafkaError
from protocol.records import iter_headers
from tests.batchutil import build_batch

NOW = 1_700_000_000_000
CFG = LogConfig(segment_bytes=4000, index_interval_bytes=100)
V = 18


def open_partition(dir: Path, node: int) -> Partition:
    return Partition(PartitionLog.open(dir / f"n{node}" / "t-0", CFG, NOW), node)


@pytest.fixture
def trio_of(tmp_path: Path) -> Iterator[tuple[Partition, Partition, Partition]]:
    ps = tuple(open_partition(tmp_path, n) for n in (1, 2, 3))
    yield ps  # type: ignore[misc]
    for p in ps:
        p.log.close()


def produce(p: Partition, n: int = 1, **kw: object) -> int:
    buf = build_batch([NOW] * n, **kw)  # type: ignore[arg-type]
    info = p.append_as_leader(buf, iter_headers(buf), now_ms=NOW)
    return info.last_offset


def answer(leader: Partition, follower: Partition, now_ms: int = NOW) -> FetchResponse.PartitionData:
    """The leader's answer to the follower's fetch, through the v18 wire encoding."""
    latest = follower.log.leader_epochs.latest_epoch()
    pd = FetchResponse.PartitionData(partition_index=0, records=b"")
    try:
        res = leader.read(follower.local_id, follower.log_end_offset, 1 << 20,
                          isolation=FetchIsolation.LOG_END, now_ms=now_ms,
                          current_leader_epoch=follower.leader_epoch,
                          last_fetched_epoch=-1 if latest is None else latest)
    except KafkaError as e:
        pd.error_code, pd.high_watermark = e.code, -1
    else:
        pd.high_watermark, pd.log_start_offset = res.high_watermark, res.log_start_offset
        if res.diverging_epoch is not None:
            pd.diverging_epoch = FetchResponse.EpochEndOffset(
                epoch=res.diverging_epoch[0], end_offset=res.diverging_epoch[1])
        elif res.records is not None:
            pd.records = res.records.read_bytes()
    resp = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic="t",
                                                                         partitions=[pd])])
    back = FetchResponse.decode(resp.encode(V), V)
    out: FetchResponse.PartitionData = back.responses[0].partitions[0]
    return out


def test_followers_copy_offsets_and_epochs_and_move_the_high_watermark(trio_of) -> None:  # type: ignore[no-untyped-def]
    a, b, c = trio_of
    replicas = (1, 2, 3)
    a.become_leader(0, frozenset(replicas), replicas, NOW)
    for f in (b, c):
        f.become_follower(1, 0, frozenset(replicas), replicas)
    last = produce(a, 3)
    produce(a, 2, producer_id=7, producer_epoch=0, base_sequence=0)
    w = a.wait_for_high_watermark(a.log_end_offset, min_insync_replicas=2)
    assert not w.done and a.high_watermark == 0
    for f in (b, c):
        assert apply_fetched(f, answer(a, f), NOW) == FetchOutcome.OK
    assert b.log_end_offset == c.log_end_offset == a.log_end_offset == last + 3
    # the leader learns the followers' positions on their next fetch
    for f in (b, c):
        apply_fetched(f, answer(a, f), NOW)
    assert a.high_watermark == a.log_end_offset and w.done and w.error == ErrorCode.NONE
    for f in (b, c):
        apply_fetched(f, answer(a, f), NOW)
        assert f.high_watermark == a.high_watermark
        assert f.log.leader_epochs.entries() == a.log.leader_epochs.entries()
        assert f.log.read(0, 1 << 20).read_bytes() == a.log.read(0, 1 << 20).read_bytes()
        # the producer state followed: the idempotence window is there on a future leader
        assert 7 in f.log.producer_state.producers


def test_a_returning_replica_truncates_its_divergent_tail(trio_of) -> None:  # type: ignore[no-untyped-def]
    a, b, _c = trio_of
    replicas = (1, 2)
    a.become_leader(0, frozenset(replicas), replicas, NOW)
    b.become_follower(1, 0, frozenset(replicas), replicas)
    produce(a, 2)
    apply_fetched(b, answer(a, b), NOW)
    apply_fetched(b, answer(a, b), NOW)
    committed = a.high_watermark
    assert committed == 2
    produce(a, 3)  # never replicated: a dies
    b.become_leader(1, frozenset({2}), replicas, NOW)
    produce(b, 1)
    a.become_follower(2, 1, frozenset({2}), replicas)
    # a fetches with last fetched epoch 0 at offset 5: the leader says epoch 0 ended at 2
    pd = answer(b, a)
    assert pd.diverging_epoch is not None and (pd.diverging_epoch.epoch, pd.diverging_epoch.end_offset) == (0, 2)
    assert apply_fetched(a, pd, NOW) == FetchOutcome.OK
    assert a.log_end_offset == committed
    apply_fetched(a, answer(b, a), NOW)
    assert a.log.read(0, 1 << 20).read_bytes() == b.log.read(0, 1 << 20).read_bytes()


def test_leadership_errors_back_off_and_out_of_range_truncates(trio_of) -> None:  # type: ignore[no-untyped-def]
    a, b, _c = trio_of
    replicas = (1, 2)
    a.become_leader(3, frozenset(replicas), replicas, NOW)
    b.become_follower(1, 2, frozenset(replicas), replicas)  # b has not seen epoch 3 yet
    pd = answer(a, b)
    assert pd.error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert apply_fetched(b, pd, NOW) == FetchOutcome.BACKOFF
    oor = FetchResponse.PartitionData(error_code=ErrorCode.OFFSET_OUT_OF_RANGE)
    assert apply_fetched(b, oor, NOW) == FetchOutcome.OUT_OF_RANGE
    b.become_follower(1, 3, frozenset(replicas), replicas)
    truncate_out_of_range(b, leader_end=10, leader_start=7)  # log below the leader's start
    assert b.log.log_start_offset == b.log_end_offset == 7


def test_isr_shrinks_after_the_lag_time_and_expands_when_caught_up(trio_of) -> None:  # type: ignore[no-untyped-def]
    a, b, c = trio_of
    replicas = (1, 2, 3)
    lag = 10_000
    a.become_leader(0, frozenset(replicas), replicas, NOW)
    for f in (b, c):
        f.become_follower(1, 0, frozenset(replicas), replicas)
    woken: list[Partition] = []
    a.on_isr_expand = woken.append
    produce(a, 2)
    apply_fetched(b, answer(a, b, NOW + 1000), NOW)
    apply_fetched(b, answer(a, b, NOW + 2000), NOW)
    assert a.wanted_isr(NOW + 5000, lag, lambda r, e: True) is None
    # c never fetched since the epoch started: out after replica.lag.time.max.ms
    assert a.wanted_isr(NOW + lag + 1, lag, lambda r, e: True) == frozenset({1, 2})
    a.update_isr(frozenset({1, 2}), NOW + lag + 1)
    assert a.high_watermark == 2
    # c catches up: the leader is told at once, and c is eligible only when its broker is
    apply_fetched(c, answer(a, c, NOW + lag + 2), NOW)
    apply_fetched(c, answer(a, c, NOW + lag + 3), NOW)
    assert woken and woken[-1] is a
    assert a.wanted_isr(NOW + lag + 3, lag, lambda r, e: r != 3) is None
    assert a.wanted_isr(NOW + lag + 3, lag, lambda r, e: True) == frozenset(replicas)


def test_fetcher_ids_are_stable_and_spread() -> None:
    ids = {fetcher_id("t", p, 3) for p in range(30)}
    assert ids == {0, 1, 2}
    assert fetcher_id("t", 5, 3) == fetcher_id("t", 5, 3)


def test_a_fetch_with_a_stale_broker_epoch_does_not_join_the_isr(trio_of) -> None:  # type: ignore[no-untyped-def]
    """KIP-903: the leader keeps the broker epoch of each follower's last fetch; the ISR
    expansion takes it only when it is the broker's registered epoch (or -1, Fetch < v15),
    and AlterPartition names that epoch for the member."""
    a, b, _c = trio_of
    registered = {2: 70}
    eligible = lambda r, e: broker_epoch_isr_eligible(e, registered.get(r))  # noqa: E731
    a.become_leader(0, frozenset({1}), (1, 2), NOW)
    b.become_follower(1, 0, frozenset({1}), (1, 2))
    produce(a, 3)
    assert a.wanted_isr(NOW, 10_000, eligible) is None  # b never fetched
    for epoch, joins in ((42, False), (-1, True), (70, True), (42, False)):
        a.read(2, a.log_end_offset, 1 << 20, isolation=FetchIsolation.LOG_END, now_ms=NOW,
               replica_epoch=epoch)
        want = a.wanted_isr(NOW, 10_000, eligible)
        assert (want == frozenset({1, 2})) is joins, (epoch, want)
        assert a.member_broker_epoch(2, 9) == epoch
    assert a.member_broker_epoch(1, 9) == 9
    assert a.member_broker_epoch(3, 9) == -1
    assert not broker_epoch_isr_eligible(None, 70)
    assert not broker_epoch_isr_eligible(70, None)


def test_a_leader_epoch_that_wrote_nothing_is_dropped_when_following(trio_of) -> None:  # type: ignore[no-untyped-def]
    """Issue 27: a node restarting after kill -9 was made leader (its old registration still
    looked alive), assigned its epoch at its log end and was moved out by its own
    registration before writing anything. As a follower it kept fetching with that epoch as
    its last fetched one; the new leader, which never had it, answered a diverging epoch
    ending at our log end, and nothing was cut: the same answer forever, the replica never
    back in the ISR. Kafka's ``truncateTo`` drops the epoch entries at the log end even when
    no data is cut; so must we."""
    a, b, c = trio_of
    replicas = (1, 2, 3)
    a.become_leader(0, frozenset(replicas), replicas, NOW)
    for f in (b, c):
        f.become_follower(1, 0, frozenset(replicas), replicas)
    produce(a, 3)
    for _ in range(2):
        for f in (b, c):
            apply_fetched(f, answer(a, f), NOW)
    assert a.high_watermark == b.log_end_offset == c.log_end_offset == 3
    b.become_leader(1, frozenset(replicas), replicas, NOW)  # led, wrote nothing
    assert b.log.leader_epochs.entries() == [(0, 0), (1, 3)]
    c.become_leader(2, frozenset({1, 3}), replicas, NOW)
    b.become_follower(3, 2, frozenset({1, 3}), replicas)
    pd = answer(c, b)
    assert pd.diverging_epoch is not None
    assert (pd.diverging_epoch.epoch, pd.diverging_epoch.end_offset) == (0, 3)
    assert apply_fetched(b, pd, NOW) == FetchOutcome.OK
    assert b.log.leader_epochs.entries() == [(0, 0)] and b.log_end_offset == 3
    produce(c, 2)
    for _ in range(2):
        pd = answer(c, b)
        assert pd.diverging_epoch is None or pd.diverging_epoch.epoch < 0
        apply_fetched(b, pd, NOW)
    assert b.log_end_offset == c.log_end_offset == 5
    assert c.wanted_isr(NOW, 10_000, lambda r, e: True) == frozenset(replicas)


def test_retries_on_a_new_leader_get_the_offsets_the_records_end_at(tmp_path: Path) -> None:
    """Issue 27 #5, the paths a Produce gets its offsets from after a leader change: a retry of
    a batch the new leader replicated is a duplicate answered with the offsets it has there
    (also after a restart rebuilt the producer state), and a batch the old leader wrote alone
    is appended again where the new leader's log ends; the old leader truncates its copy and
    takes the new one, so every answer names where the records are on every replica."""
    a, b = (open_partition(tmp_path, n) for n in (1, 2))
    replicas = (1, 2)
    pid = dict(producer_id=9, producer_epoch=0)

    def idem(p: Partition, seq: int, n: int) -> tuple[int, int, bool]:
        buf = build_batch([NOW] * n, base_sequence=seq, **pid)  # type: ignore[arg-type]
        info = p.append_as_leader(buf, iter_headers(buf), now_ms=NOW)
        return info.first_offset, info.last_offset, info.duplicate

    a.become_leader(0, frozenset(replicas), replicas, NOW)
    b.become_follower(1, 0, frozenset(replicas), replicas)
    assert idem(a, 0, 2) == (0, 1, False)
    assert idem(a, 2, 3) == (2, 4, False)
    for _ in range(2):
        apply_fetched(b, answer(a, b), NOW)
    produce(a, 2)  # another producer's records, at 5-6, never replicated
    assert idem(a, 5, 2) == (7, 8, False)  # nor is this batch: a dies before b fetches
    b.become_leader(1, frozenset({2}), replicas, NOW)
    assert idem(b, 2, 3) == (2, 4, True)  # replicated: a duplicate, where b has it
    assert idem(b, 5, 2) == (5, 6, False)  # not replicated: written again, at b's end
    a.become_follower(2, 1, frozenset({2}), replicas)
    for _ in range(3):
        apply_fetched(a, answer(b, a), NOW)
    assert a.log.read(0, 1 << 20).read_bytes() == b.log.read(0, 1 << 20).read_bytes()
    assert idem(b, 5, 2) == (5, 6, True)
    for p in (a, b):  # restarted: the producer state comes back from the log
        p.log.close()
    a, b = (open_partition(tmp_path, n) for n in (1, 2))
    try:
        b.become_leader(3, frozenset(replicas), replicas, NOW)
        assert idem(b, 2, 3) == (2, 4, True)
        assert idem(b, 5, 2) == (5, 6, True)
        a.become_leader(4, frozenset(replicas), replicas, NOW)
        assert idem(a, 5, 2) == (5, 6, True)
    finally:
        for p in (a, b):
            p.log.close()
