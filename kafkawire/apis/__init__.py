"""Request handlers, one module per API key, and the registry ApiVersions is computed from.

Each module defines ``API_KEY``, ``VERSIONS = (min, max)`` (what we really serve), optionally
``ADVERTISED_MIN`` (Kafka's ApiVersions quirks), and ``async def handle(broker, ctx, request)``
returning the response object (or None for no response, e.g. acks=0).
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from protocol._generated import API_INFO, REQUESTS, RESPONSES

MODULES = [
    "api_versions",
    "metadata",
    "produce",
    "fetch",
    "list_offsets",
    "offset_for_leader_epoch",
    "init_producer_id",
    "create_topics",
    "delete_topics",
    "create_partitions",
    "describe_configs",
    "alter_configs",
    "incremental_alter_configs",
    "describe_cluster",
    "describe_topic_partitions",
    "describe_log_dirs",
    "alter_replica_log_dirs",
    "delete_records",
    "find_coordinator",
    "join_group",
    "sync_group",
    "heartbeat",
    "leave_group",
    "offset_commit",
    "offset_fetch",
    "list_groups",
    "describe_groups",
    "delete_groups",
    "offset_delete",
    "txn_offset_commit",
    "consumer_group_heartbeat",
    "consumer_group_describe",
    "share_group_heartbeat",
    "share_group_describe",
    "share_fetch",
    "share_acknowledge",
    "describe_share_group_offsets",
    "alter_share_group_offsets",
    "delete_share_group_offsets",
    "initialize_share_group_state",
    "read_share_group_state",
    "write_share_group_state",
    "delete_share_group_state",
    "read_share_group_state_summary",
    "describe_quorum",
    "elect_leaders",
    "alter_partition_reassignments",
    "list_partition_reassignments",
    "list_config_resources",
    "describe_client_quotas",
    "alter_client_quotas",
    "describe_user_scram_credentials",
    "alter_user_scram_credentials",
    "update_features",
    # No authorizer, no SASL, PLAINTEXT only: answered as Kafka answers in that configuration.
    "sasl_handshake",
    "sasl_authenticate",
    "describe_acls",
    "create_acls",
    "delete_acls",
    "create_delegation_token",
    "renew_delegation_token",
    "expire_delegation_token",
    "describe_delegation_token",
    "write_txn_markers",
    "describe_producers",
    "add_partitions_to_txn",
    "add_offsets_to_txn",
    "end_txn",
    "describe_transactions",
    "list_transactions",
    # KIP-714 client telemetry: advertised only with metrics.client.telemetry.enable=true
    "get_telemetry_subscriptions",
    "push_telemetry",
    # the controller's broker-facing APIs (controller listener; UnregisterBroker on both)
    "broker_registration",
    "broker_heartbeat",
    "unregister_broker",
    "allocate_producer_ids",
    "alter_partition",
    "assign_replicas_to_dirs",
    "envelope",
    # KRaft (controller listener): answered by the Raft driver (kafkawire/metadata/raft_driver.py)
    "vote",
    "begin_quorum_epoch",
    "end_quorum_epoch",
    "fetch_snapshot",
    # KIP-853 voter changes (kafka-metadata-quorum add-controller / remove-controller)
    "add_raft_voter",
    "remove_raft_voter",
    "update_raft_voter",
]


@dataclass(frozen=True)
class ApiHandler:
    api_key: int
    name: str
    min_version: int
    max_version: int
    advertised_min: int
    flexible_from: int
    request_cls: Any
    response_cls: Any
    handle: Callable[..., Awaitable[Any]]
    #: a broker setting that must be on for ApiVersions to list this API ("" = always)
    optional: str = ""
    #: Kafka's listener types the API is served on ("broker", "controller")
    listeners: tuple[str, ...] = ("broker",)

    def flexible(self, version: int) -> bool:
        return 0 <= self.flexible_from <= version


def _load_class(ref: tuple[str, str]) -> Any:
    mod, cls = ref
    return getattr(importlib.import_module(f"protocol._generated.{mod}"), cls)


def build_registry(modules: list[str]) -> dict[int, ApiHandler]:
    reg: dict[int, ApiHandler] = {}
    for name in modules:
        m = importlib.import_module(f"kafkawire.apis.{name}")
        key = int(m.API_KEY)
        lo, hi = m.VERSIONS
        info = API_INFO[key]
        assert info[1] <= lo <= hi <= info[2], f"{name}: versions outside the spec"
        reg[key] = ApiHandler(
            api_key=key,
            name=info[0],
            min_version=lo,
            max_version=hi,
            advertised_min=int(getattr(m, "ADVERTISED_MIN", lo)),
            flexible_from=info[3],
            request_cls=_load_class(REQUESTS[key]),
            response_cls=_load_class(RESPONSES[key]),
            handle=m.handle,
            optional=str(getattr(m, "OPTIONAL", "")),
            listeners=tuple(info[4]),
        )
    return reg


REGISTRY: dict[int, ApiHandler] = build_registry(MODULES)
