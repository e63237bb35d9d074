"""Share groups (KIP-932) on a 3-node cluster, with a real share consumer (confluent-kafka's
``ShareConsumer``, librdkafka): delivery from partitions led by every broker, a resubscription,
and kill -9 of a share partition's leader and of its ``__share_group_state`` leader, with the
delivery accounting compared with Apache Kafka (issue 27).

The outcomes are counts and sets that must not depend on timing: records delivered per topic,
duplicates, which records came back after a kill and with which delivery counts. Registered
into ``scenarios_cluster.CLUSTER_SCENARIOS`` (imported at the end of that module); every
scenario starts the node it killed again before it returns.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from typing import Any

from compat_tests.scenarios import Outcome, connect
from compat_tests.scenarios_cluster import (
    ClusterTarget,
    bootstrap_of,
    cluster_scenario,
    creatable,
    create_and_wait,
    full_isr,
    wait_view,
)
from compat_tests.wire import Connection
from protocol._generated.metadata_request import MetadataRequest

#: bound of a share consumer's drain (a loaded 2-core machine, a cold cluster)
DRAIN_S = 90.0
RECORDS = 200


@contextlib.contextmanager
def _connect_any(bootstrap: str) -> Iterator[Connection]:
    """A connection to the first node of ``bootstrap`` that answers (one may be killed)."""
    last: Exception | None = None
    for address in bootstrap.split(","):
        try:
            cm = connect(address)
            conn = cm.__enter__()
        except OSError as e:
            last = e
            continue
        try:
            yield conn
        finally:
            cm.__exit__(None, None, None)
        return
    raise ConnectionError(f"no node of {bootstrap} answers: {last}")


def _clients() -> Any:
    import confluent_kafka

    return confluent_kafka


def _earliest(bootstrap: str, group: str) -> None:
    """share.auto.offset.reset=earliest for ``group`` (a group config, set before it exists)."""
    ck = _clients()
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ConfigResource.Type.GROUP, group, incremental_configs=[ConfigEntry(
        "share.auto.offset.reset", "earliest",
        incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([res]).values():
        f.result(30)
    assert ck is not None


def _produce(bootstrap: str, topic: str, n: int, prefix: str) -> None:
    ck = _clients()
    p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(n):
        p.produce(topic, value=f"{prefix}{i:04d}".encode())
    left = p.flush(60)
    assert left == 0, f"{left} records not delivered to {topic}"


def _consumer(bootstrap: str, group: str, explicit: bool = False) -> Any:
    conf = {"bootstrap.servers": bootstrap, "group.id": group}
    if explicit:
        conf["share.acknowledgement.mode"] = "explicit"
    return _clients().ShareConsumer(conf)


def _drain(c: Any, want: int, timeout_s: float = DRAIN_S) -> list[Any]:
    """Messages until ``want`` distinct (topic, partition, offset) arrived or the bound."""
    got: list[Any] = []
    seen: set[tuple[str, int, int]] = set()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and len(seen) < want:
        for m in c.poll(0.5):
            if m.error() is None:
                got.append(m)
                seen.add((m.topic(), m.partition(), m.offset()))
    return got


def _topic_id(bootstrap: str, topic: str) -> uuid.UUID:
    with _connect_any(bootstrap) as c:
        md = c.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                       allow_auto_topic_creation=False), 12)
        return uuid.UUID(str(md.topics[0].topic_id))


def _state_coordinator(bootstrap: str, key: str) -> int:
    """The node leading the ``__share_group_state`` partition of ``key`` (Kafka's key hash
    over the topic's partitions; Kafka answers FindCoordinator key type 2 from a client with
    INVALID_REQUEST, so the metadata is asked)."""
    from kafkawire.coordinator_runtime import partition_for

    leaders = _state_leaders(bootstrap)
    return leaders[partition_for(key, len(leaders))]


def _state_leaders(bootstrap: str) -> dict[int, int]:
    """Partition -> leader of ``__share_group_state``."""
    with _connect_any(bootstrap) as c:
        md = c.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
            name="__share_group_state")], allow_auto_topic_creation=False), 12)
    return {p.partition_index: p.leader_id for p in md.topics[0].partitions}


def _group_with_state_leader_apart(bootstrap: str, base: str, topic: str, tid: uuid.UUID,
                                   leader: int) -> str:
    """A group name whose share-state key (group:topic id:0) lands on a ``__share_group_state``
    partition not led by ``leader`` (Kafka's key hash); the topic is created first by a
    share consumer of a throwaway group."""
    from kafkawire.coordinator_runtime import partition_for

    probe = base + "-probe"
    c = _consumer(bootstrap, probe)
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            c.poll(0.5)
            leaders = _state_leaders(bootstrap)
            if leaders and all(v >= 0 for v in leaders.values()):
                break
    finally:
        c.close()
    leaders = _state_leaders(bootstrap)
    for i in range(1000):
        group = f"{base}-g{i}"
        if leaders[partition_for(f"{group}:{tid}:0", len(leaders))] != leader:
            return group
    raise AssertionError("no group found")


def _replicas(leader: int, rf: int) -> list[int]:
    return [(leader - 1 + i) % 3 + 1 for i in range(rf)]


# --- delivery from every broker ---------------------------------------------------------------


@cluster_scenario
def cluster_share_consume_every_leader(cluster: ClusterTarget) -> Outcome:
    """A share consumer subscribed to six one-partition topics: RF 1 and RF 3, led by each of
    the three brokers, 200 records each produced before it joins (earliest)."""
    bs = bootstrap_of(cluster)
    base = "sh-" + uuid.uuid4().hex[:6]
    topics = {}
    with _connect_any(bs) as c:
        for rf in (1, 3):
            for leader in cluster.node_ids:
                name = f"{base}-rf{rf}-l{leader}"
                create_and_wait(c, creatable(name, assignments=[_replicas(leader, rf)]), cluster)
                topics[name] = (rf, leader)
    for name in topics:
        _produce(bs, name, RECORDS, "v")
    group = base + "-g"
    _earliest(bs, group)
    c = _consumer(bs, group)
    try:
        c.subscribe(sorted(topics))
        got = _drain(c, RECORDS * len(topics))
        c.commit_sync(30)
    finally:
        c.close()
    out: dict[str, Any] = {}
    for name, (rf, leader) in topics.items():
        mine = [m for m in got if m.topic() == name]
        offsets = [m.offset() for m in mine]
        out[f"rf{rf}_leader{leader}"] = {
            "distinct": len(set(offsets)), "deliveries": len(offsets),
            "values_ok": sorted({m.value() for m in mine}) == [
                f"v{i:04d}".encode() for i in range(RECORDS)],
            "delivery_counts": sorted({m.delivery_count() for m in mine}),
        }
    return out


@cluster_scenario
def cluster_share_resubscribe(cluster: ClusterTarget) -> Outcome:
    """subscribe([a]), drain, subscribe([b]), produce to both: only b's records come."""
    bs = bootstrap_of(cluster)
    base = "shr-" + uuid.uuid4().hex[:6]
    a, b = base + "-a", base + "-b"
    with _connect_any(bs) as conn:
        for name in (a, b):
            create_and_wait(conn, creatable(name, 1, 3), cluster)
    group = base + "-g"
    _earliest(bs, group)
    c = _consumer(bs, group)
    try:
        c.subscribe([a])
        _produce(bs, a, 3, "a-pre-")
        first = _drain(c, 3)
        c.subscribe([b])
        for i in range(5):
            _produce(bs, a, 1, f"a-post-{i}-")
            _produce(bs, b, 1, f"b-{i}-")
        second = _drain(c, 5)
        # anything of a still coming within a few more polls
        extra = _drain(c, 1, 5.0)
    finally:
        c.close()
    return {"first": sorted({m.topic()[-1:] for m in first}), "first_count": len(first),
            "second": sorted({m.topic()[-1:] for m in second + extra}),
            "second_count": len(second + extra)}


# --- failover ---------------------------------------------------------------------------------


def _mark(what: str, t0: list[float]) -> None:
    import os
    import sys

    if os.environ.get("C27_TRACE"):
        print(f"[{time.monotonic() - t0[0]:6.1f}s] {what}", file=sys.stderr, flush=True)


def _failover(cluster: ClusterTarget, kill_state_leader: bool) -> Outcome:
    """RF 3; the consumer accepts 100 records (committed), 50 more are produced and it holds
    what its next poll returns, then a node is killed with kill -9: the share partition's
    leader, or the leader of its ``__share_group_state`` partition (chosen apart from the data
    leader). The held records are accepted after the kill, 50 more are produced, and the
    consumer goes on until all 200 are accepted. Outcome: what was delivered again and with
    which delivery counts."""
    ck = _clients()
    t0 = [time.monotonic()]
    bs = bootstrap_of(cluster)
    base = "shf-" + uuid.uuid4().hex[:6]
    name = base + "-t"
    leader = 2
    with _connect_any(bs) as conn:
        create_and_wait(conn, creatable(name, assignments=[_replicas(leader, 3)]), cluster)
    tid = _topic_id(bs, name)
    half = RECORDS // 2
    _produce(bs, name, half, "f")
    group = base + "-g0"
    if kill_state_leader:  # a group whose state partition is led by another node
        group = _group_with_state_leader_apart(bs, base, name, tid, leader)
    _mark("group chosen", t0)
    _earliest(bs, group)
    victim = _state_coordinator(bs, f"{group}:{tid}:0") if kill_state_leader else leader
    deliveries: dict[int, list[int]] = {}
    accepted: set[int] = set()
    c = _consumer(bs, group, explicit=True)
    held: list[Any] = []
    failed_commits = 0
    try:
        c.subscribe([name])
        deadline = time.monotonic() + DRAIN_S
        while len(accepted) < RECORDS // 2 and time.monotonic() < deadline:
            msgs = [m for m in c.poll(0.5) if m.error() is None]
            for m in msgs:
                deliveries.setdefault(m.offset(), []).append(m.delivery_count())
                c.acknowledge(m, ck.AcknowledgeType.ACCEPT)
            if msgs and not any(c.commit_sync(30).values()):
                accepted |= {m.offset() for m in msgs}
        before_kill = set(accepted)
        _mark("accepted half", t0)
        _produce(bs, name, half // 2, "g")  # what the consumer holds at the kill
        while not held and time.monotonic() < deadline:
            held = [m for m in c.poll(0.5) if m.error() is None]
        for m in held:
            deliveries.setdefault(m.offset(), []).append(m.delivery_count())
        _mark("held", t0)
        cluster.kill_node(victim)
        _mark("killed", t0)
        for m in held:
            c.acknowledge(m, ck.AcknowledgeType.ACCEPT)
        try:
            res = c.commit_sync(30)
            if not any(res.values()):
                accepted |= {m.offset() for m in held}
            else:
                failed_commits += 1
        except ck.KafkaException:
            failed_commits += 1
        _mark("held committed", t0)
        _produce(bs, name, half - half // 2, "h")  # served by the new leader
        deadline = time.monotonic() + DRAIN_S
        while len(accepted) < RECORDS and time.monotonic() < deadline:
            msgs = [m for m in c.poll(0.5) if m.error() is None]
            for m in msgs:
                deliveries.setdefault(m.offset(), []).append(m.delivery_count())
                c.acknowledge(m, ck.AcknowledgeType.ACCEPT)
            if msgs:
                try:
                    res = c.commit_sync(30)
                except ck.KafkaException:
                    failed_commits += 1
                    continue
                if not any(res.values()):
                    accepted |= {m.offset() for m in msgs}
                else:
                    failed_commits += 1
    finally:
        _mark("all accepted", t0)
        c.close()
        _mark("closed", t0)
        cluster.start_node(victim)
        with _connect_any(bs) as conn:
            wait_view(conn, name, full_isr(1))
        _mark("restarted", t0)
    held_offsets = {m.offset() for m in held}
    assert held and len(before_kill) < RECORDS, "nothing in flight at the kill"
    again = {o: counts for o, counts in deliveries.items() if len(counts) > 1}
    _mark(f"held {len(held)}, delivered again {len(again)}", t0)
    return {
        "victim_is_data_leader": victim == leader,
        "delivered": len(deliveries),
        "all_accepted": len(accepted) == RECORDS,
        "accepted_before_kill_delivered_again": sorted(set(again) & before_kill),
        "delivered_again_outside_held": sorted(set(again) - held_offsets),
        "held_delivered_again": set(again) >= held_offsets if again else "none",
        "first_delivery_counts": sorted({counts[0] for counts in deliveries.values()}),
        "redelivery_counts": sorted({n for counts in again.values() for n in counts[1:]}),
        "failed_commits": failed_commits > 0,
    }


@cluster_scenario
def cluster_share_kill_partition_leader(cluster: ClusterTarget) -> Outcome:
    return _failover(cluster, kill_state_leader=False)


@cluster_scenario
def cluster_share_kill_state_leader(cluster: ClusterTarget) -> Outcome:
    return _failover(cluster, kill_state_leader=True)
