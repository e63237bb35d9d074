"""Controller logic for brokers and partition leadership (kraft/cluster_control.py,
kraft/replication_control.py): unit tests and a Hypothesis state machine over the image."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kraft import controller
from kraft import replication_control as rc
from kraft.cluster_control import ClusterControl, Registration
from kraft.image import MetadataImage, apply
from protocol._generated.broker_registration_change_record import BrokerRegistrationChangeRecord
from protocol._generated.feature_level_record import FeatureLevelRecord
from protocol._generated.partition_change_record import PartitionChangeRecord
from protocol.errors import ErrorCode, KafkaError

CLUSTER = "q1Wk3nXyRhmS3ZcU4e3Ang"
FEATURES = {"metadata.version": (7, 30)}


class Cluster:
    """An image plus a ClusterControl, with records applied as the driver commits them."""

    def __init__(self, session_timeout_ms: int = 9000, unclean: bool = False,
                 elr: bool = True, min_isr: int = 1) -> None:
        boot = controller.bootstrap_records(min_isr)
        if not elr:  # eligible.leader.replicas.version 0 (kafka-features downgrade)
            boot.append(FeatureLevelRecord(name="eligible.leader.replicas.version",
                                           feature_level=0))
        self.image = apply(MetadataImage(), boot, len(boot) - 1, 1)
        self.cc = ClusterControl(CLUSTER, session_timeout_ms, lambda _t: unclean)
        self.incarnations: dict[int, uuid.UUID] = {}

    def commit(self, records: list[Any]) -> None:
        if records:
            self.image = apply(self.image, records, self.image.offset + len(records), 1)

    def register(self, b: int, now: int = 0, rack: str | None = None,
                 incarnation: uuid.UUID | None = None) -> int:
        inc = incarnation or self.incarnations.setdefault(b, uuid.uuid4())
        reg = Registration(b, CLUSTER, inc, [("PLAINTEXT", "h", 9000 + b, 0)], FEATURES, rack)
        epoch, recs = self.cc.register(self.image, reg, self.image.offset + 1, now)
        self.commit(recs)
        return epoch

    def heartbeat(self, b: int, now: int = 0, offset: int | None = None, fence: bool = False,
                  shut: bool = False) -> Any:
        epoch = self.image.brokers[b].epoch
        reply, recs = self.cc.heartbeat(self.image, b, epoch,
                                        self.image.offset if offset is None else offset,
                                        fence, shut, now)
        self.commit(recs)
        return reply

    def up(self, *brokers: int, rack: dict[int, str] | None = None) -> None:
        for b in brokers:
            self.register(b, rack=(rack or {}).get(b))
            assert not self.heartbeat(b).is_fenced

    def topic(self, name: str, partitions: int, rf: int,
              assignments: dict[int, list[int]] | None = None) -> None:
        self.commit(controller.create_topic(self.image, name, partitions, rf, {},
                                            assignments=assignments))


def test_registration_is_fenced_until_caught_up() -> None:
    c = Cluster()
    epoch = c.register(1)
    assert epoch == c.image.offset  # the offset of its RegisterBrokerRecord
    assert c.image.brokers[1].fenced
    reply = c.heartbeat(1, offset=epoch - 1)
    assert (reply.is_caught_up, reply.is_fenced) == (False, True)
    reply = c.heartbeat(1, offset=epoch)
    assert (reply.is_caught_up, reply.is_fenced) == (True, False)
    assert not c.image.brokers[1].fenced


def test_unfence_record_is_registration_change() -> None:
    c = Cluster()
    c.register(1)
    reply, recs = c.cc.heartbeat(c.image, 1, c.image.brokers[1].epoch, c.image.offset,
                                 False, False, 0)
    assert isinstance(recs[0], BrokerRegistrationChangeRecord) and recs[0].fenced == -1


def test_registration_keeps_log_dirs_through_changes_and_snapshots() -> None:
    """An Apache Kafka broker re-registers until its RegisterBrokerRecord lists its log
    directories (found by running one against our controller); they survive a snapshot."""
    from kraft.image_writer import image_records

    c = Cluster()
    dirs = (uuid.uuid4(), uuid.uuid4())
    reg = Registration(1, CLUSTER, uuid.uuid4(), [("PLAINTEXT", "h", 9001, 0)], FEATURES,
                       log_dirs=dirs)
    _epoch, recs = c.cc.register(c.image, reg, c.image.offset + 1, 0)
    assert tuple(recs[0].log_dirs) == dirs
    c.commit(recs)
    c.heartbeat(1)  # unfenced by a BrokerRegistrationChangeRecord without log_dirs
    assert c.image.brokers[1].log_dirs == dirs and not c.image.brokers[1].fenced
    again = apply(MetadataImage(), image_records(c.image), c.image.offset, 1)
    assert again.brokers[1].log_dirs == dirs


def test_assign_replicas_to_dirs() -> None:
    """KIP-858 (AssignReplicasToDirs, what an Apache Kafka broker sends after creating
    replicas): the directory of a broker's replica recorded in the partition, kept by
    snapshots; Kafka's per-partition errors."""
    from kraft.directories import UNASSIGNED, assign
    from kraft.image_writer import image_records

    c = Cluster()
    c.up(1, 2)
    c.topic("t", 2, 2)
    tid = c.image.topics["t"].topic_id
    d1, unknown = uuid.uuid4(), uuid.uuid4()
    wanted = [(d1, tid, 0), (d1, tid, 1), (d1, tid, 7), (d1, unknown, 0)]
    results, recs = assign(c.image, 1, wanted)
    assert [results[w] for w in wanted] == [
        ErrorCode.NONE, ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.UNKNOWN_TOPIC_ID]
    epoch = c.image.topics["t"].partitions[0].partition_epoch
    c.commit(recs)
    part = c.image.topics["t"].partitions[0]
    assert part.directories[part.replicas.index(1)] == d1
    assert part.directories[part.replicas.index(2)] == UNASSIGNED
    assert part.partition_epoch == epoch + 1
    assert assign(c.image, 1, wanted[:1])[1] == []  # already there: no record
    c.up(3)
    c.topic("only-3", 1, 1, assignments={0: [3]})
    other = c.image.topics["only-3"].topic_id
    assert assign(c.image, 1, [(d1, other, 0)])[0][(d1, other, 0)] == \
        ErrorCode.NOT_LEADER_OR_FOLLOWER
    again = apply(MetadataImage(), image_records(c.image), c.image.offset, 1)
    assert again.topics["t"].partitions[0].directories == part.directories


