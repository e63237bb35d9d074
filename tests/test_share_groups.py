"""Share groups (KIP-932) with a real client: confluent-kafka's ShareConsumer (librdkafka)
against a real broker process.

Several consumers on one partition get distinct records; explicit release/reject; a consumer
killed with kill -9 holding records: they come back after the lock duration with the delivery
count raised; state survives a broker kill -9 (nothing acknowledged is delivered again);
ShareGroupDescribe and ApiVersions over the wire."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
if not hasattr(confluent_kafka, "ShareConsumer"):
    pytest.skip("confluent-kafka without ShareConsumer", allow_module_level=True)

from confluent_kafka import AcknowledgeType, Producer, ShareConsumer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from kafkawire.testing import BrokerProcess  # noqa: E402
from tests.conftest import RawClient  # noqa: E402

LOCK_MS = 3000
OVERRIDES = {
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.record.lock.duration.ms": str(LOCK_MS),
}


@pytest.fixture(scope="module")
def sbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    bp = BrokerProcess(tmp_path_factory.mktemp("share") / "data", overrides=OVERRIDES).start()
    try:
        yield bp
    finally:
        bp.close()


def topic(bs: str, partitions: int = 1) -> str:
    name = "share-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


def produce(bs: str, name: str, values: list[bytes], batches: int = 1) -> None:
    p = Producer({"bootstrap.servers": bs, "linger.ms": 0})
    step = max(1, len(values) // batches)
    for i in range(0, len(values), step):
        for v in values[i:i + step]:
            p.produce(name, value=v)
        p.flush(30)


def consumer(bs: str, group: str, name: str, **conf: Any) -> Any:
    c = ShareConsumer({"bootstrap.servers": bs, "group.id": group, **conf})
    c.subscribe([name])
    return c


def poll_until(
    consumers: list[Any], done: Callable[[], bool], timeout_s: float,
    on_msg: Callable[[int, Any], None],
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not done():
        for i, c in enumerate(consumers):
            for m in c.poll(0.3):
                if m.error() is None:
                    on_msg(i, m)


def start_offset(bs: str, group: str, name: str, p: int = 0) -> int:
    """The share-partition start offset (DescribeShareGroupOffsets), -1 before it exists."""
    from protocol._generated.describe_share_group_offsets_request import (
        DescribeShareGroupOffsetsRequest as Req,
    )

    d = RawClient(bs).request(Req(groups=[Req.DescribeShareGroupOffsetsRequestGroup(
        group_id=group, topics=[Req.DescribeShareGroupOffsetsRequestTopic(
            topic_name=name, partitions=[p])])]), 1)
    return int(d.groups[0].topics[0].partitions[0].start_offset) if d.groups[0].topics else -1


def members(bs: str, group: str) -> int:
    from protocol._generated.share_group_describe_request import ShareGroupDescribeRequest

    d = RawClient(bs).request(ShareGroupDescribeRequest(
        group_ids=[group], include_authorized_operations=False), 1)
    return len(d.groups[0].members)


def joined(c: Any, bs: str, group: str, name: str) -> None:
    """Poll until the group has the share partition (it starts at the high watermark:
    share.auto.offset.reset=latest), so what is produced next is delivered."""
    deadline = time.monotonic() + 60
    while start_offset(bs, group, name) < 0 and time.monotonic() < deadline:
        c.poll(0.3)


def test_api_versions_and_feature(sbroker: BrokerProcess) -> None:
    from protocol._generated.api_versions_request import ApiVersionsRequest

    rc = RawClient(sbroker.bootstrap)
    resp = rc.request(ApiVersionsRequest(client_software_name="t",
                                         client_software_version="1"), 4)
    keys = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert keys[76] == (1, 1) and keys[77] == (1, 1)
    assert keys[78] == (1, 2) and keys[79] == (1, 2)
    fin = {f.name: f.max_version_level for f in resp.finalized_features}
    assert fin["share.version"] == 1


def test_several_consumers_on_one_partition_get_distinct_records(sbroker: BrokerProcess) -> None:
    bs = sbroker.bootstrap
    name, group = topic(bs), "g-" + uuid.uuid4().hex[:6]
    cs = [consumer(bs, group, name, **{"max.poll.records": 5}) for _ in range(3)]
    try:
        for c in cs:
            joined(c, bs, group, name)
        deadline = time.monotonic() + 60
        while members(bs, group) < 3 and time.monotonic() < deadline:
            for c in cs:
                c.poll(0.2)
        values = [b"r%03d" % i for i in range(60)]
        produce(bs, name, values, batches=30)
        seen: dict[bytes, list[int]] = {}
        per: list[int] = [0, 0, 0]

        def got(i: int, m: Any) -> None:
            seen.setdefault(m.value(), []).append(i)
            per[i] += 1

        poll_until(cs, lambda: len(seen) == len(values), 60, got)
        assert sorted(seen) == values
        assert all(len(who) == 1 for who in seen.values()), "a record went to two consumers"
        assert sum(1 for n in per if n) >= 2, per
    finally:
        for c in cs:
            c.close()


def test_release_redelivers_and_reject_archives(sbroker: BrokerProcess) -> None:
    bs = sbroker.bootstrap
    name, group = topic(bs), "g-" + uuid.uuid4().hex[:6]
    c = consumer(bs, group, name, **{"share.acknowledgement.mode": "explicit"})
    try:
        joined(c, bs, group, name)
        produce(bs, name, [b"a", b"b", b"c"])
        first: list[Any] = []
        poll_until([c], lambda: len(first) == 3, 30, lambda _i, m: first.append(m))
        assert [m.delivery_count() for m in first] == [1, 1, 1]
        by_value = {m.value(): m for m in first}
        c.acknowledge(by_value[b"a"], AcknowledgeType.ACCEPT)
        c.acknowledge(by_value[b"b"], AcknowledgeType.RELEASE)
        c.acknowledge(by_value[b"c"], AcknowledgeType.REJECT)
        c.commit_sync(30)
        again: list[Any] = []
        poll_until([c], lambda: len(again) >= 1, 30, lambda _i, m: again.append(m))
        assert [(m.value(), m.delivery_count()) for m in again] == [(b"b", 2)]
        c.acknowledge(again[0], AcknowledgeType.ACCEPT)
        c.commit_sync(30)
        more: list[Any] = []
        poll_until([c], lambda: False, 3, lambda _i, m: more.append(m))
        assert more == []
    finally:
        c.close()


HOLDER = textwrap.dedent("""
    import sys, time
    from confluent_kafka import ShareConsumer
    c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                       "share.acknowledgement.mode": "explicit"})
    c.subscribe([sys.argv[3]])
    got = 0
    while got < int(sys.argv[4]):
        got += sum(1 for m in c.poll(0.5) if m.error() is None)
    print("HOLDING", got, flush=True)
    time.sleep(600)
