"""Online migration between classic and consumer (KIP-848) groups, static KIP-848 members and
regular-expression subscriptions, with stock clients in one group.

* a rolling upgrade: classic members of three client families (kafka-python, aiokafka,
  librdkafka) replaced one by one by librdkafka ``group.protocol=consumer`` members while the
  group consumes, then the rolling downgrade back; after every step each partition has
  exactly one owner, nothing produced is lost, and the group's type follows (classic ->
  consumer -> classic) as Kafka's;
* a static KIP-848 member closed gracefully (member epoch -2) and restarted within the session
  timeout gets its partitions back without the other member losing any;
* a running KIP-848 member subscribed by regex picks up a topic created later;
* ``group.consumer.migration.policy=disabled`` (KAFKA-20640) refuses both conversions;
* a mixed group survives kill -9 (its ConsumerGroupMemberMetadata records carry the classic
  member's metadata) and its regexes come back from their records.

The raw-protocol behaviour is compared with Apache Kafka 4.3.1 in
``compat_tests/scenarios_groups.py``.
"""

from __future__ import annotations

import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import RawClient
from group_helpers import (
    create_topic,
    describe_when_loaded,
    group_broker,
    produce,
    ready_raw,
    wait_until,
)
from test_groups_clients import REBALANCE_S, Member, assignments, partitioned

from groups.consumer_protocol import encode_subscription
from kafkawire.tools.testing import BrokerProcess
from protocol._generated.consumer_group_describe_request import ConsumerGroupDescribeRequest
from protocol._generated.consumer_group_heartbeat_request import ConsumerGroupHeartbeatRequest
from protocol._generated.heartbeat_request import HeartbeatRequest
from protocol._generated.join_group_request import JoinGroupRequest
from protocol._generated.list_groups_request import ListGroupsRequest
from protocol._generated.sync_group_request import SyncGroupRequest
from protocol.errors import ErrorCode


@pytest.fixture(scope="module")
def mbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from group_broker(tmp_path_factory.mktemp("kwm") / "data")


def group_type(bootstrap: str, group: str) -> tuple[str, str] | None:
    """(type, state) of ``group`` from ListGroups v5."""
    c = RawClient(bootstrap)
    try:
        r = c.request(ListGroupsRequest(states_filter=[], types_filter=[]), 5)
        for g in r.groups:
            if g.group_id == group:
                return g.group_type, g.group_state
        return None
    finally:
        c.close()


def requests_served(bp: BrokerProcess, api: str) -> float:
    """How many ``api`` requests the broker has answered (its request metrics)."""
    with urllib.request.urlopen(bp.metrics_url + "/metrics", timeout=10) as r:
        body = r.read().decode()
    prefix = f'kafka_network_requestmetrics_requests_total{{request="{api}",'
    return sum(float(line.rsplit(" ", 1)[1]) for line in body.splitlines() if line.startswith(prefix))


