"""KIP-966 eligible leader replicas in the controller (kraft/partition_change.py through
kraft/cluster_control.py and kraft/replication_control.py), as Apache Kafka 4.3.1 keeps them.
The state machine over random fencing, shutdowns, ISR changes and elections, with and without
ELR, is ``tests/test_cluster_control.py::TestLeadership``."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft import replication_control as rc
from kraft.cluster_control import Registration
from kraft.image import (
    ELR_FEATURE,
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    MetadataImage,
    PartitionImage,
    TopicImage,
    apply,
)
from kraft.partition_change import Election, PartitionChange, clear_elr_records, topic_min_isr
from protocol._generated.config_record import ConfigRecord
from protocol.errors import ErrorCode, KafkaError
from tests.test_cluster_control import CLUSTER, FEATURES, Cluster


def part(c: Cluster, p: int = 0) -> PartitionImage:
    return c.image.topics["t"].partitions[p]


def state(c: Cluster, p: int = 0) -> tuple[int, tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    q = part(c, p)
    return q.leader, q.isr, q.eligible_leader_replicas, q.last_known_elr


def cluster(min_isr: int = 3, unclean: bool = False) -> Cluster:
    c = Cluster(min_isr=min_isr, unclean=unclean)
    c.up(1, 2, 3)
    c.topic("t", 1, 3, assignments={0: [1, 2, 3]})
    return c


def test_replicas_leaving_an_isr_below_min_isr_join_elr() -> None:
    """min ISR 3 on RF 3: each replica fenced joins ELR; the ISR may become empty, the last
    leader is the last known ELR; the first ELR member back leads, alone in the ISR."""
    c = cluster()
    assert topic_min_isr(c.image, c.image.topics["t"]) == 3
    c.heartbeat(1, fence=True)
    assert state(c) == (2, (2, 3), (1,), ())  # as Kafka 4.3.1 in cluster_leader_failover
    c.heartbeat(2, fence=True)
    assert state(c) == (3, (3,), (1, 2), ())
    c.heartbeat(3, fence=True)
    assert state(c) == (-1, (), (1, 2, 3), (3,))
    c.heartbeat(2)  # unfenced: an ELR member, and the ISR is empty
    assert state(c) == (2, (2,), (1, 3), ())
    c.heartbeat(1)
    p = part(c)
    c.commit([rc.alter_partition(c.image, c.image.topics["t"], p, 2, p.leader_epoch,
                                 p.partition_epoch, [rc.IsrMember(1), rc.IsrMember(2)], 0)])
    assert state(c) == (2, (1, 2), (3,), ())


def test_isr_back_at_min_isr_clears_elr() -> None:
    c = cluster()
    c.heartbeat(1, fence=True)
    c.heartbeat(1)  # back (unfenced), not in the ISR yet
    p = part(c)
    members = [rc.IsrMember(b) for b in (1, 2, 3)]
    c.commit([rc.alter_partition(c.image, c.image.topics["t"], p, 2, p.leader_epoch,
                                 p.partition_epoch, members, 0)])
    assert state(c) == (2, (1, 2, 3), (), ())


def test_no_elr_while_the_isr_stays_at_min_isr() -> None:
    c = cluster(min_isr=2)
    c.heartbeat(1, fence=True)
    assert state(c) == (2, (2, 3), (), ())
    c.heartbeat(2, fence=True)  # {3} < 2: 2 leaves an ISR below min ISR
    assert state(c) == (3, (3,), (2,), ())


def test_alter_partition_shrink_below_min_isr() -> None:
    c = cluster()
    p = part(c)
    c.commit([rc.alter_partition(c.image, c.image.topics["t"], p, 1, p.leader_epoch,
                                 p.partition_epoch, [rc.IsrMember(1), rc.IsrMember(2)], 0)])
    assert state(c) == (1, (1, 2), (3,), ())


def register_again(c: Cluster, b: int, clean: bool) -> None:
    prev = c.image.brokers[b].epoch if clean else -1
    reg = Registration(b, CLUSTER, uuid.uuid4(), [("PLAINTEXT", "h", 9000 + b, 0)], FEATURES,
                       previous_broker_epoch=prev)
    c.commit(c.cc.register(c.image, reg, c.image.offset + 1, 100_000)[1])  # session over


def test_unclean_shutdown_leaves_elr_a_clean_one_does_not() -> None:
    c = cluster()
    c.heartbeat(1, fence=True)
    c.heartbeat(2, fence=True)
    assert state(c) == (3, (3,), (1, 2), ())
    register_again(c, 1, clean=True)
    assert state(c) == (3, (3,), (1, 2), ())
    register_again(c, 2, clean=False)
    assert state(c) == (3, (3,), (1,), ())


def test_last_known_leader_comes_back_after_an_unclean_shutdown() -> None:
    """ISR and ELR empty: the last known leader is elected when it returns (Kafka's balanced
    recovery, an unclean election: leader recovery RECOVERING); any other replica only with
    unclean.leader.election.enable."""
    c = cluster(min_isr=1)
    p = part(c)
    c.commit([rc.alter_partition(c.image, c.image.topics["t"], p, 1, p.leader_epoch,
                                 p.partition_epoch, [rc.IsrMember(1)], 0)])
    assert state(c) == (1, (1,), (), ())  # {1} is at min ISR 1: no ELR
    c.heartbeat(1, fence=True)  # the last ISR member: ISR empty, 1 in ELR
    assert state(c) == (-1, (), (1,), (1,))
    register_again(c, 1, clean=False)
    assert state(c) == (-1, (), (), (1,))
    assert state(c)[0] == -1 and not c.image.brokers[2].fenced  # 2 is live but not eligible
    rec = rc.elect_for_unfenced(c.image, 1)
    assert [(r.leader, r.isr, r.leader_recovery_state) for r in rec] == [(1, [1], 1)]
    c.heartbeat(1)
    assert state(c) == (1, (1,), (), ())


def test_unclean_election_only_beyond_elr() -> None:
    c = cluster(min_isr=3)
    c.heartbeat(1, fence=True)
    c.heartbeat(2, fence=True)
    c.heartbeat(3, fence=True)
    assert state(c) == (-1, (), (1, 2, 3), (3,))
    t = c.image.topics["t"]
    with pytest.raises(KafkaError) as ei:  # no live replica at all
        rc.elect_leader(c.image, t, part(c), rc.ELECTION_UNCLEAN)
    assert ei.value.code == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    register_again(c, 1, clean=False)
    register_again(c, 3, clean=False)
    assert state(c) == (-1, (), (2,), (3,))
    c.heartbeat(1)  # live, but neither in ELR nor the last known leader
    assert state(c)[0] == -1
    t = c.image.topics["t"]
    rec = rc.elect_leader(c.image, t, part(c), rc.ELECTION_UNCLEAN)  # ElectLeaders UNCLEAN
    assert (rec.leader, rec.isr, rec.eligible_leader_replicas) == (1, [1], [])
    c.commit([rec])
    assert state(c) == (1, (1,), (), ())


def test_min_isr_change_clears_elr() -> None:
    c = cluster()
    c.heartbeat(1, fence=True)
    assert state(c)[2] == (1,)
    topic_change = [ConfigRecord(resource_type=RESOURCE_TOPIC, resource_name="t",
                                 name="min.insync.replicas", value="2")]
    clear = clear_elr_records(c.image, topic_change)
    assert [r.topic_name for r in clear] == ["t"]
    c.commit([*topic_change, *clear])
    assert state(c) == (2, (2, 3), (), ())
    cluster_change = [ConfigRecord(resource_type=RESOURCE_BROKER, resource_name="",
                                   name="min.insync.replicas", value="3")]
    assert [r.topic_name for r in clear_elr_records(c.image, cluster_change)] == [""]
    other = [ConfigRecord(resource_type=RESOURCE_TOPIC, resource_name="t",
                          name="retention.ms", value="1")]
    assert clear_elr_records(c.image, other) == []
    assert clear_elr_records(Cluster(elr=False).image, topic_change) == []


@st.composite
def partition_states(draw: st.DrawFn) -> tuple[PartitionImage, tuple[int, ...], set[int], int]:
    """(partition, target ISR, live brokers, min ISR) with the invariants the controller keeps:
    leader in the ISR or -1, ELR disjoint from the ISR and at most min ISR - |ISR| members,
    all within the replicas."""
    replicas = tuple(draw(st.permutations([1, 2, 3, 4]))[:draw(st.integers(1, 4))])
    min_isr = draw(st.integers(1, 4))
    isr = tuple(r for r in replicas if draw(st.booleans()))
    # a replica joins ELR only when it leaves an ISR that is then below min ISR
    elr = tuple(sorted(r for r in replicas if r not in isr and draw(st.booleans()))
                [:max(0, min_isr - len(isr))])
    leader = draw(st.sampled_from(isr)) if isr and draw(st.booleans()) else -1
    lk = (draw(st.sampled_from(replicas)),) if leader == -1 and draw(st.booleans()) else ()
    if leader == -1:  # fencing or shutdown: one broker leaves at a time
        gone = draw(st.sampled_from(isr)) if isr and draw(st.booleans()) else None
        target = tuple(r for r in isr if r != gone)
    else:  # AlterPartition: any ISR holding the leader
        target = tuple(r for r in isr if r == leader or draw(st.booleans()))
    live = {b for b in (1, 2, 3, 4) if draw(st.booleans())}
    p = PartitionImage(0, replicas, isr, leader, 0, 0, elr, lk)
    return p, target, live, min_isr


@settings(max_examples=300, deadline=None)
@given(state=partition_states(), unclean=st.booleans())
def test_partition_change_properties(
        state: tuple[PartitionImage, tuple[int, ...], set[int], int], unclean: bool) -> None:
    """One change: ELR disjoint from the ISR and empty at or above min ISR; a leader outside
    the old ISR and ELR only through an unclean election (ISR = [leader], RECOVERING, ELR
    cleared); the same change again changes nothing (the controller's decisions are stable)."""
    part, target, live, min_isr = state
    topic = TopicImage("t", uuid.UUID(int=1), {0: part})
    election = Election.UNCLEAN if unclean else Election.ONLINE

    def change(p: PartitionImage, isr: tuple[int, ...] | None) -> Any:
        return PartitionChange(TopicImage("t", topic.topic_id, {0: p}), p, live.__contains__,
                               elr=True, min_isr=min_isr, election=election,
                               target_isr=isr).build()

    rec = change(part, target)
    new = apply(MetadataImage(topics={"t": topic}, topics_by_id={topic.topic_id: topic},
                              features={ELR_FEATURE: 1}), [rec], 1, 1).topics["t"].partitions[0] if rec is not None else part
    elr = set(new.eligible_leader_replicas)
    assert not elr & set(new.isr) and elr <= set(part.replicas)
    assert not elr or len(new.isr) < min_isr
    assert new.leader == -1 or (new.leader in new.isr and new.leader in live)
    if rec is not None and rec.leader >= 0 and rec.leader not in part.isr \
            and rec.leader not in part.eligible_leader_replicas:
        assert rec.isr == [rec.leader] and rec.leader_recovery_state == 1
        assert new.eligible_leader_replicas == ()
        assert unclean or part.last_known_elr == (rec.leader,)
    assert change(new, None) is None


def reassign(c: Cluster, target: list[int] | None, unclean: bool = False) -> None:
    rec = rc.reassign(c.image, c.image.topics["t"], part(c), target, unclean=unclean)
    assert rec is not None
    c.commit([rec])


def alter_isr(c: Cluster, isr: list[int]) -> None:
    p = part(c)
    rec = rc.alter_partition(c.image, c.image.topics["t"], p, p.leader, p.leader_epoch,
                             p.partition_epoch, [rc.IsrMember(b) for b in isr], 0)
    assert rec is not None
    c.commit([rec])


def test_reassignment_completing_keeps_elr_of_the_old_isr() -> None:
    """As measured on Kafka 4.3.1 (docs/FINDINGS.md F, compat_tests/explore_elr.py A):
    replicas [2, 1, 3], min ISR 3, 3 fenced (ISR [2, 1], ELR [3]); reassigned to [2, 1] it
    completes at once (one record: replicas [2, 1], leader epoch bumped) and ELR is computed
    for the new ISR [2, 1] against the min ISR of the old replica set (3): 3 stays in ELR
    although it is no replica any more, until it registers again after its unclean
    shutdown."""
    c = Cluster(min_isr=3)
    c.up(1, 2, 3)
    c.topic("t", 1, 3, assignments={0: [2, 1, 3]})
    c.heartbeat(3, fence=True)
    assert state(c) == (2, (2, 1), (3,), ())
    reassign(c, [2, 1])
    p = part(c)
    assert (p.replicas, p.isr, p.eligible_leader_replicas, p.leader, p.leader_epoch) == \
        ((2, 1), (2, 1), (3,), 2, 1)
    assert (p.adding_replicas, p.removing_replicas) == ((), ())
    register_again(c, 3, clean=False)
    assert state(c) == (2, (2, 1), (), ())


def test_reassignment_applies_min_isr_to_the_new_isr() -> None:
    """Replicas [1, 2, 3], min ISR 2; 3 and 2 fenced: ISR [1], ELR [2]. Reassigned to
    [1, 4] (fewer added than removed: every remaining replica must be in the ISR), the
    AlterPartition that adds 4 completes it: ISR [1, 4] is at min ISR, so ELR is cleared."""
    c = Cluster(min_isr=2)
    c.up(1, 2, 3, 4)
    c.topic("t", 1, 3, assignments={0: [1, 2, 3]})
    c.heartbeat(3, fence=True)
    c.heartbeat(2, fence=True)
    assert state(c) == (1, (1,), (2,), ())
    reassign(c, [1, 4])
    p = part(c)
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ((1, 4, 2, 3), (4,), (2, 3))
    assert rc.complete_reassignment(c.image, c.image.topics["t"], p) is None
    alter_isr(c, [1, 4])
    p = part(c)
    assert (p.replicas, p.isr, p.eligible_leader_replicas, p.last_known_elr) == \
        ((1, 4), (1, 4), (), ())
    assert (p.adding_replicas, p.removing_replicas) == ((), ())


def test_reassignment_completes_without_a_retained_replica_in_the_isr() -> None:
    """Kafka's completion rule: the ISR without the removed replicas must hold every added
    one (and, only when fewer are added than removed, every remaining replica). Replicas
    [1, 2, 3], min ISR 3, 2 fenced (ISR [1, 3], ELR [2]); [1, 2, 4] completes once 4 is in
    the ISR although 2 is not. The new ISR [1, 4] is below min ISR: ELR = (old ELR + old ISR)
    - new ISR, so the removed 3 joins it (as Kafka's maybePopulateTargetElr)."""
    c = Cluster(min_isr=3)
    c.up(1, 2, 3, 4)
    c.topic("t", 1, 3, assignments={0: [1, 2, 3]})
    c.heartbeat(2, fence=True)
    assert state(c) == (1, (1, 3), (2,), ())
    reassign(c, [1, 2, 4])
    alter_isr(c, [1, 3, 4])
    p = part(c)
    assert (p.replicas, p.isr, p.eligible_leader_replicas) == ((1, 2, 4), (1, 4), (2, 3))


def test_reassignment_cancel_with_an_empty_isr_needs_unclean() -> None:
    """Kafka's PartitionReassignmentRevert: the ISR without the added replicas; empty, it is
    the first original replica, which takes unclean.leader.election.enable (else
    INVALID_REPLICA_ASSIGNMENT)."""
    c = Cluster(min_isr=1)
    c.up(1, 2, 3)
    c.topic("t", 1, 1, assignments={0: [1]})
    reassign(c, [2])
    alter_isr(c, [1, 2])  # completes: replicas [2]
    assert part(c).replicas == (2,)
    reassign(c, [3])  # 3 never joins; 2 is fenced: ISR empty, 2 in ELR? (min ISR 1: no)
    c.heartbeat(2, fence=True)
    p = part(c)
    assert (p.replicas, p.isr, p.leader) == ((3, 2), (), -1)
    with pytest.raises(KafkaError) as e:
        rc.reassign(c.image, c.image.topics["t"], p, None)
    assert e.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    reassign(c, None, unclean=True)
    p = part(c)
    assert (p.replicas, p.isr, p.adding_replicas, p.removing_replicas) == ((2,), (2,), (), ())


def test_unclean_shutdown_leaves_the_isr() -> None:
    """Kafka 4.3.1 (handleBrokerShutdown -> generateLeaderAndIsrUpdates with
    brokerWithUncleanShutdown): a broker that registers again after an unclean shutdown
    while still in an ISR (its session not expired: here a new controller had none for it)
    leaves that ISR and does not join ELR; leadership moves. After a clean shutdown it leaves
    the ISR too, but joins ELR when the ISR drops below min ISR."""
    c = cluster(min_isr=2)
    assert state(c) == (1, (1, 2, 3), (), ())
    register_again(c, 1, clean=False)
    assert state(c) == (2, (2, 3), (), ())
    c.heartbeat(1)  # unfenced, not in the ISR (it must catch up first)
    register_again(c, 2, clean=True)
    assert state(c) == (3, (3,), (2,), ())
    register_again(c, 3, clean=False)  # 2 (fenced until it heartbeats) is the ELR
    assert state(c) == (-1, (), (2,), (3,))
    c.heartbeat(2)
    assert state(c) == (2, (2,), (), ())


def test_periodic_unclean_election() -> None:
    """Kafka's electUnclean task (maybeElectUncleanLeaders): leaderless partitions of topics
    with unclean.leader.election.enable get any live replica as leader (ISR [it], leader
    recovery RECOVERING, ELR and LastKnownElr cleared); others are left; a partition with no
    live replica is skipped; at most ``limit`` records, ``more`` when the limit was hit."""
    c = Cluster(min_isr=3)
    c.up(1, 2, 3)
    c.topic("t", 3, 3, assignments={0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]})
    c.topic("u", 1, 1, assignments={0: [3]})
    for b in (1, 2, 3):
        c.heartbeat(b, fence=True)
    for b in (1, 2):
        register_again(c, b, clean=False)  # out of ELR, not the last known leader of 0
        c.heartbeat(b)
    t = c.image.topics["t"]
    assert [p.leader for p in t.partitions.values()] == [-1, -1, -1]
    assert rc.unclean_elections(c.image, lambda _t: False, 10) == ([], False)
    recs, more = rc.unclean_elections(c.image, lambda name: name == "t", 10)
    assert not more and len(recs) == 3
    assert all(r.topic_id == t.topic_id and r.leader in (1, 2) and r.isr == [r.leader]
               and r.leader_recovery_state == rc.LEADER_RECOVERING for r in recs)
    recs, more = rc.unclean_elections(c.image, lambda _t: True, 2)  # "u": 3 is fenced
    assert more and len(recs) == 2
    c.commit(rc.unclean_elections(c.image, lambda _t: True, 10)[0])
    for p in c.image.topics["t"].partitions.values():
        assert p.leader in (1, 2) and p.isr == (p.leader,)
        assert (p.eligible_leader_replicas, p.last_known_elr) == ((), ())
    assert c.image.topics["u"].partitions[0].leader == -1
    assert rc.unclean_elections(c.image, lambda _t: True, 10) == ([], False)
