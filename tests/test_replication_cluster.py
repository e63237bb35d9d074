"""ISR replication across real broker processes: one combined controller node (0) and three
broker-only nodes (1-3) on loopback, driven by stock clients (confluent-kafka / librdkafka,
kafka-python, Kafka's kafka-topics). Partitions live on nodes 1-3 (manual assignment), which
are the ones killed, so the single controller stays up.

- RF=3: the followers' segment files become byte-identical to the leader's (batches appended
  verbatim with the leader's offsets and epochs), and the ISR and leader show in Metadata and
  in ``kafka-topics --describe``.
- kill -9 of the partition leader, a bounded number of times (``make failover`` runs 100+),
  under an idempotent acks=all producer with ``min.insync.replicas=2``: 0 acknowledged records
  lost, 0 duplicates, order kept (bench/failover.py is the checker).
- With one broker left, acks=all gets NOT_ENOUGH_REPLICAS; nothing acknowledged is lost when
  the others come back.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench import failover
from tests.replication_cluster import ReplicationCluster, replication_cluster

pytestmark = pytest.mark.slow

KILLS = 5


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ReplicationCluster]:
    with replication_cluster(brokers=3, base_dir=tmp_path) as c:  # /metrics on every node
        yield c


def new_topic(c: ReplicationCluster, min_isr: int = 2) -> str:
    name = f"rep-{uuid.uuid4().hex[:8]}"
    failover.create_topic(c.admin_bootstrap, name, c.broker_ids, min_isr=min_isr)
    return name


def segment_bytes(c: ReplicationCluster, node: int, topic: str) -> bytes:
    d = c.data_dir(node) / f"{topic}-0"
    return b"".join(p.read_bytes() for p in sorted(d.glob("*.log")))


def test_followers_hold_the_leaders_bytes_and_the_isr_is_shown(cluster: ReplicationCluster) -> None:
    from confluent_kafka import Producer

    topic = new_topic(cluster)
    leader, replicas, isr = failover.partition_state(cluster.bootstrap, topic) or (-1, [], [])
    assert sorted(replicas) == cluster.broker_ids and sorted(isr) == cluster.broker_ids
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                  "enable.idempotence": True, "linger.ms": 5})
    acked: list[int] = []
    for i in range(2000):
        p.produce(topic, value=b"v%d" % i, partition=0,
                  on_delivery=lambda err, m: acked.append(m.offset()) if err is None else None)
        if i % 100 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    assert len(acked) == 2000
    # acks=all answered: every replica has the records; the segments converge byte for byte
    want = segment_bytes(cluster, leader, topic)
    assert want
    failover.wait_until(
        lambda: all(segment_bytes(cluster, n, topic) == want for n in cluster.broker_ids),
        60, "the followers' segments to equal the leader's")
    # the followers fetch through KIP-227 sessions on the leader (privileged: one per fetcher)
    failover.wait_until(lambda: fetch_sessions(cluster, leader) >= 2, 60,
                        "the followers' fetch sessions on the leader")


def fetch_sessions(c: ReplicationCluster, node: int) -> float:
    import urllib.request

    n = c.cluster.node(node)
    url = f"http://{n.host}:{n.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    name = "kafka_server_fetchsessioncache_numincrementalfetchsessions "
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name))


def test_kafka_topics_describe_shows_leader_replicas_isr(cluster: ReplicationCluster) -> None:
    from tests.javatools import JavaTools, require_line

    require_line("4.x")
    topic = new_topic(cluster)
    out = JavaTools("4.x").run("topics", "--bootstrap-server", cluster.bootstrap,
                               "--describe", "--topic", topic).output
    ids = ",".join(str(b) for b in cluster.broker_ids)
    assert "ReplicationFactor: 3" in out, out
    assert f"Replicas: {ids}" in out and f"Isr: {ids}" in out, out


def test_leader_kill_loses_nothing_acknowledged(cluster: ReplicationCluster) -> None:
    topic = new_topic(cluster)
    figures = failover.run(cluster, topic, kills=KILLS, interval_s=2.0, rate=300)
    print(figures.markdown())
    assert figures.kills == KILLS
    assert figures.acked > 0
    assert figures.lost == [] and figures.duplicates == []
    assert figures.reordered == 0 and figures.wrong_offset == 0


def test_controlled_shutdown_of_the_leader_loses_nothing(cluster: ReplicationCluster) -> None:
    topic = new_topic(cluster)
    figures = failover.run(cluster, topic, kills=2, interval_s=2.0, rate=300, clean=True)
    print(figures.markdown())
    assert figures.kills == 2 and figures.acked > 0 and figures.ok, figures


def test_one_broker_left_answers_not_enough_replicas(cluster: ReplicationCluster) -> None:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError, NotEnoughReplicasError

    topic = new_topic(cluster)
    boot = cluster.bootstrap

    def producer() -> KafkaProducer:
        return KafkaProducer(bootstrap_servers=boot, acks="all", retries=0,
                             request_timeout_ms=20000, max_block_ms=30000)

    prod = producer()
    before = [prod.send(topic, b"before-%d" % i, partition=0).get(30).offset for i in range(20)]
    prod.close()
    leader = (failover.partition_state(boot, topic) or (-1, [], []))[0]
    others = [b for b in cluster.broker_ids if b != leader]
    for b in others:
        cluster.kill(b)
    failover.wait_until(lambda: (s := failover.partition_state(boot, topic)) is not None
                        and s[2] == [leader], 60, "the ISR to shrink to the leader")
    prod = producer()
    seen: list[str] = []
    for _ in range(10):  # other errors (a stale connection, a timeout) are tried again
        try:
            prod.send(topic, b"refused", partition=0).get(30)
            seen.append("acknowledged")
            break
        except NotEnoughReplicasError:
            seen.append("NOT_ENOUGH_REPLICAS")
            break
        except KafkaError as e:
            seen.append(type(e).__name__)
            time.sleep(1)
    prod.close()
    assert seen[-1] == "NOT_ENOUGH_REPLICAS", seen
    for b in others:
        cluster.start(b)
    failover.wait_until(lambda: (s := failover.partition_state(boot, topic)) is not None
                        and len(s[2]) == 3, 120, "all replicas back in the ISR")
    prod = producer()
    after = prod.send(topic, b"after", partition=0).get(60).offset
    prod.close()
    log = read_values(boot, topic)
    assert [o for o, _v in log[:20]] == before
    assert log[-1] == (after, b"after")
    assert b"refused" not in [v for _o, v in log]


def read_values(boot: str, topic: str) -> list[tuple[int, bytes]]:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    c = Consumer({"bootstrap.servers": boot, "group.id": "rep-check", "enable.auto.commit": False})
    try:
        for attempt in range(20):  # a leader that just moved: the client's metadata catches up
            try:
                _low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
                break
            except KafkaException:
                if attempt == 19:
                    raise
                time.sleep(0.5)
        c.assign([TopicPartition(topic, 0, 0)])
        out: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 60
        while (not out or out[-1][0] < high - 1) and time.monotonic() < deadline:
            for m in c.consume(500, timeout=1.0):
                if m.error() is None:
                    out.append((m.offset(), m.value()))
        return out
    finally:
        c.close()


def test_the_checker_finds_loss_duplicates_and_reordering() -> None:
    class Prod:
        sent_at = [0.0] * 5
        acked = {0: 0, 1: 1, 2: 2, 3: 3}
        failed = {4: "_MSG_TIMED_OUT"}

    f = failover.Figures()
    failover.check(Prod(), [(0, 0), (1, 1), (2, 2), (3, 3)], f)  # type: ignore[arg-type]
    assert f.ok and f.failed == 1
    f = failover.Figures()
    failover.check(Prod(), [(0, 0), (1, 2), (2, 1), (3, 2)], f)  # type: ignore[arg-type]
    assert f.lost == [3] and f.duplicates == [2] and f.reordered == 2 and not f.ok
    # a report without an offset (librdkafka's implicit acknowledgement) is only looked for;
    # a report with another offset than the log's is counted
    Prod.acked = {0: 0, 1: None, 2: 5, 3: 3}  # type: ignore[dict-item]
    f = failover.Figures()
    failover.check(Prod(), [(0, 0), (1, 1), (2, 2), (3, 3)], f)  # type: ignore[arg-type]
    assert f.no_offset == 1 and f.wrong_offset == 1 and not f.ok


def test_a_stalled_follower_leaves_the_isr_and_rejoins(tmp_path: Path) -> None:
    """SIGSTOP of a follower (its fetches and heartbeats stop; the session timeout is longer
    than ``replica.lag.time.max.ms`` here, so the leader's AlterPartition removes it, not the
    controller's fencing): acks=all with min.insync.replicas=2 continues with two replicas, and
    after SIGCONT the follower catches up and the leader adds it back."""

    from kafka import KafkaProducer

    overrides = {"broker.session.timeout.ms": "60000", "replica.lag.time.max.ms": "3000"}
    with replication_cluster(brokers=3, base_dir=tmp_path, overrides=overrides) as c:
        topic = new_topic(c)
        boot = c.bootstrap
        leader = (failover.partition_state(boot, topic) or (-1, [], []))[0]
        stalled = next(b for b in c.broker_ids if b != leader)
        prod = KafkaProducer(bootstrap_servers=boot, acks="all", retries=5,
                             request_timeout_ms=30000)
        prod.send(topic, b"first", partition=0).get(30)
        c.cluster.pause(stalled)
        try:
            failover.wait_until(lambda: (s := failover.partition_state(boot, topic)) is not None
                                and stalled not in s[2], 60, f"{stalled} to leave the ISR")
            offsets = [prod.send(topic, b"during-%d" % i, partition=0).get(30).offset
                       for i in range(50)]
            assert offsets == list(range(offsets[0], offsets[0] + 50))
        finally:
            c.cluster.resume(stalled)
        failover.wait_until(lambda: (s := failover.partition_state(boot, topic)) is not None
                            and stalled in s[2], 60, f"{stalled} to rejoin the ISR")
        prod.close()
        # the returning follower holds the same bytes as the leader
        want = segment_bytes(c, leader, topic)
        failover.wait_until(lambda: segment_bytes(c, stalled, topic) == want, 60,
                            "the returning follower's segments to equal the leader's")


def test_group_offsets_survive_the_coordinator_leader_kill(tmp_path: Path) -> None:
    """``__consumer_offsets`` with replication factor 3 (the default where 3 brokers live,
    ``offsets.topic.replication.factor`` unset): the group coordinator moves with the
    leadership of the group's partition, and committed offsets are there after a kill -9."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    from kafkawire.coordinator_runtime import partition_for

    offsets_topic = "__consumer_offsets"
    overrides = {"offsets.topic.num.partitions": "4"}
    with replication_cluster(brokers=3, base_dir=tmp_path, overrides=overrides) as c:
        topic = new_topic(c)
        admin = AdminClient({"bootstrap.servers": c.admin_bootstrap})

        def offsets_leaders() -> dict[int, int]:
            md = admin.list_topics(offsets_topic, timeout=10).topics.get(offsets_topic)
            if md is None or md.error is not None:
                return {}
            return {p: pm.leader for p, pm in md.partitions.items()}

        def commit(offset: int, group: str, bootstrap: str = c.bootstrap) -> bool:
            cons = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                             "enable.auto.commit": False})
            try:
                cons.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
                return True
            finally:
                cons.close()

        # the offsets topic is created by the controller node when a coordinator is asked
        # there (broker-only nodes do not forward CreateTopics yet)
        failover.wait_until(lambda: _try(lambda: commit(0, "warm-up", c.admin_bootstrap))
                            and len(offsets_leaders()) == 4, 120, "the offsets topic")
        md = admin.list_topics(offsets_topic, timeout=10).topics[offsets_topic]
        assert {len(pm.replicas) for pm in md.partitions.values()} == {3}
        leaders = offsets_leaders()
        group = next(g for g in (f"g-{i}" for i in range(1000))
                     if leaders[partition_for(g, 4)] in c.broker_ids)
        leader = leaders[partition_for(group, 4)]

        def committed() -> int:
            cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": group})
            try:
                return int(cons.committed([TopicPartition(topic, 0)], timeout=20)[0].offset)
            finally:
                cons.close()

        failover.wait_until(lambda: _try(lambda: commit(7, group)), 120, "a first offset commit")
        assert committed() == 7
        c.kill(leader)
        failover.wait_until(lambda: offsets_leaders().get(partition_for(group, 4))
                            not in (leader, -1, None), 60, "a new coordinator")
        failover.wait_until(lambda: _try(lambda: committed() == 7), 120,
                            "the committed offset from the new coordinator")
        assert commit(9, group) and committed() == 9


