"""The state of one share partition (KIP-932), sans-I/O.

A share group consumes a topic partition cooperatively: any member may be handed any record,
and each record is acknowledged on its own. The partition leader keeps, per (group, topic
partition):

* the **share-partition start offset** (SPSO): every record below it is done (acknowledged or
  archived) or was never to be delivered (``share.auto.offset.reset``);
* the **end offset** (SPEO): the first offset never handed out; records in [SPSO, SPEO) are
  *in flight* and each has a state and a delivery count.

Record states and the only transitions allowed (``_ALLOWED``)::

    AVAILABLE --acquire--> ACQUIRED --accept--> ACKNOWLEDGED   (terminal)
        ^                     |  \\---reject/gap--> ARCHIVED    (terminal)
        |                     |
        +----release/lock timeout (delivery count < limit)
                              +--release/lock timeout at the limit--> ARCHIVED

Acquiring raises the delivery count; a record whose count reached ``delivery.count.limit``
is archived instead of made available again. Terminal records at the start are dropped and
the SPSO moves past them.

In-flight records are kept as **ranges** of equal state (first, last, state, delivery count,
owner, lock deadline), split only where acknowledgements or acquisitions differ, so nothing
here loops over records one by one: a fetch of whole batches becomes one range per batch, as
Kafka's in-flight batches. ``partition.max.record.locks`` bounds SPEO - SPSO: no new records
are acquired beyond it, only in-flight ones made available again.

Acquired ranges follow Kafka's ``AcquiredRecords`` (first, last, delivery count). New records
are acquired by whole log batches (the batch that crosses ``max_records`` is taken whole, as
Kafka's batch-optimized mode does) unless ``strict`` (ShareFetch v2 record-limit mode).

read_committed: the caller passes the batches' producer ids, transactional and control bits
and the aborted transactions of the range read (``BatchInfo``, ``aborted``); records of aborted
transactions are archived instead of being acquired. Control batches are acquired like data,
at both isolation levels, as Kafka 4.3.1 does (their offsets are inside the acquired ranges;
clients skip control records and acknowledge their offsets).

``hold``: ranges an acquisition must leave alone (records released by acknowledgements of the
same ShareFetch: Kafka applies those while the fetch runs, so the fetch does not see them
available).

Persisted form: ``state_batches()`` are Kafka's ShareSnapshot/ShareUpdate ``StateBatches``
(acquired records are persisted as AVAILABLE with their delivery count); ``SharePartition.load``
rebuilds from them.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

from protocol.errors import ErrorCode


class RecordState(IntEnum):
    """Kafka's ``RecordState`` ids (also the persisted ``DeliveryState`` byte)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AckType(IntEnum):
    """ShareFetch/ShareAcknowledge ``AcknowledgeTypes``."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


_ALLOWED: dict[RecordState, frozenset[RecordState]] = {
    RecordState.AVAILABLE: frozenset({RecordState.ACQUIRED, RecordState.ARCHIVED}),
    RecordState.ACQUIRED: frozenset(
        {RecordState.AVAILABLE, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED}
    ),
    RecordState.ACKNOWLEDGED: frozenset(),
    RecordState.ARCHIVED: frozenset(),
}

TERMINAL = frozenset({RecordState.ACKNOWLEDGED, RecordState.ARCHIVED})
NO_DEADLINE = -1


class AcquiredRange(NamedTuple):
    first_offset: int
    last_offset: int
    delivery_count: int


class StateBatch(NamedTuple):
    """One persisted range: Kafka's ``StateBatch`` (FirstOffset, LastOffset, DeliveryState,
    DeliveryCount)."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


class BatchInfo(NamedTuple):
    """What acquisition needs of one log batch (its header only)."""

    base_offset: int
    last_offset: int
    producer_id: int = -1
    transactional: bool = False
    control: bool = False


