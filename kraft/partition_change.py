"""One partition's next state as Kafka's controller decides it (its ``PartitionChangeBuilder``),
with KIP-966 eligible leader replicas (ELR), as Apache Kafka 4.3.1 does them.

Inputs: the partition as the image has it, the target ISR (default: unchanged), which replicas
are acceptable leaders (registered, unfenced, not shutting down, and not the broker being
removed), the election kind, whether ``eligible.leader.replicas.version`` >= 1 is finalized and
the topic's effective ``min.insync.replicas`` (:func:`topic_min_isr`). The output is the
PartitionChangeRecord, or None when nothing changes.

ELR, when enabled:

* **Tracking.** While the target ISR is at or above min ISR, ELR and LastKnownElr are empty.
  Below it, ELR = (current ELR + current ISR) - target ISR - replicas that had an unclean
  shutdown: a replica that leaves the ISR while the ISR is below min ISR keeps every committed
  record (the high watermark did not move without it, see ``log/replica.py``), so it stays
  eligible. A fenced replica stays in ELR; an unclean shutdown (a registration without the
  epoch of a clean shutdown) takes it out. The ISR may become empty (without ELR the last
  member stays).
* **Election.** A valid leader is an acceptable replica in the target ISR, or, when the target
  ISR is empty, in ELR. The current leader stays when valid; else the first valid replica in
  replica order (the preferred one first for a preferred election). A leader taken from ELR
  becomes the ISR alone and leaves ELR. With ISR and ELR both empty and LastKnownElr holding
  exactly the last leader, that replica is elected when acceptable, as an unclean election
  (Kafka's "balanced recovery", on by default: ``useLastKnownLeaderInBalancedRecovery``). Only
  then, and only for an unclean election (``unclean.leader.election.enable`` or ElectLeaders
  UNCLEAN), any acceptable replica: it becomes the ISR alone, leader recovery RECOVERING, and
  ELR is cleared.
* **LastKnownElr** holds the last known leader: set to [leader] when the ISR becomes empty,
  cleared when the partition has (or keeps) a leader.
* **Reassignment.** Targets for the replicas and the replicas being added / removed; first of
  all, a reassignment in progress completes when it can (Kafka's
  ``maybeCompleteReassignment``: the ISR without the removed replicas is not empty and holds
  the added ones, and all remaining ones when fewer are added than removed): the removed
  replicas leave the replicas and the ISR, and everything above is decided for that new ISR
  (ELR against min ISR: the old ISR members that left, removed ones included, as Kafka 4.3.1
  keeps them). The election goes over the target replicas; when replicas leave, the record
  names the leader (the leader epoch moves, fencing them).

ELR lists are sorted by broker id (Kafka builds them from a hash set of small integers, which
iterates in that order).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from kraft.image import (
    ELR_FEATURE,
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    MetadataImage,
    PartitionImage,
    TopicImage,
)
from protocol._generated.clear_elr_record import ClearElrRecord
from protocol._generated.partition_change_record import PartitionChangeRecord

NO_LEADER = -1
NO_LEADER_CHANGE = -2
LEADER_RECOVERING = 1


class Election(Enum):
    PREFERRED = "preferred"  # the preferred replica if valid, else keep the partition online
    ONLINE = "online"  # a leader from the ISR (or ELR when the ISR is empty)
    UNCLEAN = "unclean"  # as ONLINE, then any acceptable replica


def elr_enabled(image: MetadataImage) -> bool:
    return image.features.get(ELR_FEATURE, 0) >= 1


def clear_elr_records(image: MetadataImage, records: list[Any]) -> list[ClearElrRecord]:
    """Kafka's ``createClearElrRecordsAsNeeded``: with ELR, a ClearElrRecord after each
    ``min.insync.replicas`` ConfigRecord, for that topic, or for every topic when the change is
    a broker-level one (the cluster-wide value)."""
    if not elr_enabled(image):
        return []
    return [ClearElrRecord(topic_name=r.resource_name if r.resource_type == RESOURCE_TOPIC
                           else "")
            for r in records
            if type(r).__name__ == "ConfigRecord" and r.name == "min.insync.replicas"]


def configured_min_isr(image: MetadataImage, topic_name: str, default: int = 1) -> int:
    """A topic's ``min.insync.replicas``: its override, else the cluster-wide dynamic value
    (which Kafka requires under ELR), else ``default`` (the static configuration)."""
    raw = image.topic_config(topic_name).get("min.insync.replicas")
    if raw is None:
        raw = image.configs.get((RESOURCE_BROKER, ""), {}).get("min.insync.replicas")
    try:
        return int(raw) if raw is not None else default
    except ValueError:
        return default


def topic_min_isr(image: MetadataImage, topic: TopicImage, default: int = 1) -> int:
    """Kafka's ``getTopicEffectiveMinIsr``: :func:`configured_min_isr`, at most the
    replication factor (the replica count of partition 0)."""
    value = configured_min_isr(image, topic.name, default)
    first = topic.partitions.get(0)
    return min(value, len(first.replicas)) if first is not None and first.replicas else value


@dataclass
class PartitionChange:
    """A change of one partition (fill in, then :meth:`build`)."""

    topic: TopicImage
    part: PartitionImage
    acceptable: Callable[[int], bool]
    elr: bool = False
    min_isr: int = 1
    election: Election = Election.ONLINE
    target_isr: tuple[int, ...] | None = None
    unclean_shutdown: frozenset[int] = field(default_factory=frozenset)

    #: a reassignment (AlterPartitionReassignments): the new replica list and the replicas
    #: being added / removed (None: as the partition has them)
    target_replicas: tuple[int, ...] | None = None
    target_adding: tuple[int, ...] | None = None
    target_removing: tuple[int, ...] | None = None

    def build(self) -> PartitionChangeRecord | None:
        part = self.part
        isr = part.isr if self.target_isr is None else tuple(self.target_isr)
        replicas, adding, removing, isr = self._reassignment(isr)
        elr = self._target_elr(isr)
        rec = PartitionChangeRecord(partition_id=part.partition, topic_id=self.topic.topic_id)
        leader, unclean = self._elect(isr, elr, replicas)
        if leader != part.leader:
            if leader in elr:  # elected from ELR: it is the ISR now
                isr = (leader,)
                elr = tuple(r for r in elr if r != leader)
            rec.leader = leader
            if unclean:
                rec.isr = [leader]
                rec.leader_recovery_state = LEADER_RECOVERING  # (the image keeps no state)
        if rec.leader == NO_LEADER_CHANGE and not set(part.replicas) <= set(replicas):
            rec.leader = part.leader  # replicas leave: the leader epoch moves (fencing them)
        if rec.isr is not None or not self.elr:
            elr = ()  # an unclean election (or no ELR) clears it
        if elr != part.eligible_leader_replicas:
            rec.eligible_leader_replicas = list(elr)
        if rec.isr is None and (isr or self.elr) and isr != part.isr:
            rec.isr = list(isr)
        if self.elr:
            self._last_known_leader(rec)
        if replicas != part.replicas:
            rec.replicas = list(replicas)
        if adding != part.adding_replicas:
            rec.adding_replicas = list(adding)
        if removing != part.removing_replicas:
            rec.removing_replicas = list(removing)
        if (rec.leader == NO_LEADER_CHANGE and rec.isr is None and rec.leader_recovery_state == -1
                and rec.eligible_leader_replicas is None and rec.last_known_elr is None
                and rec.replicas is None and rec.adding_replicas is None
                and rec.removing_replicas is None):
            return None
        return rec

    def _reassignment(self, isr: tuple[int, ...]) -> tuple[
            tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        """(replicas, adding, removing, ISR): the targets, with a reassignment in progress
        completed when it can be (Kafka's ``PartitionReassignmentReplicas
        .maybeCompleteReassignment``): the ISR without the removed replicas is not empty and
        holds every added one, and, when fewer are added than removed, every remaining one.
        The removed replicas leave the replicas and the ISR (which keeps its order)."""
        part = self.part
        replicas = part.replicas if self.target_replicas is None else self.target_replicas
        adding = part.adding_replicas if self.target_adding is None else self.target_adding
        removing = (part.removing_replicas if self.target_removing is None
                    else self.target_removing)
        if not adding and not removing:
            return replicas, adding, removing, isr
        new_isr = tuple(r for r in isr if r not in removing)
        new_replicas = tuple(r for r in replicas if r not in removing)
        if not new_isr or not new_replicas or not set(adding) <= set(new_isr) or (
                len(adding) < len(removing) and not set(new_replicas) <= set(new_isr)):
            return replicas, adding, removing, isr
        return new_replicas, (), (), new_isr

    def _target_elr(self, isr: tuple[int, ...]) -> tuple[int, ...]:
        part = self.part
        if not self.elr:
            return part.eligible_leader_replicas
        if len(isr) >= self.min_isr:
            return ()
        candidates = set(part.eligible_leader_replicas) | set(part.isr)
        return tuple(sorted(r for r in candidates
                            if r not in isr and r not in self.unclean_shutdown))

    def _elect(self, isr: tuple[int, ...], elr: tuple[int, ...], replicas: tuple[int, ...]
               ) -> tuple[int, bool]:
        """(leader, unclean) as Kafka's ``electLeader``, over the target ``replicas``."""
        part = self.part

        def valid(r: int) -> bool:
            return (r in isr or (not isr and r in elr)) and self.acceptable(r)

        if self.election is Election.PREFERRED and replicas and valid(replicas[0]):
            return replicas[0], False
        if valid(part.leader):
            return part.leader, False
        for r in replicas:
            if valid(r):
                return r, False
        lk = part.last_known_elr
        if self.elr and not isr and not elr and len(lk) == 1 and self.acceptable(lk[0]):
            return lk[0], True
        if self.election is Election.UNCLEAN:
            for r in replicas:
                if self.acceptable(r):
                    return r, True
        return NO_LEADER, False

    def _last_known_leader(self, rec: PartitionChangeRecord) -> None:
        part = self.part
        if rec.isr is not None and not rec.isr and part.last_known_elr != (part.leader,):
            rec.last_known_elr = [part.leader]
        elif (rec.leader >= 0 or (part.leader != NO_LEADER and rec.leader != NO_LEADER)) \
                and part.last_known_elr:
            rec.last_known_elr = []
