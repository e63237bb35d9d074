"""ACLs with the StandardAuthorizer: CreateAcls/DescribeAcls/DeleteAcls, the error codes each API
answers a principal without the ACL, implied operations, deny over allow, prefixed patterns,
hidden topics, principals from SASL and from client certificates, real clients and kafka-acls.

The broker: PLAIN (PLAINTEXT, whose ANONYMOUS principal is a super user, for setup), SASL
(SASL_PLAINTEXT with PLAIN users alice and bob) and MTLS (SSL, client certificates required,
``CN=<name>`` mapped to ``<name>``).
"""

from __future__ import annotations

import ssl
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kafkawire.testing import BrokerProcess
from kraft import acls as K
from protocol._generated.create_acls_request import CreateAclsRequest
from protocol._generated.create_topics_request import CreateTopicsRequest
from protocol._generated.delete_acls_request import DeleteAclsRequest
from protocol._generated.delete_topics_request import DeleteTopicsRequest
from protocol._generated.describe_acls_request import DescribeAclsRequest
from protocol._generated.describe_groups_request import DescribeGroupsRequest
from protocol._generated.fetch_request import FetchRequest
from protocol._generated.find_coordinator_request import FindCoordinatorRequest
from protocol._generated.join_group_request import JoinGroupRequest
from protocol._generated.list_offsets_request import ListOffsetsRequest
from protocol._generated.metadata_request import MetadataRequest
from protocol._generated.produce_request import ProduceRequest
from protocol._generated.sasl_authenticate_request import SaslAuthenticateRequest
from protocol._generated.sasl_handshake_request import SaslHandshakeRequest
from tests.batchutil import build_batch
from tests.conftest import RawClient
from tests.security_helpers import Pki, listeners, make_pki

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_alice="alice-secret" user_bob="bob-secret";')
TOPIC_AUTH, GROUP_AUTH, CLUSTER_AUTH = 29, 30, 31
TXN_AUTH = 53


class Cluster:
    def __init__(self, broker: BrokerProcess, ports: dict[str, int], pki: Pki) -> None:
        self.broker, self.ports, self.pki = broker, ports, pki

    def admin(self) -> RawClient:
        return RawClient(self.broker.bootstrap)

    def user(self, name: str) -> RawClient:
        c = RawClient(f"127.0.0.1:{self.ports['SASL']}")
        assert c.request(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
        r = c.request(SaslAuthenticateRequest(
            auth_bytes=f"\x00{name}\x00{name}-secret".encode()), 1)
        assert r.error_code == 0, r
        return c


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    base = tmp_path_factory.mktemp("acls")
    pki = make_pki(base / "pki")
    ov, ports = listeners(PLAIN="PLAINTEXT", SASL="SASL_PLAINTEXT", MTLS="SSL")
    ov.update({
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS;User:admin",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl.plain.sasl.jaas.config": JAAS,
        "listener.name.mtls.ssl.keystore.type": "PEM",
        "listener.name.mtls.ssl.keystore.location": str(pki.server_pem),
        "listener.name.mtls.ssl.truststore.type": "PEM",
        "listener.name.mtls.ssl.truststore.location": str(pki.ca_pem),
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.principal.mapping.rules": "RULE:^CN=([a-z]+),.*$/$1/,DEFAULT",
        # keys DescribeConfigs must list as Kafka does (issue 27: librdkafka's 0142 reads the
        # first; the second is no Kafka config)
        "connections.max.reauth.ms": "3600000",
        "my.custom.key": "hello",
    })
    bp = BrokerProcess(base / "data", port=ports["PLAIN"], overrides=ov).start()
    try:
        yield Cluster(bp, ports, pki)
    finally:
        bp.close()


def _acl(rtype: int, name: str, principal: str, op: int, perm: int = K.ALLOW,
         pattern: int = K.LITERAL, host: str = "*") -> CreateAclsRequest.AclCreation:
    return CreateAclsRequest.AclCreation(
        resource_type=rtype, resource_name=name, resource_pattern_type=pattern,
        principal=principal, host=host, operation=op, permission_type=perm)


def _grant(c: Cluster, *creations: CreateAclsRequest.AclCreation) -> None:
    admin = c.admin()
    try:
        r = admin.request(CreateAclsRequest(creations=list(creations)), 3)
        assert [x.error_code for x in r.results] == [0] * len(creations), r
    finally:
        admin.close()


def _create_topic(c: Cluster, name: str) -> None:
    admin = c.admin()
    try:
        r = admin.request(CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name=name, num_partitions=1, replication_factor=1)], timeout_ms=30000), 7)
        assert r.topics[0].error_code == 0, r
    finally:
        admin.close()


