"""The records of ``__transaction_state``: Kafka's TransactionLogKey / TransactionLogValue.

One record per state change of a transactional id; the latest record of a key is its state
(the topic is compacted). Framing as Kafka's ``TransactionLog``:

* key = int16 version 0 + ``TransactionLogKey`` (the transactional id);
* value = int16 version + ``TransactionLogValue``: producer id, epoch, timeout, state byte,
  partitions (null in ``Empty``), last update and start timestamps. Version 0 while
  ``transaction.version`` < 2 (Kafka writes v0 then); v1 (flexible, with the tagged previous /
  next producer id, next epoch and client transaction version) with transaction version 2.
* a tombstone (null value) forgets an expired transactional id.

``kafka-dump-log --transaction-log-decoder`` reads what :func:`encode` writes. The in-memory
``last_producer_epoch`` is not part of the record (Kafka does not persist it either).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from protocol._generated.transaction_log_key import TransactionLogKey
from protocol._generated.transaction_log_value import TransactionLogValue
from protocol.coordinator import (
    CoordinatorRecord,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    record_type,
)
from protocol.primitives import RemoteProtocolError
from txn.state import TxnState

__all__ = [
    "TxnMetadata", "TopicPartition", "encode", "tombstone", "decode", "key_bytes", "RECORD_TYPE",
    "NO_PRODUCER_ID", "NO_PRODUCER_EPOCH",
]

TopicPartition = tuple[str, int]
RECORD_TYPE = TransactionLogKey.API_KEY  # 0
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


@dataclass(frozen=True, slots=True)
class TxnMetadata:
    """The state of one transactional id (immutable: a transition is a new object)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition] = field(default_factory=frozenset)
    start_ms: int = -1  # when the first partition of the transaction was added
    last_update_ms: int = -1
    prev_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    #: the epoch before the last InitProducerId bump (KIP-360 retries); not persisted
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    client_version: int = 0

    def persisted(self) -> tuple[object, ...]:
        """The fields a record carries (for comparing a replayed record with a transit)."""
        return (
            self.producer_id, self.producer_epoch, self.timeout_ms, self.state, self.partitions,
            self.start_ms, self.last_update_ms,
        )


def key_bytes(transactional_id: str) -> bytes:
    return encode_key(TransactionLogKey(transactional_id=transactional_id))


def encode(meta: TxnMetadata, version: int = 0) -> CoordinatorRecord:
    by_topic: dict[str, list[int]] = {}
    for topic, p in meta.partitions:
        by_topic.setdefault(topic, []).append(p)
    value = TransactionLogValue(
        producer_id=meta.producer_id,
        previous_producer_id=meta.prev_producer_id,
        next_producer_id=meta.next_producer_id,
        producer_epoch=meta.producer_epoch,
        transaction_timeout_ms=meta.timeout_ms,
        transaction_status=int(meta.state),
        transaction_last_update_timestamp_ms=meta.last_update_ms,
        transaction_start_timestamp_ms=meta.start_ms,
        client_transaction_version=meta.client_version,
    )
    # Kafka writes a null partition list in Empty
    value.transaction_partitions = (
        None if meta.state is TxnState.EMPTY else [
            TransactionLogValue.PartitionsSchema(topic=t, partition_ids=sorted(ps))
            for t, ps in sorted(by_topic.items())
        ]
    )
    return CoordinatorRecord(key_bytes(meta.transactional_id), encode_value(value, version))


def tombstone(transactional_id: str) -> CoordinatorRecord:
    return CoordinatorRecord(key_bytes(transactional_id), None)


def decode(rec: CoordinatorRecord) -> tuple[str, TxnMetadata | None]:
    """(transactional id, state or None for a tombstone). Raises RemoteProtocolError for a
    record that is not a readable transaction log record (unknown state byte included)."""
    if record_type(rec.key) != RECORD_TYPE:
        raise RemoteProtocolError(f"record type {record_type(rec.key)} is not a transaction log key")
    tid = decode_key(TransactionLogKey, rec.key).transactional_id
    if rec.value is None:
        return tid, None
    _, v = decode_value(TransactionLogValue, rec.value)
    try:
        state = TxnState(v.transaction_status)
    except ValueError:
        raise RemoteProtocolError(f"unknown transaction state {v.transaction_status}") from None
    partitions: frozenset[TopicPartition] = frozenset()
    if state is not TxnState.EMPTY and v.transaction_partitions:
        partitions = frozenset(
            (ps.topic, p) for ps in v.transaction_partitions for p in ps.partition_ids
        )
    return tid, TxnMetadata(
        transactional_id=tid,
        producer_id=v.producer_id,
        producer_epoch=v.producer_epoch,
        timeout_ms=v.transaction_timeout_ms,
        state=state,
        partitions=partitions,
        start_ms=v.transaction_start_timestamp_ms,
        last_update_ms=v.transaction_last_update_timestamp_ms,
        prev_producer_id=v.previous_producer_id,
        next_producer_id=v.next_producer_id,
        client_version=v.client_transaction_version,
    )