def ask_coordinator(bootstrap: str, key: str, key_type: int) -> bool:
    """FindCoordinator sent to one node (which creates the internal topic if missing)."""
    from protocol._generated.find_coordinator_request import FindCoordinatorRequest
    from tests.conftest import RawClient

    raw = RawClient(bootstrap)
    try:
        resp = raw.request(FindCoordinatorRequest(key=key, key_type=key_type), 3)
        return bool(resp.error_code == 0)
    finally:
        raw.close()


def _try(fn: object) -> bool:
    try:
        return bool(fn())  # type: ignore[operator]
    except Exception:
        return False


def test_consumer_fetches_from_a_follower_in_its_rack(tmp_path: Path) -> None:
    """KIP-392: with RackAwareReplicaSelector the leader sends a consumer with ``client.rack``
    to the in-sync follower of that rack (librdkafka's statistics name the broker it fetches
    from), and the records read there are the leader's."""
    import json

    from confluent_kafka import Consumer, Producer, TopicPartition

    racks = {n: {"broker.rack": f"rack-{n}"} for n in range(1, 5)}
    overrides = {"replica.selector.class":
                 "org.apache.kafka.common.replica.RackAwareReplicaSelector"}
    with replication_cluster(brokers=3, base_dir=tmp_path, overrides=overrides,
                             node_overrides=racks) as c:
        topic = new_topic(c)
        leader = (failover.partition_state(c.bootstrap, topic) or (-1, [], []))[0]
        follower = next(b for b in c.broker_ids if b != leader)
        p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all"})
        for i in range(100):
            p.produce(topic, b"r%d" % i, partition=0)
        assert p.flush(30) == 0
        fetched_from: list[int] = []

        def stats(raw: str) -> None:
            part = json.loads(raw).get("topics", {}).get(topic, {}).get("partitions", {}).get("0")
            if part is not None:
                fetched_from.append(int(part.get("broker", -1)))

        cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "kip392",
                         "client.rack": f"rack-{follower}", "enable.auto.commit": False,
                         "statistics.interval.ms": 200, "stats_cb": stats})
        try:
            cons.assign([TopicPartition(topic, 0, 0)])
            values: list[bytes] = []
            deadline = time.monotonic() + 60
            while (len(values) < 100 or follower not in fetched_from) \
                    and time.monotonic() < deadline:
                values += [m.value() for m in cons.consume(100, timeout=0.5) if m.error() is None]
        finally:
            cons.close()
        assert values[:100] == [b"r%d" % i for i in range(100)]
        assert follower in fetched_from, fetched_from[-10:]


