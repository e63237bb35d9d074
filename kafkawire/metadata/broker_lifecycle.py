"""The broker's side of its registration with the active controller (Kafka's
BrokerLifecycleManager).

States, as Kafka's BrokerState names them, and the only moves between them:

    STARTING -> RECOVERY                      registered (fenced), catching up on metadata
    RECOVERY -> RUNNING                       a heartbeat answered unfenced
    RUNNING  -> PENDING_CONTROLLED_SHUTDOWN   SIGTERM: heartbeats ask ``want_shut_down``
    RECOVERY | RUNNING | PENDING_CONTROLLED_SHUTDOWN -> SHUTTING_DOWN
                                              ``should_shut_down``, or the shutdown wait ended
    RUNNING  -> RECOVERY                      the controller fenced us (missed heartbeats):
                                              heartbeats unfence us again once caught up

``run`` registers (retrying with backoff until ``initial.broker.registration.timeout.ms``),
then heartbeats every ``broker.heartbeat.interval.ms`` with this node's metadata offset, and
reports started once RUNNING. While fenced it heartbeats sooner (Kafka does the same), so a
broker is unfenced as soon as it has caught up. STALE_BROKER_EPOCH (the controller lost our
registration, e.g. a new controller after UnregisterBroker) registers again.
``controlled_shutdown`` asks to shut down and waits for the controller's
``should_shut_down`` (leadership moved away), bounded by a timeout.

The controller is reached through a ``ControllerChannel``: ``RemoteControllerChannel`` speaks
BrokerRegistration / BrokerHeartbeat over a ``NodeClient``; ``LocalControllerChannel`` calls
this node's own ``ControllerService`` (a combined node with the implicit single-voter quorum,
``make run``), with the same semantics and no socket; ``QuorumControllerChannel`` picks one of
the two for the current leader of the metadata quorum (a cluster).
"""

from __future__ import annotations

import enum
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import trio

from kafkawire.net.node_client import NodeClient, NodeDisconnected
from kafkawire.security.inter_broker import ClientSecurity
from kraft.cluster_control import HeartbeatReply, Registration
from kraft.replication_control import LEADER_RECOVERED, IsrMember
from protocol._generated.allocate_producer_ids_request import AllocateProducerIdsRequest
from protocol._generated.alter_partition_request import AlterPartitionRequest
from protocol._generated.broker_heartbeat_request import BrokerHeartbeatRequest
from protocol._generated.broker_registration_request import BrokerRegistrationRequest
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafkawire.metadata.controller_service import ControllerService

log = logging.getLogger("kafkawire.lifecycle")

#: while fenced (catching up), heartbeat this often instead of every interval
FENCED_HEARTBEAT_MS = 10
REGISTRATION_RETRY_MS = 100
CONTROLLED_SHUTDOWN_TIMEOUT_MS = 30_000
#: at most one warning per this many seconds about an unreachable controller
FAILURE_LOG_INTERVAL_S = 5.0


class BrokerState(enum.Enum):
    STARTING = "STARTING"
    RECOVERY = "RECOVERY"
    RUNNING = "RUNNING"
    PENDING_CONTROLLED_SHUTDOWN = "PENDING_CONTROLLED_SHUTDOWN"
    SHUTTING_DOWN = "SHUTTING_DOWN"


S = BrokerState
TRANSITIONS: dict[BrokerState, frozenset[BrokerState]] = {
    S.STARTING: frozenset({S.RECOVERY, S.SHUTTING_DOWN}),
    S.RECOVERY: frozenset({S.RUNNING, S.SHUTTING_DOWN, S.PENDING_CONTROLLED_SHUTDOWN}),
    S.RUNNING: frozenset({S.RECOVERY, S.PENDING_CONTROLLED_SHUTDOWN, S.SHUTTING_DOWN}),
    S.PENDING_CONTROLLED_SHUTDOWN: frozenset({S.SHUTTING_DOWN}),
    S.SHUTTING_DOWN: frozenset(),
}


