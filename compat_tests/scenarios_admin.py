"""Scenarios for the cluster-level APIs: DescribeQuorum, and what a broker without an
authorizer, SASL or delegation tokens answers (ACLs, SaslHandshake/Authenticate, tokens).

Registered into ``compat_tests.scenarios.SCENARIOS`` when that module is imported.
"""

# ruff: noqa: B023
from __future__ import annotations

import time
from typing import Any

from compat_tests.scenarios import Outcome, Steps, connect, err, norm, scenario
from protocol._generated.create_acls_request import CreateAclsRequest
from protocol._generated.create_delegation_token_request import CreateDelegationTokenRequest
from protocol._generated.delete_acls_request import DeleteAclsRequest
from protocol._generated.describe_acls_request import DescribeAclsRequest
from protocol._generated.describe_delegation_token_request import DescribeDelegationTokenRequest
from protocol._generated.describe_quorum_request import DescribeQuorumRequest
from protocol._generated.expire_delegation_token_request import ExpireDelegationTokenRequest
from protocol._generated.renew_delegation_token_request import RenewDelegationTokenRequest
from protocol._generated.sasl_authenticate_request import SaslAuthenticateRequest
from protocol._generated.sasl_handshake_request import SaslHandshakeRequest

METADATA_TOPIC = "__cluster_metadata"
NOW_WINDOW_MS = 120_000


def _now_or_raw(ts: int, now_ms: int) -> Any:
    """``"now"`` for a wall-clock stamp taken during the step (the two brokers' clocks differ
    only by when the request ran), ``-1`` and anything else unchanged."""
    return "now" if ts > 0 and abs(ts - now_ms) < NOW_WINDOW_MS else ts


def _quorum_request(parts: dict[str, list[int]]) -> DescribeQuorumRequest:
    R = DescribeQuorumRequest
    return R(
        topics=[
            R.TopicData(topic_name=t, partitions=[R.PartitionData(partition_index=p) for p in ps])
            for t, ps in parts.items()
        ]
    )


def _quorum_outcome(r: Any, version: int) -> dict[str, Any]:
    now_ms = int(time.time() * 1000)
    partitions = []
    for t in r.topics:
        for p in t.partitions:
            voters = list(p.current_voters)
            leader_leo = next(
                (v.log_end_offset for v in voters if v.replica_id == p.leader_id), None
            )
            hw: Any = p.high_watermark
            if p.error_code == 0 and leader_leo is not None and 0 < hw <= leader_leo:
                hw = "positive, at most the leader's log end offset"
            partitions.append(
                {
                    "topic": t.topic_name,
                    "partition": p.partition_index,
                    "error_code": err(p.error_code),
                    "error_message": p.error_message if version >= 2 else None,
                    "leader_id": p.leader_id,
                    "leader_epoch": p.leader_epoch,
                    "high_watermark": hw,
                    "voters": [
                        {
                            "replica_id": v.replica_id,
                            "directory_id": str(v.replica_directory_id),
                            "log_end_offset": "> 0" if v.log_end_offset > 0 else v.log_end_offset,
                            "last_fetch": _now_or_raw(v.last_fetch_timestamp, now_ms),
                            "last_caught_up": _now_or_raw(v.last_caught_up_timestamp, now_ms),
                        }
                        for v in voters
                    ],
                    "observers": len(p.observers),
                }
            )
    out: dict[str, Any] = {
        "error_code": err(r.error_code),
        "error_message": r.error_message if version >= 2 else None,
        "partitions": partitions,
    }
    if version >= 2:
        # Keyed by node id; host kept, port only checked (the brokers' ports differ).
        out["nodes"] = {
            str(n.node_id): {
                "names": [ln.name for ln in n.listeners],
                "hosts": [ln.host for ln in n.listeners],
                "ports_set": all(ln.port > 0 for ln in n.listeners),
            }
            for n in r.nodes
        }
    return out


@scenario
def describe_quorum(bootstrap: str) -> Outcome:
    """DescribeQuorum v0-v2 (``kafka-metadata-quorum``) on the broker listener, and the
    requests that do not name exactly ``__cluster_metadata`` partition 0."""
    out = Steps()
    with connect(bootstrap) as c:
        for v in (0, 1, 2):
            out.step(
                f"v{v}",
                lambda: _quorum_outcome(c.request(_quorum_request({METADATA_TOPIC: [0]}), v), v),
            )
        cases = {
            "other_partition": {METADATA_TOPIC: [1]},
            "other_topic": {"describe_quorum": [0]},
            "two_partitions": {METADATA_TOPIC: [0, 0]},
            "two_topics": {METADATA_TOPIC: [0], "describe_quorum": [0]},
            "no_topics": {},
        }
        for name, parts in cases.items():
            out.step(name, lambda: _quorum_outcome(c.request(_quorum_request(parts), 2), 2))
    return out


