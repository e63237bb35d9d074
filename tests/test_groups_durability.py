"""Committed offsets and groups survive broker restarts and kill -9, and are visible and
editable through the admin APIs (confluent-kafka AdminClient).

Commit, restart the broker (clean stop, then kill -9), resume: a new consumer of the group
continues exactly after the committed offsets (nothing lost, nothing re-delivered beyond the
uncommitted tail). Groups are rebuilt from ``__consumer_offsets`` (GroupMetadata records).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from group_helpers import create_topic, group_broker, produce

from kafkawire.tools.testing import BrokerProcess


@pytest.fixture
def dbroker(tmp_path: Path) -> Iterator[BrokerProcess]:
    yield from group_broker(tmp_path / "data", **{"offsets.topic.num.partitions": "7"})


def consume(bootstrap: str, group: str, topic: str, n: int, commit: bool = True, timeout_s: float = 60) -> list[str]:
    from confluent_kafka import Consumer

    c = Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "session.timeout.ms": 6000,
    })
    c.subscribe([topic])
    out: list[str] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(out) < n and time.monotonic() < deadline:
            for m in c.consume(n - len(out), 0.5):
                if m.error():
                    continue
                out.append(m.value().decode())
                if commit:
                    c.commit(message=m, asynchronous=False)
    finally:
        c.close()
    return out


@pytest.mark.parametrize("how", ["restart", "kill9"])
def test_commit_restart_resume(dbroker: BrokerProcess, how: str) -> None:
    topic = f"dur-{how}-{uuid.uuid4().hex[:6]}"
    group = f"g-{topic}"
    create_topic(dbroker.bootstrap, topic, 3)
    values = [f"v{i}" for i in range(90)]
    produce(dbroker.bootstrap, topic, values, 3)
    first = consume(dbroker.bootstrap, group, topic, 40)
    assert len(first) == 40
    if how == "restart":
        dbroker.stop()
    else:
        dbroker.kill()
    dbroker.start()
    rest = consume(dbroker.bootstrap, group, topic, 50)
    assert len(rest) == 50
    assert sorted(first + rest, key=lambda v: int(v[1:])) == values  # none lost, none twice
    # committed offsets are what the admin API reports after another restart
    dbroker.kill()
    dbroker.start()
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": dbroker.bootstrap})
    res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    got = {tp.partition: tp.offset for tp in res.topic_partitions if tp.topic == topic}
    assert got == {0: 30, 1: 30, 2: 30}


def test_group_metadata_replayed_after_kill9(dbroker: BrokerProcess) -> None:
    """A Stable group comes back Stable with its member and assignment after kill -9."""
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient

    topic = f"meta-{uuid.uuid4().hex[:6]}"
    group = f"g-{topic}"
    create_topic(dbroker.bootstrap, topic, 2)
    c = Consumer({"bootstrap.servers": dbroker.bootstrap, "group.id": group,
                  "session.timeout.ms": 30000, "client.id": "durable-member"})
    c.subscribe([topic])
    deadline = time.monotonic() + 30
    while not c.assignment() and time.monotonic() < deadline:
        c.poll(0.2)
    assert len(c.assignment()) == 2
    admin = AdminClient({"bootstrap.servers": dbroker.bootstrap})
    before = admin.describe_consumer_groups([group])[group].result(30)
    dbroker.kill()
    dbroker.start()
    admin = AdminClient({"bootstrap.servers": dbroker.bootstrap})
    after = admin.describe_consumer_groups([group])[group].result(30)
    assert str(after.state) == str(before.state)
    assert [m.member_id for m in after.members] == [m.member_id for m in before.members]
    assert after.members[0].client_id == "durable-member"
    assert sorted(tp.partition for tp in after.members[0].assignment.topic_partitions) == [0, 1]
    c.close()


def test_admin_list_describe_alter_delete(dbroker: BrokerProcess) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    topic = f"adm-{uuid.uuid4().hex[:6]}"
    group = f"g-{topic}"
    create_topic(dbroker.bootstrap, topic, 2)
    produce(dbroker.bootstrap, topic, [f"v{i}" for i in range(10)], 2)
    assert len(consume(dbroker.bootstrap, group, topic, 10)) == 10
    admin = AdminClient({"bootstrap.servers": dbroker.bootstrap})
    listed = admin.list_consumer_groups().result(30)
    mine = [g for g in listed.valid if g.group_id == group]
    assert len(mine) == 1 and str(mine[0].state).endswith("EMPTY")
    d = admin.describe_consumer_groups([group])[group].result(30)
    assert str(d.state).endswith("EMPTY") and d.members == []
    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    assert {tp.partition: tp.offset for tp in offsets.topic_partitions} == {0: 5, 1: 5}
    # alter, then read back
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, 0, 2), TopicPartition(topic, 1, 3)])])[group].result(30)
    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    assert {tp.partition: tp.offset for tp in offsets.topic_partitions} == {0: 2, 1: 3}
    # a consumer resumes from the altered offsets: 3 + 2 records
    assert sorted(consume(dbroker.bootstrap, group, topic, 5)) == sorted(
        ["v4", "v6", "v8", "v7", "v9"])
    # delete one partition's offset (OffsetDelete: kafka-python's admin has it)
    from kafka import TopicPartition as KTP
    from kafka.admin import KafkaAdminClient

    kadmin = KafkaAdminClient(bootstrap_servers=dbroker.bootstrap)
    try:
        res = kadmin.delete_group_offsets(group, [KTP(topic, 0)])
        assert all(err is None or getattr(err, "errno", 0) == 0 for err in res.values()), res
        assert group in str(kadmin.list_groups())
    finally:
        kadmin.close()
    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    assert {tp.partition: tp.offset for tp in offsets.topic_partitions} == {1: 5}
    # delete the group
    admin.delete_consumer_groups([group])[group].result(30)
    listed = admin.list_consumer_groups().result(30)
    assert group not in [g.group_id for g in listed.valid]
    from confluent_kafka import KafkaException

    with pytest.raises(KafkaException, match="GROUP_ID_NOT_FOUND"):
        admin.delete_consumer_groups([group])[group].result(30)