def _produce(c: RawClient, topic: str, txn: str | None = None) -> int:
    now = int(time.time() * 1000)
    batch = build_batch([now]) if txn is None else build_batch(
        [now], producer_id=1, producer_epoch=0, base_sequence=0, transactional=True)
    r = c.request(ProduceRequest(transactional_id=txn, acks=1, timeout_ms=10000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=batch)])]), 9)
    return int(r.responses[0].partition_responses[0].error_code)


def _fetch(c: RawClient, topic: str) -> int:
    r = c.request(FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                               topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
                                   FetchRequest.FetchPartition(partition=0, fetch_offset=0,
                                                               partition_max_bytes=1 << 20)])]),
                  11)
    return int(r.responses[0].partitions[0].error_code)


def _metadata(c: RawClient, topics: list[str] | None) -> Any:
    req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=t)
                                  for t in topics or []],
                          allow_auto_topic_creation=False, include_topic_authorized_operations=True)
    if topics is None:
        req.topics = None  # all topics (the constructor turns None into [])
    return c.request(req, 12)


def test_acl_apis_and_the_data_path(cluster: Cluster) -> None:
    topic = f"acl-{uuid.uuid4().hex[:8]}"
    _create_topic(cluster, topic)
    alice = cluster.user("alice")
    try:
        # nothing granted: hidden from the topic list, TOPIC_AUTHORIZATION_FAILED by name
        admin = cluster.admin()
        assert topic in {t.name for t in _metadata(admin, None).topics}
        admin.close()
        assert topic not in {t.name for t in _metadata(alice, None).topics}
        assert _metadata(alice, [topic]).topics[0].error_code == TOPIC_AUTH
        assert _produce(alice, topic) == TOPIC_AUTH
        assert _fetch(alice, topic) == TOPIC_AUTH
        lo = alice.request(ListOffsetsRequest(replica_id=-1, topics=[
            ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
                ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])]), 7)
        assert lo.topics[0].partitions[0].error_code == TOPIC_AUTH
        # the ACL APIs need cluster permissions
        assert alice.request(DescribeAclsRequest(
            resource_type_filter=K.ANY, pattern_type_filter=K.ANY, operation=K.ANY,
            permission_type=K.ANY, resource_name_filter=None, principal_filter=None,
            host_filter=None), 3).error_code == CLUSTER_AUTH
        assert alice.request(CreateAclsRequest(creations=[
            _acl(K.TOPIC, topic, "User:alice", K.ALL)]), 3).results[0].error_code == CLUSTER_AUTH
        # WRITE implies DESCRIBE; READ still missing
        _grant(cluster, _acl(K.TOPIC, topic, "User:alice", K.WRITE))
        assert _produce(alice, topic) == 0
        md = _metadata(alice, [topic]).topics[0]
        assert md.error_code == 0
        assert topic in {t.name for t in _metadata(alice, None).topics}
        assert md.topic_authorized_operations == (1 << K.WRITE) | (1 << K.DESCRIBE)
        assert _fetch(alice, topic) == TOPIC_AUTH
        _grant(cluster, _acl(K.TOPIC, topic[:6], "User:alice", K.READ, pattern=K.PREFIXED))
        assert _fetch(alice, topic) == 0
        # a DENY wins over the ALLOW, and only for its operation
        _grant(cluster, _acl(K.TOPIC, topic, "User:alice", K.WRITE, perm=K.DENY))
        assert _produce(alice, topic) == TOPIC_AUTH
        assert _fetch(alice, topic) == 0
        # bob has nothing of alice's
        bob = cluster.user("bob")
        assert _fetch(bob, topic) == TOPIC_AUTH
        bob.close()
    finally:
        alice.close()
    admin = cluster.admin()
    try:
        listed = admin.request(DescribeAclsRequest(
            resource_type_filter=K.TOPIC, resource_name_filter=topic, pattern_type_filter=K.MATCH,
            principal_filter="User:alice", host_filter=None, operation=K.ANY,
            permission_type=K.ANY), 3)
        assert listed.error_code == 0
        got = sorted((r.pattern_type, a.operation, a.permission_type)
                     for r in listed.resources for a in r.acls)
        assert got == [(K.LITERAL, K.WRITE, K.DENY), (K.LITERAL, K.WRITE, K.ALLOW),
                       (K.PREFIXED, K.READ, K.ALLOW)]
        deleted = admin.request(DeleteAclsRequest(filters=[DeleteAclsRequest.DeleteAclsFilter(
            resource_type_filter=K.TOPIC, resource_name_filter=topic,
            pattern_type_filter=K.LITERAL, principal_filter=None, host_filter=None,
            operation=K.ANY, permission_type=K.DENY)]), 3)
        assert len(deleted.filter_results[0].matching_acls) == 1
    finally:
        admin.close()
    alice = cluster.user("alice")
    try:
        assert _produce(alice, topic) == 0
    finally:
        alice.close()


