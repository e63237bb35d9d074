"""Replica placement and partition leadership (sans-I/O), as Kafka's controller decides them.

- ``place_replicas``: Kafka's StripedReplicaPlacer idea with ``broker.rack``: the usable
  brokers (unfenced, not in controlled shutdown) are interleaved rack by rack, so consecutive
  replicas of a partition land on different racks while there are racks left, and each
  partition starts one broker further on so that leadership is spread. Deterministic (Kafka
  shuffles with a random seed; a caller may rotate with ``start``).
- ``isolate_broker``: the PartitionChangeRecords that take a broker out of every ISR and
  leadership (fencing, controlled shutdown, unregistration). A new leader comes from the ISR
  (or, with an empty ISR, from the eligible leader replicas); with
  ``unclean.leader.election.enable`` any live replica may lead when there is none. With
  ``eligible.leader.replicas.version`` >= 1 (KIP-966) the ISR may become empty and replicas
  leaving an ISR below min ISR join ELR; without it the last ISR member stays in the ISR and
  the partition has no leader (-1). The decisions themselves are kraft/partition_change.py
  (Kafka's PartitionChangeBuilder).
- ``unclean_shutdown``: a broker registering after an unclean shutdown leaves every ISR, ELR
  and leadership (it does not join ELR).
- ``elect_for_unfenced``: an election in every leaderless partition once a broker is
  unfenced (it is acceptable as leader: from the ISR, or from ELR when the ISR is empty).
- ``alter_partition``: an ISR change from a partition leader, with Kafka's checks in Kafka's
  order (FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, INELIGIBLE_REPLICA, ...).
- ``elect_leader``: ElectLeaders, preferred or unclean.
- ``unclean_elections``: the periodic unclean election of leaderless partitions whose topic
  has ``unclean.leader.election.enable`` (``unclean.leader.election.interval.ms``).
- ``preferred_elections``: ``auto.leader.rebalance.enable``: every partition not led by its
  preferred (first) replica gets it back when that replica is in the ISR and usable.

A PartitionChangeRecord with a ``leader`` field (even the same leader) bumps the leader epoch
on replay; every record bumps the partition epoch (kraft/image.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kraft.image import MetadataImage, PartitionImage, TopicImage
from kraft.partition_change import Election, PartitionChange, elr_enabled, topic_min_isr
from protocol._generated.partition_change_record import PartitionChangeRecord
from protocol.errors import ErrorCode, KafkaError

NO_LEADER = -1
NO_LEADER_CHANGE = -2
LEADER_RECOVERED = 0
LEADER_RECOVERING = 1

ELECTION_PREFERRED = 0
ELECTION_UNCLEAN = 1


def usable_brokers(image: MetadataImage) -> list[int]:
    """Brokers a new replica or leader may be placed on: unfenced, not shutting down."""
    return sorted(b.broker_id for b in image.brokers.values()
                  if not b.fenced and not b.in_controlled_shutdown)


def _rack_interleaved(image: MetadataImage, brokers: list[int]) -> list[int]:
    """Brokers ordered rack by rack (r0b0, r1b0, r2b0, r0b1, ...); no rack = one rack."""
    racks: dict[str, list[int]] = {}
    for b in brokers:
        reg = image.brokers.get(b)
        racks.setdefault((reg.rack or "") if reg is not None else "", []).append(b)
    columns = [racks[r] for r in sorted(racks)]
    out: list[int] = []
    for i in range(max((len(c) for c in columns), default=0)):
        out.extend(c[i] for c in columns if i < len(c))
    return out


def not_enough_brokers(replication_factor: int, available: int) -> KafkaError:
    return KafkaError(
        ErrorCode.INVALID_REPLICATION_FACTOR,
        f"Unable to replicate the partition {replication_factor} time(s): The target "
        f"replication factor of {replication_factor} cannot be reached because only "
        f"{available} broker(s) are registered or some brokers have all their log "
        "directories cordoned.",
    )


def place_replicas(
    image: MetadataImage, brokers: list[int], num_partitions: int, replication_factor: int,
    start: int = 0,
) -> list[list[int]]:
    """Replica lists for ``num_partitions`` new partitions (INVALID_REPLICATION_FACTOR when
    there are fewer usable brokers than ``replication_factor``)."""
    if replication_factor > len(brokers):
        raise not_enough_brokers(replication_factor, len(brokers))
    ring = _rack_interleaved(image, brokers)
    n = len(ring)
    rack_of = {b: image.brokers[b].rack if b in image.brokers else None for b in ring}
    n_racks = len(set(rack_of.values()))
    out: list[list[int]] = []
    for p in range(num_partitions):
        first = (p + start) % n
        # each round over the ring shifts the followers, so that a partition's followers are
        # not always the same neighbours (Kafka's placer shuffles per stripe)
        shift = ((p + start) // n) % max(1, n - 1)
        reps = [ring[first]]
        used = {rack_of[ring[first]]}
        order = [ring[(first + 1 + shift + k) % n] for k in range(n)]
        while len(reps) < replication_factor:
            if len(used) == n_racks:
                used = set()  # every rack has a replica: start another round of racks
            cand = next((b for b in order if b not in reps and rack_of[b] not in used), None)
            if cand is None:
                cand = next(b for b in order if b not in reps)
            reps.append(cand)
            used.add(rack_of[cand])
        out.append(reps)
    return out


@dataclass(frozen=True)
class Change:
    """The state a PartitionChangeRecord leads to (None: field unchanged)."""
    leader: int | None = None
    isr: tuple[int, ...] | None = None
    recovering: bool = False


def change_record(topic: TopicImage, part: PartitionImage, change: Change
                  ) -> PartitionChangeRecord | None:
    """The record for ``change``, or None when it changes nothing."""
    new_isr = change.isr if change.isr is not None and change.isr != part.isr else None
    new_leader = (change.leader if change.leader is not None and change.leader != part.leader
                  else NO_LEADER_CHANGE)
    if new_isr is None and new_leader == NO_LEADER_CHANGE:
        return None
    return PartitionChangeRecord(
        partition_id=part.partition,
        topic_id=topic.topic_id,
        isr=list(new_isr) if new_isr is not None else None,
        leader=new_leader,
        leader_recovery_state=LEADER_RECOVERING if change.recovering else -1,
    )


def _partition_changes(
    image: MetadataImage, affected: Callable[[PartitionImage], bool],
    acceptable: Callable[[int], bool], unclean_for: Callable[[str], bool],
    target_isr: Callable[[PartitionImage], tuple[int, ...]] = lambda p: p.isr,
    unclean_shutdown: frozenset[int] = frozenset(),
) -> list[PartitionChangeRecord]:
    """Kafka's ``generateLeaderAndIsrUpdates``: a PartitionChange for every ``affected``
    partition (the topic's unclean-election config and min ISR asked once per topic)."""
    elr = elr_enabled(image)
    out: list[PartitionChangeRecord] = []
    for topic in image.topics.values():
        election: Election | None = None
        min_isr = 1
        for part in topic.partitions.values():
            if not affected(part):
                continue
            if election is None:  # a config lookup: once per topic, not per partition
                election = Election.UNCLEAN if unclean_for(topic.name) else Election.ONLINE
                min_isr = topic_min_isr(image, topic)
            rec = PartitionChange(
                topic, part, acceptable, elr=elr, min_isr=min_isr, election=election,
                target_isr=target_isr(part), unclean_shutdown=unclean_shutdown).build()
            if rec is not None:
                out.append(rec)
    return out


def isolate_broker(
    image: MetadataImage, broker_id: int, usable: Callable[[int], bool],
    unclean_for: Callable[[str], bool],
) -> list[PartitionChangeRecord]:
    """Records taking ``broker_id`` out of every ISR and leadership (fencing, controlled
    shutdown, unregistration). With ELR the ISR may become empty and the members that leave
    an ISR below min ISR join ELR (kraft/partition_change.py)."""
    return _partition_changes(
        image, lambda p: broker_id in p.isr or p.leader == broker_id,
        lambda b: b != broker_id and usable(b), unclean_for,
        target_isr=lambda p: tuple(b for b in p.isr if b != broker_id))


def unclean_shutdown(
    image: MetadataImage, broker_id: int, usable: Callable[[int], bool],
    unclean_for: Callable[[str], bool],
) -> list[PartitionChangeRecord]:
    """A broker registers after an unclean shutdown (Kafka's ``handleBrokerShutdown``): with
    ELR it leaves every ISR, ELR and leadership without joining ELR (it may have lost its
    unflushed tail: Kafka 4.3.1's ``generateLeaderAndIsrUpdates`` takes it out of the target
    ISR and, as an unclean-shutdown replica, out of ELR); without ELR it leaves every ISR and
    leadership, as on fencing."""
    if not elr_enabled(image):
        return isolate_broker(image, broker_id, usable, unclean_for)
    return _partition_changes(
        image, lambda p: broker_id in p.isr or broker_id in p.eligible_leader_replicas,
        lambda b: b != broker_id and usable(b), unclean_for,
        target_isr=lambda p: tuple(b for b in p.isr if b != broker_id),
        unclean_shutdown=frozenset({broker_id}))


def elect_for_unfenced(
    image: MetadataImage, broker_id: int, usable: Callable[[int], bool] = lambda _b: False,
    unclean_for: Callable[[str], bool] = lambda _t: False,
) -> list[PartitionChangeRecord]:
    """Kafka's ``handleBrokerUnfenced``: an election in every leaderless partition, with the
    unfenced broker acceptable (an ISR member, or with an empty ISR an ELR member, leads)."""
    return _partition_changes(
        image, lambda p: p.leader == NO_LEADER, lambda b: b == broker_id or usable(b),
        unclean_for)


def led_by(image: MetadataImage, broker_id: int) -> int:
    return sum(1 for t in image.topics.values() for p in t.partitions.values()
               if p.leader == broker_id)


@dataclass(frozen=True)
class IsrMember:
    broker_id: int
    broker_epoch: int = -1  # AlterPartition v3+; -1: not checked


def alter_partition(
    image: MetadataImage, topic: TopicImage, part: PartitionImage, leader_id: int,
    leader_epoch: int, partition_epoch: int, new_isr: Iterable[IsrMember],
    leader_recovery_state: int,
) -> PartitionChangeRecord | None:
    """An AlterPartition for one partition: the record (None: no change), or KafkaError."""
    if leader_id != part.leader:
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         f"Broker {leader_id} is not the leader of the partition")
    if leader_epoch != part.leader_epoch:
        raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH)
    if partition_epoch != part.partition_epoch:
        raise KafkaError(ErrorCode.INVALID_UPDATE_VERSION)
    if leader_recovery_state not in (LEADER_RECOVERED, LEADER_RECOVERING):
        raise KafkaError(ErrorCode.INVALID_REQUEST)
    members = list(new_isr)
    ids = tuple(m.broker_id for m in members)
    if len(set(ids)) != len(ids) or leader_id not in ids:
        raise KafkaError(ErrorCode.INVALID_REQUEST)
    for m in members:
        reg = image.brokers.get(m.broker_id)
        if (m.broker_id not in part.replicas or reg is None or reg.fenced
                or (reg.in_controlled_shutdown and m.broker_id not in part.isr)
                or (m.broker_epoch != -1 and m.broker_epoch != reg.epoch)):
            raise KafkaError(ErrorCode.INELIGIBLE_REPLICA)
    # the order of the request, as Kafka's PartitionChangeBuilder keeps it (the leader sends
    # its ISR sorted: a replica rejoining [2, 3] of replicas [2, 3, 1] gives [1, 2, 3]); ELR
    # follows the new ISR (members leaving an ISR below min ISR join it, and it is cleared
    # once the ISR is back at min ISR)
    usable = set(usable_brokers(image))
    return PartitionChange(
        topic, part, usable.__contains__, elr=elr_enabled(image),
        min_isr=topic_min_isr(image, topic), target_isr=ids).build()


