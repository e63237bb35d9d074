"""One log segment: ``<base>.log`` plus its ``.index``, ``.timeindex`` and ``.txnindex``.

The ``.log`` file is a plain concatenation of v2 record batches exactly as clients sent them
(with the broker-assigned baseOffset / partitionLeaderEpoch patched into the header), so
Kafka's ``kafka-dump-log`` reads it. Everything else about a segment can be rebuilt from it
(the aborted-transaction index ``.txnindex`` needs the producer state as of the segment's start,
so ``PartitionLog`` rebuilds it, see ``log/txn_index.py``).

Reading never decodes records: positions come from the sparse offset index plus a forward scan
of 61-byte batch headers, done over chunked ``os.pread`` calls (one syscall covers many small
batches; a large batch costs one small read for its header).

File descriptors: a segment's file is a :class:`SegmentFile` that closes its descriptor when the
last reference to it goes away. The log hands these objects out inside read results (for
``os.sendfile``), so a segment deleted by retention or truncation while a fetch is still being
sent keeps its inode alive until the send completes, and a descriptor number is never reused
under a reader's feet. A segment opens its file on first use and keeps it only while it is among
the ``log.open.files.max`` most recently used handles of the process (``log/file_cache.py``);
an idle partition holds no descriptor, not even for its active segment.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import crc32c as _crc32c

from log.config import LogConfig
from log.file_cache import FILE_CACHE, OpenFile, open_fd
from log.index import OFFSET_ENTRY, TIME_ENTRY, OffsetIndex, TimeIndex
from log.txn_index import TXN_INDEX_SUFFIX, TxnIndex
from protocol.records import (
    HEADER,
    LOG_OVERHEAD,
    MAGIC_V2,
    OFF_ATTRIBUTES,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
)

__all__ = [
    "SegmentFile",
    "LogSegment",
    "RecoveryResult",
    "CorruptBatch",
    "scan_file",
    "check_batches",
    "segment_file_name",
    "LOG_SUFFIX",
    "INDEX_SUFFIX",
    "TIME_INDEX_SUFFIX",
]

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"

INT32_MAX = 0x7FFFFFFF
_MIN_BATCH_LENGTH = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD
_SCAN_FIRST_CHUNK = 8 * 1024
_SCAN_CHUNK = 64 * 1024
_RECOVER_CHUNK = 1024 * 1024
_make_header = BatchHeader._make
_unpack_header = HEADER.unpack_from


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


class SegmentFile(OpenFile):
    """An open segment file (read/append). The descriptor closes when the last reference is
    dropped; keep the object (not just ``fd``) alive while using the descriptor."""

    __slots__ = ()

    def __init__(self, path: Path, *, create: bool = True) -> None:
        super().__init__(path, os.O_RDWR | os.O_APPEND | (os.O_CREAT if create else 0))


def scan_file(fd: int, start: int, end: int) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each batch of the open segment file ``fd`` from ``start`` (a batch
    boundary) up to ``end``; stops at the first header that is not a plausible v2 batch or
    runs past ``end``. Reads chunks with ``os.pread``, never the records themselves."""
    pos = start
    buf = b""
    buf_start = start
    # Most scans stop within an index interval: start small, grow while scanning on.
    chunk = _SCAN_FIRST_CHUNK
    want = chunk
    while end - pos >= RECORD_BATCH_OVERHEAD:
        off = pos - buf_start
        if off + RECORD_BATCH_OVERHEAD > len(buf):
            buf = os.pread(fd, min(want, end - pos), pos)
            buf_start = pos
            off = 0
            if len(buf) < RECORD_BATCH_OVERHEAD:
                return
            chunk = min(chunk * 2, _SCAN_CHUNK)
        h = _make_header(_unpack_header(buf, off))
        size = h.batch_length + LOG_OVERHEAD
        if h.batch_length < _MIN_BATCH_LENGTH or h.magic != MAGIC_V2 or pos + size > end:
            return
        yield pos, h
        pos += size
        # a big batch: read just the next header rather than a chunk of this batch's body
        want = RECORD_BATCH_OVERHEAD if size > chunk // 2 else chunk


class CorruptBatch(NamedTuple):
    """The first bad batch found by :func:`check_batches`."""

    position: int
    base_offset: int  # -1 when the header itself is unreadable
    reason: str


