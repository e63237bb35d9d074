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
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from log.config import LogConfig
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
            return cls(managers, meta)
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

    def _placement(self, topic: str) -> LogManager:
        if topic == METADATA_TOPIC:
            return self.metadata_manager
        online = self.online
        if not online:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "every log directory is offline")
        return min(online, key=lambda m: self._counts[id(m)])  # first of the fewest

    def create(
        self, topic: str, partition: int, now_ms: int, config: LogConfig | None = None,
        *, sync_dir: bool = True,
    ) -> PartitionLog:
        """Create an empty partition log in the directory :meth:`_placement` picks."""
        key = (topic, partition)
        if key in self._where:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"{topic}-{partition} exists")
        if key in self.unlocated:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                             f"{topic}-{partition} may be in an offline log directory")
        m = self._placement(topic)
        log = m.create(topic, partition, now_ms, config, sync_dir=sync_dir)
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
        self, topic: str, partition: int, now_ms: int, config: LogConfig | None = None
    ) -> PartitionLog:
        log = self.get(topic, partition)
        if log is not None:
            return log
        if self._starting and topic != METADATA_TOPIC and (topic, partition) not in self._where:
            self.unlocated.add((topic, partition))  # may be in the offline directory
        return self.create(topic, partition, now_ms, config)

    def delete(self, topic: str, partition: int) -> bool:
        """Remove a partition's log (not from an offline directory: nothing is written there;
        a restart finds it and deletes it then)."""
        self.unlocated.discard((topic, partition))
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
        for m in self.managers:
            try:
                m.close()
            except Exception as exc:  # noqa: BLE001 - every directory closes
                first = first or exc
        if first is not None:
            raise first