def elect_leader(
    image: MetadataImage, topic: TopicImage, part: PartitionImage, election_type: int,
) -> PartitionChangeRecord:
    """ElectLeaders for one partition: the record, or KafkaError (ELECTION_NOT_NEEDED...)."""
    usable = set(usable_brokers(image))
    name = f"{topic.name}-{part.partition}"
    change = PartitionChange(topic, part, usable.__contains__, elr=elr_enabled(image),
                             min_isr=topic_min_isr(image, topic))
    if election_type == ELECTION_PREFERRED:
        preferred = part.replicas[0] if part.replicas else NO_LEADER
        if part.leader == preferred:
            raise KafkaError(ErrorCode.ELECTION_NOT_NEEDED,
                             "Leader election not needed for topic partition.")
        eligible = part.isr if part.isr or not change.elr else part.eligible_leader_replicas
        if preferred not in eligible or preferred not in usable:
            raise KafkaError(ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                             f"Failed to elect leader for partition {name} under strategy "
                             "PreferredReplicaPartitionLeaderElectionStrategy")
        change.election = Election.PREFERRED
    else:
        if part.leader != NO_LEADER:
            raise KafkaError(ErrorCode.ELECTION_NOT_NEEDED,
                             "Leader election not needed for topic partition.")
        change.election = Election.UNCLEAN
    rec = change.build()
    if rec is None or rec.leader in (NO_LEADER, NO_LEADER_CHANGE):
        raise KafkaError(ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                         f"Failed to elect leader for partition {name} under strategy "
                         "UncleanPartitionLeaderElectionStrategy")
    return rec


