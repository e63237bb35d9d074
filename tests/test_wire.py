"""Wire-level behaviour against a real broker process, with this repo's codecs over a socket."""

from __future__ import annotations

import socket
import struct
import time
import uuid

import pytest

from kafkawire.tools.testing import BrokerProcess, api_versions_ok
from protocol._generated.api_versions_request import ApiVersionsRequest
from protocol._generated.api_versions_response import ApiVersionsResponse
from protocol._generated.fetch_request import FetchRequest
from protocol._generated.init_producer_id_request import InitProducerIdRequest
from protocol._generated.list_offsets_request import ListOffsetsRequest
from protocol._generated.metadata_request import MetadataRequest
from protocol._generated.produce_request import ProduceRequest
from protocol.errors import ErrorCode
from protocol.records import SimpleRecord, build_batch, decode_batch_records, iter_headers
from tests.conftest import RawClient


def new_topic(raw: RawClient, partitions_hint: str = "t") -> str:
    name = f"{partitions_hint}-{uuid.uuid4().hex[:8]}"
    req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                          allow_auto_topic_creation=True)
    first = raw.request(req, 12).topics[0]
    # as Kafka: the request that creates the topic answers UNKNOWN_TOPIC_OR_PARTITION
    assert first.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and not first.partitions
    again = raw.request(req, 12).topics[0]
    assert again.error_code == 0 and len(again.partitions) == 1
    return name


def produce(raw: RawClient, topic: str, batch: bytes, version: int = 9, acks: int = -1) -> object:
    req = ProduceRequest(
        acks=acks, timeout_ms=5000,
        topic_data=[ProduceRequest.TopicProduceData(
            name=topic,
            partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)])],
    )
    return raw.request(req, version).responses[0].partition_responses[0]


def fetch(raw: RawClient, topic: str, offset: int, *, max_bytes: int = 1 << 20,
          partition_max: int = 1 << 20, max_wait_ms: int = 0, min_bytes: int = 0,
          version: int = 12) -> object:
    req = FetchRequest(
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
        isolation_level=0, session_id=0, session_epoch=-1,
        topics=[FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
            partition=0, fetch_offset=offset, partition_max_bytes=partition_max)])],
    )
    return raw.request(req, version).responses[0].partitions[0]


def batch_of(n: int, start: int = 0, **kw: object) -> bytes:
    return build_batch([SimpleRecord(value=f"r{start + i}".encode(), timestamp=int(time.time() * 1000))
                        for i in range(n)], **kw)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# ApiVersions and version negotiation


def test_api_versions_lists_what_we_serve_with_kafka_quirks(raw: RawClient) -> None:
    resp = raw.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
    assert resp.error_code == 0
    ranges = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert ranges[18] == (0, 4)
    assert ranges[0][0] == 0  # Produce advertised from v0 (librdkafka compression quirk)
    assert ranges[1] == (4, 18)
    assert 4 not in ranges  # LeaderAndIsr was removed in Kafka 4
    # as Kafka 4.3's bootstrap: ELR finalized; group.version=1: KIP-848 consumer groups work;
    # share.version=1: KIP-932 share groups (keys 76-79, 83-87, 90-92)
    assert {f.name for f in resp.finalized_features} == {
        "metadata.version", "eligible.leader.replicas.version", "group.version",
        "transaction.version", "share.version"}
    assert ranges[78] == (1, 2) and ranges[85] == (0, 1) and ranges[92] == (0, 0)


def test_api_versions_unsupported_version_gets_v0_fallback(raw: RawClient) -> None:
    # ApiVersions v99: answered with a v0 body, UNSUPPORTED_VERSION and our key-18 range
    raw.send_raw(struct.pack(">hhih", 18, 99, 42, 1) + b"x" + b"\x00\x00")
    frame = raw.recv_frame()
    assert struct.unpack_from(">i", frame)[0] == 42
    body = ApiVersionsResponse.decode(frame[4:], 0)
    assert body.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(18, 0, 4)]


def test_api_versions_v3_response_header_is_v0(raw: RawClient) -> None:
    from protocol._generated.request_header import RequestHeader

    hdr = RequestHeader(request_api_key=18, request_api_version=3, correlation_id=5, client_id="c")
    raw.send_raw(hdr.encode(2) + ApiVersionsRequest(client_software_name="a",
                                                    client_software_version="1").encode(3))
    frame = raw.recv_frame()
    assert struct.unpack_from(">i", frame)[0] == 5
    # header v0: the body starts right after the correlation id (error code 0)
    assert frame[4:6] == b"\x00\x00"
    ApiVersionsResponse.decode(frame[4:], 3)


