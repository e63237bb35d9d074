"""The log cleaner: compaction of ``cleanup.policy=compact`` logs, with Kafka's semantics.

Synchronous and free of threads, clocks and I/O scheduling (layer 1): the broker chooses when
to clean and runs the heavy parts on a worker thread (``kafkawire.log_cleaner``). The split:

* :func:`grab_filthiest` (owning thread): Kafka's ``LogCleanerManager`` choice. For each
  compacted log, the dirty range is [first dirty offset, first uncleanable offset): it starts
  at the ``cleaner-offset-checkpoint`` entry (reset to the log start offset when missing or
  invalid) and ends at the lowest of the last stable offset, the active segment's base offset
  and, with ``min.compaction.lag.ms``, the first segment holding a record newer than the lag.
  The log whose dirty bytes are the largest share of its size is cleaned, if that share is
  above ``min.cleanable.dirty.ratio`` or a dirty segment's first batch is older than
  ``max.compaction.lag.ms``.
* :class:`CleaningTask` (created on the owning thread, which snapshots what the worker needs:
  segment paths and sizes, the producers' last offsets, the config; ``build_offset_map`` and
  ``clean_group`` run on a worker thread and touch no object the event loop uses):

  1. the offset map: the latest offset of every key in the dirty range (keys over 16 bytes are
     stored as their MD5, as Kafka does). Bounded by ``log.cleaner.dedupe.buffer.size``; when
     it fills up, this round ends there and the next round goes on;
  2. the segments below the map's end, grouped (at most ``segment.bytes`` of data and
     ``segment.index.bytes`` of each index per group), are each rewritten into one
     ``<base>.log.cleaned`` segment, keeping per batch:

     - a record whose offset is past the map, or that is the latest for its key (tombstones
       too, until the batch's delete horizon has passed); never a record without a key;
     - aborted transactional batches are dropped; a commit or abort marker is kept until no
       batch of its transaction is left, then gets a delete horizon and is dropped after it;
     - the batch holding a live producer's last sequence (or its last marker) is kept, empty
       if need be, so idempotence and fencing survive compaction; so is the last batch of each
       group, so the cleaned segment ends at the same offset as the originals;
     - an untouched batch is copied byte for byte; a changed one keeps its base offset, last
       offset delta, producer fields, codec and timestamp type, and is re-compressed. A batch
       that keeps tombstones or an empty transaction's marker gets a delete horizon (now +
       ``delete.retention.ms``) as its base timestamp with attribute bit 6 (KIP-534); the
       records' timestamp deltas are rewritten accordingly, their other bytes copied.

* ``PartitionLog.replace_segments`` (owning thread) swaps a cleaned segment in, crash-safely.

Transactions: which transactions were aborted is found by scanning the batch headers (and the
markers) from the start of the log up to where every transaction reaching below the cleaned
range is decided. (Kafka reads its ``.txnindex`` files for this; the result is the same.)

Every batch read is CRC-checked; a corrupt batch stops the cleaning of that log
(:class:`CleanerError`), leaving it as it was.

Deviations from Kafka, deliberately small: the last batch of every group (not only of the
round) is kept, so that completing an interrupted swap knows exactly which old segments it
replaces; the map's capacity is counted in Python dict entries (~128 bytes each) rather than
24-byte slots; a changed batch keeps its original base timestamp instead of its first
retained record's (same record timestamps, no delta re-encoding).
"""

from __future__ import annotations

import hashlib
import os
import struct
from collections import deque
from collections.abc import Container, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import crc32c as _crc32c

from log import _records
from log.config import LONG_MAX, LogConfig
from log.layout import CLEANED_SUFFIX
from log.log_swap import CleanedSegment
from log.partition_log import PartitionLog
from log.segment import INT32_MAX, LogSegment, scan_file
from protocol.compression import compress
from protocol.errors import ErrorCode, KafkaError
from protocol.records import (
    CONTROL_BIT,
    DELETE_HORIZON_BIT,
    HEADER,
    LOG_OVERHEAD,
    OFF_ATTRIBUTES,
    OFF_CRC,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    BatchHeader,
    encode_varint,
    write_varlong,
)