def test_transactions_with_the_coordinator_on_another_broker(tmp_path: Path) -> None:
    """A transactional librdkafka producer whose transaction coordinator is on another broker
    than the partition leader: the leader verifies the partition with the coordinator
    (AddPartitionsToTxn v4+, KIP-890) and the coordinator writes the markers there
    (WriteTxnMarkers). read_committed sees the committed transactions only, in order."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    from kafkawire.coordinator_runtime import partition_for

    txn_topic = "__transaction_state"
    overrides = {"transaction.state.log.replication.factor": "3",
                 "transaction.state.log.num.partitions": "4",
                 "transaction.state.log.min.isr": "2"}
    with replication_cluster(brokers=3, base_dir=tmp_path, overrides=overrides) as c:
        topic = new_topic(c)
        leader = (failover.partition_state(c.bootstrap, topic) or (-1, [], []))[0]

        def txn_producer(tid: str, bootstrap: str) -> Producer:
            p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
            p.init_transactions(60)
            return p

        # the transaction state topic is created by the controller node when asked there
        # (broker-only nodes do not forward CreateTopics yet)
        failover.wait_until(lambda: ask_coordinator(c.admin_bootstrap, "warm-up", 1)
                            and failover.partition_state(c.bootstrap, txn_topic, 3) is not None,
                            120, "the transaction state topic")
        state = {p: failover.partition_state(c.bootstrap, txn_topic, p) for p in range(4)}
        tid = next(t for t in (f"tx-{i}" for i in range(1000))
                   if (s := state[partition_for(t, 4)]) is not None and s[0] != leader)
        p = txn_producer(tid, c.bootstrap)
        for round_ in range(6):
            p.begin_transaction()
            for i in range(10):
                p.produce(topic, b"%d-%d" % (round_, i), partition=0)
            if round_ % 2 == 0:
                p.commit_transaction(60)
            else:
                p.abort_transaction(60)
        cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "txn-check",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "enable.partition.eof": True})
        try:
            cons.assign([TopicPartition(topic, 0, 0)])
            values: list[bytes] = []
            deadline = time.monotonic() + 60
            while len(values) < 30 and time.monotonic() < deadline:
                values += [m.value() for m in cons.consume(100, timeout=0.5)
                           if m.error() is None]
        finally:
            cons.close()
        assert values == [b"%d-%d" % (r, i) for r in (0, 2, 4) for i in range(10)]


def test_transactions_through_leader_kills(tmp_path: Path) -> None:
    """A transactional librdkafka producer commits batches of 20 records while the partition
    leader is killed twice (``__transaction_state`` replicated too): at read_committed every
    committed record is there once, in order, and nothing from an aborted transaction shows.
    A commit whose outcome the client could not learn may or may not be there, never twice."""
    import threading

    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    overrides = {"transaction.state.log.replication.factor": "3",
                 "transaction.state.log.num.partitions": "2",
                 "transaction.state.log.min.isr": "2"}
    with replication_cluster(brokers=3, base_dir=tmp_path, overrides=overrides) as c:
        topic = new_topic(c)
        failover.wait_until(lambda: ask_coordinator(c.admin_bootstrap, "warm-up", 1)
                            and failover.partition_state(c.bootstrap, "__transaction_state", 1)
                            is not None, 120, "the transaction state topic")
        committed: list[int] = []
        aborted: list[int] = []
        unknown: list[int] = []
        stop = threading.Event()

        def new_producer() -> Producer:
            p = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": "kill-txn",
                          "transaction.timeout.ms": 60000})
            p.init_transactions(120)
            return p

        def run() -> None:
            p = new_producer()
            seq = 0
            while not stop.is_set():
                values = list(range(seq, seq + 20))
                seq += 20
                try:
                    p.begin_transaction()
                    for v in values:
                        p.produce(topic, b"%d" % v, partition=0)
                    p.commit_transaction(120)
                    committed.extend(values)
                except KafkaException as e:
                    err = e.args[0]
                    if err.txn_requires_abort():
                        try:
                            p.abort_transaction(120)
                            aborted.extend(values)
                            continue
                        except KafkaException:
                            pass
                    unknown.extend(values)
                    p = new_producer()  # fences the old one; its transaction is aborted
            p.flush(30)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        for _ in range(2):
            failover.wait_until(lambda: len(committed) >= 200, 120, "commits")
            leader = (failover.partition_state(c.bootstrap, topic) or (-1, [], []))[0]
            before = len(committed)
            c.kill(leader)
            failover.wait_until(lambda n=before: len(committed) > n + 100, 180,
                                "commits after the kill")
            c.start(leader)
            failover.wait_until(lambda: (s := failover.partition_state(c.bootstrap, topic))
                                is not None and len(s[2]) == 3, 120, "the ISR back to 3")
        stop.set()
        t.join(180)
        cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "txn-kill-check",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
        try:
            cons.assign([TopicPartition(topic, 0, 0)])
            seen: list[int] = []
            deadline = time.monotonic() + 60
            while len(seen) < len(committed) and time.monotonic() < deadline:
                seen += [int(m.value()) for m in cons.consume(500, timeout=0.5)
                         if m.error() is None]
            seen += [int(m.value()) for m in cons.consume(500, timeout=2.0) if m.error() is None]
        finally:
            cons.close()
        assert len(seen) == len(set(seen)), "duplicates at read_committed"
        assert seen == sorted(seen), "reordered"
        assert set(committed) <= set(seen), sorted(set(committed) - set(seen))[:20]
        assert not set(aborted) & set(seen), "aborted records visible at read_committed"
        assert set(seen) <= set(committed) | set(unknown)


def test_reassignment_moves_a_replica_to_another_broker(cluster: ReplicationCluster) -> None:
    """AlterPartitionReassignments (sent to the controller node) moves a replica: the new one
    fetches the whole log, joins the ISR, the old one leaves and deletes its log; the records
    are all there, read from the new replica set."""
    from confluent_kafka import Producer

    from protocol._generated.alter_partition_reassignments_request import (
        AlterPartitionReassignmentsRequest as APR,
    )
    from protocol._generated.list_partition_reassignments_request import (
        ListPartitionReassignmentsRequest as LPR,
    )
    from tests.conftest import RawClient

    a, b, new = cluster.broker_ids
    topic = f"move-{uuid.uuid4().hex[:8]}"
    failover.create_topic(cluster.admin_bootstrap, topic, [a, b], min_isr=1)
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(500):
        p.produce(topic, b"m%d" % i, partition=0)
    assert p.flush(60) == 0
    raw = RawClient(cluster.admin_bootstrap)
    try:
        r = raw.request(APR(timeout_ms=30000, topics=[APR.ReassignableTopic(
            name=topic, partitions=[APR.ReassignablePartition(partition_index=0,
                                                              replicas=[b, new])])]), 0)
        assert [x.error_code for x in r.responses[0].partitions] == [0]
        failover.wait_until(lambda: (s := failover.partition_state(cluster.bootstrap, topic))
                            is not None and s[1] == [b, new] and sorted(s[2]) == sorted([b, new]),
                            120, "the replicas to become [b, new] in sync")
        lr = raw.request(LPR(timeout_ms=10000, topics=None), 0)
        assert lr.topics == []  # completed: nothing in progress
    finally:
        raw.close()
    failover.wait_until(lambda: not (cluster.data_dir(a) / f"{topic}-0").exists(), 60,
                        "the removed replica's log to be deleted")
    want = segment_bytes(cluster, b, topic)
    failover.wait_until(lambda: segment_bytes(cluster, new, topic) == want, 60,
                        "the new replica to hold the same bytes")
    values = [v for _o, v in read_values(cluster.bootstrap, topic)]
    assert values == [b"m%d" % i for i in range(500)]


def test_kafka_reassign_partitions_moves_a_replica(cluster: ReplicationCluster,
                                                   tmp_path: Path) -> None:
    """Kafka 4.3.1's kafka-reassign-partitions --execute then --verify against the cluster."""
    import json

    from tests.javatools import JavaTools, require_line

    require_line("4.x")
    a, b, new = cluster.broker_ids
    topic = f"jmove-{uuid.uuid4().hex[:8]}"
    failover.create_topic(cluster.admin_bootstrap, topic, [a, b], min_isr=1)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [b, new]}]}))
    tools = JavaTools("4.x")
    bs = ["--bootstrap-server", cluster.admin_bootstrap]
    out = tools.run("reassign-partitions", *bs, "--execute", "--reassignment-json-file",
                    str(plan)).output
    assert "Successfully started partition reassignment" in out, out
    failover.wait_until(lambda: "is completed" in tools.run(
        "reassign-partitions", *bs, "--verify", "--reassignment-json-file", str(plan),
        check=False).output, 180, "kafka-reassign-partitions --verify to report completion")
    state = failover.partition_state(cluster.bootstrap, topic)
    assert state is not None and state[1] == [b, new]


