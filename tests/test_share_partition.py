"""groups/share_partition.py: unit cases and a Hypothesis state machine of one share
partition (produce/fetch/ack/release/reject/timeout/member leaving/restart) against a model
that keeps one state per offset."""

from __future__ import annotations

from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from groups.share_partition import (
    AckType,
    AcquiredRange,
    BatchInfo,
    RecordState,
    ShareLimits,
    SharePartition,
    StateBatch,
)
from protocol.errors import ErrorCode

A, Q, K, X = (RecordState.AVAILABLE, RecordState.ACQUIRED, RecordState.ACKNOWLEDGED,
              RecordState.ARCHIVED)


def batches(*sizes: int, start: int = 0) -> list[BatchInfo]:
    out, off = [], start
    for n in sizes:
        out.append(BatchInfo(off, off + n - 1))
        off += n
    return out


def test_acquire_whole_batches_then_ack() -> None:
    sp = SharePartition(0, ShareLimits(record_lock_duration_ms=1000, delivery_count_limit=3))
    got = sp.acquire("m1", batches(3, 3, 3), 4, now_ms=0)
    assert got == [AcquiredRange(0, 5, 1)]  # the batch crossing max_records is taken whole
    assert sp.end_offset == 6 and sp.next_fetch_offset() == 6
    got2 = sp.acquire("m2", batches(3, start=6), 10, now_ms=0)
    assert got2 == [AcquiredRange(6, 8, 1)]
    assert sp.acknowledge("m2", 0, 0, [1], 0) == ErrorCode.INVALID_RECORD_STATE
    assert sp.acknowledge("m1", 0, 2, [1], 0) == ErrorCode.NONE
    assert sp.start_offset == 3
    assert sp.acknowledge("m1", 3, 5, [1, 2, 3], 0) == ErrorCode.NONE
    assert sp.state_of(4) == (A, 1) and sp.state_of(5) == (X, 1)
    assert sp.start_offset == 4 and sp.next_fetch_offset() == 4
    assert sp.acquire("m3", batches(3, start=3), 10, now_ms=0) == [AcquiredRange(4, 4, 2)]
    assert sp.acknowledge("m1", 4, 4, [1], 0) == ErrorCode.INVALID_RECORD_STATE


def test_strict_record_limit_splits_a_batch() -> None:
    sp = SharePartition(0)
    assert sp.acquire("m", batches(5), 2, 0, strict=True) == [AcquiredRange(0, 1, 1)]
    assert sp.end_offset == 5 and sp.next_fetch_offset() == 2
    assert sp.acquire("m", batches(5), 2, 0, strict=True) == [AcquiredRange(2, 3, 1)]


def test_lock_timeout_and_delivery_limit() -> None:
    sp = SharePartition(0, ShareLimits(record_lock_duration_ms=100, delivery_count_limit=2))
    assert sp.acquire("m", batches(2), 10, now_ms=0) == [AcquiredRange(0, 1, 1)]
    assert sp.next_deadline_ms() == 100
    assert sp.on_timer(99) == 0
    assert sp.on_timer(100) == 1
    assert sp.state_of(0) == (A, 1)
    assert sp.acquire("n", batches(2), 10, now_ms=100) == [AcquiredRange(0, 1, 2)]
    sp.on_timer(200)
    assert sp.start_offset == 2 and sp.exhausted == [(0, 1, 2)] and sp.dead == []


def test_release_member_and_reject() -> None:
    sp = SharePartition(10)
    sp.acquire("a", batches(4, start=10), 10, 0)
    assert sp.acknowledge("a", 12, 12, [3], 0) == ErrorCode.NONE
    assert sp.release_member("a") == 2  # [10,11] and [13,13]
    assert [(f, last, s) for f, last, s, _c, _o in sp.ranges()] == [
        (10, 11, A), (12, 12, X), (13, 13, A)]
    assert sp.dead == [(12, 12, 1)]


def test_bad_ack_shapes() -> None:
    sp = SharePartition(0)
    sp.acquire("a", batches(3), 10, 0)
    assert sp.acknowledge("a", 0, 2, [1, 1], 0) == ErrorCode.INVALID_REQUEST
    assert sp.acknowledge("a", 0, 2, [9], 0) == ErrorCode.INVALID_REQUEST
    assert sp.acknowledge("a", 2, 0, [1], 0) == ErrorCode.INVALID_REQUEST
    assert sp.acknowledge("a", 0, 5, [1], 0) == ErrorCode.INVALID_RECORD_STATE


