"""Durability of the partition logs: group-committed fsyncs and the offset checkpoints.

Kafka's flush policy, per topic (``flush.messages`` / ``flush.ms``, broker synonyms
``log.flush.interval.messages`` / ``log.flush.interval.ms``), with Kafka's defaults (both
Long.MAX: no forced fsync; acknowledged data lives in the page cache, which a crash of the
process does not lose):

* ``flush.messages``: once a log holds that many offsets beyond its recovery point, the produce
  request that crossed the line is answered only after an fsync covering it (Kafka flushes
  inside the append). Many requests waiting at once share one fsync (group commit).
* ``flush.ms``: a log whose last flush is older than this is flushed. Kafka checks that only
  every ``log.flush.scheduler.interval.ms`` (default: never); we also check at the smallest
  ``flush.ms`` in use, so that setting ``flush.ms`` alone does what its documentation says.
* a rolled segment is fsynced soon after the roll (Kafka schedules the same flush), which
  moves the recovery point past it, so crash recovery rescans only the newest segment.

Every fsync runs on a worker thread (``trio.to_thread``); the log tolerates one concurrent
flush while the event loop appends (see ``log.partition_log``). Flushes are serialized here.

Checkpoints (Kafka's files and intervals): ``recovery-point-offset-checkpoint`` every
``log.flush.offset.checkpoint.interval.ms``, ``log-start-offset-checkpoint`` every
``log.flush.start.offset.checkpoint.interval.ms`` (and right after DeleteRecords),
``replication-offset-checkpoint`` every ``replica.high.watermark.checkpoint.interval.ms``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio

from kafkawire.config.broker_config import LONG_MAX, BrokerConfig
from kafkawire.metadata.quorum import METADATA_TOPIC
from log.dirs import LogDirs
from log.manager import LogManager
from log.partition_log import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    PartitionLog,
)
from protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("kafkawire.storage.flusher")

#: how often ``flush.ms`` is checked when no topic sets it (configs can change at run time)
IDLE_CHECK_MS = 1000
#: the shortest period at which ``flush.ms`` is checked
MIN_CHECK_MS = 5
#: checkpoint rows recomputed between two yields to the event loop
CHECKPOINT_SLICE = 5000


def _flush_all(logs: list[PartitionLog]) -> list[tuple[PartitionLog, OSError]]:
    """fsync each log (worker thread). Returns the logs whose flush failed, with the error."""
    failed: list[tuple[PartitionLog, OSError]] = []
    for plog in logs:
        if plog.closed:
            continue
        try:
            plog.flush()
        except OSError as e:
            failed.append((plog, e))
    return failed


class LogFlusher:
    """Group commit and checkpoints for the log directories; ``run`` is a long-lived task."""

    def __init__(self, logs: LogDirs, config: BrokerConfig, clock: Callable[[], int]) -> None:
        self.logs = logs
        self.config = config
        self.clock = clock
        self._pending: dict[int, PartitionLog] = {}
        self._wakeup = trio.Event()
        self._round_done = trio.Event()
        self._failed: set[int] = set()
        self._checkpoint_lock = trio.Lock()
        self.rounds = 0  # flush rounds completed (tests and metrics)
        #: held while a flush round runs on its worker thread (a log being replaced, as when
        #: a replica moves between log directories, waits for it)
        self.lock = trio.Lock()

    # -- requests ---------------------------------------------------------------------------
    def request(self, plog: PartitionLog) -> None:
        """Ask for an fsync of ``plog`` soon (safe to call from the event loop at any time).

        The metadata log is left alone: it fsyncs each of its own commits."""
        if plog.topic == METADATA_TOPIC:
            return
        self._pending[id(plog)] = plog
        self._wakeup.set()

    async def wait_durable(self, plog: PartitionLog, offset: int) -> None:
        """Return once everything below ``offset`` in ``plog`` is fsynced."""
        while plog.recovery_point < offset and not plog.closed:
            done = self._round_done
            self.request(plog)
            await done.wait()
            if id(plog) in self._failed:
                raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"fsync of {plog.dir} failed")

    async def wait_all_durable(self, targets: list[tuple[PartitionLog, int]]) -> dict[int, str]:
        """``wait_durable`` for several logs sharing fsync rounds. Returns ``{id(log): error}``
        for the logs whose fsync failed."""
        for plog, _offset in targets:
            self.request(plog)
        errors: dict[int, str] = {}
        for plog, offset in targets:
            try:
                await self.wait_durable(plog, offset)
            except KafkaError as e:
                errors[id(plog)] = e.message or str(e)
        return errors

    # -- tasks ------------------------------------------------------------------------------
    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self.logs.set_roll_listener(self.request)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._commit_loop)
                nursery.start_soon(self._flush_ms_loop)
                values = self.config.values
                for interval_key, name in (
                    ("log.flush.offset.checkpoint.interval.ms", RECOVERY_POINT_CHECKPOINT),
                    ("log.flush.start.offset.checkpoint.interval.ms",
                     LOG_START_OFFSET_CHECKPOINT),
                    ("replica.high.watermark.checkpoint.interval.ms",
                     REPLICATION_OFFSET_CHECKPOINT),
                ):
                    nursery.start_soon(self._checkpoint_loop, int(values[interval_key]), name)
                task_status.started()
        finally:
            self.logs.set_roll_listener(None)

    async def _commit_loop(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup = trio.Event()
            batch = list(self._pending.values())
            self._pending.clear()
            # nothing is written to an offline directory
            online = [p for p in batch if not self.logs.is_offline(p.topic, p.partition)]
            failed = [p for p in batch if self.logs.is_offline(p.topic, p.partition)]
            async with self.lock:
                errors = await trio.to_thread.run_sync(_flush_all, online) if online else []
            for plog, error in errors:
                failed.append(plog)
                if not self.logs.mark_offline(error, tp=(plog.topic, plog.partition)) and (
                    not self.logs.is_offline(plog.topic, plog.partition)
                ):
                    log.warning("fsync of %s-%d failed: %s", plog.topic, plog.partition, error)
            now = self.clock()
            for plog in batch:
                plog.last_flush_ms = now
            self._failed = {id(p) for p in failed}
            self.rounds += 1
            done, self._round_done = self._round_done, trio.Event()
            done.set()

    def _timed_logs(self) -> list[PartitionLog]:
        """The logs with a finite ``flush.ms`` (usually none), from the log directories' index
        of them, so a broker with 100,000 partitions does not walk them all every second."""
        return self.logs.timed

    def _check_period_ms(self) -> int:
        scheduler = int(self.config.values.get("log.flush.scheduler.interval.ms") or LONG_MAX)
        smallest = min((plog.config.flush_ms for plog in self._timed_logs()), default=LONG_MAX)
        period = min(scheduler, smallest)
        if period >= LONG_MAX // 2:
            return IDLE_CHECK_MS
        return max(MIN_CHECK_MS, min(period, IDLE_CHECK_MS))

    async def _flush_ms_loop(self) -> None:
        while True:
            await trio.sleep(self._check_period_ms() / 1000.0)
            now = self.clock()
            for plog in self._timed_logs():
                if plog.closed:
                    continue
                if now - plog.last_flush_ms >= plog.config.flush_ms and plog.dirty:
                    self.request(plog)

    async def _checkpoint_loop(self, interval_ms: int, name: str) -> None:
        if interval_ms <= 0 or interval_ms >= LONG_MAX // 2:
            return
        while True:
            await trio.sleep(interval_ms / 1000.0)
            await self._checkpoint(name)

    async def _checkpoint(self, *names: str) -> None:
        """Write the offsets checkpoints ``names`` of the directories where they changed: the
        text is built on the event loop from the partitions that changed since the last write
        (``log.offsets_checkpoint``), the file written and fsynced on a worker thread."""
        async with self._checkpoint_lock:
            for name in names:
                if self.logs.offline:
                    return
                prepared = await self._prepare(name)
                if not prepared:
                    continue
                try:  # a directory whose checkpoint fails goes offline there, the others go on
                    await trio.to_thread.run_sync(self.logs.commit_checkpoint, name, prepared)
                except OSError as e:  # no directory failure (out of descriptors)
                    for m, _data in prepared:
                        m.checkpoint_failed(name)
                    log.warning("writing a checkpoint file failed: %s", e)

    async def _prepare(self, name: str) -> list[tuple[LogManager, bytes]]:
        """The online directories whose checkpoint ``name`` changed, with its new text: the
        changed rows are recomputed :data:`CHECKPOINT_SLICE` at a time with a yield to the
        event loop between slices (100,000 changed partitions take ~0.2-0.4 s)."""
        out: list[tuple[LogManager, bytes]] = []
        for m in self.logs.online:
            c = m.offsets_checkpoint(name)
            dirty, changed = c.take()
            try:
                for i in range(0, len(dirty), CHECKPOINT_SLICE):
                    changed = c.update(m.logs, dirty[i : i + CHECKPOINT_SLICE]) or changed
                    await trio.lowlevel.checkpoint()
            except BaseException:
                c.give_back(dirty, changed)
                raise
            if changed:
                out.append((m, c.render()))
        return out

    async def checkpoint_log_start_offsets(self) -> None:
        """Write ``log-start-offset-checkpoint`` now (after DeleteRecords)."""
        await self._checkpoint(LOG_START_OFFSET_CHECKPOINT)

    async def checkpoint_all(self) -> None:
        await self._checkpoint(RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT,
                               REPLICATION_OFFSET_CHECKPOINT)