def unclean_elections(image: MetadataImage, unclean_for: Callable[[str], bool], limit: int
                      ) -> tuple[list[PartitionChangeRecord], bool]:
    """Kafka's ``maybeElectUncleanLeaders`` (the controller's periodic ``electUnclean`` task,
    every ``unclean.leader.election.interval.ms``): an UNCLEAN election (:func:`elect_leader`)
    in each leaderless partition whose topic has ``unclean.leader.election.enable``, up to
    ``limit`` records; a partition without any acceptable replica is skipped (Kafka logs
    ELIGIBLE_LEADERS_NOT_AVAILABLE for it). ``(records, more)``: ``more`` when ``limit`` was
    reached (Kafka runs the task again at once then)."""
    out: list[PartitionChangeRecord] = []
    for topic in image.topics.values():
        if len(out) >= limit:
            break
        leaderless = [p for p in topic.partitions.values() if p.leader == NO_LEADER]
        if not leaderless or not unclean_for(topic.name):
            continue
        for part in leaderless:
            if len(out) >= limit:
                break
            try:
                out.append(elect_leader(image, topic, part, ELECTION_UNCLEAN))
            except KafkaError:
                continue
    return out, len(out) >= limit


def preferred_elections(image: MetadataImage, limit: int) -> list[PartitionChangeRecord]:
    """Up to ``limit`` records giving partitions back to their preferred replica (Kafka's
    ``maybeBalancePartitionLeaders``): the first replica, when it is in the ISR and usable."""
    usable = set(usable_brokers(image))
    out: list[PartitionChangeRecord] = []
    for topic in image.topics.values():
        for part in topic.partitions.values():
            if not part.replicas:
                continue
            preferred = part.replicas[0]
            if part.leader != preferred and preferred in part.isr and preferred in usable:
                rec = change_record(topic, part, Change(leader=preferred))
                if rec is not None:
                    out.append(rec)
                    if len(out) >= limit:
                        return out
    return out


