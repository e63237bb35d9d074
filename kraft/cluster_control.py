"""Broker registrations and heartbeats on the active controller (sans-I/O).

Kafka's ClusterControlManager + BrokerHeartbeatManager, reduced to what the image and a clock
passed in can decide:

- ``register``: BrokerRegistration. A broker registers *fenced* (RegisterBrokerRecord with
  ``fenced`` true); its broker epoch is the offset the record is written at. Refused with
  INCONSISTENT_CLUSTER_ID (other cluster id), UNSUPPORTED_VERSION (the broker cannot serve the
  finalized ``metadata.version``), DUPLICATE_BROKER_REGISTRATION (another incarnation of that
  id still has a live session). A new incarnation after the session expired, or the same
  incarnation again, replaces the registration with a new epoch. A new incarnation leaves
  every ISR and leadership; unless it names the epoch it shut down cleanly from
  (``previous_broker_epoch``, KIP-966) it also leaves every ELR and does not join one (an
  unclean shutdown may have lost its unflushed tail), as Kafka 4.3.1 does.
- ``heartbeat``: BrokerHeartbeat. STALE_BROKER_EPOCH for an unknown broker or an old epoch.
  A fenced broker is unfenced once its ``current_metadata_offset`` reaches its registration
  record (it has caught up) and it does not ask to stay fenced: BrokerRegistrationChangeRecord
  with fenced -1 (UNFENCE), as Kafka 4.3 writes it (metadata.version 30), plus leaders for the
  leaderless partitions whose ISR holds it. ``want_shut_down`` on an unfenced broker starts a
  controlled shutdown (in_controlled_shutdown 1, leadership and ISR membership move away);
  ``should_shut_down`` is answered once it leads nothing, and it is fenced then.
- ``fence_stale``: a broker whose last heartbeat is older than ``broker.session.timeout.ms``
  is fenced (BrokerRegistrationChangeRecord fenced 1) and its partitions move.
- ``unregister``: UnregisterBroker (BROKER_ID_NOT_REGISTERED when unknown).
- ``allocate_producer_ids``: AllocateProducerIds, a ProducerIdsRecord per block.

Liveness (last contact) is the controller's volatile state, as in Kafka: a new active
controller starts every session afresh. Everything durable is a record.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kraft import replication_control as rc
from kraft.image import MetadataImage
from protocol._generated.broker_registration_change_record import BrokerRegistrationChangeRecord
from protocol._generated.producer_ids_record import ProducerIdsRecord
from protocol._generated.register_broker_record import RegisterBrokerRecord
from protocol._generated.unregister_broker_record import UnregisterBrokerRecord
from protocol.errors import ErrorCode, KafkaError

FENCE = 1
UNFENCE = -1
IN_CONTROLLED_SHUTDOWN = 1
PRODUCER_ID_BLOCK_SIZE = 1000
#: Kafka's defaults
BROKER_SESSION_TIMEOUT_MS = 9000
BROKER_HEARTBEAT_INTERVAL_MS = 2000


@dataclass(frozen=True)
class Registration:
    broker_id: int
    cluster_id: str
    incarnation_id: uuid.UUID
    endpoints: list[tuple[str, str, int, int]]  # (listener, host, port, security protocol)
    features: dict[str, tuple[int, int]]
    rack: str | None = None
    #: BrokerRegistration v3+ (KIP-966): the epoch of the registration this broker shut down
    #: cleanly from; -1 (or another epoch): an unclean shutdown
    previous_broker_epoch: int = -1
    #: BrokerRegistration v2+: the ids of the broker's log directories (meta.properties
    #: ``directory.id``); kept in RegisterBrokerRecord as Kafka's controller keeps them
    log_dirs: tuple[uuid.UUID, ...] = ()


@dataclass(frozen=True)
class HeartbeatReply:
    is_caught_up: bool
    is_fenced: bool
    should_shut_down: bool


@dataclass
class ClusterControl:
    """The controller's view of broker sessions; decisions return records to commit."""

    cluster_id: str
    session_timeout_ms: int = BROKER_SESSION_TIMEOUT_MS
    unclean_for: Callable[[str], bool] = field(default=lambda _topic: False)
    #: broker id -> last contact (registration or heartbeat), controller clock
    last_contact_ms: dict[int, int] = field(default_factory=dict)
    #: broker id -> offset of its RegisterBrokerRecord (= its broker epoch)
    registered_at: dict[int, int] = field(default_factory=dict)

    #: brokers this controller has heard from (registration or heartbeat) since it became
    #: active; the others have a session clock (for fencing) but no session to defend
    heard_from: set[int] = field(default_factory=set)

    def has_valid_session(self, broker_id: int, now_ms: int) -> bool:
        last = self.last_contact_ms.get(broker_id)
        return (broker_id in self.heard_from and last is not None
                and now_ms - last < self.session_timeout_ms)

    def touch(self, broker_id: int, now_ms: int) -> None:
        self.last_contact_ms[broker_id] = now_ms
        self.heard_from.add(broker_id)

    # ---- BrokerRegistration ---------------------------------------------------------------
    def register(self, image: MetadataImage, reg: Registration, next_offset: int, now_ms: int
                 ) -> tuple[int, list[Any]]:
        """(broker epoch, records); ``next_offset`` is where the record will be written."""
        if reg.cluster_id != self.cluster_id:
            raise KafkaError(ErrorCode.INCONSISTENT_CLUSTER_ID,
                             f"Expected cluster ID {self.cluster_id}, but got cluster ID "
                             f"{reg.cluster_id}")
        mv = image.features.get("metadata.version")
        lo, hi = reg.features.get("metadata.version", (0, 0))
        if mv is not None and not lo <= mv <= hi:
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION,
                             f"Unable to register because the broker does not support finalized "
                             f"version {mv} of metadata.version. The broker wants a version "
                             f"between {lo} and {hi}, inclusive.")
        existing = image.brokers.get(reg.broker_id)
        if (existing is not None and existing.incarnation_id != reg.incarnation_id
                and self.has_valid_session(reg.broker_id, now_ms)):
            raise KafkaError(ErrorCode.DUPLICATE_BROKER_REGISTRATION,
                             "Another broker is registered with that broker id.")
        epoch = next_offset
        rec = RegisterBrokerRecord(
            broker_id=reg.broker_id, incarnation_id=reg.incarnation_id, broker_epoch=epoch,
            end_points=[RegisterBrokerRecord.BrokerEndpoint(
                name=n, host=h, port=p, security_protocol=sp) for n, h, p, sp in reg.endpoints],
            features=[RegisterBrokerRecord.BrokerFeature(
                name=k, min_supported_version=a, max_supported_version=b)
                for k, (a, b) in sorted(reg.features.items())],
            rack=reg.rack, fenced=True, in_controlled_shutdown=False,
            log_dirs=list(reg.log_dirs),
        )
        records: list[Any] = [rec]
        if existing is None or existing.incarnation_id != reg.incarnation_id:
            # a new incarnation (Kafka's handleBrokerShutdown): it leaves every ISR and
            # leadership; after an unclean shutdown (KIP-966: not the epoch it shut down
            # cleanly from) its replicas may have lost unflushed data, so with ELR it leaves
            # every ELR too and joins none (Kafka 4.3.1's generateLeaderAndIsrUpdates with
            # brokerWithUncleanShutdown: out of the target ISR and of ELR)
            clean = existing is not None and reg.previous_broker_epoch == existing.epoch
            usable = set(rc.usable_brokers(image)) - {reg.broker_id}
            shutdown = rc.isolate_broker if clean else rc.unclean_shutdown
            records += shutdown(image, reg.broker_id, usable.__contains__, self.unclean_for)
        self.registered_at[reg.broker_id] = epoch
        self.touch(reg.broker_id, now_ms)
        return epoch, records

    def check_epoch(self, image: MetadataImage, broker_id: int, broker_epoch: int) -> None:
        reg = image.brokers.get(broker_id)
        if reg is None:
            raise KafkaError(ErrorCode.STALE_BROKER_EPOCH,
                             f"No broker registration found for broker {broker_id}")
        if reg.epoch != broker_epoch:
            raise KafkaError(ErrorCode.STALE_BROKER_EPOCH,
                             f"Expected broker epoch {reg.epoch}, but got broker epoch "
                             f"{broker_epoch}")

    # ---- BrokerHeartbeat ------------------------------------------------------------------
    def heartbeat(self, image: MetadataImage, broker_id: int, broker_epoch: int,
                  metadata_offset: int, want_fence: bool, want_shut_down: bool, now_ms: int
                  ) -> tuple[HeartbeatReply, list[Any]]:
        self.check_epoch(image, broker_id, broker_epoch)
        self.touch(broker_id, now_ms)
        reg = image.brokers[broker_id]
        caught_up = metadata_offset >= self.registered_at.get(broker_id, reg.epoch)
        if reg.fenced:
            if want_shut_down:
                return HeartbeatReply(caught_up, True, True), []
            if want_fence or not caught_up:
                return HeartbeatReply(caught_up, True, False), []
            return HeartbeatReply(caught_up, False, False), self.unfence(image, broker_id)
        if want_fence:
            return HeartbeatReply(caught_up, True, False), self.fence(image, broker_id)
        if not want_shut_down:
            return HeartbeatReply(caught_up, False, False), []
        records: list[Any] = []
        if not reg.in_controlled_shutdown:
            records.append(BrokerRegistrationChangeRecord(
                broker_id=broker_id, broker_epoch=reg.epoch, fenced=0,
                in_controlled_shutdown=IN_CONTROLLED_SHUTDOWN))
        if rc.led_by(image, broker_id) == 0:
            # nothing left to move: shut down now (fenced, as Kafka's SHUTDOWN_NOW)
            return HeartbeatReply(caught_up, True, True), self._fence_record(image, broker_id)
        # leadership and ISR membership move away (a partition with no other ISR member goes
        # leaderless); the next heartbeat finds nothing led and answers should_shut_down
        records += self.isolate(image, broker_id)
        return HeartbeatReply(caught_up, False, False), records

    def _fence_record(self, image: MetadataImage, broker_id: int) -> list[Any]:
        reg = image.brokers[broker_id]
        return [BrokerRegistrationChangeRecord(
            broker_id=broker_id, broker_epoch=reg.epoch, fenced=FENCE, in_controlled_shutdown=0)]

    def unfence(self, image: MetadataImage, broker_id: int) -> list[Any]:
        reg = image.brokers[broker_id]
        records: list[Any] = [BrokerRegistrationChangeRecord(
            broker_id=broker_id, broker_epoch=reg.epoch, fenced=UNFENCE,
            in_controlled_shutdown=0)]
        usable = set(rc.usable_brokers(image))
        return records + rc.elect_for_unfenced(image, broker_id, usable.__contains__,
                                               self.unclean_for)

    def fence(self, image: MetadataImage, broker_id: int) -> list[Any]:
        """Fence a broker and move its leaderships and ISR memberships away."""
        return [*self._fence_record(image, broker_id), *self.isolate(image, broker_id)]

    def isolate(self, image: MetadataImage, broker_id: int) -> list[Any]:
        usable = set(rc.usable_brokers(image)) - {broker_id}
        return list(rc.isolate_broker(image, broker_id, usable.__contains__, self.unclean_for))

    def fence_stale(self, image: MetadataImage, now_ms: int) -> tuple[int, list[Any]] | None:
        """(broker id, records) fencing one unfenced broker whose session expired, or None.
        A broker the controller never heard from starts its session clock now (a new
        controller); until it is heard from, a new incarnation of it may register at once (a
        combined node restarted after kill -9 serves again in ~2 s with Kafka 4.3.1, not
        after broker.session.timeout.ms)."""
        for b in sorted(image.brokers.values(), key=lambda b: b.broker_id):
            if b.fenced:
                continue
            last = self.last_contact_ms.get(b.broker_id)
            if last is None:
                self.last_contact_ms[b.broker_id] = now_ms
            elif now_ms - last >= self.session_timeout_ms:
                return b.broker_id, self.fence(image, b.broker_id)
        return None

    def forgive_stall(self, stalled_ms: int) -> None:
        """The controller itself could not run for ``stalled_ms`` (a paused process, an
        overloaded host): heartbeats could not be processed either, so every session is
        extended by that much rather than fencing brokers for the controller's pause."""
        for b in self.last_contact_ms:
            self.last_contact_ms[b] += stalled_ms

    def next_session_expiry_ms(self, image: MetadataImage) -> int | None:
        lasts = [self.last_contact_ms[b.broker_id] for b in image.brokers.values()
                 if not b.fenced and b.broker_id in self.last_contact_ms]
        return min(lasts) + self.session_timeout_ms if lasts else None

    # ---- UnregisterBroker, AllocateProducerIds --------------------------------------------
    def unregister(self, image: MetadataImage, broker_id: int) -> list[Any]:
        reg = image.brokers.get(broker_id)
        if reg is None:
            raise KafkaError(ErrorCode.BROKER_ID_NOT_REGISTERED,
                             f"Broker ID {broker_id} is not currently registered")
        moves = self.isolate(image, broker_id)
        self.last_contact_ms.pop(broker_id, None)
        self.heard_from.discard(broker_id)
        self.registered_at.pop(broker_id, None)
        return [*moves, UnregisterBrokerRecord(broker_id=broker_id, broker_epoch=reg.epoch)]

    def allocate_producer_ids(self, image: MetadataImage, broker_id: int, broker_epoch: int
                              ) -> tuple[int, list[Any]]:
        """(first id, records) of a block of PRODUCER_ID_BLOCK_SIZE ids for ``broker_id``."""
        self.check_epoch(image, broker_id, broker_epoch)
        start = image.next_producer_id
        return start, [ProducerIdsRecord(broker_id=broker_id, broker_epoch=broker_epoch,
                                         next_producer_id=start + PRODUCER_ID_BLOCK_SIZE)]
