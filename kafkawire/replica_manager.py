"""The replica manager: the hosted partitions of this node, driven by the metadata image.

A thin trio shell over ``log.replica.Partition`` (Kafka's ``ReplicaManager``): it keeps one
``Partition`` per replica hosted here, makes each leader or follower as the image says
(:meth:`apply_image`), answers "which partition, and may I use it?" with Kafka's errors
(:meth:`leader_partition`), wakes Fetch long-polls when a partition changes, and turns the
partition's high-watermark waiters into awaits with a deadline (:meth:`wait_for_high_watermark`,
used by acks=all produces and by the coordinator runtime before it releases a reply).

The ``__cluster_metadata`` partition is hosted here too (:meth:`host_metadata_log`), as a
leader whose high watermark counts only flushed offsets, as a Raft leader's does; it is not in
the image's topics and :meth:`apply_image` leaves it alone.

Errors for a partition that is not hosted here follow Kafka's ``getPartitionOrError``:
NOT_LEADER_OR_FOLLOWER when the image knows the partition (it lives on other brokers),
UNKNOWN_TOPIC_OR_PARTITION otherwise.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator

import trio

from kafkawire.purgatory import AppendNotifier
from kraft.image import MetadataImage, PartitionImage
from kraft.partition_change import configured_min_isr
from log.config import LogConfig
from log.dirs import LogDirs
from log.manager import LogManager
from log.partition_log import PartitionLog
from log.replica import NO_EPOCH, Partition, ReplicaRole
from protocol.errors import ErrorCode, KafkaError

__all__ = ["ReplicaManager"]

log = logging.getLogger("kafkawire.replicas")

TopicPartition = tuple[str, int]
METADATA_TOPIC = "__cluster_metadata"


class ReplicaManager:
    def __init__(self, logs: LogManager | LogDirs, node_id: int, notifier: AppendNotifier) -> None:
        self.logs = logs
        self.node_id = node_id
        self.notifier = notifier
        self.partitions: dict[TopicPartition, Partition] = {}
        #: partitions placed here whose log could not be created (KAFKA_STORAGE_ERROR)
        self.offline_logs: set[TopicPartition] = set()
        self._image: MetadataImage | None = None
        #: after each :meth:`apply_image` (the replica fetchers follow the new roles)
        self.on_roles_applied: Callable[[], None] | None = None
        #: logs ``apply_image`` created without fsyncing their directory: flush them soon
        self.on_logs_created: Callable[[list[PartitionLog]], None] | None = None
        #: a leader saw a replica outside the ISR catch up (the ISR manager is woken)
        self.on_isr_expand: Callable[[Partition], None] | None = None
        #: the static ``min.insync.replicas`` (topics and the cluster-wide dynamic value
        #: override it): leaders hold their high watermark while their ISR is below it
        self.min_isr_default = 1

    def __iter__(self) -> Iterator[tuple[TopicPartition, Partition]]:
        return iter(list(self.partitions.items()))

    def _host(self, plog: PartitionLog, *, hw_requires_flush: bool = False) -> Partition:
        p = Partition(plog, self.node_id, hw_requires_flush=hw_requires_flush)
        p.on_change = self._on_change
        p.on_isr_expand = self._on_isr_expand
        self.partitions[(plog.topic, plog.partition)] = p
        return p

    def _on_change(self, p: Partition) -> None:
        self.notifier.notify(p.topic, p.partition)

    def _on_isr_expand(self, p: Partition) -> None:
        if self.on_isr_expand is not None:
            self.on_isr_expand(p)

    # ---- following the metadata image ----------------------------------------------------
    def adopt_metadata_log(self, plog: PartitionLog) -> Partition:
        """Host ``__cluster_metadata`` with no role yet: at start-up, while it is loaded (a
        snapshot may restart the log) and before its epoch is known."""
        p = self.partitions.get((plog.topic, plog.partition))
        if p is None:
            p = self._host(plog, hw_requires_flush=True)
        return p

    def host_metadata_log(self, plog: PartitionLog, leader_epoch: int, now_ms: int) -> Partition:
        """The single-voter ``__cluster_metadata`` log: led here, committed once flushed."""
        p = self.adopt_metadata_log(plog)
        p.become_leader(leader_epoch, frozenset({self.node_id}), (self.node_id,), now_ms)
        return p

    def apply_image(
        self, image: MetadataImage, now_ms: int, config_for: Callable[[str], LogConfig]
    ) -> list[TopicPartition]:
        """Host every partition the image places here, in the role it gives this node; stop
        hosting (and delete) the others. Returns the partitions no longer hosted."""
        self._image = image
        wanted: dict[TopicPartition, PartitionImage] = {}
        for topic in image.topics.values():
            for pimg in topic.partitions.values():
                if self.node_id in pimg.replicas:
                    wanted[(topic.name, pimg.partition)] = pimg
        configs: dict[str, LogConfig] = {}  # one per topic, not one per partition
        min_isr: dict[str, int] = {}
        created: list[PartitionLog] = []
        for tp in sorted(wanted):
            p = self.partitions.get(tp)
            if p is None:
                try:
                    cfg = configs.get(tp[0])
                    if cfg is None:
                        cfg = configs[tp[0]] = config_for(tp[0])
                    existing = self.logs.get(tp[0], tp[1])
                    # A new log's directory entry is fsynced by its first flush, on the
                    # flusher's worker thread (``on_logs_created``), not here on the event
                    # loop: on a busy disk each fsync of the log directory took 10-100 ms,
                    # and a broker hosting the partitions of a new topic held its loop (Raft
                    # fetches, heartbeats, requests) that long per partition (issue 27).
                    plog = existing or self.logs.get_or_create(
                        tp[0], tp[1], now_ms, cfg, defer_dir_sync=self.on_logs_created is not None)
                    if existing is None:
                        created.append(plog)
                except (OSError, KafkaError) as exc:  # tried again at the next image
                    if tp not in self.offline_logs:
                        log.error("cannot create the log of %s-%d, the partition is offline: %s",
                                  tp[0], tp[1], exc)
                    self.offline_logs.add(tp)
                    continue
                self.offline_logs.discard(tp)
                p = self._host(plog)
            value = min_isr.get(tp[0])
            if value is None:
                value = min_isr[tp[0]] = configured_min_isr(image, tp[0], self.min_isr_default)
            p.set_min_insync_replicas(value)
            self._apply_role(p, wanted[tp], now_ms)
        self.offline_logs &= set(wanted)
        gone = [tp for tp, p in self.partitions.items() if tp not in wanted and not p.hw_requires_flush]
        for tp in sorted(gone):
            self.partitions.pop(tp).make_offline()
            self.logs.delete(*tp)
            self.notifier.notify(*tp)
        # logs on disk for partitions the image no longer has here (never opened as replicas)
        for tp, _plog in self.logs:
            if tp not in self.partitions and tp not in wanted and tp[0] != METADATA_TOPIC:
                self.logs.delete(*tp)
        if created and self.on_logs_created is not None:
            self.on_logs_created(created)
        if self.on_roles_applied is not None:
            self.on_roles_applied()
        return gone

    def _apply_role(self, p: Partition, pimg: PartitionImage, now_ms: int) -> None:
        isr = frozenset(pimg.isr)
        if pimg.leader == self.node_id:
            if p.is_leader and p.leader_epoch == pimg.leader_epoch \
                    and pimg.partition_epoch < p.partition_epoch:
                return  # an AlterPartition answer already gave us a newer ISR than this image
            p.partition_epoch = pimg.partition_epoch
            if not p.is_leader or p.leader_epoch != pimg.leader_epoch or p.isr != isr \
                    or p.replicas != tuple(pimg.replicas):
                p.become_leader(pimg.leader_epoch, isr, pimg.replicas, now_ms)
            return
        p.partition_epoch = pimg.partition_epoch
        if p.role is ReplicaRole.FOLLOWER and p.leader_epoch == pimg.leader_epoch \
                and p.leader_id == pimg.leader:
            p.isr = isr  # the ISR as the controller has it (reported by DescribeTopics)
            p.replicas = tuple(pimg.replicas)
        else:
            p.become_follower(pimg.leader, pimg.leader_epoch, isr, pimg.replicas)

    # ---- lookups ---------------------------------------------------------------------------
    def partition(self, topic: str, partition: int) -> Partition | None:
        """The hosted replica, whatever its role (None when not hosted here)."""
        return self.partitions.get((topic, partition))

    def hosted(self, topic: str, partition: int) -> Partition:
        """The hosted replica, or Kafka's error for one that is not hosted here."""
        p = self.partitions.get((topic, partition))
        if p is None:
            known = self._image is not None and self._image.partition(topic, partition) is not None
            raise KafkaError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER if known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"{topic}-{partition} is not hosted on node {self.node_id}",
            )
        return p

    def leader_partition(
        self, topic: str, partition: int, current_leader_epoch: int = NO_EPOCH
    ) -> Partition:
        """The partition when this node leads it (and the epoch matches); else raises
        KafkaError with UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER,
        FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH, as Kafka answers."""
        p = self.hosted(topic, partition)
        code = p.check(current_leader_epoch)
        if code:
            raise KafkaError(code, f"{topic}-{partition}: {code.name}")
        return p

    # ---- waiting for the high watermark -------------------------------------------------
    async def wait_for_high_watermark(
        self, p: Partition, required_offset: int, *, timeout_ms: int = -1,
        min_insync_replicas: int = 1,
    ) -> ErrorCode:
        """Until ``p``'s high watermark reaches ``required_offset``: NONE, or the error the
        partition gave (lost leadership, ISR below ``min_insync_replicas``), or
        REQUEST_TIMED_OUT after ``timeout_ms`` (-1: no limit). Returns without yielding when
        it is already there (one replica: always)."""
        w = p.wait_for_high_watermark(required_offset, min_insync_replicas)
        if w.done:
            return w.error
        done = trio.Event()
        w.on_done = done.set
        timeout_s = math.inf if timeout_ms < 0 else timeout_ms / 1000
        with trio.move_on_after(timeout_s):
            await done.wait()
        if not w.done:
            p.cancel(w)
            return ErrorCode.REQUEST_TIMED_OUT
        return w.error
