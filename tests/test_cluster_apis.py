"""DescribeQuorum, the no-authorizer/no-SASL answers, and the broker configs Kafka reports for a
fresh cluster, on the wire (the same behaviour is compared with Apache Kafka by the compat
scenarios ``describe_quorum``, ``security_disabled``, ``describe_configs_broker``)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from kafkawire.tools.testing import BrokerProcess
from protocol._generated.create_acls_request import CreateAclsRequest
from protocol._generated.create_delegation_token_request import CreateDelegationTokenRequest
from protocol._generated.create_topics_request import CreateTopicsRequest
from protocol._generated.delete_acls_request import DeleteAclsRequest
from protocol._generated.describe_acls_request import DescribeAclsRequest
from protocol._generated.describe_configs_request import DescribeConfigsRequest
from protocol._generated.describe_quorum_request import DescribeQuorumRequest
from protocol._generated.offset_for_leader_epoch_request import OffsetForLeaderEpochRequest
from protocol._generated.sasl_authenticate_request import SaslAuthenticateRequest
from protocol._generated.sasl_handshake_request import SaslHandshakeRequest
from protocol.errors import ErrorCode
from protocol.primitives import ZERO_UUID
from tests.conftest import RawClient
from tests.test_admin_wire import nulled

DQ = DescribeQuorumRequest


def quorum(raw: RawClient, parts: dict[str, list[int]], version: int = 2) -> object:
    req = DQ(topics=[DQ.TopicData(topic_name=t, partitions=[DQ.PartitionData(partition_index=p)
                                                            for p in ps])
                     for t, ps in parts.items()])
    return raw.request(req, version)


def test_describe_quorum_every_version(own_broker: BrokerProcess) -> None:
    raw = RawClient(own_broker.bootstrap)
    try:
        before = int(time.time() * 1000)
        answers = {v: quorum(raw, {"__cluster_metadata": [0]}, v) for v in (0, 1, 2)}
        after = int(time.time() * 1000)
        for v, r in answers.items():
            assert r.error_code == 0  # type: ignore[attr-defined]
            [t] = r.topics  # type: ignore[attr-defined]
            [p] = t.partitions
            assert (t.topic_name, p.partition_index, p.error_code) == ("__cluster_metadata", 0, 0)
            assert (p.leader_id, p.leader_epoch) == (1, 1)
            [voter] = p.current_voters
            assert voter.replica_id == 1 and voter.replica_directory_id == ZERO_UUID
            assert p.high_watermark == voter.log_end_offset > 0
            assert p.observers == []
            if v >= 1:  # the leader is caught up "now"
                assert before <= voter.last_fetch_timestamp == voter.last_caught_up_timestamp
                assert voter.last_fetch_timestamp <= after
        nodes = answers[2].nodes  # type: ignore[attr-defined]
        assert [(n.node_id, [(ln.name, ln.host, ln.port) for ln in n.listeners])
                for n in nodes] == [(1, [("PLAINTEXT", "127.0.0.1", own_broker.port)])]
        hw = answers[2].topics[0].partitions[0].high_watermark  # type: ignore[attr-defined]
        # a metadata change moves the high watermark; a restart bumps the epoch
        raw.request(CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name="dq", num_partitions=2, replication_factor=1)], timeout_ms=10000), 7)
        p = quorum(raw, {"__cluster_metadata": [0]}).topics[0].partitions[0]  # type: ignore[attr-defined]
        assert p.high_watermark == hw + 3  # TopicRecord + 2 PartitionRecords
    finally:
        raw.close()
    own_broker.restart()
    raw = RawClient(own_broker.bootstrap)
    try:
        p = quorum(raw, {"__cluster_metadata": [0]}).topics[0].partitions[0]  # type: ignore[attr-defined]
        assert p.leader_epoch == 2 and p.high_watermark > hw + 3  # re-registration
    finally:
        raw.close()


def test_describe_quorum_other_partitions(raw: RawClient) -> None:
    for parts in ({"__cluster_metadata": [1]}, {"other": [0]}, {"__cluster_metadata": [0, 0]},
                  {"__cluster_metadata": [0], "other": [0]}):
        r = quorum(raw, parts)
        assert r.error_code == 0 and r.nodes == []  # type: ignore[attr-defined]
        got = [(t.topic_name, p.partition_index, p.error_code, p.error_message, p.leader_id,
                p.high_watermark, p.current_voters)
               for t in r.topics for p in t.partitions]  # type: ignore[attr-defined]
        want = [(t, i, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                 "This server does not host this topic-partition.", 0, 0, [])
                for t, ps in parts.items() for i in ps]
        assert got == want
    r = quorum(raw, {})
    assert (r.error_code, r.topics) == (0, [])  # type: ignore[attr-defined]


def test_no_authorizer_no_sasl_no_tokens(raw: RawClient) -> None:
    flt = dict(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
               principal_filter=None, host_filter=None, operation=1, permission_type=1)
    for v in (1, 2, 3):
        r = raw.request(DescribeAclsRequest(**flt), v)
        assert (r.error_code, r.error_message, r.resources) == (
            ErrorCode.SECURITY_DISABLED, "No Authorizer is configured on the broker", [])
    creation = CreateAclsRequest.AclCreation(resource_type=2, resource_name="t",
                                             resource_pattern_type=3, principal="User:a",
                                             host="*", operation=3, permission_type=3)
    r = raw.request(CreateAclsRequest(creations=[creation] * 3), 3)
    assert [(x.error_code, x.error_message) for x in r.results] == [
        (ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")] * 3
    r = raw.request(DeleteAclsRequest(filters=[DeleteAclsRequest.DeleteAclsFilter(**flt)]), 2)
    assert [(x.error_code, x.matching_acls) for x in r.filter_results] == [
        (ErrorCode.SECURITY_DISABLED, [])]
    for v in (0, 1):
        r = raw.request(SaslHandshakeRequest(mechanism="PLAIN"), v)
        assert (r.error_code, r.mechanisms) == (ErrorCode.ILLEGAL_SASL_STATE, [])
    r = raw.request(SaslAuthenticateRequest(auth_bytes=b"\0u\0p"), 2)
    assert r.error_code == ErrorCode.ILLEGAL_SASL_STATE
    r = raw.request(CreateDelegationTokenRequest(owner_principal_type="User",
                                                 owner_principal_name="bob", renewers=[],
                                                 max_lifetime_ms=-1), 3)
    assert (r.error_code, r.principal_name, r.token_requester_principal_name, r.hmac) == (
        ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, "bob", "ANONYMOUS", b"")
    # the connection still works after all of these
    assert quorum(raw, {"__cluster_metadata": [0]}).error_code == 0  # type: ignore[attr-defined]


def test_broker_identity_and_password_configs(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data", overrides={
        "node.id": "1", "process.roles": "broker,controller",
        "sasl.jaas.config": "secret-value",
    }) as bp:
        raw = RawClient(bp.bootstrap)
        try:
            r = raw.request(DescribeConfigsRequest(resources=[
                DescribeConfigsRequest.DescribeConfigsResource(
                    resource_type=4, resource_name="1",
                    configuration_keys=["broker.id", "node.id", "process.roles",
                                        "sasl.jaas.config", "offsets.topic.replication.factor"])],
                include_synonyms=True, include_documentation=False), 4)
            got = {c.name: (c.value, c.config_source, c.is_sensitive, c.config_type,
                            [(s.value, s.source) for s in c.synonyms])
                   for c in r.results[0].configs}
        finally:
            raw.close()
    assert got["broker.id"] == ("1", 4, False, 3, [("1", 4), ("-1", 5)])
    assert got["node.id"] == ("1", 4, False, 3, [("1", 4)])  # Kafka has no default for it
    assert got["process.roles"] == ("broker,controller", 4, False, 7,
                                    [("broker,controller", 4)])
    assert got["sasl.jaas.config"] == (None, 4, True, 9, [(None, 4)])  # never revealed
    assert got["offsets.topic.replication.factor"][3] == 4  # SHORT


def test_offset_for_leader_epoch_on_empty_partition(raw: RawClient) -> None:
    """The leader epoch starts at the log end offset when the partition gets its leader (as
    Kafka's makeLeader), so an empty partition answers (0, 0) for epoch 0."""
    topic = f"ofle-{uuid.uuid4().hex[:8]}"
    raw.request(CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=topic, num_partitions=1, replication_factor=1)], timeout_ms=10000), 7)
    OE = OffsetForLeaderEpochRequest
    r = raw.request(OE(replica_id=-1, topics=[OE.OffsetForLeaderTopic(topic=topic, partitions=[
        OE.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1, leader_epoch=0),
        OE.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1, leader_epoch=3)])]), 4)
    assert [(p.error_code, p.leader_epoch, p.end_offset) for p in r.topics[0].partitions] == [
        (0, 0, 0), (0, -1, -1)]  # an epoch newer than any known: undefined, as Kafka


