"""Sparse segment indexes in Kafka's on-disk format.

``<base>.index`` (offset index): 8-byte entries ``int32 relative offset, int32 file position``,
big-endian. An entry (o, p) says: the batch whose LAST offset is o starts at position p. Entries
are added at most every ``index.interval.bytes`` of batches, so a lookup finds the nearest entry
at or below the target and the caller scans a few batch headers forward from there.

``<base>.timeindex`` (time index): 12-byte entries ``int64 timestamp, int32 relative offset``.
An entry (t, o) says: the largest batch timestamp seen up to and including the batch whose last
offset is o is t, and o's batch is where t was first reached. Entries have strictly increasing
timestamps, so earlier batches all have timestamps below t, and a search for the first record
with timestamp >= x can start at the batch of the last entry with timestamp <= x.

Files are not preallocated (Kafka preallocates ``segment.index.bytes`` and trims on close; a
trimmed file is exactly what we write). The in-memory copy is a ``bytearray`` of the file,
loaded on first use and searched with ``struct.unpack_from`` (a binary search costs ~20 unpacks
at a million entries). Inactive segments may drop it (``unload``) and reload on demand.

Indexes are derived data: on any sign of damage the segment rebuilds them from its log file.
"""

from __future__ import annotations

import bisect
import os
import struct
from pathlib import Path
from typing import ClassVar

from log.file_cache import FILE_CACHE, OpenFile, open_fd

__all__ = ["OffsetIndex", "TimeIndex", "OFFSET_ENTRY", "TIME_ENTRY"]

OFFSET_ENTRY = struct.Struct(">ii")
TIME_ENTRY = struct.Struct(">qi")
_INT32_MAX = 0x7FFFFFFF


