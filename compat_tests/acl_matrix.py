"""An authorization matrix: what each API answers a SASL principal without ACLs, then with some.

Run against a broker with the StandardAuthorizer, a PLAINTEXT listener whose ANONYMOUS
principal is a super user (setup) and a SASL_PLAINTEXT listener where ``alice`` logs in with
PLAIN. The same function runs against Apache Kafka 4.3.1 and kafkawire
(``compat_tests/test_acl_matrix.py``); the outcomes (error codes, visible topics, authorized
operations) must be equal.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from compat_tests.wire import Connection, Rec, build_batch
from protocol._generated.add_partitions_to_txn_request import AddPartitionsToTxnRequest as APT
from protocol._generated.create_acls_request import CreateAclsRequest
from protocol._generated.create_partitions_request import CreatePartitionsRequest
from protocol._generated.create_topics_request import CreateTopicsRequest
from protocol._generated.delete_groups_request import DeleteGroupsRequest
from protocol._generated.delete_records_request import DeleteRecordsRequest
from protocol._generated.delete_topics_request import DeleteTopicsRequest
from protocol._generated.describe_acls_request import DescribeAclsRequest
from protocol._generated.describe_client_quotas_request import DescribeClientQuotasRequest
from protocol._generated.describe_cluster_request import DescribeClusterRequest
from protocol._generated.describe_configs_request import DescribeConfigsRequest
from protocol._generated.describe_groups_request import DescribeGroupsRequest
from protocol._generated.describe_log_dirs_request import DescribeLogDirsRequest
from protocol._generated.describe_producers_request import DescribeProducersRequest
from protocol._generated.describe_transactions_request import DescribeTransactionsRequest
from protocol._generated.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest,
)
from protocol._generated.end_txn_request import EndTxnRequest
from protocol._generated.fetch_request import FetchRequest
from protocol._generated.find_coordinator_request import FindCoordinatorRequest
from protocol._generated.incremental_alter_configs_request import (
    IncrementalAlterConfigsRequest as IAC,
)
from protocol._generated.init_producer_id_request import InitProducerIdRequest
from protocol._generated.join_group_request import JoinGroupRequest
from protocol._generated.list_groups_request import ListGroupsRequest
from protocol._generated.list_offsets_request import ListOffsetsRequest
from protocol._generated.list_partition_reassignments_request import (
    ListPartitionReassignmentsRequest,
)
from protocol._generated.list_transactions_request import ListTransactionsRequest
from protocol._generated.metadata_request import MetadataRequest
from protocol._generated.offset_commit_request import OffsetCommitRequest
from protocol._generated.offset_fetch_request import OffsetFetchRequest
from protocol._generated.offset_for_leader_epoch_request import OffsetForLeaderEpochRequest
from protocol._generated.produce_request import ProduceRequest
from protocol._generated.sasl_authenticate_request import SaslAuthenticateRequest
from protocol._generated.sasl_handshake_request import SaslHandshakeRequest

TOPIC, SECRET, GROUP, TXN = "matrix-topic", "matrix-secret", "matrix-group", "matrix-txn"
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_alice="alice-secret";')


def broker_props() -> dict[str, str]:
    """The security settings both brokers get (listeners are added by the caller)."""
    return {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl.plain.sasl.jaas.config": JAAS,
    }


def login(bootstrap: str) -> Connection:
    c = Connection(bootstrap)
    assert c.request(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
    r = c.request(SaslAuthenticateRequest(auth_bytes=b"\x00alice\x00alice-secret"), 2)
    assert r.error_code == 0, r
    return c


def setup(admin: Connection) -> None:
    """The topics, and coordinators and producer ids ready (no timing in the outcomes)."""
    for name in (TOPIC, SECRET):
        r = admin.request(CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name=name, num_partitions=1, replication_factor=1)], timeout_ms=30000), 7)
        assert r.topics[0].error_code in (0, 36), r
    deadline = time.monotonic() + 60
    for kt, key in ((0, GROUP), (1, TXN)):
        while admin.request(FindCoordinatorRequest(key_type=kt, coordinator_keys=[key]),
                            4).coordinators[0].error_code != 0:
            assert time.monotonic() < deadline, "coordinator not ready"
            time.sleep(0.2)
    while admin.request(InitProducerIdRequest(transactional_id=None,
                                              transaction_timeout_ms=60000), 4).error_code:
        assert time.monotonic() < deadline, "producer ids not ready"
        time.sleep(0.2)
    while admin.request(DescribeGroupsRequest(groups=[GROUP]), 5).groups[0].error_code:
        assert time.monotonic() < deadline, "group coordinator not loaded"
        time.sleep(0.2)


def grant(admin: Connection) -> None:
    def acl(rtype: int, name: str, op: int, pattern: int = 3) -> CreateAclsRequest.AclCreation:
        return CreateAclsRequest.AclCreation(
            resource_type=rtype, resource_name=name, resource_pattern_type=pattern,
            principal="User:alice", host="*", operation=op, permission_type=3)

    r = admin.request(CreateAclsRequest(creations=[
        acl(2, TOPIC, 3), acl(2, TOPIC, 4), acl(2, "matrix-t", 10, pattern=4),
        acl(3, GROUP, 3), acl(5, TXN, 4), acl(4, "kafka-cluster", 8), acl(3, GROUP, 11),
    ]), 3)
    assert [x.error_code for x in r.results] == [0] * 7, r


def _codes(obj: Any) -> Any:
    """The error codes of a response, nested like the response (lists keep order)."""
    if isinstance(obj, list):
        return [_codes(x) for x in obj]
    if hasattr(obj, "FIELDS"):
        out: dict[str, Any] = {}
        for f in obj.FIELDS:
            name = f[0]
            value = getattr(obj, name, None)
            if name.endswith("error_code") or name.endswith("authorized_operations"):
                out[name] = value
            elif isinstance(value, list) and value and hasattr(value[0], "FIELDS"):
                inner = _codes(value)
                if any(inner):
                    out[name] = inner
        return out
    return None


class Session:
    """alice's connection, logged in again after a step that lost it."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.conn = login(bootstrap)

    def request(self, msg: Any, version: int) -> Any:
        return self.conn.request(msg, version)

    def relogin(self) -> None:
        self.conn.close()
        self.conn = login(self.bootstrap)