__all__ = [
    "LogToClean",
    "CleaningTask",
    "CleanedSegment",
    "CleanerStats",
    "CleanerError",
    "CleaningAborted",
    "cleanable_offsets",
    "grab_filthiest",
    "map_capacity",
    "keyless_records",
    "clean_log",
    "MAP_ENTRY_BYTES",
]

TopicPartition = tuple[str, int]

#: what one offset-map entry costs in memory here (dict slot, key bytes object, int offset)
MAP_ENTRY_BYTES = 128
#: keys longer than this are stored as their 16-byte MD5 digest
_MAX_RAW_KEY = 16
#: bytes read per ``pread`` while cleaning
_READ_CHUNK = 4 * 1024 * 1024
#: cleaned bytes buffered before one write to the cleaned segment
_WRITE_CHUNK = 4 * 1024 * 1024
#: the records of one batch may inflate to at most this many bytes while cleaning
_MAX_INFLATED = 1 << 30

_ABORT = 0
_COMMIT = 1
_U32 = struct.Struct(">I")


class CleanerError(Exception):
    """The log cannot be cleaned (a corrupt batch, say); it is left as it was."""


class CleaningAborted(Exception):
    """The log changed under the cleaner (segments deleted, truncated) or it was stopped."""


# ---------------------------------------------------------------------------------------------
# choosing a log (owning thread)
# ---------------------------------------------------------------------------------------------

@dataclass
class LogToClean:
    topic_partition: TopicPartition
    log: PartitionLog
    first_dirty_offset: int
    first_uncleanable_offset: int
    need_compaction_now: bool
    clean_bytes: int
    cleanable_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        total = self.total_bytes
        return self.cleanable_bytes / total if total else 0.0


def cleanable_offsets(
    log: PartitionLog, checkpoint: int | None, now_ms: int
) -> tuple[int, int, bool]:
    """(first dirty offset, first uncleanable offset, checkpoint must be rewritten)."""
    start = log.log_start_offset
    dirty = start if checkpoint is None else checkpoint
    force = False
    if dirty < start or dirty > log.log_end_offset:
        dirty, force = start, True
    bounds = [log.last_stable_offset, log.active_segment_base_offset]
    lag = max(log.config.min_compaction_lag_ms, 0)
    if lag > 0:
        for seg in log.non_active_segments_from(dirty):
            if log.segment_largest_timestamp(seg) > now_ms - lag:
                bounds.append(seg.base_offset)
                break
    return dirty, max(dirty, min(bounds)), force


def max_compaction_delay(log: PartitionLog, first_dirty: int, now_ms: int) -> int:
    """How long past ``max.compaction.lag.ms`` the oldest dirty segment is (0: not yet)."""
    lag = max(log.config.max_compaction_lag_ms, 0)
    if lag >= LONG_MAX // 2:
        return 0
    firsts = [
        ts for seg in log.non_active_segments_from(first_dirty)
        if (ts := log.first_batch_timestamp(seg)) > 0
    ]
    if not firsts:
        return 0
    until = now_ms - lag
    return max(until - min(firsts), 0)


def _cleanable_bytes(log: PartitionLog, first_dirty: int, uncleanable: int) -> int:
    segs = log.non_active_segments_from(uncleanable)
    first_uncleanable = segs[0].base_offset if segs else log.active_segment_base_offset
    lo = min(first_dirty, first_uncleanable)
    return sum(s.size for s in log.segments_between(lo, first_uncleanable))


def log_to_clean(
    tp: TopicPartition, log: PartitionLog, checkpoint: int | None, now_ms: int
) -> tuple[LogToClean, bool]:
    dirty, uncleanable, force = cleanable_offsets(log, checkpoint, now_ms)
    clean_bytes = sum(s.size for s in log.segments_between(-1, dirty))
    ltc = LogToClean(
        tp,
        log,
        dirty,
        uncleanable,
        max_compaction_delay(log, dirty, now_ms) > 0,
        clean_bytes,
        _cleanable_bytes(log, dirty, uncleanable),
    )
    return ltc, force


