"""Transactions on the wire (raw Kafka protocol with this repo's codecs, real broker process).

Pitfalls pinned here (../shared/notes/pitfalls.md item 4 and the public reports): the LSO is the
first offset of the oldest open transaction, not one past it (redpanda PR #3036);
AbortedTransactions is listed only for read_committed, while read_uncommitted still returns the
aborted data (redpanda#6630); markers are control batches in Kafka's exact format; ListOffsets
latest at read_committed is the LSO.
"""

from __future__ import annotations

import struct
import time
import uuid
from typing import Any

from protocol._generated.add_offsets_to_txn_request import AddOffsetsToTxnRequest
from protocol._generated.add_partitions_to_txn_request import AddPartitionsToTxnRequest
from protocol._generated.describe_producers_request import DescribeProducersRequest
from protocol._generated.describe_transactions_request import DescribeTransactionsRequest
from protocol._generated.end_txn_request import EndTxnRequest
from protocol._generated.fetch_request import FetchRequest
from protocol._generated.find_coordinator_request import FindCoordinatorRequest
from protocol._generated.init_producer_id_request import InitProducerIdRequest
from protocol._generated.list_offsets_request import ListOffsetsRequest
from protocol._generated.list_transactions_request import ListTransactionsRequest
from protocol._generated.produce_request import ProduceRequest
from protocol._generated.write_txn_markers_request import WriteTxnMarkersRequest
from protocol.errors import ErrorCode
from protocol.records import SimpleRecord, build_batch, decode_batch_records, iter_headers
from tests.conftest import RawClient
from tests.test_wire import new_topic, produce

READ_UNCOMMITTED, READ_COMMITTED = 0, 1


def fetch(raw: RawClient, topic: str, offset: int, isolation: int, version: int = 12) -> Any:
    req = FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
        isolation_level=isolation, session_id=0, session_epoch=-1,
        topics=[FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
            partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])],
    )
    return raw.request(req, version).responses[0].partitions[0]


def latest(raw: RawClient, topic: str, isolation: int) -> int:
    req = ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
            ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])])
    p = raw.request(req, 7).topics[0].partitions[0]
    assert p.error_code == 0
    return int(p.offset)


def idempotent_pid(raw: RawClient) -> int:
    r = raw.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1), 4)
    assert r.error_code == 0
    return int(r.producer_id)


def txn_batch(pid: int, seq: int, values: list[str], epoch: int = 0) -> bytes:
    now = int(time.time() * 1000)
    return build_batch([SimpleRecord(value=v.encode(), timestamp=now) for v in values],
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                       is_transactional=True)


def write_markers(raw: RawClient, topic: str, pid: int, commit: bool, *, epoch: int = 0,
                  coordinator_epoch: int = 0, partitions: tuple[int, ...] = (0,),
                  version: int = 1) -> list[int]:
    req = WriteTxnMarkersRequest(markers=[WriteTxnMarkersRequest.WritableTxnMarker(
        producer_id=pid, producer_epoch=epoch, transaction_result=commit,
        coordinator_epoch=coordinator_epoch, transaction_version=1,
        topics=[WriteTxnMarkersRequest.WritableTxnMarkerTopic(
            name=topic, partition_indexes=list(partitions))])])
    resp = raw.request(req, version)
    (m,) = resp.markers
    assert m.producer_id == pid
    return [p.error_code for t in m.topics for p in t.partitions]


def batches(part: Any) -> list[tuple[int, int, int, list[Any]]]:
    """(base offset, attributes, producer id, record values or control (type, epoch))."""
    data = bytes(part.records) if part.records else b""
    out = []
    for _pos, h in iter_headers(data):
        _, recs = decode_batch_records(data[_pos:_pos + h.size])
        if h.is_control:
            vals = [struct.unpack(">hh", r.key)[1:] + struct.unpack(">hi", r.value)[1:] for r in recs]
        else:
            vals = [r.value.decode() for r in recs]
        out.append((h.base_offset, h.attributes, h.producer_id, vals))
    return out