def test_unsupported_version_closes_only_that_connection(broker: BrokerProcess) -> None:
    bad = RawClient(broker.bootstrap)
    bad.send_raw(struct.pack(">hhih", 3, 99, 1, 1) + b"x")  # Metadata v99
    with pytest.raises((ConnectionError, OSError)):
        bad.recv_frame()
    bad.close()
    assert api_versions_ok("127.0.0.1", broker.port)


@pytest.mark.parametrize("payload", [
    b"\x00\x99\x00\x00\x00\x00\x00\x01\x00\x00",  # unknown API key 153
    b"\x00\x03\x00\x01",                          # truncated header
    b"\x00\x03\x00\x09\x00\x00\x00\x01\x00\x00\xff\xff\xff\xff\xff",  # absurd lengths
], ids=["unknown-key", "truncated", "garbage-body"])
def test_bad_frames_close_the_connection_and_the_broker_stays_up(
    broker: BrokerProcess, payload: bytes
) -> None:
    bad = RawClient(broker.bootstrap)
    bad.send_raw(payload)
    with pytest.raises((ConnectionError, OSError)):
        bad.recv_frame()
    bad.close()
    assert api_versions_ok("127.0.0.1", broker.port)


def test_oversized_frame_is_refused_without_reading_it(broker: BrokerProcess) -> None:
    s = socket.create_connection(("127.0.0.1", broker.port), timeout=5)
    s.sendall(struct.pack(">i", 2**31 - 1) + b"\x00" * 16)  # > socket.request.max.bytes
    s.settimeout(5)
    try:
        assert s.recv(10) == b""
    except ConnectionResetError:
        pass
    s.close()
    assert api_versions_ok("127.0.0.1", broker.port)


def test_disconnect_mid_request_is_harmless(broker: BrokerProcess) -> None:
    s = socket.create_connection(("127.0.0.1", broker.port), timeout=5)
    s.sendall(struct.pack(">i", 1000) + b"\x00\x03\x00\x01")
    s.close()
    assert api_versions_ok("127.0.0.1", broker.port)


# ---------------------------------------------------------------------------------------------
# Produce / Fetch edge cases


def test_fetch_mid_batch_returns_the_whole_containing_batch(raw: RawClient) -> None:
    topic = new_topic(raw)
    assert produce(raw, topic, batch_of(10)).base_offset == 0
    assert produce(raw, topic, batch_of(10, 10)).base_offset == 10
    part = fetch(raw, topic, 15)
    assert part.error_code == 0 and part.high_watermark == 20
    heads = iter_headers(bytes(part.records))
    assert heads[0][1].base_offset == 10 and heads[0][1].last_offset == 19
    _h, recs = decode_batch_records(bytes(part.records), 0)
    assert [r.offset for r in recs] == list(range(10, 20))


def test_fetch_max_bytes_smaller_than_a_batch_still_returns_it(raw: RawClient) -> None:
    topic = new_topic(raw)
    big = batch_of(200)
    produce(raw, topic, big)
    part = fetch(raw, topic, 0, max_bytes=100, partition_max=100)
    assert len(part.records) == len(big)


def test_fetch_out_of_range_and_at_end(raw: RawClient) -> None:
    topic = new_topic(raw)
    produce(raw, topic, batch_of(3))
    assert fetch(raw, topic, 4).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    at_end = fetch(raw, topic, 3)
    assert at_end.error_code == 0 and len(at_end.records) == 0


def test_fetch_long_poll_is_answered_by_its_deadline(raw: RawClient) -> None:
    topic = new_topic(raw)
    t0 = time.monotonic()
    part = fetch(raw, topic, 0, max_wait_ms=400, min_bytes=1)
    dt = time.monotonic() - t0
    assert part.error_code == 0 and len(part.records) == 0
    assert 0.35 <= dt < 3.0


def test_fetch_long_poll_wakes_on_append(broker: BrokerProcess) -> None:
    import threading

    a, b = RawClient(broker.bootstrap), RawClient(broker.bootstrap)
    topic = new_topic(a)
    result: dict[str, object] = {}

    def waiter() -> None:
        t0 = time.monotonic()
        result["part"] = fetch(a, topic, 0, max_wait_ms=10_000, min_bytes=1)
        result["dt"] = time.monotonic() - t0

    th = threading.Thread(target=waiter)
    th.start()
    time.sleep(0.3)
    produce(b, topic, batch_of(1))
    th.join(15)
    assert result["dt"] < 5  # type: ignore[operator]
    assert len(result["part"].records) > 0  # type: ignore[attr-defined]
    a.close()
    b.close()