class ControllerChannel(Protocol):
    async def register(self, reg: Registration) -> int: ...

    async def heartbeat(self, broker_id: int, broker_epoch: int, metadata_offset: int,
                        want_fence: bool, want_shut_down: bool) -> HeartbeatReply: ...

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> int: ...

    async def alter_partition(self, broker_id: int, broker_epoch: int, change: IsrChange
                              ) -> IsrChangeResult: ...


@dataclass(frozen=True)
class IsrChange:
    """One partition's AlterPartition: the ISR its leader wants."""

    topic_id: uuid.UUID
    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[IsrMember, ...]


@dataclass(frozen=True)
class IsrChangeResult:
    """The controller's answer: an error, or the partition's state after the change."""

    error: ErrorCode
    leader_id: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1


class LocalControllerChannel:
    """This node's own controller, called in-process."""

    def __init__(self, service: ControllerService) -> None:
        self.service = service

    async def register(self, reg: Registration) -> int:
        return await self.service.register(reg)

    async def heartbeat(self, broker_id: int, broker_epoch: int, metadata_offset: int,
                        want_fence: bool, want_shut_down: bool) -> HeartbeatReply:
        return await self.service.heartbeat(broker_id, broker_epoch, metadata_offset,
                                            want_fence, want_shut_down)

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> int:
        return await self.service.allocate_producer_ids(broker_id, broker_epoch)

    async def alter_partition(self, broker_id: int, broker_epoch: int, change: IsrChange
                              ) -> IsrChangeResult:
        try:
            self.service.check_broker_epoch(broker_id, broker_epoch)
            part = await self.service.alter_partition(
                None, change.topic_id, change.partition, broker_id, change.leader_epoch,
                change.partition_epoch, list(change.new_isr), LEADER_RECOVERED)
        except KafkaError as e:
            return IsrChangeResult(e.code)
        return IsrChangeResult(ErrorCode.NONE, part.leader, part.leader_epoch, tuple(part.isr),
                               part.partition_epoch)


class RemoteControllerChannel:
    """The active controller over its controller listener (Kafka's protocol)."""

    def __init__(self, client: NodeClient) -> None:
        self.client = client

    async def register(self, reg: Registration) -> int:
        req = BrokerRegistrationRequest(
            broker_id=reg.broker_id, cluster_id=reg.cluster_id, incarnation_id=reg.incarnation_id,
            listeners=[BrokerRegistrationRequest.Listener(
                name=n, host=h, port=p, security_protocol=sp) for n, h, p, sp in reg.endpoints],
            features=[BrokerRegistrationRequest.Feature(
                name=k, min_supported_version=lo, max_supported_version=hi)
                for k, (lo, hi) in sorted(reg.features.items())],
            rack=reg.rack, previous_broker_epoch=reg.previous_broker_epoch,
            log_dirs=list(reg.log_dirs),
        )
        resp = await self.client.request(req)
        if resp.error_code != ErrorCode.NONE:
            raise KafkaError(ErrorCode(resp.error_code))
        return int(resp.broker_epoch)

    async def heartbeat(self, broker_id: int, broker_epoch: int, metadata_offset: int,
                        want_fence: bool, want_shut_down: bool) -> HeartbeatReply:
        resp = await self.client.request(BrokerHeartbeatRequest(
            broker_id=broker_id, broker_epoch=broker_epoch,
            current_metadata_offset=metadata_offset, want_fence=want_fence,
            want_shut_down=want_shut_down))
        if resp.error_code != ErrorCode.NONE:
            raise KafkaError(ErrorCode(resp.error_code))
        return HeartbeatReply(resp.is_caught_up, resp.is_fenced, resp.should_shut_down)

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> int:
        resp = await self.client.request(AllocateProducerIdsRequest(
            broker_id=broker_id, broker_epoch=broker_epoch))
        if resp.error_code != ErrorCode.NONE:
            raise KafkaError(ErrorCode(resp.error_code))
        return int(resp.producer_id_start)

    async def alter_partition(self, broker_id: int, broker_epoch: int, change: IsrChange
                              ) -> IsrChangeResult:
        Req = AlterPartitionRequest
        req = Req(broker_id=broker_id, broker_epoch=broker_epoch, topics=[Req.TopicData(
            topic_id=change.topic_id, partitions=[Req.PartitionData(
                partition_index=change.partition, leader_epoch=change.leader_epoch,
                new_isr=[m.broker_id for m in change.new_isr],
                new_isr_with_epochs=[Req.BrokerState(broker_id=m.broker_id,
                                                     broker_epoch=m.broker_epoch)
                                     for m in change.new_isr],
                leader_recovery_state=LEADER_RECOVERED,
                partition_epoch=change.partition_epoch)])])
        resp = await self.client.request(req)
        if resp.error_code != ErrorCode.NONE:
            return IsrChangeResult(ErrorCode(resp.error_code))
        pd = resp.topics[0].partitions[0]
        if pd.error_code != ErrorCode.NONE:
            return IsrChangeResult(ErrorCode(pd.error_code))
        return IsrChangeResult(ErrorCode.NONE, pd.leader_id, pd.leader_epoch, tuple(pd.isr),
                               pd.partition_epoch)