def test_kafka_leader_election_gives_leadership_back(cluster: ReplicationCluster) -> None:
    """After a failover, Kafka 4.3.1's kafka-leader-election --election-type preferred moves
    leadership back to the first replica once it is in the ISR again."""
    from tests.javatools import JavaTools, require_line

    require_line("4.x")
    topic = new_topic(cluster)
    boot = cluster.bootstrap
    preferred = (failover.partition_state(boot, topic) or (-1, [], []))[1][0]
    cluster.kill(preferred)
    failover.wait_until(lambda: (s := failover.partition_state(boot, topic)) is not None
                        and s[0] not in (preferred, -1), 60, "a new leader")
    cluster.start(preferred)
    failover.wait_until(lambda: (s := failover.partition_state(boot, topic)) is not None
                        and preferred in s[2], 120, "the preferred replica back in the ISR")
    out = JavaTools("4.x").run("leader-election", "--bootstrap-server", cluster.admin_bootstrap,
                               "--election-type", "preferred", "--topic", topic,
                               "--partition", "0").output
    assert "Successfully completed leader election (PREFERRED)" in out, out
    failover.wait_until(lambda: (s := failover.partition_state(boot, topic)) is not None
                        and s[0] == preferred, 60, "the preferred replica to lead again")


def registered_epochs(c: ReplicationCluster, node: int) -> list[int]:
    """The broker epochs ``node`` registered with, in order (its log says each one)."""
    import re

    text = c.cluster.log_path(node).read_text(errors="replace")
    return [int(m) for m in re.findall(rf"broker {node} registered with broker epoch (\d+)", text)]


