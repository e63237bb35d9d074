"""A quorum of three voters as real processes: leader election over the wire (Vote with
pre-vote, BeginQuorumEpoch), Fetch replication and the high watermark, DescribeQuorum with
every voter and observer, controller writes committed before they are answered, NOT_CONTROLLER
from the others, a new leader after kill -9 of the active controller keeping every
acknowledged topic, and FetchSnapshot for a voter that fell behind the leader's log start."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from kafkawire.tools.cluster import ClusterError, LocalCluster
from kafkawire.tools.testing import describe_quorum_leader
from kraft.raft import messages as m
from protocol._generated.create_topics_request import CreateTopicsRequest
from protocol._generated.metadata_request import MetadataRequest
from protocol.errors import ErrorCode
from tests.test_quorum_cluster import describe_quorum, metadata_brokers, request, wait_for

SESSION_MS = 4000


def create_topic(bootstrap: str, name: str, partitions: int = 1, rf: int = 1) -> int:
    req = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=rf, assignments=[],
        configs=[])], timeout_ms=30_000, validate_only=False)
    resp = request(bootstrap, req, 5)
    return int(resp.topics[0].error_code)


def topics(bootstrap: str) -> set[str]:
    req = MetadataRequest(allow_auto_topic_creation=False)
    req.topics = None  # all topics
    md = request(bootstrap, req, 12)
    return {t.name for t in md.topics if t.error_code == 0}


def leader_broker(c: LocalCluster) -> str:
    return c.node(c.quorum_leader()).address


@pytest.fixture(scope="module")
def combined(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path_factory.mktemp("combined")) as c:
        # three combined voters and a broker-only node
        c.up(4, voters=3, defaults=False, timeout_s=180, overrides={
            "broker.session.timeout.ms": str(SESSION_MS),
            # a snapshot every few records and a log cleaned behind two of them: a voter
            # down for a while must catch up by FetchSnapshot
            "metadata.log.max.record.bytes.between.snapshots": "2000",
            "metadata.max.retention.bytes": "1",
            "internal.metadata.log.segment.bytes": "4096"})
        yield c


def test_three_voters_elect_one_leader_and_replicate(combined: LocalCluster) -> None:
    leader = combined.quorum_leader()
    ctrl = f"127.0.0.1:{combined.controller_ports[leader]}"
    part = wait_for(lambda: (p := describe_quorum(ctrl)) and len(p.observers) == 1 and all(
        v.log_end_offset == p.high_watermark for v in p.current_voters) and p,
        what="every voter caught up, the broker observing")
    assert part.leader_id == leader and part.error_code == 0
    assert sorted(v.replica_id for v in part.current_voters) == [1, 2, 3]
    assert [o.replica_id for o in part.observers] == [4]
    # every voter reports the same leader and epoch
    views = {describe_quorum_leader("127.0.0.1", p) for p in combined.controller_ports.values()}
    assert views == {(leader, part.leader_epoch)}
    for b in combined.broker_ids:
        addr = combined.node(b).address
        wait_for(lambda a=addr: metadata_brokers(a) == {1, 2, 3, 4}, what=f"brokers via {addr}")


def test_writes_only_on_the_active_controller(combined: LocalCluster) -> None:
    leader = combined.quorum_leader()
    assert create_topic(combined.node(leader).address, "on-leader", 3) == ErrorCode.NONE
    # answered once committed: every node's image gets it
    for b in combined.broker_ids:
        addr = combined.node(b).address
        wait_for(lambda a=addr: "on-leader" in topics(a), what=f"topic via {addr}")
    other = next(i for i in combined.controller_ids if i != leader)
    # a non-active controller refuses writes on its controller listener ...
    code = create_topic(f"127.0.0.1:{combined.controller_ports[other]}", "on-follower")
    assert code == ErrorCode.NOT_CONTROLLER
    assert "on-follower" not in topics(combined.node(leader).address)
    # ... while its broker side forwards a client's write to the active controller (Envelope,
    # as a Kafka 4 combined node does)
    code = create_topic(combined.node(other).address, "via-follower")
    assert code == ErrorCode.NONE
    assert "via-follower" in topics(combined.node(leader).address)


def test_kill_the_active_controller_a_new_one_keeps_every_topic(
        combined: LocalCluster) -> None:
    made: list[str] = []
    for round_ in range(2):
        old = combined.quorum_leader()
        _l, old_epoch = describe_quorum_leader("127.0.0.1", combined.controller_ports[old])
        for i in range(3):
            name = f"kill-{round_}-{i}"
            assert create_topic(combined.node(old).address, name) == ErrorCode.NONE
            made.append(name)
        combined.kill(old)
        survivors = [i for i in combined.controller_ids if i != old]

        def new_leader(ids: list[int] = survivors, epoch: int = old_epoch) -> Any:
            for i in ids:
                leader, e = describe_quorum_leader("127.0.0.1", combined.controller_ports[i])
                if leader in ids and e > epoch:
                    return leader
            return None

        leader = wait_for(new_leader, timeout_s=60, what="a new leader among the survivors")
        addr = combined.node(leader).address
        wait_for(lambda a=addr: set(made) <= topics(a), what="every acknowledged topic")
        combined.start_node(old, timeout_s=120)
    for b in combined.broker_ids:
        addr = combined.node(b).address
        wait_for(lambda a=addr: set(made) <= topics(a), what=f"every topic via {addr}")


def test_lagging_voter_catches_up_by_fetch_snapshot(combined: LocalCluster) -> None:
    leader = combined.quorum_leader()
    lagging = next(i for i in combined.controller_ids if i != leader)
    combined.kill(lagging)
    names = [f"while-down-{i}" for i in range(30)]
    for name in names:
        code = create_topic(leader_broker(combined), name)
        assert code in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS), code
    log = combined.log_path(lagging)
    before = log.read_text().count("installed metadata snapshot")
    combined.start_node(lagging, timeout_s=120)
    address = combined.node(lagging).address
    wait_for(lambda: set(names) <= topics(address), what="the restarted voter's topics")
    assert log.read_text().count("installed metadata snapshot") > before, \
        combined.log_tail(lagging, 40)


def test_bad_raft_requests_get_kafka_errors_and_change_nothing(
        combined: LocalCluster) -> None:
    leader = combined.quorum_leader()
    addr = f"127.0.0.1:{combined.controller_ports[leader]}"
    _l, epoch = describe_quorum_leader("127.0.0.1", combined.controller_ports[leader])
    cid = combined.cluster_id
    # another cluster's vote, a candidate outside the static voter set, a stale candidate
    other = request(addr, m.vote_request("AAAAAAAAAAAAAAAAAAAAAA", leader, 2, epoch + 5, 99,
                                         10_000, False), 2)
    assert other.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID
    stranger = request(addr, m.vote_request(cid, leader, 99, epoch + 5, 99, 10_000, False), 2)
    assert stranger.topics[0].partitions[0].error_code == ErrorCode.INCONSISTENT_VOTER_SET
    peer = next(i for i in combined.controller_ids if i != leader)
    assert epoch >= 2  # the kills above made new epochs
    stale = request(addr, m.vote_request(cid, leader, peer, epoch - 1, 0, 0, False), 2)
    part = stale.topics[0].partitions[0]
    assert part.error_code == ErrorCode.FENCED_LEADER_EPOCH and not part.vote_granted
    # a Fetch with an old epoch, and one of another cluster
    fenced = request(addr, m.fetch_request(cid, peer, epoch - 1, 0, 0, 0, 0, 1024), 17)
    assert fenced.responses[0].partitions[0].error_code == ErrorCode.FENCED_LEADER_EPOCH
    foreign = request(addr, m.fetch_request("AAAAAAAAAAAAAAAAAAAAAA", peer, epoch, 0, 0, 0, 0,
                                            1024), 17)
    assert foreign.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID
    # the quorum kept its leader and epoch
    assert describe_quorum_leader("127.0.0.1", combined.controller_ports[leader]) == (
        leader, epoch)


def test_voter_with_a_wiped_disk_is_reformatted_and_catches_up(
        combined: LocalCluster) -> None:
    """A follower's disk is lost (kill -9, directory removed): it refuses to start until
    formatted again with the cluster id (as Kafka), then rejoins with the same id and gets
    the whole metadata back from the leader (a snapshot when the log was cleaned)."""
    leader = combined.quorum_leader()
    assert create_topic(combined.node(leader).address, "before-wipe") == ErrorCode.NONE
    victim = next(i for i in combined.controller_ids if i != leader)
    combined.kill(victim)
    shutil.rmtree(combined.data_dir(victim))
    with pytest.raises(ClusterError, match="meta.properties"):
        combined.start_node(victim, timeout_s=60)
    combined.format_node(victim)
    combined.start_node(victim, timeout_s=120)
    address = combined.node(victim).address
    wait_for(lambda: "before-wipe" in topics(address), what="the wiped voter's topics")
    ctrl = f"127.0.0.1:{combined.controller_ports[combined.quorum_leader()]}"
    wait_for(lambda: (p := describe_quorum(ctrl)).error_code == 0 and all(
        v.log_end_offset >= p.high_watermark for v in p.current_voters),
        what="every voter caught up")
