"""The partition-state layer (log.replica.Partition) on real logs: roles, leadership checks,
the high watermark as min(LEO over the ISR), acks=all waiters, follower fetches and appends,
diverging epochs and truncation. Several replicas are several Partition objects on separate
directories, wired by hand the way a fetcher will wire them (read as follower, append verbatim).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from log.config import LogConfig
from log.partition_log import PartitionLog
from log.replica import FetchIsolation, HighWatermarkWaiter, Partition, ReplicaRole
from protocol.errors import ErrorCode, KafkaError
from protocol.records import iter_headers
from tests.batchutil import build_batch

NOW = 1_700_000_000_000
CFG = LogConfig(segment_bytes=2000, index_interval_bytes=100)


def open_partition(dir: Path, node: int) -> Partition:
    return Partition(PartitionLog.open(dir / "t-0", CFG, NOW), node)


@pytest.fixture
def leader(tmp_path: Path) -> Iterator[Partition]:
    p = open_partition(tmp_path / "n1", 1)
    yield p
    p.log.close()


def produce(p: Partition, n: int = 1, **kw: object) -> tuple[int, int]:
    buf = build_batch([NOW] * n)
    info = p.append_as_leader(buf, iter_headers(buf), now_ms=NOW, **kw)  # type: ignore[arg-type]
    return info.first_offset, info.last_offset


def code_of(fn, *args, **kw) -> ErrorCode:  # type: ignore[no-untyped-def]
    with pytest.raises(KafkaError) as ei:
        fn(*args, **kw)
    return ErrorCode(ei.value.code)


def follower_fetch(leader: Partition, replica: int, offset: int, epoch: int = -1) -> bytes:
    res = leader.read(replica, offset, 1 << 20, isolation=FetchIsolation.LOG_END, now_ms=NOW,
                      current_leader_epoch=epoch)
    return res.records.read_bytes() if res.records is not None else b""


def replicate(leader: Partition, follower: Partition) -> int:
    """One fetch round of ``follower`` from ``leader``; returns the bytes copied."""
    data = bytearray(follower_fetch(leader, follower.local_id, follower.log_end_offset))
    if data:
        follower.append_as_follower(data, iter_headers(data), now_ms=NOW)
    hw = leader.read(follower.local_id, follower.log_end_offset, 0, isolation=FetchIsolation.LOG_END,
                     now_ms=NOW).high_watermark
    follower.update_follower_high_watermark(hw)
    return len(data)


# ---- one replica: behaviour unchanged --------------------------------------------------------------

def test_single_replica_high_watermark_is_log_end_after_each_append(leader: Partition) -> None:
    leader.become_leader(0, frozenset({1}), (1,), NOW)
    for n in (1, 3, 7):
        _, last = produce(leader, n, required_acks=-1)
        assert leader.high_watermark == leader.log_end_offset == last + 1
        w = leader.wait_for_high_watermark(last + 1)
        assert w.done and w.error == ErrorCode.NONE
    assert leader.log.leader_epochs.entries() == [(0, 0)]


def test_new_leader_epoch_starts_at_the_log_end(leader: Partition) -> None:
    leader.become_leader(0, frozenset({1}), (1,), NOW)
    produce(leader, 4)
    leader.become_leader(3, frozenset({1}), (1,), NOW)
    produce(leader, 2)
    assert leader.log.leader_epochs.entries() == [(0, 0), (3, 4)]
    assert leader.end_offset_for_epoch(-1, 0) == (0, 4)
    assert leader.end_offset_for_epoch(3, 3) == (3, 6)


# ---- leadership checks --------------------------------------------------------------------------------

def test_leadership_and_epoch_checks(leader: Partition) -> None:
    assert code_of(produce, leader) == ErrorCode.NOT_LEADER_OR_FOLLOWER  # no role yet
    leader.become_leader(5, frozenset({1}), (1,), NOW)
    produce(leader, 2)
    read = leader.read
    kw = {"isolation": FetchIsolation.HIGH_WATERMARK, "now_ms": NOW}
    assert code_of(read, -1, 0, 100, current_leader_epoch=4, **kw) == ErrorCode.FENCED_LEADER_EPOCH
    assert code_of(read, -1, 0, 100, current_leader_epoch=6, **kw) == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert read(-1, 0, 100, current_leader_epoch=5, **kw).records is not None
    assert code_of(leader.end_offset_for_epoch, 4, 5) == ErrorCode.FENCED_LEADER_EPOCH
    assert code_of(leader.offset_for_timestamp, -1, FetchIsolation.HIGH_WATERMARK,
                   current_leader_epoch=7) == ErrorCode.UNKNOWN_LEADER_EPOCH
    leader.become_follower(2, 6, frozenset({1, 2}), (1, 2))
    assert code_of(produce, leader) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert code_of(read, -1, 0, 100, **kw) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert code_of(read, -1, 0, 100, current_leader_epoch=5, **kw) == ErrorCode.FENCED_LEADER_EPOCH
    assert code_of(leader.end_offset_for_epoch, -1, 5) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert code_of(leader.delete_records, 1) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    # a consumer allowed to read from a follower (KIP-392) gets data up to its high watermark
    assert read(-1, 0, 100, require_leader=False, **kw).records is not None
    leader.make_offline()
    assert code_of(read, -1, 0, 100, require_leader=False, **kw) == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_follower_fetch_from_an_unknown_replica(leader: Partition) -> None:
    leader.become_leader(1, frozenset({1, 2}), (1, 2), NOW)
    kw = {"isolation": FetchIsolation.LOG_END, "now_ms": NOW}
    assert code_of(leader.read, 3, 0, 100, current_leader_epoch=1, **kw) == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert code_of(leader.read, 3, 0, 100, **kw) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert code_of(leader.read, 1, 0, 100, **kw) == ErrorCode.NOT_LEADER_OR_FOLLOWER  # itself


def test_not_enough_replicas_before_the_append(leader: Partition) -> None:
    leader.become_leader(0, frozenset({1}), (1, 2, 3), NOW)
    end = leader.log_end_offset
    assert code_of(produce, leader, required_acks=-1, min_insync_replicas=2) == ErrorCode.NOT_ENOUGH_REPLICAS
    assert leader.log_end_offset == end  # nothing written
    produce(leader, required_acks=1, min_insync_replicas=2)  # acks=1 ignores min.insync.replicas
    assert leader.high_watermark == 1


def test_min_insync_replicas_is_capped_at_the_replica_count(leader: Partition) -> None:
    # Kafka 4's effective min ISR: min(min.insync.replicas, replicas)
    leader.become_leader(0, frozenset({1, 2, 3}), (1, 2, 3), NOW)
    assert produce(leader, required_acks=-1, min_insync_replicas=4) == (0, 0)
    w = leader.wait_for_high_watermark(1, min_insync_replicas=4)
    assert w.min_insync_replicas == 3
    leader.update_isr(frozenset({1, 2}), NOW)  # 2 < min(4, 3)
    assert code_of(produce, leader, required_acks=-1, min_insync_replicas=4) == \
        ErrorCode.NOT_ENOUGH_REPLICAS
    assert produce(leader, required_acks=-1, min_insync_replicas=2) == (1, 1)


# ---- the high watermark with followers ------------------------------------------------------------------

def test_high_watermark_follows_the_slowest_isr_member(tmp_path: Path) -> None:
    lead = open_partition(tmp_path / "n1", 1)
    lead.become_leader(0, frozenset({1, 2, 3}), (1, 2, 3), NOW)
    produce(lead, 5)
    assert lead.high_watermark == 0  # followers' positions unknown
    w3 = lead.wait_for_high_watermark(3, min_insync_replicas=2)
    w5 = lead.wait_for_high_watermark(5, min_insync_replicas=2)
    assert not w3.done and lead.waiting == 2
    follower_fetch(lead, 2, 5)
    assert lead.high_watermark == 0  # replica 3 still unknown
    follower_fetch(lead, 3, 3)
    assert lead.high_watermark == 3 and w3.done and w3.error == ErrorCode.NONE and not w5.done
    follower_fetch(lead, 3, 2)  # a follower that truncated: the high watermark stays
    assert lead.high_watermark == 3
    lead.update_isr(frozenset({1}), NOW)  # the ISR shrinks below min.insync.replicas
    assert lead.high_watermark == 5 and w5.done
    assert w5.error == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    lead.log.close()


def test_high_watermark_held_while_the_isr_is_below_min_isr(tmp_path: Path) -> None:
    """KIP-966 as Kafka 4.3.1 (``Partition.maybeIncrementLeaderHW``): with the ISR below the
    topic's min.insync.replicas (at most the replica count) the leader takes acks=1 writes but
    its high watermark stays; it moves once the ISR is back at min ISR or min ISR is lowered.
    An acks=all waiter parked meanwhile is not released (it would time out)."""
    lead = open_partition(tmp_path / "n1", 1)
    lead.set_min_insync_replicas(3)
    lead.become_leader(0, frozenset({1, 2, 3}), (1, 2, 3), NOW)
    produce(lead, 3)
    follower_fetch(lead, 2, 3)
    follower_fetch(lead, 3, 3)
    assert lead.high_watermark == 3 and not lead.under_min_isr
    w = lead.wait_for_high_watermark(4, min_insync_replicas=3)
    lead.update_isr(frozenset({1, 2}), NOW)
    assert lead.under_min_isr
    assert produce(lead, 1, required_acks=1) == (3, 3)
    follower_fetch(lead, 2, 4)
    assert lead.high_watermark == 3 and not w.done
    assert code_of(produce, lead, required_acks=-1, min_insync_replicas=3) == \
        ErrorCode.NOT_ENOUGH_REPLICAS
    lead.set_min_insync_replicas(2)  # a config change: the ISR {1, 2} is enough now
    assert lead.high_watermark == 4 and w.done
    lead.set_min_insync_replicas(3)
    produce(lead, 1, required_acks=1)
    follower_fetch(lead, 2, 5)
    assert lead.high_watermark == 4
    follower_fetch(lead, 3, 5)
    lead.update_isr(frozenset({1, 2, 3}), NOW)  # back at min ISR
    assert lead.high_watermark == 5 and not lead.under_min_isr
    lead.log.close()


def test_min_isr_above_the_replica_count_does_not_hold_the_high_watermark(
        leader: Partition) -> None:
    leader.set_min_insync_replicas(2)  # one replica: the effective min ISR is 1
    leader.become_leader(0, frozenset({1}), (1,), NOW)
    produce(leader, 2)
    assert leader.high_watermark == 2


def test_losing_leadership_fails_parked_waiters(leader: Partition) -> None:
    leader.become_leader(0, frozenset({1, 2}), (1, 2), NOW)
    produce(leader, 2)
    w = leader.wait_for_high_watermark(2)
    cancelled = leader.wait_for_high_watermark(2)
    leader.cancel(cancelled)
    leader.become_follower(2, 1, frozenset({1, 2}), (1, 2))
    assert w.done and w.error == ErrorCode.NOT_LEADER_OR_FOLLOWER
    late = leader.wait_for_high_watermark(0)
    assert late.done and late.error == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_hw_requires_flush_counts_only_durable_offsets(tmp_path: Path) -> None:
    p = Partition(PartitionLog.open(tmp_path / "m-0", CFG, NOW), 1, hw_requires_flush=True)
    p.become_leader(1, frozenset({1}), (1,), NOW)
    produce(p, 3)
    assert p.high_watermark == 0
    p.log.flush()
    p.on_flushed()
    assert p.high_watermark == 3
    p.log.close()


# ---- followers: verbatim appends, diverging epochs, truncation ----------------------------------------------

def test_follower_copies_the_leaders_batches_verbatim(tmp_path: Path) -> None:
    lead, fol = open_partition(tmp_path / "n1", 1), open_partition(tmp_path / "n2", 2)
    lead.become_leader(4, frozenset({1, 2}), (1, 2), NOW)
    fol.become_follower(1, 4, frozenset({1, 2}), (1, 2))
    for n in (3, 1, 5):
        produce(lead, n)
    pid_batch = build_batch([NOW] * 2, producer_id=9, producer_epoch=0, base_sequence=0)
    lead.append_as_leader(pid_batch, iter_headers(pid_batch), now_ms=NOW)
    assert replicate(lead, fol) > 0
    assert fol.log_end_offset == lead.log_end_offset == 11
    assert lead.high_watermark == 11 and fol.high_watermark == 0  # learnt on the next fetch
    replicate(lead, fol)
    assert fol.high_watermark == 11
    a = lead.read(-1, 0, 1 << 20, isolation=FetchIsolation.LOG_END, now_ms=NOW).records
    fol.become_leader(5, frozenset({2}), (1, 2), NOW)  # so it may be read like a leader
    b = fol.read(-1, 0, 1 << 20, isolation=FetchIsolation.LOG_END, now_ms=NOW).records
    assert a is not None and b is not None and a.read_bytes() == b.read_bytes()
    assert fol.log.leader_epochs.entries() == [(4, 0), (5, 11)]
    assert fol.log.producer_state.producers[9].last_seq == 1
    with pytest.raises(KafkaError):  # offsets never go back
        old = bytearray(a.read_bytes())
        fol.become_follower(1, 6, frozenset({1, 2}), (1, 2))
        fol.append_as_follower(old, iter_headers(old), now_ms=NOW)
    lead.log.close()
    fol.log.close()


def test_diverging_epoch_then_truncation_then_catch_up(tmp_path: Path) -> None:
    a, b = open_partition(tmp_path / "n1", 1), open_partition(tmp_path / "n2", 2)
    a.become_leader(1, frozenset({1, 2}), (1, 2), NOW)
    b.become_follower(1, 1, frozenset({1, 2}), (1, 2))
    produce(a, 4)
    replicate(a, b)
    produce(a, 3)  # offsets 4..6 in epoch 1 reach only node 1, which then fails
    b.become_leader(2, frozenset({2}), (1, 2), NOW)
    produce(b, 2)  # offsets 4..5 in epoch 2
    a.become_follower(2, 2, frozenset({2}), (1, 2))
    res = b.read(-1, 0, 0, isolation=FetchIsolation.LOG_END, now_ms=NOW)
    assert res.diverging_epoch is None
    b.update_isr(frozenset({1, 2}), NOW)
    b.become_leader(2, frozenset({1, 2}), (1, 2), NOW)
    res = b.read(1, a.log_end_offset, 1 << 20, isolation=FetchIsolation.LOG_END, now_ms=NOW,
                 current_leader_epoch=2, last_fetched_epoch=1)
    assert res.diverging_epoch == (1, 4) and res.records is None
    offset, complete = a.truncation_offset(*res.diverging_epoch)
    assert (offset, complete) == (4, True)
    a.truncate_to(offset)
    assert a.log_end_offset == 4
    replicate(b, a)
    replicate(b, a)
    assert a.log_end_offset == b.log_end_offset == 6 and b.high_watermark == 6
    assert a.log.leader_epochs.entries() == b.log.leader_epochs.entries() == [(1, 0), (2, 4)]
    with pytest.raises(KafkaError):
        b.truncate_to(0)  # a leader's log is the truth
    a.log.close()
    b.log.close()


def test_truncation_offset_when_the_leader_names_an_unknown_epoch(tmp_path: Path) -> None:
    p = open_partition(tmp_path / "n2", 2)
    p.become_leader(1, frozenset({2}), (2,), NOW)
    produce(p, 3)
    p.become_leader(3, frozenset({2}), (2,), NOW)
    produce(p, 3)
    p.become_follower(1, 4, frozenset({1, 2}), (1, 2))
    assert p.truncation_offset(2, 5) == (3, False)  # ours ends epoch 1 at 3: cut, ask again
    assert p.truncation_offset(3, 5) == (5, True)
    assert p.truncation_offset(-1, 2) == (2, True)
    p.log.close()


# ---- Hypothesis: the high watermark and the waiters ---------------------------------------------------

FOLLOWERS = (2, 3)


class HighWatermarkMachine(RuleBasedStateMachine):
    """Random appends, follower fetch positions, ISR changes and waiters on a leader with two
    followers. The high watermark never goes back, equals max(previous, min LEO over the ISR),
    and a waiter is done exactly when the high watermark has reached its offset."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp())
        self.p = open_partition(self.dir, 1)
        self.p.become_leader(0, frozenset({1, 2, 3}), (1, 2, 3), NOW)
        self.fetched: dict[int, int] = {}
        self.isr = {1, 2, 3}
        self.hw = 0
        self.waiters: list[HighWatermarkWaiter] = []
        self.released_at: dict[int, int] = {}

    def _expected_hw(self) -> int:
        ends = [self.p.log_end_offset]
        for r in self.isr - {1}:
            if r not in self.fetched:
                return self.hw
            ends.append(self.fetched[r])
        return max(self.hw, min(ends))

    def _after(self) -> None:
        self.hw = self._expected_hw()
        for i, w in enumerate(self.waiters):
            if w.done and i not in self.released_at:
                self.released_at[i] = self.p.high_watermark

    @rule(n=st.integers(1, 5))
    def append(self, n: int) -> None:
        produce(self.p, n)
        self._after()

    @rule(replica=st.sampled_from(FOLLOWERS), data=st.data())
    def fetch(self, replica: int, data: st.DataObject) -> None:
        offset = data.draw(st.integers(0, self.p.log_end_offset))
        follower_fetch(self.p, replica, offset)
        self.fetched[replica] = offset
        self._after()

    @rule(members=st.sets(st.sampled_from(FOLLOWERS)))
    def change_isr(self, members: set[int]) -> None:
        self.isr = {1, *members}
        self.p.update_isr(frozenset(self.isr), NOW)
        self._after()

    @precondition(lambda self: len(self.waiters) < 20)
    @rule(ahead=st.integers(0, 8))
    def wait(self, ahead: int) -> None:
        self.waiters.append(self.p.wait_for_high_watermark(self.p.log_end_offset - 3 + ahead))
        self._after()

    @invariant()
    def high_watermark_is_as_computed(self) -> None:
        assert self.p.high_watermark == self.hw <= self.p.log_end_offset

    @invariant()
    def waiters_done_exactly_when_passed(self) -> None:
        for i, w in enumerate(self.waiters):
            assert w.done == (w.required_offset <= self.p.high_watermark)
            if w.done:
                # released by the move that first reached it, never earlier
                assert self.released_at[i] >= w.required_offset
                assert w.error == ErrorCode.NONE

    def teardown(self) -> None:
        self.p.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


