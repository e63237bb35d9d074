"""KIP-227 fetch sessions on the wire (a real broker process, this repo's codecs): session
creation, incremental answers carrying only partitions with news, forgotten partitions, and the
session errors Kafka answers (top-level error, session id 0, no partitions)."""

from __future__ import annotations

import time
import uuid
from typing import Any

from kafkawire.tools.testing import BrokerProcess
from protocol._generated.create_topics_request import CreateTopicsRequest
from protocol._generated.fetch_request import FetchRequest
from protocol._generated.produce_request import ProduceRequest
from protocol.errors import ErrorCode
from protocol.records import SimpleRecord, build_batch
from tests.conftest import RawClient

FP = FetchRequest.FetchPartition


def create(raw: RawClient, partitions: int) -> tuple[str, uuid.UUID]:
    name = f"fs-{uuid.uuid4().hex[:8]}"
    r = raw.request(CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1)], timeout_ms=10000), 7)
    assert r.topics[0].error_code == 0
    return name, r.topics[0].topic_id


def produce(raw: RawClient, topic: str, partition: int, n: int = 1) -> None:
    batch = build_batch([SimpleRecord(value=b"v%d" % i, timestamp=int(time.time() * 1000))
                         for i in range(n)])
    r = raw.request(ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=partition, records=batch)])]), 9)
    assert r.responses[0].partition_responses[0].error_code == 0


def fetch(raw: RawClient, topic: tuple[str, uuid.UUID], session_id: int, epoch: int,
          parts: dict[int, int], *, version: int = 16, forget: list[int] | None = None,
          max_wait_ms: int = 0) -> Any:
    name, tid = topic
    topics = [FetchRequest.FetchTopic(topic=name, topic_id=tid, partitions=[
        FP(partition=p, fetch_offset=o, partition_max_bytes=1 << 20) for p, o in parts.items()])
    ] if parts else []
    forgotten = [FetchRequest.ForgottenTopic(topic=name, topic_id=tid, partitions=forget)
                 ] if forget else []
    return raw.request(FetchRequest(
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=50 << 20,
        isolation_level=0, session_id=session_id, session_epoch=epoch, topics=topics,
        forgotten_topics_data=forgotten, rack_id=""), version)


def answered(resp: Any) -> dict[int, tuple[int, int, int]]:
    """partition -> (error, high watermark, record bytes)."""
    return {p.partition_index: (p.error_code, p.high_watermark, len(p.records or b""))
            for t in resp.responses for p in t.partitions}


def test_session_lifecycle(raw: RawClient) -> None:
    topic = create(raw, 3)
    produce(raw, topic[0], 0, 2)
    full = fetch(raw, topic, 0, 0, {0: 0, 1: 0, 2: 0})
    sid = full.session_id
    assert full.error_code == 0 and sid > 0
    got = answered(full)
    assert set(got) == {0, 1, 2} and got[0][1] == 2 and got[0][2] > 0
    # nothing new (partition 0 moves to its end): an empty answer in the same session
    r = fetch(raw, topic, sid, 1, {0: 2})
    assert (r.error_code, r.session_id, r.responses) == (0, sid, [])
    # new data in partition 1 only: only partition 1 is answered
    produce(raw, topic[0], 1, 3)
    r = fetch(raw, topic, sid, 2, {})
    assert r.session_id == sid
    got = answered(r)
    assert list(got) == [1] and got[1][1] == 3 and got[1][2] > 0
    # the high watermark it reported is remembered: the next fetch is empty again
    r = fetch(raw, topic, sid, 3, {1: 3})
    assert r.responses == []
    # a long poll of an incremental fetch is woken by new data in a session partition
    produce(raw, topic[0], 2, 1)
    r = fetch(raw, topic, sid, 4, {}, max_wait_ms=5000)
    assert list(answered(r)) == [2]
    # FINAL (-1) closes it: sessionless answer; the id is gone afterwards
    r = fetch(raw, topic, sid, -1, {0: 0})
    assert r.session_id == 0 and list(answered(r)) == [0]
    r = fetch(raw, topic, sid, 5, {})
    assert (r.error_code, r.session_id, r.responses) == (
        ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0, [])


