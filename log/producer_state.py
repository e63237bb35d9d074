"""Idempotent / transactional producer state of one partition (Kafka's ProducerStateManager).

Per producer id we keep its epoch, the metadata of its last 5 data batches (first and last
sequence, last offset, offset delta, max timestamp), the coordinator epoch of its last
transaction marker and the first offset of its open transaction, if any.

Append checks for a client append (Kafka's ProducerAppendInfo semantics, Kafka 2.5+ / KIP-360):

* ``producerId == -1``: no checks at all.
* duplicate: same epoch and (first seq, last seq) equal to one of the last 5 batches -> the
  caller answers with the ORIGINAL offsets and writes nothing (:meth:`find_duplicate`).
* epoch lower than the current one -> ``INVALID_PRODUCER_EPOCH``.
* a new (higher) epoch must start at sequence 0 -> else ``OUT_OF_ORDER_SEQUENCE_NUMBER``.
  A producer id with no state at all (new, expired, or removed by retention) is accepted at any
  sequence: Kafka dropped UNKNOWN_PRODUCER_ID for this case in 2.5 (KIP-360).
* same epoch: first seq must be last seq + 1, where 0 follows 2147483647 -> else
  ``OUT_OF_ORDER_SEQUENCE_NUMBER``.
* a non-transactional batch while the producer has an open transaction -> ``INVALID_TXN_STATE``.
* transaction markers (control batches): epoch must not go backwards (transaction version 2:
  must be newer than the open transaction's, the coordinator bumped it for the marker) ->
  ``INVALID_PRODUCER_EPOCH``; a
  marker whose coordinator epoch is older than the last one seen ->
  ``TRANSACTION_COORDINATOR_FENCED``.

Validation is staged in a :class:`ProducerAppend` and only committed after the bytes are
written, so a failed append leaves the state untouched. Recovery replays batch headers through
the same code with checks off (Kafka's REPLICATION origin).

Snapshots (``<20-digit offset>.snapshot``, the state just before that offset) use Kafka's
producer snapshot format version 1, so Kafka's tools read them::

    int16 version (1) | uint32 crc (CRC-32C of all bytes after this field) |
    int32 count | count x { int64 producer_id, int16 epoch, int32 last_sequence,
    int64 last_offset, int32 offset_delta, int64 timestamp, int32 coordinator_epoch,
    int64 current_txn_first_offset }

followed by a kafkawire extension that Kafka's reader ignores (it reads the fields it knows and
checks the CRC over the whole file, trailer included)::

    b"KWX1" | int32 count | count x { int64 producer_id, int8 n,
    n x { int32 last_sequence, int64 last_offset, int32 offset_delta, int64 timestamp } }

holding the up-to-4 older batches of each producer, so duplicate detection covers all 5
batches after a restart (Kafka itself keeps only the last one across restarts).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import crc32c as _crc32c

from protocol.errors import ErrorCode, KafkaError
from protocol.records import BatchHeader

__all__ = [
    "BatchMetadata",
    "ProducerStateEntry",
    "ProducerAppend",
    "ProducerStateManager",
    "CompletedTxn",
    "CorruptSnapshotError",
    "write_snapshot",
    "read_snapshot",
    "NUM_BATCHES_TO_RETAIN",
    "SNAPSHOT_SUFFIX",
]

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
INT32_MAX = 0x7FFFFFFF
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1

CONTROL_ABORT = 0
CONTROL_COMMIT = 1


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def decrement_sequence(seq: int, delta: int) -> int:
    return seq - delta if seq >= delta else INT32_MAX - (delta - seq) + 1


class BatchMetadata(NamedTuple):
    last_seq: int
    last_offset: int
    offset_delta: int  # last offset - first offset of the batch
    timestamp_ms: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class CompletedTxn(NamedTuple):
    """A transaction closed by a marker at ``last_offset``."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: list[BatchMetadata] = field(default_factory=list)  # oldest first, at most 5
    coordinator_epoch: int = -1
    current_txn_first_offset: int | None = None
    last_timestamp_ms: int = -1

    @property
    def is_empty(self) -> bool:
        return not self.batches

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batches[-1].offset_delta if self.batches else 0

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(
            self.producer_id,
            self.producer_epoch,
            list(self.batches),
            self.coordinator_epoch,
            self.current_txn_first_offset,
            self.last_timestamp_ms,
        )

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for b in self.batches:
            if b.last_seq == last_seq and b.first_seq == first_seq:
                return b
        return None

    def _update_epoch(self, epoch: int) -> None:
        if epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = epoch

    def _add_batch(self, meta: BatchMetadata) -> None:
        self.batches.append(meta)
        if len(self.batches) > NUM_BATCHES_TO_RETAIN:
            del self.batches[0]


