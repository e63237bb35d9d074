"""Kafka's text checkpoint files, written atomically.

Format (Kafka's ``CheckpointFile``): a version line (``0``), a line with the entry count, then
one entry per line with space-separated fields. Used for the log-dir level
``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint`` and
``replication-offset-checkpoint`` (entries ``topic partition offset``) and the per-partition
``leader-epoch-checkpoint`` (entries ``epoch start_offset``).

Writes go to ``<name>.tmp``, are fsynced, renamed over the target, and the directory is fsynced,
so a crash leaves either the old or the new file, never a torn one (Kafka does the same).
``sync=False`` overwrites the file in place, without a temporary file, a rename or an fsync:
for files whose loss or a torn copy is recovered from elsewhere (a leader epoch checkpoint is
rebuilt from the batches), made durable later by the log's next flush or by one
:func:`syncfs` for many files. On ext4 a rename over an existing file forces the new file's
blocks out at once (``auto_da_alloc``): 1.5-2 ms per file on a busy disk, against 0.05 ms for
the write in place. A torn file fails the entry-count check and reads as corrupt.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

__all__ = [
    "CorruptCheckpointError",
    "fsync_dir",
    "syncfs",
    "read_checkpoint",
    "write_checkpoint",
    "write_checkpoint_bytes",
    "read_offsets_checkpoint",
    "write_offsets_checkpoint",
    "read_epoch_checkpoint",
    "write_epoch_checkpoint",
]

CHECKPOINT_VERSION = 0


class CorruptCheckpointError(ValueError):
    """A checkpoint file that does not follow the format."""


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_libc: ctypes.CDLL | None = None


def syncfs(path: Path) -> None:
    """Make everything written to the file system holding ``path`` durable: one
    ``syncfs(2)`` instead of an fsync per file and directory, when thousands of logs change at
    once (creation, a clean shutdown, recovery). Falls back to ``sync(2)``."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    fn = getattr(_libc, "syncfs", None)
    if fn is None:
        os.sync()
        return
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if fn(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"syncfs {path}: {os.strerror(err)}")
    finally:
        os.close(fd)


def read_checkpoint(path: Path, fields: int) -> list[list[str]] | None:
    """The entries of a checkpoint file (each a list of ``fields`` strings), None if absent."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    lines = text.splitlines()
    if len(lines) < 2:
        raise CorruptCheckpointError(f"{path}: missing version or count line")
    try:
        version = int(lines[0].strip())
        count = int(lines[1].strip())
    except ValueError:
        raise CorruptCheckpointError(f"{path}: malformed header") from None
    if version != CHECKPOINT_VERSION:
        raise CorruptCheckpointError(f"{path}: unknown version {version}")
    body = [ln for ln in lines[2:] if ln.strip()]
    if len(body) != count:
        raise CorruptCheckpointError(f"{path}: expected {count} entries, found {len(body)}")
    out: list[list[str]] = []
    for ln in body:
        parts = ln.split()
        if len(parts) != fields:
            raise CorruptCheckpointError(f"{path}: malformed entry {ln!r}")
        out.append(parts)
    return out


def write_checkpoint(
    path: Path, entries: Iterable[Iterable[object]], *, sync: bool = True
) -> None:
    rows = [" ".join(str(f) for f in e) for e in entries]
    data = "\n".join([str(CHECKPOINT_VERSION), str(len(rows)), *rows]) + "\n"
    if not sync:
        _write_in_place(path, data.encode("utf-8"))
        return
    write_checkpoint_bytes(path, data.encode("utf-8"))


def write_checkpoint_bytes(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` durably: ``<name>.tmp`` written and fsynced, renamed over
    the target, the directory fsynced (Kafka's ``CheckpointFile``)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def _write_in_place(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        view = memoryview(data)
        pos = 0
        while pos < len(data):
            pos += os.pwrite(fd, view[pos:], pos)
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)


def read_offsets_checkpoint(path: Path) -> dict[tuple[str, int], int] | None:
    """``topic partition offset`` entries keyed by (topic, partition); None if absent."""
    rows = read_checkpoint(path, 3)
    if rows is None:
        return None
    out: dict[tuple[str, int], int] = {}
    for topic, partition, offset in rows:
        try:
            out[(topic, int(partition))] = int(offset)
        except ValueError:
            raise CorruptCheckpointError(f"{path}: malformed entry {topic} {partition}") from None
    return out


def write_offsets_checkpoint(path: Path, offsets: Mapping[tuple[str, int], int]) -> None:
    write_checkpoint(path, ((t, p, o) for (t, p), o in sorted(offsets.items())))


def read_epoch_checkpoint(path: Path) -> list[tuple[int, int]] | None:
    """``epoch start_offset`` entries in file order; None if absent."""
    rows = read_checkpoint(path, 2)
    if rows is None:
        return None
    try:
        return [(int(e), int(o)) for e, o in rows]
    except ValueError:
        raise CorruptCheckpointError(f"{path}: malformed entry") from None


def write_epoch_checkpoint(
    path: Path, entries: Iterable[tuple[int, int]], *, sync: bool = True
) -> None:
    write_checkpoint(path, entries, sync=sync)