def test_lso_aborted_ranges_and_isolation(raw: RawClient) -> None:
    topic = new_topic(raw, "txw")
    pid = idempotent_pid(raw)
    other = idempotent_pid(raw)
    assert produce(raw, topic, txn_batch(pid, 0, ["c0", "c1", "c2"])).error_code == 0
    assert write_markers(raw, topic, pid, True, coordinator_epoch=3) == [0]  # COMMIT at 3
    assert produce(raw, topic, txn_batch(pid, 3, ["a0", "a1"])).error_code == 0  # 4-5
    assert write_markers(raw, topic, pid, False, coordinator_epoch=3) == [0]  # ABORT at 6
    assert produce(raw, topic, txn_batch(other, 0, ["o0"])).error_code == 0  # 7, left open

    # read_committed stops AT the open transaction's first offset (7), not one past it
    for v in (4, 7, 11, 12):
        p = fetch(raw, topic, 0, READ_COMMITTED, v)
        assert (p.error_code, p.high_watermark, p.last_stable_offset) == (0, 8, 7)
        assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(pid, 4)]
        got = batches(p)
        assert [(b[0], b[1], b[3]) for b in got] == [
            (0, 0x10, ["c0", "c1", "c2"]), (3, 0x30, [(1, 3)]),
            (4, 0x10, ["a0", "a1"]), (6, 0x30, [(0, 3)]),
        ]
    # read_uncommitted: aborted AND open data, and AbortedTransactions is null
    p = fetch(raw, topic, 0, READ_UNCOMMITTED)
    assert p.aborted_transactions is None and p.last_stable_offset == 7
    assert [b[3] for b in batches(p)][-1] == ["o0"] and len(batches(p)) == 5
    assert latest(raw, topic, READ_COMMITTED) == 7
    assert latest(raw, topic, READ_UNCOMMITTED) == 8
    # a fetch at the LSO returns nothing and lists nothing
    p = fetch(raw, topic, 7, READ_COMMITTED)
    assert not p.records and p.aborted_transactions == []
    # past the aborted range: not listed any more
    p = fetch(raw, topic, 7, READ_UNCOMMITTED)
    assert p.aborted_transactions is None

    assert write_markers(raw, topic, other, True) == [0]  # COMMIT at 8
    p = fetch(raw, topic, 0, READ_COMMITTED)
    assert (p.high_watermark, p.last_stable_offset) == (9, 9)
    assert latest(raw, topic, READ_COMMITTED) == 9
    assert batches(p)[-1][:2] == (8, 0x30)


def test_marker_batch_format(raw: RawClient) -> None:
    topic = new_topic(raw, "txf")
    pid = idempotent_pid(raw)
    produce(raw, topic, txn_batch(pid, 0, ["x"]))
    before = int(time.time() * 1000)
    assert write_markers(raw, topic, pid, False, coordinator_epoch=7) == [0]
    p = fetch(raw, topic, 1, READ_UNCOMMITTED)
    data = bytes(p.records)
    (pos, h), = iter_headers(data)
    assert (h.base_offset, h.records_count, h.last_offset_delta) == (1, 1, 0)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (pid, 0, -1)
    assert h.attributes == 0x30  # transactional + control, no compression, CreateTime
    assert before - 5000 <= h.base_timestamp == h.max_timestamp <= int(time.time() * 1000) + 5000
    _, (rec,) = decode_batch_records(data)
    assert rec.key == b"\x00\x00\x00\x00"  # version 0, ABORT
    assert rec.value == b"\x00\x00\x00\x00\x00\x07"  # version 0, coordinator epoch 7
    assert rec.offset == 1 and rec.headers == []


