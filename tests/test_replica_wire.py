"""The partition-state layer seen from the wire (a real broker process, this repo's codecs):
min.insync.replicas at acks=all, follower fetches, leader epoch checks on every data API."""

from __future__ import annotations

import time
import uuid

from kafkawire.tools.testing import BrokerProcess
from protocol._generated.create_topics_request import CreateTopicsRequest
from protocol._generated.fetch_request import FetchRequest
from protocol._generated.list_offsets_request import ListOffsetsRequest
from protocol._generated.offset_for_leader_epoch_request import OffsetForLeaderEpochRequest
from protocol._generated.produce_request import ProduceRequest
from protocol.errors import ErrorCode
from protocol.records import SimpleRecord, build_batch
from tests.conftest import RawClient

CT = CreateTopicsRequest.CreatableTopic
TOPIC_IDS: dict[str, uuid.UUID] = {}


def create(raw: RawClient, configs: dict[str, str] | None = None) -> str:
    name = f"rep-{uuid.uuid4().hex[:8]}"
    topic = CT(name=name, num_partitions=1, replication_factor=1, configs=[
        CreateTopicsRequest.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])
    r = raw.request(CreateTopicsRequest(topics=[topic], timeout_ms=10000), 7)
    assert r.topics[0].error_code == 0
    TOPIC_IDS[name] = r.topics[0].topic_id
    return name


def produce(raw: RawClient, topic: str, acks: int, n: int = 1) -> object:
    batch = build_batch([SimpleRecord(value=b"v%d" % i, timestamp=int(time.time() * 1000))
                         for i in range(n)])
    req = ProduceRequest(acks=acks, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)])])
    return raw.request(req, 9).responses[0].partition_responses[0]


def fetch(raw: RawClient, topic: str, version: int, *, replica_id: int = -1, epoch: int = -1,
          offset: int = 0) -> object:
    state = FetchRequest.ReplicaState(replica_id=replica_id, replica_epoch=-1)
    req = FetchRequest(
        replica_id=replica_id if version < 15 else -1, replica_state=state, max_wait_ms=0,
        min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
        topics=[FetchRequest.FetchTopic(topic=topic, topic_id=TOPIC_IDS[topic], partitions=[FetchRequest.FetchPartition(
            partition=0, fetch_offset=offset, partition_max_bytes=1 << 20,
            current_leader_epoch=epoch)])],
    )
    return raw.request(req, version).responses[0].partitions[0]


def latest(raw: RawClient, topic: str, *, epoch: int = -1, replica_id: int = -1) -> object:
    req = ListOffsetsRequest(replica_id=replica_id, isolation_level=0, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
            ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1,
                                                    current_leader_epoch=epoch)])])
    return raw.request(req, 7).topics[0].partitions[0]


def test_min_insync_replicas_counts_at_most_the_replicas(raw: RawClient) -> None:
    # Kafka 4.3.1 (measured): the effective min.insync.replicas is at most the replication
    # factor, so min.insync.replicas 2 on a single replica takes acks=all writes
    topic = create(raw, {"min.insync.replicas": "2"})
    r = produce(raw, topic, acks=-1)
    assert r.error_code == 0 and r.base_offset == 0
    ok = produce(raw, topic, acks=1, n=3)
    assert ok.error_code == 0 and ok.base_offset == 1
    assert latest(raw, topic).offset == 4


def test_acks_all_is_answered_once_the_high_watermark_passes(raw: RawClient) -> None:
    topic = create(raw)
    for i in range(3):
        r = produce(raw, topic, acks=-1, n=2)
        assert r.error_code == 0 and r.base_offset == 2 * i
        assert latest(raw, topic).offset == 2 * i + 2


def test_follower_fetches_from_replicas_the_leader_does_not_know(raw: RawClient) -> None:
    topic = create(raw)
    produce(raw, topic, acks=-1, n=2)
    # as Kafka: epoch given and valid but not a replica -> UNKNOWN_LEADER_EPOCH (retry later);
    # no epoch -> NOT_LEADER_OR_FOLLOWER; offsets are -1 on an errored partition
    r = fetch(raw, topic, 12, replica_id=7, epoch=0)
    assert r.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH and r.high_watermark == -1
    r = fetch(raw, topic, 16, replica_id=7)
    assert r.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    r = fetch(raw, topic, 12, replica_id=7, epoch=1)  # epochs are checked first
    assert r.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    r = fetch(raw, topic, 16)  # a consumer
    assert r.error_code == 0 and r.high_watermark == 2


def test_current_leader_epoch_on_the_data_apis(raw: RawClient) -> None:
    topic = create(raw)
    produce(raw, topic, acks=1)
    assert fetch(raw, topic, 12, epoch=0).error_code == 0
    assert fetch(raw, topic, 12, epoch=1).error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert latest(raw, topic, epoch=1).error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert latest(raw, topic, epoch=0).offset == 1
    assert latest(raw, topic, replica_id=5).offset == 1  # a replica id reads to the log end
    req = OffsetForLeaderEpochRequest(replica_id=-1, topics=[
        OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=topic, partitions=[
            OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                partition=0, current_leader_epoch=e, leader_epoch=0) for e in (0, 1)])])
    parts = raw.request(req, 4).topics[0].partitions
    assert [(p.error_code, p.leader_epoch, p.end_offset) for p in parts] == [
        (0, 0, 1), (ErrorCode.UNKNOWN_LEADER_EPOCH, -1, -1)]


def test_stock_clients_write_acks_all_above_the_replication_factor(
    raw: RawClient, broker: BrokerProcess
) -> None:
    """librdkafka and kafka-python deliver acks=all to a single replica with
    min.insync.replicas 2, as Kafka 4.3.1 does (the effective min ISR is capped at the
    replication factor; NOT_ENOUGH_REPLICAS with stock clients is in test_replication_cluster)."""
    import kafka
    from confluent_kafka import Producer

    topic = create(raw, {"min.insync.replicas": "2"})
    done: list[tuple[object, int]] = []
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all",
                  "message.timeout.ms": 30000})
    p.produce(topic, b"x", on_delivery=lambda e, m: done.append((e, m.offset())))
    p.flush(30)
    assert done == [(None, 0)]
    kp = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", retries=0)
    try:
        assert kp.send(topic, b"z").get(timeout=30).offset == 1
    finally:
        kp.close()