HighWatermarkMachine.TestCase.settings = settings(
    max_examples=40, stateful_step_count=30, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_high_watermark_machine = HighWatermarkMachine.TestCase


def test_role_transitions_table() -> None:
    from log.replica import ROLE_TRANSITIONS

    assert ReplicaRole.NONE not in ROLE_TRANSITIONS[ReplicaRole.LEADER]
    assert ROLE_TRANSITIONS[ReplicaRole.OFFLINE] == frozenset({ReplicaRole.OFFLINE})


# ---- Hypothesis: three replicas, leader changes, divergent tails, convergence --------------------

NODES = (1, 2, 3)


def fetch_once(leader: Partition, f: Partition) -> None:
    """One fetch of follower ``f`` as the replica fetcher will do it: with its last fetched
    epoch; a diverging epoch truncates it, data is appended verbatim, the high watermark taken."""
    latest = f.log.leader_epochs.latest_epoch()  # as Kafka's fetcher: the log's latest epoch
    last_epoch = -1 if latest is None else latest
    res = leader.read(f.local_id, f.log_end_offset, 1 << 20, isolation=FetchIsolation.LOG_END,
                      now_ms=NOW, current_leader_epoch=leader.leader_epoch,
                      last_fetched_epoch=last_epoch)
    if res.diverging_epoch is not None:
        offset, _complete = f.truncation_offset(*res.diverging_epoch)
        f.truncate_to(offset)
        return
    if res.records is not None and res.records.size:
        data = bytearray(res.records.read_bytes())
        f.append_as_follower(data, iter_headers(data), now_ms=NOW)
    f.update_follower_high_watermark(res.high_watermark)


def log_bytes(p: Partition, upto: int) -> bytes:
    res = p.log.read(p.log.log_start_offset, 1 << 30, max_offset=upto)
    return res.read_bytes()


class ReplicationMachine(RuleBasedStateMachine):
    """Three replicas with the ISR kept at all three: appends on the leader, follower fetches
    in any order, elections of any replica (all are in the ISR). Committed data (below a
    leader's high watermark) is never lost nor changed on any later leader, and replicas that
    keep fetching converge to identical logs and leader epoch caches."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp())
        self.p = {n: open_partition(self.dir / f"n{n}", n) for n in NODES}
        self.epoch = 0
        self.leader = 1
        self._elect(1)
        self.committed = b""
        self.committed_offset = 0

    def _elect(self, new: int) -> None:
        self.epoch += 1
        self.leader = new
        isr = frozenset(NODES)
        for n, p in self.p.items():
            if n == new:
                p.become_leader(self.epoch, isr, NODES, NOW)
            else:
                p.become_follower(new, self.epoch, isr, NODES)

    def _record_committed(self) -> None:
        lead = self.p[self.leader]
        hw = lead.high_watermark
        if hw > self.committed_offset:
            self.committed = log_bytes(lead, hw)
            self.committed_offset = hw

    @rule(n=st.integers(1, 4))
    def produce(self, n: int) -> None:
        produce(self.p[self.leader], n)
        self._record_committed()

    @rule(f=st.sampled_from(NODES))
    def fetch(self, f: int) -> None:
        if f != self.leader:
            fetch_once(self.p[self.leader], self.p[f])
            self._record_committed()

    @rule(new=st.sampled_from(NODES))
    def elect(self, new: int) -> None:
        self._elect(new)
        self._record_committed()

    @rule()
    def converge(self) -> None:
        lead = self.p[self.leader]
        for _ in range(12):
            for n in NODES:
                if n != self.leader:
                    fetch_once(lead, self.p[n])
        self._record_committed()
        end = lead.log_end_offset
        assert lead.high_watermark == end
        for n in NODES:
            p = self.p[n]
            assert p.log_end_offset == end and p.high_watermark == end
            assert log_bytes(p, end) == log_bytes(lead, end)
        # every replica's epoch cache agrees with the batches it holds (the leader's may end
        # with its own epoch at the log end, before it wrote anything in it)
        for p in self.p.values():
            batches = list(iter_headers(log_bytes(p, end)))
            for epoch, offset in p.log.leader_epochs.entries():
                at = [h for _, h in batches if h.base_offset == offset]
                assert (at and at[0].partition_leader_epoch == epoch) or offset == end, (
                    p, p.log.leader_epochs.entries())
            for _, h in batches:
                assert p.log.epoch_for_offset(h.base_offset) == h.partition_leader_epoch

    @invariant()
    def committed_data_survives(self) -> None:
        lead = self.p[self.leader]
        assert lead.log_end_offset >= self.committed_offset
        assert log_bytes(lead, self.committed_offset) == self.committed
        for p in self.p.values():
            assert p.high_watermark <= p.log_end_offset

    def teardown(self) -> None:
        for p in self.p.values():
            p.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


ReplicationMachine.TestCase.settings = settings(
    max_examples=40, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_replication_machine = ReplicationMachine.TestCase


# ---- the idle fast path of Fetch (kafkawire/apis/fetch.py) -------------------------------------

@pytest.mark.parametrize("isolation", [FetchIsolation.HIGH_WATERMARK,
                                       FetchIsolation.TXN_COMMITTED])
def test_idle_offsets_agree_with_read(leader: Partition, isolation: FetchIsolation) -> None:
    """``idle_offsets`` answers exactly when ``read`` would return no records and no error, with
    the same offsets; otherwise it declines (None) and the fetch reads."""
    leader.become_leader(3, frozenset({1, 2}), (1, 2), NOW)
    produce(leader, 4)  # the high watermark stays at 0 until follower 2 fetches
    agreed = 0
    for offset in range(-1, 7):
        for epoch, require_leader in ((-1, True), (3, True), (2, True), (4, True), (-1, False)):
            idle = leader.idle_offsets(offset, isolation, epoch, require_leader)
            try:
                r = leader.read(-1, offset, 1 << 20, isolation=isolation, now_ms=NOW,
                                current_leader_epoch=epoch, require_leader=require_leader)
            except KafkaError:
                assert idle is None, (offset, epoch)
                continue
            if r.records is not None and r.records.size:
                assert idle is None, (offset, epoch)
            elif idle is not None:
                assert idle == (r.high_watermark, r.log_start_offset)
                assert leader.log.last_stable_offset == r.last_stable_offset
                agreed += 1
        if offset == 2:
            follower_fetch(leader, 2, 4)  # the high watermark moves to 4
    assert agreed >= 8
    assert leader.idle_offsets(4, FetchIsolation.LOG_END, -1, True) is None  # followers read
    leader.become_follower(2, 5, frozenset({1, 2}), (1, 2))
    assert leader.idle_offsets(4, isolation, -1, True) is None
    assert leader.idle_offsets(4, isolation, 5, False) is not None  # KIP-392: a follower serves


def test_idle_follower_offsets(leader: Partition) -> None:
    """``idle_follower_offsets``: an in-sync follower fetching again at the log end it already
    reported is answered with ``read``'s offsets without reading, and its caught-up time moves
    (it stays in the ISR); anything else (an offset, log start or broker epoch that changed, an
    older last fetched epoch, a replica outside the ISR, a wrong leader epoch) declines, so that
    ``read`` moves the high watermark and the ISR as before."""
    leader.become_leader(3, frozenset({1, 2, 3}), (1, 2, 3), NOW)
    produce(leader, 4)
    leo = leader.log_end_offset

    def fetch(replica: int, offset: int, now: int, start: int = 0, broker_epoch: int = 7) -> int:
        return leader.read(replica, offset, 1 << 20, isolation=FetchIsolation.LOG_END,
                           now_ms=now, current_leader_epoch=3, last_fetched_epoch=3,
                           replica_log_start_offset=start, replica_epoch=broker_epoch
                           ).high_watermark

    def idle(replica: int, offset: int, now: int, *, epoch: int = 3, last: int = 3,
             start: int = 0, broker_epoch: int = 7) -> tuple[int, int] | None:
        return leader.idle_follower_offsets(replica, offset, epoch, last, start,
                                            broker_epoch, now)

    assert idle(2, leo, NOW) is None  # never fetched: read
    fetch(2, leo, NOW)
    fetch(3, 1, NOW)
    assert leader.high_watermark == 1  # follower 3 holds it back
    assert idle(2, leo, NOW + 1) == (1, 0) == (fetch(2, leo, NOW + 1), 0)
    for declined in (idle(2, leo - 1, NOW), idle(2, leo, NOW, epoch=2), idle(2, leo, NOW, last=2),
                     idle(2, leo, NOW, start=1), idle(2, leo, NOW, broker_epoch=8),
                     idle(3, 1, NOW), idle(9, leo, NOW)):
        assert declined is None
    # follower 3 catches up through read: the high watermark moves, and the idle answer of
    # follower 2 carries it (it propagates to the followers)
    assert idle(3, leo, NOW) is None
    fetch(3, leo, NOW + 2)
    assert leader.high_watermark == leo
    assert idle(2, leo, NOW + 3) == (leo, 0)
    # only follower 2 keeps fetching (idle): past replica.lag.time.max.ms it stays in the ISR
    # and follower 3 leaves, as Kafka's lastCaughtUpTimeMs decides
    later = NOW + 60_000
    assert idle(2, leo, later) == (leo, 0)
    assert leader.followers[2].last_caught_up_ms == leader.followers[2].last_fetch_ms == later
    assert leader.wanted_isr(later + 1, 30_000, lambda r, e: True) == frozenset({1, 2})
    leader.update_isr(frozenset({1, 2}), later)
    assert idle(3, leo, later) is None  # outside the ISR: read (which may bring it back)
    leader.become_follower(4, 5, frozenset({1, 2}), (1, 2))
    assert idle(2, leo, later, epoch=-1) is None


def test_a_fetch_answer_larger_than_the_followers_segment_bytes(tmp_path: Path) -> None:
    """A follower whose segment.bytes is below the size of one fetch answer (the topic's
    segment.bytes lowered, the follower learning it first) appends it in runs that fit a
    segment instead of refusing it with RECORD_LIST_TOO_LARGE on every fetch (a stalled
    follower). Found by test_replication_machine below."""
    from dataclasses import replace

    lead = open_partition(tmp_path / "n1", 1)
    fol = Partition(PartitionLog.open(tmp_path / "n2" / "t-0", replace(CFG, segment_bytes=400),
                                      NOW), 2)
    lead.become_leader(4, frozenset({1, 2}), (1, 2), NOW)
    fol.become_follower(1, 4, frozenset({1, 2}), (1, 2))
    for n in (3, 1, 5, 2, 4, 3, 2, 1):
        produce(lead, n)
    data = bytearray(follower_fetch(lead, 2, 0))
    assert len(data) > 400 and len(iter_headers(data)) == 8
    info = fol.append_as_follower(data, iter_headers(data), now_ms=NOW)
    assert (info.first_offset, info.last_offset) == (0, 20)
    assert fol.log_end_offset == lead.log_end_offset == 21
    assert len(fol.log.segments) > 1
    fol.become_leader(5, frozenset({2}), (1, 2), NOW)
    got = b"".join(r.records.read_bytes() for r in _read_all(fol))
    assert got == bytes(data)
    lead.log.close()
    fol.log.close()


def _read_all(p: Partition) -> list:  # type: ignore[type-arg]
    out, offset = [], 0
    while offset < p.log_end_offset:
        r = p.read(-1, offset, 1 << 20, isolation=FetchIsolation.LOG_END, now_ms=NOW)
        assert r.records is not None
        out.append(r)
        offset = iter_headers(bytearray(r.records.read_bytes()))[-1][1].last_offset + 1
    return out