def replica_fetch(address: str, topic: str, topic_id: uuid.UUID, replica: int,
                  broker_epoch: int, offset: int) -> int:
    """One Fetch v17 as follower ``replica`` (ReplicaState with ``broker_epoch``) at
    ``offset``; returns the partition's error code."""
    from protocol._generated.fetch_request import FetchRequest as F
    from tests.conftest import RawClient

    raw = RawClient(address, client_id=f"broker-{replica}-fetcher-0")
    try:
        req = F(replica_id=-1, replica_state=F.ReplicaState(replica_id=replica,
                                                            replica_epoch=broker_epoch),
                max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
                session_epoch=-1, rack_id="", forgotten_topics_data=[],
                topics=[F.FetchTopic(topic=topic, topic_id=topic_id, partitions=[
                    F.FetchPartition(partition=0, fetch_offset=offset, current_leader_epoch=-1,
                                     last_fetched_epoch=-1, log_start_offset=0,
                                     partition_max_bytes=1 << 20)])])
        return int(raw.request(req, 17).responses[0].partitions[0].error_code)
    finally:
        raw.close()


def test_a_fetch_from_a_previous_incarnation_does_not_rejoin_the_isr(tmp_path: Path) -> None:
    """KIP-903: a follower restarted (new broker epoch) and then stalled out of the ISR. A
    caught-up Fetch naming it with its PREVIOUS broker epoch (a request of the old incarnation)
    does not bring it back; the same Fetch with its current epoch does (the control)."""
    import base64

    from confluent_kafka import Producer, TopicCollection
    from confluent_kafka.admin import AdminClient

    overrides = {"broker.session.timeout.ms": "60000", "replica.lag.time.max.ms": "3000"}
    with replication_cluster(brokers=3, base_dir=tmp_path, overrides=overrides) as c:
        node = c.broker_ids[-1]
        c.stop(node)
        c.start(node)
        c.wait_for_brokers()
        failover.wait_until(lambda: len(registered_epochs(c, node)) >= 2, 60,
                            f"broker {node} to register twice")
        old_epoch, epoch = registered_epochs(c, node)[-2:]
        assert old_epoch < epoch
        others = [b for b in c.broker_ids if b != node]
        topic = f"epoch-{uuid.uuid4().hex[:8]}"
        failover.create_topic(c.admin_bootstrap, topic, [*others, node], min_isr=1)
        boot = c.bootstrap
        leader = (failover.partition_state(boot, topic) or (-1, [], []))[0]
        assert leader != node
        admin = AdminClient({"bootstrap.servers": boot})
        md = admin.describe_topics(TopicCollection([topic]))[topic].result()
        topic_id = uuid.UUID(bytes=base64.urlsafe_b64decode(str(md.topic_id) + "=="))
        c.cluster.pause(node)
        try:
            failover.wait_until(lambda: (s := failover.partition_state(boot, topic)) is not None
                                and node not in s[2], 60, f"{node} to leave the ISR")
            p = Producer({"bootstrap.servers": boot, "acks": "all"})
            acked: list[int] = []
            for i in range(10):
                p.produce(topic, b"v%d" % i, partition=0, on_delivery=lambda e, m: acked.append(
                    m.offset()) if e is None else None)
            assert p.flush(30) == 0 and len(acked) == 10
            end = max(acked) + 1
            address = c.cluster.node(leader).address
            deadline = time.monotonic() + 8
            while time.monotonic() < deadline:  # the leader would act at once; give it time
                assert replica_fetch(address, topic, topic_id, node, old_epoch, end) == 0
                s = failover.partition_state(boot, topic)
                assert s is not None and node not in s[2], "a stale broker epoch joined the ISR"
                time.sleep(1)
            assert replica_fetch(address, topic, topic_id, node, epoch, end) == 0
            failover.wait_until(lambda: (s := failover.partition_state(boot, topic)) is not None
                                and node in s[2], 30, f"{node} to join with its current epoch")
        finally:
            c.cluster.resume(node)