class QuorumControllerChannel:
    """The active controller wherever it is: this node's own ``ControllerService`` while it
    leads the metadata quorum (a combined node), else the leader's controller listener over a
    ``NodeClient`` (one per address, kept). ``leader()`` gives (leader id, its controller
    listener address or None); with no leader known a call raises ``NodeDisconnected`` and
    the lifecycle manager retries.

    Heartbeats go over their own connections, bounded by ``heartbeat_timeout_ms`` (Kafka's
    broker uses broker.session.timeout.ms / 2 for its heartbeat channel): a heartbeat caught
    at a controller that froze or vanished must give up in time to reach the newly elected
    one before that one's session timeout fences this broker."""

    def __init__(self, node_id: int, local: ControllerService | None,
                 leader: Callable[[], tuple[int, tuple[str, int] | None]],
                 clock_ms: Callable[[], int], request_timeout_ms: int = 30_000,
                 heartbeat_timeout_ms: int | None = None,
                 security: Callable[[], ClientSecurity] | None = None) -> None:
        self.node_id = node_id
        #: TLS / SASL of the controller listener (``kafkawire.security.inter_broker``), read at each
        #: new connection
        self.security = security
        self.local = LocalControllerChannel(local) if local is not None else None
        self.leader = leader
        self.clock_ms = clock_ms
        self.request_timeout_ms = request_timeout_ms
        self.heartbeat_timeout_ms = heartbeat_timeout_ms or request_timeout_ms
        self._clients: dict[tuple[str, int], NodeClient] = {}
        self._heartbeat_clients: dict[tuple[str, int], NodeClient] = {}

    def _target(self, heartbeat: bool = False) -> ControllerChannel:
        leader_id, addr = self.leader()
        if leader_id == self.node_id and self.local is not None:
            return self.local
        if addr is None:
            raise NodeDisconnected("no active controller known yet")
        clients = self._heartbeat_clients if heartbeat else self._clients
        client = clients.get(addr)
        if client is None:
            name = f"broker-{self.node_id}" + ("-heartbeat" if heartbeat else "")
            timeout_ms = self.heartbeat_timeout_ms if heartbeat else self.request_timeout_ms
            client = NodeClient(addr[0], addr[1], name, self.clock_ms,
                                request_timeout_ms=timeout_ms,
                                security=self.security() if self.security else None)
            clients[addr] = client
        return RemoteControllerChannel(client)

    async def register(self, reg: Registration) -> int:
        return await self._target().register(reg)

    async def heartbeat(self, broker_id: int, broker_epoch: int, metadata_offset: int,
                        want_fence: bool, want_shut_down: bool) -> HeartbeatReply:
        return await self._target(heartbeat=True).heartbeat(
            broker_id, broker_epoch, metadata_offset, want_fence, want_shut_down)

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> int:
        return await self._target().allocate_producer_ids(broker_id, broker_epoch)

    async def alter_partition(self, broker_id: int, broker_epoch: int, change: IsrChange
                              ) -> IsrChangeResult:
        return await self._target().alter_partition(broker_id, broker_epoch, change)