def grab_filthiest(
    logs: Iterable[tuple[TopicPartition, PartitionLog]],
    checkpoints: Mapping[TopicPartition, int],
    now_ms: int,
    skip: Container[TopicPartition] = (),
) -> tuple[LogToClean | None, dict[TopicPartition, int]]:
    """The compacted log most worth cleaning, if any is (Kafka's ``grabFilthiestCompactedLog``),
    and the checkpoint entries that were invalid and must be rewritten."""
    forced: dict[TopicPartition, int] = {}
    candidates: list[LogToClean] = []
    for tp, log in logs:
        if not log.config.compact or log.closed or tp in skip:
            continue
        ltc, force = log_to_clean(tp, log, checkpoints.get(tp), now_ms)
        if force:
            forced[tp] = ltc.first_dirty_offset
        if ltc.total_bytes > 0:
            candidates.append(ltc)
    eligible = [
        c for c in candidates
        if (c.need_compaction_now and c.cleanable_bytes > 0)
        or c.cleanable_ratio > c.log.config.min_cleanable_dirty_ratio
    ]
    if not eligible:
        return None, forced
    return max(eligible, key=lambda c: c.cleanable_ratio), forced


def keyless_records(
    buf: bytes | bytearray | memoryview, batches: list[tuple[int, BatchHeader]], max_inflated: int
) -> list[tuple[int, int]]:
    """(batch number, record index in the batch) of every record without a key.

    A compacted topic refuses those at Produce (Kafka's LogValidator: INVALID_RECORD, "Compacted
    topic cannot accept message without key"). This is the one place Produce looks at records:
    the batch is inflated and each record's prefix walked (about a microsecond per record), and
    only for topics whose cleanup.policy contains ``compact``. Raises ``KafkaError`` when the
    records cannot be parsed.
    """
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    out: list[tuple[int, int]] = []
    for n, (pos, h) in enumerate(batches):
        try:
            missing = _records.keyless_records(view[pos : pos + h.batch_length + LOG_OVERHEAD],
                                               max_inflated)
        except (ValueError, IndexError) as exc:
            raise KafkaError(ErrorCode.INVALID_RECORD, f"invalid record in batch {n}: {exc}") from exc
        out.extend((n, i) for i in missing)
    return out


