"""The active controller's broker-facing operations (thin trio shell over kraft/).

``ControllerService`` runs ``kraft.cluster_control.ClusterControl`` and
``kraft.replication_control`` against the broker's metadata quorum: every operation takes the
metadata lock, decides from the current image, commits the records and answers. The handlers
of BrokerRegistration (62), BrokerHeartbeat (63), UnregisterBroker (64), AllocateProducerIds
(67) and AlterPartition (56) call it, and so does this node's own broker through
``LocalControllerChannel`` (kafkawire/metadata/broker_lifecycle.py), with the same semantics.
``run_session_expiry`` fences brokers whose heartbeats stopped for ``broker.session.timeout.ms``;
when the controller itself was stalled (it checks at least every second), the sessions are
extended by the stall instead (no heartbeat could have been processed meanwhile).

Only the active controller (the leader of the metadata quorum, once it has committed its epoch
start: ``MetadataQuorum.is_active``) decides: every operation first waits for that, and answers
NOT_CONTROLLER on any other node. Session expiry runs only while this node is active and
starts every session afresh when it becomes active (Kafka's new controller does the same).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from kraft import replication_control as rc
from kraft.cluster_control import ClusterControl, HeartbeatReply, Registration
from kraft.image import PartitionImage, TopicImage
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkawire.broker import Broker

log = logging.getLogger("kafkawire.controller")
#: partitions moved back to their preferred leader per metadata batch, and leaderless
#: partitions given an unclean leader per batch (Kafka's MAX_ELECTIONS_PER_IMBALANCE)
LEADER_REBALANCE_BATCH = 1000
#: the pause before another batch of unclean elections when one was full
UNCLEAN_ELECTION_AGAIN_S = 0.01
#: how often the session-expiry task looks when no session is due sooner
SESSION_CHECK_MAX_INTERVAL_MS = 1000


class ControllerService:
    def __init__(self, broker: Broker, clock: Callable[[], int]) -> None:
        self.broker = broker
        self.clock = clock
        cfg = broker.config
        self.control = ClusterControl(
            cluster_id="",  # set once storage is open (``open``)
            session_timeout_ms=int(cfg["broker.session.timeout.ms"]),
            unclean_for=lambda topic: bool(
                broker.effective_topic_configs(topic).get("unclean.leader.election.enable")),
        )

    def open(self, cluster_id: str) -> None:
        self.control.cluster_id = cluster_id

    async def _commit(self, records: list[Any]) -> None:
        await self.broker.commit_metadata(records)

    async def _active(self) -> None:
        """NOT_CONTROLLER unless this node is (or, a new leader, soon becomes) active."""
        quorum = self.broker.quorum
        if quorum is None:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "the metadata quorum is not loaded")
        await quorum.wait_active()

    async def register(self, reg: Registration) -> int:
        async with self.broker.metadata_lock:
            await self._active()
            assert self.broker.quorum is not None
            epoch, records = self.control.register(
                self.broker.image, reg, self.broker.quorum.log_end_offset(), self.clock())
            await self._commit(records)
            # at DEBUG: every node's metadata log line says "broker N registered (...)"
            log.debug("broker %s registered with epoch %s (incarnation %s)",
                     reg.broker_id, epoch, reg.incarnation_id)
            return epoch

    async def heartbeat(self, broker_id: int, broker_epoch: int, metadata_offset: int,
                        want_fence: bool, want_shut_down: bool) -> HeartbeatReply:
        async with self.broker.metadata_lock:
            await self._active()
            was = self.broker.image.brokers.get(broker_id)
            reply, records = self.control.heartbeat(
                self.broker.image, broker_id, broker_epoch, metadata_offset, want_fence,
                want_shut_down, self.clock())
            await self._commit(records)
            if was is not None and was.fenced != reply.is_fenced:
                log.debug("broker %s %s", broker_id, "fenced" if reply.is_fenced else "unfenced")
            return reply

    async def assign_replicas_to_dirs(self, broker_id: int, broker_epoch: int,
                                      wanted: list[Any]) -> dict[Any, int]:
        """KIP-858 (kraft/directories.py): the error per (directory, topic id, partition)."""
        from kraft.directories import assign

        async with self.broker.metadata_lock:
            await self._active()
            self.control.check_epoch(self.broker.image, broker_id, broker_epoch)
            results, records = assign(self.broker.image, broker_id, wanted)
            await self._commit(records)
            return results

    async def unregister(self, broker_id: int) -> None:
        async with self.broker.metadata_lock:
            await self._active()
            await self._commit(self.control.unregister(self.broker.image, broker_id))

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> int:
        async with self.broker.metadata_lock:
            await self._active()
            start, records = self.control.allocate_producer_ids(
                self.broker.image, broker_id, broker_epoch)
            await self._commit(records)
            return start

    async def alter_partition(self, topic_name: str | None, topic_id: Any, partition: int,
                              leader_id: int, leader_epoch: int, partition_epoch: int,
                              new_isr: list[rc.IsrMember], leader_recovery_state: int
                              ) -> Any:
        """The partition's image after the change (or unchanged), or KafkaError."""
        async with self.broker.metadata_lock:
            await self._active()
            img = self.broker.image
            topic = (img.topics.get(topic_name) if topic_name is not None
                     else img.topics_by_id.get(topic_id))
            if topic is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if topic_name is not None
                                 else ErrorCode.UNKNOWN_TOPIC_ID)
            part = topic.partitions.get(partition)
            if part is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            rec = rc.alter_partition(img, topic, part, leader_id, leader_epoch,
                                     partition_epoch, new_isr, leader_recovery_state)
            if rec is not None:
                await self._commit([rec])
                await self._maybe_complete_reassignment(topic.name, partition)
            return self.broker.image.topics_by_id[topic.topic_id].partitions[partition]

    def _partition(self, topic_name: str, partition: int) -> tuple[TopicImage, PartitionImage]:
        """The image's topic and partition (UNKNOWN_TOPIC_OR_PARTITION when either is missing)."""
        topic = self.broker.image.topics.get(topic_name)
        part = topic.partitions.get(partition) if topic is not None else None
        if topic is None or part is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return topic, part

    async def reassign(self, topic_name: str, partition: int, target: list[int] | None) -> None:
        """AlterPartitionReassignments for one partition: start (or cancel) it; it completes at
        once when the ISR allows it already (kraft.replication_control.reassign)."""
        async with self.broker.metadata_lock:
            await self._active()
            topic, part = self._partition(topic_name, partition)
            rec = rc.reassign(self.broker.image, topic, part, target,
                              unclean=self.control.unclean_for(topic.name))
            if rec is not None:
                await self._commit([rec])
            await self._maybe_complete_reassignment(topic.name, partition)

    async def _maybe_complete_reassignment(self, topic_name: str, partition: int) -> None:
        topic = self.broker.image.topics.get(topic_name)
        part = topic.partitions.get(partition) if topic is not None else None
        if topic is not None and part is not None:
            done = rc.complete_reassignment(self.broker.image, topic, part)
            if done is not None:
                await self._commit([done])
                log.info("reassignment of %s-%d completed: replicas %s", topic_name, partition,
                         list(done.replicas or ()))

    async def elect_leader(self, topic_name: str, partition: int, election_type: int) -> None:
        """ElectLeaders for one partition (KafkaError: ELECTION_NOT_NEEDED...)."""
        async with self.broker.metadata_lock:
            await self._active()
            topic, part = self._partition(topic_name, partition)
            await self._commit([rc.elect_leader(self.broker.image, topic, part, election_type)])

    def check_broker_epoch(self, broker_id: int, broker_epoch: int) -> None:
        self.control.check_epoch(self.broker.image, broker_id, broker_epoch)

    async def run_session_expiry(
        self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Fence, one at a time, the brokers whose session expired (Kafka does the same)."""
        task_status.started()
        last_run = self.clock()
        while True:
            now = self.clock()
            stalled = now - last_run - 2 * SESSION_CHECK_MAX_INTERVAL_MS
            if stalled > 0:
                log.warning("the controller did not run for %d ms: broker sessions extended",
                            now - last_run)
                self.control.forgive_stall(stalled)
            last_run = now
            quorum = self.broker.quorum
            if quorum is None or not quorum.is_active:
                self.control.last_contact_ms.clear()  # sessions start afresh when active
                self.control.heard_from.clear()
                await trio.sleep(SESSION_CHECK_MAX_INTERVAL_MS / 1000)
                continue
            async with self.broker.metadata_lock:
                found = self.control.fence_stale(self.broker.image, now)
                if found is not None:
                    broker_id, records = found
                    log.warning("broker %s missed heartbeats for broker.session.timeout.ms "
                                "(%d ms): fenced", broker_id, self.control.session_timeout_ms)
                    try:
                        await self._commit(records)
                    except KafkaError as e:  # leadership lost meanwhile: the next one fences
                        log.warning("could not fence broker %s: %s", broker_id, e)
                    continue
                due = self.control.next_session_expiry_ms(self.broker.image)
            wait_ms = SESSION_CHECK_MAX_INTERVAL_MS if due is None else max(1, due - now + 1)
            await trio.sleep(min(wait_ms, SESSION_CHECK_MAX_INTERVAL_MS) / 1000)

    async def run_leader_rebalance(
        self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """``auto.leader.rebalance.enable``: every ``leader.imbalance.check.interval.seconds``
        the active controller gives partitions back to their preferred replicas (in batches of
        ``LEADER_REBALANCE_BATCH``, as Kafka's controller does)."""
        task_status.started()
        cfg = self.broker.config
        interval_s = max(1, int(cfg["leader.imbalance.check.interval.seconds"]))
        while True:
            await trio.sleep(interval_s)
            quorum = self.broker.quorum
            if not bool(cfg["auto.leader.rebalance.enable"]) or quorum is None \
                    or not quorum.is_active:
                continue
            while True:
                async with self.broker.metadata_lock:
                    records = rc.preferred_elections(self.broker.image, LEADER_REBALANCE_BATCH)
                    if not records:
                        break
                    try:
                        await self._commit(records)
                    except KafkaError as e:
                        log.warning("preferred leader election: %s", e)
                        break
                log.info("auto.leader.rebalance.enable: %d partition(s) back to their "
                         "preferred leader", len(records))

    async def run_unclean_elections(
        self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Kafka's periodic ``electUnclean`` task: every ``unclean.leader.election.interval.ms``
        (an internal config, 5 minutes by default) the active controller elects a leader,
        uncleanly, for every leaderless partition whose topic has
        ``unclean.leader.election.enable`` (``kraft.replication_control.unclean_elections``;
        at once again while a batch was full). It is what makes a topic changed to
        ``unclean.leader.election.enable=true`` get its leaders without a broker event."""
        task_status.started()
        interval_s = max(1, int(self.broker.config["unclean.leader.election.interval.ms"])) / 1000
        more = False
        while True:
            # a full batch: again after 10 ms, as Kafka's PeriodicTask immediate period
            await trio.sleep(UNCLEAN_ELECTION_AGAIN_S if more else interval_s)
            quorum = self.broker.quorum
            if quorum is None or not quorum.is_active:
                more = False
                continue
            async with self.broker.metadata_lock:
                records, more = rc.unclean_elections(
                    self.broker.image, self.control.unclean_for, LEADER_REBALANCE_BATCH)
                if not records:
                    continue
                try:
                    await self._commit(records)
                except KafkaError as e:
                    log.warning("unclean leader election: %s", e)
                    more = False
                    continue
            for r in records:
                log.warning("unclean leader election: partition %s of topic id %s led by %s "
                            "(data loss possible)", r.partition_id, r.topic_id, r.leader)