@dataclass
class _Range:
    first: int
    last: int
    state: RecordState
    count: int
    owner: str | None = None
    deadline_ms: int = NO_DEADLINE

    def moved(self, state: RecordState) -> None:
        assert state in _ALLOWED[self.state], f"{self.state.name} -> {state.name}"
        self.state = state


@dataclass
class ShareLimits:
    """The group configs a share partition runs with."""

    record_lock_duration_ms: int = 30000  # share.record.lock.duration.ms
    delivery_count_limit: int = 5  # share.delivery.count.limit
    max_record_locks: int = 2000  # share.partition.max.record.locks


class SharePartition:
    def __init__(self, start_offset: int, limits: ShareLimits | None = None) -> None:
        self.limits = limits or ShareLimits()
        self.start_offset = start_offset
        self.end_offset = start_offset
        self._ranges: list[_Range] = []  # contiguous from start_offset to end_offset - 1
        #: (first, last, delivery count) archived by a reject, and archived on reaching the
        #: delivery limit: collected for the caller (the dead-letter extension), who clears them
        self.dead: list[tuple[int, int, int]] = []
        self.exhausted: list[tuple[int, int, int]] = []

    # ---- construction ---------------------------------------------------------------------
    @classmethod
    def load(
        cls, start_offset: int, batches: list[StateBatch], limits: ShareLimits | None = None,
    ) -> SharePartition:
        """From persisted state: ranges not covered by ``batches`` are AVAILABLE with a
        delivery count of 0."""
        sp = cls(start_offset, limits)
        pos = start_offset
        for b in sorted(batches):
            first = max(b.first_offset, pos)
            if b.last_offset < first:
                continue
            if first > pos:
                sp._ranges.append(_Range(pos, first - 1, RecordState.AVAILABLE, 0))
            state = RecordState(b.delivery_state)
            if state == RecordState.ACQUIRED:
                state = RecordState.AVAILABLE
            sp._ranges.append(_Range(first, b.last_offset, state, b.delivery_count))
            pos = b.last_offset + 1
        sp.end_offset = pos
        sp._advance()
        return sp

    # ---- reading ----------------------------------------------------------------------------
    @property
    def in_flight(self) -> int:
        return self.end_offset - self.start_offset

    def next_fetch_offset(self) -> int:
        """Where to read the log from: the first AVAILABLE in-flight record, else SPEO."""
        for r in self._ranges:
            if r.state == RecordState.AVAILABLE:
                return r.first
        return self.end_offset

    def has_available(self, log_bound: int) -> bool:
        """Whether a fetch could acquire something with the log readable up to ``log_bound``
        (exclusive: the high watermark or LSO)."""
        if any(r.state == RecordState.AVAILABLE for r in self._ranges):
            return True
        return self.end_offset < log_bound and self.in_flight < self.limits.max_record_locks

    def state_of(self, offset: int) -> tuple[RecordState, int] | None:
        """(state, delivery count) of an in-flight offset; None outside [SPSO, SPEO)."""
        i = self._find(offset)
        if i is None:
            return None
        r = self._ranges[i]
        return r.state, r.count

    def ranges(self) -> list[tuple[int, int, RecordState, int, str | None]]:
        return [(r.first, r.last, r.state, r.count, r.owner) for r in self._ranges]

    def state_batches(self) -> list[StateBatch]:
        """The in-flight state as persisted (acquired -> AVAILABLE); untouched ranges
        (available, count 0) are left out."""
        out: list[StateBatch] = []
        for r in self._ranges:
            state = RecordState.AVAILABLE if r.state == RecordState.ACQUIRED else r.state
            if state == RecordState.AVAILABLE and r.count == 0:
                continue
            if out and out[-1].last_offset + 1 == r.first and out[-1].delivery_state == state \
                    and out[-1].delivery_count == r.count:
                p = out.pop()
                out.append(StateBatch(p.first_offset, r.last, int(state), r.count))
                continue
            out.append(StateBatch(r.first, r.last, int(state), r.count))
        return out

    def next_deadline_ms(self) -> int | None:
        deadlines = [r.deadline_ms for r in self._ranges if r.state == RecordState.ACQUIRED]
        return min(deadlines) if deadlines else None

    # ---- acquisition --------------------------------------------------------------------------
    def acquire(
        self, member_id: str, batches: list[BatchInfo], max_records: int, now_ms: int, *,
        strict: bool = False, aborted: list[tuple[int, int]] | None = None,
        hold: list[tuple[int, int]] | None = None,
    ) -> list[AcquiredRange]:
        """Acquire what is available in ``batches`` (in offset order, from a log read) for
        ``member_id``: in-flight AVAILABLE records first, then new records past SPEO while
        fewer than ``partition.max.record.locks`` are in flight. ``aborted``: (producer id,
        first offset) of aborted transactions (read_committed); None for read_uncommitted."""
        deadline = now_ms + self.limits.record_lock_duration_ms
        out: list[AcquiredRange] = []
        left = max(max_records, 1)
        skip = _aborted_batches(batches, aborted)
        for b, dead in zip(batches, skip, strict=True):
            if left <= 0:
                break
            if b.last_offset < self.start_offset:
                continue
            if b.base_offset < self.end_offset:
                left -= self._acquire_in_flight(
                    member_id, b, left, deadline, strict, dead, hold or [], out)
            if b.last_offset >= self.end_offset and left > 0:
                if dead:
                    self._append_new(b.last_offset, RecordState.ARCHIVED, 0)
                    continue
                if self.in_flight >= self.limits.max_record_locks:
                    break
                left -= self._acquire_new(member_id, b, left, deadline, strict, out)
        self._advance()
        return _merge(out)

    def _acquire_in_flight(
        self, member_id: str, b: BatchInfo, left: int, deadline: int, strict: bool,
        archive: bool, hold: list[tuple[int, int]], out: list[AcquiredRange],
    ) -> int:
        taken = 0
        hi = min(b.last_offset, self.end_offset - 1)
        lo = max(b.base_offset, self.start_offset)
        for h_lo, h_hi in hold:
            if h_lo <= hi and h_hi >= lo:
                self._split_at(max(h_lo, lo))
                self._split_at(min(h_hi, hi) + 1)
        for r in self._split_between(lo, hi):
            if r.state != RecordState.AVAILABLE or taken >= left:
                continue
            if any(h_lo <= r.first and r.last <= h_hi for h_lo, h_hi in hold):
                continue
            if strict and r.last - r.first + 1 > left - taken:
                self._split_at(r.first + (left - taken))
            if archive:
                r.moved(RecordState.ARCHIVED)
                continue
            r.moved(RecordState.ACQUIRED)
            r.count += 1
            r.owner, r.deadline_ms = member_id, deadline
            out.append(AcquiredRange(r.first, r.last, r.count))
            taken += r.last - r.first + 1
        return taken

    def _acquire_new(
        self, member_id: str, b: BatchInfo, left: int, deadline: int, strict: bool,
        out: list[AcquiredRange],
    ) -> int:
        first = self.end_offset
        last = b.last_offset
        if strict and last - first + 1 > left:
            last = first + left - 1
        self._append_new(last, RecordState.ACQUIRED, 1, member_id, deadline)
        out.append(AcquiredRange(first, last, 1))
        if last < b.last_offset:  # the rest of a split batch waits, never delivered yet
            self._append_new(b.last_offset, RecordState.AVAILABLE, 0)
        return last - first + 1

    def _append_new(
        self, last: int, state: RecordState, count: int, owner: str | None = None,
        deadline: int = NO_DEADLINE,
    ) -> None:
        first = self.end_offset
        assert last >= first
        self._ranges.append(_Range(first, last, state, count, owner, deadline))
        self.end_offset = last + 1

    # ---- acknowledgement ------------------------------------------------------------------
    def acknowledge(
        self, member_id: str, first: int, last: int, types: list[int], now_ms: int,
    ) -> ErrorCode:
        """One AcknowledgementBatch: ``types`` has one entry (the whole range) or one per
        offset. All or nothing: INVALID_RECORD_STATE unless every offset is ACQUIRED by
        ``member_id`` (GAP offsets excepted: only in flight); INVALID_REQUEST for a bad
        shape or type."""
        runs = _runs(first, last, types)
        if runs is None:
            return ErrorCode.INVALID_REQUEST
        for lo, hi, t in runs:
            if not self._all_owned(member_id, lo, hi, t == AckType.GAP):
                return ErrorCode.INVALID_RECORD_STATE
        for lo, hi, t in runs:
            for r in self._split_between(lo, hi):
                if r.state in TERMINAL:
                    continue
                self._apply(r, AckType(t), now_ms)
        self._advance()
        return ErrorCode.NONE

    def _apply(self, r: _Range, t: AckType, now_ms: int) -> None:
        if t == AckType.ACCEPT:
            self._finish(r, RecordState.ACKNOWLEDGED)
        elif t == AckType.REJECT:
            self._finish(r, RecordState.ARCHIVED)
            self.dead.append((r.first, r.last, r.count))
        elif t == AckType.GAP:
            self._finish(r, RecordState.ARCHIVED)
        elif t == AckType.RELEASE:
            self._unlock(r)
        else:  # RENEW
            r.deadline_ms = now_ms + self.limits.record_lock_duration_ms

    def _finish(self, r: _Range, state: RecordState) -> None:
        r.moved(state)
        r.owner, r.deadline_ms = None, NO_DEADLINE

    def _unlock(self, r: _Range) -> bool:
        """Acquired -> AVAILABLE, or ARCHIVED at the delivery limit (returns True then)."""
        at_limit = r.count >= self.limits.delivery_count_limit
        self._finish(r, RecordState.ARCHIVED if at_limit else RecordState.AVAILABLE)
        if at_limit:
            self.exhausted.append((r.first, r.last, r.count))
        return at_limit

    def _all_owned(self, member_id: str, lo: int, hi: int, gap: bool) -> bool:
        if lo < self.start_offset or hi >= self.end_offset:
            return False
        i = self._find(lo)
        assert i is not None
        for r in self._ranges[i:]:
            if r.first > hi:
                break
            if gap and r.state in TERMINAL:
                continue
            if r.state != RecordState.ACQUIRED or r.owner != member_id:
                return False
        return True

    # ---- lock expiry and members leaving --------------------------------------------------
    def on_timer(self, now_ms: int) -> int:
        """Release every expired lock; returns how many ranges were released."""
        n = 0
        for r in self._ranges:
            if r.state == RecordState.ACQUIRED and r.deadline_ms <= now_ms:
                self._unlock(r)
                n += 1
        if n:
            self._advance()
        return n

    def release_member(self, member_id: str) -> int:
        """A member left (or its share session closed): its acquired records go back."""
        n = 0
        for r in self._ranges:
            if r.state == RecordState.ACQUIRED and r.owner == member_id:
                self._unlock(r)
                n += 1
        if n:
            self._advance()
        return n

    def move_start(self, offset: int) -> bool:
        """The log start offset passed the SPSO (retention, DeleteRecords): records below it
        are gone, whatever their state; the SPSO moves to ``offset``. True if it moved."""
        if offset <= self.start_offset:
            return False
        if offset >= self.end_offset:
            self.reset(offset)
            return True
        self._split_at(offset)
        self._ranges = [r for r in self._ranges if r.first >= offset]
        self.start_offset = offset
        self._advance()
        return True

    def reset(self, start_offset: int) -> None:
        """AlterShareGroupOffsets / initialization: forget everything in flight."""
        self.start_offset = self.end_offset = start_offset
        self._ranges = []

    # ---- ranges -------------------------------------------------------------------------------
    def _find(self, offset: int) -> int | None:
        if not self.start_offset <= offset < self.end_offset:
            return None
        i = bisect.bisect_right(self._ranges, offset, key=lambda r: r.first) - 1
        return i

    def _split_at(self, offset: int) -> None:
        """Make ``offset`` the first of a range (no-op outside or on a boundary)."""
        i = self._find(offset)
        if i is None:
            return
        r = self._ranges[i]
        if r.first == offset:
            return
        tail = _Range(offset, r.last, r.state, r.count, r.owner, r.deadline_ms)
        r.last = offset - 1
        self._ranges.insert(i + 1, tail)

    def _split_between(self, lo: int, hi: int) -> list[_Range]:
        """The ranges exactly covering [lo, hi] ∩ in flight, split at both ends."""
        lo, hi = max(lo, self.start_offset), min(hi, self.end_offset - 1)
        if lo > hi:
            return []
        self._split_at(lo)
        self._split_at(hi + 1)
        i = self._find(lo)
        assert i is not None
        out = []
        for r in self._ranges[i:]:
            if r.first > hi:
                break
            out.append(r)
        return out

    def _advance(self) -> None:
        """Drop terminal ranges at the start (SPSO moves) and merge equal neighbours."""
        k = 0
        while k < len(self._ranges) and self._ranges[k].state in TERMINAL:
            k += 1
        if k:
            self.start_offset = self._ranges[k - 1].last + 1
            del self._ranges[:k]
        merged: list[_Range] = []
        for r in self._ranges:
            p = merged[-1] if merged else None
            if p is not None and (p.state, p.count, p.owner, p.deadline_ms) == (
                r.state, r.count, r.owner, r.deadline_ms
            ) and r.state != RecordState.ACQUIRED:
                p.last = r.last
            else:
                merged.append(r)
        self._ranges = merged


