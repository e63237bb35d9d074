"""PartitionLog against a list model: append / read / roll / truncate / crash / recover."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from log.config import LogConfig
from log.partition_log import PartitionLog
from protocol.errors import ErrorCode, KafkaError
from protocol.records import iter_headers
from tests.batchutil import build_batch

NOW_MS = 1_000_000
PID = 4242


@dataclass
class MBatch:
    base: int
    last: int
    data: bytes
    timestamps: list[int]
    epoch: int
    pid: int
    first_seq: int
    last_seq: int


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="logsm-"))
        self.dir = self.tmp / "my-topic.v2-3"
        self.config: LogConfig | None = None
        self.log: PartitionLog | None = None
        self.model: list[MBatch] = []
        self.start = 0  # model log start offset
        self.empty_base = 0  # LEO when the model is empty
        self.epoch = 0
        self.next_seq = 0
        self.pid_epoch = 0

    def teardown(self) -> None:
        if self.log is not None and not self.log.closed:
            self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- helpers ----------------------------------------------------------------------------
    @property
    def leo(self) -> int:
        return self.model[-1].last + 1 if self.model else self.empty_base

    def _reopen(self, clean: bool, recovery_point: int = 0) -> None:
        assert self.config is not None and self.log is not None
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
        """Recompute the producer sequence from what survived."""
        pid_batches = [b for b in self.model if b.pid == PID]
        if pid_batches:
            self.next_seq = (pid_batches[-1].last_seq + 1) & 0x7FFFFFFF
        self.start = min(self.start, self.leo)

    # -- rules ------------------------------------------------------------------------------
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
        assert self.log is not None
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
        info = self.log.append(buf, iter_headers(buf), leader_epoch=self.epoch, now_ms=NOW_MS)
        assert not info.duplicate
        assert info.first_offset == self.leo
        assert info.last_offset == self.leo + n - 1
        last_seq = (seq + n - 1) & 0x7FFFFFFF if idempotent else -1
        self.model.append(
            MBatch(info.first_offset, info.last_offset, bytes(buf), timestamps, self.epoch, pid, seq, last_seq)
        )
        if idempotent:
            self.next_seq = (last_seq + 1) & 0x7FFFFFFF

    @precondition(lambda self: self.log is not None)
    @rule(k=st.integers(0, 4))
    def retry_duplicate(self, k: int) -> None:
        assert self.log is not None
        physical = self.log.segments[0].base_offset
        recent = [b for b in self.model if b.pid == PID][-5:]
        recent = [b for b in recent if b.base >= physical]
        if not recent:
            return
        b = recent[k % len(recent)]
        buf = build_batch(
            b.timestamps, producer_id=PID, producer_epoch=self.pid_epoch, base_sequence=b.first_seq
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
        if not any(b.pid == PID and b.base >= physical for b in self.model):
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
        # starts with the batch that contains the offset (or the next one after a gap)
        assert eligible[0].base <= max(offset, eligible[0].base)
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
        assert [(b.base, b.data) for b in expected] == got
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

    @precondition(lambda self: self.log is not None)
    @rule(t=st.integers(-1, 60))
    def lookup_timestamp(self, t: int) -> None:
        assert self.log is not None
        target = NOW_MS - 1000 + t * 10 if t >= 0 else 0
        expected = None
        for b in self.model:
            for i, ts in enumerate(b.timestamps):
                if ts >= target and b.base + i >= self.start:
                    expected = (b.base + i, ts)
                    break
            if expected:
                break
        found = self.log.offset_for_timestamp(target)
        assert (tuple(found) if found else None) == expected

    @precondition(lambda self: self.log is not None)
    @rule()
    def max_timestamp(self) -> None:
        assert self.log is not None
        physical = self.log.segments[0].base_offset
        present = [b for b in self.model if b.last >= physical]
        if not present:
            assert self.log.max_timestamp() is None
            return
        best = max(max(b.timestamps) for b in present)
        expected = None
        for b in self.model:
            for i, ts in enumerate(b.timestamps):
                if ts >= best and b.base + i >= self.start:
                    expected = (b.base + i, ts)
                    break
            if expected:
                break
        found = self.log.max_timestamp()
        assert (tuple(found) if found else None) == expected

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
        self.log.truncate_to(offset)
        if offset < self.leo:
            kept = [b for b in self.model if b.last < offset]
            if not kept and self.model:
                self.empty_base = self.model[0].base
            self.model = kept
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
    @rule(frac=st.floats(0, 1), corrupt=st.booleans())
    def crash(self, frac: float, corrupt: bool) -> None:
        """Lose or damage the tail of the active segment, then recover."""
        assert self.log is not None
        rp = self.log.recovery_point
        active = self.log.segments[-1].path
        data = active.read_bytes()
        in_active = iter_headers(data)
        keep = len(self.model) - len(in_active)
        if data:
            if corrupt:
                which = int(frac * (len(in_active) - 1))
                pos, h = in_active[which]
                at = pos + 17 + int(frac * (h.size - 18))
                damaged = bytearray(data)
                damaged[at] ^= 0xFF
                active.write_bytes(bytes(damaged))
                keep += which
            else:
                cut = int(frac * len(data))
                os.truncate(active, cut)
                keep += len(iter_headers(data[:cut]))
        del self.log
        self.log = None
        old_model = self.model
        self.model = old_model[:keep]
        if not self.model and old_model:
            self.empty_base = old_model[0].base
        self._after_loss()
        self.log = PartitionLog.open(
            self.dir,
            self.config,
            NOW_MS,
            clean_shutdown=False,
            recovery_point=rp,
            log_start_offset=self.start,
        )

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
    max_examples=int(os.environ.get("LOG_SM_EXAMPLES", "75")),
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestLogStateMachine = LogMachine.TestCase
