"""The fetch-session cache (kafkawire/replication/fetch_session.py), sans I/O: table tests of Kafka's rules
(contexts, errors, what an incremental answer carries, rotation, eviction) and a Hypothesis
state machine against a plain model of the sessions."""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kafkawire.replication.fetch_session import (
    INT32_MAX,
    NUM_SHARDS,
    CachedPartition,
    ContextKind,
    FetchContext,
    FetchSessionCache,
    next_epoch,
)
from protocol.errors import ErrorCode

TID = uuid.UUID(int=7)


def part(p: int, offset: int = 0, topic: str | None = "t") -> CachedPartition:
    return CachedPartition(topic, TID, p, offset, 1 << 20)


def quiet(hw: int = 0) -> tuple[int, int, int, int, bool, bool]:
    return (0, hw, 0, 0, False, False)


def each(ctx: FetchContext, outcome: Any = None) -> dict[int, Any]:
    """An outcome for every partition of ``ctx``: ``outcome(i)``, else quiet()."""
    return {i: outcome(i) if outcome else quiet() for i in range(len(ctx.partitions))}


def new_session(cache: FetchSessionCache, parts: list[int], now: int = 0,
                follower: bool = False, version: int = 16) -> int:
    ctx = cache.new_context(version, 0, 0, follower, [part(p) for p in parts], [], now,
                            lambda _: "t")
    assert ctx.kind is ContextKind.FULL
    return cache.answer(ctx, now, each(ctx)).session_id


def incremental(cache: FetchSessionCache, sid: int, epoch: int, adds: list[int] | None = None,
                forget: list[int] | None = None, version: int = 16, now: int = 0
                ) -> FetchContext:
    return cache.new_context(version, sid, epoch, False, [part(p) for p in adds or []],
                             [(TID, p) for p in forget or []], now, lambda _: "t")


def test_epochs() -> None:
    assert next_epoch(0) == 1 and next_epoch(41) == 42
    assert next_epoch(INT32_MAX) == 1 and next_epoch(-1) == -1