def _with_messages(r: Any) -> Any:
    """``norm`` keeps error codes but drops messages; these scenarios compare messages too."""
    d = norm(r)
    msgs: list[Any] = []

    def collect(obj: Any) -> None:
        for name in ("error_message",):
            if hasattr(obj, name):
                msgs.append(getattr(obj, name))
        for slot in getattr(obj, "__slots__", ()):
            v = getattr(obj, slot, None)
            if isinstance(v, list):
                for x in v:
                    collect(x)

    collect(r)
    d["messages"] = msgs
    return d


@scenario
def security_disabled(bootstrap: str) -> Outcome:
    """No authorizer, PLAINTEXT listener: ACL requests get SECURITY_DISABLED, SASL requests
    ILLEGAL_SASL_STATE, delegation-token requests DELEGATION_TOKEN_REQUEST_NOT_ALLOWED."""
    out = Steps()
    acl_filter = {
        "resource_type_filter": 1,  # ANY
        "resource_name_filter": None,
        "pattern_type_filter": 1,  # ANY
        "principal_filter": None,
        "host_filter": None,
        "operation": 1,  # ANY
        "permission_type": 1,  # ANY
    }
    with connect(bootstrap) as c:
        for v in (1, 2, 3):
            out.step(
                f"describe_acls_v{v}",
                lambda: _with_messages(c.request(DescribeAclsRequest(**acl_filter), v)),
            )
        creation = CreateAclsRequest.AclCreation(
            resource_type=2,  # TOPIC
            resource_name="security_disabled",
            resource_pattern_type=3,  # LITERAL
            principal="User:alice",
            host="*",
            operation=3,  # READ
            permission_type=3,  # ALLOW
        )
        for v in (1, 3):
            out.step(
                f"create_acls_v{v}",
                lambda: _with_messages(
                    c.request(CreateAclsRequest(creations=[creation, creation]), v)
                ),
            )
        out.step(
            "create_acls_none",
            lambda: _with_messages(c.request(CreateAclsRequest(creations=[]), 3)),
        )
        out.step(
            "delete_acls_v3",
            lambda: _with_messages(
                c.request(
                    DeleteAclsRequest(filters=[DeleteAclsRequest.DeleteAclsFilter(**acl_filter)]),
                    3,
                )
            ),
        )
        for v in (0, 1):
            out.step(
                f"sasl_handshake_v{v}",
                lambda: norm(c.request(SaslHandshakeRequest(mechanism="PLAIN"), v)),
            )
        for v in (0, 1, 2):
            out.step(
                f"sasl_authenticate_v{v}",
                lambda: _with_messages(
                    c.request(SaslAuthenticateRequest(auth_bytes=b"\0alice\0secret"), v)
                ),
            )
        for v in (1, 2, 3):
            out.step(
                f"create_token_v{v}",
                lambda: norm(
                    c.request(
                        CreateDelegationTokenRequest(
                            owner_principal_type="User",
                            owner_principal_name="bob" if v >= 3 else None,
                            renewers=[],
                            max_lifetime_ms=-1,
                        ),
                        v,
                    )
                ),
            )
            out.step(
                f"describe_token_v{v}",
                lambda: norm(c.request(DescribeDelegationTokenRequest(owners=None), v)),
            )
        for v in (1, 2):
            out.step(
                f"renew_token_v{v}",
                lambda: norm(
                    c.request(RenewDelegationTokenRequest(hmac=b"x", renew_period_ms=1000), v)
                ),
            )
            out.step(
                f"expire_token_v{v}",
                lambda: norm(
                    c.request(
                        ExpireDelegationTokenRequest(hmac=b"x", expiry_time_period_ms=1000), v
                    )
                ),
            )
    out.step("confluent_admin", lambda: _confluent_acls(bootstrap))
    return out


