"""The background log cleaner (Kafka's ``LogCleaner`` thread) for compacted topics.

One task loops: choose the filthiest compacted log (``log.cleaner.grab_filthiest``, on the event
loop: sizes and timestamps only), build its offset map and write each cleaned segment on a
worker thread (``trio.to_thread``), swap each one in on the event loop, then record the new
clean point in ``cleaner-offset-checkpoint``. With nothing to clean it runs retention on the
compacted logs (``compact,delete`` topics, and DeleteRecords leftovers) and sleeps
``log.cleaner.backoff.ms``, as Kafka's cleaner threads do.

The worker holds the GIL while it decodes records, so a large cleaning slows the event loop
down (it never blocks it: the GIL is handed over every few milliseconds). ``log.cleaner.threads``
is accepted (dynamically too), but one cleaner task runs whatever its value.
``log.cleaner.io.max.bytes.per.second`` and ``log.cleaner.backoff.ms`` are read at each use, so
their dynamic broker configs apply at once; the I/O rate is enforced between segment groups
(a coarser step than Kafka's per-read throttler: one group can exceed it briefly). ``log.cleaner.enable=false`` turns
cleaning off (retention then handles compacted logs too, in ``kafkawire.storage.retention``).

A log whose cleaning fails (a corrupt batch, an I/O error) is reported and marked uncleanable
until the next restart, as Kafka does; the other logs keep being cleaned.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import trio

from kafkawire.metadata.quorum import METADATA_TOPIC
from log.cleaner import (
    CleanerStats,
    CleaningAborted,
    CleaningTask,
    LogToClean,
    grab_filthiest,
    map_capacity,
)

if TYPE_CHECKING:
    from kafkawire.broker import Broker

log = logging.getLogger("kafkawire.storage.cleaner")

TopicPartition = tuple[str, int]


def now_ms() -> int:
    return int(time.time() * 1000)


class LogCleanerService:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        values = broker.config.values
        self.enabled = bool(values["log.cleaner.enable"])
        self.backoff_s = max(int(values["log.cleaner.backoff.ms"]), 1) / 1000.0
        threads = max(int(values["log.cleaner.threads"]), 1)
        self.capacity = map_capacity(
            int(values["log.cleaner.dedupe.buffer.size"]) // threads,
            float(values["log.cleaner.io.buffer.load.factor"]),
        )
        self._in_progress: set[TopicPartition] = set()
        self.uncleanable: set[TopicPartition] = set()
        #: partitions left alone for now (moving between log directories)
        self.paused: set[TopicPartition] = set()
        self.rounds = 0  # cleaning rounds completed (tests and metrics)
        self._wakeup = trio.Event()

    def current_backoff_s(self) -> float:
        """``log.cleaner.backoff.ms``, dynamic broker configs included (Kafka reconfigures it)."""
        from kafkawire.config.entries import effective_broker_config

        values = effective_broker_config(self.broker.config, self.broker.image).values
        return max(int(values["log.cleaner.backoff.ms"]), 1) / 1000.0

    def in_progress(self, tp: TopicPartition) -> bool:
        return tp in self._in_progress

    def wake(self) -> None:
        """Look for work now rather than after the backoff (tests, config changes)."""
        self._wakeup.set()

    async def run(self) -> None:
        if not self.enabled:
            return
        from kafkawire.storage.retention import delete_old_segments

        while True:  # Kafka's cleaner threads start at once (no log.initial.task.delay.ms)
            cleaned = False
            try:
                cleaned = await self.clean_filthiest()
            except Exception:  # never let the cleaner take the broker down
                log.exception("log cleaner round failed")
            if not cleaned:
                delete_old_segments(self.broker, compacted=True)
                with trio.move_on_after(self.current_backoff_s()):
                    await self._wakeup.wait()
                self._wakeup = trio.Event()

    async def clean_filthiest(self) -> bool:
        """Clean the dirtiest compacted log, if one is dirty enough. True if one was cleaned."""
        logs = self.broker.logs
        assert logs is not None
        checkpoints = logs.cleaner_checkpoints()
        # only the compacted logs (the directories keep an index of them, updated on creation,
        # deletion and config changes): not a walk of every partition each backoff
        candidates = [(tp, plog) for tp, plog in logs.compacted if tp[0] != METADATA_TOPIC]
        ltc, forced = grab_filthiest(
            candidates, checkpoints, now_ms(), skip=self._in_progress | self.uncleanable | self.paused
        )
        if forced:
            await self._update_checkpoints(forced)
        if ltc is None:
            return False
        tp = ltc.topic_partition
        self._in_progress.add(tp)
        try:
            end, stats = await self._clean(ltc)
        except CleaningAborted as e:
            log.info("cleaning of %s-%d aborted: %s", tp[0], tp[1], e)
            return False
        except Exception:
            log.exception(
                "cleaning of %s-%d failed; the partition is marked uncleanable", tp[0], tp[1]
            )
            self.uncleanable.add(tp)
            return False
        finally:
            self._in_progress.discard(tp)
        await self._update_checkpoints({tp: end})
        self.rounds += 1
        log.info(
            "cleaned %s-%d up to offset %d: %d -> %d bytes, %d of %d records kept, "
            "%d batches rewritten, %d keys",
            tp[0], tp[1], end, stats.bytes_read, stats.bytes_written, stats.records_retained,
            stats.records_read, stats.batches_rewritten, stats.map_entries,
        )
        return True

    async def _clean(self, ltc: LogToClean) -> tuple[int, CleanerStats]:
        task = CleaningTask(ltc, now_ms(), self.capacity)
        started = time.monotonic()
        try:
            end = await trio.to_thread.run_sync(task.build_offset_map, abandon_on_cancel=True)
            for group in task.groups():
                cleaned = await trio.to_thread.run_sync(
                    task.clean_group, group, abandon_on_cancel=True
                )
                if not ltc.log.replace_segments(cleaned):
                    raise CleaningAborted("the log changed during cleaning")
                await self._throttle(task.stats, started)
        except trio.Cancelled:
            task.abort()  # the worker stops at its next batch and removes its files
            raise
        return end, task.stats

    async def _throttle(self, stats: CleanerStats, started: float) -> None:
        """``log.cleaner.io.max.bytes.per.second``: after each segment group, wait until the
        bytes read and written so far fit the rate (Kafka throttles the same sum, per read)."""
        from kafkawire.config.entries import effective_broker_config

        values = effective_broker_config(self.broker.config, self.broker.image).values
        rate = float(values["log.cleaner.io.max.bytes.per.second"])
        if rate <= 0 or rate >= 1e300:
            return
        owed = (stats.bytes_read + stats.bytes_written) / rate - (time.monotonic() - started)
        if owed > 0:
            await trio.sleep(owed)

    async def _update_checkpoints(self, updates: dict[TopicPartition, int]) -> None:
        logs = self.broker.logs
        assert logs is not None
        logs.set_cleaner_checkpoints(updates)
        await trio.to_thread.run_sync(logs.write_cleaner_checkpoints)