def test_full_fetch_creates_a_session_in_its_shard() -> None:
    cache = FetchSessionCache(rng=random.Random(1))
    ids = [new_session(cache, [0, 1]) for _ in range(NUM_SHARDS * 2)]
    rng = INT32_MAX // NUM_SHARDS
    # round-robin over the shards, each id in its shard's range
    assert [i // rng for i in ids] == list(range(NUM_SHARDS)) * 2
    assert all(cache.get(i) is not None and cache.get(i).epoch == 1 for i in ids)  # type: ignore[union-attr]
    assert cache.num_sessions == 16 and cache.num_partitions_cached == 32


@pytest.mark.parametrize(("sid_delta", "epoch", "version", "error"), [
    (1, 1, 16, ErrorCode.FETCH_SESSION_ID_NOT_FOUND),
    (0, 2, 16, ErrorCode.INVALID_FETCH_SESSION_EPOCH),
    (0, 1, 12, ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR),
])
def test_session_errors(sid_delta: int, epoch: int, version: int, error: int) -> None:
    cache = FetchSessionCache(rng=random.Random(2))
    sid = new_session(cache, [0])
    ctx = incremental(cache, sid + sid_delta, epoch, version=version)
    assert (ctx.kind, ctx.error) == (ContextKind.SESSION_ERROR, error)
    a = cache.answer(ctx, 0, each(ctx))
    assert (a.error, a.session_id, a.include) == (error, 0, set())
    assert cache.get(sid).epoch == 1  # type: ignore[union-attr]  # an error moves nothing


def test_final_and_initial_epochs_close_the_named_session() -> None:
    cache = FetchSessionCache(rng=random.Random(3))
    sid = new_session(cache, [0])
    ctx = cache.new_context(16, sid, -1, False, [part(0)], [], 0, lambda _: "t")
    assert ctx.kind is ContextKind.SESSIONLESS and cache.get(sid) is None
    assert cache.answer(ctx, 0, each(ctx)).session_id == 0
    sid = new_session(cache, [0])
    ctx = cache.new_context(16, sid, 0, False, [part(0)], [], 0, lambda _: "t")
    assert ctx.kind is ContextKind.FULL and cache.get(sid) is None


def test_forgetting_everything_closes_the_session() -> None:
    cache = FetchSessionCache(rng=random.Random(4))
    sid = new_session(cache, [0, 1])
    ctx = incremental(cache, sid, 1, forget=[0, 1])
    assert ctx.kind is ContextKind.SESSIONLESS and cache.get(sid) is None
    assert cache.num_partitions_cached == 0


@pytest.mark.parametrize(("outcome", "respond"), [
    ((0, 5, 0, 0, False, False), False),
    ((10, 5, 0, 0, False, False), True),  # records
    ((0, 6, 0, 0, False, False), True),  # high watermark moved
    ((0, 5, 1, 0, False, False), True),  # log start moved
    ((0, -1, -1, ErrorCode.NOT_LEADER_OR_FOLLOWER, False, False), True),  # errors always
    ((0, 5, 0, 0, True, False), True),  # a preferred read replica
    ((0, 5, 0, 0, False, True), True),  # a diverging epoch
])
def test_what_an_incremental_answer_carries(outcome: tuple[int, int, int, int, bool, bool],
                                            respond: bool) -> None:
    cache = FetchSessionCache(rng=random.Random(5))
    ctx = cache.new_context(16, 0, 0, False, [part(0)], [], 0, lambda _: "t")
    sid = cache.answer(ctx, 0, each(ctx, lambda i: quiet(5))).session_id
    ctx = incremental(cache, sid, 1)
    include = cache.answer(ctx, 0, each(ctx, lambda i: outcome)).include
    assert include == ({0} if respond else set())
    if outcome[3]:  # after an error the partition is answered again once it is gone
        ctx = incremental(cache, sid, 2)
        assert cache.answer(ctx, 0, each(ctx, lambda i: quiet(5))).include == {0}


def test_partitions_that_returned_records_go_to_the_back() -> None:
    cache = FetchSessionCache(rng=random.Random(6))
    sid = new_session(cache, [0, 1, 2, 3])
    ctx = incremental(cache, sid, 1)
    assert [c.partition for c in ctx.partitions] == [0, 1, 2, 3]
    cache.answer(ctx, 0, each(ctx, lambda i: (100, 0, 0, 0, False, False) if i in (0, 1)
                                else quiet()))
    ctx = incremental(cache, sid, 2, adds=[4])
    assert [c.partition for c in ctx.partitions] == [2, 3, 0, 1, 4]


def test_duplicate_request_of_a_session() -> None:
    """Two fetches of the same epoch racing (the second waited while the first answered)."""
    cache = FetchSessionCache(rng=random.Random(7))
    sid = new_session(cache, [0])
    first = incremental(cache, sid, 1)
    second_ctx = incremental(cache, sid, 2)
    assert cache.answer(second_ctx, 0, each(second_ctx)).error == 0
    a = cache.answer(first, 0, each(first))
    assert (a.error, a.session_id) == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, sid)


def _fill(cache: FetchSessionCache, now: int, size: int = 1, follower: bool = False
          ) -> list[int]:
    return [new_session(cache, list(range(size)), now, follower) for _ in range(NUM_SHARDS)]


def test_eviction_stale_first() -> None:
    cache = FetchSessionCache(max_slots=NUM_SHARDS, eviction_ms=1000, rng=random.Random(8))
    old = _fill(cache, 0)
    assert new_session(cache, [0], now=500) == 0  # shard 0 is full, nothing evictable
    assert new_session(cache, [0], now=500) == 0  # (shard 1 now)
    cache._next_shard = 0
    sid = new_session(cache, [0], now=1001)  # shard 0's session is stale
    assert sid != 0 and cache.get(old[0]) is None and cache.evictions == 1


def test_followers_evict_consumers_not_the_reverse() -> None:
    cache = FetchSessionCache(max_slots=NUM_SHARDS, eviction_ms=1000, rng=random.Random(9))
    consumers = _fill(cache, 0, size=5)
    follower = new_session(cache, [0], now=10, follower=True)  # smaller, but privileged
    assert follower != 0 and cache.get(consumers[0]) is None
    cache._next_shard = 0
    assert new_session(cache, list(range(50)), now=20) == 0  # a follower's is not evictable


def test_bigger_sessions_evict_old_smaller_ones() -> None:
    cache = FetchSessionCache(max_slots=NUM_SHARDS, eviction_ms=1000, rng=random.Random(10))
    small = _fill(cache, 0, size=3)
    for i, sid in enumerate(small):  # used recently, but older than the eviction time
        assert incremental(cache, sid, 1, now=1500 + i).kind is ContextKind.INCREMENTAL
    assert new_session(cache, [0, 1], now=1600) == 0  # smaller: not worth it
    cache._next_shard = 0
    assert new_session(cache, [0, 1, 2, 3], now=1600) != 0
    assert cache.get(small[0]) is None