def test_registration_errors() -> None:
    c = Cluster()
    c.up(1)
    reg = Registration(1, "other", uuid.uuid4(), [], FEATURES)
    with pytest.raises(KafkaError) as e:
        c.cc.register(c.image, reg, 99, 0)
    assert e.value.code == ErrorCode.INCONSISTENT_CLUSTER_ID
    reg = Registration(1, CLUSTER, uuid.uuid4(), [], FEATURES)
    with pytest.raises(KafkaError) as e:
        c.cc.register(c.image, reg, 99, 1000)
    assert e.value.code == ErrorCode.DUPLICATE_BROKER_REGISTRATION
    # after the session expired, a new incarnation replaces it with a new epoch
    old = c.image.brokers[1].epoch
    assert c.register(1, now=10_000, incarnation=uuid.uuid4()) > old
    reg = Registration(2, CLUSTER, uuid.uuid4(), [], {"metadata.version": (1, 7)})
    with pytest.raises(KafkaError) as e:
        c.cc.register(c.image, reg, 99, 0)
    assert e.value.code == ErrorCode.UNSUPPORTED_VERSION


def test_a_new_controller_lets_a_restarted_broker_register_at_once() -> None:
    """A combined node killed and restarted: its controller starts with no session for the
    old incarnation, so the new one registers at once (Kafka 4.3.1 serves again ~2 s after
    kill -9), while the session clock still fences a broker that never comes back."""
    c = Cluster()
    c.up(1)
    fresh = ClusterControl(CLUSTER, 9000, lambda _t: False)
    assert fresh.fence_stale(c.image, 1000) is None  # starts the clock, fences nobody
    epoch, _ = fresh.register(c.image, Registration(1, CLUSTER, uuid.uuid4(), [], FEATURES),
                              99, 2000)
    assert epoch == 99
    # once heard from, the session is defended against yet another incarnation
    with pytest.raises(KafkaError) as e:
        fresh.register(c.image, Registration(1, CLUSTER, uuid.uuid4(), [], FEATURES), 100, 3000)
    assert e.value.code == ErrorCode.DUPLICATE_BROKER_REGISTRATION
    silent = ClusterControl(CLUSTER, 9000, lambda _t: False)
    assert silent.fence_stale(c.image, 0) is None
    fenced = silent.fence_stale(c.image, 9000)
    assert fenced is not None and fenced[0] == 1


