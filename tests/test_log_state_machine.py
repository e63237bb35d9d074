"""PartitionLog against a model.

Rules: append (keyless, keyed with tombstones, idempotent, transactional with commit/abort
markers), read, timestamp lookups, roll, flush, truncate, DeleteRecords, retention by time and
size, compaction (the log cleaner), crash at a random byte of any segment recovery scans,
a crash in the middle of a cleaned segment's swap, corruption below the recovery point, clean
and unclean reopen. The model is the list of batches (with their records) the log must hold.
"""

from __future__ import annotations

import bisect
import dataclasses
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from log.cleaner import CleaningTask, clean_log, log_to_clean
from log.config import LogConfig
from log.partition_log import PartitionLog
from protocol.errors import ErrorCode, KafkaError
from protocol.records import (
    DELETE_HORIZON_BIT,
    BatchHeader,
    crc_ok,
    decode_batch_records,
    iter_headers,
)
from tests.batchutil import build_batch, control_batch

NOW_MS = 1_000_000
PID = 4242
TXN_PID = 5151
KEYS = [b"a", b"b", b"c", b"d"]


@dataclass(frozen=True)
class MRecord:
    offset: int
    ts: int
    key: bytes | None
    value: bytes | None


@dataclass
class MBatch:
    base: int
    last: int
    data: bytes
    records: list[MRecord]
    epoch: int
    pid: int
    first_seq: int
    last_seq: int
    max_ts: int
    control: bool = False
    transactional: bool = False

    @property
    def horizon(self) -> int | None:
        h = iter_headers(self.data)[0][1]
        return h.base_timestamp if h.attributes & DELETE_HORIZON_BIT else None