def test_invalid_acls_are_refused(cluster: Cluster) -> None:
    admin = cluster.admin()
    try:
        r = admin.request(CreateAclsRequest(creations=[
            _acl(K.CLUSTER, "other", "User:x", K.ALTER),
            _acl(K.TOPIC, "t", "nocolon", K.READ),
            _acl(K.TOPIC, "t", "User:x", K.ANY),
        ]), 3)
        assert [x.error_code for x in r.results] == [42, 42, 42]
        assert r.results[0].error_message == (
            "The only valid name for the CLUSTER resource is kafka-cluster")
    finally:
        admin.close()


def test_topic_admin_and_groups(cluster: Cluster) -> None:
    topic = f"adm-{uuid.uuid4().hex[:8]}"
    bob = cluster.user("bob")
    try:
        r = bob.request(CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name=topic, num_partitions=1, replication_factor=1)], timeout_ms=30000), 7)
        assert r.topics[0].error_code == TOPIC_AUTH
        _grant(cluster, _acl(K.TOPIC, topic, "User:bob", K.CREATE))
        r = bob.request(CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name=topic, num_partitions=1, replication_factor=1)], timeout_ms=30000), 7)
        assert r.topics[0].error_code == 0
        assert r.topics[0].topic_config_error_code == TOPIC_AUTH  # no DESCRIBE_CONFIGS
        d = bob.request(DeleteTopicsRequest(topic_names=[topic], timeout_ms=30000), 5)
        assert d.responses[0].error_code == TOPIC_AUTH
        group = f"g-{topic}"
        fc = bob.request(FindCoordinatorRequest(key=group, key_type=0), 3)
        assert fc.error_code == GROUP_AUTH
        fc = bob.request(FindCoordinatorRequest(key="txn-1", key_type=1), 3)
        assert fc.error_code == TXN_AUTH
        join = bob.request(JoinGroupRequest(
            group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
            protocol_type="consumer", protocols=[JoinGroupRequest.JoinGroupRequestProtocol(
                name="range", metadata=b"")]), 5)
        assert join.error_code == GROUP_AUTH
        assert _produce(bob, topic, txn="txn-1") == TXN_AUTH
    finally:
        bob.close()


def test_certificate_principal(cluster: Cluster) -> None:
    topic = f"mtls-{uuid.uuid4().hex[:8]}"
    _create_topic(cluster, topic)
    cert, key = cluster.pki.client("carol")
    ctx = ssl.create_default_context(cafile=str(cluster.pki.ca_pem))
    ctx.load_cert_chain(str(cert), str(key))

    def connect() -> RawClient:
        c = RawClient(f"127.0.0.1:{cluster.ports['MTLS']}")
        c.sock = ctx.wrap_socket(c.sock, server_hostname="localhost")
        return c

    carol = connect()
    try:
        assert _produce(carol, topic) == TOPIC_AUTH
    finally:
        carol.close()
    _grant(cluster, _acl(K.TOPIC, topic, "User:carol", K.WRITE))  # mapped from CN=carol
    carol = connect()
    try:
        assert _produce(carol, topic) == 0
    finally:
        carol.close()
    # no client certificate: the handshake fails (ssl.client.auth=required)
    bare = RawClient(f"127.0.0.1:{cluster.ports['MTLS']}")
    try:
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            plain_ctx = ssl.create_default_context(cafile=str(cluster.pki.ca_pem))
            bare.sock = plain_ctx.wrap_socket(bare.sock, server_hostname="localhost")
            _metadata(bare, [])
    finally:
        bare.close()