def test_stale_epoch() -> None:
    c = Cluster()
    c.up(1)
    for b, epoch in ((1, 12345), (7, 1)):
        with pytest.raises(KafkaError) as e:
            c.cc.heartbeat(c.image, b, epoch, 0, False, False, 0)
        assert e.value.code == ErrorCode.STALE_BROKER_EPOCH
        with pytest.raises(KafkaError) as e:
            c.cc.allocate_producer_ids(c.image, b, epoch)
        assert e.value.code == ErrorCode.STALE_BROKER_EPOCH


def test_session_expiry_fences_and_moves_leadership() -> None:
    c = Cluster(session_timeout_ms=1000)
    c.up(1, 2, 3)
    c.topic("t", 3, 3)
    led_by_1 = [p for p in c.image.topics["t"].partitions.values() if p.leader == 1]
    assert led_by_1
    c.heartbeat(2, now=900)
    c.heartbeat(3, now=900)
    assert c.cc.fence_stale(c.image, 900) is None
    found = c.cc.fence_stale(c.image, 1500)
    assert found is not None and found[0] == 1
    c.commit(found[1])
    assert c.image.brokers[1].fenced
    for p in c.image.topics["t"].partitions.values():
        assert p.leader in (2, 3) and 1 not in p.isr and p.leader in p.isr
    for old in led_by_1:
        assert c.image.topics["t"].partitions[old.partition].leader_epoch == old.leader_epoch + 1


@pytest.mark.parametrize("elr", [True, False])
def test_last_isr_member_fenced_leaves_partition_leaderless_then_unfence_elects(
        elr: bool) -> None:
    """Without ELR the last ISR member stays in the ISR; with ELR (KIP-966) the ISR becomes
    empty, the member is in ELR and is the last known leader, and leads again once back."""
    c = Cluster(session_timeout_ms=1000, elr=elr)
    c.up(1, 2)
    c.topic("t", 1, 1, assignments={0: [1]})
    c.heartbeat(2, now=1500)
    found = c.cc.fence_stale(c.image, 1500)
    assert found is not None
    c.commit(found[1])
    p = c.image.topics["t"].partitions[0]
    if elr:
        assert (p.leader, p.isr, p.eligible_leader_replicas, p.last_known_elr) == (
            -1, (), (1,), (1,))
    else:
        assert (p.leader, p.isr, p.eligible_leader_replicas) == (-1, (1,), ())
    assert c.heartbeat(1, now=1600).is_fenced is False
    p = c.image.topics["t"].partitions[0]
    assert (p.leader, p.isr, p.eligible_leader_replicas, p.last_known_elr) == (1, (1,), (), ())


def test_unclean_election_on_fence() -> None:
    c = Cluster(unclean=True)
    c.up(1, 2)
    c.topic("t", 1, 2, assignments={0: [1, 2]})
    part = c.image.topics["t"].partitions[0]
    c.commit([rc.alter_partition(c.image, c.image.topics["t"], part, 1, part.leader_epoch,
                                 part.partition_epoch, [rc.IsrMember(1)], 0)])
    assert c.image.topics["t"].partitions[0].isr == (1,)
    c.heartbeat(1, fence=True)
    p = c.image.topics["t"].partitions[0]
    assert (p.leader, p.isr) == (2, (2,))


def test_controlled_shutdown() -> None:
    c = Cluster()
    c.up(1, 2)
    c.topic("t", 2, 2)
    reply = c.heartbeat(1, shut=True)
    assert not reply.should_shut_down
    assert c.image.brokers[1].in_controlled_shutdown
    assert all(p.leader == 2 for p in c.image.topics["t"].partitions.values())
    reply = c.heartbeat(1, shut=True)
    assert reply.should_shut_down and reply.is_fenced
    assert c.image.brokers[1].fenced
    # no new replicas go to a broker in controlled shutdown or fenced
    with pytest.raises(KafkaError) as e:
        c.topic("u", 1, 2)
    assert e.value.code == ErrorCode.INVALID_REPLICATION_FACTOR