def _fill(bootstrap: str, topic: str, mb: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20})
    chunk = b"x" * 10_000
    for i in range(mb * 100):
        p.produce(topic, chunk, key=b"%d" % i, partition=0)
        if i % 50 == 0:
            p.poll(0)
    assert p.flush(120) == 0


def _reassign(tools: Any, bs: list[str], plan: Path, *extra: str) -> str:
    out = str(tools.run("reassign-partitions", *bs, "--execute", "--reassignment-json-file",
                        str(plan), *extra).output)
    assert "Successfully started partition reassignment" in out, out
    return out


def _check_throttle_configs(tools: Any, bs: list[str], broker: int, topic: str, rate: int,
                            new: int) -> None:
    """kafka-configs shows the throttles as Kafka 4.3.1 shows them."""
    described = tools.run("configs", *bs, "--describe", "--entity-type", "brokers",
                          "--entity-name", str(broker)).output
    for key in ("leader", "follower"):
        line = (f"{key}.replication.throttled.rate={rate} sensitive=false "
                f"synonyms={{DYNAMIC_BROKER_CONFIG:{key}.replication.throttled.rate={rate}}}")
        assert line in described, described
    topic_cfg = tools.run("configs", *bs, "--describe", "--entity-type", "topics",
                          "--entity-name", topic).output
    assert "leader.replication.throttled.replicas=" in topic_cfg, topic_cfg
    assert (f"follower.replication.throttled.replicas=0:{new} sensitive=false synonyms="
            f"{{DYNAMIC_TOPIC_CONFIG:follower.replication.throttled.replicas=0:{new}}}"
            ) in topic_cfg, topic_cfg


