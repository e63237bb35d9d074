"""Group coordinator limits and timeouts: each with its unit and Kafka's config key.

``GroupConfig.from_values(values)`` reads them from the broker's typed config values (the
runtime passes ``BrokerConfig.values``); the coordinator itself never reads configuration.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: Kafka's ``classicGroupNewMemberJoinTimeoutMs`` (not configurable in Kafka either): a new
#: member that joined during a rebalance but did not rejoin is removed after this.
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000

#: kafkawire's own limit (Kafka has none besides the request size): the protocol metadata of
#: one member (sum over its protocols) and one assignment may not exceed this. A larger
#: JoinGroup/SyncGroup is answered INVALID_REQUEST instead of storing it.
MEMBER_METADATA_MAX_BYTES = 1024 * 1024

#: Kafka's ``REGEX_BATCH_REFRESH_MIN_INTERVAL_MS`` (not configurable): a group's regular
#: expressions are resolved again at most this often (a new subscription to an unresolved
#: regex of a group without regexes is resolved at once).
REGEX_REFRESH_MIN_INTERVAL_MS = 10_000
#: kafkawire's bound on how stale a resolution may get without any new topic (Kafka refreshes
#: on new topics and on a new regex; this catches topics that went away), in ms.
REGEX_REFRESH_MAX_INTERVAL_MS = 600_000

#: ``group.consumer.migration.policy`` values: which online conversions are allowed
#: (empty groups convert in both directions whatever the policy).
MIGRATION_POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")


@dataclass(frozen=True)
class GroupConfig:
    #: group.min.session.timeout.ms / group.max.session.timeout.ms (ms)
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    #: group.initial.rebalance.delay.ms (ms): the first rebalance of an empty group waits
    #: this long for more members (extended while members keep joining, up to the
    #: rebalance timeout).
    initial_rebalance_delay_ms: int = 3000
    #: group.max.size (members); GROUP_MAX_SIZE_REACHED beyond it
    max_size: int = 2_147_483_647
    #: offsets.retention.minutes, in ms
    offsets_retention_ms: int = 7 * 24 * 60 * 60 * 1000
    #: offsets.retention.check.interval.ms (ms)
    offsets_retention_check_interval_ms: int = 600_000
    #: offset.metadata.max.bytes (bytes); OFFSET_METADATA_TOO_LARGE beyond it
    offset_metadata_max_bytes: int = 4096
    #: group.consumer.session.timeout.ms / group.consumer.heartbeat.interval.ms (KIP-848, ms)
    consumer_session_timeout_ms: int = 45_000
    consumer_heartbeat_interval_ms: int = 5000
    #: group.consumer.assignors (server-side assignors, the first is the default)
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    #: group.consumer.max.size (members of a KIP-848 group)
    consumer_max_size: int = 2_147_483_647
    #: group.consumer.migration.policy: disabled, upgrade, downgrade, bidirectional
    migration_policy: str = "bidirectional"
    #: group.consumer.assignment.interval.ms (Kafka 4.3): a target assignment is computed at
    #: most this often per group (0: at every change)
    consumer_assignment_interval_ms: int = 1000
    member_metadata_max_bytes: int = MEMBER_METADATA_MAX_BYTES
    new_member_join_timeout_ms: int = NEW_MEMBER_JOIN_TIMEOUT_MS

    @classmethod
    def from_values(cls, v: dict[str, Any]) -> GroupConfig:
        def get(key: str, default: int) -> int:
            x = v.get(key)
            return default if x is None else int(x)

        assignors = str(v.get("group.consumer.assignors") or "uniform,range")
        names = tuple(
            a.strip().rsplit(".", 1)[-1].replace("Assignor", "").lower()
            for a in assignors.split(",")
            if a.strip()
        )
        policy = str(v.get("group.consumer.migration.policy") or "bidirectional").strip().lower()
        return cls(
            min_session_timeout_ms=get("group.min.session.timeout.ms", 6000),
            max_session_timeout_ms=get("group.max.session.timeout.ms", 1_800_000),
            initial_rebalance_delay_ms=get("group.initial.rebalance.delay.ms", 3000),
            max_size=get("group.max.size", 2_147_483_647),
            offsets_retention_ms=get("offsets.retention.minutes", 10080) * 60_000,
            offsets_retention_check_interval_ms=get("offsets.retention.check.interval.ms", 600_000),
            offset_metadata_max_bytes=get("offset.metadata.max.bytes", 4096),
            consumer_session_timeout_ms=get("group.consumer.session.timeout.ms", 45_000),
            consumer_heartbeat_interval_ms=get("group.consumer.heartbeat.interval.ms", 5000),
            consumer_assignors=names or ("uniform", "range"),
            consumer_max_size=get("group.consumer.max.size", 2_147_483_647),
            migration_policy=policy if policy in MIGRATION_POLICIES else "bidirectional",
            consumer_assignment_interval_ms=get("group.consumer.assignment.interval.ms", 1000),
        )

    @property
    def upgrade_enabled(self) -> bool:
        return self.migration_policy in ("upgrade", "bidirectional")

    @property
    def downgrade_enabled(self) -> bool:
        return self.migration_policy in ("downgrade", "bidirectional")
