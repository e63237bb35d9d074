"""Metadata snapshot files in ``__cluster_metadata-0``: when to take one, writing, loading,
and the log cleaning that follows, as Kafka's KafkaMetadataLog and SnapshotGenerator do.

- A snapshot is taken once ``metadata.log.max.record.bytes.between.snapshots`` (20 MiB) of
  record batches were committed since the last one, or once
  ``metadata.log.max.snapshot.interval.ms`` (1 hour; 0 disables it) passed with at least one
  new batch. The image is immutable, so the file is encoded and written off the event loop:
  ``<name>.checkpoint.part`` is written, fsynced and renamed to ``<name>.checkpoint``
  (read-only, as Kafka leaves it), then the directory is fsynced.
- Cleaning (``KafkaMetadataLog.maybeClean``): with two snapshots or more, the oldest is dropped
  while the log plus the snapshots exceed ``metadata.max.retention.bytes`` (100 MiB) or its
  last contained record is older than ``metadata.max.retention.ms`` (7 days); the log start
  offset moves up to the next snapshot and the segments entirely below it are deleted.
- On start ``.part`` and ``.deleted`` leftovers are removed, snapshots below the log start
  offset are deleted, and the newest snapshot is loaded. A snapshot that does not decode
  (truncated, corrupt) is skipped for an older valid one or a replay of the whole log when the
  log still holds the records it covers; otherwise start-up stops with
  ``MetadataLoadError`` naming the file.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kraft.image import MetadataImage
from kraft.image_writer import image_records
from kraft.snapshot import (
    DELETED_SUFFIX,
    PARTIAL_SUFFIX,
    SnapshotContents,
    SnapshotError,
    SnapshotId,
    decode_snapshot,
    encode_snapshot,
)
from log.checkpoint import fsync_dir
from protocol._generated.voters_record import VotersRecord

log = logging.getLogger("kafkawire.metadata")


class MetadataLoadError(Exception):
    """The metadata log cannot be loaded (a corrupt snapshot with nothing to fall back on)."""


@dataclass(frozen=True)
class SnapshotSettings:
    """Kafka's property names and defaults."""

    #: metadata.log.max.record.bytes.between.snapshots
    max_bytes_between_snapshots: int = 20 * 1024 * 1024
    #: metadata.log.max.snapshot.interval.ms (0: no time-based snapshots)
    max_interval_ms: int = 3_600_000
    #: metadata.max.retention.bytes (-1: no size limit)
    retention_bytes: int = 100 * 1024 * 1024
    #: metadata.max.retention.ms (-1: no time limit)
    retention_ms: int = 7 * 24 * 3_600_000

    @staticmethod
    def from_config(values: dict[str, Any]) -> SnapshotSettings:
        return SnapshotSettings(
            int(values["metadata.log.max.record.bytes.between.snapshots"]),
            int(values["metadata.log.max.snapshot.interval.ms"]),
            int(values["metadata.max.retention.bytes"]),
            int(values["metadata.max.retention.ms"]),
        )