def test_unregister() -> None:
    c = Cluster()
    c.up(1, 2)
    c.topic("t", 1, 2, assignments={0: [1, 2]})
    c.commit(c.cc.unregister(c.image, 1))
    assert 1 not in c.image.brokers
    assert c.image.topics["t"].partitions[0].leader == 2
    with pytest.raises(KafkaError) as e:
        c.cc.unregister(c.image, 1)
    assert e.value.code == ErrorCode.BROKER_ID_NOT_REGISTERED


def test_producer_id_blocks() -> None:
    c = Cluster()
    c.up(1)
    epoch = c.image.brokers[1].epoch
    starts = []
    for _ in range(3):
        start, recs = c.cc.allocate_producer_ids(c.image, 1, epoch)
        c.commit(recs)
        starts.append(start)
    assert starts == [0, 1000, 2000]


def test_rack_aware_placement() -> None:
    c = Cluster()
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    c.up(*racks, rack=racks)
    c.topic("t", 12, 3)
    leaders = set()
    for p in c.image.topics["t"].partitions.values():
        assert len({racks[b] for b in p.replicas}) == 3, p
        leaders.add(p.leader)
    assert leaders == set(racks)
    with pytest.raises(KafkaError) as e:
        c.topic("u", 1, 7)
    assert e.value.code == ErrorCode.INVALID_REPLICATION_FACTOR


def test_alter_partition_errors() -> None:
    c = Cluster()
    c.up(1, 2, 3)
    c.topic("t", 1, 3, assignments={0: [1, 2, 3]})
    t = c.image.topics["t"]
    p = t.partitions[0]

    def code(**kw: Any) -> ErrorCode:
        args: dict[str, Any] = dict(leader_id=1, leader_epoch=p.leader_epoch,
                                    partition_epoch=p.partition_epoch,
                                    new_isr=[rc.IsrMember(1), rc.IsrMember(2)],
                                    leader_recovery_state=0)
        args.update(kw)
        try:
            rc.alter_partition(c.image, t, p, **args)
        except KafkaError as e:
            return e.code
        return ErrorCode.NONE

    assert code(leader_epoch=p.leader_epoch - 1) == ErrorCode.FENCED_LEADER_EPOCH
    assert code(partition_epoch=p.partition_epoch + 1) == ErrorCode.INVALID_UPDATE_VERSION
    assert code(leader_id=2) == ErrorCode.INVALID_REQUEST
    assert code(new_isr=[rc.IsrMember(1), rc.IsrMember(9)]) == ErrorCode.INELIGIBLE_REPLICA
    assert code(new_isr=[rc.IsrMember(1), rc.IsrMember(2, 424242)]) == \
        ErrorCode.INELIGIBLE_REPLICA
    assert code() == ErrorCode.NONE
    rec = rc.alter_partition(c.image, t, p, 1, p.leader_epoch, p.partition_epoch,
                             [rc.IsrMember(2), rc.IsrMember(1)], 0)
    # the requested order, as Kafka's PartitionChangeBuilder keeps it
    assert isinstance(rec, PartitionChangeRecord) and rec.isr == [2, 1] and rec.leader == -2
    c.commit([rec])
    q = c.image.topics["t"].partitions[0]
    assert (q.partition_epoch, q.leader_epoch) == (p.partition_epoch + 1, p.leader_epoch)
    c.heartbeat(3, fence=True)  # a fenced broker cannot join the ISR
    t = c.image.topics["t"]
    q = t.partitions[0]
    with pytest.raises(KafkaError) as e:
        rc.alter_partition(c.image, t, q, 1, q.leader_epoch, q.partition_epoch,
                           [rc.IsrMember(1), rc.IsrMember(2), rc.IsrMember(3)], 0)
    assert e.value.code == ErrorCode.INELIGIBLE_REPLICA


