"""Group APIs over the wire with raw requests: both encodings, bad input, limits, and the
group side of transactional offset commits (TxnOffsetCommit pending until a marker lands).

Bad input (unknown groups, stale generations, forged member ids, member metadata over the
limit) gets an error code; the broker keeps serving and the group is not stuck.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from conftest import RawClient
from group_helpers import GROUP_OVERRIDES, group_broker, ready_raw

from groups.config import MEMBER_METADATA_MAX_BYTES
from groups.consumer_protocol import encode_subscription
from kafkawire.broker import Broker
from kafkawire.config.broker_config import BrokerConfig
from kafkawire.tools.testing import BrokerProcess, free_port
from protocol._generated.heartbeat_request import HeartbeatRequest
from protocol._generated.join_group_request import JoinGroupRequest
from protocol._generated.offset_commit_request import OffsetCommitRequest
from protocol._generated.offset_fetch_request import OffsetFetchRequest
from protocol._generated.sync_group_request import SyncGroupRequest
from protocol._generated.txn_offset_commit_request import TxnOffsetCommitRequest
from protocol.errors import ErrorCode

OVERRIDES = {**GROUP_OVERRIDES, "group.max.size": "2", "offsets.topic.num.partitions": "3"}


@pytest.fixture(scope="module")
def wbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from group_broker(tmp_path_factory.mktemp("kww") / "data", **OVERRIDES)


@pytest.fixture
def wraw(wbroker: BrokerProcess) -> Iterator[RawClient]:
    c = ready_raw(wbroker.bootstrap, client_id="wire")
    try:
        yield c
    finally:
        c.close()


def create_topic(raw: RawClient, name: str, partitions: int) -> None:
    from protocol._generated.create_topics_request import CreateTopicsRequest

    t = CreateTopicsRequest.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1)
    r = raw.request(CreateTopicsRequest(topics=[t], timeout_ms=10000), 7)
    assert r.topics[0].error_code == 0


def join(raw: RawClient, group: str, version: int, member_id: str = "", metadata: bytes | None = None,
         instance: str | None = None) -> Any:
    meta = encode_subscription(["t"]) if metadata is None else metadata
    req = JoinGroupRequest(
        group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id=member_id,
        group_instance_id=instance, protocol_type="consumer",
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=meta)],
    )
    return raw.request(req, version)


@pytest.mark.parametrize("version", [0, 1, 3, 5, 6, 9])
def test_join_sync_every_encoding(wraw: RawClient, version: int) -> None:
    """Non-flexible (librdkafka) and flexible (Java, kafka-python) encodings; v0 uses the
    session timeout as rebalance timeout; v4+ needs the MEMBER_ID_REQUIRED round trip."""
    g = f"enc-{version}-{uuid.uuid4().hex[:6]}"
    r = join(wraw, g, version)
    if version >= 4:
        assert r.error_code == ErrorCode.MEMBER_ID_REQUIRED
        assert r.member_id.startswith("wire-")
        r = join(wraw, g, version, r.member_id)
    assert r.error_code == 0, r
    assert r.generation_id == 1 and r.leader == r.member_id and len(r.members) == 1
    sv = min(version, 5)
    s = wraw.request(SyncGroupRequest(
        group_id=g, generation_id=1, member_id=r.member_id,
        assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=r.member_id, assignment=b"abc")],
    ), sv)
    assert s.error_code == 0 and bytes(s.assignment) == b"abc"
    hb = wraw.request(HeartbeatRequest(group_id=g, generation_id=1, member_id=r.member_id), min(version, 4))
    assert hb.error_code == 0


def test_bad_input_gets_error_codes(wraw: RawClient) -> None:
    g = f"bad-{uuid.uuid4().hex[:6]}"
    huge = b"\x00" * (MEMBER_METADATA_MAX_BYTES + 1)
    assert join(wraw, g, 9, metadata=huge).error_code == ErrorCode.INVALID_REQUEST
    assert wraw.request(HeartbeatRequest(group_id=g, generation_id=1, member_id="forged"), 4).error_code \
        == ErrorCode.UNKNOWN_MEMBER_ID
    assert wraw.request(SyncGroupRequest(group_id=g, generation_id=1, member_id="forged"), 5).error_code \
        == ErrorCode.UNKNOWN_MEMBER_ID
    # a real member, then forged ids and stale generations against it
    r = join(wraw, g, 9)
    r = join(wraw, g, 9, r.member_id)
    assert r.error_code == 0
    assert join(wraw, g, 9, "forged-id").error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert wraw.request(SyncGroupRequest(group_id=g, generation_id=r.generation_id + 1, member_id=r.member_id), 5
                        ).error_code == ErrorCode.ILLEGAL_GENERATION
    # the group is not stuck: the leader's sync still completes it
    s = wraw.request(SyncGroupRequest(group_id=g, generation_id=r.generation_id, member_id=r.member_id), 5)
    assert s.error_code == 0
    # commit with a generation to an unknown group; metadata too large
    create_topic(wraw, g, 1)

    def commit(group: str, gen: int, member: str, meta: str = "") -> int:
        req = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=gen, member_id=member, topics=[
            OffsetCommitRequest.OffsetCommitRequestTopic(name=g, partitions=[
                OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=1,
                                                                 committed_metadata=meta)])])
        return int(wraw.request(req, 9).topics[0].partitions[0].error_code)

    assert commit(g + "-unknown", 3, "m") == ErrorCode.ILLEGAL_GENERATION
    assert commit(g, r.generation_id, r.member_id, "x" * 5000) == ErrorCode.OFFSET_METADATA_TOO_LARGE
    assert commit(g, r.generation_id, r.member_id, "ok") == ErrorCode.NONE


def test_group_max_size(wraw: RawClient) -> None:
    g = f"max-{uuid.uuid4().hex[:6]}"
    ids = []
    for _ in range(2):
        ids.append(join(wraw, g, 9).member_id)
    third = join(wraw, g, 9)
    assert third.error_code == ErrorCode.GROUP_MAX_SIZE_REACHED


def test_static_member_fenced(wraw: RawClient) -> None:
    g = f"fence-{uuid.uuid4().hex[:6]}"
    r = join(wraw, g, 9, instance="i1")
    assert r.error_code == 0 and r.member_id.startswith("i1-")
    wraw.request(SyncGroupRequest(group_id=g, generation_id=r.generation_id, member_id=r.member_id), 5)
    r2 = join(wraw, g, 9, instance="i1")  # a new incarnation replaces the old one
    assert r2.error_code == 0 and r2.member_id != r.member_id
    assert r2.generation_id == r.generation_id  # no rebalance
    hb = wraw.request(HeartbeatRequest(group_id=g, generation_id=r.generation_id, member_id=r.member_id,
                                       group_instance_id="i1"), 4)
    assert hb.error_code == ErrorCode.FENCED_INSTANCE_ID


class InProcess:
    """A broker in this process (on a thread) whose runtime the test can call into."""

    def __init__(self, data: Path) -> None:
        self.port = free_port()
        cfg = BrokerConfig.from_dict({
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}", "log.dir": str(data), **OVERRIDES,
            # the TxnOffsetCommits below carry made-up producer ids, without a transaction
            # (the transaction coordinator's checks: tests/test_exactly_once.py)
            "transaction.partition.verification.enable": "false",
        })
        self.broker = Broker(cfg)
        self.ready = threading.Event()
        self.token: Any = None
        self.cancel: Any = None
        self.thread = threading.Thread(target=lambda: trio.run(self._main), daemon=True)

    async def _main(self) -> None:
        self.token = trio.lowlevel.current_trio_token()
        async with trio.open_nursery() as n:
            self.cancel = n.cancel_scope
            await n.start(self.broker.run)
            self.ready.set()

    def __enter__(self) -> InProcess:
        self.thread.start()
        assert self.ready.wait(30)
        return self

    def __exit__(self, *exc: object) -> None:
        self.token.run_sync_soon(self.cancel.cancel)
        self.thread.join(30)

    def call(self, fn: Callable[[], Any]) -> Any:
        return trio.from_thread.run_sync(fn, trio_token=self.token)


def test_txn_offset_commit_pending_until_marker(tmp_path: Path) -> None:
    with InProcess(tmp_path / "data") as ip:
        raw = ready_raw(f"127.0.0.1:{ip.port}", client_id="txn")
        try:
            topic, group = "txo", "txo-group"
            create_topic(raw, topic, 2)

            def fetch(stable: bool) -> list[tuple[int, int, int]]:
                grp = OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, topics=[
                    OffsetFetchRequest.OffsetFetchRequestTopics(name=topic, partition_indexes=[0, 1])])
                r = raw.request(OffsetFetchRequest(groups=[grp], require_stable=stable), 8)
                return [(p.partition_index, p.committed_offset, p.error_code)
                        for p in r.groups[0].topics[0].partitions]

            def txn_commit(pid: int, offset: int, version: int = 3) -> int:
                req = TxnOffsetCommitRequest(
                    transactional_id="tx", group_id=group, producer_id=pid, producer_epoch=0,
                    topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=topic, partitions=[
                        TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                            partition_index=0, committed_offset=offset)])])
                return int(raw.request(req, version).topics[0].partitions[0].error_code)

            assert txn_commit(1000, 5) == 0
            assert fetch(False) == [(0, -1, 0), (1, -1, 0)]
            assert fetch(True) == [(0, -1, ErrorCode.UNSTABLE_OFFSET_COMMIT), (1, -1, 0)]
            rt = ip.broker.group_runtime
            p = rt.partition_for(group)
            ip.call(lambda: rt.append_marker(p, 1000, 0, True, rt.coordinator_epoch(p)))
            assert fetch(True) == [(0, 5, 0), (1, -1, 0)]
            # aborted: dropped
            assert txn_commit(1001, 9, version=0) == 0
            ip.call(lambda: rt.append_marker(p, 1001, 0, False, rt.coordinator_epoch(p)))
            assert fetch(True) == [(0, 5, 0), (1, -1, 0)]
            # pending at restart: replayed as pending, then committed by a later marker
            # (v4: v5 would add the partition to a real transaction, transaction version 2)
            assert txn_commit(1002, 11, version=4) == 0
        finally:
            raw.close()
    with InProcess(tmp_path / "data") as ip:
        raw = RawClient(f"127.0.0.1:{ip.port}", client_id="txn")
        try:
            deadline = time.monotonic() + 20
            while True:
                grp = OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, topics=[
                    OffsetFetchRequest.OffsetFetchRequestTopics(name=topic, partition_indexes=[0])])
                r = raw.request(OffsetFetchRequest(groups=[grp], require_stable=True), 8)
                if r.groups[0].error_code == 0:
                    break
                assert r.groups[0].error_code in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR)
                assert time.monotonic() < deadline
                time.sleep(0.05)
            assert r.groups[0].topics[0].partitions[0].error_code == ErrorCode.UNSTABLE_OFFSET_COMMIT
            rt = ip.broker.group_runtime
            p = rt.partition_for(group)
            ip.call(lambda: rt.append_marker(p, 1002, 0, True, rt.coordinator_epoch(p)))
            r = raw.request(OffsetFetchRequest(groups=[grp], require_stable=True), 8)
            assert r.groups[0].topics[0].partitions[0].committed_offset == 11
        finally:
            raw.close()


def test_produce_to_internal_topic_refused(wraw: RawClient) -> None:
    from protocol._generated.produce_request import ProduceRequest
    from protocol.records import SimpleRecord, build_batch

    batch = build_batch([SimpleRecord(b"\x00\x01k", b"\x00\x03v")])
    req = ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
        name="__consumer_offsets", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)])])
    r = wraw.request(req, 9)
    assert r.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