def _check_throttles_removed(tools: Any, bs: list[str], broker: int, topic: str) -> None:
    described = tools.run("configs", *bs, "--describe", "--entity-type", "brokers",
                          "--entity-name", str(broker)).output
    assert "replication.throttled.rate" not in described, described
    topic_cfg = tools.run("configs", *bs, "--describe", "--entity-type", "topics",
                          "--entity-name", topic).output
    assert "throttled.replicas" not in topic_cfg, topic_cfg


def _timed_move(cluster: ReplicationCluster, tools: Any, plan_dir: Path, size_mb: int,
                rate: int | None) -> float:
    """Fill a topic on [a, b], move it to [b, new] with kafka-reassign-partitions (with
    ``--throttle rate`` if given) and return the seconds until the new replica is in sync;
    then ``--verify``."""
    import json

    a, b, new = cluster.broker_ids
    bs = ["--bootstrap-server", cluster.admin_bootstrap]
    topic = f"thr-{uuid.uuid4().hex[:8]}"
    failover.create_topic(cluster.admin_bootstrap, topic, [a, b], min_isr=1)
    _fill(cluster.bootstrap, topic, size_mb)
    plan = plan_dir / f"{topic}.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [b, new]}]}))
    start = time.monotonic()
    out = _reassign(tools, bs, plan, *(("--throttle", str(rate)) if rate else ()))
    if rate:
        assert f"The inter-broker throttle limit was set to {rate} B/s" in out, out
        _check_throttle_configs(tools, bs, a, topic, rate, new)
    failover.wait_until(lambda: (s := failover.partition_state(cluster.bootstrap, topic))
                        is not None and s[1] == [b, new] and sorted(s[2]) == sorted([b, new]),
                        300, "the reassignment to complete")
    took = time.monotonic() - start
    verify = tools.run("reassign-partitions", *bs, "--verify", "--reassignment-json-file",
                       str(plan)).output
    assert "is completed" in verify, verify
    if rate:
        assert f"Clearing topic-level throttles on topic {topic}" in verify, verify
        _check_throttles_removed(tools, bs, a, topic)
    return took


def test_kafka_reassign_partitions_with_a_throttle(cluster: ReplicationCluster,
                                                   tmp_path: Path) -> None:
    """Kafka 4.3.1's kafka-reassign-partitions --execute --throttle: the tool sets
    leader/follower.replication.throttled.rate on the brokers and the throttled-replicas
    topic configs (shown by kafka-configs as Kafka shows them); the new replica copies the
    log measurably slower than the same move without a throttle; --verify removes the
    throttle once the move is done (its broker-level part goes to each broker, which
    forwards it to the controller)."""
    from tests.javatools import JavaTools, require_line

    require_line("4.x")
    tools = JavaTools("4.x")
    rate, size_mb = 200_000, 6
    plain = _timed_move(cluster, tools, tmp_path, size_mb, None)
    throttled = _timed_move(cluster, tools, tmp_path, size_mb, rate)
    print(f"reassignment of {size_mb} MB: {plain:.1f} s plain, {throttled:.1f} s at "
          f"--throttle {rate}")
    # 6 MB at 200 kB/s, of which the 11 s window lets ~2.2 MB through at once: >= ~19 s
    assert throttled >= 12, (plain, throttled)
    assert throttled > plain + 5, (plain, throttled)