class _Staged:
    """The updates of one producer within one append (Kafka's "updatedEntry")."""

    __slots__ = ("current", "epoch", "new_batches", "coordinator_epoch", "txn_first", "last_ts")

    def __init__(self, current: ProducerStateEntry) -> None:
        self.current = current
        self.epoch = current.producer_epoch
        self.new_batches: list[BatchMetadata] = []
        self.coordinator_epoch = current.coordinator_epoch
        self.txn_first = current.current_txn_first_offset
        self.last_ts = current.last_timestamp_ms


class ProducerAppend:
    """Validation of one append's batches, applied by :meth:`ProducerStateManager.commit`."""

    __slots__ = ("_manager", "_validate", "_validate_epoch", "_staged", "completed_txns",
                 "started_txns")

    def __init__(self, manager: ProducerStateManager, validate: bool,
                 validate_epoch: bool | None = None) -> None:
        self._manager = manager
        self._validate = validate
        # Kafka's AppendOrigin.COORDINATOR: no sequence checks, but the producer epoch is
        # checked (only replication and recovery take any epoch)
        self._validate_epoch = validate if validate_epoch is None else validate_epoch
        self._staged: dict[int, _Staged] = {}
        self.completed_txns: list[CompletedTxn] = []
        self.started_txns: list[tuple[int, int]] = []  # (producer id, first offset)

    def _stage(self, pid: int) -> _Staged:
        st = self._staged.get(pid)
        if st is None:
            cur = self._manager.producers.get(pid) or ProducerStateEntry(pid)
            st = self._staged[pid] = _Staged(cur)
        return st

    def _check_epoch(self, st: _Staged, pid: int, epoch: int, offset: int) -> None:
        if epoch < st.epoch and self._validate_epoch:
            raise KafkaError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"epoch {epoch} of producer {pid} at offset {offset} is older than {st.epoch}",
            )

    def add_data_batch(self, h: BatchHeader) -> None:
        """Check and stage a data batch ``h`` (with its final offsets)."""
        pid = h.producer_id
        if pid < 0:
            return
        st = self._stage(pid)
        epoch = h.producer_epoch
        first_offset = h.base_offset
        last_offset = h.base_offset + h.last_offset_delta
        first_seq = h.base_sequence
        self._check_epoch(st, pid, epoch, first_offset)
        if self._validate:
            cur = st.current
            if epoch != st.epoch:
                if first_seq != 0 and st.epoch != NO_PRODUCER_EPOCH:
                    raise KafkaError(
                        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                        f"producer {pid}: new epoch {epoch} must start at sequence 0, got {first_seq}",
                    )
            else:
                if st.new_batches:
                    last_seq = st.new_batches[-1].last_seq
                elif epoch == cur.producer_epoch:
                    last_seq = cur.last_seq
                else:
                    last_seq = NO_SEQUENCE
                if cur.producer_epoch != NO_PRODUCER_EPOCH and not in_sequence(last_seq, first_seq):
                    raise KafkaError(
                        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                        f"producer {pid}: sequence {first_seq} does not follow {last_seq}",
                    )
        if epoch != st.epoch:
            st.new_batches.clear()
            st.epoch = epoch
        st.new_batches.append(
            BatchMetadata(h.last_sequence, last_offset, h.last_offset_delta, h.max_timestamp)
        )
        if len(st.new_batches) > NUM_BATCHES_TO_RETAIN:
            del st.new_batches[0]
        st.last_ts = h.max_timestamp
        transactional = h.is_transactional
        if st.txn_first is not None and not transactional:
            if self._validate:
                raise KafkaError(
                    ErrorCode.INVALID_TXN_STATE,
                    f"producer {pid} has an open transaction; expected a transactional batch",
                )
        elif st.txn_first is None and transactional:
            st.txn_first = first_offset
            self.started_txns.append((pid, first_offset))

    def add_control_batch(
        self, h: BatchHeader, control_type: int | None, coordinator_epoch: int | None,
        transaction_version: int = 0,
    ) -> CompletedTxn | None:
        """Check and stage a control batch. ``control_type``: 0 abort, 1 commit, None other.
        ``transaction_version`` 2 (WriteTxnMarkers v2, KIP-1228): the coordinator bumped the
        epoch for the marker, so it must be NEWER than the epoch of the producer's open
        transaction here; one at that epoch would close a transaction it does not belong to
        (INVALID_PRODUCER_EPOCH, as Kafka 4.3.1). The same epoch with no transaction open is
        a retry of a marker already written (KAFKA-19999) and is accepted."""
        pid = h.producer_id
        if pid < 0 or control_type not in (CONTROL_ABORT, CONTROL_COMMIT):
            return None
        st = self._stage(pid)
        epoch = h.producer_epoch
        self._check_epoch(st, pid, epoch, h.base_offset)
        if (
            transaction_version >= 2 and epoch == st.epoch and st.txn_first is not None
            and self._validate
        ):
            raise KafkaError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"transaction version 2 marker of producer {pid} at offset {h.base_offset} has "
                f"the epoch of the open transaction ({epoch}); it must be newer",
            )
        if coordinator_epoch is not None:
            if st.coordinator_epoch > coordinator_epoch and self._validate:
                raise KafkaError(
                    ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                    f"marker coordinator epoch {coordinator_epoch} < {st.coordinator_epoch}",
                )
            st.coordinator_epoch = coordinator_epoch
        if epoch != st.epoch:
            st.new_batches.clear()
            st.epoch = epoch
        completed = None
        if st.txn_first is not None:
            completed = CompletedTxn(
                pid, st.txn_first, h.base_offset + h.last_offset_delta, control_type == CONTROL_ABORT
            )
            self.completed_txns.append(completed)
        st.txn_first = None
        st.last_ts = h.max_timestamp
        return completed


