"""Moving replicas between log directories (AlterReplicaLogDirs; Kafka's
``ReplicaAlterLogDirsManager`` and ``ReplicaAlterLogDirsThread``).

AlterReplicaLogDirs names a destination directory per partition (:meth:`LogDirMover.request`):

- a future log is created there at once (``<topic>-<partition>.<id>-future``, listed by
  DescribeLogDirs with ``is_future_key`` true, its size and its offset lag), and one task per
  moving partition copies the current log into it in chunks of whole batches
  (``log.log_move.LogCopy``: the read on the event loop, reading the bytes and appending them
  on a worker thread), at most ``replica.alter.log.dirs.io.max.bytes.per.second`` (a dynamic
  broker config, unbounded by default), while produce and fetch go on against the current log;
- once the future has caught up it is fsynced on a worker thread, then the last batches
  appended meanwhile are copied and the two are swapped in one step on the event loop, so no
  append falls in between (``LogDirs.swap_future``: the current directory is renamed
  ``-delete`` and removed afterwards on a worker thread, the future renamed into place);
  the hosted replica then reads and appends through the new log;
- naming the replica's current directory cancels a move, naming a third one redirects it (the
  future is dropped and a new one created), as Kafka does;
- the log cleaner leaves a moving partition alone (Kafka's ``abortAndPauseCleaning``) and the
  swap waits for a cleaning in progress.

A restart resumes every move whose future log it finds and finishes a swap a crash interrupted
(``log.dirs.settle_futures``).
"""

from __future__ import annotations

import logging
import math
import shutil
import time
import uuid
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from log.dirs import LogDirs
from log.log_move import COPY_CHUNK_BYTES, LogCopy
from log.manager import LogManager
from protocol.errors import KafkaError

if TYPE_CHECKING:
    from kafkawire.replication.replica_manager import ReplicaManager
    from kafkawire.storage.cleaner import LogCleanerService
    from kafkawire.storage.flusher import LogFlusher

log = logging.getLogger("kafkawire.storage.mover")

TopicPartition = tuple[str, int]
#: a tail up to this many bytes behind is copied on the event loop just before the swap; a
#: longer one goes around the worker-thread loop once more
SWAP_TAIL_BYTES = 4 << 20
#: how often a swap waiting for a cleaning in progress looks again
CLEANING_WAIT_S = 0.05