class _OffsetChecker:
    """Offset sanity of consecutive batch headers (the part of a header the CRC does not cover).

    baseOffset lies outside the CRC, so a damaged one is found only by its neighbours: a batch
    must start after the previous one ends and end before ``limit_offset`` (the next segment's
    base offset). When batch B overlaps its predecessor A, either header may be the damaged one:
    A is blamed unless it is anchored (it follows its own predecessor without a gap, starts
    the segment at its base offset, or matches the offset index), since serving A with a wrong
    base offset would make consumers skip records silently. ``first_last_offset``: the last
    offset the offset index gives for the first batch checked."""

    __slots__ = ("segment_base", "expected", "limit_offset", "first_last_offset", "_prev")

    def __init__(
        self, segment_base: int, min_offset: int, limit_offset: int | None = None,
        first_last_offset: int | None = None,
    ) -> None:
        self.segment_base = segment_base
        self.expected = min_offset
        self.limit_offset = limit_offset
        self.first_last_offset = first_last_offset
        self._prev: tuple[int, int, bool] | None = None  # (position, base offset, anchored)

    def check(self, pos: int, h: BatchHeader) -> CorruptBatch | None:
        """The bad batch (``h`` or the previous one) or None; call :meth:`accept` if None and
        the rest of ``h`` (length, CRC) is good."""
        prev = self._prev
        if h.base_offset < self.expected and prev is not None and not prev[2]:
            return CorruptBatch(
                prev[0], prev[1],
                f"base offset {prev[1]} overlaps the next batch (base offset {h.base_offset} at "
                f"position {pos}): one of the two headers is damaged",
            )
        bad = _header_problem(h, self.segment_base, self.expected)
        last = h.base_offset + h.last_offset_delta
        if bad is None and prev is None and self.first_last_offset is not None and (
            last != self.first_last_offset
        ):
            bad = f"last offset {last}, the offset index says {self.first_last_offset}"
        if bad is None and self.limit_offset is not None and last >= self.limit_offset:
            bad = f"last offset {last} not below the next segment's base {self.limit_offset}"
        return None if bad is None else CorruptBatch(pos, h.base_offset, bad)

    def accept(self, pos: int, h: BatchHeader) -> None:
        prev = self._prev
        anchored = (
            h.base_offset == self.expected if prev is not None
            else self.first_last_offset is not None or h.base_offset == self.segment_base
        )
        self._prev = (pos, h.base_offset, anchored)
        self.expected = h.base_offset + h.last_offset_delta + 1


def check_batches(
    fd: int, start: int, end: int, base_offset: int, min_offset: int = -1, *,
    limit_offset: int | None = None, first_last_offset: int | None = None,
    data_end: int | None = None,
) -> tuple[int, CorruptBatch | None]:
    """CRC-check every batch of ``fd`` in [start, end) (batch boundaries), as recovery does.

    Returns (end of the valid prefix, the first bad batch or None). A batch is bad when its
    header is not a plausible v2 header (length, magic, offsets out of the segment's int32
    range or not below ``limit_offset``), its offsets overlap a neighbour's (see
    :class:`_OffsetChecker`) or its CRC-32C does not match; a batch running past ``end`` counts
    as bad only if ``end`` is where the data ends. With ``data_end`` (the file's data end), the
    header after ``end`` is read too, to find a last batch whose base offset overlaps it.
    """
    pos = start
    checker = _OffsetChecker(base_offset, min_offset, limit_offset, first_last_offset)
    while end - pos >= LOG_OVERHEAD:
        buf = os.pread(fd, min(_RECOVER_CHUNK, end - pos), pos)
        if len(buf) < RECORD_BATCH_OVERHEAD:
            return pos, CorruptBatch(pos, -1, f"{end - pos} bytes left, less than a batch header")
        off = 0
        while len(buf) - off >= RECORD_BATCH_OVERHEAD:
            h = _make_header(_unpack_header(buf, off))
            size = h.batch_length + LOG_OVERHEAD
            found = checker.check(pos, h)
            if found is None and pos + size > end:
                found = CorruptBatch(pos, h.base_offset,
                                     f"batch of {size} bytes runs past the end of the data")
            if found is not None:
                return found.position, found
            if off + size > len(buf):
                if off == 0:
                    buf = os.pread(fd, size, pos)
                    if len(buf) < size:
                        return pos, CorruptBatch(pos, h.base_offset, "short read")
                else:
                    break
            crc = _crc32c.crc32c(memoryview(buf)[off + OFF_ATTRIBUTES : off + size])
            if crc != h.crc:
                return pos, CorruptBatch(
                    pos, h.base_offset, f"CRC mismatch (stored {h.crc:#010x}, computed {crc:#010x})"
                )
            checker.accept(pos, h)
            pos += size
            off += size
    if pos < end:
        return pos, CorruptBatch(pos, -1, f"{end - pos} trailing bytes")
    if data_end is not None and data_end - end >= RECORD_BATCH_OVERHEAD:
        nxt = os.pread(fd, RECORD_BATCH_OVERHEAD, end)
        found = None
        if len(nxt) == RECORD_BATCH_OVERHEAD:
            found = checker.check(end, _make_header(_unpack_header(nxt, 0)))
        if found is not None and found.position < end:  # the last batch checked is to blame
            return found.position, found
    return pos, None