class ProducerStateManager:
    """The producer map of one partition plus snapshot I/O helpers."""

    def __init__(self, producer_id_expiration_ms: int = 86_400_000) -> None:
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        #: producer id -> first offset of its open transaction (kept with ``producers`` so the
        #: LSO, asked for by every Fetch, never loops over all producers)
        self.ongoing: dict[int, int] = {}
        #: the state reflects all batches below this offset
        self.map_end_offset = 0

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def has_ongoing_txn(self, producer_id: int, producer_epoch: int) -> bool:
        """Does ``producer_id`` have a transaction open on this partition that was started at
        ``producer_epoch``? (Kafka's ``hasOngoingTransaction(pid, epoch)``.) A write with a
        newer epoch belongs to a new transaction even while the old one waits for its marker:
        with transaction version 2 every EndTxn bumps the epoch, and the next transaction's
        first write can reach the partition before the previous transaction's marker."""
        entry = self.producers.get(producer_id)
        return (
            entry is not None
            and entry.current_txn_first_offset is not None
            and entry.producer_epoch == producer_epoch
        )

    def find_duplicate(self, h: BatchHeader) -> BatchMetadata | None:
        """The stored batch ``h`` duplicates, if any (same epoch and sequence range)."""
        if h.producer_id < 0 or h.base_sequence < 0:
            return None
        entry = self.producers.get(h.producer_id)
        if entry is None:
            return None
        return entry.find_duplicate(h.producer_epoch, h.base_sequence, h.last_sequence)

    def prepare(self, *, validate: bool = True, validate_epoch: bool | None = None
                ) -> ProducerAppend:
        """``validate``: Kafka's checks for a client's write; ``validate_epoch`` (default: as
        ``validate``) only the producer epoch's, as for a coordinator's own write."""
        return ProducerAppend(self, validate, validate_epoch)

    def commit(self, pa: ProducerAppend, end_offset: int) -> None:
        for pid, st in pa._staged.items():
            entry = self.producers.get(pid)
            if entry is None:
                entry = self.producers[pid] = ProducerStateEntry(pid)
            entry._update_epoch(st.epoch)
            for b in st.new_batches:
                entry._add_batch(b)
            entry.coordinator_epoch = st.coordinator_epoch
            entry.current_txn_first_offset = st.txn_first
            if st.txn_first is None:
                self.ongoing.pop(pid, None)
            else:
                self.ongoing[pid] = st.txn_first
            entry.last_timestamp_ms = st.last_ts
        self.map_end_offset = max(self.map_end_offset, end_offset)

    def replay(
        self, h: BatchHeader, control: tuple[int, int] | None = None
    ) -> CompletedTxn | None:
        """Apply a batch read back from the log (recovery): no validation, never raises.
        Returns the transaction a marker closed, if any."""
        completed = None
        if h.producer_id >= 0:
            pa = ProducerAppend(self, validate=False)
            if h.is_control:
                if control is not None:
                    completed = pa.add_control_batch(h, control[0], control[1])
            else:
                pa.add_data_batch(h)
            self.commit(pa, h.base_offset + h.last_offset_delta + 1)
        else:
            self.map_end_offset = max(self.map_end_offset, h.base_offset + h.last_offset_delta + 1)
        return completed

    def is_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        return (
            entry.current_txn_first_offset is None
            and now_ms - entry.last_timestamp_ms >= self.producer_id_expiration_ms
        )

    def remove_expired(self, now_ms: int) -> list[int]:
        """Forget producers idle for ``producer.id.expiration.ms`` (none with an open txn)."""
        gone = [pid for pid, e in self.producers.items() if self.is_expired(e, now_ms)]
        for pid in gone:
            del self.producers[pid]
        return gone

    def first_undecided_offset(self) -> int | None:
        """The first offset of the oldest open transaction (for the LSO)."""
        ongoing = self.ongoing
        return min(ongoing.values()) if ongoing else None

    def last_stable_offset_after(self, txn: CompletedTxn) -> int:
        """Kafka's ``lastStableOffset(completedTxn)``, for the aborted-transaction index: once
        ``txn`` is closed (and committed here), the first offset of the oldest transaction of
        another producer that is still open, else the offset after the marker."""
        first = self.first_undecided_offset()
        return txn.last_offset + 1 if first is None else first

    def clear(self, offset: int = 0) -> None:
        self.producers.clear()
        self.ongoing.clear()
        self.map_end_offset = offset

    def load_entries(self, entries: Iterable[ProducerStateEntry], offset: int) -> None:
        self.producers = {e.producer_id: e for e in entries}
        self.ongoing = {
            e.producer_id: e.current_txn_first_offset
            for e in self.producers.values()
            if e.current_txn_first_offset is not None
        }
        self.map_end_offset = offset