""")


def _held_then(sbroker: BrokerProcess, tmp_path: Path, sig: int) -> tuple[list[Any], float]:
    """A consumer process acquires 10 records without acknowledging them, then gets ``sig``;
    returns what another member receives and after how long."""
    bs = sbroker.bootstrap
    name, group = topic(bs), "g-" + uuid.uuid4().hex[:6]
    watcher = consumer(bs, group, name)  # joins first so the share partition starts at 0
    joined(watcher, bs, group, name)
    watcher.close()
    values = [b"k%d" % i for i in range(10)]
    produce(bs, name, values)
    script = tmp_path / "holder.py"
    script.write_text(HOLDER)
    proc = subprocess.Popen([sys.executable, str(script), bs, group, name, "10"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        assert line.startswith("HOLDING 10"), line
        os.kill(proc.pid, sig)
        since = time.monotonic()
        c = consumer(bs, group, name)
        try:
            back: list[Any] = []
            poll_until([c], lambda: len(back) >= 10, 60, lambda _i, m: back.append(m))
            waited = time.monotonic() - since
            assert sorted(m.value() for m in back) == sorted(values)
            return back, waited
        finally:
            c.close()
    finally:
        proc.kill()
        proc.wait(30)


def test_killed_consumer_records_come_back_with_delivery_count_raised(
        sbroker: BrokerProcess, tmp_path: Path) -> None:
    """kill -9: its connection closes, its share session goes and its records are released
    at once (as Kafka 4.1+ does on a connection drop), delivery count 2."""
    back, _waited = _held_then(sbroker, tmp_path, signal.SIGKILL)
    assert {m.delivery_count() for m in back} == {2}


def test_stuck_consumer_records_come_back_after_the_lock(sbroker: BrokerProcess,
                                                         tmp_path: Path) -> None:
    """SIGSTOP: the connection stays open, so only the acquisition lock expiring
    (share.record.lock.duration.ms) makes the records available again, delivery count 2."""
    back, waited = _held_then(sbroker, tmp_path, signal.SIGSTOP)
    assert {m.delivery_count() for m in back} == {2}
    assert waited >= (LOCK_MS / 1000) * 0.5


def test_state_survives_broker_kill(tmp_path: Path) -> None:
    bp = BrokerProcess(tmp_path / "data", overrides=OVERRIDES).start()
    try:
        bs = bp.bootstrap
        name, group = topic(bs), "g-durable"
        c = consumer(bs, group, name, **{"share.acknowledgement.mode": "explicit"})
        joined(c, bs, group, name)
        values = [b"d%02d" % i for i in range(20)]
        produce(bs, name, values)
        got: list[Any] = []
        poll_until([c], lambda: len(got) >= 20, 30, lambda _i, m: got.append(m))
        for m in got:
            kind = AcknowledgeType.ACCEPT if m.value() < b"d10" else AcknowledgeType.RELEASE
            c.acknowledge(m, kind)
        c.commit_sync(30)
        bp.kill()
        c.close()
        bp.start()
        # the group is known again from its persisted state (membership is not kept)
        from protocol._generated.list_groups_request import ListGroupsRequest

        deadline = time.monotonic() + 60
        while True:
            listed = RawClient(bs).request(ListGroupsRequest(states_filter=[],
                                                             types_filter=["share"]), 5)
            if any(g.group_id == group for g in listed.groups) or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        assert [(g.group_id, g.group_state) for g in listed.groups
                if g.group_id == group] == [(group, "Empty")]
        assert start_offset(bs, group, name) == 10  # d00-d09 accepted, d10.. released
        c2 = consumer(bs, group, name)
        try:
            back: list[Any] = []
            poll_until([c2], lambda: len(back) >= 10, 60, lambda _i, m: back.append(m))
            poll_until([c2], lambda: False, 3, lambda _i, m: back.append(m))
            assert sorted(m.value() for m in back) == values[10:]
            assert {m.delivery_count() for m in back} == {2}
        finally:
            c2.close()
    finally:
        bp.close()


def test_share_group_describe(sbroker: BrokerProcess) -> None:
    from protocol._generated.share_group_describe_request import ShareGroupDescribeRequest

    bs = sbroker.bootstrap
    name, group = topic(bs, 2), "g-" + uuid.uuid4().hex[:6]
    cs = [consumer(bs, group, name) for _ in range(3)]
    try:
        for c in cs:
            joined(c, bs, group, name)
        deadline = time.monotonic() + 60  # assignments follow at the next heartbeats
        while True:
            for c in cs:
                c.poll(0.2)
            rc = RawClient(bs)
            d = rc.request(ShareGroupDescribeRequest(group_ids=[group, "nope"],
                                                     include_authorized_operations=False), 1)
            g = d.groups[0]
            assigned = all(m.assignment.topic_partitions for m in g.members)
            if (len(g.members) == 3 and assigned) or time.monotonic() > deadline:
                break
        assert g.error_code == 0 and g.group_state == "Stable" and g.assignor_name == "simple"
        assert len(g.members) == 3
        parts = [p for m in g.members for tp in m.assignment.topic_partitions
                 for p in tp.partitions if tp.topic_name == name]
        assert sorted(set(parts)) == [0, 1] and len(parts) == 3  # a partition is shared
        assert d.groups[1].error_code == 69  # GROUP_ID_NOT_FOUND
    finally:
        for c in cs:
            c.close()


def test_share_coordinator_state_apis(sbroker: BrokerProcess) -> None:
    """Initialize / Write / Read / ReadSummary / Delete ShareGroupState over the wire,
    epochs fenced as Kafka's share coordinator does."""
    from protocol._generated.delete_share_group_state_request import (
        DeleteShareGroupStateRequest as Del,
    )
    from protocol._generated.initialize_share_group_state_request import (
        InitializeShareGroupStateRequest as Init,
    )
    from protocol._generated.read_share_group_state_request import (
        ReadShareGroupStateRequest as Read,
    )
    from protocol._generated.read_share_group_state_summary_request import (
        ReadShareGroupStateSummaryRequest as Summary,
    )
    from protocol._generated.write_share_group_state_request import (
        WriteShareGroupStateRequest as Write,
    )

    rc = RawClient(sbroker.bootstrap)
    gid, tid = "g-state-" + uuid.uuid4().hex[:6], uuid.uuid4()

    def call(req: Any, version: int) -> Any:
        deadline = time.monotonic() + 60
        while True:  # the first use creates __share_group_state (COORDINATOR_NOT_AVAILABLE)
            resp = rc.request(req, version)
            code = resp.results[0].partitions[0].error_code
            if code not in (14, 15, 16) or time.monotonic() > deadline:
                return resp
            time.sleep(0.2)

    def read() -> Any:
        r = call(Read(group_id=gid, topics=[Read.ReadStateData(
            topic_id=tid, partitions=[Read.PartitionData(partition=0, leader_epoch=0)])]), 0)
        return r.results[0].partitions[0]

    r = call(Init(group_id=gid, topics=[Init.InitializeStateData(topic_id=tid, partitions=[
        Init.PartitionData(partition=0, state_epoch=1, start_offset=10)])]), 0)
    assert r.results[0].partitions[0].error_code == 0
    p = read()
    assert (p.error_code, p.state_epoch, p.start_offset, p.state_batches) == (0, 1, 10, [])

    def write(state_epoch: int, start: int, batches: list[tuple[int, int, int, int]]) -> int:
        w = call(Write(group_id=gid, topics=[Write.WriteStateData(topic_id=tid, partitions=[
            Write.PartitionData(partition=0, state_epoch=state_epoch, leader_epoch=0,
                                start_offset=start, delivery_complete_count=-1,
                                state_batches=[Write.StateBatch(
                                    first_offset=a, last_offset=b, delivery_state=c,
                                    delivery_count=d) for a, b, c, d in batches])])]), 1)
        return int(w.results[0].partitions[0].error_code)

    assert write(1, -1, [(10, 14, 2, 1), (15, 19, 0, 2)]) == 0
    assert write(1, 12, [(15, 16, 4, 3)]) == 0
    p = read()
    assert p.start_offset == 12
    assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in p.state_batches] == [(12, 14, 2, 1), (15, 16, 4, 3), (17, 19, 0, 2)]
    assert write(0, -1, []) == 124  # FENCED_STATE_EPOCH
    s = call(Summary(group_id=gid, topics=[Summary.ReadStateSummaryData(
        topic_id=tid, partitions=[Summary.PartitionData(partition=0, leader_epoch=0)])]), 1)
    sp = s.results[0].partitions[0]
    assert (sp.state_epoch, sp.start_offset, sp.delivery_complete_count) == (1, 12, 5)
    d = call(Del(group_id=gid, topics=[Del.DeleteStateData(
        topic_id=tid, partitions=[Del.PartitionData(partition=0)])]), 0)
    assert d.results[0].partitions[0].error_code == 0
    assert read().start_offset == -1