def test_confluent_kafka_consumer_needs_group_and_topic_read(cluster: Cluster) -> None:
    from confluent_kafka import Consumer, KafkaError, Producer

    topic = f"ck-{uuid.uuid4().hex[:8]}"
    group = f"grp-{topic}"
    _create_topic(cluster, topic)
    conf = {"bootstrap.servers": f"127.0.0.1:{cluster.ports['SASL']}",
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": "alice", "sasl.password": "alice-secret"}
    p = Producer({**conf, "message.timeout.ms": 5000})
    delivered: list[Any] = []
    p.produce(topic, b"v", on_delivery=lambda err, msg: delivered.append(err))
    p.flush(20)
    assert delivered and delivered[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    _grant(cluster, _acl(K.TOPIC, topic, "User:alice", K.WRITE),
           _acl(K.TOPIC, topic, "User:alice", K.READ))
    p = Producer(conf)
    p.produce(topic, b"v1")
    assert p.flush(30) == 0
    c = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    err = None
    deadline = time.monotonic() + 30
    while err is None and time.monotonic() < deadline:
        m = c.poll(1)
        if m is not None and m.error() is not None:
            err = m.error()
    c.close()
    assert err is not None and err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    _grant(cluster, _acl(K.GROUP, group, "User:alice", K.READ))
    c = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got = None
    deadline = time.monotonic() + 60
    while got is None and time.monotonic() < deadline:
        m = c.poll(1)
        if m is not None and m.error() is None:
            got = m.value()
    c.close()
    assert got == b"v1"


def test_configs_transactions_and_cluster_apis(cluster: Cluster) -> None:
    from protocol._generated.describe_cluster_request import DescribeClusterRequest
    from protocol._generated.describe_configs_request import DescribeConfigsRequest
    from protocol._generated.describe_user_scram_credentials_request import (
        DescribeUserScramCredentialsRequest,
    )
    from protocol._generated.init_producer_id_request import InitProducerIdRequest

    topic = f"cfg-{uuid.uuid4().hex[:8]}"
    _create_topic(cluster, topic)
    bob = cluster.user("bob")
    try:
        Res = DescribeConfigsRequest.DescribeConfigsResource
        r = bob.request(DescribeConfigsRequest(resources=[
            Res(resource_type=2, resource_name=topic, configuration_keys=None),
            Res(resource_type=4, resource_name="1", configuration_keys=None)]), 4)
        assert [x.error_code for x in r.results] == [TOPIC_AUTH, CLUSTER_AUTH]
        # idempotence needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic
        ip = bob.request(InitProducerIdRequest(transactional_id=None,
                                               transaction_timeout_ms=60000), 4)
        assert ip.error_code == CLUSTER_AUTH
        ip = bob.request(InitProducerIdRequest(transactional_id="bob-txn",
                                               transaction_timeout_ms=60000), 4)
        assert ip.error_code == TXN_AUTH
        # DescribeCluster is open to all, with the principal's operations (none here)
        dc = bob.request(DescribeClusterRequest(include_cluster_authorized_operations=True), 1)
        assert dc.error_code == 0 and dc.cluster_authorized_operations == 0
        scram = bob.request(DescribeUserScramCredentialsRequest(users=None), 0)
        assert scram.error_code == CLUSTER_AUTH
        # named users: one error result per user, as Kafka 4.3.1 (issue 27: none before)
        U = DescribeUserScramCredentialsRequest.UserName
        scram = bob.request(DescribeUserScramCredentialsRequest(
            users=[U(name="alice"), U(name="bob")]), 0)
        assert scram.error_code == CLUSTER_AUTH
        assert [(x.user, x.error_code, x.error_message) for x in scram.results] == [
            ("", CLUSTER_AUTH, "Cluster authorization failed.")] * 2
        _grant(cluster, _acl(K.TOPIC, topic, "User:bob", K.WRITE),
               _acl(K.TOPIC, topic, "User:bob", K.DESCRIBE_CONFIGS),
               _acl(K.CLUSTER, K.CLUSTER_NAME, "User:bob", K.DESCRIBE))
        ip = bob.request(InitProducerIdRequest(transactional_id=None,
                                               transaction_timeout_ms=60000), 4)
        assert ip.error_code == 0 and ip.producer_id >= 0
        r = bob.request(DescribeConfigsRequest(resources=[
            Res(resource_type=2, resource_name=topic, configuration_keys=None)]), 4)
        assert r.results[0].error_code == 0 and r.results[0].configs
        dc = bob.request(DescribeClusterRequest(include_cluster_authorized_operations=True), 1)
        assert dc.error_code == 0 and dc.cluster_authorized_operations == 1 << K.DESCRIBE
    finally:
        bob.close()


def test_group_authorized_operations(cluster: Cluster) -> None:
    """A group's authorized operations include DESCRIBE_CONFIGS and ALTER_CONFIGS (Kafka 4.x,
    KIP-848 group configs): all five for a super user, the granted ones (and what they imply)
    for others. Issue 27: librdkafka's 0081 expects 5 operations, kafkawire listed 3."""
    group = f"ops-{uuid.uuid4().hex[:8]}"
    five = sum(1 << op for op in (K.READ, K.DELETE, K.DESCRIBE, K.DESCRIBE_CONFIGS,
                                  K.ALTER_CONFIGS))
    assert five == 3400
    admin = cluster.admin()
    try:
        d = admin.request(DescribeGroupsRequest(groups=[group],
                                                include_authorized_operations=True), 5)
        assert d.groups[0].authorized_operations == five
    finally:
        admin.close()
    _grant(cluster, _acl(K.GROUP, group, "User:bob", K.READ),
           _acl(K.GROUP, group, "User:bob", K.ALTER_CONFIGS))
    bob = cluster.user("bob")
    try:
        d = bob.request(DescribeGroupsRequest(groups=[group],
                                              include_authorized_operations=True), 5)
        assert d.groups[0].error_code == 0
        assert d.groups[0].authorized_operations == sum(1 << op for op in (
            K.READ, K.DESCRIBE, K.DESCRIBE_CONFIGS, K.ALTER_CONFIGS))
    finally:
        bob.close()


def test_broker_configs_list_what_kafka_lists(cluster: Cluster) -> None:
    """DescribeConfigs of a broker lists Kafka 4.3.1's broker configs (340 keys it defines,
    measured on a real broker) plus every other key of the properties file, as Kafka does
    (issue 27: kafkawire listed 203 and left out keys set in the file)."""
    from protocol._generated.describe_configs_request import DescribeConfigsRequest

    R = DescribeConfigsRequest
    admin = cluster.admin()
    try:
        res = admin.request(R(resources=[R.DescribeConfigsResource(
            resource_type=4, resource_name="1", configuration_keys=None)],
            include_synonyms=True), 4).results[0]
    finally:
        admin.close()
    assert res.error_code == 0
    got = {e.name: e for e in res.configs}

    def entry(name: str) -> tuple[Any, ...]:
        e = got[name]
        return (e.value, e.config_source, e.read_only, e.is_sensitive, e.config_type,
                [(s.name, s.value, s.source) for s in e.synonyms])

    STATIC, DEFAULT = 4, 5
    known = [n for n, e in got.items() if e.config_type != 0
             and not n.startswith("listener.name.")]
    assert len(known) == 340
    assert not {"cluster.id", "group.share.enable",
                "producer.id.expiration.check.interval.ms"} & got.keys()  # not Kafka's
    assert entry("connections.max.reauth.ms") == ("3600000", STATIC, True, False, 5, [
        ("connections.max.reauth.ms", "3600000", STATIC),
        ("connections.max.reauth.ms", "0", DEFAULT)])
    assert entry("ssl.keystore.type") == ("JKS", DEFAULT, False, False, 2, [
        ("ssl.keystore.type", "JKS", DEFAULT)])
    assert entry("listener.name.mtls.ssl.keystore.type") == ("PEM", STATIC, True, False, 2, [
        ("listener.name.mtls.ssl.keystore.type", "PEM", STATIC),
        ("ssl.keystore.type", "JKS", DEFAULT)])
    assert entry("listener.name.sasl.plain.sasl.jaas.config") == (None, STATIC, True, True, 9, [
        ("listener.name.sasl.plain.sasl.jaas.config", None, STATIC)])
    assert entry("sasl.enabled.mechanisms") == ("PLAIN", STATIC, False, False, 7, [
        ("sasl.enabled.mechanisms", "PLAIN", STATIC),
        ("sasl.enabled.mechanisms", "GSSAPI", DEFAULT)])
    assert entry("my.custom.key") == (None, STATIC, True, True, 0, [
        ("my.custom.key", None, STATIC)])