def test_elect_leaders() -> None:
    c = Cluster()
    c.up(1, 2)
    c.topic("t", 1, 2, assignments={0: [1, 2]})
    t = c.image.topics["t"]
    with pytest.raises(KafkaError) as e:
        rc.elect_leader(c.image, t, t.partitions[0], rc.ELECTION_PREFERRED)
    assert e.value.code == ErrorCode.ELECTION_NOT_NEEDED
    c.heartbeat(1, fence=True)
    t = c.image.topics["t"]
    assert t.partitions[0].leader == 2
    with pytest.raises(KafkaError) as e:
        rc.elect_leader(c.image, t, t.partitions[0], rc.ELECTION_PREFERRED)
    assert e.value.code == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    c.heartbeat(1)  # unfenced again, but not in the ISR: the preferred leader must rejoin it
    t = c.image.topics["t"]
    p = t.partitions[0]
    c.commit([rc.alter_partition(c.image, t, p, 2, p.leader_epoch, p.partition_epoch,
                                 [rc.IsrMember(1), rc.IsrMember(2)], 0)])
    t = c.image.topics["t"]
    c.commit([rc.elect_leader(c.image, t, t.partitions[0], rc.ELECTION_PREFERRED)])
    assert c.image.topics["t"].partitions[0].leader == 1


def test_preferred_elections_for_auto_leader_rebalance() -> None:
    c = Cluster()
    c.up(1, 2, 3)
    c.topic("t", 3, 2, assignments={0: [1, 2], 1: [2, 3], 2: [3, 1]})
    assert rc.preferred_elections(c.image, 10) == []
    c.heartbeat(1, fence=True)  # 1 leaves: partition 0 moves to 2, partition 2 keeps 3
    assert c.image.topics["t"].partitions[0].leader == 2
    assert rc.preferred_elections(c.image, 10) == []  # 1 is not in the ISR
    c.heartbeat(1)
    t = c.image.topics["t"]
    p = t.partitions[0]
    c.commit([rc.alter_partition(c.image, t, p, 2, p.leader_epoch, p.partition_epoch,
                                 [rc.IsrMember(1), rc.IsrMember(2)], 0)])
    recs = rc.preferred_elections(c.image, 10)
    assert [(r.partition_id, r.leader) for r in recs] == [(0, 1)]
    c.commit(recs)
    assert c.image.topics["t"].partitions[0].leader == 1
    assert rc.preferred_elections(c.image, 10) == []


def test_reassignment_adds_then_removes() -> None:
    c = Cluster()
    c.up(1, 2, 3)
    c.topic("t", 1, 2, assignments={0: [1, 2]})
    t = c.image.topics["t"]
    assert rc.reassign(c.image, t, t.partitions[0], [1, 2]) is None
    c.commit([rc.reassign(c.image, t, t.partitions[0], [2, 3])])
    p = c.image.topics["t"].partitions[0]
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ((2, 3, 1), (3,), (1,))
    assert rc.reassignments(c.image) == [("t", p)]
    # 3 not in the ISR yet
    assert rc.complete_reassignment(c.image, c.image.topics["t"], p) is None
    t = c.image.topics["t"]
    # the AlterPartition that adds 3 completes the reassignment in the same record, as
    # Kafka's PartitionChangeBuilder does
    rec = rc.alter_partition(c.image, t, p, p.leader, p.leader_epoch, p.partition_epoch,
                             [rc.IsrMember(1), rc.IsrMember(2), rc.IsrMember(3)], 0)
    assert rec is not None and rec.replicas == [2, 3] and rec.isr == [2, 3]
    c.commit([rec])
    t = c.image.topics["t"]
    assert rc.complete_reassignment(c.image, t, t.partitions[0]) is None
    p = c.image.topics["t"].partitions[0]
    assert (p.replicas, p.isr, p.leader, p.adding_replicas) == ((2, 3), (2, 3), 2, ())
    assert p.leader_epoch == 1  # a new leader
    assert rc.reassignments(c.image) == []
    with pytest.raises(KafkaError) as e:
        rc.reassign(c.image, c.image.topics["t"], p, None)
    assert e.value.code == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    # a cancel goes back to the original replicas (in the order of the merged list, as
    # Kafka's PartitionReassignmentRevert)
    c.commit([rc.reassign(c.image, c.image.topics["t"], p, [1, 3])])
    assert c.image.topics["t"].partitions[0].replicas == (1, 3, 2)
    t = c.image.topics["t"]
    c.commit([rc.reassign(c.image, t, t.partitions[0], None)])
    p = c.image.topics["t"].partitions[0]
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ((3, 2), (), ())