def _confluent_acls(bootstrap: str) -> dict[str, Any]:
    """librdkafka's AdminClient describe/create/delete ACLs: the error each one raises."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    any_filter = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    binding = AclBinding(
        ResourceType.TOPIC,
        "security_disabled",
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )

    def outcome(fut: Any) -> str:
        try:
            fut.result(30)
            return "ok"
        except KafkaException as e:
            return str(e.args[0].name())

    return {
        "describe": outcome(admin.describe_acls(any_filter, request_timeout=30)),
        "create": outcome(admin.create_acls([binding], request_timeout=30)[binding]),
        "delete": outcome(admin.delete_acls([any_filter], request_timeout=30)[any_filter]),
    }


@scenario
def cluster_admin_extras(bootstrap: str) -> Outcome:
    """ElectLeaders, Alter/ListPartitionReassignments, ListConfigResources on a single node
    (nothing to elect, nothing to move), and ``kafka-leader-election``."""
    from compat_tests.scenarios import _java, _last_error_line, create_topic
    from protocol._generated.alter_partition_reassignments_request import (
        AlterPartitionReassignmentsRequest as APR,
    )
    from protocol._generated.elect_leaders_request import ElectLeadersRequest as EL
    from protocol._generated.list_config_resources_request import (
        ListConfigResourcesRequest as LCR,
    )
    from protocol._generated.list_partition_reassignments_request import (
        ListPartitionReassignmentsRequest as LPR,
    )

    topic = "cluster_admin_extras"
    out = Steps()
    with connect(bootstrap) as c:
        create_topic(c, topic, 2)
        named = [
            EL.TopicPartitions(topic=topic, partitions=[0, 1, 5]),
            EL.TopicPartitions(topic=f"{topic}-none", partitions=[0]),
        ]
        for v in (0, 1, 2):
            out.step(
                f"elect_v{v}",
                lambda: _with_messages(
                    c.request(EL(election_type=0, topic_partitions=named, timeout_ms=30000), v)
                ),
            )
        out.step(
            "elect_unclean",
            lambda: _with_messages(
                c.request(EL(election_type=1, topic_partitions=named[:1], timeout_ms=30000), 2)
            ),
        )
        out.step(
            "elect_all",
            lambda: norm(c.request(EL(election_type=0, topic_partitions=None, timeout_ms=30000), 2)),
        )
        for name, topics in (
            ("list_reassign_all", None),
            ("list_reassign_named", [LPR.ListPartitionReassignmentsTopics(
                name=topic, partition_indexes=[0, 1, 9])]),
            ("list_reassign_unknown", [LPR.ListPartitionReassignmentsTopics(
                name=f"{topic}-none", partition_indexes=[0])]),
        ):
            out.step(name, lambda: norm(c.request(LPR(timeout_ms=30000, topics=topics), 0)))
        P = APR.ReassignablePartition  # noqa: N806
        cases = [
            P(partition_index=0, replicas=[1]),
            P(partition_index=1, replicas=None),
            P(partition_index=1, replicas=[2]),
            P(partition_index=7, replicas=[1]),
            P(partition_index=0, replicas=[1, 1]),
            P(partition_index=0, replicas=[]),
        ]
        for v in (0, 1):
            req = APR(timeout_ms=30000, topics=[
                APR.ReassignableTopic(name=topic, partitions=cases),
                APR.ReassignableTopic(name=f"{topic}-none", partitions=[P(partition_index=0,
                                                                           replicas=[1])]),
            ])
            out.step(f"alter_reassign_v{v}", lambda: _with_messages(c.request(req, v)))

        def resources(types: list[int] | None, version: int = 1) -> dict[str, Any]:
            r = c.request(LCR(resource_types=types or []), version)
            # other scenarios' topics differ between runs: keep this scenario's and the node's
            kept = sorted(
                [x.resource_type, x.resource_name]
                for x in r.config_resources
                if x.resource_type != 2 or x.resource_name.startswith(topic)
            )
            return {"error_code": err(r.error_code), "resources": kept}

        out.step("config_resources_all", lambda: resources(None))
        out.step("config_resources_topics", lambda: resources([2]))
        out.step("config_resources_brokers", lambda: resources([4, 8]))
        out.step("config_resources_groups_client_metrics", lambda: resources([16, 32]))
        out.step("config_resources_bad_type", lambda: resources([99]))
        out.step("config_resources_v0", lambda: resources(None, 0))
    for version in ("4.x", "3.9"):
        rc, so, se = _java(
            "org.apache.kafka.tools.LeaderElectionCommand",
            ["--bootstrap-server", bootstrap, "--election-type", "PREFERRED", "--topic", topic,
             "--partition", "0"],
            version,
        )
        out.step(f"leader_election_tool_{version}",
                 lambda: [rc, so.strip().splitlines(), _last_error_line(se)])
    return out
