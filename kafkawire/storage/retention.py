"""Log retention and producer-id expiry: Kafka's ``kafka-log-retention`` and
``PeriodicProducerExpirationCheck`` tasks.

Every ``log.retention.check.interval.ms`` (first run after ``log.initial.task.delay.ms``, Kafka's
internal start-up delay, 30 s by default) each partition log deletes the segments that
``PartitionLog.delete_old_segments`` finds: those below the log start offset, and with
``cleanup.policy`` containing ``delete`` those beyond ``retention.bytes`` and older than
``retention.ms``. As in Kafka, compacted logs are left to the log cleaner while it is enabled
(it runs the same deletion when it has nothing to clean), and the metadata log is never touched.

Deleting files is a few syscalls per segment, done on the event loop in slices of
``SLICE_LOGS`` logs with a yield between them; file descriptors still held by a Fetch being sent
keep their data readable until the send ends. The compacted logs come from the log
directories' index of them (``LogManager.compacted``), not from a walk of every log.

Every ``producer.id.expiration.check.interval.ms`` producers idle for longer than
``producer.id.expiration.ms`` are forgotten (none with an open transaction).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import trio

from kafkawire.metadata.quorum import METADATA_TOPIC
from kraft.tokens import expired_records

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from log.partition_log import PartitionLog

log = logging.getLogger("kafkawire.storage.retention")


def now_ms() -> int:
    return int(time.time() * 1000)


#: logs a retention pass handles between two yields to the event loop
SLICE_LOGS = 500


def delete_old_segments(broker: Broker, *, compacted: bool) -> int:
    """One retention pass over the logs with (``compacted``) or without ``compact`` in their
    cleanup.policy, all at once (the compacted ones come from the directories' index of them).
    Returns the number of segments deleted."""
    assert broker.logs is not None
    logs = broker.logs.compacted if compacted else list(broker.logs)
    now = now_ms()
    return sum(_delete_old(broker, tp, plog, compacted, now) for tp, plog in logs)


async def delete_old_segments_sliced(broker: Broker, *, compacted: bool) -> int:
    """:func:`delete_old_segments` in slices of :data:`SLICE_LOGS` logs with a yield to the
    event loop between them (100,000 partitions would otherwise hold it for seconds)."""
    assert broker.logs is not None
    logs = broker.logs.compacted if compacted else list(broker.logs)
    total = 0
    for i in range(0, len(logs), SLICE_LOGS):
        now = now_ms()
        total += sum(_delete_old(broker, tp, plog, compacted, now)
                     for tp, plog in logs[i : i + SLICE_LOGS])
        await trio.lowlevel.checkpoint()
    return total


def _delete_old(broker: Broker, tp: tuple[str, int], plog: PartitionLog, compacted: bool,
                now: int) -> int:
    topic, partition = tp
    if topic == METADATA_TOPIC or plog.closed or plog.config.compact != compacted:
        return 0
    cleaner = broker.cleaner
    if cleaner is not None and cleaner.in_progress(tp):
        return 0
    before = plog.log_start_offset
    n = plog.delete_old_segments(now)
    if n:
        log.info(
            "deleted %d segment(s) of %s-%d (log start offset %d -> %d)",
            n, topic, partition, before, plog.log_start_offset,
        )
        broker.notifier.notify(topic, partition)
    return n


async def run_retention(broker: Broker) -> None:
    values = broker.config.values
    await trio.sleep(max(int(values["log.initial.task.delay.ms"]), 0) / 1000.0)
    interval_s = max(int(values["log.retention.check.interval.ms"]), 1) / 1000.0
    while True:
        cleaner = broker.cleaner
        await delete_old_segments_sliced(broker, compacted=False)
        if cleaner is None or not cleaner.enabled:
            await delete_old_segments_sliced(broker, compacted=True)
        await trio.sleep(interval_s)


async def run_producer_expiration(broker: Broker) -> None:
    interval_s = max(int(broker.config.values["producer.id.expiration.check.interval.ms"]), 1)
    while True:
        await trio.sleep(interval_s / 1000.0)
        assert broker.logs is not None
        n = broker.logs.expire_producers(now_ms())
        if n:
            log.info("expired %d idle producer id(s)", n)


async def run_token_expiration(broker: Broker) -> None:
    """Remove expired delegation tokens every ``delegation.token.expiry.check.interval.ms``
    (1 h, as Kafka's controller)."""
    interval_ms = int(broker.config.explicit.get(
        "delegation.token.expiry.check.interval.ms", "3600000"))
    while True:
        await trio.sleep(max(interval_ms, 1) / 1000.0)
        async with broker.metadata_lock:
            records = expired_records(broker.image.tokens, now_ms())
            await broker.commit_metadata(records)
        if records:
            log.info("removed %d expired delegation token(s)", len(records))