class SessionModel(RuleBasedStateMachine):
    """Random full / incremental / final fetches against a model: session -> (epoch, parts)."""

    def __init__(self) -> None:
        super().__init__()
        self.cache = FetchSessionCache(rng=random.Random(0))
        self.model: dict[int, tuple[int, set[int]]] = {}

    @rule(parts=st.sets(st.integers(0, 5), min_size=1))
    def full(self, parts: set[int]) -> None:
        sid = new_session(self.cache, sorted(parts))
        assert sid != 0 and sid not in self.model
        self.model[sid] = (1, set(parts))

    @rule(pick=st.integers(0, 50), epoch_off=st.sampled_from([0, 0, 0, 1, 5]),
          adds=st.sets(st.integers(0, 5)), forget=st.sets(st.integers(0, 5)))
    def incremental(self, pick: int, epoch_off: int, adds: set[int], forget: set[int]) -> None:
        ids = sorted(self.model)
        sid = ids[pick % len(ids)] if ids and pick < 40 else 12345
        epoch, parts = self.model.get(sid, (1, set()))
        ctx = incremental(self.cache, sid, epoch + epoch_off, sorted(adds), sorted(forget))
        if sid not in self.model:
            assert ctx.error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
            return
        if epoch_off:
            assert ctx.error == ErrorCode.INVALID_FETCH_SESSION_EPOCH
            return
        parts = (parts | adds) - forget
        if not parts:
            assert ctx.kind is ContextKind.SESSIONLESS
            del self.model[sid]
            return
        assert ctx.kind is ContextKind.INCREMENTAL
        assert sorted(c.partition for c in ctx.partitions) == sorted(parts)
        a = self.cache.answer(ctx, 0, each(ctx))
        assert a.session_id == sid and a.error == 0
        self.model[sid] = (epoch + 1, parts)

    @rule(pick=st.integers(0, 50))
    def final(self, pick: int) -> None:
        ids = sorted(self.model)
        if not ids:
            return
        sid = ids[pick % len(ids)]
        ctx = self.cache.new_context(16, sid, -1, False, [], [], 0, lambda _: "t")
        assert ctx.kind is ContextKind.SESSIONLESS
        del self.model[sid]

    @invariant()
    def cache_matches_model(self) -> None:
        assert self.cache.num_sessions == len(self.model)
        assert self.cache.num_partitions_cached == sum(len(p) for _, p in self.model.values())
        for sid, (epoch, parts) in self.model.items():
            s = self.cache.get(sid)
            assert s is not None and s.epoch == epoch
            assert {k[1] for k in s.partitions} == parts


TestSessionModel = SessionModel.TestCase
TestSessionModel.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)


