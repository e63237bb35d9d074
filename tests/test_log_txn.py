"""The transaction side of the log: LSO, the aborted-transaction index (.txnindex), recovery.

Kafka's rules checked here: the LSO is the first offset of the oldest open transaction (else the
high watermark); an ABORT marker adds (producer id, first offset, marker offset, LSO after it)
to the .txnindex of the segment it lands in; a read_committed fetch lists the aborted
transactions with a marker at or after the fetch offset and a first offset below the upper
bound; the index survives truncation and is rebuilt by recovery from the batches.
"""

from __future__ import annotations

import struct
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from log.config import LogConfig
from log.partition_log import PartitionLog
from log.txn_index import AbortedTxn
from protocol.records import iter_headers
from tests.batchutil import build_batch, control_batch

NOW = 1_700_000_000_000
CFG = LogConfig(segment_bytes=4000, index_interval_bytes=200)


class Writer:
    """Appends transactional batches and markers for a few producers."""

    def __init__(self, log: PartitionLog) -> None:
        self.log = log
        self.seq: dict[int, int] = {}

    def data(self, pid: int, n: int = 2, epoch: int = 0, transactional: bool = True) -> int:
        seq = self.seq.get(pid, 0)
        buf = build_batch(
            [NOW] * n, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
            transactional=transactional,
        )
        self.seq[pid] = seq + n
        info = self.log.append(buf, iter_headers(buf), leader_epoch=0, now_ms=NOW)
        self.log.update_high_watermark(self.log.log_end_offset)
        return info.first_offset

    def marker(self, pid: int, commit: bool, epoch: int = 0, coordinator_epoch: int = 0) -> int:
        # stamped "now" like the data: a marker stamped long ago (control_batch's default)
        # makes recovery expire the producer (producer.id.expiration.ms, as Kafka), after
        # which its next sequence is out of order - Hypothesis found that model gap
        buf = control_batch(
            producer_id=pid, producer_epoch=epoch, commit=commit,
            coordinator_epoch=coordinator_epoch, ts=NOW,
        )
        info = self.log.append(buf, iter_headers(buf), leader_epoch=0, now_ms=NOW)
        self.log.update_high_watermark(self.log.log_end_offset)
        return info.first_offset


def open_log(path: Path, **kw: object) -> PartitionLog:
    return PartitionLog.open(path, CFG, NOW, **kw)  # type: ignore[arg-type]


def all_aborted(log: PartitionLog) -> list[AbortedTxn]:
    return log.aborted_transactions(0, log.log_end_offset)


def txnindex_files(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.glob("*.txnindex"))}