class Producer:
    """Produces ``v<n>`` records round-robin over the partitions until stopped."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.sent: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        from confluent_kafka import Producer as P

        p = P({"bootstrap.servers": self.bootstrap, "linger.ms": 5})
        n = 0
        while not self.stop.is_set() and n < 5000:
            v = f"v{n}"
            p.produce(self.topic, v.encode(), partition=n % self.partitions)
            p.poll(0)
            self.sent.append(v)
            n += 1
            time.sleep(0.02)
        assert p.flush(30) == 0

    def close(self) -> list[str]:
        self.stop.set()
        self.thread.join(60)
        return list(self.sent)


def describe(bootstrap: str, group: str) -> Any:
    """What the coordinator holds (for failure messages)."""
    c = RawClient(bootstrap)
    try:
        d = c.request(ConsumerGroupDescribeRequest(group_ids=[group]), 1).groups[0]
        return [d.error_code, group_type(bootstrap, group), d.group_state, d.group_epoch, d.assignment_epoch, [
            (m.member_type, m.member_epoch, [p for tp in m.assignment.topic_partitions for p in tp.partitions],
             [p for tp in m.target_assignment.topic_partitions for p in tp.partitions]) for m in d.members]]
    finally:
        c.close()


def test_rolling_upgrade_then_downgrade_with_mixed_clients(mbroker: BrokerProcess) -> None:
    bs = mbroker.bootstrap
    parts = 6
    topic = f"mig-{uuid.uuid4().hex[:6]}"
    group = f"g-{topic}"
    create_topic(bs, topic, parts)
    classic = [Member(family, bs, group, topic, "--protocol", "classic")
               for family in ("kafka-python", "aiokafka", "confluent")]
    members: list[Member] = list(classic)
    everyone: list[Member] = list(classic)
    producer = Producer(bs, topic, parts)
    try:
        wait_until(lambda: partitioned(members, parts) and all(m.assigned for m in members),
                   REBALANCE_S, "three classic members sharing", lambda: assignments(members))
        assert group_type(bs, group) == ("classic", "Stable")
        # rolling upgrade: one new consumer-protocol member, then one classic member less
        for step, old in enumerate(list(classic)):
            new = Member("confluent", bs, group, topic, "--protocol", "consumer")
            members.append(new)
            everyone.append(new)
            wait_until(lambda new=new: partitioned(members, parts) and bool(new.assigned),  # type: ignore[misc]
                       REBALANCE_S, f"upgrade step {step}: the new member gets partitions",
                       lambda: (assignments(members), describe(bs, group)))
            assert group_type(bs, group) is not None
            assert group_type(bs, group)[0] == "consumer"  # type: ignore[index]
            old.terminate()
            members.remove(old)
            wait_until(lambda: partitioned(members, parts), REBALANCE_S,
                       f"upgrade step {step}: the leaver's partitions taken over",
                       lambda: (assignments(members), describe(bs, group)))
        c = ready_raw(bs)
        d = c.request(ConsumerGroupDescribeRequest(group_ids=[group]), 1).groups[0]
        c.close()
        assert d.error_code == 0 and sorted(m.member_type for m in d.members) == [1, 1, 1]
        # rolling downgrade: classic members back; the last consumer member's departure
        # converts the group to a classic group
        upgraded = list(members)
        for step, (old, family) in enumerate(zip(upgraded, ("kafka-python", "aiokafka", "confluent"), strict=True)):
            new = Member(family, bs, group, topic, "--protocol", "classic")
            members.append(new)
            everyone.append(new)
            wait_until(lambda new=new: partitioned(members, parts) and bool(new.assigned),  # type: ignore[misc]
                       REBALANCE_S, f"downgrade step {step}: the classic member gets partitions",
                       lambda: assignments(members))
            old.terminate()
            members.remove(old)
            wait_until(lambda: partitioned(members, parts), REBALANCE_S,
                       f"downgrade step {step}: the leaver's partitions taken over",
                       lambda: assignments(members))
        wait_until(lambda: group_type(bs, group) == ("classic", "Stable"), REBALANCE_S,
                   "the group back to classic", lambda: group_type(bs, group))
        sent = producer.close()
        # nothing lost: every record produced was consumed by some member
        wait_until(lambda: set(sent) <= {v for m in everyone for _p, _o, v in m.messages()},
                   REBALANCE_S, "every record consumed",
                   lambda: len(set(sent) - {v for m in everyone for _p, _o, v in m.messages()}))
    except AssertionError:
        print(mbroker.log()[-20000:])
        raise
    finally:
        producer.close()
        for m in members:
            m.terminate()


def test_static_consumer_protocol_member_restarts_without_rebalance(mbroker: BrokerProcess) -> None:
    """librdkafka ``group.protocol=consumer`` with ``group.instance.id``: a clean close leaves
    with epoch -2; back within the session timeout it owns the same partitions and the other
    member was never asked to revoke."""
    bs = mbroker.bootstrap
    parts = 4
    topic = f"st848-{uuid.uuid4().hex[:6]}"
    group = f"g-{topic}"
    create_topic(bs, topic, parts)
    proto = ("--protocol", "consumer")
    a = Member("confluent", bs, group, topic, "--instance", "inst-a", *proto)
    b = Member("confluent", bs, group, topic, "--instance", "inst-b", *proto)
    members = [a, b]
    try:
        wait_until(lambda: partitioned(members, parts) and all(m.assigned for m in members),
                   REBALANCE_S, "two static members sharing", lambda: assignments(members))
        before_a, before_b = a.assigned, b.assigned
        revocations_b = len(b.revocations())
        a.terminate()  # static leave: member epoch -2, partitions kept for it
        c = ready_raw(bs)
        d = c.request(ConsumerGroupDescribeRequest(group_ids=[group]), 1).groups[0]
        by_instance = {m.instance_id: m for m in d.members}
        assert by_instance["inst-a"].member_epoch == -2, d
        assert sum(len(tp.partitions) for tp in by_instance["inst-a"].assignment.topic_partitions) == len(before_a or [])
        epoch = d.group_epoch
        a2 = Member("confluent", bs, group, topic, "--instance", "inst-a", *proto)
        members = [a2, b]
        wait_until(lambda: partitioned(members, parts) and a2.assigned == before_a,
                   REBALANCE_S, "the static member back with its partitions", lambda: assignments(members))
        d = c.request(ConsumerGroupDescribeRequest(group_ids=[group]), 1).groups[0]
        c.close()
        assert d.group_epoch == epoch  # no rebalance
        time.sleep(1.0)
        assert b.assigned == before_b and len(b.revocations()) == revocations_b
    finally:
        for m in members:
            m.terminate()


def consumes_new_records(bs: str, topic: str, parts: int, member: Member, prefix: str, n: int = 8) -> None:
    """``member`` consumes ``n`` records produced now (one per partition round-robin)."""
    values = [f"{prefix}{i}" for i in range(n)]
    produce(bs, topic, values, parts)
    wait_until(lambda: set(values) <= {v for _p, _o, v in member.messages()}, REBALANCE_S,
               f"{member.proc.args[2]} consuming the records produced now", lambda: member.messages()[-3:])


@pytest.mark.parametrize("family", ["kafka-python", "confluent"])
def test_classic_static_member_replacing_the_last_consumer_member_downgrades(
    mbroker: BrokerProcess, family: str,
) -> None:
    """Kafka 4.3 (validateOnlineDowngradeWithReplacedMember): a classic member with the
    group.instance.id of the group's last KIP-848 (static) member takes its place, and the
    group becomes a classic group at once, the classic member owning the partitions."""
    bs = mbroker.bootstrap
    parts = 4
    topic = f"stdown-{uuid.uuid4().hex[:6]}"
    group = f"g-{topic}"
    create_topic(bs, topic, parts)
    produce(bs, topic, [f"v{i}" for i in range(20)], parts)
    a = Member("confluent", bs, group, topic, "--instance", "inst-x", "--protocol", "consumer")
    members = [a]
    try:
        wait_until(lambda: a.assigned == list(range(parts)), REBALANCE_S, "the static member's partitions",
                   lambda: assignments(members))
        assert group_type(bs, group) == ("consumer", "Stable")
        a.terminate()  # static leave: epoch -2, the member and its partitions stay
        b = Member(family, bs, group, topic, "--instance", "inst-x", "--protocol", "classic")
        members = [b]
        wait_until(lambda: b.assigned == list(range(parts)), REBALANCE_S,
                   "the classic static member with the partitions", lambda: assignments(members))
        assert group_type(bs, group) == ("classic", "Stable")
        consumes_new_records(bs, topic, parts, b, "w")
    finally:
        for m in members:
            m.terminate()


def test_no_online_upgrade_of_a_group_whose_custom_assignor_sends_user_data(mbroker: BrokerProcess) -> None:
    """Kafka 4.3: a classic group whose (custom) assignor puts user data in the assignments
    is not upgraded (the consumer protocol would lose it): a librdkafka
    ``group.protocol=consumer`` member's heartbeat is GROUP_ID_NOT_FOUND with Kafka's message,
    and the kafka-python member with its custom assignor goes on owning the partitions of a
    classic group."""
    bs = mbroker.bootstrap
    parts = 3
    topic = f"udata-{uuid.uuid4().hex[:6]}"
    group = f"g-{topic}"
    create_topic(bs, topic, parts)
    classic = Member("kafka-python", bs, group, topic, "--strategy", "userdata")
    members = [classic]
    try:
        wait_until(lambda: classic.assigned == list(range(parts)), REBALANCE_S, "the classic member's partitions",
                   lambda: assignments(members))
        c = ready_raw(bs)
        r = consumer_join(c, group, "upgrader", topic)
        c.close()
        assert r.error_code == ErrorCode.GROUP_ID_NOT_FOUND, r
        assert "an unsupported custom assignor is in use" in (r.error_message or ""), r
        served = requests_served(mbroker, "ConsumerGroupHeartbeat")
        new = Member("confluent", bs, group, topic, "--protocol", "consumer")
        members.append(new)
        # the librdkafka member's join has been answered (refused, as the raw one above)
        wait_until(lambda: requests_served(mbroker, "ConsumerGroupHeartbeat") > served, REBALANCE_S,
                   "the KIP-848 member's join answered", lambda: assignments(members))
        assert group_type(bs, group) == ("classic", "Stable")
        assert classic.assigned == list(range(parts)) and not new.assigned
        consumes_new_records(bs, topic, parts, classic, "u")
    finally:
        for m in members:
            m.terminate()


def test_regex_member_picks_up_new_topic(mbroker: BrokerProcess) -> None:
    """A running ``group.protocol=consumer`` member subscribed with a regex consumes from a
    topic created after it joined (the group resolves its regexes again on new topics, at
    most every 10 s, as Kafka)."""
    bs = mbroker.bootstrap
    tag = uuid.uuid4().hex[:6]
    first, later = f"rxm{tag}-a", f"rxm{tag}-b"
    create_topic(bs, first, 2)
    produce(bs, first, [f"a{i}" for i in range(10)], 2)
    m = Member("confluent", bs, f"g-rx{tag}", f"^rxm{tag}-.*", "--protocol", "consumer")
    try:
        wait_until(lambda: {v for _p, _o, v in m.messages()} >= {f"a{i}" for i in range(10)},
                   REBALANCE_S, "the records of the first topic", lambda: m.messages()[-3:])
        create_topic(bs, later, 3)
        produce(bs, later, [f"b{i}" for i in range(9)], 3)
        wait_until(lambda: {v for _p, _o, v in m.messages()} >= {f"b{i}" for i in range(9)},
                   REBALANCE_S, "the records of the topic created later", lambda: m.messages()[-3:])
        assert m.assigned is not None and len(m.assigned) == 5
    finally:
        m.terminate()


def classic_join(c: RawClient, group: str, topic: str, session_ms: int = 10000) -> Any:
    def req(member_id: str) -> JoinGroupRequest:
        return JoinGroupRequest(
            group_id=group, session_timeout_ms=session_ms, rebalance_timeout_ms=session_ms,
            member_id=member_id, protocol_type="consumer",
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(
                name="range", metadata=encode_subscription([topic]))])

    deadline = time.monotonic() + 20
    while True:  # the group's partition may still be loading on a fresh broker
        r = c.request(req(""), 9)
        if r.error_code not in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR,
                                ErrorCode.COORDINATOR_NOT_AVAILABLE) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    if r.error_code == ErrorCode.MEMBER_ID_REQUIRED:
        r = c.request(req(r.member_id), 9)
    return r


def consumer_join(c: RawClient, group: str, member: str, topic: str) -> Any:
    return c.request(ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=0, rebalance_timeout_ms=10000,
        subscribed_topic_names=[topic], topic_partitions=[]), 1)


def test_migration_policy_disabled_refuses_both_conversions(tmp_path: Any) -> None:
    bp = BrokerProcess(tmp_path / "data", overrides={
        "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3",
        "group.consumer.migration.policy": "disabled"}).start()
    try:
        c = ready_raw(bp.bootstrap)
        create_topic(bp.bootstrap, "pol", 2)
        j = classic_join(c, "pol-classic", "pol")
        assert j.error_code == 0
        r = consumer_join(c, "pol-classic", "m1", "pol")
        assert r.error_code == ErrorCode.GROUP_ID_NOT_FOUND
        assert "online upgrade is disabled" in (r.error_message or "")
        assert consumer_join(c, "pol-consumer", "m1", "pol").error_code == 0
        # KAFKA-20640: no classic member joins a consumer group under "disabled"
        assert classic_join(c, "pol-consumer", "pol").error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        # empty groups convert whatever the policy
        assert c.request(ConsumerGroupHeartbeatRequest(
            group_id="pol-consumer", member_id="m1", member_epoch=-1), 1).error_code == 0
        assert classic_join(c, "pol-consumer", "pol").error_code == 0
        c.close()
    finally:
        bp.close()


def test_mixed_group_and_regexes_survive_kill9(tmp_path: Any) -> None:
    bp = BrokerProcess(tmp_path / "data", overrides={
        "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3",
        "group.consumer.assignment.interval.ms": "0"}).start()
    try:
        c = ready_raw(bp.bootstrap)
        create_topic(bp.bootstrap, "dur", 4)
        create_topic(bp.bootstrap, "durx-1", 1)
        j = classic_join(c, "dur-g", "dur", session_ms=60000)
        assert j.error_code == 0 and j.generation_id == 1
        from groups.consumer_protocol import encode_assignment

        s = c.request(SyncGroupRequest(
            group_id="dur-g", generation_id=1, member_id=j.member_id, protocol_type="consumer",
            protocol_name="range", assignments=[SyncGroupRequest.SyncGroupRequestAssignment(
                member_id=j.member_id, assignment=encode_assignment({"dur": [0, 1, 2, 3]}))]), 5)
        assert s.error_code == 0
        up = consumer_join(c, "dur-g", "kip848", "dur")
        assert up.error_code == 0 and up.member_epoch == 2
        rx = c.request(ConsumerGroupHeartbeatRequest(
            group_id="dur-g", member_id="regex", member_epoch=0, rebalance_timeout_ms=10000,
            subscribed_topic_regex="durx-.*", topic_partitions=[]), 1)
        assert rx.error_code == 0
        wait_until(lambda: c.request(ConsumerGroupDescribeRequest(group_ids=["dur-g"]), 1).groups[0].group_epoch >= 3,
                   20, "the regex resolved")
        before = c.request(ConsumerGroupDescribeRequest(group_ids=["dur-g"]), 1).groups[0]
        c.close()
        bp.kill()
        bp.start()
        c = ready_raw(bp.bootstrap)
        after = describe_when_loaded(c, "dur-g")

        def summary(d: Any) -> Any:
            return (d.group_epoch, d.assignment_epoch, sorted(
                (m.member_id, m.member_type, m.member_epoch, m.subscribed_topic_regex) for m in d.members))

        assert summary(after) == summary(before)
        assert {m.member_type for m in after.members} == {0, 1}
        # the classic member goes on with its generation (its member epoch): it must rejoin
        hb = c.request(HeartbeatRequest(group_id="dur-g", generation_id=1, member_id=j.member_id), 4)
        assert hb.error_code == ErrorCode.REBALANCE_IN_PROGRESS
        # the regex member gets durx-1 from the resolution that was replayed (a new one
        # would wait out the 10 s minimum interval)
        epoch = {m.member_id: m.member_epoch for m in after.members}["regex"]
        deadline = time.monotonic() + 5
        owned: list[Any] = []
        while time.monotonic() < deadline:
            r = c.request(ConsumerGroupHeartbeatRequest(
                group_id="dur-g", member_id="regex", member_epoch=epoch, topic_partitions=owned), 1)
            assert r.error_code == 0, r
            epoch = r.member_epoch
            if r.assignment is not None:
                owned = [ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=tp.topic_id, partitions=tp.partitions)
                         for tp in r.assignment.topic_partitions]
            if owned:
                break
            time.sleep(0.1)
        assert [len(tp.partitions) for tp in owned] == [1]
        c.close()
    finally:
        bp.close()
