"""KIP-227 incremental fetch sessions, as Kafka's ``FetchManager`` / ``FetchSessionCache``
(sans I/O: the caller passes ``now_ms`` and a seeded ``random.Random``).

The theory. A fetcher that names thousands of partitions in every Fetch request spends most of
both sides' work on partitions with nothing new. A *session* lets the broker remember the
partition set (and each partition's request parameters and the high watermark / log start
offset it last reported), so that:

- a request names only partitions whose request parameters changed (added or updated) and lists
  the ones to drop (``forgotten_topics_data``); the others are taken from the session;
- a response carries only partitions with news: records, a changed high watermark or log start
  offset, an error, a preferred read replica or a diverging epoch (``must_respond``).

Request metadata ``(session_id, epoch)`` picks one of four contexts (``ContextKind``):

| session id | epoch | context |
|---|---|---|
| any | -1 (FINAL) | SESSIONLESS: a named session is closed; the answer has session id 0 |
| any | 0 (INITIAL) | FULL: a named session is closed; a new one is created if the cache has room |
| unknown | > 0 | SESSION_ERROR FETCH_SESSION_ID_NOT_FOUND |
| known | != the session's | SESSION_ERROR INVALID_FETCH_SESSION_EPOCH |
| known, v13+ vs a name session (or < v13 vs an id session) | = | SESSION_ERROR FETCH_SESSION_TOPIC_ID_ERROR |
| known | = the session's | INCREMENTAL (a session left empty is closed: SESSIONLESS) |

A session error answers with that top-level error, session id 0 and no partitions. A new session
starts at epoch 1; each incremental fetch moves it on by one (wrapping from 2^31-1 to 1).

The cache (``max.incremental.fetch.session.cache.slots``, default 1000) is split into 8 shards
as Kafka's broker does (each holds slots / 8 sessions and a disjoint range of session ids; new
sessions go round-robin over the shards; eviction looks only within a shard). When a shard is
full, a new session may evict (Kafka's ``tryEvict``) first the least recently used session if it
has been unused for more than ``min.incremental.fetch.session.eviction.ms`` (Kafka: a constant
120000), else the least valuable evictable session when the new one is worth at least as much,
ordered by (privileged, size, id): follower sessions are privileged. A session becomes
evictable by anyone once it is older than the eviction time (as of its last use); by a
privileged newcomer also when it is a consumer's.

Within a session, a partition that returned records moves to the end of the session's order,
so the next fetches serve the others first within ``max_bytes`` (round-robin fairness).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum

from protocol.errors import ErrorCode

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INT32_MAX = 2**31 - 1
#: Kafka's ``NumFetchSessionCacheShards``
NUM_SHARDS = 8

#: a partition's key in a session: (topic id, partition) from v13, else (topic name, partition)
PartitionKey = tuple["uuid.UUID | str", int]


def next_epoch(epoch: int) -> int:
    """Kafka's ``FetchMetadata.nextEpoch``."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == INT32_MAX else epoch + 1


class ContextKind(Enum):
    SESSION_ERROR = "session_error"
    SESSIONLESS = "sessionless"
    FULL = "full"
    INCREMENTAL = "incremental"


@dataclass(slots=True, eq=False)
class CachedPartition:
    """One partition of a fetch: its request parameters and, in a session, what was last
    reported for it. ``topic`` is None for a topic id this broker does not know (yet)."""

    topic: str | None
    topic_id: uuid.UUID
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    fetcher_log_start_offset: int = -1
    high_watermark: int = -1
    local_log_start_offset: int = -1

    def key(self, uses_topic_ids: bool) -> PartitionKey:
        return (self.topic_id if uses_topic_ids else self.topic or "", self.partition)

    def update_request(self, req: CachedPartition) -> None:
        self.fetch_offset = req.fetch_offset
        self.max_bytes = req.max_bytes
        self.current_leader_epoch = req.current_leader_epoch
        self.last_fetched_epoch = req.last_fetched_epoch
        self.fetcher_log_start_offset = req.fetcher_log_start_offset

    def must_respond(self, records_size: int, high_watermark: int, log_start_offset: int,
                     error_code: int, preferred_read_replica: bool, diverging: bool,
                     update: bool = True) -> bool:
        """Kafka's ``maybeUpdateResponseData``: whether an incremental answer must carry this
        partition; with ``update`` the session remembers what it reports now."""
        respond = records_size > 0 or preferred_read_replica or diverging
        if self.high_watermark != high_watermark:
            respond = True
            if update:
                self.high_watermark = high_watermark
        if self.local_log_start_offset != log_start_offset:
            respond = True
            if update:
                self.local_log_start_offset = log_start_offset
        if error_code:
            if update:  # so that the partition is sent again when the error goes away
                self.high_watermark = -1
            respond = True
        return respond