# -- snapshot files -------------------------------------------------------------------------------

class CorruptSnapshotError(ValueError):
    pass


_HDR = struct.Struct(">hI")
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqiqiq")
_EXT_MAGIC = b"KWX1"
_EXT_PID = struct.Struct(">qb")
_EXT_BATCH = struct.Struct(">iqiq")


def snapshot_file_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    entries = list(entries)
    body = bytearray(_COUNT.pack(len(entries)))
    for e in entries:
        body += _ENTRY.pack(
            e.producer_id,
            e.producer_epoch,
            e.last_seq,
            e.last_data_offset,
            e.last_offset_delta,
            e.last_timestamp_ms,
            e.coordinator_epoch,
            -1 if e.current_txn_first_offset is None else e.current_txn_first_offset,
        )
    older = [e for e in entries if len(e.batches) > 1]
    body += _EXT_MAGIC + _COUNT.pack(len(older))
    for e in older:
        body += _EXT_PID.pack(e.producer_id, len(e.batches) - 1)
        for b in e.batches[:-1]:
            body += _EXT_BATCH.pack(b.last_seq, b.last_offset, b.offset_delta, b.timestamp_ms)
    return _HDR.pack(SNAPSHOT_VERSION, _crc32c.crc32c(body)) + bytes(body)


def decode_snapshot(data: bytes) -> list[ProducerStateEntry]:
    try:
        version, crc = _HDR.unpack_from(data, 0)
        if version != SNAPSHOT_VERSION:
            raise CorruptSnapshotError(f"unknown snapshot version {version}")
        if _crc32c.crc32c(data[6:]) != crc:
            raise CorruptSnapshotError("snapshot CRC mismatch")
        (count,) = _COUNT.unpack_from(data, 6)
        if count < 0:
            raise CorruptSnapshotError("negative entry count")
        pos = 10
        out: dict[int, ProducerStateEntry] = {}
        for _ in range(count):
            pid, epoch, seq, last_offset, delta, ts, coord, txn = _ENTRY.unpack_from(data, pos)
            pos += _ENTRY.size
            batches = [BatchMetadata(seq, last_offset, delta, ts)] if last_offset >= 0 else []
            out[pid] = ProducerStateEntry(pid, epoch, batches, coord, txn if txn >= 0 else None, ts)
        if data[pos : pos + 4] == _EXT_MAGIC:
            pos += 4
            (n_ext,) = _COUNT.unpack_from(data, pos)
            pos += 4
            for _ in range(n_ext):
                pid, n = _EXT_PID.unpack_from(data, pos)
                pos += _EXT_PID.size
                older = []
                for _ in range(n):
                    older.append(BatchMetadata(*_EXT_BATCH.unpack_from(data, pos)))
                    pos += _EXT_BATCH.size
                e = out.get(pid)
                if e is not None and e.batches:
                    e.batches[:0] = older[-(NUM_BATCHES_TO_RETAIN - 1) :]
        return list(out.values())
    except struct.error as exc:
        raise CorruptSnapshotError(f"truncated snapshot: {exc}") from None


def write_snapshot(path: Path, entries: Iterable[ProducerStateEntry], *, sync: bool) -> None:
    """Write a snapshot atomically (temp file + rename); fsync it when ``sync``."""
    data = encode_snapshot(entries)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def read_snapshot(path: Path) -> list[ProducerStateEntry]:
    return decode_snapshot(path.read_bytes())
