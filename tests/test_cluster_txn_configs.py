"""Issue 27 on a 3-node kafkawire cluster of real processes (kafkawire.cluster.LocalCluster),
each check measured the same way on a 3-node Apache Kafka 4.3.1 / 4.4.0 (compat_tests/FINDINGS.md,
section "Issue 27: transactions, compaction after creation, configs"):

- EndTxn v5 (transaction version 2) right after a commit, at the epoch the commit returned:
  CONCURRENT_TRANSACTIONS while the commit's markers are written, then NONE; never
  PRODUCER_FENCED (franz-go's GroupTransactSession after a revoke). Was 50 of 50 fenced.
- The next transaction's first write right after a commit waits in the broker for the
  commit's markers (the broker's CONCURRENT_TRANSACTIONS retry), also on brokers that are not
  the transaction coordinator.
- ``cleanup.policy=compact`` set after creation: keyless records are refused (INVALID_RECORD) by
  the leader on every broker, not only on the node that committed the change; and accepted
  again once the policy is back to ``delete``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from bench.txn_end_pairs import run as run_end_pairs
from bench.txn_end_pairs import run_commit_produce
from kafkawire.cluster import LocalCluster
from protocol._generated.create_topics_request import CreateTopicsRequest
from protocol._generated.incremental_alter_configs_request import (
    IncrementalAlterConfigsRequest,
)
from protocol._generated.metadata_request import MetadataRequest
from protocol._generated.produce_request import ProduceRequest
from protocol.errors import ErrorCode
from protocol.records import SimpleRecord, build_batch
from tests.cluster_helpers import request, wait_for


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path_factory.mktemp("c27") / "cluster")
    try:
        # the broker's retry of CONCURRENT_TRANSACTIONS for a transaction-version-2 write
        # (100 ms by default) long enough to outlast the markers on a loaded machine
        c.up(3, overrides={"add.partitions.to.txn.retry.backoff.max.ms": "20000"},
             timeout_s=180)
        yield c
    finally:
        if c.state_path.exists():
            c.down()


def test_abort_at_the_epoch_a_commit_returned_is_never_fenced(cluster: LocalCluster) -> None:
    """50 pairs of EndTxn(commit, e) -> e + 1, then at once EndTxn(abort, e + 1), over a topic
    whose 3 partitions are led by the 3 brokers (markers to other brokers)."""
    res = run_end_pairs(cluster.bootstrap, 50, 3)
    assert res["fenced"] == 0, res
    assert set(res["first_abort_answer"]) <= {"CONCURRENT_TRANSACTIONS", "NONE"}, res


def test_first_write_after_a_commit_waits_in_the_broker(cluster: LocalCluster) -> None:
    """The next transaction's first write to every partition right after EndTxn(commit): the
    broker leading the partition retries the coordinator's CONCURRENT_TRANSACTIONS while the
    commit's markers are written (Kafka's KAFKA-18654), also when the coordinator is on another
    broker (it answered the client at once, which then refreshed its metadata)."""
    res = run_commit_produce(cluster.bootstrap, 10, 3)
    assert res["first_write_answer"] == {"NONE": 30}, res


def _produce_keyless(address: str, topic: str, partition: int) -> int:
    batch = build_batch([SimpleRecord(value=b"no key")])
    req = ProduceRequest(acks=-1, timeout_ms=10_000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=partition, records=batch)])])
    return int(request(address, req, 9).responses[0].partition_responses[0].error_code)


def _set_policy(address: str, topic: str, policy: str) -> None:
    R = IncrementalAlterConfigsRequest
    resp = request(address, R(resources=[R.AlterConfigsResource(
        resource_type=2, resource_name=topic,
        configs=[R.AlterableConfig(name="cleanup.policy", config_operation=0, value=policy)])]),
        1)
    assert resp.responses[0].error_code == 0, resp.responses[0].error_message


def compact_after_creation(addr: dict[int, str]) -> float:
    """On 3 brokers (node id -> address): a topic whose partition i is led by the i-th broker,
    keyless records accepted; ``cleanup.policy=compact`` set through the second broker; the
    seconds until every leader refuses them; then ``delete`` again and every leader accepts
    them. Runs as well against Apache Kafka (the FINDINGS figures)."""
    ids = sorted(addr)
    topic = f"c27-compact-{uuid.uuid4().hex[:6]}"
    C = CreateTopicsRequest
    resp = request(addr[ids[0]], C(timeout_ms=30_000, topics=[C.CreatableTopic(
        name=topic, num_partitions=-1, replication_factor=-1, assignments=[
            C.CreatableReplicaAssignment(partition_index=i,
                                         broker_ids=[ids[(i + k) % 3] for k in range(3)])
            for i in range(3)])]), 7)
    assert resp.topics[0].error_code == 0, resp.topics[0].error_message

    def leaders() -> dict[int, int] | None:
        md = request(addr[ids[0]], MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=topic)]), 12)
        got = {p.partition_index: p.leader_id for p in md.topics[0].partitions}
        return got if got == {i: ids[i] for i in range(3)} else None

    def answers(i: int, code: int) -> Callable[[], bool]:
        return lambda: _produce_keyless(addr[ids[i]], topic, i) == code

    wait_for(leaders, 60, "each broker leading one partition")
    for i in range(3):
        wait_for(answers(i, 0), 60, f"keyless record accepted on partition {i}")
    # the change goes to one broker (and from it to the active controller)
    _set_policy(addr[ids[1]], topic, "compact")
    start = time.monotonic()
    for i in range(3):
        wait_for(answers(i, ErrorCode.INVALID_RECORD), 30,
                 f"broker {ids[i]} refusing keyless records on partition {i}")
    took = time.monotonic() - start
    _set_policy(addr[ids[2]], topic, "delete")
    for i in range(3):
        wait_for(answers(i, 0), 30,
                 f"broker {ids[i]} accepting keyless records again on partition {i}")
    return took


def test_compact_set_after_creation_is_enforced_on_every_broker(cluster: LocalCluster) -> None:
    took = compact_after_creation({i: cluster.node(i).address for i in cluster.broker_ids})
    print(f"compact enforced on all 3 leaders {took:.2f} s after the change")
