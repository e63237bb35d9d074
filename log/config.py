"""Per-log configuration: Kafka's topic configs, snake_case with the unit last.

Each field names the Kafka property it stands for; defaults are Kafka's. ``from_properties``
accepts Kafka's dotted names (as in CreateTopics/AlterConfigs) and ignores keys that are not
storage settings, so a topic's whole config map can be passed in.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from protocol.errors import ErrorCode, KafkaError

__all__ = ["LogConfig", "TimestampType", "LONG_MAX"]

LONG_MAX = 9223372036854775807


class TimestampType(StrEnum):
    """``message.timestamp.type``."""

    CREATE_TIME = "CreateTime"
    LOG_APPEND_TIME = "LogAppendTime"


@dataclass(frozen=True, slots=True)
class LogConfig:
    #: ``segment.bytes``: roll a new segment before the active one would exceed this size.
    segment_bytes: int = 1024 * 1024 * 1024
    #: ``segment.ms``: roll when the active segment's first batch is older than this.
    segment_ms: int = 7 * 24 * 60 * 60 * 1000
    #: ``index.interval.bytes``: bytes of batches between two sparse index entries.
    index_interval_bytes: int = 4096
    #: ``segment.index.bytes``: largest size of one offset or time index file.
    segment_index_bytes: int = 10 * 1024 * 1024
    #: ``message.timestamp.type``.
    message_timestamp_type: TimestampType = TimestampType.CREATE_TIME
    #: ``max.message.bytes``: largest record batch accepted by append.
    max_message_bytes: int = 1024 * 1024 + 12
    #: ``retention.ms``: delete segments whose newest timestamp is older; -1 = keep forever.
    retention_ms: int = 7 * 24 * 60 * 60 * 1000
    #: ``retention.bytes``: delete oldest segments while the log is larger; -1 = no limit.
    retention_bytes: int = -1
    #: ``segment.jitter.ms``: up to this much is taken off ``segment.ms`` per segment (a
    #: deterministic share of it, derived from the partition and base offset).
    segment_jitter_ms: int = 0
    #: ``cleanup.policy``: ``delete`` (retention), ``compact`` (log cleaner), or both.
    cleanup_policy: str = "delete"
    #: ``delete.retention.ms``: how long a tombstone (and an empty transaction's marker) is
    #: kept after the cleaner first saw it.
    delete_retention_ms: int = 86_400_000
    #: ``min.cleanable.dirty.ratio``: dirty share of the log above which the cleaner runs.
    min_cleanable_dirty_ratio: float = 0.5
    #: ``min.compaction.lag.ms``: segments with newer records are not cleaned yet.
    min_compaction_lag_ms: int = 0
    #: ``max.compaction.lag.ms``: a dirty segment older than this is cleaned whatever the ratio.
    max_compaction_lag_ms: int = LONG_MAX
    #: ``flush.messages``: fsync once this many messages are not yet durable.
    flush_messages: int = LONG_MAX
    #: ``flush.ms``: fsync when the last flush is older than this.
    flush_ms: int = LONG_MAX
    #: ``producer.id.expiration.ms`` (a broker config): forget idle producers after this.
    producer_id_expiration_ms: int = 86_400_000
    #: Not a Kafka config: segment files (other than the active one) kept open per log.
    open_segment_files_max: int = 8
    #: ``cleanup.policy`` contains ``compact``: the log cleaner keeps one record per key
    #: (derived; a plain attribute because Produce tests it on every request)
    compact: bool = dataclasses.field(init=False, default=False)
    #: ``cleanup.policy`` contains ``delete``: retention by time and size applies (derived)
    delete: bool = dataclasses.field(init=False, default=True)

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type is TimestampType.LOG_APPEND_TIME


    def __post_init__(self) -> None:
        if self.segment_bytes < 14:
            raise KafkaError(ErrorCode.INVALID_CONFIG, "segment.bytes must be at least 14")
        if self.segment_ms < 1:
            raise KafkaError(ErrorCode.INVALID_CONFIG, "segment.ms must be at least 1")
        if self.index_interval_bytes < 0:
            raise KafkaError(ErrorCode.INVALID_CONFIG, "index.interval.bytes must be >= 0")
        if self.segment_index_bytes < 12:
            raise KafkaError(ErrorCode.INVALID_CONFIG, "segment.index.bytes must be >= 12")
        if self.max_message_bytes < 0:
            raise KafkaError(ErrorCode.INVALID_CONFIG, "max.message.bytes must be >= 0")
        if self.open_segment_files_max < 1:
            raise ValueError("open_segment_files_max must be at least 1")
        if not 0.0 <= self.min_cleanable_dirty_ratio <= 1.0:
            raise KafkaError(
                ErrorCode.INVALID_CONFIG, "min.cleanable.dirty.ratio must be within [0, 1]"
            )
        if self.segment_jitter_ms < 0:
            raise KafkaError(ErrorCode.INVALID_CONFIG, "segment.jitter.ms must be >= 0")
        policies = _policies(self.cleanup_policy)
        if not policies <= {"delete", "compact"}:
            raise KafkaError(
                ErrorCode.INVALID_CONFIG, f"invalid cleanup.policy {self.cleanup_policy!r}"
            )
        object.__setattr__(self, "compact", "compact" in policies)
        object.__setattr__(self, "delete", "delete" in policies)

    def with_properties(self, props: Mapping[str, str | int | None]) -> LogConfig:
        """A copy with Kafka-named properties applied (``None`` values and unknown keys skipped)."""
        changes: dict[str, object] = {}
        internal = props.get("internal.segment.bytes")
        if internal is not None:  # Kafka's internal override wins over segment.bytes
            props = {**props, "segment.bytes": internal}
        for key, value in props.items():
            field = _PROPERTIES.get(key)
            if field is None or value is None:
                continue
            if field == "message_timestamp_type":
                try:
                    changes[field] = TimestampType(str(value))
                except ValueError:
                    raise KafkaError(
                        ErrorCode.INVALID_CONFIG, f"invalid value {value!r} for {key}"
                    ) from None
            elif field == "cleanup_policy":
                changes[field] = ",".join(sorted(_policies(str(value))))
            else:
                convert = float if field == "min_cleanable_dirty_ratio" else int
                try:
                    changes[field] = convert(value)
                except ValueError:
                    raise KafkaError(
                        ErrorCode.INVALID_CONFIG, f"invalid value {value!r} for {key}"
                    ) from None
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    @classmethod
    def from_properties(cls, props: Mapping[str, str | int | None]) -> LogConfig:
        return cls().with_properties(props)


_PROPERTIES = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "index.interval.bytes": "index_interval_bytes",
    "segment.index.bytes": "segment_index_bytes",
    "message.timestamp.type": "message_timestamp_type",
    "max.message.bytes": "max_message_bytes",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "producer.id.expiration.ms": "producer_id_expiration_ms",
    "segment.jitter.ms": "segment_jitter_ms",
    "cleanup.policy": "cleanup_policy",
    "delete.retention.ms": "delete_retention_ms",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "max.compaction.lag.ms": "max_compaction_lag_ms",
    "flush.messages": "flush_messages",
    "flush.ms": "flush_ms",
}


def _policies(value: str) -> set[str]:
    return {p.strip().lower() for p in value.split(",") if p.strip()}