def map_capacity(dedupe_buffer_bytes: int, load_factor: float = 0.9) -> int:
    """Offset-map entries that ``log.cleaner.dedupe.buffer.size`` allows (at least 1024)."""
    return max(1024, int(dedupe_buffer_bytes * load_factor) // MAP_ENTRY_BYTES)


# ---------------------------------------------------------------------------------------------
# cleaning (worker thread)
# ---------------------------------------------------------------------------------------------

class SourceSegment(NamedTuple):
    segment: LogSegment  # compared by identity at swap time, never used by the worker
    base_offset: int
    path: Path
    size: int
    offset_index_bytes: int
    time_index_bytes: int


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int


@dataclass
class CleanerStats:
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_retained: int = 0
    batches_rewritten: int = 0
    map_entries: int = 0


def _key_digest(key: bytes) -> bytes:
    return key if len(key) <= _MAX_RAW_KEY else hashlib.md5(key, usedforsecurity=False).digest()


class _TxnMetadata:
    """Kafka's ``CleanedTransactionMetadata``: which transaction each batch belongs to."""

    def __init__(self, aborted: list[AbortedTxn]) -> None:
        self._aborted = deque(aborted)  # sorted by first offset
        self._ongoing_committed: set[int] = set()
        self._ongoing_aborted: dict[int, int] = {}  # pid -> last observed batch offset (-1)

    def _consume_up_to(self, offset: int) -> None:
        q = self._aborted
        while q and q[0].first_offset <= offset:
            t = q.popleft()
            self._ongoing_aborted.setdefault(t.producer_id, -1)

    def on_control_batch(self, h: BatchHeader, control_type: int | None) -> bool:
        """True when the marker may be discarded (its transaction has no batch left)."""
        self._consume_up_to(h.base_offset + h.last_offset_delta)
        if control_type is None:  # an empty control batch: already cleaned
            return True
        pid = h.producer_id
        if control_type == _ABORT:
            observed = self._ongoing_aborted.pop(pid, None)
            return not (observed is not None and observed >= 0)
        if control_type == _COMMIT:
            if pid in self._ongoing_committed:
                self._ongoing_committed.discard(pid)
                return False
            return True
        return False

    def on_batch(self, h: BatchHeader) -> bool:
        """True when the data batch belongs to an aborted transaction."""
        last = h.base_offset + h.last_offset_delta
        self._consume_up_to(last)
        if not h.is_transactional:
            return False
        pid = h.producer_id
        if pid in self._ongoing_aborted:
            self._ongoing_aborted[pid] = last
            return True
        self._ongoing_committed.add(pid)
        return False


def _read_batches(fd: int, size: int, name: str) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Every batch of a segment file, CRC-checked (CleanerError on damage)."""
    pos = 0
    while pos < size:
        buf = os.pread(fd, min(_READ_CHUNK, size - pos), pos)
        if len(buf) < RECORD_BATCH_OVERHEAD:
            raise CleanerError(f"{name}: truncated batch at position {pos}")
        view = memoryview(buf)
        off = 0
        while len(buf) - off >= RECORD_BATCH_OVERHEAD:
            h = BatchHeader._make(HEADER.unpack_from(buf, off))
            n = h.batch_length + LOG_OVERHEAD
            if h.batch_length < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD or h.magic != 2:
                raise CleanerError(f"{name}: invalid batch header at position {pos + off}")
            if off + n > len(buf):
                if off:
                    break
                big = os.pread(fd, n, pos)
                if len(big) < n:
                    raise CleanerError(f"{name}: truncated batch at position {pos}")
                view, buf = memoryview(big), big
            batch = view[off : off + n]
            if _crc32c.crc32c(batch[OFF_ATTRIBUTES:]) != h.crc:
                raise CleanerError(f"{name}: CRC mismatch in the batch at position {pos + off}")
            yield h, batch
            off += n
        pos += off


class CleaningTask:
    """One cleaning round of one log. Create it on the thread that owns the log; run
    :meth:`build_offset_map` and then :meth:`clean_group` for each of :meth:`groups` on a
    worker thread; hand each result to ``PartitionLog.replace_segments`` on the owning thread."""

    def __init__(self, ltc: LogToClean, now_ms: int, map_capacity: int) -> None:
        log = ltc.log
        self.topic_partition = ltc.topic_partition
        self.dir = log.dir
        self.name = log.dir.name
        self.config: LogConfig = log.config
        self.generation = log.generation
        self.now_ms = now_ms
        self.start = ltc.first_dirty_offset
        self.upper = ltc.first_uncleanable_offset
        self.map_capacity = max(1, map_capacity)
        segs = log.segments_between(-1, LONG_MAX)
        self.sources: list[SourceSegment] = []
        self.tail: list[tuple[Path, int, int]] = []  # (path, base, size) after the sources
        for seg in segs:
            if seg.base_offset < self.upper and seg is not segs[-1]:
                self.sources.append(
                    SourceSegment(
                        seg, seg.base_offset, seg.log_path, seg.size,
                        seg.offset_index.entries * 8, seg.time_index.entries * 12,
                    )
                )
            else:
                self.tail.append((seg.log_path, seg.base_offset, seg.size))
        # Kafka's lastRecordsOfActiveProducers: (last data offset or None, epoch)
        self.producers: dict[int, tuple[int | None, int]] = {
            pid: (e.last_data_offset if e.batches else None, e.producer_epoch)
            for pid, e in log.producer_state.producers.items()
        }
        self.offset_map: dict[bytes, int] = {}
        self.latest_offset = -1
        self.end_offset = self.start
        self.aborted: list[AbortedTxn] = []
        self.stats = CleanerStats()
        self._txn: _TxnMetadata | None = None
        self._stop = False

    def abort(self) -> None:
        """Ask a running worker to stop at the next batch (CleaningAborted)."""
        self._stop = True

    def _check(self) -> None:
        if self._stop:
            raise CleaningAborted(f"{self.name}: cleaning stopped")

    def _open(self, path: Path) -> int:
        try:
            return os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            raise CleaningAborted(f"{path.name} was deleted during cleaning") from None

    # -- transactions -----------------------------------------------------------------------
    def _collect_aborted(self) -> list[AbortedTxn]:
        """Aborted transactions with data below the cleaned range's end, from the headers."""
        open_txns: dict[int, int] = {}
        aborted: list[AbortedTxn] = []
        files = [(s.path, s.base_offset, s.size) for s in self.sources] + self.tail
        for path, base, size in files:
            if base >= self.upper and not open_txns:
                break
            fd = self._open(path)
            try:
                for pos, h in scan_file(fd, 0, size):
                    if h.base_offset >= self.upper and not open_txns:
                        break
                    if h.producer_id < 0 or not h.is_transactional:
                        continue
                    if not h.is_control:
                        open_txns.setdefault(h.producer_id, h.base_offset)
                        continue
                    info = _records.control_record(os.pread(fd, h.batch_length + LOG_OVERHEAD, pos))
                    first = open_txns.pop(h.producer_id, None)
                    if info is not None and info[0] == _ABORT and first is not None:
                        aborted.append(
                            AbortedTxn(h.producer_id, first, h.base_offset + h.last_offset_delta)
                        )
            finally:
                os.close(fd)
        aborted.sort(key=lambda t: t.first_offset)
        return aborted

    # -- the offset map ---------------------------------------------------------------------
    def build_offset_map(self) -> int:
        """Map every key of [start, upper) to its latest offset. Returns the end offset of
        this round (``upper``, or less when the map filled up)."""
        self.aborted = self._collect_aborted()
        txn = _TxnMetadata(list(self.aborted))
        start, upper, cap = self.start, self.upper, self.map_capacity
        omap = self.offset_map
        latest = -1
        bases = [s.base_offset for s in self.sources]
        full = False
        for i, src in enumerate(self.sources):
            nxt = bases[i + 1] if i + 1 < len(bases) else upper
            if nxt <= start:
                continue
            fd = self._open(src.path)
            try:
                for h, batch in _read_batches(fd, src.size, self.name):
                    self._check()
                    last = h.base_offset + h.last_offset_delta
                    if last >= upper:
                        break
                    if h.is_control:
                        txn.on_control_batch(h, _control_type(h, batch))
                    elif not txn.on_batch(h) and last >= start and h.records_count:
                        records = self._scan(h, batch)
                        keys = [
                            (r.key, h.base_offset + r.offset_delta) for r in records
                            if r.key is not None and h.base_offset + r.offset_delta >= start
                        ]
                        if omap and len(omap) + len(keys) > cap:
                            full = True
                            break
                        for key, offset in keys:
                            omap[_key_digest(key)] = offset
                    if last >= start:
                        latest = last
            finally:
                os.close(fd)
            if full:
                break
            latest = max(latest, nxt - 1)
        self.latest_offset = latest
        self.end_offset = max(latest + 1, start) if latest >= 0 else start
        self.stats.map_entries = len(omap)
        return self.end_offset

    def _scan(self, h: BatchHeader, batch: memoryview) -> list[_records.RecordInfo]:
        try:
            data = _records.batch_records_section(batch, _MAX_INFLATED)
            return _records.scan_records(data, h.records_count)
        except Exception as exc:  # any decoding problem: the batch is damaged
            raise CleanerError(
                f"{self.name}: cannot decode the batch at offset {h.base_offset}: {exc}"
            ) from exc

    # -- grouping ---------------------------------------------------------------------------
    def groups(self) -> list[list[SourceSegment]]:
        """Kafka's ``groupSegmentsBySize`` over the segments below the end offset."""
        segs = [s for s in self.sources if s.base_offset < self.end_offset]
        max_size = self.config.segment_bytes
        max_index = self.config.segment_index_bytes
        out: list[list[SourceSegment]] = []
        i = 0
        while i < len(segs):
            group = [segs[i]]
            log_size, index_size, time_size = segs[i].size, segs[i].offset_index_bytes, segs[
                i
            ].time_index_bytes
            i += 1
            while i < len(segs):
                s = segs[i]
                last_of_next = (segs[i + 1].base_offset if i + 1 < len(segs) else self.upper) - 1
                if (
                    log_size + s.size > max_size
                    or index_size + s.offset_index_bytes > max_index
                    or time_size + s.time_index_bytes > max_index
                    or (s.size > 0 and last_of_next - group[0].base_offset > INT32_MAX)
                ):
                    break
                group.append(s)
                log_size += s.size
                index_size += s.offset_index_bytes
                time_size += s.time_index_bytes
                i += 1
            out.append(group)
        return out

    # -- cleaning ---------------------------------------------------------------------------
    def clean_group(self, group: list[SourceSegment]) -> CleanedSegment:
        """Rewrite ``group`` into one ``.cleaned`` segment (fsynced); returns its description."""
        if self._txn is None:
            self._txn = _TxnMetadata(list(self.aborted))
        txn = self._txn
        base = group[0].base_offset
        idx = self.sources.index(group[-1])
        group_end = (
            self.sources[idx + 1].base_offset if idx + 1 < len(self.sources) else self.upper
        )
        cleaned = LogSegment.create(self.dir, base, self.config, self.now_ms,
                                    file_suffix=CLEANED_SUFFIX)
        cleaned.open_for_append()
        out = bytearray()
        headers: list[BatchHeader] = []
        mtime = 0
        try:
            for src in group:
                fd = self._open(src.path)
                try:
                    mtime = max(mtime, os.fstat(fd).st_mtime_ns)
                    for h, batch in _read_batches(fd, src.size, self.name):
                        self._check()
                        self.stats.bytes_read += len(batch)
                        kept = self._filter_batch(h, batch, txn, group_end)
                        if kept is None:
                            continue
                        headers.append(BatchHeader._make(HEADER.unpack_from(kept, 0)))
                        out += kept
                        if len(out) >= _WRITE_CHUNK:
                            self._write(cleaned, out, headers)
                finally:
                    os.close(fd)
            if out:
                self._write(cleaned, out, headers)
            cleaned.finalize()
            os.fsync(cleaned.file().fd)
            cleaned.fsync_indexes()
            size = cleaned.size
            cleaned.release()
            if mtime:
                os.utime(cleaned.log_path, ns=(mtime, mtime))
        except BaseException:
            cleaned.delete_files()
            raise
        return CleanedSegment(
            base, [s.segment for s in group], self.generation, size,
            [cleaned.offset_index.path, cleaned.time_index.path, cleaned.log_path],
        )

    def _write(self, seg: LogSegment, out: bytearray, headers: list[BatchHeader]) -> None:
        seg.write([memoryview(out)], headers)
        self.stats.bytes_written += len(out)
        out.clear()
        headers.clear()

    def _filter_batch(
        self, h: BatchHeader, batch: memoryview, txn: _TxnMetadata, group_end: int
    ) -> bytes | memoryview | None:
        """Kafka's ``checkBatchRetention`` + ``filterTo`` for one batch: the bytes to keep
        (the batch itself, a rewritten batch, an empty batch) or None to drop it."""
        now = self.now_ms
        last = h.base_offset + h.last_offset_delta
        has_horizon = bool(h.attributes & DELETE_HORIZON_BIT)
        horizon = h.base_timestamp if has_horizon else None
        if h.is_control:
            ctype = _control_type(h, batch)
            discard_batch = txn.on_control_batch(h, ctype)
            discard_records = discard_batch and horizon is not None and horizon <= now
        else:
            discard_batch = discard_records = txn.on_batch(h)
        producer = self.producers.get(h.producer_id) if h.producer_id >= 0 else None
        is_last_of_producer = False
        if producer is not None:
            last_data, epoch = producer
            is_last_of_producer = (
                last == last_data if last_data is not None
                else h.is_control and h.producer_epoch == epoch
            )
        retain_empty = is_last_of_producer or last + 1 == group_end
        marker_for_empty_txn = discard_batch and h.is_control

        count = h.records_count
        self.stats.records_read += count
        if discard_records:
            keep: list[_records.RecordInfo] = []
            records: list[_records.RecordInfo] = []
            data = b""
        else:
            data = _records.batch_records_section(batch, _MAX_INFLATED) if count else b""
            try:
                records = _records.scan_records(data, count)
            except (ValueError, IndexError) as exc:
                raise CleanerError(
                    f"{self.name}: cannot decode the batch at offset {h.base_offset}: {exc}"
                ) from exc
            if h.is_control:
                keep = records
            else:
                keep = [r for r in records if self._retain(h, r, horizon)]
        self.stats.records_retained += len(keep)
        if keep:
            tombstones = not h.is_control and any(not r.has_value for r in keep)
            set_horizon = (tombstones or marker_for_empty_txn) and not has_horizon
            if len(keep) == len(records) and not set_horizon:
                return batch
            new_horizon = now + self.config.delete_retention_ms if set_horizon else horizon
            self.stats.batches_rewritten += 1
            return _rebuild(h, data, keep, new_horizon)
        if retain_empty:
            self.stats.batches_rewritten += 1
            return _empty_batch(h)
        return None

    def _retain(self, h: BatchHeader, r: _records.RecordInfo, horizon: int | None) -> bool:
        offset = h.base_offset + r.offset_delta
        if offset > self.latest_offset:
            return True
        if r.key is None:
            return False
        found = self.offset_map.get(_key_digest(r.key), -1)
        if offset < found:
            return False
        return r.has_value or horizon is None or self.now_ms < horizon


def _control_type(h: BatchHeader, batch: memoryview) -> int | None:
    if h.records_count < 1:
        return None
    info = _records.control_record(bytes(batch))
    return None if info is None else info[0]


def _finish(out: bytearray) -> bytes:
    _U32.pack_into(out, OFF_CRC, _crc32c.crc32c(memoryview(out)[OFF_ATTRIBUTES:]))
    return bytes(out)


def _rebuild(
    h: BatchHeader, data: bytes, keep: list[_records.RecordInfo], horizon: int | None
) -> bytes:
    """A batch with only ``keep`` of its records (their bytes copied), same offsets and codec.
    With a ``horizon`` it becomes the base timestamp (attribute bit 6) and each record's
    timestamp delta is re-encoded against it."""
    base_ts = h.base_timestamp
    body = bytearray()
    if horizon is not None and horizon != base_ts:
        for r in keep:
            attributes_at = r.start + _varint_len(data, r.start)
            rec = bytearray(data[attributes_at : attributes_at + 1])
            write_varlong(rec, base_ts + r.ts_delta - horizon)
            rec += data[r.ts_end : r.end]
            body += encode_varint(len(rec))
            body += rec
    else:
        for r in keep:
            body += data[r.start : r.end]
    log_append = bool(h.attributes & TIMESTAMP_TYPE_BIT)
    if log_append:
        max_ts = h.max_timestamp
    else:
        max_ts = max(base_ts + r.ts_delta for r in keep)
    codec = h.attributes & 0x07
    payload = compress(codec, body) if codec else body
    attributes = h.attributes & (0x07 | TIMESTAMP_TYPE_BIT | TRANSACTIONAL_BIT | CONTROL_BIT)
    first_ts = base_ts
    if horizon is not None:
        attributes |= DELETE_HORIZON_BIT
        first_ts = horizon
    out = bytearray(
        HEADER.pack(
            h.base_offset,
            RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(payload),
            h.partition_leader_epoch,
            2,
            0,
            attributes,
            h.last_offset_delta,
            first_ts,
            max_ts,
            h.producer_id,
            h.producer_epoch,
            h.base_sequence,
            len(keep),
        )
    )
    out += payload
    return _finish(out)


def _empty_batch(h: BatchHeader) -> bytes:
    """Kafka's ``writeEmptyHeader``: the batch's offsets and producer fields, no records, no
    codec, both timestamps the batch's max timestamp."""
    attributes = h.attributes & (TIMESTAMP_TYPE_BIT | TRANSACTIONAL_BIT | CONTROL_BIT)
    out = bytearray(
        HEADER.pack(
            h.base_offset,
            RECORD_BATCH_OVERHEAD - LOG_OVERHEAD,
            h.partition_leader_epoch,
            2,
            0,
            attributes,
            h.last_offset_delta,
            h.max_timestamp,
            h.max_timestamp,
            h.producer_id,
            h.producer_epoch,
            h.base_sequence,
            0,
        )
    )
    return _finish(out)


def _varint_len(data: bytes, pos: int) -> int:
    n = 1
    while data[pos] & 0x80:
        pos += 1
        n += 1
    return n


def clean_log(
    ltc: LogToClean, now_ms: int, capacity: int
) -> tuple[int, CleanerStats]:
    """A whole cleaning round on the calling thread (tests, benchmarks, tools): build the map,
    clean and swap every group. Returns (end offset for the cleaner checkpoint, stats)."""
    task = CleaningTask(ltc, now_ms, capacity)
    end = task.build_offset_map()
    for group in task.groups():
        cleaned = task.clean_group(group)
        if not ltc.log.replace_segments(cleaned):
            raise CleaningAborted(f"{task.name}: the log changed during cleaning")
    return end, task.stats