Step = Callable[[str, Callable[[], Any]], None]


def matrix(c: Session) -> dict[str, Any]:
    """One pass over the APIs as the session's principal."""
    out: dict[str, Any] = {}

    def step(name: str, fn: Callable[[], Any]) -> None:
        try:
            out[name] = fn()
        except Exception as e:  # a closed connection is an outcome too
            out[name] = {"raised": type(e).__name__}
            c.relogin()

    _topic_steps(c, step)
    _group_steps(c, step)
    _txn_and_cluster_steps(c, step)
    return out


def _topic_steps(c: Session, step: Step) -> None:
    md = MetadataRequest.MetadataRequestTopic
    every = MetadataRequest()
    every.topics = None  # the constructor makes None an empty list; null = all topics
    step("metadata_all", lambda: sorted(
        t.name for t in c.request(every, 12).topics if t.name.startswith("matrix")))
    step("metadata_named", lambda: _codes(c.request(MetadataRequest(
        topics=[md(name=TOPIC), md(name=SECRET), md(name="matrix-missing")],
        allow_auto_topic_creation=True, include_topic_authorized_operations=True), 12)))
    batch = build_batch([Rec(b"v")], base_timestamp=int(time.time() * 1000))
    PD = ProduceRequest.PartitionProduceData
    step("produce", lambda: _codes(c.request(ProduceRequest(acks=1, timeout_ms=10000,
         topic_data=[ProduceRequest.TopicProduceData(name=t, partition_data=[
             PD(index=0, records=batch)]) for t in (TOPIC, SECRET)]), 9)))
    step("produce_txn", lambda: _codes(c.request(ProduceRequest(
        acks=1, timeout_ms=10000, transactional_id="other-txn",
        topic_data=[ProduceRequest.TopicProduceData(name=TOPIC, partition_data=[
            PD(index=0, records=batch)])]), 9)))
    step("fetch", lambda: _codes(c.request(FetchRequest(max_wait_ms=0, topics=[
        FetchRequest.FetchTopic(topic=t, partitions=[FetchRequest.FetchPartition(
            partition=0, partition_max_bytes=1000)]) for t in (TOPIC, SECRET)]), 12)))
    step("list_offsets", lambda: _codes(c.request(ListOffsetsRequest(replica_id=-1, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=t, partitions=[
            ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])
        for t in (TOPIC, SECRET)]), 7)))
    step("offset_for_leader_epoch", lambda: _codes(c.request(OffsetForLeaderEpochRequest(
        replica_id=-1, topics=[OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
            topic=t, partitions=[OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                partition=0, leader_epoch=0)]) for t in (TOPIC, SECRET)]), 4)))
    step("create_topics", lambda: _codes(c.request(CreateTopicsRequest(
        topics=[CreateTopicsRequest.CreatableTopic(name="matrix-new", num_partitions=1,
                                                   replication_factor=1)],
        timeout_ms=30000, validate_only=True), 7)))
    step("create_partitions", lambda: _codes(c.request(CreatePartitionsRequest(
        topics=[CreatePartitionsRequest.CreatePartitionsTopic(name=TOPIC, count=3)],
        timeout_ms=30000, validate_only=True), 3)))
    step("delete_records", lambda: _codes(c.request(DeleteRecordsRequest(
        topics=[DeleteRecordsRequest.DeleteRecordsTopic(name=SECRET, partitions=[
            DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=0)])],
        timeout_ms=30000), 2)))
    step("delete_topics", lambda: _codes(c.request(DeleteTopicsRequest(
        topic_names=[SECRET], timeout_ms=30000), 5)))
    Res = DescribeConfigsRequest.DescribeConfigsResource
    step("describe_configs", lambda: _codes(c.request(DescribeConfigsRequest(resources=[
        Res(resource_type=2, resource_name=TOPIC, configuration_keys=["retention.ms"]),
        Res(resource_type=2, resource_name=SECRET, configuration_keys=["retention.ms"]),
        Res(resource_type=4, resource_name="1", configuration_keys=["log.retention.ms"])]), 4)))
    step("alter_configs", lambda: _codes(c.request(IAC(resources=[IAC.AlterConfigsResource(
        resource_type=2, resource_name=TOPIC, configs=[IAC.AlterableConfig(
            name="retention.ms", config_operation=0, value="100000")])],
        validate_only=True), 1)))


