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

__all__ = ["LogConfig", "TimestampType"]


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
    #: ``producer.id.expiration.ms`` (a broker config): forget idle producers after this.
    producer_id_expiration_ms: int = 86_400_000
    #: Not a Kafka config: segment files (other than the active one) kept open per log.
    open_segment_files_max: int = 8

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

    def with_properties(self, props: Mapping[str, str | int | None]) -> LogConfig:
        """A copy with Kafka-named properties applied (``None`` values and unknown keys skipped)."""
        changes: dict[str, object] = {}
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
            else:
                try:
                    changes[field] = int(value)
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
}