def test_forget_and_add(raw: RawClient) -> None:
    topic = create(raw, 3)
    sid = fetch(raw, topic, 0, 0, {0: 0, 1: 0}).session_id
    assert sid > 0
    # add partition 2 (its first answer is sent: the session knew no high watermark for it),
    # and forget partition 0 (by topic id, v13+)
    r = fetch(raw, topic, sid, 1, {2: 0}, forget=[0])
    assert list(answered(r)) == [2]
    produce(raw, topic[0], 0, 1)
    produce(raw, topic[0], 1, 1)
    r = fetch(raw, topic, sid, 2, {})
    assert list(answered(r)) == [1]  # partition 0 is no longer in the session
    # forgetting every partition closes the session (a sessionless answer, session id 0)
    r = fetch(raw, topic, sid, 3, {}, forget=[1, 2])
    assert (r.error_code, r.session_id) == (0, 0)
    assert fetch(raw, topic, sid, 4, {}).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_session_errors(raw: RawClient) -> None:
    topic = create(raw, 1)
    sid = fetch(raw, topic, 0, 0, {0: 0}).session_id
    assert sid > 0
    r = fetch(raw, topic, sid, 7, {})
    assert (r.error_code, r.session_id, r.responses) == (
        ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0, [])
    # a session made with topic ids (v13+) refuses a v12 incremental fetch, and vice versa
    r = fetch(raw, topic, sid, 1, {}, version=12)
    assert (r.error_code, r.session_id, r.responses) == (
        ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR, 0, [])
    sid12 = fetch(raw, topic, 0, 0, {0: 0}, version=12).session_id
    assert sid12 > 0
    assert fetch(raw, topic, sid12, 1, {}, version=13).error_code == \
        ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    assert fetch(raw, topic, sid12, 1, {}, version=12).error_code == 0  # still there
    # the errors did not move the sessions on: the expected epochs still work
    assert fetch(raw, topic, sid, 1, {}).error_code == 0
    r = fetch(raw, topic, sid ^ 0x5A5A5A5A or 1, 1, {})
    assert (r.error_code, r.session_id) == (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0)
    # a full fetch (epoch 0) naming an existing session closes it and starts another
    r = fetch(raw, topic, sid, 0, {0: 0})
    assert r.session_id not in (0, sid)
    assert fetch(raw, topic, sid, 2, {}).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_unknown_topic_id_in_session(raw: RawClient) -> None:
    topic = create(raw, 1)
    ghost = ("", uuid.uuid4())
    sid = fetch(raw, ghost, 0, 0, {0: 0}).session_id
    assert sid > 0  # Kafka caches partitions of unknown ids too
    r = fetch(raw, ghost, sid, 1, {})
    assert answered(r) == {0: (ErrorCode.UNKNOWN_TOPIC_ID, -1, 0)}  # errors are always sent
    r = fetch(raw, topic, sid, 2, {0: 0})  # add a known topic's partition
    got = {(t.topic_id, p.partition_index): p.error_code
           for t in r.responses for p in t.partitions}
    assert got == {(ghost[1], 0): ErrorCode.UNKNOWN_TOPIC_ID, (topic[1], 0): 0}


def test_no_session_when_cache_is_full(tmp_path: Any) -> None:
    """``max.incremental.fetch.session.cache.slots`` below the 8 shards: no room at all, so every
    full fetch is answered without a session (as Kafka's broker, which gives each shard
    slots / 8)."""
    with BrokerProcess(tmp_path / "data", overrides={
            "max.incremental.fetch.session.cache.slots": "7"}).start() as bp:
        raw = RawClient(bp.bootstrap)
        try:
            topic = create(raw, 1)
            r = fetch(raw, topic, 0, 0, {0: 0})
            assert (r.error_code, r.session_id) == (0, 0)
            assert list(answered(r)) == [0]
        finally:
            raw.close()