def test_lso_follows_the_oldest_open_transaction(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    w = Writer(log)
    assert log.last_stable_offset == 0
    w.data(-1)  # plain data: LSO = HW
    assert log.last_stable_offset == log.high_watermark == 2
    a = w.data(1)  # txn of producer 1 starts at 2
    assert a == 2 and log.last_stable_offset == 2
    w.data(2)  # producer 2 at 4
    w.data(1)
    assert log.last_stable_offset == 2
    w.marker(1, commit=True)  # closes producer 1; producer 2 still open at 4
    assert log.last_stable_offset == 4
    end = w.marker(2, commit=False)
    assert log.last_stable_offset == end + 1 == log.high_watermark
    # the LSO never passes the high watermark
    w.data(3)
    log.update_high_watermark(log.log_start_offset)
    assert log.last_stable_offset == log.log_start_offset
    log.close()


def test_abort_writes_kafka_txnindex_entries(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    w = Writer(log)
    w.data(7)  # 0-1
    w.data(8)  # 2-3
    m7 = w.marker(7, commit=False)  # 4: LSO after it = 2 (producer 8 still open)
    m8 = w.marker(8, commit=False)  # 5: LSO after it = 6
    w.data(9)  # 6-7
    w.marker(9, commit=True)  # commits are not indexed
    assert all_aborted(log) == [AbortedTxn(7, 0, m7, 2), AbortedTxn(8, 2, m8, m8 + 1)]
    raw = (tmp_path / "t-0" / "00000000000000000000.txnindex").read_bytes()
    entry = struct.Struct(">hqqqq")
    assert raw == entry.pack(0, 7, 0, 4, 2) + entry.pack(0, 8, 2, 5, 6)
    # listing: marker at/after the fetch offset, first offset below the upper bound
    assert log.aborted_transactions(5, 100) == [AbortedTxn(8, 2, 5, 6)]
    assert log.aborted_transactions(0, 2) == [AbortedTxn(7, 0, 4, 2)]
    assert log.aborted_transactions(6, 100) == []
    log.close()


def test_no_txnindex_file_without_an_abort(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    w = Writer(log)
    w.data(1)
    w.marker(1, commit=True)
    log.close()
    assert txnindex_files(tmp_path / "t-0") == {}


def test_index_lives_in_the_markers_segment_and_search_spans_segments(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    w = Writer(log)
    w.data(1)  # 0-1 in segment 0
    log.roll(NOW)
    w.data(2, n=3)  # 2-4 in segment 2
    m1 = w.marker(1, commit=False)  # 5
    log.roll(NOW)
    m2 = w.marker(2, commit=False)  # 6 in segment 6
    files = txnindex_files(tmp_path / "t-0")
    assert sorted(files) == ["00000000000000000002.txnindex", "00000000000000000006.txnindex"]
    # a fetch from segment 0 finds both; the first entry's LSO (2) is below the bound, so the
    # search goes on into the later segments
    assert log.aborted_transactions(0, 7) == [AbortedTxn(1, 0, m1, 2), AbortedTxn(2, 2, m2, 7)]
    # the upper bound of a read: next segment's base when no index entry lies past the read
    res = log.read(0, 10**6, max_offset=2)
    assert log.fetch_upper_bound(res) == 2
    log.close()


def test_truncation_drops_index_entries(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    w = Writer(log)
    w.data(1)
    w.marker(1, commit=False)  # 2
    w.data(2)  # 3-4
    m2 = w.marker(2, commit=False)  # 5
    assert len(all_aborted(log)) == 2
    log.truncate_to(m2)
    assert all_aborted(log) == [AbortedTxn(1, 0, 2, 3)]
    # producer 2's transaction is open again after the truncation
    assert log.last_stable_offset == 3
    w.marker(2, commit=False)
    assert all_aborted(log)[-1] == AbortedTxn(2, 3, 5, 6)
    log.close()


def _populate(log: PartitionLog) -> None:
    w = Writer(log)
    for round_ in range(6):
        for pid in (1, 2, 3):
            w.data(pid, n=1 + (pid + round_) % 3)
        w.marker(1, commit=round_ % 2 == 0)
        w.marker(2, commit=False)
        if round_ % 3 == 2:
            w.marker(3, commit=False)
            log.roll(NOW)


def test_recovery_rebuilds_a_missing_or_corrupt_index(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path)
    _populate(log)
    want = all_aborted(log)
    lso = log.last_stable_offset
    files = txnindex_files(path)
    assert len(files) >= 2
    log.close()

    # crash: no clean shutdown, indexes deleted -> rebuilt identical from the batches
    for name in files:
        (path / name).unlink()
    log = open_log(path, clean_shutdown=False, recovery_point=0)
    assert all_aborted(log) == want and log.last_stable_offset == lso
    assert txnindex_files(path) == files
    log.close()

    # a corrupt entry version in a trusted (clean) segment forces a rebuild from there
    first = sorted(files)[0]
    (path / first).write_bytes(b"\x00\x07" + files[first][2:])
    log = open_log(path, clean_shutdown=True)
    assert all_aborted(log) == want
    assert txnindex_files(path) == files
    log.close()


def test_clean_reopen_keeps_open_transactions(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path)
    w = Writer(log)
    w.data(1)
    first = w.data(2)
    w.marker(1, commit=False)
    log.close()
    log = open_log(path)
    assert log.last_stable_offset == first
    assert all_aborted(log) == [AbortedTxn(1, 0, 4, 2)]
    log.close()


# -- state machine --------------------------------------------------------------------------------

PIDS = [11, 12, 13]


class TxnLogMachine(RuleBasedStateMachine):
    """Random transactional traffic against a model of open transactions and aborts."""

    def __init__(self) -> None:
        super().__init__()
        import tempfile

        self._tmp = tempfile.TemporaryDirectory()
        self.path = Path(self._tmp.name) / "t-0"
        self.log = open_log(self.path)
        self.w = Writer(self.log)
        self.open: dict[int, int] = {}  # pid -> first offset
        self.aborted: list[AbortedTxn] = []
        self.epoch: dict[int, int] = {}  # pid -> the epoch its next data batch carries

    def teardown(self) -> None:
        if not self.log.closed:
            self.log.close()
        self._tmp.cleanup()

    @rule(pid=st.sampled_from(PIDS), n=st.integers(1, 4))
    def data(self, pid: int, n: int) -> None:
        off = self.w.data(pid, n, epoch=self.epoch.get(pid, 0))
        self.open.setdefault(pid, off)

    @rule(n=st.integers(1, 3))
    def plain(self, n: int) -> None:
        self.w.data(-1, n, transactional=False)

    @rule(pid=st.sampled_from(PIDS), commit=st.booleans())
    def marker(self, pid: int, commit: bool) -> None:
        self._marker(pid, commit, self.epoch.get(pid, 0))

    @rule(pid=st.sampled_from(PIDS), commit=st.booleans())
    def marker_bumped(self, pid: int, commit: bool) -> None:
        """Transaction version 2: EndTxn bumps the epoch and the marker carries epoch + 1;
        the producer's next transaction runs on that epoch from sequence 0."""
        epoch = self.epoch.get(pid, 0) + 1
        self._marker(pid, commit, epoch)
        self.epoch[pid] = epoch
        self.w.seq[pid] = 0

    def _marker(self, pid: int, commit: bool, epoch: int) -> None:
        off = self.w.marker(pid, commit, epoch=epoch)
        first = self.open.pop(pid, None)
        if first is not None and not commit:
            lso = min(self.open.values()) if self.open else off + 1
            self.aborted.append(AbortedTxn(pid, first, off, lso))

    @rule()
    def roll(self) -> None:
        self.log.roll(NOW)

    @rule(clean=st.booleans())
    def reopen(self, clean: bool) -> None:
        self.log.close()
        if clean:
            self.log = open_log(self.path)
        else:
            for p in self.path.glob("*.txnindex"):
                p.unlink()
            self.log = open_log(self.path, clean_shutdown=False, recovery_point=0)
        self.w.log = self.log

    @precondition(lambda self: self.log.log_end_offset > 0)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        # truncate at a batch boundary (whole batches, as a follower would)
        bounds = [h.base_offset for seg in self.log.segments
                  for _, h in iter_headers(seg.path.read_bytes())]
        offset = data.draw(st.sampled_from(bounds))
        self.log.truncate_to(offset)
        self.aborted = [t for t in self.aborted if t.last_offset < offset]
        self.open = {}
        for seg in self.log.segments:
            for _, h in iter_headers(seg.path.read_bytes()):
                if h.producer_id < 0:
                    continue
                if h.is_control:
                    self.open.pop(h.producer_id, None)
                else:
                    self.open.setdefault(h.producer_id, h.base_offset)
        self.w.seq = {}  # the producers continue from what the log kept
        for pid in PIDS:
            entry = self.log.producer_state.last_entry(pid)
            self.w.seq[pid] = entry.last_seq + 1 if entry and entry.batches else 0
            self.epoch[pid] = entry.producer_epoch if entry else 0

    @invariant()
    def ongoing_by_epoch(self) -> None:
        """Produce asks ``has_ongoing_txn(pid, epoch)``: true only for the epoch that opened
        the transaction, never for the next one (issue 11: the next transaction's first write
        must not be taken as part of the open one)."""
        state = self.log.producer_state
        for pid in PIDS:
            epoch = self.epoch.get(pid, 0)
            assert state.has_ongoing_txn(pid, epoch) == (pid in self.open)
            assert not state.has_ongoing_txn(pid, epoch + 1)

    @invariant()
    def matches_model(self) -> None:
        lso = min(self.open.values()) if self.open else self.log.high_watermark
        assert self.log.last_stable_offset == min(lso, self.log.high_watermark)
        assert all_aborted(self.log) == self.aborted
        # any fetch offset: exactly the model's overlapping aborts
        for fetch in (0, self.log.log_end_offset // 2):
            want = [t for t in self.aborted if t.last_offset >= fetch]
            assert self.log.aborted_transactions(fetch, self.log.log_end_offset + 1) == want


TxnLogMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)
test_txn_log_machine = TxnLogMachine.TestCase


def test_cleaner_carries_the_entries_of_retained_abort_markers(tmp_path: Path) -> None:
    """Compaction merges segments: the merged segment's .txnindex holds the entries of the
    ABORT markers it kept (from every replaced segment), and loses them with the markers."""
    from log.cleaner import clean_log, log_to_clean
    from tests.batchutil import build_batch as kbatch

    cfg = LogConfig(segment_bytes=100_000, cleanup_policy="compact",
                    min_cleanable_dirty_ratio=0.01, delete_retention_ms=1000)
    log = PartitionLog.open(tmp_path / "c-0", cfg, NOW)

    def put(pairs: list[tuple[bytes, bytes]], **kw: object) -> None:
        buf = kbatch([NOW] * len(pairs), records=pairs, **kw)  # type: ignore[arg-type]
        log.append(buf, iter_headers(buf), leader_epoch=0, now_ms=NOW)
        log.update_high_watermark(log.log_end_offset)

    w = Writer(log)
    put([(b"a", b"aborted-a")], producer_id=1, producer_epoch=0, base_sequence=0, transactional=True)
    log.roll(NOW)
    w.marker(1, commit=False)  # marker of 1 in the second segment
    put([(b"b", b"aborted-b")], producer_id=2, producer_epoch=0, base_sequence=0, transactional=True)
    w.marker(2, commit=False)
    log.roll(NOW)
    before = all_aborted(log)
    assert [t.producer_id for t in before] == [1, 2]

    def clean(now: int) -> None:
        put([(f"k{now}".encode(), b"v")])
        log.roll(NOW)
        ltc, _ = log_to_clean(("c", 0), log, None, now)
        clean_log(ltc, now, 1 << 20)

    clean(NOW)
    assert len(log.segments) < 4  # the first segments were merged
    assert all_aborted(log) == before  # markers kept: entries carried into the merged segment
    data = log.read(0, 1 << 20).read_bytes()
    assert b"aborted-a" not in data and b"aborted-b" not in data
    log.expire_producers(NOW + 30 * 86_400_000)  # else each producer's last marker stays
    for now in (NOW, NOW + 2000, NOW + 4000):  # horizon set, then passed: markers removed
        clean(now)
    assert all_aborted(log) == []
    log.close()