def test_dead_letter_topic_extension(sbroker: BrokerProcess) -> None:
    """kafkawire.share.dead.letter.topic (our group config): a record released until
    share.delivery.count.limit is archived and copied there with kafkawire.dlq.* headers;
    a rejected one is not."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    bs = sbroker.bootstrap
    name, dlq, group = topic(bs), topic(bs), "g-" + uuid.uuid4().hex[:6]
    admin = AdminClient({"bootstrap.servers": bs})
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.delivery.count.limit", "2",
                    incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("kafkawire.share.dead.letter.topic", dlq,
                    incremental_operation=AlterConfigOpType.SET),
    ])
    for f in admin.incremental_alter_configs([res]).values():
        f.result(30)
    c = consumer(bs, group, name, **{"share.acknowledgement.mode": "explicit"})
    try:
        joined(c, bs, group, name)
        produce(bs, name, [b"poison", b"bad"])
        for want in (2, 1):
            got: list[Any] = []
            poll_until([c], lambda g=got, n=want: len(g) >= n, 30,  # type: ignore[misc]
                       lambda _i, m, g=got: g.append(m))  # type: ignore[misc]
            for m in got:
                kind = AcknowledgeType.REJECT if m.value() == b"bad" else AcknowledgeType.RELEASE
                c.acknowledge(m, kind)
            c.commit_sync(30)
            assert {m.value() for m in got} == ({b"poison", b"bad"} if want == 2 else {b"poison"})
    finally:
        c.close()
    reader = Consumer({"bootstrap.servers": bs, "group.id": "dlq-reader",
                       "enable.auto.commit": False})
    reader.assign([TopicPartition(dlq, 0, 0)])
    try:
        msgs: list[Any] = []
        deadline = time.monotonic() + 30
        while not msgs and time.monotonic() < deadline:
            m = reader.poll(0.5)
            if m is not None and m.error() is None:
                msgs.append(m)
        assert [m.value() for m in msgs] == [b"poison"]
        headers = dict(msgs[0].headers())
        assert headers["kafkawire.dlq.topic"] == name.encode()
        assert headers["kafkawire.dlq.group"] == group.encode()
        assert headers["kafkawire.dlq.delivery.count"] == b"2"
        assert headers["kafkawire.dlq.offset"] == b"0"
    finally:
        reader.close()


def test_read_committed_share_group_skips_aborted_records(sbroker: BrokerProcess) -> None:
    """share.isolation.level=read_committed: records of an aborted transaction are archived,
    never delivered; committed and non-transactional ones are; nothing past the LSO."""
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    bs = sbroker.bootstrap
    name, group = topic(bs), "g-" + uuid.uuid4().hex[:6]
    admin = AdminClient({"bootstrap.servers": bs})
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.isolation.level", "read_committed",
                    incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([res]).values():
        f.result(30)
    c = consumer(bs, group, name)
    tp = Producer({"bootstrap.servers": bs, "transactional.id": "tx-" + group})
    try:
        joined(c, bs, group, name)
        tp.init_transactions(30)
        tp.begin_transaction()
        for v in (b"aborted-1", b"aborted-2"):
            tp.produce(name, value=v)
        tp.abort_transaction(30)
        produce(bs, name, [b"plain"])
        tp.begin_transaction()
        tp.produce(name, value=b"committed")
        tp.commit_transaction(30)
        tp.begin_transaction()
        tp.produce(name, value=b"open")  # never committed while we look: past the LSO
        tp.flush(30)
        got: list[bytes] = []
        poll_until([c], lambda: len(got) >= 2, 30, lambda _i, m: got.append(m.value()))
        poll_until([c], lambda: False, 2, lambda _i, m: got.append(m.value()))
        assert sorted(got) == [b"committed", b"plain"]
        tp.abort_transaction(30)
    finally:
        c.close()


def test_deleting_the_topic_deletes_share_state(sbroker: BrokerProcess) -> None:
    from protocol._generated.read_share_group_state_request import (
        ReadShareGroupStateRequest as Read,
    )

    bs = sbroker.bootstrap
    name, group = topic(bs), "g-" + uuid.uuid4().hex[:6]
    c = consumer(bs, group, name)
    try:
        joined(c, bs, group, name)
    finally:
        c.close()
    from protocol._generated.metadata_request import MetadataRequest

    admin = AdminClient({"bootstrap.servers": bs})
    rc = RawClient(bs)
    md = rc.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                                    allow_auto_topic_creation=False), 12)
    tid = md.topics[0].topic_id

    def start() -> int:
        r = rc.request(Read(group_id=group, topics=[Read.ReadStateData(
            topic_id=tid, partitions=[Read.PartitionData(partition=0, leader_epoch=-1)])]), 0)
        return int(r.results[0].partitions[0].start_offset)

    assert start() == 0
    admin.delete_topics([name])[name].result(30)
    deadline = time.monotonic() + 30
    while start() != -1 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert start() == -1


def test_delete_records_past_the_share_start_offset(sbroker: BrokerProcess) -> None:
    """Records deleted below the share-partition start offset (DeleteRecords, retention) are
    gone for the group: the start offset moves to the log start offset."""
    from confluent_kafka import TopicPartition

    bs = sbroker.bootstrap
    name, group = topic(bs), "g-" + uuid.uuid4().hex[:6]
    c = consumer(bs, group, name, **{"share.acknowledgement.mode": "explicit"})
    try:
        joined(c, bs, group, name)  # starts at 0 (latest on an empty topic)
    finally:
        c.close()  # nothing fetched before the records below are deleted
    produce(bs, name, [b"e%d" % i for i in range(10)], batches=10)
    admin = AdminClient({"bootstrap.servers": bs})
    admin.delete_records([TopicPartition(name, 0, 6)])[TopicPartition(name, 0, 6)].result(30)
    assert start_offset(bs, group, name) == 0
    c = consumer(bs, group, name, **{"share.acknowledgement.mode": "explicit"})
    try:
        got: list[Any] = []
        poll_until([c], lambda: len(got) >= 4, 30, lambda _i, m: got.append(m))
        assert [m.value() for m in got] == [b"e6", b"e7", b"e8", b"e9"]
        for m in got:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
        c.commit_sync(30)
        assert start_offset(bs, group, name) == 10
    finally:
        c.close()


def test_alter_share_group_offsets_bumps_the_state_epoch(sbroker: BrokerProcess) -> None:
    from protocol._generated.alter_share_group_offsets_request import (
        AlterShareGroupOffsetsRequest as A,
    )
    from protocol._generated.find_coordinator_request import FindCoordinatorRequest
    from protocol._generated.metadata_request import MetadataRequest
    from protocol._generated.read_share_group_state_request import (
        ReadShareGroupStateRequest as Read,
    )

    bs = sbroker.bootstrap
    name, group = topic(bs), "g-" + uuid.uuid4().hex[:6]
    produce(bs, name, [b"x"] * 5)
    rc = RawClient(bs)
    tid = rc.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                                     allow_auto_topic_creation=False), 12).topics[0].topic_id

    def alter(offset: int) -> int:
        deadline = time.monotonic() + 60
        while True:
            rc.request(FindCoordinatorRequest(key=group, key_type=0), 3)
            r = rc.request(A(group_id=group, topics=[A.AlterShareGroupOffsetsRequestTopic(
                topic_name=name, partitions=[A.AlterShareGroupOffsetsRequestPartition(
                    partition_index=0, start_offset=offset)])]), 0)
            code = r.error_code or r.responses[0].partitions[0].error_code
            if code not in (14, 15, 16) or time.monotonic() > deadline:
                return int(code)
            time.sleep(0.2)

    def state() -> tuple[int, int]:
        r = rc.request(Read(group_id=group, topics=[Read.ReadStateData(
            topic_id=tid, partitions=[Read.PartitionData(partition=0, leader_epoch=-1)])]), 0)
        p = r.results[0].partitions[0]
        return int(p.state_epoch), int(p.start_offset)

    assert alter(1) == 0 and state() == (0, 1)
    assert alter(3) == 0 and state() == (1, 3)
    assert start_offset(bs, group, name) == 3


def test_resubscribe_to_another_topic_drops_the_first(sbroker: BrokerProcess) -> None:
    """subscribe([a]), drain, subscribe([b]), produce to both: only b's records come, as with
    Kafka 4.3.1 (kafkawire kept a assigned until the next assignment computation, a heartbeat
    interval later, and delivered a's new records)."""
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
    )

    bs = sbroker.bootstrap
    a, b, group = topic(bs), topic(bs), "g-" + uuid.uuid4().hex[:6]
    res = ConfigResource(ConfigResource.Type.GROUP, group, incremental_configs=[ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.incremental_alter_configs([res]).values():
        f.result(30)
    produce(bs, a, [b"a-pre-%d" % i for i in range(3)])
    c = consumer(bs, group, a)
    try:
        got: list[Any] = []
        poll_until([c], lambda: len(got) >= 3, 60, lambda _i, m: got.append(m))
        assert sorted(m.value() for m in got) == [b"a-pre-0", b"a-pre-1", b"a-pre-2"]
        c.subscribe([b])
        produce(bs, a, [b"a-post-%d" % i for i in range(5)])
        produce(bs, b, [b"b-%d" % i for i in range(5)])
        got = []
        poll_until([c], lambda: len(got) >= 5, 60, lambda _i, m: got.append(m))
        poll_until([c], lambda: False, 3, lambda _i, m: got.append(m))  # nothing of a after
        assert sorted((m.topic(), m.value()) for m in got) == [
            (b, b"b-%d" % i) for i in range(5)]
    finally:
        c.close()
