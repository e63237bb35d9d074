"""Every directory of ``log.dirs`` (JBOD): one :class:`LogManager` each, seen as one.

- Each directory keeps its own checkpoint files, clean shutdown marker and ``meta.properties``
  (with its own ``directory.id``, written at format time); its partitions are the
  ``<topic>-<partition>`` directories found in it at start.
- A new partition goes to the online directory holding the fewest partitions (ties: the first
  in ``log.dirs`` order), as Kafka's ``LogManager.nextLogDirs``. ``__cluster_metadata`` stays
  in the metadata directory (``metadata.log.dir``, by default the first of ``log.dirs``).
- A directory fails alone (Kafka's log dir failure): after an I/O error in it, its partitions
  answer KAFKA_STORAGE_ERROR and nothing more is written there, while the other directories
  keep serving. A directory that cannot be opened at start is offline from the start; the
  metadata directory must open (as Kafka, which stops when it fails).
- While a directory is offline at start (or one was replaced by an empty, unformatted one:
  :meth:`LogDirs.guard_missing`), a partition the metadata places here that is in none of the
  online directories may live in the lost one: it is not created afresh elsewhere (that would
  serve an empty log in place of the real one) but reported offline (KAFKA_STORAGE_ERROR)
  until a restart finds it. Kafka knows each replica's directory from the metadata (KIP-858
  directory assignments); kafkawire does not record them and decides from what is on disk.
- The same partition in two directories refuses the start, as Kafka does.
- A replica moves to another directory through a future log there
  (``<topic>-<partition>.<id>-future``; :meth:`LogDirs.create_future`, filled by
  ``log.log_move.LogCopy``, swapped in by :meth:`LogDirs.swap_future`, which renames the
  current log ``-delete`` before the future into place). At start :func:`settle_futures` renames
  in a future whose current log is gone (a crash between the two renames) and the others are
  reopened to resume their copy; ``-delete`` directories are removed.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

from log.checkpoint import fsync_dir
from log.config import LogConfig
from log.layout import (
    DELETE_DIR_SUFFIX,
    FUTURE_DIR_SUFFIX,
    parse_log_dir_name,
    partition_dir_name,
    suffixed_dir_name,
)
from log.manager import LogManager, TopicPartition
from log.partition_log import PartitionLog
from protocol.errors import ErrorCode, KafkaError

__all__ = ["LogDirs", "DuplicateLogError", "METADATA_TOPIC"]

logger = logging.getLogger(__name__)

METADATA_TOPIC = "__cluster_metadata"


class DuplicateLogError(Exception):
    """One partition found in two log directories (Kafka refuses to start too)."""


class LogDirs:
    """The log managers of every directory of ``log.dirs``, in configuration order."""

    def __init__(self, managers: list[LogManager], metadata_dir: Path | None = None) -> None:
        if not managers:
            raise ValueError("at least one log directory is needed")
        self.managers = managers
        meta = Path(metadata_dir).resolve() if metadata_dir is not None else None
        self.metadata_manager = next(
            (m for m in managers if meta is not None and m.log_dir.resolve() == meta),
            managers[0],
        )
        self._where: dict[TopicPartition, LogManager] = {}
        #: partitions missing at start while a directory was offline (they may live there)
        self.unlocated: set[TopicPartition] = set()
        self._starting = any(m.offline for m in managers)
        self._to_sync: set[int] = set()
        #: bumped whenever a log is created or deleted or a topic's config changes (callers
        #: caching something derived from every log's config, as the flusher, compare it)
        self.version = 0
        #: partitions (not counting the metadata log) per directory, for placement
        self._counts = {id(m): 0 for m in managers}
        #: replicas moving to another directory: the destination and the future log there
        self.futures: dict[TopicPartition, tuple[LogManager, PartitionLog]] = {}
        #: where a partition not hosted yet goes when it is created (AlterReplicaLogDirs
        #: before the replica exists: Kafka's ``preferredLogDirs``)
        self.preferred: dict[TopicPartition, LogManager] = {}
        for m in managers:
            for tp, _log in m:
                other = self._where.get(tp)
                if other is not None:
                    raise DuplicateLogError(
                        f"duplicate log directories for {tp[0]}-{tp[1]} are found in both "
                        f"{other.log_dir} and {m.log_dir}")
                self._where[tp] = m
                self._counts[id(m)] += tp[0] != METADATA_TOPIC

    @classmethod
    def open(
        cls,
        dirs: list[Path],
        now_ms: int,
        *,
        default_config: LogConfig | None = None,
        config_for: Callable[[str], LogConfig] | None = None,
        metadata_dir: Path | None = None,
    ) -> LogDirs:
        """Open every directory. One that fails with an I/O error is offline (logged); the
        metadata directory failing raises, as does the same partition in two directories."""
        unique = list({Path(d).resolve(): Path(d) for d in dirs}.values())
        meta = Path(metadata_dir).resolve() if metadata_dir is not None else None
        if meta not in {d.resolve() for d in unique}:
            meta = unique[0].resolve()  # the metadata log lives in the first directory
        kept = settle_futures(unique)
        managers: list[LogManager] = []
        try:
            for d in unique:
                try:
                    managers.append(LogManager.open(
                        d, now_ms, default_config=default_config, config_for=config_for))
                except OSError as exc:
                    if d.resolve() == meta:
                        raise
                    m = LogManager(d, default_config or LogConfig(), config_for)
                    m.mark_offline(exc)
                    managers.append(m)
            opened = cls(managers, meta)
            opened._open_futures(kept, now_ms)
            return opened
        except BaseException:
            for m in managers:
                if not m.offline:
                    m.close()
            raise

    # -- where partitions live -----------------------------------------------------------------
    def manager_of(self, topic: str, partition: int) -> LogManager | None:
        return self._where.get((topic, partition))

    def manager_for_path(self, path: str | os.PathLike[str] | None) -> LogManager | None:
        """The manager whose directory holds ``path`` (a log dir, partition dir or file)."""
        if len(self.managers) == 1:
            return self.managers[0]
        if path is None:
            return None
        p = Path(os.fspath(path)).absolute()
        for m in self.managers:
            if p == m.log_dir.absolute() or m.log_dir.absolute() in p.parents:
                return m
        return None

    def is_offline(self, topic: str, partition: int) -> bool:
        """The partition's directory is offline, or it may live in an offline one."""
        m = self._where.get((topic, partition))
        if m is not None:
            return m.offline
        return (topic, partition) in self.unlocated

    @property
    def any_offline(self) -> bool:
        """Some directory is offline, or partitions may live in one (then ``is_offline`` must
        be asked per partition)."""
        return bool(self.unlocated) or any(m.offline for m in self.managers)

    @property
    def offline(self) -> bool:
        """Every directory is offline."""
        return all(m.offline for m in self.managers)

    @property
    def online(self) -> list[LogManager]:
        return [m for m in self.managers if not m.offline]

    def guard_missing(self) -> None:
        """Until :meth:`finish_start`, treat partitions missing from every directory as
        possibly lost (a directory was replaced by an empty one): offline, not made afresh."""
        self._starting = True

    def finish_start(self) -> None:
        """The start-up replay of the metadata is done: partitions created from now on are
        new ones and go to an online directory."""
        self._starting = False

    # -- partitions ------------------------------------------------------------------------------
    def get(self, topic: str, partition: int) -> PartitionLog | None:
        m = self._where.get((topic, partition))
        return m.get(topic, partition) if m is not None else None

    def __iter__(self) -> Iterator[tuple[TopicPartition, PartitionLog]]:
        """The logs of the online directories."""
        for m in self.online:
            yield from m

    def __len__(self) -> int:
        return sum(len(m) for m in self.online)

    def _placement(self, topic: str, partition: int = -1) -> LogManager:
        if topic == METADATA_TOPIC:
            return self.metadata_manager
        preferred = self.preferred.pop((topic, partition), None)
        if preferred is not None and not preferred.offline:
            return preferred
        online = self.online
        if not online:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "every log directory is offline")
        return min(online, key=lambda m: self._counts[id(m)])  # first of the fewest

    def create(
        self, topic: str, partition: int, now_ms: int, config: LogConfig | None = None,
        *, sync_dir: bool = True, defer_dir_sync: bool = False,
    ) -> PartitionLog:
        """Create an empty partition log in the directory :meth:`_placement` picks
        (``defer_dir_sync``: see ``LogManager.create``)."""
        key = (topic, partition)
        if key in self._where:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"{topic}-{partition} exists")
        if key in self.unlocated:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                             f"{topic}-{partition} may be in an offline log directory")
        m = self._placement(topic, partition)
        log = m.create(topic, partition, now_ms, config, sync_dir=sync_dir,
                       defer_dir_sync=defer_dir_sync)
        self._where[key] = m
        self._counts[id(m)] += topic != METADATA_TOPIC
        self.version += 1
        if not sync_dir:
            self._to_sync.add(id(m))
        return log

    def sync_dir(self) -> None:
        """fsync the directories that got new partitions with ``sync_dir=False``."""
        for m in self.managers:
            if id(m) in self._to_sync:
                self._to_sync.discard(id(m))
                m.sync_dir()

    def get_or_create(
        self, topic: str, partition: int, now_ms: int, config: LogConfig | None = None,
        *, defer_dir_sync: bool = False,
    ) -> PartitionLog:
        log = self.get(topic, partition)
        if log is not None:
            return log
        if self._starting and topic != METADATA_TOPIC and (topic, partition) not in self._where:
            self.unlocated.add((topic, partition))  # may be in the offline directory
        return self.create(topic, partition, now_ms, config, defer_dir_sync=defer_dir_sync)

    def delete(self, topic: str, partition: int) -> bool:
        """Remove a partition's log (not from an offline directory: nothing is written there;
        a restart finds it and deletes it then)."""
        self.unlocated.discard((topic, partition))
        self.preferred.pop((topic, partition), None)
        gone = self.remove_future(topic, partition)
        if gone is not None:
            shutil.rmtree(gone, ignore_errors=True)
        m = self._where.get((topic, partition))
        if m is None or m.offline:
            return False
        del self._where[(topic, partition)]
        self._counts[id(m)] -= topic != METADATA_TOPIC
        self.version += 1
        return m.delete(topic, partition)

    def set_roll_listener(self, listener: Callable[[PartitionLog], None] | None) -> None:
        for m in self.managers:
            m.set_roll_listener(listener)

    def update_config(self, topic: str, config: LogConfig) -> None:
        for m in self.managers:
            m.update_config(topic, config)
        self.version += 1

    # -- moving replicas between directories (future logs, ``log.log_move``) -----------------
    def _open_futures(self, kept: list[tuple[Path, TopicPartition]], now_ms: int) -> None:
        """Resume the moves a restart interrupted: a future log whose current log is online
        in another directory is opened (recovered unless its directory closed cleanly); one
        in the same directory as its current log is dropped; one whose current log may be in
        an offline directory is left alone."""
        for path, tp in kept:
            dest = self.manager_for_path(path)
            m = self._where.get(tp)
            if dest is None or dest.offline or m is None or m.offline:
                continue
            if m is dest or tp in self.futures:
                logger.info("removing the future log %s", path)
                shutil.rmtree(path, ignore_errors=True)
                continue
            clean = dest.had_clean_shutdown
            future = PartitionLog.open(
                path, m.config_for(tp[0]), now_ms, clean_shutdown=clean,
                recovery_point=None if clean else 0, log_start_offset=None, high_watermark=0,
            )
            logger.info("resuming the move of %s-%d to %s from offset %d", *tp, dest.log_dir,
                        future.log_end_offset)
            self.futures[tp] = (dest, future)

    def future_of(self, topic: str, partition: int) -> tuple[LogManager, PartitionLog] | None:
        return self.futures.get((topic, partition))

    def create_future(
        self, topic: str, partition: int, dest: LogManager, unique_id: str, now_ms: int
    ) -> PartitionLog:
        """An empty future log of ``topic``-``partition`` in ``dest`` (Kafka's
        ``maybeCreateFutureReplica``): KAFKA_STORAGE_ERROR while any directory is offline
        (as Kafka, so no partition ever has futures in two directories)."""
        tp = (topic, partition)
        m = self._where.get(tp)
        if m is None:
            raise KafkaError(ErrorCode.REPLICA_NOT_AVAILABLE, f"{topic}-{partition} is not here")
        if self.any_offline:
            offline = ", ".join(str(x.log_dir) for x in self.managers if x.offline)
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                             f"Can not create log for {topic}-{partition} because log "
                             f"directories {offline} are offline")
        if dest is m or tp in self.futures:
            raise ValueError(f"{topic}-{partition}: no future log to create in {dest.log_dir}")
        path = dest.log_dir / suffixed_dir_name(topic, partition, unique_id, FUTURE_DIR_SUFFIX)
        future = PartitionLog.open(path, m.config_for(topic), now_ms, clean_shutdown=True,
                                   recovery_point=0, log_start_offset=0, high_watermark=0)
        fsync_dir(dest.log_dir)
        self.futures[tp] = (dest, future)
        return future

    def remove_future(self, topic: str, partition: int) -> Path | None:
        """Forget a future log (a cancelled or redirected move, a deleted partition): its
        handles go and its directory is renamed ``-delete`` (a restart removes it). Returns
        the directory for the caller to remove, None when there was none."""
        entry = self.futures.pop((topic, partition), None)
        if entry is None:
            return None
        dest, future = entry
        future.detach()
        gone = future.dir.with_name(future.dir.name[: -len(FUTURE_DIR_SUFFIX)] + DELETE_DIR_SUFFIX)
        if dest.offline:
            return None
        try:
            os.rename(future.dir, gone)
        except FileNotFoundError:
            return None
        return gone

    def swap_future(self, topic: str, partition: int, unique_id: str, now_ms: int
                    ) -> tuple[PartitionLog, Path]:
        """Make the caught-up future log the partition's log (Kafka's
        ``replaceCurrentWithFutureLog``); owning thread, with no append in between the check
        that the future holds the whole log and this call. Crash-safe in this order:

        1. the future is closed (fsynced, producer snapshot at its end);
        2. the current log's directory is renamed ``<tp>.<id>-delete`` (fsync of its parent):
           from here a start finds no current log and the complete future;
        3. the future is renamed ``<topic>-<partition>`` (fsync of its parent) and reopened.

        A start after 2 and before 3 renames the future in (:func:`settle_futures`); a start
        before 2 resumes the copy. Returns the new log and the old directory to remove."""
        tp = (topic, partition)
        src_m = self._where[tp]
        dest, future = self.futures[tp]
        source = src_m.logs[tp]
        if future.log_end_offset != source.log_end_offset:
            raise ValueError(f"{topic}-{partition}: the future log is not caught up")
        hw, start, config = source.high_watermark, source.log_start_offset, source.config
        epochs = source.leader_epochs.entries()
        future.close()
        gone = src_m.log_dir / suffixed_dir_name(topic, partition, unique_id, DELETE_DIR_SUFFIX)
        source.detach()
        del self.futures[tp]
        src_m.forget(tp)
        try:
            os.rename(source.dir, gone)
            fsync_dir(src_m.log_dir)
        except OSError as exc:  # the current log's directory failed: a restart resumes
            src_m.mark_offline(exc)
            raise
        path = dest.log_dir / partition_dir_name(topic, partition)
        try:
            os.rename(future.dir, path)
            fsync_dir(dest.log_dir)
        except OSError as exc:  # the destination failed: a restart renames the future in
            dest.mark_offline(exc)
            raise
        log = PartitionLog.open(path, config, now_ms, clean_shutdown=True, recovery_point=None,
                                log_start_offset=start, high_watermark=hw)
        for epoch, offset in epochs:  # an epoch begun at the log end (no batch of it yet)
            if offset >= log.log_start_offset:
                log.assign_leader_epoch(epoch, offset)
        dest.adopt(tp, log)
        cleaned = src_m._cleaner_offsets.pop(tp, None)
        if cleaned is not None:
            dest._cleaner_offsets[tp] = cleaned
        self._where[tp] = dest
        self._counts[id(src_m)] -= 1
        self._counts[id(dest)] += 1
        self.version += 1
        return log, gone

    # -- maintenance, directory by directory -------------------------------------------------
    def _each_online(self, action: Callable[[LogManager], int | None]) -> int:
        """Run ``action`` on each online directory; an I/O error takes that directory offline
        and the others go on. Errors that are no directory failure (out of descriptors) are
        raised after the others ran."""
        total = 0
        first: OSError | None = None
        for m in self.online:
            try:
                total += action(m) or 0
            except OSError as exc:
                if not m.mark_offline(exc) and not m.offline:
                    first = first or exc
        if first is not None:
            raise first
        return total

    def flush_all(self) -> None:
        self._each_online(lambda m: m.flush_all())

    def checkpoint(self) -> None:
        self._each_online(lambda m: m.checkpoint())

    def checkpoint_recovery_points(self) -> None:
        self._each_online(lambda m: m.checkpoint_recovery_points())

    def checkpoint_log_start_offsets(self) -> None:
        self._each_online(lambda m: m.checkpoint_log_start_offsets())

    def checkpoint_high_watermarks(self) -> None:
        self._each_online(lambda m: m.checkpoint_high_watermarks())

    def commit_checkpoint(self, name: str, prepared: list[tuple[LogManager, bytes]]) -> None:
        """Write what :meth:`prepare_checkpoint` returned (a worker thread): a directory whose
        write fails goes offline, the others go on (as :meth:`_each_online`)."""
        texts = {id(m): data for m, data in prepared}
        self._each_online(
            lambda m: m.commit_checkpoint(name, texts[id(m)]) if id(m) in texts else None)

    @property
    def compacted(self) -> list[tuple[TopicPartition, PartitionLog]]:
        """The logs with ``compact`` in their cleanup.policy, online directories only."""
        return [item for m in self.online for item in m.compacted.items()]

    @property
    def timed(self) -> list[PartitionLog]:
        """The logs with a finite ``flush.ms``, online directories only."""
        return [log for m in self.online for log in m.timed.values()]

    def topics(self) -> set[str]:
        """The topics with a log in an online directory."""
        return {t for m in self.online for t in m.topics()}

    def cleaner_checkpoints(self) -> dict[TopicPartition, int]:
        out: dict[TopicPartition, int] = {}
        for m in self.online:
            out.update(m.cleaner_checkpoints())
        return out

    def set_cleaner_checkpoints(self, updates: dict[TopicPartition, int]) -> None:
        for m in self.online:
            m.set_cleaner_checkpoints({tp: o for tp, o in updates.items() if tp in m.logs})

    def write_cleaner_checkpoints(self) -> None:
        self._each_online(lambda m: m.write_cleaner_checkpoints())

    def delete_old_segments(self, now_ms: int) -> int:
        return self._each_online(lambda m: m.delete_old_segments(now_ms))

    def expire_producers(self, now_ms: int) -> int:
        return self._each_online(lambda m: m.expire_producers(now_ms))

    # -- failures and shutdown -----------------------------------------------------------------
    def mark_offline(self, exc: BaseException, where: str | os.PathLike[str] | None = None,
                     tp: TopicPartition | None = None) -> bool:
        """The directory holding ``tp``, or ``where`` (default: the error's file name), goes
        offline (:meth:`LogManager.mark_offline`). True the first time. An error that names
        no directory of ours takes none offline."""
        m = self._where.get(tp) if tp is not None else None
        if m is None:
            m = self.manager_for_path(where if where is not None
                                      else getattr(exc, "filename", None))
        if m is None:
            logger.warning("an I/O error outside the log directories: %s", exc)
            return False
        return m.mark_offline(exc)

    @property
    def had_clean_shutdown(self) -> bool:
        return all(m.had_clean_shutdown for m in self.managers)

    @property
    def clean_shutdown_broker_epoch(self) -> int:
        """The broker epoch every directory's marker names; -1 when one has none or they
        differ."""
        epochs = {m.clean_shutdown_broker_epoch for m in self.managers}
        return epochs.pop() if len(epochs) == 1 else -1

    @property
    def broker_epoch(self) -> int:
        return self.managers[0].broker_epoch

    @broker_epoch.setter
    def broker_epoch(self, epoch: int) -> None:
        for m in self.managers:
            m.broker_epoch = epoch

    def close(self) -> None:
        """Close every directory (each writes its checkpoints and marker unless offline); an
        error closing one does not keep the others from closing. The first is raised."""
        first: BaseException | None = None
        for tp, (m, future) in list(self.futures.items()):
            if not m.offline:
                try:  # cleanly closed: the next start resumes the move without a scan
                    future.close()
                except OSError as exc:
                    logger.warning("closing the future log of %s-%d failed: %s", *tp, exc)
        for m in self.managers:
            try:
                m.close()
            except Exception as exc:  # noqa: BLE001 - every directory closes
                first = first or exc
        if first is not None:
            raise first