def test_read_committed_archives_aborted_records() -> None:
    """As Kafka 4.3.1 (compat scenario share_limits_and_transactions): aborted data archived,
    control batches acquired like data."""
    sp = SharePartition(0)
    log = [
        BatchInfo(0, 1, producer_id=7, transactional=True),
        BatchInfo(2, 2, producer_id=8),
        BatchInfo(3, 3, producer_id=7, transactional=True, control=True),
        BatchInfo(4, 5, producer_id=9, transactional=True),
        BatchInfo(6, 6, producer_id=9, transactional=True, control=True),
    ]
    got = sp.acquire("m", log, 100, 0, aborted=[(7, 0)])
    assert got == [AcquiredRange(2, 6, 1)]
    assert sp.state_of(0) is None and sp.start_offset == 2  # aborted, archived, passed
    assert sp.acquire("n", log, 100, 0) == []  # read_uncommitted: nothing left


def test_hold_keeps_released_records_out_of_the_same_fetch() -> None:
    sp = SharePartition(0)
    sp.acquire("m", batches(2, 1), 1, 0)
    assert sp.acknowledge("m", 0, 1, [2], 0) == ErrorCode.NONE
    assert sp.acquire("m", batches(2, 1), 1, 0, hold=[(0, 1)]) == [AcquiredRange(2, 2, 1)]
    assert sp.acquire("m", batches(2, 1), 1, 0) == [AcquiredRange(0, 1, 2)]


def test_log_start_passing_the_start_offset() -> None:
    sp = SharePartition(0)
    sp.acquire("m", batches(3, 3), 10, 0)
    assert sp.move_start(4) and sp.start_offset == 4 and sp.end_offset == 6
    assert sp.state_of(4) == (Q, 1) and sp.state_of(3) is None
    assert not sp.move_start(2)
    assert sp.move_start(9) and (sp.start_offset, sp.end_offset, sp.ranges()) == (9, 9, [])


def test_max_record_locks() -> None:
    sp = SharePartition(0, ShareLimits(max_record_locks=4))
    assert sp.acquire("m", batches(3, 3, 3), 100, 0) == [AcquiredRange(0, 5, 1)]
    assert sp.acquire("m", batches(3, start=6), 100, 0) == []
    assert sp.has_available(9) is False
    sp.acknowledge("m", 0, 2, [1], 0)
    assert sp.has_available(9) is True


def test_load_from_state_batches() -> None:
    sp = SharePartition.load(5, [StateBatch(7, 8, 2, 1), StateBatch(9, 9, 0, 3)])
    assert sp.start_offset == 5 and sp.end_offset == 10
    assert sp.state_of(5) == (A, 0) and sp.state_of(7) == (K, 1) and sp.state_of(9) == (A, 3)
    assert sp.state_batches() == [StateBatch(7, 8, 2, 1), StateBatch(9, 9, 0, 3)]
    done = SharePartition.load(0, [StateBatch(0, 3, 2, 1)])
    assert done.start_offset == 4 and done.end_offset == 4


# ---- state machine ----------------------------------------------------------------------------
MEMBERS = ["m1", "m2", "m3"]
LOCK_MS = 100
LIMIT = 3
LOCKS = 12


class Model:
    """One (state, count, owner, deadline) per in-flight offset."""

    def __init__(self) -> None:
        self.start = 0
        self.end = 0
        self.recs: dict[int, list[Any]] = {}

    def advance(self) -> None:
        while self.start < self.end and self.recs[self.start][0] in (K, X):
            del self.recs[self.start]
            self.start += 1

    def unlock(self, o: int) -> None:
        r = self.recs[o]
        r[0] = X if r[1] >= LIMIT else A
        r[2], r[3] = None, -1


class SharePartitionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.sp = SharePartition(0, ShareLimits(LOCK_MS, LIMIT, LOCKS))
        self.m = Model()
        self.log: list[BatchInfo] = []
        self.aborted: list[tuple[int, int]] = []
        self.dead_offsets: set[int] = set()
        self.now = 0
        self.next_pid = 100

    def _leo(self) -> int:
        return self.log[-1].last_offset + 1 if self.log else 0

    @rule(n=st.integers(1, 5))
    def produce(self, n: int) -> None:
        leo = self._leo()
        self.log.append(BatchInfo(leo, leo + n - 1))

    @rule(n=st.integers(1, 3))
    def produce_aborted_txn(self, n: int) -> None:
        leo, pid = self._leo(), self.next_pid
        self.next_pid += 1
        self.log.append(BatchInfo(leo, leo + n - 1, pid, True))
        self.log.append(BatchInfo(leo + n, leo + n, pid, True, control=True))
        self.aborted.append((pid, leo))
        self.dead_offsets.update(range(leo, leo + n))  # the marker itself is delivered

    @rule(member=st.sampled_from(MEMBERS), max_records=st.integers(1, 8),
          nbatches=st.integers(1, 4), strict=st.booleans(), data=st.data())
    def fetch(self, member: str, max_records: int, nbatches: int, strict: bool,
              data: st.DataObject) -> None:
        start = self.sp.next_fetch_offset()
        read = [b for b in self.log if b.last_offset >= start][:nbatches]
        old_end = self.m.end
        before = {o: list(r) for o, r in self.m.recs.items()}
        hold: list[tuple[int, int]] = []
        if self.m.end > self.m.start and data.draw(st.booleans()):
            lo = data.draw(st.integers(self.m.start, self.m.end - 1))
            hold = [(lo, data.draw(st.integers(lo, self.m.end - 1)))]
        got = self.sp.acquire(member, read, max_records, self.now, strict=strict,
                              aborted=self.aborted, hold=hold)
        total = sum(a.last_offset - a.first_offset + 1 for a in got)
        if strict:
            assert total <= max_records
        for a in got:
            for o in range(a.first_offset, a.last_offset + 1):
                assert o not in self.dead_offsets
                assert not any(h[0] <= o <= h[1] for h in hold) or o >= old_end
                prev = before.get(o)
                if o < old_end:
                    assert prev is not None and prev[0] == A, (o, prev)
                    assert a.delivery_count == prev[1] + 1
                else:
                    assert a.delivery_count == 1
                    assert o - self.m.start < LOCKS + 5  # new records only below the limit
                self.m.recs[o] = [Q, a.delivery_count, member, self.now + LOCK_MS]
        for o in range(old_end, self.sp.end_offset):
            if o not in self.m.recs:
                self.m.recs[o] = [X if o in self.dead_offsets else A, 0, None, -1]
        self.m.end = max(self.m.end, self.sp.end_offset)
        if not got and read:
            # liveness: nothing acquired only when nothing could be
            avail = [o for o in range(start, self.m.end) if before.get(o, [None])[0] == A
                     and o not in self.dead_offsets and not any(h[0] <= o <= h[1] for h in hold)]
            assert not avail or avail[0] > read[-1].last_offset, (avail, read)
        self.m.advance()

    @rule(member=st.sampled_from(MEMBERS), data=st.data())
    def ack(self, member: str, data: st.DataObject) -> None:
        if self.m.end == self.m.start:
            return
        lo = data.draw(st.integers(self.m.start, self.m.end - 1))
        hi = data.draw(st.integers(lo, min(lo + 6, self.m.end - 1)))
        per = data.draw(st.booleans())
        kinds = st.sampled_from([1, 2, 3])
        types = data.draw(st.lists(kinds, min_size=hi - lo + 1, max_size=hi - lo + 1)) \
            if per else [data.draw(kinds)]
        ok = all(self.m.recs[o][0] == Q and self.m.recs[o][2] == member
                 for o in range(lo, hi + 1))
        code = self.sp.acknowledge(member, lo, hi, types, self.now)
        assert code == (ErrorCode.NONE if ok else ErrorCode.INVALID_RECORD_STATE)
        if not ok:
            return
        for i, o in enumerate(range(lo, hi + 1)):
            t = types[i] if per else types[0]
            r = self.m.recs[o]
            if t == AckType.ACCEPT:
                r[0], r[2], r[3] = K, None, -1
            elif t == AckType.REJECT:
                r[0], r[2], r[3] = X, None, -1
            else:
                self.m.unlock(o)
        self.m.advance()

    @rule(ms=st.integers(1, 150))
    def tick(self, ms: int) -> None:
        self.now += ms
        self.sp.on_timer(self.now)
        for o, r in self.m.recs.items():
            if r[0] == Q and r[3] <= self.now:
                self.m.unlock(o)
        self.m.advance()

    @rule(member=st.sampled_from(MEMBERS))
    def member_leaves(self, member: str) -> None:
        self.sp.release_member(member)
        for o, r in self.m.recs.items():
            if r[0] == Q and r[2] == member:
                self.m.unlock(o)
        self.m.advance()

    @rule()
    def restart(self) -> None:
        snap = self.sp.state_batches()
        self.sp = SharePartition.load(self.sp.start_offset, snap, self.sp.limits)
        for r in self.m.recs.values():
            if r[0] == Q:
                r[0], r[2], r[3] = A, None, -1
        # untouched trailing records are not persisted: SPEO falls back to the last kept one
        while self.m.end > self.m.start and self.m.recs[self.m.end - 1][0] == A \
                and self.m.recs[self.m.end - 1][1] == 0:
            del self.m.recs[self.m.end - 1]
            self.m.end -= 1
        self.m.advance()

    @invariant()
    def agrees(self) -> None:
        assert self.sp.start_offset == self.m.start
        assert self.sp.end_offset == self.m.end
        for o in range(self.m.start, self.m.end):
            r = self.m.recs[o]
            assert self.sp.state_of(o) == (r[0], r[1]), (o, r, self.sp.ranges())
        owners = {(f, last): (s, own) for f, last, s, _c, own in self.sp.ranges()}
        for (f, last), (s, own) in owners.items():
            assert (s == Q) == (own is not None)
            assert all(self.m.recs[o][2] == own for o in range(f, last + 1))


TestSharePartitionMachine = SharePartitionMachine.TestCase
TestSharePartitionMachine.settings = settings(max_examples=300, stateful_step_count=40,
                                              deadline=None)