@dataclass(eq=False)
class FetchSession:
    id: int
    privileged: bool
    uses_topic_ids: bool
    creation_ms: int
    last_used_ms: int
    epoch: int
    partitions: dict[PartitionKey, CachedPartition]
    cached_size: int = -1  # the size the cache accounts for; -1: not in the cache
    evictable_by_all: bool = False
    evictable_by_privileged: bool = False

    def evictable_key(self) -> tuple[bool, int, int]:
        return (self.privileged, self.cached_size, self.id)

    def update(self, fetch_data: Iterable[CachedPartition], to_forget: Iterable[PartitionKey]
               ) -> tuple[int, int, int]:
        """Add or update the partitions named, drop the forgotten; (added, updated, removed)."""
        added = updated = removed = 0
        ids = self.uses_topic_ids
        for req in fetch_data:
            key = req.key(ids)
            cached = self.partitions.get(key)
            if cached is None:
                self.partitions[key] = CachedPartition(
                    req.topic, req.topic_id, req.partition, req.fetch_offset, req.max_bytes,
                    req.current_leader_epoch, req.last_fetched_epoch,
                    req.fetcher_log_start_offset)
                added += 1
            else:
                cached.update_request(req)
                updated += 1
        for key in to_forget:
            if self.partitions.pop(key, None) is not None:
                removed += 1
        return added, updated, removed


class FetchSessionCacheShard:
    """Kafka's ``FetchSessionCacheShard``: ``max_entries`` sessions with ids in
    [max(1, shard * id_range), (shard + 1) * id_range)."""

    def __init__(self, max_entries: int, eviction_ms: int, id_range: int, shard_num: int,
                 rng: random.Random) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.id_range = id_range
        self.shard_num = shard_num
        self.rng = rng
        self.sessions: dict[int, FetchSession] = {}
        self.num_partitions = 0
        self.evictions = 0

    def new_session_id(self) -> int:
        lo, hi = max(1, self.shard_num * self.id_range), (self.shard_num + 1) * self.id_range
        while True:
            sid = self.rng.randrange(lo, hi)
            if sid not in self.sessions and sid != INVALID_SESSION_ID:
                return sid

    def maybe_create_session(self, now_ms: int, privileged: bool, size: int,
                             uses_topic_ids: bool,
                             partitions: Callable[[], dict[PartitionKey, CachedPartition]]
                             ) -> int:
        """A new session's id, or INVALID_SESSION_ID when there is no room for it."""
        if len(self.sessions) >= self.max_entries and not self._try_evict(privileged, size,
                                                                          now_ms):
            return INVALID_SESSION_ID
        session = FetchSession(self.new_session_id(), privileged, uses_topic_ids, now_ms, now_ms,
                               next_epoch(INITIAL_EPOCH), partitions())
        self.sessions[session.id] = session
        self.touch(session, now_ms)
        return session.id

    def _try_evict(self, privileged: bool, size: int, now_ms: int) -> bool:
        if not self.sessions:
            return False
        stalest = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - stalest.last_used_ms > self.eviction_ms:
            self._evict(stalest)
            return True
        candidates = [s for s in self.sessions.values()
                      if (s.evictable_by_privileged if privileged else s.evictable_by_all)]
        if not candidates:
            return False
        victim = min(candidates, key=FetchSession.evictable_key)
        if (privileged, size, 0) < victim.evictable_key():
            return False
        self._evict(victim)
        return True

    def _evict(self, session: FetchSession) -> None:
        self.remove(session)
        self.evictions += 1

    def remove(self, session: FetchSession) -> bool:
        if self.sessions.get(session.id) is not session:
            return False
        del self.sessions[session.id]
        self.num_partitions -= session.cached_size
        session.cached_size = -1
        return True

    def touch(self, session: FetchSession, now_ms: int) -> None:
        """Kafka's ``touch``: record the use and the session's size, and whether it may now be
        evicted (by anyone once older than the eviction time; by followers also a consumer's)."""
        session.last_used_ms = now_ms
        if session.cached_size != -1:
            self.num_partitions -= session.cached_size
        session.cached_size = len(session.partitions)
        old = now_ms - session.creation_ms > self.eviction_ms
        session.evictable_by_privileged = old or not session.privileged
        session.evictable_by_all = old
        self.num_partitions += session.cached_size