def settle_futures(dirs: list[Path]) -> list[tuple[Path, TopicPartition]]:
    """Before the directories are opened: finish the swaps a crash interrupted. A future log
    (``<tp>.<id>-future``) whose partition has no current log in any directory is complete
    (the current log is renamed away only once the future has caught up and is fsynced), so
    it is renamed into place (Kafka's ``recoverAbandonedFutureLogs``). Not while a directory
    cannot be listed (the current log may be there). Returns the other future logs (path,
    partition) for :meth:`LogDirs._open_futures`."""
    listings: dict[Path, list[str]] = {}
    for d in dirs:
        try:
            listings[d] = sorted(os.listdir(d))
        except FileNotFoundError:
            listings[d] = []
        except OSError:
            return []  # an unreadable directory: it goes offline, no future is touched
    current: set[TopicPartition] = set()
    futures: list[tuple[Path, TopicPartition]] = []
    for d, names in listings.items():
        for name in names:
            parsed = parse_log_dir_name(name)
            if parsed is None or not (d / name).is_dir():
                continue
            tp, suffix = parsed
            if suffix == "":
                current.add(tp)
            elif suffix == FUTURE_DIR_SUFFIX:
                futures.append((d / name, tp))
    kept: list[tuple[Path, TopicPartition]] = []
    for path, tp in futures:
        if tp in current:
            kept.append((path, tp))
            continue
        logger.info("recovering the abandoned future log %s as %s-%d", path, *tp)
        os.rename(path, path.parent / partition_dir_name(*tp))
        fsync_dir(path.parent)
        current.add(tp)
    return kept
