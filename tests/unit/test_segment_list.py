"""SegmentList on its own: real segment files in a temporary directory, checked against a plain
list model (Hypothesis) and a few exact cases."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from log.config import LogConfig
from log.log_state import DirSync
from log.segment import LogSegment
from log.segment_list import SegmentList
from protocol.records import SimpleRecord, build_batch, iter_headers

NOW = 1_700_000_000_000


def write_batch(segments: SegmentList, base: int, count: int, ts: int) -> int:
    """Append one batch of ``count`` records at ``base`` to the active segment; the next offset."""
    data = build_batch([SimpleRecord(None, b"v", (), ts, None)] * count, base_offset=base)
    segments.active.write([memoryview(data)], [h for _, h in iter_headers(data)])
    return base + count


def new_list(d: Path, config: LogConfig | None = None) -> tuple[SegmentList, DirSync]:
    ds = DirSync(d)
    cfg = config or LogConfig()
    seg = LogSegment.create(d, 0, cfg, NOW)
    seg.open_for_append()
    return SegmentList(d, cfg, NOW, ds, [seg]), ds


@dataclass
class ModelSegment:
    base: int
    batches: list[tuple[int, int, int]] = field(default_factory=list)  # (base, last, max ts)

    @property
    def max_ts(self) -> int:
        return max((b[2] for b in self.batches), default=-1)


class SegmentListMachine(RuleBasedStateMachine):
    """Every change of the segment list mirrored on a list of (base, batches)."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="kw-seglist-"))
        self.segments, self.dir_sync = new_list(self.dir, LogConfig(open_segment_files_max=2))
        self.model = [ModelSegment(0)]
        self.leo = 0
        self.ts = NOW

    def teardown(self) -> None:
        self.segments.detach()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _bases(self) -> list[int]:
        return [m.base for m in self.model]

    def _offset(self, data: st.DataObject, lo: int = 0) -> int:
        """An offset from ``lo`` to just past the log end, often a segment or batch boundary."""
        edges = {m.base + d for m in self.model for d in (-1, 0, 1)}
        edges |= {b[1] + d for m in self.model for b in m.batches for d in (0, 1)}
        edges = {e for e in edges if lo <= e <= self.leo + 2}
        return data.draw(st.sampled_from(sorted(edges)) | st.integers(lo, self.leo + 2)
                         if edges else st.integers(lo, self.leo + 2))

    def _holding(self, offset: int) -> int:
        """The model's index_of: the last segment whose base is <= offset (else the first)."""
        return max([0] + [i for i, m in enumerate(self.model) if m.base <= offset])

    @rule(count=st.integers(1, 5), dt=st.integers(-5, 20))
    def append(self, count: int, dt: int) -> None:
        self.ts += dt
        nxt = write_batch(self.segments, self.leo, count, self.ts)
        self.model[-1].batches.append((self.leo, nxt - 1, self.ts))
        self.leo = nxt

    @rule()
    def roll(self) -> None:
        version = self.dir_sync.version
        seg = self.segments.roll(self.leo, NOW)
        if self.model[-1].batches:
            self.model.append(ModelSegment(self.leo))
            assert self.dir_sync.version == version + 1
        else:
            assert seg.base_offset == self.model[-1].base and self.dir_sync.version == version
        assert seg is self.segments.active

    @rule(data=st.data())
    def delete_below(self, data: st.DataObject) -> None:
        offset = self._offset(data)
        count = sum(1 for i in range(len(self.model) - 1) if self.model[i + 1].base <= offset)
        doomed = self.segments.delete_below(offset)
        assert [s.base_offset for s in doomed] == self._bases()[:count]
        assert all(not s.log_path.exists() for s in doomed)
        del self.model[:count]

    @precondition(lambda self: len(self.model) > 1)
    @rule(data=st.data())
    def delete_oldest(self, data: st.DataObject) -> None:
        count = data.draw(st.integers(0, len(self.model) - 1))
        doomed = self.segments.delete_oldest(count)
        assert [s.base_offset for s in doomed] == self._bases()[:count]
        del self.model[:count]

    @rule(data=st.data())
    def truncate_to(self, data: st.DataObject) -> None:
        offset = min(self._offset(data, self.model[0].base), self.leo + 1)
        while len(self.model) > 1 and self.model[-1].base > offset:
            self.model.pop()
        last = self.model[-1]
        last.batches = [b for b in last.batches if b[1] < offset]
        expected = last.batches[-1][1] + 1 if last.batches else last.base
        assert self.segments.truncate_to(offset) == expected
        self.leo = expected

    @rule(data=st.data())
    def reset(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(0, self.leo + 100))
        self.segments.reset(offset, NOW)
        self.model = [ModelSegment(offset)]
        self.leo = offset

    @rule(data=st.data())
    def lookups(self, data: st.DataObject) -> None:
        lo = self._offset(data)
        hi = self._offset(data)
        segs = self.segments
        i = self._holding(lo)
        assert segs.index_of(lo) == i
        assert [s.base_offset for s in segs.from_offset(lo)] == self._bases()[i:]
        assert [s.base_offset for s in segs.non_active_from(lo)] == self._bases()[i:-1]
        assert [s.base_offset for s in segs.between(lo, hi)] == [
            m.base for m in self.model[i:] if m.base < hi
        ]
        nxt = segs.next_base(i)
        assert nxt == (self.model[i + 1].base if i + 1 < len(self.model) else None)

    @rule(data=st.data())
    def timestamp_lookup(self, data: st.DataObject) -> None:
        stamps = sorted({m.max_ts + d for m in self.model for d in (-1, 0, 1)})
        ts = data.draw(st.sampled_from(stamps) | st.integers(NOW - 10, self.ts + 10))
        start = self._offset(data)
        expected = [
            m.base for i, m in enumerate(self.model)
            if m.max_ts >= ts and not (i + 1 < len(self.model) and self.model[i + 1].base <= start)
        ]
        assert [s.base_offset for s in self.segments.for_timestamp(ts, start)] == expected

    @rule(data=st.data())
    def read_some(self, data: st.DataObject) -> None:
        """Touching segments (as reads do) keeps at most the configured number of inactive
        files open, and never closes the active one."""
        i = data.draw(st.integers(0, len(self.model) - 1))
        seg = self.segments[i]
        seg.file()
        self.segments.touch(seg)
        inactive_open = sum(1 for s in list(self.segments)[:-1] if s.is_open)
        assert inactive_open <= 2

    @invariant()
    def same_segments(self) -> None:
        segs = self.segments
        assert len(segs) == len(self.model) >= 1
        assert [s.base_offset for s in segs] == self._bases()
        assert segs.base_offset == self.model[0].base
        assert segs.active is segs[len(segs) - 1]
        assert segs.active_base_offset == self.model[-1].base
        assert [i.base_offset for i in segs.infos()] == self._bases()
        assert segs.size_bytes == sum(s.size for s in segs)
        assert segs.max_timestamp() == max((m.max_ts for m in self.model), default=-1)
        on_disk = sorted(int(p.name[:20]) for p in self.dir.glob("*.log"))
        assert on_disk == self._bases()


SegmentListMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("SEGMENT_LIST_EXAMPLES", "50")),
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestSegmentList = SegmentListMachine.TestCase


def test_roll_of_an_empty_active_segment_is_a_no_op(tmp_path: Path) -> None:
    segments, ds = new_list(tmp_path)
    assert segments.roll(0, NOW) is segments.active and len(segments) == 1 and ds.version == 0
    write_batch(segments, 0, 3, NOW)
    new = segments.roll(3, NOW + 1)
    assert [s.base_offset for s in segments] == [0, 3] and new.created_ms == NOW + 1


def test_the_active_segment_is_never_deleted(tmp_path: Path) -> None:
    segments, _ = new_list(tmp_path)
    write_batch(segments, 0, 2, NOW)
    segments.roll(2, NOW)
    with pytest.raises(ValueError):
        segments.delete_oldest(2)
    assert segments.delete_below(10**9)[0].base_offset == 0
    assert [s.base_offset for s in segments] == [2]


def test_replace_swaps_a_run_for_one_segment(tmp_path: Path) -> None:
    segments, ds = new_list(tmp_path)
    nxt = 0
    for _ in range(3):
        nxt = write_batch(segments, nxt, 2, NOW)
        segments.roll(nxt, NOW)
    run = list(segments)[:2]
    assert segments.position_of(run) == 0
    assert segments.position_of(list(segments)[1:3]) == 1
    assert segments.position_of([run[1], run[0]]) == -1
    version = ds.version
    new = LogSegment(tmp_path, 0, segments.config, NOW)
    segments.replace(0, 2, new)
    assert [s.base_offset for s in segments] == [0, 4, 6] and segments[0] is new
    assert segments.position_of(run) == -1 and ds.version == version + 1
    assert segments.index_of(3) == 0 and segments.index_of(4) == 1


def test_closed_list_releases_its_files(tmp_path: Path) -> None:
    segments, _ = new_list(tmp_path)
    write_batch(segments, 0, 1, NOW)
    segments.roll(1, NOW)
    segments[0].file()
    segments.touch(segments[0])
    segments.detach()
    assert segments.closed and not any(s.is_open for s in segments)


def test_truncate_keeps_the_segment_starting_at_the_offset(tmp_path: Path) -> None:
    segments, ds = new_list(tmp_path)
    write_batch(segments, 0, 2, NOW)
    segments.roll(2, NOW)
    write_batch(segments, 2, 2, NOW)
    segments.roll(4, NOW)
    write_batch(segments, 4, 1, NOW)
    version = ds.version
    assert segments.truncate_to(2) == 2  # the segment at 4 goes, the one at 2 is emptied
    assert [s.base_offset for s in segments] == [0, 2] and segments.active.size == 0
    assert ds.version == version + 1
    assert segments.truncate_to(1) == 0  # the batch holding offset 1 starts at 0
    assert [s.base_offset for s in segments] == [0]
