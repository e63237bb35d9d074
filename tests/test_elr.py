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