def _original(part: PartitionImage) -> tuple[int, ...]:
    return tuple(r for r in part.replicas if r not in part.adding_replicas)


def _reassign_change(image: MetadataImage, topic: TopicImage, part: PartitionImage,
                     unclean: bool = False) -> PartitionChange:
    usable = set(usable_brokers(image))
    return PartitionChange(
        topic, part, usable.__contains__, elr=elr_enabled(image),
        min_isr=topic_min_isr(image, topic),
        election=Election.UNCLEAN if unclean else Election.ONLINE)


def reassign(image: MetadataImage, topic: TopicImage, part: PartitionImage,
             target: list[int] | None, unclean: bool = False) -> PartitionChangeRecord | None:
    """AlterPartitionReassignments for one partition (Kafka's KRaft reassignment): the
    replicas become target + the current ones not in it, with ``adding_replicas`` /
    ``removing_replicas`` set; the new replicas catch up as followers and join the ISR, and
    the change that lets the reassignment complete completes it (kraft/partition_change.py:
    the removed replicas leave, ELR follows the new ISR). ``target`` None cancels a
    reassignment in progress (Kafka's ``PartitionReassignmentRevert``: back to the original
    replicas, the ISR without the added ones; when that leaves it empty the first original
    replica is the ISR, which takes ``unclean`` (the topic's
    ``unclean.leader.election.enable``), else INVALID_REPLICA_ASSIGNMENT). None: nothing to
    write."""
    change = _reassign_change(image, topic, part)
    original = _original(part)
    if target is None:
        if not part.adding_replicas and not part.removing_replicas:
            raise KafkaError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)
        isr = tuple(r for r in part.isr if r not in part.adding_replicas)
        if not isr:
            if not unclean:
                raise KafkaError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Unable to revert partition assignment for {topic.name}:{part.partition}"
                    " because it would require an unclean leader election.")
            isr = original[:1]
        change = _reassign_change(image, topic, part, unclean)
        change.target_isr, change.target_replicas = isr, original
        change.target_adding = change.target_removing = ()
        return change.build()
    # Kafka's PartitionReassignmentReplicas: against the current replicas (a reassignment in
    # progress included), added and removed ones sorted by id (a TreeSet)
    want = tuple(target)
    change.target_adding = tuple(sorted(set(want) - set(part.replicas)))
    change.target_removing = tuple(sorted(set(part.replicas) - set(want)))
    change.target_replicas = want + change.target_removing
    return change.build()


def complete_reassignment(image: MetadataImage, topic: TopicImage, part: PartitionImage
                          ) -> PartitionChangeRecord | None:
    """The record ending a reassignment in progress once it can end (see :func:`reassign`),
    else None. (Any change of the partition completes it then; this is for the moments
    nothing else changes.)"""
    if not part.adding_replicas and not part.removing_replicas:
        return None
    rec = _reassign_change(image, topic, part).build()
    return rec if rec is not None and rec.replicas is not None else None


def reassignments(image: MetadataImage) -> list[tuple[str, PartitionImage]]:
    """Partitions with a reassignment in progress (ListPartitionReassignments)."""
    return [(t.name, p) for t in image.topics.values() for p in t.partitions.values()
            if p.adding_replicas or p.removing_replicas]