class CheckedCluster(Cluster):
    """A Cluster whose commits are checked: a leader that was neither in the ISR nor in ELR
    comes only from an unclean election (leader recovery RECOVERING)."""

    def commit(self, records: list[Any]) -> None:
        topic = self.image.topics.get("t")
        for r in records:
            if not isinstance(r, PartitionChangeRecord) or topic is None \
                    or r.topic_id != topic.topic_id or r.leader < 0:
                continue
            old = self.image.topics["t"].partitions[r.partition_id]
            # (a reassignment completed by an AlterPartition: a leader from the new ISR)
            completed = r.replicas is not None and r.isr is not None and r.leader in r.isr
            if r.leader not in old.isr and r.leader not in old.eligible_leader_replicas \
                    and not completed:
                assert r.leader_recovery_state == rc.LEADER_RECOVERING, (old, r)
        super().commit(records)


class LeadershipMachine(RuleBasedStateMachine):
    """Random registrations, heartbeats, fencing, shutdowns, ISR changes and elections: the
    leader is always in the ISR (or -1), the ISR is within the replicas and never empty
    without ELR, ELR (KIP-966) is disjoint from the ISR and kept only while the ISR is below
    min ISR, a live leader is unfenced, epochs never go back, and a leader outside ISR and
    ELR comes only from an unclean election."""

    ELR = True
    MIN_ISR = 2

    def __init__(self) -> None:
        super().__init__()
        self.c = CheckedCluster(session_timeout_ms=1000, elr=self.ELR, min_isr=self.MIN_ISR)
        self.c.up(1, 2, 3, 4)
        self.c.topic("t", 6, 3)
        self.now = 0
        self.epochs: dict[int, tuple[int, int]] = {}

    def _try(self, fn: Any) -> None:
        try:
            recs = fn()
        except KafkaError:
            return
        self.c.commit([r for r in recs if r is not None])

    @rule(b=st.integers(1, 4), fence=st.booleans(), shut=st.booleans(), dt=st.integers(0, 700))
    def heartbeat(self, b: int, fence: bool, shut: bool, dt: int) -> None:
        self.now += dt
        if b not in self.c.image.brokers:
            return
        self.c.heartbeat(b, now=self.now, fence=fence, shut=shut)

    @rule(b=st.integers(1, 4), clean=st.booleans())
    def reregister(self, b: int, clean: bool) -> None:
        reg = self.c.image.brokers.get(b)
        previous = reg.epoch if clean and reg is not None else -1
        self._try(lambda: self.c.cc.register(
            self.c.image, Registration(b, CLUSTER, uuid.uuid4(), [], FEATURES,
                                       previous_broker_epoch=previous),
            self.c.image.offset + 1, self.now)[1])

    @rule(dt=st.integers(0, 2000))
    def expire(self, dt: int) -> None:
        self.now += dt
        found = self.c.cc.fence_stale(self.c.image, self.now)
        if found is not None:
            self.c.commit(found[1])

    @rule(p=st.integers(0, 5), isr=st.sets(st.integers(1, 4), min_size=1))
    def alter(self, p: int, isr: set[int]) -> None:
        t = self.c.image.topics["t"]
        part = t.partitions[p]
        members = [rc.IsrMember(b) for b in sorted(isr | {part.leader})]
        self._try(lambda: [rc.alter_partition(self.c.image, t, part, part.leader,
                                              part.leader_epoch, part.partition_epoch,
                                              members, 0)])

    @rule(p=st.integers(0, 5), kind=st.sampled_from([0, 1]))
    def elect(self, p: int, kind: int) -> None:
        t = self.c.image.topics["t"]
        self._try(lambda: [rc.elect_leader(self.c.image, t, t.partitions[p], kind)])

    @rule(p=st.integers(0, 5), order=st.permutations([1, 2, 3, 4]), n=st.integers(1, 4),
          cancel=st.booleans())
    def reassign(self, p: int, order: list[int], n: int, cancel: bool) -> None:
        t = self.c.image.topics["t"]
        self._try(lambda: [rc.reassign(self.c.image, t, t.partitions[p],
                                       None if cancel else order[:n])])

    @rule(limit=st.integers(1, 6))
    def unclean_sweep(self, limit: int) -> None:
        """The periodic electUnclean task, every topic with unclean.leader.election.enable."""
        recs, more = rc.unclean_elections(self.c.image, lambda _t: True, limit)
        assert more == (len(recs) >= limit)
        self.c.commit(recs)

    @invariant()
    def leadership_is_sound(self) -> None:
        img = self.c.image
        for p in img.topics["t"].partitions.values():
            assert (p.isr or self.ELR) and set(p.isr) <= set(p.replicas), p
            assert p.leader == -1 or p.leader in p.isr, p
            assert set(p.adding_replicas) | set(p.removing_replicas) <= set(p.replicas), p
            elr = set(p.eligible_leader_replicas)
            # (ELR may keep a replica a completed reassignment removed, as Kafka 4.3.1)
            assert not elr & set(p.isr) and elr <= {1, 2, 3, 4}, p
            assert not elr or (self.ELR and len(p.isr) < self.MIN_ISR), p
            if p.leader != -1:
                assert not img.brokers[p.leader].fenced, (p, img.brokers[p.leader])
            old = self.epochs.get(p.partition, (-1, -1))
            assert p.leader_epoch >= old[0] and p.partition_epoch >= old[1]
            self.epochs[p.partition] = (p.leader_epoch, p.partition_epoch)