def test_markers_wait_for_the_prepare_record_to_commit(tmp_path: Path) -> None:
    """The transaction coordinator writes markers only once its PrepareCommit record is
    replicated (Kafka sends them from the acks=all append's callback). Found by 100 leader
    kills under bench/eos_failover.py: the COMMIT marker reached ``__consumer_offsets`` while
    the record was only on the coordinator's own log; the coordinator was killed, the new one
    (whose log never had the record) aborted the transaction on its other partition, and 500
    records were lost at read_committed while their input offsets were committed.

    ``__transaction_state`` has RF 2 here (leader L, follower F) and the data partition RF 1 on
    the third broker. With F stopped the record cannot commit: no marker may reach the data
    partition. Then L is killed and F resumed: F leads without the record; the client's
    retried EndTxn may commit the transaction there or its timeout abort it, but either way
    on every partition alike."""
    import threading

    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    from kafkawire.coordinator_runtime import partition_for

    txn_topic, parts = "__transaction_state", 4
    overrides = {"transaction.state.log.replication.factor": "2",
                 "transaction.state.log.num.partitions": str(parts),
                 "transaction.state.log.min.isr": "2",
                 "broker.session.timeout.ms": "15000", "replica.lag.time.max.ms": "30000"}
    with replication_cluster(brokers=3, base_dir=tmp_path, overrides=overrides) as c:
        def in_sync(p: int) -> bool:
            return len((failover.partition_state(c.bootstrap, txn_topic, p) or (-1, [], []))[2]) == 2

        failover.wait_until(lambda: ask_coordinator(c.admin_bootstrap, "warm-up", 1)
                            and all(_try(lambda p=p: in_sync(p)) for p in range(parts)),
                            120, "the transaction state topic with both replicas in sync")
        # a partition of it on two of the killable brokers (not the controller's node)
        state = {p: failover.partition_state(c.bootstrap, txn_topic, p) or (-1, [], [])
                 for p in range(parts)}
        txn_part = next(p for p in range(parts) if set(state[p][1]) <= set(c.broker_ids))
        tid = next(t for t in (f"tx-{i}" for i in range(1000))
                   if partition_for(t, parts) == txn_part)
        lead, replicas, _ = state[txn_part]
        follower = next(b for b in replicas if b != lead)
        other = next(b for b in c.broker_ids if b not in replicas)
        topic = f"txn-{uuid.uuid4().hex[:8]}"
        failover.create_topic(c.admin_bootstrap, topic, [other], min_isr=1)

        prod = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": tid,
                         "transaction.timeout.ms": 5000})
        prod.init_transactions(60)
        prod.begin_transaction()
        for i in range(10):
            prod.produce(topic, b"v%d" % i, partition=0)
        assert prod.flush(30) == 0
        cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "prepare-check",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
        cons.assign([TopicPartition(topic, 0, 0)])
        seen: list[bytes] = []
        c.cluster.pause(follower)
        outcome: list[object] = []
        committer = threading.Thread(
            target=lambda: outcome.append(_commit_outcome(prod, KafkaException)), daemon=True)
        try:
            committer.start()
            # the coordinator has the commit request (and its PrepareCommit) within this; with
            # the record uncommitted no marker may reach the data partition
            end = time.monotonic() + 3
            while time.monotonic() < end:
                seen += [m.value() for m in cons.consume(100, 0.5) if m.error() is None]
            assert seen == [], "a marker was written before the PrepareCommit record committed"
            assert committer.is_alive(), "EndTxn answered before its record committed"
            c.cluster.kill(lead)
        finally:
            c.cluster.resume(follower)
        # the follower leads the transaction state without the record; once the old leader
        # is back (min ISR 2), a new producer with the same id aborts the open transaction
        # and commits its own: read_committed returns only the new records
        failover.wait_until(lambda: _try(lambda: (failover.partition_state(
            c.bootstrap, txn_topic, txn_part) or (-1,))[0] == follower), 90, "the follower to lead")
        c.cluster.start_node(lead)
        failover.wait_until(lambda: _try(lambda: in_sync(txn_part)), 90,
                            "the old leader back in the ISR")
        committer.join(90)
        assert outcome, "the first commit_transaction did not return"
        prod2 = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": tid})
        prod2.init_transactions(90)
        prod2.begin_transaction()
        for i in range(10):
            prod2.produce(topic, b"w%d" % i, partition=0)
        prod2.commit_transaction(60)
        deadline = time.monotonic() + 60
        # librdkafka retries EndTxn with the new coordinator, which may still commit the
        # transaction (it is Ongoing there) or may have aborted it at its timeout: either
        # way, all or nothing of it on every partition
        first = [b"v%d" % i for i in range(10)] if outcome[0] == "committed" else []
        want = first + [b"w%d" % i for i in range(10)]
        while len(seen) < len(want) and time.monotonic() < deadline:
            seen += [m.value() for m in cons.consume(100, 0.5) if m.error() is None]
        seen += [m.value() for m in cons.consume(100, 1) if m.error() is None]
        cons.close()
        assert seen == want, outcome


def _commit_outcome(prod: Any, exc: type[Exception]) -> str:
    try:
        prod.commit_transaction(60)
    except exc as e:
        return f"failed: {e}"
    return "committed"