class LogDirMover:
    def __init__(self, logs: LogDirs, replicas: ReplicaManager, clock_ms: Callable[[], int],
                 rate_bytes_per_s: Callable[[], float], *, flusher: LogFlusher | None = None,
                 cleaner: LogCleanerService | None = None) -> None:
        self.logs = logs
        self.replicas = replicas
        self.clock_ms = clock_ms
        self.rate_bytes_per_s = rate_bytes_per_s
        self.flusher = flusher
        self.cleaner = cleaner
        #: the directory each moving partition is to end in
        self._wanted: dict[TopicPartition, LogManager] = {}
        self._running: set[TopicPartition] = set()
        self._nursery: trio.Nursery | None = None
        self.moves_completed = 0  # tests and metrics

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            for tp, (dest, _future) in list(self.logs.futures.items()):  # resumed at start
                self._wanted.setdefault(tp, dest)
                self._spawn(tp)
            task_status.started()
            await trio.sleep_forever()

    def moving(self, topic: str, partition: int) -> bool:
        return (topic, partition) in self._running

    # -- requests (AlterReplicaLogDirs) -------------------------------------------------------
    def request(self, topic: str, partition: int, dest: LogManager) -> None:
        """Move the hosted replica to ``dest`` (its current directory: cancel a move). Raises
        KafkaError (KAFKA_STORAGE_ERROR while a directory is offline) when the future log
        cannot be created."""
        tp = (topic, partition)
        current = self.logs.manager_of(topic, partition)
        entry = self.logs.future_of(topic, partition)
        if tp in self._running:
            self._wanted[tp] = dest  # the task drops, keeps or replaces the future
            return
        if dest is current:
            self._wanted.pop(tp, None)
            if entry is not None:
                self._discard(tp)
            return
        if entry is not None and entry[0] is not dest:
            self._discard(tp)
            entry = None
        if entry is None:
            self.logs.create_future(topic, partition, dest, uuid.uuid4().hex, self.clock_ms())
        self._wanted[tp] = dest
        self._spawn(tp)

    def _spawn(self, tp: TopicPartition) -> None:
        if self._nursery is not None and tp not in self._running:
            self._running.add(tp)
            self._nursery.start_soon(self._move, tp)

    def _discard(self, tp: TopicPartition) -> None:
        gone = self.logs.remove_future(*tp)
        if gone is not None and self._nursery is not None:
            self._nursery.start_soon(_remove_dir, gone)

    # -- one partition's move -----------------------------------------------------------------
    async def _move(self, tp: TopicPartition) -> None:
        if self.cleaner is not None:
            self.cleaner.paused.add(tp)
        try:
            await self._copy_and_swap(tp)
        except (OSError, KafkaError) as exc:
            if self.logs.get(*tp) is not None:  # not a partition deleted meanwhile
                log.error("moving %s-%d between log directories failed: %s", *tp, exc)
            if self.logs.future_of(*tp) is not None:
                self._discard(tp)
        except Exception:  # never let one move take the broker down
            log.exception("moving %s-%d between log directories failed", *tp)
            if self.logs.future_of(*tp) is not None:
                self._discard(tp)
        finally:
            self._running.discard(tp)
            self._wanted.pop(tp, None)
            if self.cleaner is not None:
                self.cleaner.paused.discard(tp)

    async def _copy_and_swap(self, tp: TopicPartition) -> None:
        copy: LogCopy | None = None
        started = trio.current_time()
        while True:
            dest = self._wanted.get(tp)
            current = self.logs.manager_of(*tp)
            source = self.logs.get(*tp)
            entry = self.logs.future_of(*tp)
            if entry is not None and (dest is None or entry[0] is not dest or source is None):
                self._discard(tp)  # cancelled, redirected, or the partition went away
                continue
            if source is None or current is None or dest is None or dest is current:
                return
            if entry is None:
                self.logs.create_future(*tp, dest, uuid.uuid4().hex, self.clock_ms())
                continue
            future = entry[1]
            if copy is None or copy.future is not future:
                copy, started = LogCopy(future), trio.current_time()
            result = copy.plan(source)
            if result is not None:
                await trio.to_thread.run_sync(copy.apply, result, self.clock_ms())
                await self._throttle(copy, started)
                continue
            if self.cleaner is not None and self.cleaner.in_progress(tp):
                await trio.sleep(CLEANING_WAIT_S)
                continue
            await trio.to_thread.run_sync(future.flush)  # the bulk made durable off the loop
            if self.logs.future_of(*tp) is not entry:
                continue
            if source.size_bytes - future.size_bytes > SWAP_TAIL_BYTES:
                continue  # much appended meanwhile: copy it on the worker thread first
            if await self._finish(tp, copy):
                return

    async def _finish(self, tp: TopicPartition, copy: LogCopy) -> bool:
        """Copy the last batches and swap, with no await in between (no append can fall
        between the check and the swap) and no flush of the old log running."""
        async with AsyncExitStack() as stack:
            if self.flusher is not None:
                await stack.enter_async_context(self.flusher.lock)
            source = self.logs.get(*tp)
            entry = self.logs.future_of(*tp)
            if source is None or entry is None or entry[1] is not copy.future \
                    or self._wanted.get(tp) is not entry[0]:  # changed while waiting
                return False
            now = self.clock_ms()
            blocked_from = time.monotonic()
            while (result := copy.plan(source)) is not None:
                copy.apply(result, now)  # the few batches appended since the flush
            new_log, gone = self.logs.swap_future(*tp, uuid.uuid4().hex, now)
            p = self.replicas.partition(*tp)
            if p is not None:
                p.log = new_log
                self.replicas.notifier.notify(*tp)
            blocked_ms = (time.monotonic() - blocked_from) * 1000
        self.moves_completed += 1
        log.info("moved %s-%d to %s (%d bytes copied; the swap held the event loop %.1f ms)",
                 *tp, new_log.dir.parent, copy.bytes_copied, blocked_ms)
        if self._nursery is not None:  # not awaited: a request from now on starts a new move
            self._nursery.start_soon(_remove_dir, gone)
        return True

    async def _throttle(self, copy: LogCopy, started: float) -> None:
        """``replica.alter.log.dirs.io.max.bytes.per.second``: wait until the bytes copied so
        far fit the rate."""
        rate = self.rate_bytes_per_s()
        if rate <= 0 or not math.isfinite(rate) or rate >= 1e18:
            return
        owed = copy.bytes_copied / rate - (trio.current_time() - started)
        if owed > 0:
            await trio.sleep(min(owed, COPY_CHUNK_BYTES / rate + 1))


async def _remove_dir(path: Path) -> None:
    await trio.to_thread.run_sync(lambda: shutil.rmtree(path, ignore_errors=True))
