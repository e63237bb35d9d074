"""ISR changes asked of the controller by partition leaders (Kafka's ``AlterPartitionManager``
with ``Partition.maybeShrinkIsr`` / ``maybeExpandIsr``).

- Shrink: every ``replica.lag.time.max.ms`` / 2 the leaders look for ISR members that have not
  caught up with their log end offset for ``replica.lag.time.max.ms``
  (``Partition.wanted_isr``).
- Expand: a follower outside the ISR whose fetch reaches the high watermark and the start of
  the leader epoch wakes this task at once (``Partition.on_isr_expand``); it joins when its
  broker is registered, unfenced and not shutting down, and its fetch carried the broker's
  current epoch (Fetch v15+ ``replica_epoch``; -1 from older versions is accepted), as Kafka's
  ``isReplicaIsrEligible``: a fetch from a previous incarnation of the broker does not count.
- While an AlterPartition is in flight the high watermark counts the members it adds (the
  "maximal" ISR, KIP-497; ``Partition.pending_isr``): the replica being added reached the high
  watermark when it was asked for, and nothing is committed without it until the answer, so
  an ISR member never lacks a committed record (before, records appended meanwhile could be
  acknowledged without it, and it could then be elected without them).
- One AlterPartition in flight per partition (with its leader epoch, partition epoch and the
  members' broker epochs, v3 / KIP-903: ours, and for each follower the epoch its last Fetch
  carried, as Kafka's ``addBrokerEpochToIsr``; the controller answers INELIGIBLE_REPLICA when
  one is not the registered epoch), through the broker's controller channel (in-process on
  a combined node, the wire otherwise). The answer's ISR and partition epoch apply at once if
  the leader epoch is still ours; FENCED_LEADER_EPOCH / INVALID_UPDATE_VERSION wait for the
  metadata image (which carries the controller's state); other errors are tried again at the
  next round.
- While an ISR member lags, the high watermark (and acks=all) waits for it until it leaves;
  a smaller ISR releases the waiters, with NOT_ENOUGH_REPLICAS_AFTER_APPEND below
  ``min.insync.replicas``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio

from kafkawire.broker_lifecycle import ControllerChannel, IsrChange
from kafkawire.node_client import NodeDisconnected, NodeUnsupportedVersion
from kafkawire.replica_manager import ReplicaManager
from kraft.image import MetadataImage
from kraft.replication_control import IsrMember
from log.replica import Partition, broker_epoch_isr_eligible
from protocol.errors import ErrorCode, KafkaError

__all__ = ["IsrManager"]

log = logging.getLogger("kafkawire.isr")

TopicPartition = tuple[str, int]
#: the shortest pause between two full scans (a tiny replica.lag.time.max.ms in a test)
SCAN_INTERVAL_MIN_MS = 10
#: leaders looked at between two yields to the event loop in a scan
SCAN_SLICE = 1000


class IsrManager:
    def __init__(self, replicas: ReplicaManager, channel: Callable[[], ControllerChannel],
                 broker_epoch: Callable[[], int], image: Callable[[], MetadataImage],
                 clock_ms: Callable[[], int], replica_lag_time_max_ms: int) -> None:
        self.replicas = replicas
        self.channel = channel
        self.broker_epoch = broker_epoch
        self.image = image
        self.clock_ms = clock_ms
        self.lag_ms = replica_lag_time_max_ms
        self._woken: set[TopicPartition] = set()
        self._event = trio.Event()
        self._in_flight: set[TopicPartition] = set()
        replicas.on_isr_expand = self.wake

    def wake(self, p: Partition) -> None:
        self._woken.add((p.topic, p.partition))
        self._event.set()

    def _eligible(self, broker_id: int, fetch_broker_epoch: int | None) -> bool:
        """Kafka's ``isReplicaIsrEligible`` (KIP-903): registered, unfenced, not shutting
        down, and its last fetch carried its current broker epoch (or -1, a Fetch before v15);
        a fetch from an earlier incarnation of the broker does not bring it into the ISR."""
        reg = self.image().brokers.get(broker_id)
        if reg is None or reg.fenced or reg.in_controlled_shutdown:
            return False
        return broker_epoch_isr_eligible(fetch_broker_epoch, reg.epoch)

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        interval_ms = max(self.lag_ms // 2, SCAN_INTERVAL_MIN_MS)
        next_scan = self.clock_ms() + interval_ms
        async with trio.open_nursery() as nursery:
            task_status.started()
            while True:
                with trio.move_on_after(max(0, next_scan - self.clock_ms()) / 1000):
                    await self._event.wait()
                self._event = trio.Event()
                now = self.clock_ms()
                if now >= next_scan:
                    next_scan = now + interval_ms
                    self._woken.clear()
                    await self._scan(nursery, now)
                else:
                    tps, self._woken = sorted(self._woken), set()
                    for tp in tps:
                        self._maybe_change(nursery, tp, now)

    async def _scan(self, nursery: trio.Nursery, now: int) -> None:
        """The periodic look at every leader, in slices with a yield to the event loop between
        them; a leader with no follower and itself alone in the ISR has nothing to change."""
        tps = [tp for tp, p in self.replicas
               if p.is_leader and (p.followers or p.isr != {p.local_id})]
        for i in range(0, len(tps), SCAN_SLICE):
            for tp in tps[i : i + SCAN_SLICE]:
                self._maybe_change(nursery, tp, now)
            await trio.lowlevel.checkpoint()

    def _maybe_change(self, nursery: trio.Nursery, tp: TopicPartition, now: int) -> None:
        if tp in self._in_flight:
            return
        p = self.replicas.partition(*tp)
        if p is None:
            return
        new = p.wanted_isr(now, self.lag_ms, self._eligible)
        if new is None:
            return
        img = self.image()
        topic = img.topics.get(tp[0])
        if topic is None:
            return
        own = self.broker_epoch()
        members = tuple(IsrMember(b, p.member_broker_epoch(b, own)) for b in sorted(new))
        change = IsrChange(topic.topic_id, tp[1], p.leader_epoch, p.partition_epoch, members)
        self._in_flight.add(tp)
        # from now until the answer the high watermark also waits for the members being
        # added (they reached it just now, in wanted_isr, with no await since)
        p.set_pending_isr(new)
        nursery.start_soon(self._alter, p, change)

    async def _alter(self, p: Partition, change: IsrChange) -> None:
        tp = (p.topic, p.partition)
        old = sorted(p.isr)
        try:
            res = await self.channel().alter_partition(
                self.replicas.node_id, self.broker_epoch(), change)
        except (NodeDisconnected, NodeUnsupportedVersion, KafkaError) as e:
            log.info("AlterPartition for %s-%d: %s", tp[0], tp[1], e)
            p.set_pending_isr(None)
            return
        finally:
            self._in_flight.discard(tp)
        if res.error != ErrorCode.NONE:
            log.info("AlterPartition for %s-%d to ISR %s: %s", tp[0], tp[1],
                     [m.broker_id for m in change.new_isr], res.error.name)
            p.set_pending_isr(None)
            return
        if not p.is_leader or p.leader_epoch != res.leader_epoch \
                or res.partition_epoch < p.partition_epoch:
            p.set_pending_isr(None)
            return  # leadership moved meanwhile: the image says what is next
        p.partition_epoch = res.partition_epoch
        p.update_isr(frozenset(res.isr), self.clock_ms())  # (the pending ISR is done)
        log.info("%s-%d: ISR %s -> %s (partition epoch %d)", tp[0], tp[1], old,
                 sorted(res.isr), res.partition_epoch)