def _records_of(data: bytes, pos: int = 0) -> list[MRecord]:
    _h, recs = decode_batch_records(data, pos)
    return [MRecord(r.offset, r.timestamp, r.key, r.value) for r in recs]


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="logsm-"))
        self.dir = self.tmp / "my-topic.v2-3"
        self.config: LogConfig | None = None
        self.log: PartitionLog | None = None
        self.model: list[MBatch] = []
        self.start = 0  # model log start offset
        # the log end offset never falls below the base of the segment data was last cut from
        # (a truncation or crash into a segment whose first batches compaction removed)
        self.leo_floor = 0
        self.epoch = 0
        self.next_seq = 0
        self.pid_epoch = 0
        self.pid_history: list[MBatch] = []  # PID's batches in append order (duplicates)
        self.txn_seq = 0
        self.txn_epoch = 0
        self.now = NOW_MS  # the clock of retention and compaction
        self.clean_end = 0  # the cleaner checkpoint
        self.compacted = False

    def teardown(self) -> None:
        if self.log is not None and not self.log.closed:
            self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- helpers ----------------------------------------------------------------------------
    @property
    def leo(self) -> int:
        return max(self.model[-1].last + 1 if self.model else 0, self.leo_floor)

    def _derived_end(self, active_base: int) -> None:
        """After a reopen the end offset comes from the files: the next offset after the last
        batch, or the active segment's base offset (a truncation into a gap is forgotten)."""
        self.leo_floor = active_base
        self.start = min(self.start, self.leo)

    def _reopen(self, clean: bool, recovery_point: int = 0) -> None:
        assert self.config is not None and self.log is not None
        self._derived_end(self.log.active_segment_base_offset)
        self.log = PartitionLog.open(
            self.dir,
            self.config,
            NOW_MS,
            clean_shutdown=clean,
            recovery_point=recovery_point,
            log_start_offset=self.start,
            high_watermark=None,
        )

    def _after_loss(self) -> None:
        """Recompute producer sequences from what survived (truncation, crash)."""
        kept = {id(b) for b in self.model}
        self.pid_history = [b for b in self.pid_history if id(b) in kept]
        if self.compacted:
            # After compaction dropped batches, which of them the rebuilt producer state
            # still remembers depends on the snapshot it starts from (as in Kafka): start a
            # new epoch instead of guessing the next sequence.
            self.pid_epoch += 1
            self.next_seq = 0
            self.pid_history = []
            self.txn_epoch += 1
            self.txn_seq = 0
        else:
            pid_batches = [b for b in self.model if b.pid == PID]
            if pid_batches:
                self.next_seq = (pid_batches[-1].last_seq + 1) & 0x7FFFFFFF
            txn_batches = [b for b in self.model if b.pid == TXN_PID and not b.control]
            if txn_batches:
                self.txn_seq = (txn_batches[-1].last_seq + 1) & 0x7FFFFFFF
            elif any(b.pid == TXN_PID for b in self.model):
                # only its markers survived: the rebuilt state knows the producer's epoch but
                # no sequence, and Kafka's checkSequence then accepts only 0 in that epoch
                # (with no batch of the producer left at all, any sequence is accepted)
                self.txn_seq = 0
        self.start = min(self.start, self.leo)
        self.clean_end = min(self.clean_end, self.leo)  # Kafka truncates the cleaner checkpoint

    def _append(self, buf: bytearray, pid: int, first_seq: int, last_seq: int) -> MBatch:
        assert self.log is not None
        h = iter_headers(buf)[0][1]
        info = self.log.append(buf, iter_headers(buf), leader_epoch=self.epoch, now_ms=NOW_MS)
        assert not info.duplicate
        assert info.first_offset == self.leo
        assert info.last_offset == self.leo + h.last_offset_delta
        data = bytes(buf)
        b = MBatch(
            info.first_offset, info.last_offset, data, _records_of(data), self.epoch, pid,
            first_seq, last_seq, h.max_timestamp, h.is_control, h.is_transactional,
        )
        self.model.append(b)
        return b

    def _aborted_batches(self) -> set[int]:
        """ids of TXN_PID data batches whose transaction ended with an abort marker."""
        aborted: set[int] = set()
        pending: list[MBatch] = []
        for b in self.model:
            if b.pid != TXN_PID:
                continue
            if not b.control:
                pending.append(b)
                continue
            if b.records and b.records[0].key is not None and b.records[0].key[2:4] == b"\x00\x00":
                aborted.update(id(p) for p in pending)
            pending = []
        return aborted

    def _physical_batches(self) -> list[tuple[int, BatchHeader, bytes]]:
        """(position, header, file bytes) of every batch in the segment files, below the log
        start offset too (the cleaner rewrites those as well)."""
        assert self.log is not None
        out = []
        for seg in self.log.segments:
            data = seg.path.read_bytes()
            out += [(p, h, data) for p, h in iter_headers(data)]
        return out

    def _segment_of(self, offset: int) -> int:
        assert self.log is not None
        bases = [s.base_offset for s in self.log.segments]
        return max(0, bisect.bisect_right(bases, offset) - 1)

    # -- rules: writing ---------------------------------------------------------------------
    @precondition(lambda self: self.log is None)
    @rule(
        segment_bytes=st.integers(800, 3000),
        interval=st.integers(0, 600),
        index_bytes=st.sampled_from([24, 48, 120, 10 * 1024 * 1024]),
    )
    def init(self, segment_bytes: int, interval: int, index_bytes: int) -> None:
        self.config = LogConfig(
            segment_bytes=segment_bytes,
            index_interval_bytes=interval,
            segment_index_bytes=index_bytes,
            open_segment_files_max=2,
            delete_retention_ms=500,
        )
        self.log = PartitionLog.open(self.dir, self.config, NOW_MS)

    @precondition(lambda self: self.log is not None)
    @rule(
        n=st.integers(1, 5),
        value_size=st.integers(0, 120),
        codec=st.sampled_from([0, 0, 0, 1, 2, 3, 4]),
        ts=st.lists(st.integers(0, 50), min_size=5, max_size=5),
        idempotent=st.booleans(),
    )
    def append(self, n: int, value_size: int, codec: int, ts: list[int], idempotent: bool) -> None:
        timestamps = [NOW_MS - 1000 + t * 10 for t in ts[:n]]
        pid, seq = (PID, self.next_seq) if idempotent else (-1, -1)
        buf = build_batch(
            timestamps,
            value_size=value_size,
            compression=codec,
            producer_id=pid,
            producer_epoch=self.pid_epoch if idempotent else -1,
            base_sequence=seq,
        )
        last_seq = (seq + n - 1) & 0x7FFFFFFF if idempotent else -1
        b = self._append(buf, pid, seq, last_seq)
        if idempotent:
            self.next_seq = (last_seq + 1) & 0x7FFFFFFF
            self.pid_history.append(b)

    @precondition(lambda self: self.log is not None)
    @rule(
        pairs=st.lists(
            st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.binary(max_size=20))),
            min_size=1, max_size=5,
        ),
        codec=st.sampled_from([0, 0, 1, 2, 3, 4]),
        t=st.integers(0, 50),
    )
    def append_keyed(self, pairs: list[tuple[bytes, bytes | None]], codec: int, t: int) -> None:
        ts = NOW_MS - 1000 + t * 10
        buf = build_batch([ts] * len(pairs), records=list(pairs), compression=codec)
        self._append(buf, -1, -1, -1)

    @precondition(lambda self: self.log is not None)
    @rule(
        pairs=st.lists(st.tuples(st.sampled_from(KEYS), st.binary(max_size=10)), min_size=1,
                       max_size=3),
        commit=st.booleans(),
    )
    def transaction(self, pairs: list[tuple[bytes, bytes]], commit: bool) -> None:
        n = len(pairs)
        buf = build_batch(
            [NOW_MS] * n, records=list(pairs), producer_id=TXN_PID, producer_epoch=self.txn_epoch,
            base_sequence=self.txn_seq, transactional=True,
        )
        last_seq = (self.txn_seq + n - 1) & 0x7FFFFFFF
        self._append(buf, TXN_PID, self.txn_seq, last_seq)
        self.txn_seq = (last_seq + 1) & 0x7FFFFFFF
        marker = control_batch(producer_id=TXN_PID, producer_epoch=self.txn_epoch, commit=commit,
                               ts=NOW_MS)
        self._append(marker, TXN_PID, -1, -1)

    @precondition(lambda self: self.log is not None)
    @rule(k=st.integers(0, 4))
    def retry_duplicate(self, k: int) -> None:
        assert self.log is not None
        physical = self.log.segments[0].base_offset
        present = {id(b) for b in self.model}
        recent = [b for b in self.pid_history[-5:] if id(b) in present and b.base >= physical]
        if not recent:
            return
        b = recent[k % len(recent)]
        buf = build_batch(
            [NOW_MS] * (b.last - b.base + 1), producer_id=PID, producer_epoch=self.pid_epoch,
            base_sequence=b.first_seq,
        )
        info = self.log.append(buf, iter_headers(buf), leader_epoch=self.epoch, now_ms=NOW_MS)
        assert info.duplicate
        assert (info.first_offset, info.last_offset) == (b.base, b.last)

    @precondition(lambda self: self.log is not None)
    @rule()
    def bump_leader_epoch(self) -> None:
        self.epoch += 1

    @precondition(lambda self: self.log is not None)
    @rule(gap=st.integers(1, 3))
    def out_of_order(self, gap: int) -> None:
        assert self.log is not None
        physical = self.log.segments[0].base_offset
        if not any(b.pid == PID and b.base >= physical for b in self.pid_history):
            return
        buf = build_batch(
            [NOW_MS],
            producer_id=PID,
            producer_epoch=self.pid_epoch,
            base_sequence=(self.next_seq + gap) & 0x7FFFFFFF,
        )
        try:
            self.log.append(buf, iter_headers(buf), leader_epoch=self.epoch, now_ms=NOW_MS)
        except KafkaError as e:
            assert e.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        else:
            raise AssertionError("gap accepted")

    # -- rules: reading ---------------------------------------------------------------------
    @precondition(lambda self: self.log is not None)
    @rule(frac=st.floats(0, 1), max_bytes=st.integers(0, 2500), bounded=st.booleans(), bfrac=st.floats(0, 1))
    def read(self, frac: float, max_bytes: int, bounded: bool, bfrac: float) -> None:
        assert self.log is not None
        leo = self.leo
        offset = self.start + int(frac * (leo - self.start))
        bound = self.start + int(bfrac * (leo - self.start)) if bounded else None
        res = self.log.read(offset, max_bytes, max_offset=bound)
        data = res.read_bytes()
        got = [(h.base_offset, bytes(data[p : p + h.size])) for p, h in iter_headers(data)]
        assert sum(len(d) for _, d in got) == len(data) == res.size
        limit = leo if bound is None else min(bound, leo)
        eligible = [b for b in self.model if b.last >= offset and b.last < limit]
        if offset >= limit or not eligible:
            assert got == []
            return
        expected = []
        total = 0
        for b in eligible:
            if expected and total + len(b.data) > max_bytes:
                break
            if not expected and len(b.data) > max_bytes:
                expected.append(b)
                break
            expected.append(b)
            total += len(b.data)
        assert [(b.base, b.data) for b in expected] == got, (
            offset, bound, max_bytes, [(b.base, b.last, len(b.data)) for b in expected],
            [(o, len(d)) for o, d in got], [(b.base, b.last) for b in self.model], self.log,
            [(b.base, b.data) for b in expected if b.base in dict(got) and dict(got)[b.base] != b.data][:1],
            [(o, d) for o, d in got if o in {b.base for b in expected} and d != next(b.data for b in expected if b.base == o)][:1],
        )
        assert res.first_offset == expected[0].base

    @precondition(lambda self: self.log is not None)
    @rule(frac=st.floats(0, 1))
    def read_out_of_range(self, frac: float) -> None:
        assert self.log is not None
        for off in (self.leo + 1 + int(frac * 10), self.start - 1 - int(frac * 10)):
            if off < 0:
                continue
            try:
                self.log.read(off, 1000)
            except KafkaError as e:
                assert e.code == ErrorCode.OFFSET_OUT_OF_RANGE
            else:
                raise AssertionError(f"read at {off} accepted")

    def _first_record_at_or_after(self, target: int) -> tuple[int, int] | None:
        for b in self.model:
            for r in b.records:
                if r.ts >= target and r.offset >= self.start:
                    return (r.offset, r.ts)
        return None

    @precondition(lambda self: self.log is not None)
    @rule(t=st.integers(-1, 60))
    def lookup_timestamp(self, t: int) -> None:
        assert self.log is not None
        target = NOW_MS - 1000 + t * 10 if t >= 0 else 0
        found = self.log.offset_for_timestamp(target)
        assert (tuple(found) if found else None) == self._first_record_at_or_after(target)

    @precondition(lambda self: self.log is not None)
    @rule()
    def max_timestamp(self) -> None:
        assert self.log is not None
        physical = self.log.segments[0].base_offset
        present = [b for b in self.model if b.last >= physical]
        if not present:
            assert self.log.max_timestamp() is None
            return
        # the largest batch max timestamp (an emptied batch keeps its own, as in Kafka)
        best = max(b.max_ts for b in present)
        found = self.log.max_timestamp()
        assert (tuple(found) if found else None) == self._first_record_at_or_after(best)

    # -- rules: roll, flush, truncation, deletion -------------------------------------------
    @precondition(lambda self: self.log is not None)
    @rule()
    def roll(self) -> None:
        assert self.log is not None
        self.log.roll(NOW_MS)

    @precondition(lambda self: self.log is not None)
    @rule()
    def flush(self) -> None:
        assert self.log is not None
        self.log.flush()
        assert self.log.recovery_point == self.leo

    @precondition(lambda self: self.log is not None)
    @rule(frac=st.floats(0, 1))
    def truncate(self, frac: float) -> None:
        assert self.log is not None
        offset = self.start + int(frac * (self.leo - self.start))
        floor = self.log.segments[self._segment_of(offset)].base_offset
        self.log.truncate_to(offset)
        if offset < self.leo:
            self.model = [b for b in self.model if b.last < offset]
            # next offset after the last batch kept, or the active segment's base, >= start
            self.leo_floor = max(floor, self.start)
            self._after_loss()
        assert self.log.log_end_offset == self.leo

    @precondition(lambda self: self.log is not None)
    @rule(frac=st.floats(0, 1))
    def delete_records(self, frac: float) -> None:
        assert self.log is not None
        self.log.update_high_watermark(self.leo)
        offset = self.start + int(frac * (self.leo - self.start))
        new_start = self.log.delete_records_before(offset)
        self.start = max(self.start, offset)
        assert new_start == self.start

    @precondition(lambda self: self.log is not None)
    @rule(
        by_time=st.booleans(),
        cutoff=st.integers(0, 60),
        retention_bytes=st.integers(0, 6000),
        compact=st.booleans(),
    )
    def retention(self, by_time: bool, cutoff: int, retention_bytes: int, compact: bool) -> None:
        """delete_old_segments against the rules computed from the segment list."""
        assert self.log is not None and self.config is not None
        log = self.log
        log.update_high_watermark(self.leo)
        now = NOW_MS + 100_000
        retention_ms = now - (NOW_MS - 1000 + cutoff * 10)
        cfg = dataclasses.replace(
            self.config,
            cleanup_policy="compact" if compact else "delete",
            retention_ms=retention_ms if by_time else -1,
            retention_bytes=-1 if by_time else retention_bytes,
        )
        log.config = cfg
        segs = [(s.base_offset, s.size_bytes, s.max_timestamp) for s in log.segments]
        leo, start = self.leo, self.start

        def deletable(pred) -> int:  # type: ignore[no-untyped-def]
            n = 0
            for i, (_base, size, _ts) in enumerate(segs):
                nxt = segs[i + 1][0] if i + 1 < len(segs) else None
                if (nxt if nxt is not None else leo) > leo or (nxt is None and size == 0):
                    break
                if not pred(i):
                    break
                n += 1
            return n

        def drop(n: int) -> None:
            nonlocal segs
            if n == len(segs) and n:
                segs = segs + [(leo, 0, -1)]
            segs = segs[n:]

        drop(deletable(lambda i: i + 1 < len(segs) and segs[i + 1][0] <= start))
        if not compact:
            if not by_time:
                diff = sum(s[1] for s in segs) - retention_bytes

                def over(i: int) -> bool:
                    nonlocal diff
                    if diff - segs[i][1] >= 0:
                        diff -= segs[i][1]
                        return True
                    return False

                if diff > 0:
                    drop(deletable(over))
            else:
                drop(deletable(lambda i: segs[i][2] >= 0 and now - segs[i][2] > retention_ms))
        log.delete_old_segments(now)
        log.config = self.config
        assert [s.base_offset for s in log.segments] == [s[0] for s in segs]
        self.start = max(self.start, segs[0][0])
        assert log.log_start_offset == self.start

    # -- rules: compaction ------------------------------------------------------------------
    def _compactable(self, advance: int) -> tuple[PartitionLog, int] | None:
        assert self.log is not None and self.config is not None
        log = self.log
        log.update_high_watermark(self.leo)
        log.config = dataclasses.replace(self.config, cleanup_policy="compact")
        now = self.now + advance
        self.now = now
        return log, now

    def _check_compaction(self, before: list[MBatch], end: int, now: int) -> None:
        """The invariants of a cleaning round ending at ``end``; then the model adopts the
        log's content (batch bytes, surviving records)."""
        assert self.log is not None
        log = self.log
        by_base = {b.base: b for b in before}
        after: list[MBatch] = []
        for pos, h, data in self._physical_batches():
            assert crc_ok(data, pos, h.size)
            old = by_base.get(h.base_offset)
            assert old is not None and old.last == h.base_offset + h.last_offset_delta, h
            raw = bytes(data[pos : pos + h.size])
            recs = _records_of(raw)
            assert set(recs) <= set(old.records), (h.base_offset, recs, old.records)
            if h.base_offset >= end:
                assert raw == old.data, "a batch beyond the cleaned range changed"
            after.append(dataclasses.replace(old, data=raw, records=recs, max_ts=h.max_timestamp))
        assert log.log_end_offset == self.leo
        aborted = self._aborted_batches()
        # what the cleaned range held before: the last record of each key, and for each
        # transactional batch the marker that closed it
        latest: dict[bytes, tuple[MRecord, MBatch]] = {}
        marker_of: dict[int, MBatch] = {}
        pending: list[MBatch] = []
        for b in before:
            if b.pid == TXN_PID:
                if b.control:
                    for p in pending:
                        marker_of[id(p)] = b
                    pending = []
                else:
                    pending.append(b)
            if b.control or id(b) in aborted:
                continue
            for r in b.records:
                if r.key is not None and self.start <= r.offset < end:
                    latest[r.key] = (r, b)
        seen_keys: set[bytes] = set()
        after_ids = {b.base for b in after}
        for b in after:
            old = by_base[b.base]
            if b.last < self.start:
                continue
            for r in b.records:
                if r.offset >= end or r.offset < self.start or b.control:
                    continue
                assert r.key is not None, "a keyless record below the cleaned end"
                assert id(old) not in aborted, "an aborted record below the cleaned end"
                assert r.key not in seen_keys, f"key {r.key!r} twice below the cleaned end"
                seen_keys.add(r.key)
                assert latest[r.key][0] == r, "a stale value survived"
            # a transactional batch still there keeps its marker
            if old.pid == TXN_PID and not old.control and id(old) in marker_of:
                assert marker_of[id(old)].base in after_ids, "marker removed before its batches"
            # a batch keeping a tombstone carries a delete horizon
            if b.base < end and any(r.value is None for r in b.records):
                horizon = b.horizon
                assert horizon is not None
                assert horizon == (old.horizon if old.horizon is not None else
                                   now + log.config.delete_retention_ms)
        for key, (r, b) in latest.items():
            present = r in {x for a in after for x in a.records}
            if r.value is not None or b.horizon is None or now < b.horizon:
                assert present, f"the latest record of {key!r} was removed"
            else:
                assert not present, f"tombstone of {key!r} kept past its delete horizon"
        self.model = after
        self.compacted = True

    @precondition(lambda self: self.log is not None)
    @rule(advance=st.sampled_from([0, 0, 100, 400, 600, 2000]), from_start=st.booleans())
    def compact(self, advance: int, from_start: bool) -> None:
        ready = self._compactable(advance)
        assert ready is not None and self.config is not None
        log, now = ready
        checkpoint = None if from_start else self.clean_end
        ltc, _force = log_to_clean(("t", 3), log, checkpoint, now)
        before = list(self.model)
        if ltc.first_uncleanable_offset > ltc.first_dirty_offset:
            end, _stats = clean_log(ltc, now, 1 << 20)
            self.clean_end = end
            self._check_compaction(before, end, now)
        log.config = self.config

    @precondition(lambda self: self.log is not None)
    @rule(steps=st.integers(0, 3), advance=st.sampled_from([0, 600]))
    def compact_then_crash(self, steps: int, advance: int) -> None:
        """A crash (the log object dropped unclosed) after ``steps`` steps of the first swap."""
        ready = self._compactable(advance)
        assert ready is not None and self.config is not None
        log, now = ready
        ltc, _ = log_to_clean(("t", 3), log, None, now)
        if ltc.first_uncleanable_offset <= ltc.first_dirty_offset:
            log.config = self.config
            return
        task = CleaningTask(ltc, now, 1 << 20)
        task.build_offset_map()
        groups = task.groups()
        if not groups:
            log.config = self.config
            return
        cleaned = task.clean_group(groups[0])
        swap = log.swap_steps(cleaned)
        for _ in range(steps):
            next(swap)
        del swap
        rp = log.recovery_point
        before = list(self.model)
        self._derived_end(log.active_segment_base_offset)
        self.log = None
        del log
        self.log = PartitionLog.open(self.dir, self.config, NOW_MS, clean_shutdown=False,
                                     recovery_point=rp, log_start_offset=self.start)
        assert not [p for p in os.listdir(self.dir) if p.endswith((".cleaned", ".swap"))]
        # the first group is either untouched or cleaned: records are a subset of the
        # model's, and the latest record of every key is there (no tombstone is old enough
        # to go in a first cleaning of this group... unless it was already horizoned: skip)
        by_base = {b.base: b for b in before}
        after: list[MBatch] = []
        for pos, h, data in self._physical_batches():
            old = by_base[h.base_offset]
            raw = bytes(data[pos : pos + h.size])
            recs = _records_of(raw)
            assert set(recs) <= set(old.records)
            after.append(dataclasses.replace(old, data=raw, records=recs, max_ts=h.max_timestamp))
        assert self.log.log_end_offset == self.leo
        aborted = self._aborted_batches()
        latest: dict[bytes, tuple[MRecord, MBatch]] = {}
        for b in before:
            if not b.control and id(b) not in aborted:
                for r in b.records:
                    if r.key is not None and r.offset >= self.start:
                        latest[r.key] = (r, b)
        present = {x for a in after for x in a.records}
        for key, (r, b) in latest.items():
            if r.value is not None or b.horizon is None or now < b.horizon:
                assert r in present, f"newest record of {key!r} lost in an interrupted swap"
        self.model = after
        self.compacted = True

    # -- rules: reopen, crash, corruption ---------------------------------------------------
    @precondition(lambda self: self.log is not None)
    @rule()
    def reopen_clean(self) -> None:
        assert self.log is not None
        rp = self.log.recovery_point
        self.log.close()
        self._reopen(clean=True, recovery_point=rp)

    @precondition(lambda self: self.log is not None)
    @rule(drop_time=st.booleans(), clean=st.booleans())
    def drop_index_files(self, drop_time: bool, clean: bool) -> None:
        assert self.log is not None
        if clean:
            self.log.close()
        suffix = ".timeindex" if drop_time else ".index"
        for p in self.dir.iterdir():
            if p.name.endswith(suffix):
                p.unlink()
        self._reopen(clean=clean, recovery_point=self.leo)

    @precondition(lambda self: self.log is not None)
    @rule(seg_frac=st.floats(0, 1), frac=st.floats(0, 1), corrupt=st.booleans())
    def crash(self, seg_frac: float, frac: float, corrupt: bool) -> None:
        """Kill the process, then lose or damage bytes in one of the segments recovery will
        scan (the one holding the recovery point and later ones): recovery truncates there and
        drops the later segments."""
        assert self.log is not None
        rp = self.log.recovery_point
        segs = self.log.segments
        first_scanned = self._segment_of(rp)
        which = first_scanned + int(seg_frac * (len(segs) - first_scanned - 1))
        path = segs[which].path
        data = path.read_bytes()
        in_seg = iter_headers(data)
        seg_base = segs[which].base_offset
        next_base = segs[which + 1].base_offset if which + 1 < len(segs) else None
        kept_in_seg = len(in_seg)
        detected = False
        if data:
            if corrupt:
                k = int(frac * (len(in_seg) - 1))
                pos, h = in_seg[k]
                at = pos + 17 + int(frac * (h.size - 18))
                damaged = bytearray(data)
                damaged[at] ^= 0xFF
                path.write_bytes(bytes(damaged))
                kept_in_seg, detected = k, True
            else:
                cut = int(frac * len(data))
                os.truncate(path, cut)
                kept_in_seg = len(iter_headers(data[:cut]))
                # a cut at a batch boundary leaves a valid (shorter) file: recovery keeps it,
                # and the later segments too, as Kafka's does; a torn batch is truncated and
                # the later segments are dropped
                detected = cut not in {p for p, _h in in_seg} | {len(data)}
        in_seg_bases = [h.base_offset for _p, h in in_seg]
        lost = set(in_seg_bases[kept_in_seg:])
        self.log = None
        if lost or detected:
            self.model = [
                b for b in self.model
                if b.base not in lost
                and not (detected and next_base is not None and b.base >= next_base)
            ]
        # the end offset first: the log start is clamped to it, never below the first
        # segment's base (the files keep it, as Kafka's max(checkpoint, first base))
        self._derived_end(seg_base if detected else segs[-1].base_offset)
        if lost or detected:
            self._after_loss()
        self.log = PartitionLog.open(
            self.dir, self.config, NOW_MS, clean_shutdown=False, recovery_point=rp,
            log_start_offset=self.start,
        )

    @precondition(lambda self: self.log is not None and len(self.log.segments) > 1)
    @rule(seg_frac=st.floats(0, 1), frac=st.floats(0, 1))
    def corrupt_cold(self, seg_frac: float, frac: float) -> None:
        """Damage a CRC-covered byte of a closed segment, reopen cleanly (no scan): reads
        never return the damaged batch, they stop before it or fail with CORRUPT_MESSAGE.
        The damage is then undone."""
        assert self.log is not None
        segs = self.log.segments[:-1]
        seg = segs[int(seg_frac * (len(segs) - 1))]
        original = seg.path.read_bytes()
        batches = iter_headers(original)
        if not batches:
            return
        pos, h = batches[int(frac * (len(batches) - 1))]
        bad_base = h.base_offset
        damaged = bytearray(original)
        damaged[pos + 21 + int(frac * (h.size - 22))] ^= 0x5A
        self.log.close()
        seg.path.write_bytes(bytes(damaged))
        self._reopen(clean=True, recovery_point=self.leo)
        offset = self.start
        served: list[int] = []
        while offset < self.leo:
            try:
                res = self.log.read(offset, 700)
            except KafkaError as e:
                assert e.code == ErrorCode.CORRUPT_MESSAGE
                # a read fails at the damaged batch, or where its damaged header claims to
                # reach (a damaged lastOffsetDelta: the read cannot trust what follows)
                claimed = iter_headers(bytes(damaged[pos:pos + h.size]))
                reach = max(h.last_offset_delta, *(hh.last_offset_delta for _p, hh in claimed))
                # or the batch that holds ``offset`` starts past it (a gap left by compaction
                # or DeleteRecords) with the damage before it: the damage may hide the offset
                holding = next((hh for p2, hh in batches if p2 > pos
                                and hh.base_offset + hh.last_offset_delta >= offset), None)
                assert offset <= bad_base + reach or (
                    holding is not None and holding.base_offset > offset)
                break
            out = res.read_bytes()
            hs = iter_headers(out)
            if not hs:
                break
            for p, hh in hs:
                assert crc_ok(out, p, hh.size) and hh.base_offset != bad_base
                served.append(hh.base_offset)
            offset = hs[-1][1].base_offset + hs[-1][1].last_offset_delta + 1
        assert all(o < bad_base for o in served) or bad_base < self.start
        self.log.close()
        seg.path.write_bytes(original)
        self._reopen(clean=True, recovery_point=self.leo)

    # -- invariants -------------------------------------------------------------------------
    @invariant()
    def offsets_agree(self) -> None:
        if self.log is None:
            return
        assert self.log.log_end_offset == self.leo, (self.log, self.leo)
        assert self.log.log_start_offset == self.start
        assert self.log.high_watermark <= self.log.log_end_offset
        assert self.log.recovery_point <= self.log.log_end_offset

    @invariant()
    def epochs_agree(self) -> None:
        if self.log is None:
            return
        for b in self.model:
            if b.base >= self.start:
                assert self.log.epoch_for_offset(b.base) == b.epoch, (b.base, self.log.leader_epochs.entries())


LogMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("LOG_SM_EXAMPLES", "200")),
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestLogStateMachine = LogMachine.TestCase