class SnapshotStore:
    """The ``.checkpoint`` files of one metadata log directory."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory

    def recover(self) -> None:
        for p in self.dir.iterdir():
            if p.name.endswith((PARTIAL_SUFFIX, DELETED_SUFFIX)):
                p.unlink(missing_ok=True)

    def snapshot_ids(self) -> list[SnapshotId]:
        ids = [SnapshotId.parse(p.name) for p in self.dir.iterdir()]
        return sorted(i for i in ids if i is not None)

    def path(self, sid: SnapshotId) -> Path:
        return self.dir / sid.file_name

    def read(self, sid: SnapshotId) -> SnapshotContents:
        return decode_snapshot(self.path(sid).read_bytes(), sid)

    def size(self, sid: SnapshotId) -> int:
        return self.path(sid).stat().st_size

    def write(self, sid: SnapshotId, data: bytes) -> Path:
        final = self.path(sid)
        part = self.dir / (final.name + ".part")
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(part, 0o400)
        os.replace(part, final)
        fsync_dir(self.dir)
        return final

    # ---- FetchSnapshot (KIP-630): the leader reads chunks, a follower assembles a .part ----
    def read_chunk(self, sid: SnapshotId, position: int, max_bytes: int) -> bytes:
        """Up to ``max_bytes`` of the snapshot from ``position`` (a FetchSnapshot answer)."""
        with open(self.path(sid), "rb") as f:
            f.seek(position)
            return f.read(max_bytes)

    def _part(self, sid: SnapshotId) -> Path:
        return self.dir / (sid.file_name + ".part")

    def append_part(self, sid: SnapshotId, position: int, data: bytes) -> int:
        """Add a received chunk at ``position`` to ``<name>.checkpoint.part``; the size so far.
        Chunks must come in order: another position is a ValueError (ask again from size)."""
        part = self._part(sid)
        size = part.stat().st_size if part.exists() else 0
        if position != size:
            raise ValueError(f"snapshot {sid.file_name}: chunk at {position}, expected {size}")
        with open(part, "ab") as f:
            f.write(data)
        return size + len(data)

    def freeze(self, sid: SnapshotId) -> SnapshotContents:
        """Check the received ``.part`` is a whole snapshot, then make it ``<name>.checkpoint``
        (fsynced, read-only). A bad one is deleted and raises ``SnapshotError``."""
        part = self._part(sid)
        data = part.read_bytes()
        try:
            contents = decode_snapshot(data, sid)
        except SnapshotError:
            part.unlink(missing_ok=True)
            raise
        with open(part, "rb") as f:
            os.fsync(f.fileno())
        os.chmod(part, 0o400)
        os.replace(part, self.path(sid))
        fsync_dir(self.dir)
        return contents

    def delete(self, sid: SnapshotId) -> None:
        p = self.path(sid)
        gone = p.with_name(p.name.removesuffix(".checkpoint") + DELETED_SUFFIX)
        try:
            os.replace(p, gone)
            gone.unlink()
        except FileNotFoundError:
            pass


def load_latest(
    store: SnapshotStore, log_start_offset: int, log_end_offset: int
) -> SnapshotContents | None:
    """The newest usable snapshot, or None to replay the log from its start (offset 0).

    A snapshot below the log start offset cannot be used (the records between are gone);
    those are deleted once one is loaded, as Kafka does on start.
    """
    store.recover()
    errors: list[str] = []
    for sid in reversed(store.snapshot_ids()):
        if sid.offset < log_start_offset:
            break
        try:
            contents = store.read(sid)
        except (SnapshotError, OSError) as e:
            errors.append(f"{store.path(sid)}: {e}")
            log.error("metadata snapshot %s is unusable: %s", store.path(sid), e)
            continue
        if errors:
            log.warning("loading the older metadata snapshot %s instead", store.path(sid))
        for old in store.snapshot_ids():
            if old.offset < log_start_offset:
                store.delete(old)
        return contents
    if log_start_offset > 0:
        reason = errors[0] if errors else "no snapshot at or after it"
        raise MetadataLoadError(
            f"cannot load the metadata: {reason}; the log before offset {log_start_offset} "
            "is gone, so there is nothing to rebuild the image from")
    if errors:
        log.warning("replaying the whole metadata log (up to %s) instead", log_end_offset)
    return None


def write_snapshot(
    store: SnapshotStore, image: MetadataImage, epoch: int, last_ts: int, now_ms: int,
    kraft_version: int = 0, voters: VotersRecord | None = None,
) -> SnapshotId:
    """Write a snapshot of ``image`` (records up to ``image.offset``, the last one of
    ``epoch``, appended at ``last_ts``; with ``kraft.version`` >= 1 the voters too). Runs on
    a worker thread."""
    sid = SnapshotId(image.offset + 1, epoch)
    data = encode_snapshot(image_records(image), sid, last_contained_log_timestamp=last_ts,
                           now_ms=now_ms, kraft_version=kraft_version, voters=voters)
    store.write(sid, data)
    return sid


def clean_step(
    store: SnapshotStore, settings: SnapshotSettings, log_bytes: int, now_ms: int
) -> SnapshotId | None:
    """The snapshot the log may start at now, by KafkaMetadataLog's retention rules, or None.

    Only with two snapshots or more: when the log plus the snapshots exceed
    ``retention_bytes``, or the oldest snapshot's last record is older than ``retention_ms``,
    the log may start at the second oldest (the caller then deletes what lies below it and
    asks again).
    """
    ids = store.snapshot_ids()
    if len(ids) < 2:
        return None
    oldest, second = ids[0], ids[1]
    if settings.retention_bytes >= 0:
        total = log_bytes + sum(store.size(sid) for sid in ids)
        if total > settings.retention_bytes:
            return second
    if settings.retention_ms >= 0:
        try:
            ts = store.read(oldest).last_contained_log_timestamp
        except (SnapshotError, OSError):
            return None
        if ts >= 0 and now_ms - ts > settings.retention_ms:
            return second
    return None
