"""The sans-I/O transaction coordinator (txn/): every state x input, replay, Hypothesis.

The expectations follow Kafka 4.3's TransactionCoordinator with transaction version 1 (what a
broker with ``transaction.version`` 0/1 finalized runs). Each test drives a TxnShard the way
the runtime does: an operation returns records, the records are "appended" (kept in a list)
and replayed; a shard rebuilt from that list must equal the live one (restart = replay).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from protocol.coordinator import CoordinatorRecord
from protocol.errors import ErrorCode as E
from txn.coordinator import (
    NEED_PRODUCER_ID,
    InitResult,
    TxnConfig,
    TxnShard,
    state_names_to_filter,
)
from txn.records import TxnMetadata, decode, encode, tombstone
from txn.state import VALID_PREVIOUS, IllegalTransition, TxnState, check_transition, from_name

S = TxnState
TID = "tx-1"
T0 = 1_000_000
CFG = TxnConfig(max_timeout_ms=60_000, id_expiration_ms=100_000, abort_interval_ms=1_000,
                remove_expired_interval_ms=5_000)


class Log:
    """The __transaction_state partition: records appended and replayed in order."""

    def __init__(self, shard: TxnShard) -> None:
        self.shard = shard
        self.records: list[CoordinatorRecord] = []

    def apply(self, records: list[CoordinatorRecord]) -> None:
        for r in records:
            self.shard.replay(len(self.records), -1, -1, r)
            self.records.append(r)

    def run(self, result: tuple[list[CoordinatorRecord], Any]) -> Any:
        records, reply = result
        self.apply(records)
        return reply

    def rebuilt(self) -> TxnShard:
        fresh = TxnShard(self.shard.partition, self.shard.config)
        for i, r in enumerate(self.records):
            fresh.replay(i, -1, -1, r)
        return fresh


def persisted(shard: TxnShard) -> dict[str, tuple[object, ...]]:
    return {tid: m.persisted() for tid, m in shard.txns.items()}


def new_log() -> Log:
    return Log(TxnShard(7, CFG))


def init(log: Log, tid: str = TID, timeout: int = 30_000, now: int = T0,
         expected: tuple[int, int] | None = None, pid: int | None = 1000) -> InitResult:
    res = log.run(log.shard.init_producer_id(tid, timeout, now, expected=expected))
    if res is NEED_PRODUCER_ID:
        assert pid is not None
        res = log.run(log.shard.init_producer_id(tid, timeout, now, expected=expected,
                                                 new_producer_id=pid))
    assert isinstance(res, InitResult)
    return res


def finish_markers(log: Log, now: int = T0) -> None:
    for job in log.shard.marker_jobs():
        records, ok = log.shard.complete(job, now)
        assert ok
        log.apply(records)


# ---------------------------------------------------------------------------------------------
# the table


def test_transition_table_is_kafkas() -> None:
    assert VALID_PREVIOUS[S.EMPTY] == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    assert VALID_PREVIOUS[S.ONGOING] == {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    assert VALID_PREVIOUS[S.PREPARE_COMMIT] == {S.ONGOING}
    assert VALID_PREVIOUS[S.COMPLETE_COMMIT] == {S.PREPARE_COMMIT}
    assert VALID_PREVIOUS[S.COMPLETE_ABORT] == {S.PREPARE_ABORT}
    assert VALID_PREVIOUS[S.DEAD] == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    assert VALID_PREVIOUS[S.PREPARE_EPOCH_FENCE] == {S.ONGOING}
    assert S.PREPARE_EPOCH_FENCE in VALID_PREVIOUS[S.PREPARE_ABORT]
    names = [s.kafka_name for s in S]
    assert names == ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
                     "CompleteAbort", "Dead", "PrepareEpochFence"]
    assert all(from_name(n) is s for n, s in zip(names, S, strict=True))
    check_transition(None, S.EMPTY)
    with pytest.raises(IllegalTransition):
        check_transition(None, S.ONGOING)
    with pytest.raises(IllegalTransition):
        check_transition(S.EMPTY, S.PREPARE_COMMIT)


# ---------------------------------------------------------------------------------------------
# flows


def test_commit_flow_and_restart_equals_replay() -> None:
    log = new_log()
    assert init(log) == InitResult(E.NONE, 1000, 0)
    m = log.shard.txns[TID]
    assert (m.state, m.producer_epoch, m.timeout_ms, m.start_ms) == (S.EMPTY, 0, 30_000, -1)
    assert log.run(log.shard.add_partitions(TID, 1000, 0, [("a", 0), ("a", 1)], T0 + 1)) == E.NONE
    assert log.shard.txns[TID].state is S.ONGOING and log.shard.txns[TID].start_ms == T0 + 1
    # already in the transaction: no record
    n = len(log.records)
    assert log.run(log.shard.add_partitions(TID, 1000, 0, [("a", 1)], T0 + 2)) == E.NONE
    assert len(log.records) == n
    assert log.run(log.shard.add_partitions(TID, 1000, 0, [("b", 0)], T0 + 3)) == E.NONE
    assert log.shard.txns[TID].start_ms == T0 + 1  # the start does not move
    assert log.run(log.shard.end_txn(TID, 1000, 0, True, T0 + 4)) == E.NONE
    assert log.shard.txns[TID].state is S.PREPARE_COMMIT
    (job,) = log.shard.marker_jobs()
    assert job.commit and job.partitions == (("a", 0), ("a", 1), ("b", 0))
    assert log.shard.marker_jobs() == []  # in flight
    # while the markers are written: CONCURRENT_TRANSACTIONS for every change
    assert log.run(log.shard.end_txn(TID, 1000, 0, True, T0)) == E.CONCURRENT_TRANSACTIONS
    assert log.run(log.shard.end_txn(TID, 1000, 0, False, T0)) == E.CONCURRENT_TRANSACTIONS
    assert log.run(log.shard.add_partitions(TID, 1000, 0, [("c", 0)], T0)) == E.CONCURRENT_TRANSACTIONS
    assert init(log).error == E.CONCURRENT_TRANSACTIONS
    # a restart in the middle: the rebuilt shard has the job due again
    rebuilt = log.rebuilt()
    assert persisted(rebuilt) == persisted(log.shard)
    assert [j.transactional_id for j in rebuilt.marker_jobs()] == [TID]
    log.apply(log.shard.complete(job, T0 + 5)[0])
    m = log.shard.txns[TID]
    assert (m.state, m.partitions, m.start_ms, m.last_update_ms) == (
        S.COMPLETE_COMMIT, frozenset(), T0 + 1, T0 + 5)
    # retried EndTxn(commit) after completion: NONE; abort: INVALID_TXN_STATE
    assert log.run(log.shard.end_txn(TID, 1000, 0, True, T0)) == E.NONE
    assert log.run(log.shard.end_txn(TID, 1000, 0, False, T0)) == E.INVALID_TXN_STATE
    # next transaction straight from CompleteCommit
    assert log.run(log.shard.add_partitions(TID, 1000, 0, [("a", 0)], T0 + 9)) == E.NONE
    assert log.shard.txns[TID].start_ms == T0 + 9
    assert persisted(log.rebuilt()) == persisted(log.shard)


def test_second_instance_fences_the_first() -> None:
    log = new_log()
    init(log)
    log.run(log.shard.add_partitions(TID, 1000, 0, [("a", 0)], T0))
    # a new producer with the same transactional id while a transaction is open:
    # the coordinator aborts it with epoch 1 and answers CONCURRENT_TRANSACTIONS
    assert init(log).error == E.CONCURRENT_TRANSACTIONS
    m = log.shard.txns[TID]
    assert (m.state, m.producer_epoch) == (S.PREPARE_ABORT, 1)
    (job,) = log.shard.marker_jobs()
    assert (job.commit, job.producer_epoch, job.partitions) == (False, 1, (("a", 0),))
    assert init(log).error == E.CONCURRENT_TRANSACTIONS  # markers not written yet
    log.apply(log.shard.complete(job, T0)[0])
    assert init(log) == InitResult(E.NONE, 1000, 2)  # the retry bumps once more
    # the old instance (epoch 0) is fenced everywhere
    assert log.run(log.shard.add_partitions(TID, 1000, 0, [("a", 0)], T0)) == E.PRODUCER_FENCED
    assert log.run(log.shard.end_txn(TID, 1000, 0, True, T0)) == E.PRODUCER_FENCED
    assert init(log, expected=(1000, 0)).error == E.PRODUCER_FENCED
    assert persisted(log.rebuilt()) == persisted(log.shard)


def test_timeout_aborts_with_an_epoch_fence() -> None:
    log = new_log()
    init(log, timeout=5_000)
    log.shard.on_loaded(T0)
    log.run(log.shard.add_partitions(TID, 1000, 0, [("a", 0)], T0))
    assert log.shard.next_deadline_ms() == T0 + CFG.abort_interval_ms
    log.apply(log.shard.on_timer(T0 + 5_000))  # start + timeout is not < now yet
    assert log.shard.txns[TID].state is S.ONGOING
    log.apply(log.shard.on_timer(T0 + 6_000))
    m = log.shard.txns[TID]
    assert (m.state, m.producer_epoch) == (S.PREPARE_ABORT, 1)
    finish_markers(log)
    assert log.shard.txns[TID].state is S.COMPLETE_ABORT
    assert log.run(log.shard.end_txn(TID, 1000, 0, True, T0)) == E.PRODUCER_FENCED
    assert log.run(log.shard.add_partitions(TID, 1000, 0, [("a", 0)], T0)) == E.PRODUCER_FENCED
    # the same producer recovering with its old epoch (KIP-360) is fenced too
    assert init(log, expected=(1000, 0)).error == E.PRODUCER_FENCED


def test_transactional_id_expiration() -> None:
    log = new_log()
    init(log)
    log.shard.on_loaded(T0)
    log.apply(log.shard.on_timer(T0 + CFG.remove_expired_interval_ms))
    assert TID in log.shard.txns
    log.apply(log.shard.on_timer(T0 + CFG.id_expiration_ms + 1))
    assert TID not in log.shard.txns
    assert log.records[-1] == tombstone(TID) and log.records[-1].value is None
    assert log.shard.describe(TID).error == E.TRANSACTIONAL_ID_NOT_FOUND
    assert log.rebuilt().txns == {}
    # a new instance gets a fresh producer id
    assert init(log, pid=2000) == InitResult(E.NONE, 2000, 0)


def test_timeout_validation_and_bad_requests() -> None:
    log = new_log()
    for t in (0, -1, CFG.max_timeout_ms + 1):
        assert init(log, timeout=t).error == E.INVALID_TRANSACTION_TIMEOUT
    assert init(log, timeout=CFG.max_timeout_ms).error == E.NONE
    assert init(log, tid="").error == E.INVALID_REQUEST
    assert log.run(log.shard.add_partitions("", 1, 0, [], T0)) == E.INVALID_REQUEST
    assert log.run(log.shard.add_partitions("nope", 1, 0, [("a", 0)], T0)) == E.INVALID_PRODUCER_ID_MAPPING
    assert log.run(log.shard.add_partitions(TID, 999, 0, [("a", 0)], T0)) == E.INVALID_PRODUCER_ID_MAPPING
    assert log.run(log.shard.end_txn("nope", 1, 0, True, T0)) == E.INVALID_PRODUCER_ID_MAPPING
    assert log.run(log.shard.end_txn(TID, 1000, 0, True, T0)) == E.INVALID_TXN_STATE  # Empty


def test_kip360_resume_and_epoch_exhaustion() -> None:
    log = new_log()
    init(log)  # epoch 0
    # resume with the current epoch: bumped, last epoch remembered
    assert init(log, expected=(1000, 0)) == InitResult(E.NONE, 1000, 1)
    # the response was lost: a retry with the previous epoch gets the same epoch back
    assert init(log, expected=(1000, 0)) == InitResult(E.NONE, 1000, 1)
    assert init(log, expected=(1000, 5)).error == E.PRODUCER_FENCED
    assert init(log, expected=(4242, 1)).error == E.PRODUCER_FENCED
    # an exhausted epoch rotates the producer id
    m = log.shard.txns[TID]
    log.shard.txns[TID] = replace(m, producer_epoch=32766)
    res = init(log, pid=5000)
    assert res == InitResult(E.NONE, 5000, 0)
    assert log.shard.txns[TID].prev_producer_id == 1000


def test_describe_and_list() -> None:
    log = new_log()
    init(log, "a", pid=1)
    init(log, "b", pid=2)
    log.run(log.shard.add_partitions("b", 2, 0, [("t", 1), ("t", 0), ("u", 3)], T0 + 10))
    d = log.shard.describe("b")
    assert d.error == E.NONE and d.state == "Ongoing" and d.start_ms == T0 + 10
    assert d.partitions == (("t", 0), ("t", 1), ("u", 3)) and d.timeout_ms == 30_000
    assert log.shard.describe("a").start_ms == -1
    assert log.shard.describe("").error == E.INVALID_REQUEST
    lst = log.shard.list_transactions
    assert sorted(lst([], [], T0)) == [("a", 1, "Empty"), ("b", 2, "Ongoing")]
    assert lst([S.ONGOING], [], T0) == [("b", 2, "Ongoing")]
    assert lst([], [1], T0) == [("a", 1, "Empty")]
    known, unknown = state_names_to_filter(["Ongoing", "Bogus"])
    assert known == [S.ONGOING] and unknown == ["Bogus"]
    # only unknown state names: nothing matches (Kafka)
    assert lst([], [], T0, any_state_filter=True) == []
    # duration: running longer than 5 s
    assert lst([], [], T0 + 12, duration_ms=5_000) == [("a", 1, "Empty")]
    assert sorted(lst([], [], T0 + 10_000, duration_ms=5_000)) == [("a", 1, "Empty"), ("b", 2, "Ongoing")]
    import re
    assert lst([], [], T0, pattern=re.compile("b.*")) == [("b", 2, "Ongoing")]


def test_record_format() -> None:
    m = TxnMetadata("x", 5, 1, 60000, S.ONGOING, frozenset({("t", 1), ("t", 0)}), 9, 10)
    rec = encode(m)
    assert rec.key == b"\x00\x00" + b"\x00\x01x"  # record type 0 + TransactionLogKey
    # version 0: id, epoch, timeout, status, [topic, [partitions]], last update, start
    assert rec.value == bytes.fromhex(
        "0000" "0000000000000005" "0001" "0000ea60" "01"
        "00000001" "00017400000002" "00000000" "00000001"
        "000000000000000a" "0000000000000009")
    assert decode(rec) == ("x", m)
    empty = replace(m, state=S.EMPTY, partitions=frozenset())
    assert encode(empty).value[17:21] == b"\xff\xff\xff\xff"  # null partitions in Empty
    assert decode(encode(m, 1))[1] == m


# ---------------------------------------------------------------------------------------------
# every persisted state x every input

PERSISTED = [S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT, S.COMPLETE_COMMIT,
             S.COMPLETE_ABORT]

# (input) -> {state: (error, resulting state, epoch after)}; epoch 3 before, pid 1000
C, F, N, ITS, IPM = (E.CONCURRENT_TRANSACTIONS, E.PRODUCER_FENCED, E.NONE, E.INVALID_TXN_STATE,
                     E.INVALID_PRODUCER_ID_MAPPING)
EXPECT: dict[str, dict[TxnState, tuple[E, TxnState, int]]] = {
    "init": {S.EMPTY: (N, S.EMPTY, 4), S.ONGOING: (C, S.PREPARE_ABORT, 4),
             S.PREPARE_COMMIT: (C, S.PREPARE_COMMIT, 3), S.PREPARE_ABORT: (C, S.PREPARE_ABORT, 3),
             S.COMPLETE_COMMIT: (N, S.EMPTY, 4), S.COMPLETE_ABORT: (N, S.EMPTY, 4)},
    "init_expected_current": {S.EMPTY: (N, S.EMPTY, 4), S.ONGOING: (C, S.PREPARE_ABORT, 4),
                              S.PREPARE_COMMIT: (C, S.PREPARE_COMMIT, 3),
                              S.PREPARE_ABORT: (C, S.PREPARE_ABORT, 3),
                              S.COMPLETE_COMMIT: (N, S.EMPTY, 4), S.COMPLETE_ABORT: (N, S.EMPTY, 4)},
    "init_expected_other_pid": {s: (F, s, 3) for s in PERSISTED},
    "add_new": {S.EMPTY: (N, S.ONGOING, 3), S.ONGOING: (N, S.ONGOING, 3),
                S.PREPARE_COMMIT: (C, S.PREPARE_COMMIT, 3), S.PREPARE_ABORT: (C, S.PREPARE_ABORT, 3),
                S.COMPLETE_COMMIT: (N, S.ONGOING, 3), S.COMPLETE_ABORT: (N, S.ONGOING, 3)},
    "add_old_epoch": {s: (F, s, 3) for s in PERSISTED},
    "add_other_pid": {s: (IPM, s, 3) for s in PERSISTED},
    "commit": {S.EMPTY: (ITS, S.EMPTY, 3), S.ONGOING: (N, S.PREPARE_COMMIT, 3),
               S.PREPARE_COMMIT: (C, S.PREPARE_COMMIT, 3), S.PREPARE_ABORT: (C, S.PREPARE_ABORT, 3),
               S.COMPLETE_COMMIT: (N, S.COMPLETE_COMMIT, 3),
               S.COMPLETE_ABORT: (ITS, S.COMPLETE_ABORT, 3)},
    "abort": {S.EMPTY: (ITS, S.EMPTY, 3), S.ONGOING: (N, S.PREPARE_ABORT, 3),
              S.PREPARE_COMMIT: (C, S.PREPARE_COMMIT, 3), S.PREPARE_ABORT: (C, S.PREPARE_ABORT, 3),
              S.COMPLETE_COMMIT: (ITS, S.COMPLETE_COMMIT, 3),
              S.COMPLETE_ABORT: (N, S.COMPLETE_ABORT, 3)},
    "end_old_epoch": {s: (F, s, 3) for s in PERSISTED},
    "timeout": {S.EMPTY: (N, S.EMPTY, 3), S.ONGOING: (N, S.PREPARE_ABORT, 4),
                S.PREPARE_COMMIT: (N, S.PREPARE_COMMIT, 3), S.PREPARE_ABORT: (N, S.PREPARE_ABORT, 3),
                S.COMPLETE_COMMIT: (N, S.COMPLETE_COMMIT, 3),
                S.COMPLETE_ABORT: (N, S.COMPLETE_ABORT, 3)},
    "expire": {S.EMPTY: (N, S.DEAD, 3), S.ONGOING: (N, S.ONGOING, 3),
               S.PREPARE_COMMIT: (N, S.PREPARE_COMMIT, 3), S.PREPARE_ABORT: (N, S.PREPARE_ABORT, 3),
               S.COMPLETE_COMMIT: (N, S.DEAD, 3), S.COMPLETE_ABORT: (N, S.DEAD, 3)},
    "markers_done": {S.EMPTY: (N, S.EMPTY, 3), S.ONGOING: (N, S.ONGOING, 3),
                     S.PREPARE_COMMIT: (N, S.COMPLETE_COMMIT, 3),
                     S.PREPARE_ABORT: (N, S.COMPLETE_ABORT, 3),
                     S.COMPLETE_COMMIT: (N, S.COMPLETE_COMMIT, 3),
                     S.COMPLETE_ABORT: (N, S.COMPLETE_ABORT, 3)},
}


def shard_in(state: TxnState) -> Log:
    log = new_log()
    parts = frozenset() if state is S.EMPTY else frozenset({("a", 0)})
    start = -1 if state is S.EMPTY else T0
    log.apply([encode(TxnMetadata(TID, 1000, 3, 30_000, state, parts, start, T0))])
    return log


def do(log: Log, what: str) -> E:
    sh = log.shard
    late = T0 + 10**9
    if what == "init":
        return init(log).error
    if what == "init_expected_current":
        return init(log, expected=(1000, 3)).error
    if what == "init_expected_other_pid":
        return init(log, expected=(77, 3)).error
    if what == "add_new":
        return log.run(sh.add_partitions(TID, 1000, 3, [("b", 0)], T0 + 1))  # type: ignore[no-any-return]
    if what == "add_old_epoch":
        return log.run(sh.add_partitions(TID, 1000, 2, [("b", 0)], T0 + 1))  # type: ignore[no-any-return]
    if what == "add_other_pid":
        return log.run(sh.add_partitions(TID, 1001, 3, [("b", 0)], T0 + 1))  # type: ignore[no-any-return]
    if what in ("commit", "abort"):
        return log.run(sh.end_txn(TID, 1000, 3, what == "commit", T0 + 1))  # type: ignore[no-any-return]
    if what == "end_old_epoch":
        return log.run(sh.end_txn(TID, 1000, 2, True, T0 + 1))  # type: ignore[no-any-return]
    if what == "timeout":
        log.apply(sh.abort_timed_out(late))
        return E.NONE
    if what == "expire":
        log.apply(sh.expire(late))
        return E.NONE
    if what == "markers_done":
        for job in sh.marker_jobs():
            log.apply(sh.complete(job, T0 + 2)[0])
        return E.NONE
    raise AssertionError(what)


@pytest.mark.parametrize("what", sorted(EXPECT))
@pytest.mark.parametrize("state", PERSISTED, ids=lambda s: s.kafka_name)
def test_every_state_and_input(state: TxnState, what: str) -> None:
    log = shard_in(state)
    before = list(log.records)
    err, want_state, want_epoch = EXPECT[what][state]
    assert do(log, what) == err
    m = log.shard.txns.get(TID)
    if want_state is S.DEAD:
        assert m is None and log.records[-1] == tombstone(TID)
    else:
        assert m is not None
        assert (m.state, m.producer_epoch) == (want_state, want_epoch)
    # every emitted record is a legal transition, and replaying them rebuilds the live state
    prev = state
    for r in log.records[len(before):]:
        _, meta = decode(r)
        new = S.DEAD if meta is None else meta.state
        if not (prev is S.ONGOING and new is S.PREPARE_ABORT):
            check_transition(prev, new)
        prev = new
    assert persisted(log.rebuilt()) == persisted(log.shard)


# ---------------------------------------------------------------------------------------------
# random traffic


class CoordinatorMachine(RuleBasedStateMachine):
    """Random requests, timers, lost appends and restarts; the shard must stay consistent."""

    def __init__(self) -> None:
        super().__init__()
        self.log = new_log()
        self.now = T0
        self.next_pid = 100
        self.log.shard.on_loaded(self.now)
        self.max_epoch: dict[str, int] = {}

    def _pid(self) -> int:
        self.next_pid += 1
        return self.next_pid

    def _current(self, tid: str) -> tuple[int, int]:
        m = self.log.shard.txns.get(tid)
        return (m.producer_id, m.producer_epoch) if m else (1, 0)

    @rule(tid=st.sampled_from(["a", "b"]), resume=st.booleans(), timeout=st.integers(1, 70_000))
    def init(self, tid: str, resume: bool, timeout: int) -> None:
        expected = self._current(tid) if resume and tid in self.log.shard.txns else None
        res = self.log.run(self.log.shard.init_producer_id(tid, timeout, self.now, expected=expected))
        if res is NEED_PRODUCER_ID:
            res = self.log.run(self.log.shard.init_producer_id(
                tid, timeout, self.now, expected=expected, new_producer_id=self._pid()))
        assert isinstance(res, InitResult)
        if timeout > CFG.max_timeout_ms:
            assert res.error == E.INVALID_TRANSACTION_TIMEOUT
        if res.error == E.NONE:
            m = self.log.shard.txns[tid]
            assert (m.producer_id, m.producer_epoch, m.state) == (res.producer_id, res.producer_epoch, S.EMPTY)

    @rule(tid=st.sampled_from(["a", "b"]), stale=st.booleans(),
          parts=st.lists(st.tuples(st.sampled_from("xy"), st.integers(0, 2)), min_size=1, max_size=3))
    def add(self, tid: str, stale: bool, parts: list[tuple[str, int]]) -> None:
        pid, epoch = self._current(tid)
        err = self.log.run(self.log.shard.add_partitions(tid, pid, epoch - stale, parts, self.now))
        if err == E.NONE:
            m = self.log.shard.txns[tid]
            assert m.state is S.ONGOING and set(parts) <= m.partitions
        elif stale and tid in self.log.shard.txns:
            assert err == E.PRODUCER_FENCED

    @rule(tid=st.sampled_from(["a", "b"]), commit=st.booleans())
    def end(self, tid: str, commit: bool) -> None:
        pid, epoch = self._current(tid)
        before = self.log.shard.txns.get(tid)
        err = self.log.run(self.log.shard.end_txn(tid, pid, epoch, commit, self.now))
        if before is not None and before.state is S.ONGOING:
            assert err == E.NONE
            assert self.log.shard.txns[tid].state is (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT)

    @rule(tid=st.sampled_from(["a", "b"]), commit=st.booleans())
    def end_v2(self, tid: str, commit: bool) -> None:
        """EndTxn v5 (transaction version 2): the Prepare record carries epoch + 1."""
        pid, epoch = self._current(tid)
        before = self.log.shard.txns.get(tid)
        res = self.log.run(self.log.shard.end_txn_v2(tid, pid, epoch, commit, self.now))
        if res is NEED_PRODUCER_ID:
            res = self.log.run(self.log.shard.end_txn_v2(
                tid, pid, epoch, commit, self.now, new_producer_id=self._pid()))
        assert isinstance(res, InitResult)
        if before is not None and before.state is S.ONGOING:
            assert res.error == E.NONE
            m = self.log.shard.txns[tid]
            assert m.state is (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT)
            assert m.producer_epoch == before.producer_epoch + 1

    @precondition(lambda self: any(m.state.is_prepare for m in self.log.shard.txns.values()))
    @rule(data=st.data(), version=st.sampled_from([0, 2]))
    def write_before_markers(self, data: st.DataObject, version: int) -> None:
        """Issue 11: EndTxn answered, its markers not written yet, and the client already
        writes its next transaction: with the epoch EndTxn returned (version 2: epoch + 1) or
        the same one (version 1). Neither an add nor a verification may succeed, so the write
        cannot join the transaction the pending markers will close."""
        shard = self.log.shard
        tid = data.draw(st.sampled_from(sorted(t for t, m in shard.txns.items()
                                               if m.state.is_prepare)))
        m = shard.txns[tid]
        part = data.draw(st.tuples(st.sampled_from("xy"), st.integers(0, 2)))
        err = self.log.run(shard.add_partitions(
            tid, m.producer_id, m.producer_epoch, [part], self.now, client_version=version))
        assert err == E.CONCURRENT_TRANSACTIONS
        assert shard.verify_partitions(tid, m.producer_id, m.producer_epoch, [part]) == {
            part: E.CONCURRENT_TRANSACTIONS}
        assert shard.txns[tid] == m

    @rule()
    def markers(self) -> None:
        for job in self.log.shard.marker_jobs():
            records, ok = self.log.shard.complete(job, self.now)
            assert ok
            self.log.apply(records)

    @rule(lost=st.booleans())
    def lost_append(self, lost: bool) -> None:
        """An operation whose append fails: its records never reach replay."""
        pid, epoch = self._current("a")
        records, _ = self.log.shard.add_partitions("a", pid, epoch, [("z", 9)], self.now)
        if not lost:
            self.log.apply(records)

    @rule(ms=st.integers(0, 40_000))
    def tick(self, ms: int) -> None:
        self.now += ms
        d = self.log.shard.next_deadline_ms()
        if d is not None and d <= self.now:
            self.log.apply(self.log.shard.on_timer(self.now))

    @precondition(lambda self: self.log.records)
    @rule()
    def restart(self) -> None:
        shard = self.log.rebuilt()
        shard.on_loaded(self.now)
        self.log.shard = shard

    @invariant()
    def consistent(self) -> None:
        shard = self.log.shard
        assert persisted(self.log.rebuilt()) == persisted(shard)
        assert shard.irregular_replays == 0
        for tid, m in shard.txns.items():
            assert m.state in PERSISTED
            if m.state is S.EMPTY:
                assert m.start_ms == -1 and not m.partitions
            elif m.state.is_complete:
                assert not m.partitions and m.start_ms >= T0
            elif m.state.is_prepare and m.client_version >= 2:
                assert m.start_ms >= T0  # version 2 may abort with nothing added
            else:
                assert m.partitions and m.start_ms >= T0
            key = f"{tid}/{m.producer_id}"
            assert m.producer_epoch >= self.max_epoch.get(key, -1)
            self.max_epoch[key] = m.producer_epoch


CoordinatorMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
test_coordinator_machine = CoordinatorMachine.TestCase


# ---------------------------------------------------------------------------------------------
# transaction version 2 (EndTxn v5, implicit adds)


def v2_end(log: Log, commit: bool, epoch: int, pid: int = 1000, new_pid: int | None = None) -> InitResult:
    res = log.run(log.shard.end_txn_v2(TID, pid, epoch, commit, T0 + 5, new_pid))
    assert isinstance(res, InitResult)
    return res


def test_v2_end_bumps_the_epoch_and_retries_are_recognised() -> None:
    log = new_log()
    init(log)  # epoch 0
    assert log.run(log.shard.add_partitions(TID, 1000, 0, [("a", 0)], T0, client_version=2)) == E.NONE
    assert v2_end(log, True, 0) == InitResult(E.NONE, 1000, 1)
    m = log.shard.txns[TID]
    assert (m.state, m.producer_epoch, m.last_producer_epoch, m.client_version) == (S.PREPARE_COMMIT, 1, 0, 2)
    (job,) = log.shard.marker_jobs()
    assert job.producer_epoch == 1  # markers carry the bumped epoch
    assert v2_end(log, True, 0).error == E.CONCURRENT_TRANSACTIONS  # retry while markers go
    # the epoch the commit answered, before its markers are written: wait, not fenced
    # (Kafka checks the pending Complete state before the epoch, KAFKA-18464)
    assert v2_end(log, True, 1).error == E.CONCURRENT_TRANSACTIONS
    assert v2_end(log, False, 1).error == E.CONCURRENT_TRANSACTIONS
    log.apply(log.shard.complete(job, T0 + 6)[0])
    assert log.shard.txns[TID].state is S.COMPLETE_COMMIT
    assert v2_end(log, True, 0) == InitResult(E.NONE, 1000, 1)  # retry after completion
    assert v2_end(log, False, 0).error == E.INVALID_TXN_STATE
    assert v2_end(log, True, 1).error == E.INVALID_TXN_STATE
    # records are TransactionLogValue v1: the rebuilt shard keeps the client version
    rebuilt = log.rebuilt()
    assert rebuilt.txns[TID].client_version == 2 and persisted(rebuilt) == persisted(log.shard)
    # an abort with nothing added is allowed and bumps too (Kafka's table)
    assert v2_end(log, False, 1) == InitResult(E.NONE, 1000, 2)
    finish_markers(log)
    assert v2_end(log, False, 1) == InitResult(E.NONE, 1000, 2)  # retry
    assert v2_end(log, True, 2).error == E.INVALID_TXN_STATE


def test_v2_abort_at_the_epoch_a_commit_returned_waits_for_its_markers() -> None:
    """franz-go's GroupTransactSession: EndTxn(commit, e) answers e + 1 and a revoke sends
    EndTxn(abort, e + 1) at once. Kafka: CONCURRENT_TRANSACTIONS until the commit's markers are
    written, then the empty abort bumps to e + 2; never PRODUCER_FENCED."""
    log = new_log()
    init(log)
    for epoch in (0, 2, 4):
        assert log.run(log.shard.add_partitions(
            TID, 1000, epoch, [("a", 0)], T0, client_version=2)) == E.NONE
        assert v2_end(log, True, epoch) == InitResult(E.NONE, 1000, epoch + 1)
        assert v2_end(log, False, epoch + 1).error == E.CONCURRENT_TRANSACTIONS
        finish_markers(log)
        assert log.shard.txns[TID].state is S.COMPLETE_COMMIT
        assert v2_end(log, False, epoch + 1) == InitResult(E.NONE, 1000, epoch + 2)
        assert v2_end(log, False, epoch + 1).error == E.CONCURRENT_TRANSACTIONS  # its markers
        finish_markers(log)
        assert log.shard.txns[TID].state is S.COMPLETE_ABORT
    # a producer id that is not the transaction's is still told so first
    assert v2_end(log, False, 6, pid=999).error == E.INVALID_PRODUCER_ID_MAPPING


@pytest.mark.parametrize(("state", "commit", "retry", "want"), [
    (S.EMPTY, False, True, E.PRODUCER_FENCED), (S.EMPTY, False, False, "bump"),
    (S.EMPTY, True, True, E.PRODUCER_FENCED), (S.EMPTY, True, False, E.INVALID_TXN_STATE),
    (S.COMPLETE_ABORT, False, True, E.NONE), (S.COMPLETE_ABORT, False, False, "bump"),
    (S.COMPLETE_ABORT, True, True, E.INVALID_TXN_STATE), (S.COMPLETE_ABORT, True, False, E.INVALID_TXN_STATE),
    (S.COMPLETE_COMMIT, False, True, E.INVALID_TXN_STATE), (S.COMPLETE_COMMIT, False, False, "bump"),
    (S.COMPLETE_COMMIT, True, True, E.NONE), (S.COMPLETE_COMMIT, True, False, E.INVALID_TXN_STATE),
])
def test_v2_end_table(state: TxnState, commit: bool, retry: bool, want: Any) -> None:
    log = shard_in(state)  # epoch 3
    res = v2_end(log, commit, 2 if retry else 3)
    if want == "bump":
        assert res == InitResult(E.NONE, 1000, 4)
        assert log.shard.txns[TID].state is S.PREPARE_ABORT
    else:
        assert res.error == want


def test_v2_epoch_overflow_moves_to_the_next_producer_id() -> None:
    log = new_log()
    init(log)
    m = log.shard.txns[TID]
    log.shard.txns[TID] = replace(m, producer_epoch=32766, state=S.ONGOING, partitions=frozenset({("a", 0)}),
                                  start_ms=T0)
    assert log.run(log.shard.end_txn_v2(TID, 1000, 32766, True, T0)) is NEED_PRODUCER_ID
    assert v2_end(log, True, 32766, new_pid=2000) == InitResult(E.NONE, 2000, 0)
    m = log.shard.txns[TID]
    assert (m.producer_id, m.producer_epoch, m.next_producer_id) == (1000, 32767, 2000)
    finish_markers(log)
    m = log.shard.txns[TID]
    assert (m.state, m.producer_id, m.producer_epoch, m.prev_producer_id) == (S.COMPLETE_COMMIT, 2000, 0, 1000)
    assert v2_end(log, True, 32766, pid=1000) == InitResult(E.NONE, 2000, 0)  # retried across it
    assert log.rebuilt().txns[TID].producer_id == 2000


def test_coordinator_aborts_with_transaction_version_2_finalized() -> None:
    """Kafka's own aborts use the cluster's finalized level: with version 2 the fenced
    producer's old epoch is two behind, so its EndTxn is PRODUCER_FENCED, not a retry."""
    log = Log(TxnShard(7, replace(CFG, transaction_version=2)))
    init(log, timeout=1_000)
    log.shard.on_loaded(T0)
    log.run(log.shard.add_partitions(TID, 1000, 0, [("a", 0)], T0, client_version=2))
    log.apply(log.shard.on_timer(T0 + 5_000))
    m = log.shard.txns[TID]
    assert (m.state, m.producer_epoch, m.last_producer_epoch) == (S.PREPARE_ABORT, 2, 1)
    (job,) = log.shard.marker_jobs()
    assert job.producer_epoch == 2
    log.apply(log.shard.complete(job, T0)[0])
    assert v2_end(log, True, 0).error == E.PRODUCER_FENCED
    assert v2_end(log, False, 0).error == E.PRODUCER_FENCED
    # InitProducerId from a new instance while Ongoing fences the same way
    init(log)  # epoch 3
    log.run(log.shard.add_partitions(TID, 1000, 3, [("a", 0)], T0, client_version=2))
    assert init(log).error == E.CONCURRENT_TRANSACTIONS
    assert log.shard.txns[TID].producer_epoch == 5