def test_produce_corrupt_crc_is_rejected(raw: RawClient) -> None:
    topic = new_topic(raw)
    bad = bytearray(batch_of(3))
    bad[-1] ^= 0xFF
    assert produce(raw, topic, bytes(bad)).error_code == ErrorCode.CORRUPT_MESSAGE
    assert produce(raw, topic, batch_of(1)).base_offset == 0  # nothing was written


def test_produce_unknown_partition(raw: RawClient) -> None:
    req = ProduceRequest(acks=1, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
        name="no-such-topic-" + uuid.uuid4().hex[:6],
        partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch_of(1))])])
    part = raw.request(req, 9).responses[0].partition_responses[0]
    assert part.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_produce_acks_zero_gets_no_response(raw: RawClient) -> None:
    topic = new_topic(raw)
    from protocol._generated.request_header import RequestHeader

    req = ProduceRequest(acks=0, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch_of(2))])])
    hdr = RequestHeader(request_api_key=0, request_api_version=9, correlation_id=777, client_id="x")
    raw.send_raw(hdr.encode(2) + req.encode(9))
    # the next response on the connection is for the next request, not the produce
    part = fetch(raw, topic, 0)
    assert part.high_watermark == 2


# ---------------------------------------------------------------------------------------------
# Idempotent producer


def test_duplicate_batch_gets_its_original_offsets(raw: RawClient) -> None:
    topic = new_topic(raw)
    pid_resp = raw.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1), 4)
    assert pid_resp.error_code == 0
    pid, epoch = pid_resp.producer_id, pid_resp.producer_epoch
    b0 = batch_of(5, producer_id=pid, producer_epoch=epoch, base_sequence=0)
    b1 = batch_of(5, 5, producer_id=pid, producer_epoch=epoch, base_sequence=5)
    assert produce(raw, topic, b0).base_offset == 0
    assert produce(raw, topic, b1).base_offset == 5
    dup = produce(raw, topic, b0)  # a retry of the first batch
    assert dup.error_code == 0 and dup.base_offset == 0
    assert fetch(raw, topic, 0).high_watermark == 10  # nothing appended twice
    gap = produce(raw, topic, batch_of(1, producer_id=pid, producer_epoch=epoch, base_sequence=12))
    assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_producer_ids_are_unique(raw: RawClient) -> None:
    ids = {raw.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1), 4)
           .producer_id for _ in range(5)}
    assert len(ids) == 5


def test_idempotent_state_survives_restart(own_broker: BrokerProcess) -> None:
    raw = RawClient(own_broker.bootstrap)
    topic = new_topic(raw)
    r = raw.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1), 4)
    b0 = batch_of(3, producer_id=r.producer_id, producer_epoch=0, base_sequence=0)
    assert produce(raw, topic, b0).base_offset == 0
    raw.close()
    own_broker.restart(kill=True)
    raw = RawClient(own_broker.bootstrap)
    assert produce(raw, topic, b0).base_offset == 0  # still recognised as a duplicate
    b1 = batch_of(3, 3, producer_id=r.producer_id, producer_epoch=0, base_sequence=3)
    assert produce(raw, topic, b1).base_offset == 3
    raw.close()


# ---------------------------------------------------------------------------------------------
# ListOffsets


def test_list_offsets_special_timestamps(raw: RawClient) -> None:
    topic = new_topic(raw)
    now = int(time.time() * 1000)
    for ts in [now - 5000, now - 1000, now - 3000]:
        produce(raw, topic, build_batch([SimpleRecord(value=b"x", timestamp=ts)]))

    def lo(ts: int, v: int = 7) -> tuple[int, int]:
        req = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
            ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
                ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=ts)])])
        p = raw.request(req, v).topics[0].partitions[0]
        assert p.error_code == 0
        return p.offset, p.timestamp

    assert lo(-1) == (3, -1)
    assert lo(-2) == (0, -1)
    assert lo(-3) == (1, now - 1000)
    assert lo(now - 4000) == (1, now - 1000)
    assert lo(now - 3000) == (1, now - 1000)
    assert lo(now - 9000) == (0, now - 5000)
    assert lo(now + 1000) == (-1, -1)