def _merge(out: list[AcquiredRange]) -> list[AcquiredRange]:
    res: list[AcquiredRange] = []
    for a in out:
        if res and res[-1].last_offset + 1 == a.first_offset \
                and res[-1].delivery_count == a.delivery_count:
            res[-1] = AcquiredRange(res[-1].first_offset, a.last_offset, a.delivery_count)
        else:
            res.append(a)
    return res


def _runs(first: int, last: int, types: list[int]) -> list[tuple[int, int, int]] | None:
    """[(lo, hi, type)] of equal acknowledge types; None for a malformed batch."""
    if last < first or not types:
        return None
    if any(t not in AckType._value2member_map_ for t in types):
        return None
    if len(types) == 1:
        return [(first, last, types[0])]
    if len(types) != last - first + 1:
        return None
    runs: list[tuple[int, int, int]] = []
    for i, t in enumerate(types):  # one entry per offset: the client sent them that way
        off = first + i
        if runs and runs[-1][2] == t:
            runs[-1] = (runs[-1][0], off, t)
        else:
            runs.append((off, off, t))
    return runs


def _aborted_batches(
    batches: list[BatchInfo], aborted: list[tuple[int, int]] | None,
) -> list[bool]:
    """Per batch: does it hold records of an aborted transaction? (The read_committed
    consumer's rule: a producer's transactional batches are aborted from the first offset of
    its aborted transaction until its next control batch.)"""
    if not aborted:
        return [False] * len(batches)
    pending = sorted(aborted, key=lambda a: a[1])
    active: set[int] = set()
    out: list[bool] = []
    j = 0
    for b in batches:
        while j < len(pending) and pending[j][1] <= b.last_offset:
            active.add(pending[j][0])
            j += 1
        if b.control:
            active.discard(b.producer_id)
            out.append(False)
            continue
        out.append(b.transactional and b.producer_id in active)
    return out