def _group_steps(c: Session, step: Step) -> None:
    step("find_coordinator", lambda: [
        c.request(FindCoordinatorRequest(key_type=kt, coordinator_keys=[k]), 4)
        .coordinators[0].error_code
        for kt, k in ((0, GROUP), (0, "other-group"), (1, TXN), (1, "other-txn"))])
    step("join_group_other", lambda: c.request(JoinGroupRequest(
        group_id="other-group", session_timeout_ms=10000, rebalance_timeout_ms=10000,
        member_id="", protocol_type="consumer", protocols=[
            JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")]),
        5).error_code)
    OCT = OffsetCommitRequest.OffsetCommitRequestTopic
    OCP = OffsetCommitRequest.OffsetCommitRequestPartition
    step("offset_commit", lambda: _codes(c.request(OffsetCommitRequest(
        group_id=GROUP, topics=[OCT(name=t, partitions=[OCP(partition_index=0,
                                                            committed_offset=0)])
                                for t in (TOPIC, SECRET)]), 8)))
    step("offset_commit_other_group", lambda: _codes(c.request(OffsetCommitRequest(
        group_id="other-group", topics=[OCT(name=TOPIC, partitions=[
            OCP(partition_index=0, committed_offset=0)])]), 8)))
    step("offset_fetch", lambda: _codes(c.request(OffsetFetchRequest(groups=[
        OffsetFetchRequest.OffsetFetchRequestGroup(group_id=g, topics=[
            OffsetFetchRequest.OffsetFetchRequestTopics(name=t, partition_indexes=[0])
            for t in (TOPIC, SECRET)]) for g in (GROUP, "other-group")]), 8)))
    step("describe_groups", lambda: _codes(c.request(DescribeGroupsRequest(
        groups=[GROUP, "other-group"]), 5)))
    step("describe_groups_operations", lambda: _codes(c.request(DescribeGroupsRequest(
        groups=[GROUP, "other-group"], include_authorized_operations=True), 5)))
    step("list_groups", lambda: c.request(ListGroupsRequest(), 4).error_code)
    step("delete_groups", lambda: _codes(c.request(DeleteGroupsRequest(
        groups_names=["other-group"]), 2)))


def _txn_and_cluster_steps(c: Session, step: Step) -> None:
    step("init_producer_id", lambda: c.request(InitProducerIdRequest(
        transactional_id=None, transaction_timeout_ms=60000), 4).error_code)
    step("init_producer_id_txn", lambda: [c.request(InitProducerIdRequest(
        transactional_id=t, transaction_timeout_ms=60000), 4).error_code
        for t in ("other-txn",)])
    step("add_partitions_to_txn", lambda: _codes(c.request(APT(
        v3_and_below_transactional_id="other-txn", v3_and_below_producer_id=1,
        v3_and_below_producer_epoch=0, v3_and_below_topics=[
            APT.AddPartitionsToTxnTopic(name=TOPIC, partitions=[0])]), 3)))
    step("end_txn", lambda: c.request(EndTxnRequest(
        transactional_id="other-txn", producer_id=1, producer_epoch=0, committed=True),
        3).error_code)
    step("describe_transactions", lambda: _codes(c.request(DescribeTransactionsRequest(
        transactional_ids=["other-txn"]), 0)))
    step("list_transactions", lambda: c.request(ListTransactionsRequest(), 1).error_code)
    step("describe_producers", lambda: _codes(c.request(DescribeProducersRequest(topics=[
        DescribeProducersRequest.TopicRequest(name=SECRET, partition_indexes=[0])]), 0)))
    step("describe_acls", lambda: c.request(DescribeAclsRequest(
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
        principal_filter=None, host_filter=None, operation=1, permission_type=1),
        3).error_code)
    step("create_acls", lambda: _codes(c.request(CreateAclsRequest(creations=[
        CreateAclsRequest.AclCreation(resource_type=2, resource_name=SECRET,
                                      resource_pattern_type=3, principal="User:alice",
                                      host="*", operation=2, permission_type=3)]), 3)))
    step("describe_cluster", lambda: _codes(c.request(DescribeClusterRequest(
        include_cluster_authorized_operations=True), 1)))
    # users=[] (all): with null users Kafka 4.3.1 never answers an unauthorized request
    scram = DescribeUserScramCredentialsRequest(users=[])
    step("describe_user_scram", lambda: c.request(scram, 0).error_code)
    named = DescribeUserScramCredentialsRequest(users=[
        DescribeUserScramCredentialsRequest.UserName(name=n) for n in ("alice", "nobody")])
    step("describe_user_scram_named", lambda: _codes(c.request(named, 0)))
    step("describe_client_quotas", lambda: c.request(DescribeClientQuotasRequest(
        components=[]), 1).error_code)
    reassignments = ListPartitionReassignmentsRequest()
    reassignments.topics = None
    step("list_partition_reassignments", lambda: c.request(reassignments, 0).error_code)
    all_dirs = DescribeLogDirsRequest()
    all_dirs.topics = None
    step("describe_log_dirs", lambda: c.request(all_dirs, 4).error_code)