class NoElrLeadershipMachine(LeadershipMachine):
    ELR = False


TestLeadership = LeadershipMachine.TestCase
TestLeadership.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestLeadershipWithoutElr = NoElrLeadershipMachine.TestCase
TestLeadershipWithoutElr.settings = settings(max_examples=40, stateful_step_count=40,
                                             deadline=None)


@settings(max_examples=200, deadline=None)
@given(racks=st.lists(st.sampled_from([None, "a", "b", "c"]), min_size=1, max_size=8),
       partitions=st.integers(1, 30), rf=st.integers(1, 4), start=st.integers(0, 10))
def test_placement_properties(racks: list[str | None], partitions: int, rf: int,
                              start: int) -> None:
    """Every partition gets rf distinct usable brokers on as many racks as it can, and
    leadership (first replicas) is spread evenly over the brokers."""
    c = Cluster()
    ids = list(range(1, len(racks) + 1))
    c.up(*ids, rack={b: r for b, r in zip(ids, racks, strict=True) if r is not None})
    if rf > len(ids):
        with pytest.raises(KafkaError):
            rc.place_replicas(c.image, ids, partitions, rf, start)
        return
    placed = rc.place_replicas(c.image, ids, partitions, rf, start)
    rack_of = {b: racks[b - 1] for b in ids}
    n_racks = len(set(racks))
    for reps in placed:
        assert len(reps) == rf == len(set(reps)) and set(reps) <= set(ids)
        assert len({rack_of[b] for b in reps}) == min(rf, n_racks)
    firsts = [reps[0] for reps in placed]
    counts = [firsts.count(b) for b in ids]
    assert max(counts) - min(counts) <= 1


def test_a_stalled_controller_does_not_fence() -> None:
    c = Cluster(session_timeout_ms=1000)
    c.up(1)
    c.cc.forgive_stall(5000)
    assert c.cc.fence_stale(c.image, 4000) is None
    assert c.cc.fence_stale(c.image, 7000) is not None


def test_reassignment_keeps_the_isr_order_and_bumps_the_epoch_when_replicas_leave() -> None:
    """As Kafka 4.3.1 (compat_tests cluster_reassign_partitions): [1, 2] -> [3, 1] ends with
    ISR [1, 3] (the ISR's order), leader 1 at leader epoch 1; [2, 3] -> [3, 2] only reorders
    (leader epoch 0)."""
    c = Cluster()
    c.up(1, 2, 3)
    c.topic("t", 2, 2, assignments={0: [1, 2], 1: [2, 3]})
    t = c.image.topics["t"]
    c.commit([rc.reassign(c.image, t, t.partitions[0], [3, 1]),
              rc.reassign(c.image, t, t.partitions[1], [3, 2])])
    t = c.image.topics["t"]
    p, q = t.partitions[0], t.partitions[1]
    assert (q.replicas, q.isr, q.leader, q.leader_epoch) == ((3, 2), (2, 3), 2, 0)
    c.commit([rc.alter_partition(c.image, t, p, 1, p.leader_epoch, p.partition_epoch,
                                 [rc.IsrMember(1), rc.IsrMember(2), rc.IsrMember(3)], 0)])
    t = c.image.topics["t"]
    assert rc.complete_reassignment(c.image, t, t.partitions[0]) is None  # done already
    p = c.image.topics["t"].partitions[0]
    assert (p.replicas, p.isr, p.leader, p.leader_epoch) == ((3, 1), (1, 3), 1, 1)