def test_fetcher_session_follows_kafkas_fetch_session_handler() -> None:
    """The follower's side (kafkawire/replication/replica_fetcher.py ``FetcherSession``) against the
    broker's cache: full, incremental with only changed partitions, forget, recovery."""
    from kafkawire.replication.replica_fetcher import FetcherSession

    cache = FetchSessionCache(rng=random.Random(11))
    fs = FetcherSession()

    def roundtrip(wanted: dict[tuple[str, int], tuple[int, int, int, int]]
                  ) -> tuple[list[int], list[int], int]:
        send, forget = fs.build(wanted)
        ctx = cache.new_context(16, fs.session_id, fs.epoch, True,
                                [part(p, wanted[("t", p)][0]) for _, p in send],
                                [(TID, p) for _, p in forget], 0, lambda _: "t")
        a = cache.answer(ctx, 0, each(ctx))
        fs.on_response(wanted, a.error, a.session_id)
        return [p for _, p in send], [p for _, p in forget], a.error

    data = {("t", p): (0, 0, -1, 0) for p in range(3)}
    assert roundtrip(data) == ([0, 1, 2], [], 0) and fs.session_id > 0 and fs.epoch == 1
    assert cache.get(fs.session_id).privileged  # type: ignore[union-attr]
    assert roundtrip(data) == ([], [], 0) and fs.epoch == 2  # nothing changed: names nothing
    data[("t", 1)] = (5, 0, 0, 0)  # partition 1 fetched records: its offset moved
    del data[("t", 2)]  # partition 2 left this fetcher
    assert roundtrip(data) == ([1], [2], 0)
    # the leader restarted: unknown session -> a new full fetch at once
    old = fs.session_id
    cache.close(old)
    assert roundtrip(data) == ([], [], ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    assert (fs.session_id, fs.epoch) == (0, 0)
    assert roundtrip(data) == ([0, 1], [], 0) and fs.session_id not in (0, old)
    # a wrong epoch: the next full fetch names (and so closes) the session
    fs.epoch = 99
    old = fs.session_id
    assert roundtrip(data)[2] == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert (fs.session_id, fs.epoch) == (old, 0)
    assert roundtrip(data) == ([0, 1], [], 0) and cache.get(old) is None


def test_a_dropped_answer_is_sent_again() -> None:
    """A throttled Fetch is answered empty after the session took note of the answer: the
    partitions it carried are answered again by the next fetch (kafkawire/broker.py)."""
    cache = FetchSessionCache(rng=random.Random(12))
    sid = new_session(cache, [0, 1])
    ctx = incremental(cache, sid, 1)
    a = cache.answer(ctx, 0, each(ctx, lambda i: quiet(7) if i == 0 else quiet()))
    assert a.include == {0}
    cache.unanswered(sid, [(TID, 0)])
    ctx = incremental(cache, sid, 2)
    assert cache.answer(ctx, 0, each(ctx, lambda i: quiet(7) if i == 0 else quiet())
                        ).include == {0}
    ctx = incremental(cache, sid, 3)
    assert cache.answer(ctx, 0, each(ctx, lambda i: quiet(7) if i == 0 else quiet())
                        ).include == set()


class EvictionModel(RuleBasedStateMachine):
    """A small cache (2 sessions a shard) under consumer and follower sessions, time moving:
    the shard limits and the partition accounting hold, sessions disappear only when a new one
    needed the room (or they were closed), and a follower never loses its session to a
    consumer before it has been unused or old for the eviction time."""

    EVICTION_MS = 1000

    def __init__(self) -> None:
        super().__init__()
        self.cache = FetchSessionCache(max_slots=2 * NUM_SHARDS, eviction_ms=self.EVICTION_MS,
                                       rng=random.Random(0))
        self.now = 0
        self.live: dict[int, tuple[int, bool]] = {}  # id -> (epoch, privileged)

    @rule(ms=st.integers(0, 800))
    def tick(self, ms: int) -> None:
        self.now += ms

    @rule(size=st.integers(1, 6), follower=st.booleans())
    def create(self, size: int, follower: bool) -> None:
        before = {sid: self.cache.get(sid) for sid in self.live}
        sid = new_session(self.cache, list(range(size)), self.now, follower)
        gone = [s for s in self.live if self.cache.get(s) is None]
        assert len(gone) <= 1
        for s in gone:
            victim = before[s]
            assert victim is not None and sid != 0
            stale = self.now - victim.last_used_ms > self.EVICTION_MS
            old = self.now - victim.creation_ms > self.EVICTION_MS
            assert stale or old or (follower and not victim.privileged)
            del self.live[s]
        if sid:
            self.live[sid] = (1, follower)

    @rule(pick=st.integers(0, 100))
    def use(self, pick: int) -> None:
        if not self.live:
            return
        sid = sorted(self.live)[pick % len(self.live)]
        epoch, privileged = self.live[sid]
        ctx = incremental(self.cache, sid, epoch, now=self.now)
        assert ctx.kind is ContextKind.INCREMENTAL
        self.cache.answer(ctx, self.now, each(ctx))
        self.live[sid] = (epoch + 1, privileged)

    @invariant()
    def accounting(self) -> None:
        rng = INT32_MAX // NUM_SHARDS
        total = 0
        for shard in self.cache.shards:
            assert len(shard.sessions) <= 2
            for sid, s in shard.sessions.items():
                assert sid // rng == shard.shard_num and sid != 0 and sid in self.live
                assert s.cached_size == len(s.partitions)
                total += s.cached_size
            assert shard.num_partitions == sum(s.cached_size for s in shard.sessions.values())
        assert total == self.cache.num_partitions_cached
        assert self.cache.num_sessions == len(self.live)


TestEvictionModel = EvictionModel.TestCase
TestEvictionModel.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