class _Index:
    ENTRY: ClassVar[struct.Struct]

    __slots__ = (
        "path", "base_offset", "max_entries", "_buf", "_entries", "_first", "_last", "_writer",
        "_wfile", "_changes", "_synced_changes", "_deferred",
    )

    def __init__(self, path: Path, base_offset: int, max_bytes: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_bytes // self.ENTRY.size)
        self._buf: bytearray | None = None
        self._entries = 0
        self._first: tuple[int, int] | None = None  # decoded (absolute) first entry
        self._last: tuple[int, int] | None = None  # decoded (absolute) last entry
        #: the index of the active segment: its entries stay in memory, appends go to the file
        self._writer = False
        #: the append handle, opened on the first append and kept while the file cache keeps it
        self._wfile: OpenFile | None = None
        #: changes to the file (bumped by the owning thread) and the count the last fsync
        #: covered (set by the flushing thread): an unchanged index is not fsynced again
        self._changes = 0
        self._synced_changes = 0
        #: the index of an empty segment whose file is not created yet (:meth:`defer`)
        self._deferred = False

    # -- decoding ---------------------------------------------------------------------------
    def _decode(self, raw: tuple[int, int]) -> tuple[int, int]:
        raise NotImplementedError

    def _encode(self, entry: tuple[int, int]) -> bytes:
        raise NotImplementedError

    def _entry(self, buf: bytearray, i: int) -> tuple[int, int]:
        return self._decode(self.ENTRY.unpack_from(buf, i * self.ENTRY.size))

    # -- lifecycle --------------------------------------------------------------------------
    def create(self) -> None:
        """Start an empty index file (replacing any existing one)."""
        self.close_writer()
        os.close(open_fd(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC))
        self._changes += 1
        self._buf = bytearray()
        self._entries = 0
        self._first = self._last = None

    def defer(self) -> None:
        """An empty index whose file is created only with its segment's first batch
        (:meth:`materialize`): a partition that is never written costs no index files. A
        stale file of that name (a crash leftover) is removed."""
        self.close_writer()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        self._buf = bytearray()
        self._entries = 0
        self._first = self._last = None
        self._deferred = True

    def materialize(self) -> None:
        """Create the file of a deferred index (before its segment's first batch is written)."""
        if self._deferred:
            os.close(open_fd(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC))
            self._deferred = False
            self._changes += 1

    @property
    def deferred(self) -> bool:
        return self._deferred

    def open_existing(self, *, missing_ok: bool = False) -> bool:
        """Read size, first and last entry of an existing file. False if malformed, or if
        missing unless ``missing_ok`` (an empty segment's index not created yet: deferred)."""
        size_of = self.ENTRY.size
        try:
            fd = open_fd(self.path, os.O_RDONLY)
        except FileNotFoundError:
            if missing_ok:
                self.defer()
            return missing_ok
        try:
            size = os.fstat(fd).st_size
            if size % size_of:
                return False
            n = size // size_of
            first = last = None
            if n:
                raw = os.pread(fd, size_of, 0)
                first = self._decode(self.ENTRY.unpack(raw))
                raw = os.pread(fd, size_of, size - size_of)
                last = self._decode(self.ENTRY.unpack(raw))
        finally:
            os.close(fd)
        self._buf = None
        self._entries = n
        self._first, self._last = first, last
        return True

    def load(self) -> bytearray:
        """The whole index in memory (read once)."""
        buf = self._buf
        if buf is None and self._deferred:
            buf = self._buf = bytearray()
        if buf is None:
            with open(self.path, "rb") as f:
                data = f.read()
            size_of = self.ENTRY.size
            usable = len(data) - len(data) % size_of
            buf = self._buf = bytearray(data[:usable])
            self._entries = usable // size_of
            self._first = self._entry(buf, 0) if self._entries else None
            self._last = self._entry(buf, self._entries - 1) if self._entries else None
        return buf

    def unload(self) -> None:
        if not self._writer:
            self._buf = None

    def open_writer(self) -> None:
        """Become the active segment's index (the file itself is opened on first append)."""
        if not self._writer:
            self.load()
            self._writer = True

    def close_writer(self) -> None:
        self._writer = False
        self.drop_handle()
        FILE_CACHE.forget(self)

    def drop_handle(self) -> None:
        """Called by the file cache: forget the append handle (reopened on the next append)."""
        self._wfile = None

    def _write_handle(self) -> OpenFile:
        f = self._wfile
        if f is None:
            f = self._wfile = OpenFile(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        FILE_CACHE.touch(self)
        return f

    def mark_synced(self) -> None:
        """The file was made durable by other means (``syncfs``)."""
        self._synced_changes = self._changes

    def fsync(self) -> None:
        """fsync the file if it changed since the last fsync (an index opened from disk, or
        rebuilt identical by recovery, is not: a lost index write only loses entries of a
        sparse index, and a torn one is rebuilt)."""
        changes = self._changes
        if changes == self._synced_changes:
            return
        fd = open_fd(self.path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self._synced_changes = changes

    def delete(self) -> None:
        self.close_writer()
        self._buf = None
        self._deferred = False
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    # -- state ------------------------------------------------------------------------------
    @property
    def entries(self) -> int:
        return self._entries

    @property
    def is_full(self) -> bool:
        return self._entries >= self.max_entries

    def first_entry(self) -> tuple[int, int] | None:
        return self._first

    def last_entry(self) -> tuple[int, int] | None:
        return self._last

    def raw_bytes(self) -> bytes:
        return bytes(self.load())

    # -- mutation ---------------------------------------------------------------------------
    def _append(self, entry: tuple[int, int]) -> None:
        """Add an entry. An index is sparse, so an entry that cannot be written (no descriptor
        left, disk full) is skipped, in memory too: the file stays a valid index and lookups scan
        a little further (the batches it describes are already in the log file)."""
        data = self._encode(entry)
        buf = self.load()
        self._writer = True
        self._deferred = False  # the append handle creates the file
        try:
            written = os.write(self._write_handle().fd, data)
        except OSError:
            return
        if written != len(data):  # a torn entry (full disk): cut it off again
            try:
                os.truncate(self.path, len(buf))
            except OSError:
                pass
            return
        self._changes += 1
        buf += data
        self._entries += 1
        if self._first is None:
            self._first = entry
        self._last = entry

    def _truncate_entries(self, n: int) -> None:
        """Keep the first n entries."""
        buf = self.load()
        if n >= self._entries:
            return
        size_of = self.ENTRY.size
        del buf[n * size_of :]
        os.truncate(self.path, n * size_of)
        self._changes += 1
        self._entries = n
        self._first = self._entry(buf, 0) if n else None
        self._last = self._entry(buf, n - 1) if n else None

    def replace_all(self, data: bytes | bytearray) -> None:
        """Rewrite the file with ``data`` (encoded entries), e.g. after a rebuild; a file that
        already holds exactly that is left alone (recovery after a kill -9, mostly)."""
        self.close_writer()
        self._deferred = False
        if self._holds(data):
            buf = self._buf = bytearray(data)
            n = self._entries = len(buf) // self.ENTRY.size
            self._first = self._entry(buf, 0) if n else None
            self._last = self._entry(buf, n - 1) if n else None
            return
        self._changes += 1
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        buf = self._buf = bytearray(data)
        n = self._entries = len(buf) // self.ENTRY.size
        self._first = self._entry(buf, 0) if n else None
        self._last = self._entry(buf, n - 1) if n else None


    def _holds(self, data: bytes | bytearray) -> bool:
        try:
            with open(self.path, "rb") as f:
                return f.read(len(data) + 1) == data
        except OSError:
            return False


class OffsetIndex(_Index):
    """``.index``: (absolute last offset of a batch, its file position)."""

    ENTRY = OFFSET_ENTRY
    __slots__ = ()

    def _decode(self, raw: tuple[int, int]) -> tuple[int, int]:
        return (self.base_offset + raw[0], raw[1])

    def _encode(self, entry: tuple[int, int]) -> bytes:
        return OFFSET_ENTRY.pack(entry[0] - self.base_offset, entry[1])

    def sane(self, segment_size: int) -> bool:
        first, last = self._first, self._last
        if first is None or last is None:
            return True
        return (
            self.base_offset <= first[0] <= last[0]
            and last[0] - self.base_offset <= _INT32_MAX
            and 0 <= first[1] <= last[1] < max(segment_size, 1)
        )

    def append(self, offset: int, position: int) -> None:
        last = self._last
        if last is not None and (offset <= last[0] or position <= last[1]):
            return
        self._append((offset, position))

    def lookup(self, offset: int) -> tuple[int, int]:
        """Largest entry with offset <= ``offset``, or (base_offset, 0)."""
        last = self._last
        if last is not None and last[0] <= offset:
            return last
        buf = self.load()
        n = self._entries
        rel = offset - self.base_offset
        unpack = OFFSET_ENTRY.unpack_from
        i = bisect.bisect_right(range(n), rel, key=lambda j: unpack(buf, j * 8)[0]) - 1
        if i < 0:
            return (self.base_offset, 0)
        return self._entry(buf, i)

    def lookup_position(self, position: int) -> int:
        """Largest indexed batch start <= ``position`` (0 if none)."""
        last = self._last
        if last is not None and last[1] <= position:
            return last[1]
        buf = self.load()
        unpack = OFFSET_ENTRY.unpack_from
        i = bisect.bisect_right(range(self._entries), position, key=lambda j: unpack(buf, j * 8)[1])
        return 0 if i == 0 else int(unpack(buf, (i - 1) * 8)[1])

    def entry_at_or_below_position(self, position: int) -> tuple[int, int] | None:
        """The last entry (offset, position) whose position is <= ``position``, or None."""
        last = self._last
        if last is not None and last[1] <= position:
            return last
        if last is None:
            return None
        buf = self.load()
        unpack = OFFSET_ENTRY.unpack_from
        i = bisect.bisect_right(range(self._entries), position, key=lambda j: unpack(buf, j * 8)[1])
        return None if i == 0 else self._entry(buf, i - 1)

    def first_at_or_after_position(self, position: int) -> int | None:
        """The offset of the first entry whose position is >= ``position`` (Kafka's
        ``fetchUpperBoundOffset``), None if there is none."""
        last = self._last
        if last is None or last[1] < position:
            return None
        buf = self.load()
        unpack = OFFSET_ENTRY.unpack_from
        i = bisect.bisect_left(range(self._entries), position, key=lambda j: unpack(buf, j * 8)[1])
        return self._entry(buf, i)[0]

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose offset is >= ``offset``."""
        buf = self.load()
        unpack = OFFSET_ENTRY.unpack_from
        rel = offset - self.base_offset
        n = bisect.bisect_left(range(self._entries), rel, key=lambda j: unpack(buf, j * 8)[0])
        self._truncate_entries(n)


class TimeIndex(_Index):
    """``.timeindex``: (timestamp, absolute last offset of the batch that reached it)."""

    ENTRY = TIME_ENTRY
    __slots__ = ()

    def _decode(self, raw: tuple[int, int]) -> tuple[int, int]:
        return (raw[0], self.base_offset + raw[1])

    def _encode(self, entry: tuple[int, int]) -> bytes:
        return TIME_ENTRY.pack(entry[0], entry[1] - self.base_offset)

    def sane(self) -> bool:
        first, last = self._first, self._last
        if first is None or last is None:
            return True
        return (
            first[0] <= last[0]
            and self.base_offset <= first[1] <= last[1]
            and last[1] - self.base_offset <= _INT32_MAX
        )

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Add (timestamp, offset) if the timestamp is larger than the last entry's."""
        if not skip_full_check and self.is_full:
            return
        last = self._last
        if last is not None and (timestamp <= last[0] or offset < last[1]):
            return
        self._append((timestamp, offset))

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """Last entry with timestamp <= ``timestamp``, or (-1, base_offset)."""
        buf = self.load()
        unpack = TIME_ENTRY.unpack_from
        i = bisect.bisect_right(range(self._entries), timestamp, key=lambda j: unpack(buf, j * 12)[0])
        if i == 0:
            return (-1, self.base_offset)
        return self._entry(buf, i - 1)

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose offset is >= ``offset``."""
        buf = self.load()
        unpack = TIME_ENTRY.unpack_from
        rel = offset - self.base_offset
        n = bisect.bisect_left(range(self._entries), rel, key=lambda j: unpack(buf, j * 12)[1])
        self._truncate_entries(n)