def test_write_txn_markers_errors(raw: RawClient) -> None:
    topic = new_topic(raw, "txe")
    pid = idempotent_pid(raw)
    produce(raw, topic, txn_batch(pid, 0, ["x"], epoch=2))
    assert write_markers(raw, f"nope-{uuid.uuid4().hex[:6]}", pid, True) == [
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert write_markers(raw, topic, pid, True, partitions=(5,)) == [
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert write_markers(raw, topic, pid, True, epoch=1) == [ErrorCode.INVALID_PRODUCER_EPOCH]
    assert write_markers(raw, topic, pid, False, epoch=2, coordinator_epoch=5, version=2) == [0]
    assert write_markers(raw, topic, pid, False, epoch=2, coordinator_epoch=4) == [
        ErrorCode.TRANSACTION_COORDINATOR_FENCED]
    # a marker for a producer with no open transaction is still written (Kafka does too)
    assert write_markers(raw, topic, pid, True, epoch=2, coordinator_epoch=5) == [0]
    assert fetch(raw, topic, 0, READ_COMMITTED).high_watermark == 3


def test_transaction_version_2_markers_must_bump_the_epoch(raw: RawClient) -> None:
    """WriteTxnMarkers v2 names the transaction version (KIP-1228): a version-2 marker must
    carry an epoch newer than the open transaction's (the coordinator bumps it for the marker),
    else INVALID_PRODUCER_EPOCH; the same epoch again once nothing is open is a retry and is
    written (KAFKA-19999). Version 1 keeps "not older". The same calls on Kafka 4.3.1 answer
    47, 0, 0, 0 with LSO 0 then 4 and the abort listed at 0."""
    topic = new_topic(raw, "txm")
    pid = idempotent_pid(raw)

    def markers(epoch: int, tv: int, commit: bool = True) -> list[int]:
        req = WriteTxnMarkersRequest(markers=[WriteTxnMarkersRequest.WritableTxnMarker(
            producer_id=pid, producer_epoch=epoch, transaction_result=commit,
            coordinator_epoch=0, transaction_version=tv,
            topics=[WriteTxnMarkersRequest.WritableTxnMarkerTopic(
                name=topic, partition_indexes=[0])])])
        return [p.error_code for m in raw.request(req, 2).markers for t in m.topics
                for p in t.partitions]

    assert produce(raw, topic, txn_batch(pid, 0, ["a"], epoch=3)).error_code == 0
    assert markers(3, 2) == [ErrorCode.INVALID_PRODUCER_EPOCH]  # not newer: refused
    assert fetch(raw, topic, 0, READ_COMMITTED).last_stable_offset == 0  # still open
    assert markers(4, 2, commit=False) == [0]  # epoch + 1: closes it
    assert markers(4, 2, commit=False) == [0]  # a retry of it: written again, nothing to close
    assert markers(4, 1) == [0]  # version 1: the same epoch is fine
    assert markers(3, 2) == [ErrorCode.INVALID_PRODUCER_EPOCH]  # older: refused anyway
    p = fetch(raw, topic, 0, READ_COMMITTED)
    assert p.last_stable_offset == 4
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(pid, 0)]


def test_describe_producers(raw: RawClient) -> None:
    topic = new_topic(raw, "txd")
    pid = idempotent_pid(raw)
    produce(raw, topic, txn_batch(pid, 0, ["a", "b"]))
    produce(raw, topic, txn_batch(pid, 2, ["c"]))

    def describe(partitions: list[int]) -> Any:
        req = DescribeProducersRequest(topics=[DescribeProducersRequest.TopicRequest(
            name=topic, partition_indexes=partitions)])
        (t,) = raw.request(req, 0).topics
        assert t.name == topic
        return t.partitions

    p0, p9 = describe([0, 9])
    assert p9.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert p0.error_code == 0 and p0.error_message is None
    (s,) = p0.active_producers
    assert (s.producer_id, s.producer_epoch, s.last_sequence) == (pid, 0, 2)
    assert s.current_txn_start_offset == 0 and s.coordinator_epoch == -1
    assert s.last_timestamp > 0
    write_markers(raw, topic, pid, True, coordinator_epoch=2)
    (s,) = describe([0])[0].active_producers
    assert (s.current_txn_start_offset, s.coordinator_epoch, s.last_sequence) == (-1, 2, 2)


# ---------------------------------------------------------------------------------------------
# the coordinator APIs, raw


APT = AddPartitionsToTxnRequest


def coordinator_ready(raw: RawClient, tid: str) -> None:
    """FindCoordinator (key type 1) until the transaction coordinator answers (the first call
    creates __transaction_state), then until its partition is loaded."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        r = raw.request(FindCoordinatorRequest(key=tid, key_type=1), 3)
        if r.error_code == 0:
            d = raw.request(DescribeTransactionsRequest(transactional_ids=[tid]), 0)
            if d.transaction_states[0].error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                return
        time.sleep(0.1)
    raise AssertionError("transaction coordinator not available")


def init_txn(raw: RawClient, tid: str, version: int = 4, timeout_ms: int = 60000,
             pid: int = -1, epoch: int = -1) -> Any:
    while True:
        r = raw.request(InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=timeout_ms,
                                              producer_id=pid, producer_epoch=epoch), version)
        if r.error_code != ErrorCode.CONCURRENT_TRANSACTIONS:
            return r
        time.sleep(0.05)


def add_partitions(raw: RawClient, tid: str, pid: int, epoch: int, topics: dict[str, list[int]],
                   version: int = 3) -> dict[tuple[str, int], int]:
    req = APT(v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
              v3_and_below_producer_epoch=epoch,
              v3_and_below_topics=[APT.AddPartitionsToTxnTopic(name=t, partitions=ps)
                                   for t, ps in topics.items()])
    r = raw.request(req, version)
    return {(t.name, p.partition_index): p.partition_error_code
            for t in r.results_by_topic_v3_and_below for p in t.results_by_partition}


def end_txn(raw: RawClient, tid: str, pid: int, epoch: int, commit: bool, version: int = 3) -> Any:
    return raw.request(EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                                     committed=commit), version)


def produce_txn(raw: RawClient, tid: str | None, topic: str, batch: bytes, version: int = 9) -> Any:
    req = ProduceRequest(transactional_id=tid, acks=-1, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=batch)])])
    return raw.request(req, version).responses[0].partition_responses[0]


def wait_lso(raw: RawClient, topic: str, lso: int) -> Any:
    deadline = time.monotonic() + 10
    while True:
        p = fetch(raw, topic, 0, READ_COMMITTED)
        if p.last_stable_offset == lso or time.monotonic() > deadline:
            assert p.last_stable_offset == lso
            return p
        time.sleep(0.05)


def test_full_transaction_on_the_wire(raw: RawClient) -> None:
    topic = new_topic(raw, "txc")
    tid = f"raw-{uuid.uuid4().hex[:6]}"
    coordinator_ready(raw, tid)
    r = init_txn(raw, tid)
    assert (r.error_code, r.producer_epoch) == (0, 0)
    pid = r.producer_id
    # produce before AddPartitionsToTxn: refused (KIP-890 part 1 verification), by version
    b0 = txn_batch(pid, 0, ["x"])
    assert produce_txn(raw, tid, topic, b0, 9).error_code == ErrorCode.INVALID_TXN_STATE
    p = produce_txn(raw, tid, topic, b0, 11)
    assert (p.error_code, p.log_start_offset) == (ErrorCode.TRANSACTION_ABORTABLE, -1)
    # a transactional id the coordinator does not know
    assert produce_txn(raw, tid + "-x", topic, b0).error_code == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert add_partitions(raw, tid, pid, 0, {topic: [0]}) == {(topic, 0): 0}
    assert produce_txn(raw, tid, topic, txn_batch(pid, 0, ["a", "b"])).error_code == 0
    assert produce_txn(raw, tid, topic, txn_batch(pid, 2, ["c"])).error_code == 0
    d = raw.request(DescribeTransactionsRequest(transactional_ids=[tid]), 0).transaction_states[0]
    assert (d.transaction_state, d.producer_id, d.producer_epoch) == ("Ongoing", pid, 0)
    assert [(t.topic, t.partitions) for t in d.topics] == [(topic, [0])]
    assert end_txn(raw, tid, pid, 0, True).error_code == 0
    p = wait_lso(raw, topic, 4)
    assert [b[3] for b in batches(p)] == [["a", "b"], ["c"], [(1, 0)]]
    # retried commit after completion: NONE; abort now: INVALID_TXN_STATE
    deadline = time.monotonic() + 10
    while end_txn(raw, tid, pid, 0, True).error_code == ErrorCode.CONCURRENT_TRANSACTIONS:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert end_txn(raw, tid, pid, 0, True).error_code == 0
    assert end_txn(raw, tid, pid, 0, False).error_code == ErrorCode.INVALID_TXN_STATE
    # second transaction, aborted: listed as aborted from its first offset (5)
    assert add_partitions(raw, tid, pid, 0, {topic: [0]}) == {(topic, 0): 0}
    assert produce_txn(raw, tid, topic, txn_batch(pid, 3, ["d"])).error_code == 0
    assert end_txn(raw, tid, pid, 0, False).error_code == 0
    p = wait_lso(raw, topic, 6)
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(pid, 4)]


def test_coordinator_errors_by_version(raw: RawClient) -> None:
    topic = new_topic(raw, "txv")
    tid = f"rawv-{uuid.uuid4().hex[:6]}"
    coordinator_ready(raw, tid)
    pid = init_txn(raw, tid).producer_id
    assert init_txn(raw, tid).producer_epoch == 1  # a second init bumps the epoch
    # the old epoch is fenced: PRODUCER_FENCED from v2 (KIP-588), INVALID_PRODUCER_EPOCH before
    assert add_partitions(raw, tid, pid, 0, {topic: [0]}, 1) == {(topic, 0): ErrorCode.INVALID_PRODUCER_EPOCH}
    assert add_partitions(raw, tid, pid, 0, {topic: [0]}, 2) == {(topic, 0): ErrorCode.PRODUCER_FENCED}
    assert end_txn(raw, tid, pid, 0, True, 1).error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert end_txn(raw, tid, pid, 0, True, 3).error_code == ErrorCode.PRODUCER_FENCED
    r = init_txn(raw, tid, 3, pid=pid, epoch=0)
    assert r.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert init_txn(raw, tid, 4, pid=pid, epoch=0).error_code == ErrorCode.PRODUCER_FENCED
    assert init_txn(raw, tid, 4, pid=pid, epoch=-1).error_code == ErrorCode.INVALID_REQUEST
    # KIP-360: the current instance resumes with its own id/epoch and gets the next epoch
    assert init_txn(raw, tid, 4, pid=pid, epoch=1).producer_epoch == 2
    # unknown transactional id / producer id, empty id, timeouts
    assert add_partitions(raw, "nobody", pid, 0, {topic: [0]}) == {(topic, 0): ErrorCode.INVALID_PRODUCER_ID_MAPPING}
    assert add_partitions(raw, tid, pid + 1, 2, {topic: [0]}) == {(topic, 0): ErrorCode.INVALID_PRODUCER_ID_MAPPING}
    assert end_txn(raw, "", pid, 2, True).error_code == ErrorCode.INVALID_REQUEST
    assert init_txn(raw, "").error_code == ErrorCode.INVALID_REQUEST
    assert init_txn(raw, tid, timeout_ms=0).error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert init_txn(raw, tid, timeout_ms=900001).error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert end_txn(raw, tid, pid, 2, True).error_code == ErrorCode.INVALID_TXN_STATE  # Empty
    # unknown partitions: UNKNOWN_TOPIC_OR_PARTITION, the rest OPERATION_NOT_ATTEMPTED
    assert add_partitions(raw, tid, pid, 2, {topic: [0, 7]}) == {
        (topic, 0): ErrorCode.OPERATION_NOT_ATTEMPTED, (topic, 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    d = raw.request(DescribeTransactionsRequest(transactional_ids=[tid, "nobody", ""]), 0)
    assert [s.error_code for s in d.transaction_states] == [
        0, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, ErrorCode.INVALID_REQUEST]
    assert d.transaction_states[0].transaction_state == "Empty"
    assert d.transaction_states[0].transaction_start_time_ms == -1
    # AddOffsetsToTxn adds the group's __consumer_offsets partition
    r = raw.request(AddOffsetsToTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=2,
                                           group_id="some-group"), 3)
    assert r.error_code == 0
    d = raw.request(DescribeTransactionsRequest(transactional_ids=[tid]), 0).transaction_states[0]
    assert d.transaction_state == "Ongoing" and [t.topic for t in d.topics] == ["__consumer_offsets"]
    # v4+: several transactions per request, VerifyOnly checks without adding
    req = APT(transactions=[
        APT.AddPartitionsToTxnTransaction(
            transactional_id=tid, producer_id=pid, producer_epoch=2, verify_only=True,
            topics=[APT.AddPartitionsToTxnTopic(name=topic, partitions=[0])]),
        APT.AddPartitionsToTxnTransaction(
            transactional_id="nobody", producer_id=pid, producer_epoch=2, verify_only=False,
            topics=[APT.AddPartitionsToTxnTopic(name=topic, partitions=[0])]),
    ])
    r = raw.request(req, 5)
    got = {(t.transactional_id, p.partition_index): p.partition_error_code
           for t in r.results_by_transaction for tr in t.topic_results for p in tr.results_by_partition}
    assert got == {(tid, 0): ErrorCode.TRANSACTION_ABORTABLE,
                   ("nobody", 0): ErrorCode.INVALID_PRODUCER_ID_MAPPING}
    # ListTransactions filters
    lt = raw.request(ListTransactionsRequest(state_filters=["Ongoing", "Nope"], producer_id_filters=[pid]), 0)
    assert lt.error_code == 0 and lt.unknown_state_filters == ["Nope"]
    assert [(s.transactional_id, s.transaction_state) for s in lt.transaction_states] == [(tid, "Ongoing")]
    lt = raw.request(ListTransactionsRequest(state_filters=["Nope"]), 0)
    assert lt.transaction_states == []
    lt = raw.request(ListTransactionsRequest(transactional_id_pattern=tid[:5] + ".*"), 2)
    assert tid in [s.transactional_id for s in lt.transaction_states]
    lt = raw.request(ListTransactionsRequest(duration_filter=3_600_000), 1)
    assert tid not in [s.transactional_id for s in lt.transaction_states]
    assert raw.request(ListTransactionsRequest(transactional_id_pattern="("), 2).error_code == (
        ErrorCode.INVALID_REGULAR_EXPRESSION)
    assert end_txn(raw, tid, pid, 2, False).error_code == 0


def test_read_committed_errors_carry_no_aborted_list(raw: RawClient) -> None:
    topic = new_topic(raw, "txo")
    p = fetch(raw, topic, 5, READ_COMMITTED)
    assert p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert (p.high_watermark, p.last_stable_offset, p.aborted_transactions) == (-1, -1, None)


def test_transaction_version_2_requests(raw: RawClient) -> None:
    """Produce v12 adds the partition itself and EndTxn v5 bumps the epoch (KIP-890 part 2),
    as Kafka serves those versions (Kafka's clients send them once transaction.version 2 is
    finalized)."""
    topic = new_topic(raw, "tx2")
    tid = f"tv2-{uuid.uuid4().hex[:6]}"
    coordinator_ready(raw, tid)
    r = init_txn(raw, tid, 5)
    pid = r.producer_id
    assert produce_txn(raw, tid, topic, txn_batch(pid, 0, ["a", "b"]), 12).error_code == 0
    d = raw.request(DescribeTransactionsRequest(transactional_ids=[tid]), 0).transaction_states[0]
    assert d.transaction_state == "Ongoing" and [t.partitions for t in d.topics] == [[0]]
    e = end_txn(raw, tid, pid, 0, True, 5)
    assert (e.error_code, e.producer_id, e.producer_epoch) == (0, pid, 1)
    p = wait_lso(raw, topic, 3)
    # the COMMIT marker carries the bumped epoch
    data = bytes(p.records)
    assert [(h.base_offset, h.producer_epoch, h.is_control) for _, h in iter_headers(data)] == [
        (0, 0, False), (2, 1, True)]
    # the next transaction runs on epoch 1 from sequence 0; abort it
    assert produce_txn(raw, tid, topic, txn_batch(pid, 0, ["c"], epoch=1), 12).error_code == 0
    deadline = time.monotonic() + 10
    while (e := end_txn(raw, tid, pid, 1, False, 5)).error_code == ErrorCode.CONCURRENT_TRANSACTIONS:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert (e.error_code, e.producer_epoch) == (0, 2)
    p = wait_lso(raw, topic, 5)
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(pid, 3)]
    # a retry of that EndTxn (epoch 1) is recognised and answered with the current epoch
    e = end_txn(raw, tid, pid, 1, False, 5)
    assert (e.error_code, e.producer_epoch) in ((0, 2), (ErrorCode.CONCURRENT_TRANSACTIONS, -1))
    # the old epoch cannot write any more
    p = produce_txn(raw, tid, topic, txn_batch(pid, 1, ["late"], epoch=1), 12)
    assert p.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