class BrokerLifecycleManager:
    def __init__(self, channel: ControllerChannel, registration: Callable[[], Registration],
                 metadata_offset: Callable[[], int], heartbeat_interval_ms: int,
                 registration_timeout_ms: int) -> None:
        self.channel = channel
        self.registration = registration
        self.metadata_offset = metadata_offset
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.registration_timeout_ms = registration_timeout_ms
        self.state = BrokerState.STARTING
        self.broker_epoch = -1
        self.broker_id = -1
        self.want_shut_down = False
        self._wakeup = trio.Event()
        self.shut_down_ok = trio.Event()
        self.running = trio.Event()
        self._last_failure_log = -FAILURE_LOG_INTERVAL_S

    def _move(self, to: BrokerState) -> None:
        if to == self.state:
            return
        assert to in TRANSITIONS[self.state], f"{self.state} -> {to}"
        log.info("broker %s: %s -> %s", self.broker_id, self.state.value, to.value)
        self.state = to
        if to == BrokerState.RUNNING:
            self.running.set()
        if to == BrokerState.SHUTTING_DOWN:
            self.shut_down_ok.set()

    async def _register(self) -> None:
        with trio.fail_after(self.registration_timeout_ms / 1000):
            while True:
                reg = self.registration()
                self.broker_id = reg.broker_id
                try:
                    self.broker_epoch = await self.channel.register(reg)
                    log.info("broker %d registered with broker epoch %d", reg.broker_id,
                             self.broker_epoch)
                    return
                except (KafkaError, NodeDisconnected) as e:
                    now = trio.current_time()
                    if now - self._last_failure_log >= FAILURE_LOG_INTERVAL_S:
                        self._last_failure_log = now
                        log.warning("broker %s: registration failed (%s); retrying",
                                    reg.broker_id, e)
                await trio.sleep(REGISTRATION_RETRY_MS / 1000)

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Register, heartbeat until shut down; ``task_status.started()`` once RUNNING."""
        await self._register()
        self._move(BrokerState.RECOVERY)
        started = False
        while self.state != BrokerState.SHUTTING_DOWN:
            await self._heartbeat_once()
            if not started and self.state == BrokerState.RUNNING:
                started = True
                task_status.started()
            fenced = self.state == BrokerState.RECOVERY
            wait_ms = FENCED_HEARTBEAT_MS if fenced or self.want_shut_down \
                else self.heartbeat_interval_ms
            with trio.move_on_after(wait_ms / 1000):
                await self._wakeup.wait()
            self._wakeup = trio.Event()

    async def _heartbeat_once(self) -> None:
        try:
            reply = await self.channel.heartbeat(
                self.broker_id, self.broker_epoch, self.metadata_offset(), False,
                self.want_shut_down)
        except NodeDisconnected as e:
            now = trio.current_time()
            if now - self._last_failure_log >= FAILURE_LOG_INTERVAL_S:
                self._last_failure_log = now
                log.warning("broker %s: heartbeat failed: %s", self.broker_id, e)
            return
        except KafkaError as e:
            if e.code == ErrorCode.STALE_BROKER_EPOCH and not self.want_shut_down:
                log.warning("broker %s: %s; registering again", self.broker_id, e)
                await self._register()
            else:
                log.warning("broker %s: heartbeat answered %s", self.broker_id, e)
            return
        if self.want_shut_down:
            if reply.should_shut_down:
                self._move(BrokerState.SHUTTING_DOWN)
        elif reply.is_fenced:
            if self.state == BrokerState.RUNNING:
                log.warning("broker %s was fenced by the controller", self.broker_id)
                self._move(BrokerState.RECOVERY)
        else:
            self._move(BrokerState.RUNNING)

    async def controlled_shutdown(self, timeout_ms: int = CONTROLLED_SHUTDOWN_TIMEOUT_MS) -> bool:
        """Ask the controller to move leadership away; True once it said to shut down."""
        if self.state in (BrokerState.STARTING, BrokerState.SHUTTING_DOWN):
            return self.state == BrokerState.SHUTTING_DOWN
        self.want_shut_down = True
        self._move(BrokerState.PENDING_CONTROLLED_SHUTDOWN)
        self._wakeup.set()
        with trio.move_on_after(timeout_ms / 1000):
            await self.shut_down_ok.wait()
            return True
        log.warning("broker %s: controlled shutdown did not complete in %d ms",
                    self.broker_id, timeout_ms)
        return False