def _header_problem(h: BatchHeader, segment_base: int, expected: int) -> str | None:
    if h.magic != MAGIC_V2:
        return f"magic {h.magic}"
    if h.batch_length < _MIN_BATCH_LENGTH:
        return f"batch length {h.batch_length}"
    if h.base_offset < expected or h.base_offset < segment_base:
        return f"base offset {h.base_offset} below {max(expected, segment_base)}"
    if h.last_offset_delta < 0 or h.records_count < 0:
        return "negative lastOffsetDelta or recordsCount"
    if h.base_offset + h.last_offset_delta - segment_base > INT32_MAX:
        return "offset beyond the segment's int32 range"
    return None


class RecoveryResult(NamedTuple):
    next_offset: int | None  # offset after the last valid batch; None when no batch is valid
    truncated_bytes: int  # bytes dropped from the end of the file
    reason: str | None = None  # what was wrong with the first invalid batch


class LogSegment:
    """A segment's files and in-memory summary. Not thread-safe; the log serializes access."""

    __slots__ = (
        "base_offset",
        "dir",
        "log_path",
        "offset_index",
        "time_index",
        "txn_index",
        "index_interval_bytes",
        "size",
        "version",
        "synced_version",
        "max_timestamp",
        "offset_of_max_timestamp",
        "rolling_base_timestamp",
        "created_ms",
        "bytes_since_last_index_entry",
        "unverified_end",
        "_verified",
        "_file",
    )

    def __init__(
        self,
        dir: Path,
        base_offset: int,
        config: LogConfig,
        created_ms: int,
        *,
        file_suffix: str = "",
    ) -> None:
        self.base_offset = base_offset
        self.dir = dir
        self.log_path = dir / (segment_file_name(base_offset, LOG_SUFFIX) + file_suffix)
        self.offset_index = OffsetIndex(
            dir / (segment_file_name(base_offset, INDEX_SUFFIX) + file_suffix),
            base_offset,
            config.segment_index_bytes,
        )
        self.time_index = TimeIndex(
            dir / (segment_file_name(base_offset, TIME_INDEX_SUFFIX) + file_suffix),
            base_offset,
            config.segment_index_bytes,
        )
        self.txn_index = TxnIndex(dir / segment_file_name(base_offset, TXN_INDEX_SUFFIX))
        self.index_interval_bytes = config.index_interval_bytes
        self.size = 0
        # Bumped (by the appending thread only) on every change to the log or index files;
        # a flush records the version it made durable (``synced_version``, flusher only).
        self.version = 0
        self.synced_version = 0
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.rolling_base_timestamp: int | None = None
        self.created_ms = created_ms
        self.bytes_since_last_index_entry = 0
        #: Bytes [0, unverified_end) were on disk when the segment was opened and have not been
        #: CRC-checked (a clean open, or below the recovery point): reads verify the batches
        #: they return first (``verify_range``). Batches appended or recovered since are known
        #: good. ``_verified`` holds the checked sub-ranges, merged.
        self.unverified_end = 0
        self._verified: list[tuple[int, int]] = []
        self._file: SegmentFile | None = None

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, size={self.size})"

    # -- creation / loading -------------------------------------------------------------------
    @classmethod
    def create(
        cls, dir: Path, base_offset: int, config: LogConfig, now_ms: int, *, file_suffix: str = ""
    ) -> LogSegment:
        seg = cls(dir, base_offset, config, now_ms, file_suffix=file_suffix)
        os.close(open_fd(seg.log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC))
        if file_suffix:  # the cleaner's output: its swap renames all three files
            seg.offset_index.create()
            seg.time_index.create()
        else:  # created with the first batch (write): an unwritten partition has none
            seg.offset_index.defer()
            seg.time_index.defer()
        return seg

    def load(self, *, trust_indexes: bool) -> bool:
        """Pick up an existing segment: sizes and index summaries, without reading the log.

        Returns False when an index is missing or fails its sanity check (the caller then
        calls :meth:`rebuild_indexes` or :meth:`recover`).
        """
        self.size = os.stat(self.log_path).st_size
        empty = self.size == 0  # its index files come with its first batch
        ok = self.offset_index.open_existing(missing_ok=empty) and \
            self.time_index.open_existing(missing_ok=empty)
        ok = ok and self.offset_index.sane(self.size) and self.time_index.sane()
        if not (ok and trust_indexes):
            return False
        last_time = self.time_index.last_entry()
        if last_time is not None:
            self.max_timestamp, self.offset_of_max_timestamp = last_time
        last_off = self.offset_index.last_entry()
        self.bytes_since_last_index_entry = self.size - (last_off[1] if last_off else 0)
        return True

    # -- file handle ----------------------------------------------------------------------------
    def file(self) -> SegmentFile:
        """The open file (opened now if it is not cached); raises OSError (e.g. EMFILE)."""
        f = self._file
        if f is None:
            f = self._file = SegmentFile(self.log_path, create=False)
        FILE_CACHE.touch(self)
        return f

    def drop_handle(self) -> None:
        """The handle cache evicted this segment's file (readers holding it keep it open)."""
        self._file = None

    def file_for_sync(self) -> SegmentFile | None:
        """The open file, or a fresh one not cached here (so fsync never grows the open set);
        None if the segment has been deleted meanwhile."""
        f = self._file
        if f is not None:
            return f
        try:
            return SegmentFile(self.log_path, create=False)
        except FileNotFoundError:
            return None

    @property
    def is_open(self) -> bool:
        return self._file is not None

    def release(self) -> None:
        """Drop the open file and the in-memory indexes (inactive segments only)."""
        self._file = None
        FILE_CACHE.forget(self)
        self.offset_index.unload()
        self.time_index.unload()

    # -- scanning -----------------------------------------------------------------------------
    def scan(self, start: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each batch from ``start`` (a batch boundary) up to ``end``."""
        f = self.file()  # held for the whole iteration: the descriptor stays valid
        yield from scan_file(f.fd, start, self.size if end is None else end)

    def translate(self, offset: int, start: int = 0) -> tuple[int, BatchHeader] | None:
        """The first batch whose last offset is >= ``offset`` (at position >= ``start``)."""
        pos = max(start, self.offset_index.lookup(offset)[1])
        for p, h in self.scan(pos):
            if h.base_offset + h.last_offset_delta >= offset:
                return p, h
        return None

    def boundary_at_or_before(self, limit: int, start: int) -> int:
        """The largest batch end position <= ``limit``, scanning forward from ``start``."""
        if limit >= self.size:
            return self.size
        pos = max(start, self.offset_index.lookup_position(limit))
        for p, h in self.scan(pos):
            end = p + h.batch_length + LOG_OVERHEAD
            if end > limit:
                return p
            pos = end
        return pos

    def first_header(self) -> BatchHeader | None:
        for _, h in self.scan(0):
            return h
        return None

    def read_next_offset(self) -> int | None:
        """Offset after the last batch (from the last index entry onwards); None if empty."""
        last = self.offset_index.last_entry()
        nxt: int | None = None
        for _, h in self.scan(last[1] if last else 0):
            nxt = h.base_offset + h.last_offset_delta + 1
        return nxt

    # -- verification of data that was on disk at open ----------------------------------------
    def mark_unverified(self) -> None:
        """Everything now in the file is unchecked (opened without a recovery scan)."""
        self.unverified_end = self.size
        self._verified = []

    def verify_range(
        self, start: int, end: int, limit_offset: int | None = None, *, anchor: bool = True
    ) -> tuple[int, CorruptBatch | None]:
        """CRC-check the batches in [start, end) that are not known good yet.

        ``start`` and ``end`` are batch boundaries; ``limit_offset`` is the next segment's base
        offset (None for the last segment). The check starts at the offset-index entry at or
        below ``start`` (its last offset anchors the base offsets, which the CRC does not
        cover). Returns (end of the valid prefix, the bad batch or None); the prefix may end
        before ``start`` when a batch before it is the damaged one. ``anchor=False``: start
        at ``start`` itself. Checked ranges are remembered, so each byte is checked once.
        """
        entry = self.offset_index.entry_at_or_below_position(start) if start and anchor else None
        if start and not anchor:
            entry = (-1, start)
        pos = entry[1] if entry is not None else 0
        first_last: int | None = entry[0] if entry is not None and entry[0] >= 0 else None
        stop = min(end, self.unverified_end)
        for a, b in self._verified:
            if b <= pos:
                continue
            if a > pos:
                break
            pos, first_last = b, None  # pos lies in a checked range: skip to its end
        if pos >= stop:
            return end, None
        # check up to the next checked range (or the end), then continue from there
        nxt = next((a for a, _b in self._verified if a > pos), stop)
        f = self.file()
        good, bad = check_batches(
            f.fd, pos, min(nxt, stop), self.base_offset,
            limit_offset=limit_offset, first_last_offset=first_last, data_end=self.size,
        )
        self._add_verified(pos, good)
        if bad is not None:
            return good, bad
        if min(nxt, stop) < stop:
            return self.verify_range(min(nxt, stop), end, limit_offset, anchor=False)
        return end, None

    def _add_verified(self, a: int, b: int) -> None:
        if b <= a:
            return
        spans = sorted([*self._verified, (a, b)])
        merged: list[tuple[int, int]] = []
        for x, y in spans:
            if merged and x <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], y))
            else:
                merged.append((x, y))
        if merged and merged[0][0] <= 0 and merged[0][1] >= self.unverified_end:
            self.unverified_end = 0  # all of it checked: reads go straight to sendfile
            merged = []
        self._verified = merged

    # -- appending ----------------------------------------------------------------------------
    def write(self, chunks: list[memoryview], headers: list[BatchHeader]) -> None:
        """Append ``chunks`` (whole batches, in order, described by ``headers``)."""
        fd = self.file().fd
        start = self.size
        if start == 0:  # the first batch: the deferred index files now (Kafka-like layout)
            self.offset_index.materialize()
            self.time_index.materialize()
        total = sum(len(c) for c in chunks)
        try:
            written = os.writev(fd, chunks) if len(chunks) > 1 else os.write(fd, chunks[0])
            while written < total:
                # Short write (rare on regular files): write the rest from where it stopped.
                rest = memoryview(b"".join(bytes(c) for c in chunks))[written:]
                written += os.write(fd, rest)
        except OSError:
            os.ftruncate(fd, start)
            raise
        self._on_appended(start, headers)

    def _on_appended(self, pos: int, headers: list[BatchHeader]) -> None:
        if self.size == 0 and headers:
            self.rolling_base_timestamp = headers[0].max_timestamp
        interval = self.index_interval_bytes
        oi = self.offset_index
        ti = self.time_index
        for h in headers:
            last = h.base_offset + h.last_offset_delta
            if h.max_timestamp > self.max_timestamp:
                self.max_timestamp = h.max_timestamp
                self.offset_of_max_timestamp = last
            if self.bytes_since_last_index_entry > interval:
                oi.append(last, pos)
                ti.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
                self.bytes_since_last_index_entry = 0
            size = h.batch_length + LOG_OVERHEAD
            pos += size
            self.bytes_since_last_index_entry += size
        self.size = pos
        self.version += 1

    def indexes_full(self) -> bool:
        return self.offset_index.is_full or self.time_index.is_full

    def finalize(self) -> None:
        """On roll / close: record the segment's max timestamp in the time index, stop writing."""
        if self.max_timestamp >= 0 and self.offset_of_max_timestamp >= 0:
            before = self.time_index.entries
            self.time_index.maybe_append(
                self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True
            )
            if self.time_index.entries != before:
                self.version += 1
        self.offset_index.close_writer()
        self.time_index.close_writer()

    def open_for_append(self) -> None:
        self.offset_index.open_writer()
        self.time_index.open_writer()
        if self.rolling_base_timestamp is None and self.size:
            first = self.first_header()
            self.rolling_base_timestamp = first.max_timestamp if first else None

    # -- durability -----------------------------------------------------------------------------
    def mark_synced(self, version: int) -> None:
        """Everything written up to ``version`` was made durable by other means (a
        ``syncfs`` of the file system): what :meth:`fsync_indexes` and an fsync record."""
        self.offset_index.mark_synced()
        self.time_index.mark_synced()
        if version > self.synced_version:
            self.synced_version = version

    def fsync_indexes(self) -> None:
        for idx in (self.offset_index, self.time_index):
            try:
                idx.fsync()
            except FileNotFoundError:
                pass
        self.txn_index.fsync()

    # -- rebuilding -----------------------------------------------------------------------------
    def rebuild_indexes(self) -> int | None:
        """Recreate both indexes from the log's batch headers. Returns the next offset."""
        self.max_timestamp = self.offset_of_max_timestamp = -1
        self.bytes_since_last_index_entry = 0
        off_buf = bytearray()
        time_buf = bytearray()
        nxt: int | None = None
        for pos, h in self.scan(0):
            nxt = self._index_batch(pos, h, off_buf, time_buf)
        self._install_indexes(off_buf, time_buf)
        return nxt

    def _index_batch(self, pos: int, h: BatchHeader, off_buf: bytearray, time_buf: bytearray) -> int:
        base = self.base_offset
        last = h.base_offset + h.last_offset_delta
        if pos == 0:
            self.rolling_base_timestamp = h.max_timestamp
        if h.max_timestamp > self.max_timestamp:
            self.max_timestamp = h.max_timestamp
            self.offset_of_max_timestamp = last
        if self.bytes_since_last_index_entry > self.index_interval_bytes:
            off_buf += OFFSET_ENTRY.pack(last - base, pos)
            if not time_buf or TIME_ENTRY.unpack_from(time_buf, len(time_buf) - 12)[0] < self.max_timestamp:
                time_buf += TIME_ENTRY.pack(self.max_timestamp, self.offset_of_max_timestamp - base)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += h.batch_length + LOG_OVERHEAD
        return last + 1

    def _install_indexes(self, off_buf: bytearray, time_buf: bytearray) -> None:
        max_off = self.offset_index.max_entries * OFFSET_ENTRY.size
        max_time = self.time_index.max_entries * TIME_ENTRY.size
        del off_buf[max_off:]
        del time_buf[max_time:]
        # As on roll/close: the segment's largest timestamp always has an entry, so a clean
        # open can take a segment's max timestamp from the last time index entry.
        if self.max_timestamp >= 0 and (
            not time_buf or TIME_ENTRY.unpack_from(time_buf, len(time_buf) - 12)[0] < self.max_timestamp
        ):
            time_buf += TIME_ENTRY.pack(self.max_timestamp, self.offset_of_max_timestamp - self.base_offset)
        if self.size == 0 and not off_buf and not time_buf:
            for idx in (self.offset_index, self.time_index):
                if idx.deferred or not idx.path.exists():
                    idx.defer()  # an empty segment's files come with its first batch
                else:
                    idx.replace_all(b"")
        else:
            self.offset_index.replace_all(off_buf)
            self.time_index.replace_all(time_buf)
        self.version += 1

    def recover(self, min_offset: int, limit_offset: int | None = None) -> RecoveryResult:
        """Validate every batch (header sanity + CRC-32C), truncate at the first bad one, and
        rebuild the indexes. ``min_offset``: batches must start at or after this offset;
        ``limit_offset`` (the next segment's base offset): and end before it."""
        self.size = os.stat(self.log_path).st_size
        fd = self.file().fd
        file_size = self.size
        self.max_timestamp = self.offset_of_max_timestamp = -1
        self.bytes_since_last_index_entry = 0
        self.rolling_base_timestamp = None
        off_buf = bytearray()
        time_buf = bytearray()
        checker = _OffsetChecker(self.base_offset, max(min_offset, self.base_offset), limit_offset)
        valid_end, nxt, reason, blamed = self._recover_batches(fd, file_size, checker, off_buf,
                                                               time_buf)
        if blamed is not None:
            # the previous batch's base offset is the damaged one: cut there and rescan
            os.ftruncate(fd, blamed.position)
            again = self.recover(min_offset, limit_offset)
            return RecoveryResult(
                again.next_offset, file_size - self.size,
                f"batch at position {blamed.position} (offset {blamed.base_offset}): "
                f"{blamed.reason}",
            )
        truncated = file_size - valid_end
        if truncated:
            if reason is None:
                reason = f"{truncated} trailing bytes at position {valid_end} (torn write)"
            os.ftruncate(fd, valid_end)
        else:
            reason = None
        self.size = valid_end
        self.unverified_end = 0
        self._verified = []
        self._install_indexes(off_buf, time_buf)
        return RecoveryResult(nxt, truncated, reason)

    def _recover_batches(
        self, fd: int, file_size: int, checker: _OffsetChecker, off_buf: bytearray,
        time_buf: bytearray,
    ) -> tuple[int, int | None, str | None, CorruptBatch | None]:
        """Check the batches from the start of the file, indexing the good ones, up to the
        first bad one. Returns (end of the good batches, the offset after them, what is wrong
        with the first bad one, the PREVIOUS batch when it is the one to blame)."""
        pos = 0
        buf = b""
        buf_start = 0
        nxt: int | None = None
        while file_size - pos >= RECORD_BATCH_OVERHEAD:
            off = pos - buf_start
            if off + RECORD_BATCH_OVERHEAD > len(buf):
                buf = os.pread(fd, min(_RECOVER_CHUNK, file_size - pos), pos)
                buf_start, off = pos, 0
                if len(buf) < RECORD_BATCH_OVERHEAD:
                    break
            h = _make_header(_unpack_header(buf, off))
            size = h.batch_length + LOG_OVERHEAD
            found = checker.check(pos, h)
            if found is not None and found.position < pos:
                return pos, nxt, None, found
            reason = found.reason if found is not None else None
            if reason is None and pos + size > file_size:
                reason = f"batch of {size} bytes runs past the end of the file (torn write)"
            if reason is not None:
                return pos, nxt, f"batch at position {pos} (offset {h.base_offset}): {reason}", None
            if off + size > len(buf):
                buf = os.pread(fd, max(size, min(_RECOVER_CHUNK, file_size - pos)), pos)
                buf_start, off = pos, 0
                if len(buf) < size:
                    return pos, nxt, f"short read at position {pos}", None
            crc = _crc32c.crc32c(memoryview(buf)[off + OFF_ATTRIBUTES : off + size])
            if crc != h.crc:
                return pos, nxt, (
                    f"batch at position {pos} (offset {h.base_offset}): CRC mismatch "
                    f"(stored {h.crc:#010x}, computed {crc:#010x})"
                ), None
            nxt = self._index_batch(pos, h, off_buf, time_buf)
            checker.accept(pos, h)
            pos += size
        return pos, nxt, None, None

    def truncate_to(self, offset: int) -> int:
        """Remove the batch containing ``offset`` and everything after it. Returns bytes removed."""
        found = self.translate(offset)
        if found is None:
            return 0
        pos = found[0]
        removed = self.size - pos
        os.ftruncate(self.file().fd, pos)
        self.size = pos
        if self.unverified_end > pos:  # what is appended later is checked on the way in
            self.unverified_end = pos
            self._verified = [(a, min(b, pos)) for a, b in self._verified if a < pos]
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.version += 1
        # Recompute the max timestamp: the last surviving time entry, then the batches after it.
        last_time = self.time_index.last_entry()
        if last_time is not None:
            self.max_timestamp, self.offset_of_max_timestamp = last_time
            start = self.offset_index.lookup(last_time[1])[1]
        else:
            self.max_timestamp = self.offset_of_max_timestamp = -1
            start = 0
        for _, h in self.scan(start):
            if h.max_timestamp > self.max_timestamp:
                self.max_timestamp = h.max_timestamp
                self.offset_of_max_timestamp = h.base_offset + h.last_offset_delta
        last_off = self.offset_index.last_entry()
        self.bytes_since_last_index_entry = pos - (last_off[1] if last_off else 0)
        if pos == 0:
            self.rolling_base_timestamp = None
        return removed

    # -- deletion -------------------------------------------------------------------------------
    def delete_files(self) -> None:
        self._file = None
        FILE_CACHE.forget(self)
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()
        try:
            os.unlink(self.log_path)
        except FileNotFoundError:
            pass