def test_elect_leaders_and_reassignments_on_a_single_node(raw: RawClient) -> None:
    from protocol._generated.alter_partition_reassignments_request import (
        AlterPartitionReassignmentsRequest as APR,
    )
    from protocol._generated.elect_leaders_request import ElectLeadersRequest as EL
    from protocol._generated.list_partition_reassignments_request import (
        ListPartitionReassignmentsRequest as LPR,
    )

    topic = f"el-{uuid.uuid4().hex[:8]}"
    raw.request(CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=topic, num_partitions=2, replication_factor=1)], timeout_ms=10000), 7)
    for v in (0, 1, 2):
        r = raw.request(EL(election_type=0, timeout_ms=1000, topic_partitions=[
            EL.TopicPartitions(topic=topic, partitions=[1, 4]),
            EL.TopicPartitions(topic="nope", partitions=[0])]), v)
        assert [(t.topic, [(p.partition_id, p.error_code, p.error_message)
                           for p in t.partition_result])
                for t in r.replica_election_results] == [
            (topic, [(1, ErrorCode.ELECTION_NOT_NEEDED,
                      "Leader election not needed for topic partition."),
                     (4, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {topic}-4")]),
            ("nope", [(0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "No such topic as nope")])]
    r = raw.request(nulled(EL(election_type=0, timeout_ms=1000), topic_partitions=None), 2)
    assert (r.error_code, r.replica_election_results) == (0, [])
    P = APR.ReassignablePartition  # noqa: N806
    r = raw.request(APR(timeout_ms=1000, topics=[APR.ReassignableTopic(name=topic, partitions=[
        P(partition_index=0, replicas=[1]), nulled(P(partition_index=1), replicas=None),
        P(partition_index=1, replicas=[3]), P(partition_index=9, replicas=[1])])]), 1)
    assert [(p.error_code, p.error_message) for p in r.responses[0].partitions] == [
        (0, None), (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None),
        (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
         "The manual partition assignment includes broker 3, but no such broker is registered."),
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {topic}:9.")]
    r = raw.request(nulled(LPR(timeout_ms=1000), topics=None), 0)
    assert (r.error_code, r.topics) == (0, [])


def test_list_config_resources(raw: RawClient) -> None:
    from protocol._generated.list_config_resources_request import (
        ListConfigResourcesRequest as LCR,
    )

    topic = f"lcr-{uuid.uuid4().hex[:8]}"
    raw.request(CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=topic, num_partitions=1, replication_factor=1)], timeout_ms=10000), 7)
    r = raw.request(LCR(resource_types=[]), 1)
    got = [(x.resource_type, x.resource_name) for x in r.config_resources]
    assert got[:2] == [(8, "1"), (4, "1")] and (2, topic) in got
    r = raw.request(LCR(resource_types=[4]), 1)
    assert [(x.resource_type, x.resource_name) for x in r.config_resources] == [(4, "1")]
    r = raw.request(LCR(resource_types=[99]), 1)
    assert (r.error_code, r.config_resources) == (ErrorCode.UNSUPPORTED_VERSION, [])
    assert raw.request(LCR(), 0).config_resources == []
