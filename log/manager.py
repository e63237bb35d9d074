"""The logs of one log directory (Kafka's LogManager, single ``log.dirs`` entry).

Startup: if ``.kafka_cleanshutdown`` exists the previous run closed cleanly and every partition
opens on the fast path (no scan). Otherwise each partition recovers from its entry in
``recovery-point-offset-checkpoint``. The marker is removed once everything is loaded, so a crash
from then on is detected at the next start. Checkpoints (``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint``, ``replication-offset-checkpoint``: Kafka's text format) are
written by :meth:`checkpoint` (the broker calls it periodically) and on :meth:`close`, which ends
by writing the clean shutdown marker.

The log cleaner's ``cleaner-offset-checkpoint`` (where each compacted log is clean up to) is
kept here too: read at open, updated in memory by the cleaner, written by it and at close.

Partition directories are ``<topic>-<partition>``; the partition number follows the LAST '-'
since topic names may contain '-' and '.'. Kafka's ``*-delete`` directories (topics deleted
asynchronously, replicas moved away) are removed at startup; ``*-future`` ones (replicas moving
here) are handled by ``log.dirs`` and ``*-stray`` ones left alone.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

from log.checkpoint import (
    CorruptCheckpointError,
    fsync_dir,
    read_offsets_checkpoint,
    syncfs,
    write_checkpoint_bytes,
    write_offsets_checkpoint,
)
from log.config import LONG_MAX, LogConfig
from log.layout import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    parse_partition_dir_name,
    partition_dir_name,
)
from log.log_flush import FlushJob
from log.offsets_checkpoint import OffsetsCheckpoint
from log.partition_log import PartitionLog
from protocol.errors import ErrorCode, KafkaError

__all__ = ["LogManager", "TopicPartition", "CLEANER_OFFSET_CHECKPOINT"]

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"

logger = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
#: errors that say nothing about the directory (the process is out of descriptors)
_NOT_DIR_FAILURES = (errno.EMFILE, errno.ENFILE)
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


class LogManager:
    """Owns ``log_dir`` and the :class:`PartitionLog` of every partition stored in it."""

    def __init__(
        self,
        log_dir: Path,
        default_config: LogConfig,
        config_for: Callable[[str], LogConfig] | None = None,
    ) -> None:
        self.log_dir = log_dir
        self.default_config = default_config
        self._config_for = config_for
        self.logs: dict[TopicPartition, PartitionLog] = {}
        self.had_clean_shutdown = False
        #: the broker epoch the clean shutdown marker names (KIP-966), -1 when none
        self.clean_shutdown_broker_epoch = -1
        #: the broker epoch ``close`` writes into the marker (-1: an empty marker)
        self.broker_epoch = -1
        self._closed = False
        self._roll_listener: Callable[[PartitionLog], None] | None = None
        self._cleaner_offsets: dict[TopicPartition, int] = {}
        #: the logs by topic (a config change touches only its topic's logs)
        self._by_topic: dict[str, dict[int, PartitionLog]] = {}
        #: the logs whose cleanup.policy contains ``compact`` (the log cleaner's candidates)
        self.compacted: dict[TopicPartition, PartitionLog] = {}
        #: the logs with a finite ``flush.ms`` (usually none: the flusher checks only these)
        self.timed: dict[TopicPartition, PartitionLog] = {}
        self._checkpoints = {name: OffsetsCheckpoint(name, value) for name, value in (
            (RECOVERY_POINT_CHECKPOINT, _recovery_point),
            (LOG_START_OFFSET_CHECKPOINT, _listed_log_start_offset),
            (REPLICATION_OFFSET_CHECKPOINT, _high_watermark),
        )}
        #: why the directory went offline (Kafka's log dir failure), None while it is online
        self.offline_reason: str | None = None

    @classmethod
    def open(
        cls,
        log_dir: Path | str,
        now_ms: int,
        *,
        default_config: LogConfig | None = None,
        config_for: Callable[[str], LogConfig] | None = None,
    ) -> LogManager:
        """Load every partition of ``log_dir`` (creating the directory if needed).

        ``config_for(topic)`` gives a topic's LogConfig (default: ``default_config``).
        """
        path = Path(log_dir)
        path.mkdir(parents=True, exist_ok=True)
        mgr = cls(path, default_config or LogConfig(), config_for)
        marker = path / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        mgr.had_clean_shutdown = clean
        if clean:
            mgr.clean_shutdown_broker_epoch = read_clean_shutdown_epoch(marker)
        recovery = mgr._read_checkpoint(RECOVERY_POINT_CHECKPOINT)
        starts = mgr._read_checkpoint(LOG_START_OFFSET_CHECKPOINT)
        hws = mgr._read_checkpoint(REPLICATION_OFFSET_CHECKPOINT)
        configs: dict[str, LogConfig] = {}  # one per topic, not one per partition
        for entry in sorted(os.scandir(path), key=lambda e: e.name):
            if not entry.is_dir():
                continue
            name = entry.name
            if name.endswith("-delete"):
                shutil.rmtree(entry.path, ignore_errors=True)
                continue
            if name.endswith(("-future", "-stray")):
                continue
            tp = parse_partition_dir_name(name)
            if tp is None:
                continue
            config = configs.get(tp[0])
            if config is None:
                config = configs[tp[0]] = mgr.config_for(tp[0])
            log = PartitionLog.open(
                Path(entry.path),
                config,
                now_ms,
                clean_shutdown=clean,
                recovery_point=recovery.get(tp, 0),
                log_start_offset=starts.get(tp),
                high_watermark=hws.get(tp),
                defer_sync=True,
            )
            mgr.adopt(tp, log)
        mgr._sync_recovered()
        cleaned = mgr._read_checkpoint(CLEANER_OFFSET_CHECKPOINT)
        mgr._cleaner_offsets = {tp: o for tp, o in cleaned.items() if tp in mgr.logs}
        if len(mgr._cleaner_offsets) != len(cleaned):  # entries of partitions no longer here
            mgr.write_cleaner_checkpoints()
        if clean:
            marker.unlink()
            fsync_dir(path)
        return mgr

    def _sync_recovered(self) -> None:
        """Make what recovery rewrote durable before serving: one ``syncfs`` when many logs
        were recovered (after a kill -9 every log is), else an fsync per file."""
        recovered = [log for log in self.logs.values() if log.recovered_unsynced]
        many = len(recovered) >= SYNCFS_MIN_LOGS
        if many:
            syncfs(self.log_dir)
        for log in recovered:
            log.sync_recovered(fsync=not many)

    def _read_checkpoint(self, name: str) -> dict[TopicPartition, int]:
        try:
            return read_offsets_checkpoint(self.log_dir / name) or {}
        except CorruptCheckpointError as exc:
            logger.warning("ignoring corrupt checkpoint: %s", exc)
            return {}

    def config_for(self, topic: str) -> LogConfig:
        return self._config_for(topic) if self._config_for is not None else self.default_config

    # -- partitions -------------------------------------------------------------------------
    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self.logs.get((topic, partition))

    def __iter__(self) -> Iterator[tuple[TopicPartition, PartitionLog]]:
        return iter(list(self.logs.items()))

    def __len__(self) -> int:
        return len(self.logs)

    def create(
        self, topic: str, partition: int, now_ms: int, config: LogConfig | None = None,
        *, sync_dir: bool = True, defer_dir_sync: bool = False,
    ) -> PartitionLog:
        """Create an empty partition log (TOPIC_ALREADY_EXISTS if it is already here).
        ``sync_dir=False``: the caller fsyncs the log directory once for many creations
        (:meth:`sync_dir`); ``defer_dir_sync``: the log's first flush does
        (``PartitionLog.defer_parent_sync``)."""
        if self._closed:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "log manager is closed")
        if self.offline_reason is not None:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                             f"log directory {self.log_dir} is offline: {self.offline_reason}")
        if not _LEGAL_TOPIC.match(topic) or topic in (".", ".."):
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"illegal topic name {topic!r}")
        if partition < 0:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"negative partition {partition}")
        key = (topic, partition)
        if key in self.logs:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"{topic}-{partition} exists")
        path = self.log_dir / partition_dir_name(topic, partition)
        log = PartitionLog.open(
            path,
            config or self.config_for(topic),
            now_ms,
            clean_shutdown=True,
            recovery_point=0,
            log_start_offset=0,
            high_watermark=0,
        )
        if defer_dir_sync:
            log.defer_parent_sync()
        elif sync_dir:
            fsync_dir(self.log_dir)
        self.adopt(key, log)
        return log

    def sync_dir(self) -> None:
        """fsync the log directory (new partition directories in it)."""
        fsync_dir(self.log_dir)

    def get_or_create(
        self, topic: str, partition: int, now_ms: int, config: LogConfig | None = None,
        *, defer_dir_sync: bool = False,
    ) -> PartitionLog:
        log = self.logs.get((topic, partition))
        return log if log is not None else self.create(topic, partition, now_ms, config,
                                                       defer_dir_sync=defer_dir_sync)

    def delete(self, topic: str, partition: int) -> bool:
        """Remove a partition's log and directory. Returns False if it was not here."""
        log = self.forget((topic, partition))
        if log is None:
            return False
        log.delete()
        self._cleaner_offsets.pop((topic, partition), None)  # the file follows at its next write
        return True

    def set_roll_listener(self, listener: Callable[[PartitionLog], None] | None) -> None:
        """Call ``listener(log)`` after every segment roll of every log (present and future)."""
        self._roll_listener = listener
        for _, log in self:
            log.roll_listener = listener

    def adopt(self, tp: TopicPartition, log: PartitionLog) -> None:
        """Take ``log`` in as ``tp``'s (created, opened, or moved here from another directory)."""
        log.roll_listener = self._roll_listener
        log.offsets_listener = self._offsets_changed
        self.logs[tp] = log
        self._by_topic.setdefault(tp[0], {})[tp[1]] = log
        self._index(tp, log)
        for c in self._checkpoints.values():
            c.dirty.add(tp)

    def forget(self, tp: TopicPartition) -> PartitionLog | None:
        """Stop holding ``tp``'s log (deleted, or moved to another directory)."""
        log = self.logs.pop(tp, None)
        if log is None:
            return None
        log.offsets_listener = None
        topic = self._by_topic.get(tp[0], {})
        topic.pop(tp[1], None)
        if not topic:
            self._by_topic.pop(tp[0], None)
        self.compacted.pop(tp, None)
        self.timed.pop(tp, None)
        for c in self._checkpoints.values():
            c.dirty.add(tp)
        return log

    def _offsets_changed(self, log: PartitionLog) -> None:
        tp = (log.topic, log.partition)
        for c in self._checkpoints.values():
            c.dirty.add(tp)

    def topics(self) -> list[str]:
        return list(self._by_topic)

    def update_config(self, topic: str, config: LogConfig) -> None:
        for partition, log in list(self._by_topic.get(topic, {}).items()):
            log.config = config
            log.producer_state.producer_id_expiration_ms = config.producer_id_expiration_ms
            self._index((topic, partition), log)

    def _index(self, tp: TopicPartition, log: PartitionLog) -> None:
        """Keep ``compacted`` and ``timed`` in step with the log's config."""
        for index, member in ((self.compacted, log.config.compact),
                              (self.timed, log.config.flush_ms < LONG_MAX // 2)):
            if member:
                index[tp] = log
            else:
                index.pop(tp, None)

    # -- maintenance ------------------------------------------------------------------------
    def flush_all(self) -> None:
        """fsync every log (blocking; run it off the event loop)."""
        for _, log in self:
            if not log.closed:
                log.flush()

    def checkpoint(self) -> None:
        """Write the recovery point, log start offset and high watermark checkpoints."""
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()
        self.checkpoint_high_watermarks()

    def checkpoint_recovery_points(self) -> None:
        """``recovery-point-offset-checkpoint``: where recovery starts after a crash."""
        self.write_checkpoint(RECOVERY_POINT_CHECKPOINT)

    def checkpoint_log_start_offsets(self) -> None:
        """``log-start-offset-checkpoint``: as Kafka, only starts above the first segment's base
        (a start at a segment boundary is what the files say anyway)."""
        self.write_checkpoint(LOG_START_OFFSET_CHECKPOINT)

    def checkpoint_high_watermarks(self) -> None:
        """``replication-offset-checkpoint``: the high watermark of every partition."""
        self.write_checkpoint(REPLICATION_OFFSET_CHECKPOINT)

    def write_checkpoint(self, name: str) -> None:
        """Write checkpoint ``name`` if anything in it changed (owning thread, blocking)."""
        data = self.prepare_checkpoint(name)
        if data is not None:
            self.commit_checkpoint(name, data)

    def offsets_checkpoint(self, name: str) -> OffsetsCheckpoint:
        """The rows and changed partitions of checkpoint ``name`` (the flusher prepares its
        text in slices, yielding to the event loop between them)."""
        return self._checkpoints[name]

    def prepare_checkpoint(self, name: str) -> bytes | None:
        """The new text of checkpoint ``name``, or None when nothing changed since it was last
        written (owning thread; costs the changed partitions plus one join of the rows)."""
        return self._checkpoints[name].prepare(self.logs)

    def commit_checkpoint(self, name: str, data: bytes) -> None:
        """Write what :meth:`prepare_checkpoint` returned (any thread). On an error the next
        prepare rewrites the file."""
        try:
            write_checkpoint_bytes(self.log_dir / name, data)
        except BaseException:
            self.checkpoint_failed(name)
            raise

    def checkpoint_failed(self, name: str) -> None:
        """The text prepared for ``name`` was not written: rewrite it at the next checkpoint."""
        self._checkpoints[name].failed()

    def checkpoint_stats(self, name: str) -> int:
        """How many times checkpoint ``name`` was prepared for writing (tests, metrics)."""
        return self._checkpoints[name].prepared

    # -- the log cleaner's checkpoint -------------------------------------------------------
    def cleaner_checkpoints(self) -> dict[TopicPartition, int]:
        """``cleaner-offset-checkpoint``: per compacted partition, the offset below which the
        log is clean (Kafka's LogCleanerManager file, same text format). Kept in memory, read
        from the file at open, written by :meth:`write_cleaner_checkpoints`."""
        return dict(self._cleaner_offsets)

    def set_cleaner_checkpoints(self, updates: dict[TopicPartition, int]) -> None:
        """Record new clean points (owning thread); entries of absent partitions are ignored."""
        for tp, offset in updates.items():
            if tp in self.logs:
                self._cleaner_offsets[tp] = offset

    def write_cleaner_checkpoints(self) -> None:
        """Write ``cleaner-offset-checkpoint`` (may run on a worker thread)."""
        write_offsets_checkpoint(
            self.log_dir / CLEANER_OFFSET_CHECKPOINT, dict(self._cleaner_offsets)
        )

    def delete_old_segments(self, now_ms: int) -> int:
        return sum(log.delete_old_segments(now_ms) for _, log in self)

    def expire_producers(self, now_ms: int) -> int:
        return sum(len(log.expire_producers(now_ms)) for _, log in self)

    @property
    def offline(self) -> bool:
        return self.offline_reason is not None

    def mark_offline(self, exc: BaseException) -> bool:
        """Kafka's log directory failure: after an I/O error (a full disk, EIO, a read-only
        remount) nothing more is written here; the broker answers KAFKA_STORAGE_ERROR for the
        directory's partitions, :meth:`close` writes no checkpoint and no clean-shutdown
        marker, and the next start recovers the logs. Running out of descriptors is not a
        directory failure (ignored here). Logs one ERROR line; True the first time."""
        if isinstance(exc, OSError) and exc.errno in _NOT_DIR_FAILURES:
            return False
        if self.offline_reason is not None:
            return False
        self.offline_reason = str(exc)
        logger.error(
            "log directory %s is offline after an I/O error: %s. Its partitions answer "
            "KAFKA_STORAGE_ERROR and nothing more is written there; restart the broker once "
            "the directory is usable again (it then recovers the logs).", self.log_dir, exc,
        )
        return True

    def close(self) -> None:
        """Close every log, write the checkpoints, then the clean shutdown marker (an offline
        directory is left as it is: its next open recovers it)."""
        if self._closed:
            return
        if self.offline:
            self._closed = True
            return
        close_logs([log for _, log in self], self.log_dir)
        self.checkpoint()
        self.write_cleaner_checkpoints()
        marker = self.log_dir / CLEAN_SHUTDOWN_FILE
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            if self.broker_epoch >= 0:  # Kafka's layout (KIP-966)
                os.write(fd, json.dumps({"version": 0, "brokerEpoch": self.broker_epoch},
                                        separators=(",", ":")).encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_dir(self.log_dir)
        self._closed = True


def _recovery_point(log: PartitionLog) -> int | None:
    return log.recovery_point


def _listed_log_start_offset(log: PartitionLog) -> int | None:
    start = log.log_start_offset
    return start if start > log.first_segment_base_offset else None


def _high_watermark(log: PartitionLog) -> int | None:
    return log.high_watermark


#: From this many logs with something to fsync on, one ``syncfs`` of the file system is cheaper
#: than their fsyncs (two to four each; ~1-5 ms apiece on a busy disk). Below it, syncfs would
#: also write back whatever other processes left dirty on the file system.
SYNCFS_MIN_LOGS = 32


def sync_jobs(jobs: list[tuple[PartitionLog, FlushJob]], log_dir: Path) -> None:
    """Run the fsync jobs of many logs: one by one, or as one ``syncfs`` of ``log_dir``'s file
    system when there are many; then record them as done."""
    busy = [(log, job) for log, job in jobs if job.segments or job.paths or job.dir is not None]
    if len(busy) >= SYNCFS_MIN_LOGS:
        syncfs(log_dir)
        for seg_log, job in busy:
            for seg, version in job.segments:
                seg.mark_synced(version)
            if job.dir is not None:
                seg_log.mark_dir_synced(job.dir_version)
    else:
        for _, job in busy:
            job.run()
    for log, job in jobs:
        log.complete_flush(job)


def close_logs(logs: list[PartitionLog], log_dir: Path) -> None:
    """Close ``logs`` (all in ``log_dir``) with their fsyncs batched (:func:`sync_jobs`)."""
    jobs: list[tuple[PartitionLog, FlushJob]] = []
    for log in logs:
        job = log.close_unsynced()
        if job is not None:
            jobs.append((log, job))
    sync_jobs(jobs, log_dir)
    for log, _job in jobs:
        log.release_files()


def read_clean_shutdown_epoch(marker: Path) -> int:
    """The ``brokerEpoch`` of a ``.kafka_cleanshutdown`` marker; -1 if empty or unreadable."""
    try:
        data = json.loads(marker.read_text() or "{}")
        return int(data.get("brokerEpoch", -1))
    except (OSError, ValueError, AttributeError, TypeError):
        return -1