@dataclass
class FetchContext:
    """What a Fetch request asks of the session cache (Kafka's ``FetchContext``s)."""

    kind: ContextKind
    #: the partitions to read, in order (an incremental fetch: the whole session)
    partitions: list[CachedPartition] = field(default_factory=list)
    error: int = ErrorCode.NONE
    session: FetchSession | None = None
    request_epoch: int = FINAL_EPOCH
    uses_topic_ids: bool = False
    privileged: bool = False


#: a partition's answer as the session sees it: (records size, high watermark, log start
#: offset, error, preferred read replica set, diverging epoch set)
Outcome = tuple[int, int, int, int, bool, bool]


@dataclass(frozen=True)
class Answer:
    """The top level of a Fetch response and which of ``context.partitions`` it carries."""

    error: int
    session_id: int
    include: set[int] | None  # indexes into context.partitions; None: all of them


class FetchSessionCache:
    """Kafka's ``FetchManager`` over its sharded ``FetchSessionCache``."""

    def __init__(self, max_slots: int = 1000, eviction_ms: int = 120000,
                 rng: random.Random | None = None) -> None:
        self.rng = rng if rng is not None else random.Random()
        id_range = INT32_MAX // NUM_SHARDS
        self.shards = [FetchSessionCacheShard(max_slots // NUM_SHARDS, eviction_ms, id_range, n,
                                              self.rng) for n in range(NUM_SHARDS)]
        self._next_shard = 0

    @property
    def num_sessions(self) -> int:
        return sum(len(s.sessions) for s in self.shards)

    @property
    def num_partitions_cached(self) -> int:
        return sum(s.num_partitions for s in self.shards)

    @property
    def evictions(self) -> int:
        return sum(s.evictions for s in self.shards)

    def shard_of(self, session_id: int) -> FetchSessionCacheShard | None:
        n = session_id // self.shards[0].id_range
        return self.shards[n] if 0 <= n < NUM_SHARDS else None

    def get(self, session_id: int) -> FetchSession | None:
        shard = self.shard_of(session_id)
        return shard.sessions.get(session_id) if shard is not None else None

    def close(self, session_id: int) -> bool:
        shard = self.shard_of(session_id)
        session = shard.sessions.get(session_id) if shard is not None else None
        return shard is not None and session is not None and shard.remove(session)

    def unanswered(self, session_id: int, keys: Iterable[PartitionKey]) -> None:
        """An answer was dropped after the session took note of it (a throttled Fetch is
        answered empty): the next fetch of the session carries those partitions again, as
        Kafka's throttled answer leaves the session's partitions unchanged."""
        session = self.get(session_id)
        if session is None:
            return
        for key in keys:
            cp = session.partitions.get(key)
            if cp is not None:
                cp.high_watermark = -1

    def new_context(self, version: int, session_id: int, epoch: int, is_follower: bool,
                    fetch_data: list[CachedPartition], to_forget: list[PartitionKey],
                    now_ms: int, resolve: Callable[[uuid.UUID], str | None]) -> FetchContext:
        """Kafka's ``FetchManager.newContext``. ``resolve`` names a topic id (v13+ sessions
        cache partitions of unknown ids and name them once the topic is known; a partition of
        a deleted topic loses its name)."""
        uses_ids = version >= 13
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.close(session_id)
            kind = ContextKind.SESSIONLESS if epoch == FINAL_EPOCH else ContextKind.FULL
            return FetchContext(kind, fetch_data, uses_topic_ids=uses_ids,
                                privileged=is_follower)
        session = self.get(session_id)
        if session is None:
            return FetchContext(ContextKind.SESSION_ERROR,
                                error=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return FetchContext(ContextKind.SESSION_ERROR,
                                error=ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != uses_ids:
            return FetchContext(ContextKind.SESSION_ERROR,
                                error=ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        session.update(fetch_data, to_forget)
        shard = self.shard_of(session_id)
        assert shard is not None
        if not session.partitions:
            shard.remove(session)
            return FetchContext(ContextKind.SESSIONLESS, fetch_data, uses_topic_ids=uses_ids)
        shard.touch(session, now_ms)
        session.epoch = next_epoch(session.epoch)
        parts = list(session.partitions.values())
        if uses_ids:  # names as of now: a topic created since, or deleted (UNKNOWN_TOPIC_ID)
            names: dict[uuid.UUID, str | None] = {}
            for cp in parts:
                tid = cp.topic_id
                if tid not in names:
                    names[tid] = resolve(tid)
                cp.topic = names[tid]
        return FetchContext(ContextKind.INCREMENTAL, parts, session=session,
                            request_epoch=epoch, uses_topic_ids=uses_ids)

    def answer(self, ctx: FetchContext, now_ms: int, outcomes: dict[int, Outcome]) -> Answer:
        """After the reads: the response's top level (Kafka's ``updateAndGenerateResponseData``).
        ``outcomes`` holds the answer of each partition read (by index into
        ``ctx.partitions``); a partition of an incremental fetch without one is unchanged."""
        if ctx.kind is ContextKind.SESSION_ERROR:
            return Answer(ctx.error, INVALID_SESSION_ID, set())
        if ctx.kind is ContextKind.SESSIONLESS:
            return Answer(ErrorCode.NONE, INVALID_SESSION_ID, None)
        if ctx.kind is ContextKind.FULL:
            return Answer(ErrorCode.NONE, self._create(ctx, now_ms, outcomes), None)
        session = ctx.session
        assert session is not None
        if session.epoch != next_epoch(ctx.request_epoch) or self.get(session.id) is not session:
            # another request of this session ran while this one waited (a duplicate)
            return Answer(ErrorCode.INVALID_FETCH_SESSION_EPOCH, session.id, set())
        include: set[int] = set()
        moved: list[CachedPartition] = []
        parts = ctx.partitions
        for i, (size, hw, start, err, preferred, diverging) in outcomes.items():
            cp = parts[i]
            if cp.must_respond(size, hw, start, err, preferred, diverging):
                include.add(i)
            if size > 0:
                moved.append(cp)
        ids = session.uses_topic_ids
        for cp in moved:  # served: to the back of the line
            key = cp.key(ids)
            session.partitions[key] = session.partitions.pop(key)
        return Answer(ErrorCode.NONE, session.id, include)

    def _create(self, ctx: FetchContext, now_ms: int, outcomes: dict[int, Outcome]) -> int:
        def partitions() -> dict[PartitionKey, CachedPartition]:
            out: dict[PartitionKey, CachedPartition] = {}
            for i, req in enumerate(ctx.partitions):
                _size, hw, start, _err, _pref, _div = outcomes.get(i, _UNKNOWN)
                out[req.key(ctx.uses_topic_ids)] = CachedPartition(
                    req.topic, req.topic_id, req.partition, req.fetch_offset, req.max_bytes,
                    req.current_leader_epoch, req.last_fetched_epoch,
                    req.fetcher_log_start_offset, hw, start)
            return out

        shard = self.shards[self._next_shard % NUM_SHARDS]
        self._next_shard += 1
        size = len({req.key(ctx.uses_topic_ids) for req in ctx.partitions})
        return shard.maybe_create_session(now_ms, ctx.privileged, size, ctx.uses_topic_ids,
                                          partitions)


_UNKNOWN: Outcome = (0, -1, -1, 0, False, False)


__all__ = [
    "FINAL_EPOCH", "INITIAL_EPOCH", "INVALID_SESSION_ID", "Answer", "CachedPartition", "Outcome",
    "ContextKind", "FetchContext", "FetchSession", "FetchSessionCache", "FetchSessionCacheShard",
    "next_epoch",
]