def test_deleted_topic_in_session(raw: RawClient) -> None:
    from protocol._generated.delete_topics_request import DeleteTopicsRequest

    topic = create(raw, 1)
    keep = create(raw, 1)
    sid = fetch(raw, topic, 0, 0, {0: 0}).session_id
    assert sid > 0
    assert fetch(raw, keep, sid, 1, {0: 0}).error_code == 0  # a second topic in the session
    r = raw.request(DeleteTopicsRequest(topic_names=[topic[0]], timeout_ms=10000), 5)
    assert r.responses[0].error_code == 0
    deadline = time.monotonic() + 60
    while True:  # once the deletion is applied, the session's partition answers UNKNOWN_TOPIC_ID
        r = fetch(raw, keep, sid, 2, {})
        got = {(t.topic_id, p.partition_index): p.error_code
               for t in r.responses for p in t.partitions}
        if got == {(topic[1], 0): ErrorCode.UNKNOWN_TOPIC_ID}:
            break
        assert time.monotonic() < deadline, got
        sid = fetch(raw, topic, 0, 0, {0: 0}).session_id  # a fresh session each try
        fetch(raw, keep, sid, 1, {0: 0})
        time.sleep(0.2)


def test_partitions_that_returned_data_go_to_the_back(raw: RawClient) -> None:
    """Round-robin within max_bytes: with room for one batch per response (KIP-74 returns the
    first one whole), the partitions of a session take turns, as Kafka rotates them."""
    topic = create(raw, 3)
    for p in range(3):
        produce(raw, topic[0], p, 3)

    def served(r: Any) -> list[int]:
        return [p for p, (_e, _hw, size) in answered(r).items() if size]

    def small(session_id: int, epoch: int, parts: dict[int, int]) -> Any:
        name, tid = topic
        return raw.request(FetchRequest(
            replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1, isolation_level=0,
            session_id=session_id, session_epoch=epoch, topics=[FetchRequest.FetchTopic(
                topic=name, topic_id=tid, partitions=[
                    FP(partition=p, fetch_offset=o, partition_max_bytes=1 << 20)
                    for p, o in parts.items()])] if parts else [],
            forgotten_topics_data=[], rack_id=""), 16)

    full = small(0, 0, {0: 0, 1: 0, 2: 0})
    assert served(full) == [0]
    sid = full.session_id
    # nobody moves its offset: each fetch serves the partition at the front, which then goes
    # to the back of the session's order
    assert [served(small(sid, e, {})) for e in (1, 2, 3, 4)] == [[0], [1], [2], [0]]


def test_throttled_fetch_sessions(broker: BrokerProcess, raw: RawClient) -> None:
    """A consumer over its consumer_byte_rate (Kafka's FetchContext.getThrottledResponse): a
    throttled full fetch (epoch 0) is answered with session id 0, no partitions and
    throttle_time_ms, and creates no session; a throttled incremental fetch keeps its
    session, whose partitions are answered at the next fetch."""
    from protocol._generated.alter_client_quotas_request import AlterClientQuotasRequest as Q

    client = f"slow-{uuid.uuid4().hex[:6]}"
    r = raw.request(Q(entries=[Q.EntryData(
        entity=[Q.EntityData(entity_type="client-id", entity_name=client)],
        ops=[Q.OpData(key="consumer_byte_rate", value=100.0)])]), 1)
    assert r.entries[0].error_code == 0
    topic = create(raw, 1)
    produce(raw, topic[0], 0, 50)
    slow = [RawClient(broker.bootstrap, client_id=client) for _ in range(2)]
    try:
        deadline = time.monotonic() + 30  # until the quota reached the broker's image
        while True:
            r = fetch(slow[0], topic, 0, 0, {0: 0})
            if r.throttle_time_ms > 0 or time.monotonic() > deadline:
                break
            time.sleep(0.2)  # not throttled yet (and its session stays): ask again
        assert r.throttle_time_ms > 0
        assert (r.error_code, r.session_id, r.responses) == (0, 0, [])
        # a session of an unthrottled client, then an incremental fetch of it by the
        # throttled one (on its second connection: the first is muted for the throttle time)
        full = fetch(raw, topic, 0, 0, {0: 50})
        sid = full.session_id
        assert sid > 0
        r = fetch(slow[1], topic, sid, 1, {0: 0})
        assert r.throttle_time_ms > 0
        assert (r.error_code, r.session_id, r.responses) == (0, sid, [])
        r = fetch(raw, topic, sid, 2, {})
        assert r.session_id == sid and answered(r)[0][2] > 0  # the session read from 0
    finally:
        for c in slow:
            c.close()
