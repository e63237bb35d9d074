"""The transaction coordinator of one ``__transaction_state`` partition (sans-I/O).

A :class:`TxnShard` holds the state of every transactional id that hashes to its partition
(``txns``) and answers the transaction APIs as Kafka's ``TransactionCoordinator`` (transaction
version 1 semantics). It follows the coordinator contract of docs/COORDINATORS.md:

* ``op(request..., now_ms) -> (records, reply)``: an operation decides from the current state
  and returns the ``__transaction_state`` records that carry its transition plus the reply to
  send once they are committed. It never changes state itself.
* :meth:`replay` is the only mutator of persisted state: the runtime calls it for each record
  after appending it, and for every record of the partition when loading (restart = replay).
* Kafka keeps an in-memory ``pendingState`` to refuse requests while an append is in flight.
  The runtime makes op + append + replay atomic, so the only "pending" window left is the
  marker phase, and that is a persisted state (``PrepareCommit`` / ``PrepareAbort``): every
  request that would change the transaction then gets CONCURRENT_TRANSACTIONS.

The marker phase: when ``PrepareCommit`` / ``PrepareAbort`` is replayed, the transaction waits
for its markers. A driver (``kafkawire/txn_coordinator.py``) takes :meth:`marker_jobs`, writes
a COMMIT/ABORT marker to every partition of the transaction, then runs :meth:`complete` which
returns the ``CompleteCommit`` / ``CompleteAbort`` record. After a restart, transactions
replayed in a Prepare state are simply due again (markers are idempotent for the partitions).

Timers (:meth:`on_timer`, Kafka's scheduler intervals):

* every ``transaction.abort.timed.out.transaction.cleanup.interval.ms``: an ``Ongoing``
  transaction older than its ``transaction.timeout.ms`` is aborted by the coordinator with a
  bumped epoch (Kafka's epoch fence), so the producer that let it time out is fenced
  (PRODUCER_FENCED on its next request, INVALID_PRODUCER_EPOCH on its next Produce);
* every ``transaction.remove.expired.transaction.cleanup.interval.ms``: a transactional id idle
  for ``transactional.id.expiration.ms`` in ``Empty`` / ``Complete*`` is tombstoned.

Producer ids come from the broker's block allocation (``Broker.next_producer_id``), which is
asynchronous; an operation that needs a fresh id and has none answers :data:`NEED_PRODUCER_ID`
and the driver calls it again with one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import NamedTuple

from protocol.coordinator import CoordinatorRecord
from protocol.errors import ErrorCode
from protocol.primitives import RemoteProtocolError
from txn.records import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TopicPartition,
    TxnMetadata,
    decode,
    encode,
    tombstone,
)
from txn.state import VALID_PREVIOUS, TxnState, check_transition, from_name

__all__ = [
    "TxnConfig",
    "TxnShard",
    "InitResult",
    "MarkerJob",
    "TxnDescription",
    "NEED_PRODUCER_ID",
    "NeedProducerId",
    "epoch_exhausted",
    "state_names_to_filter",
    "check_init_request",
]

INT16_MAX = 32767
E = ErrorCode


def epoch_exhausted(epoch: int) -> bool:
    """Kafka never hands out an epoch of Short.MAX_VALUE, so a fence can always bump."""
    return epoch >= INT16_MAX - 1


@dataclass(frozen=True)
class TxnConfig:
    """Coordinator settings, by Kafka's broker config names."""

    max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    id_expiration_ms: int = 604_800_000  # transactional.id.expiration.ms
    abort_interval_ms: int = 10_000  # transaction.abort.timed.out.transaction.cleanup.interval.ms
    remove_expired_interval_ms: int = 3_600_000  # ...remove.expired.transaction.cleanup.interval.ms
    log_value_version: int = 0  # TransactionLogValue version: 1 only with transaction.version 2
    #: the cluster's finalized ``transaction.version``: the coordinator's own aborts (timeouts,
    #: fencing InitProducerId) use it, as Kafka's do
    transaction_version: int = 0


class NeedProducerId:
    """Reply of an operation that needs a fresh producer id: call again with one."""

    _instance: NeedProducerId | None = None

    def __new__(cls) -> NeedProducerId:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NEED_PRODUCER_ID"


NEED_PRODUCER_ID = NeedProducerId()


class InitResult(NamedTuple):
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


class MarkerJob(NamedTuple):
    """Markers to write for a transaction in a Prepare state."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: tuple[TopicPartition, ...]
    #: 2 when the coordinator bumped the epoch for these markers (transaction version 2)
    transaction_version: int = 0


class TxnDescription(NamedTuple):
    """One DescribeTransactions entry."""

    error: ErrorCode
    state: str = ""
    timeout_ms: int = 0
    start_ms: int = -1
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    partitions: tuple[TopicPartition, ...] = ()


Records = list[CoordinatorRecord]


class TxnShard:
    """Transaction coordinator state for one ``__transaction_state`` partition."""

    def __init__(self, partition: int, config: TxnConfig | None = None) -> None:
        self.partition = partition
        self.config = config or TxnConfig()
        self.txns: dict[str, TxnMetadata] = {}
        #: transit an operation prepared, by transactional id: replay takes the non-persisted
        #: fields (last_producer_epoch) from it when the record matches
        self._transits: dict[str, TxnMetadata] = {}
        #: transactional ids in a Prepare state (their markers are due), kept by replay
        self._due: set[str] = set()
        #: transactional ids whose markers a driver is writing (volatile)
        self._in_flight: set[str] = set()
        self._next_abort_ms: int | None = None
        self._next_expire_ms: int | None = None
        #: records replayed that break the transition table (kept: the log is the truth)
        self.irregular_replays = 0

    # ------------------------------------------------------------------------------------
    # the Shard protocol (kafkawire/coordinator_runtime.py)
    # ------------------------------------------------------------------------------------
    def replay(
        self, offset: int, producer_id: int, producer_epoch: int, record: CoordinatorRecord
    ) -> None:
        try:
            tid, meta = decode(record)
        except RemoteProtocolError:
            self.irregular_replays += 1  # not ours to read (another record type)
            return
        old = self.txns.get(tid)
        if meta is None:
            self.txns.pop(tid, None)
            self._due.discard(tid)
            self._in_flight.discard(tid)
            self._transits.pop(tid, None)
            return
        transit = self._transits.pop(tid, None)
        if transit is not None and transit.persisted() == meta.persisted():
            meta = transit
        if old is not None and old.state not in VALID_PREVIOUS[meta.state]:
            self.irregular_replays += 1
        self.txns[tid] = meta
        if meta.state.is_prepare:
            self._due.add(tid)
        else:
            self._due.discard(tid)
            self._in_flight.discard(tid)

    def replay_end_txn(
        self, offset: int, producer_id: int, producer_epoch: int, committed: bool
    ) -> None:
        pass  # markers never land in __transaction_state

    def on_loaded(self, now_ms: int) -> None:
        self._next_abort_ms = now_ms + self.config.abort_interval_ms
        self._next_expire_ms = now_ms + self.config.remove_expired_interval_ms

    def on_unloaded(self) -> None:
        self._in_flight.clear()

    def next_deadline_ms(self) -> int | None:
        ds = [d for d in (self._next_abort_ms, self._next_expire_ms) if d is not None]
        return min(ds) if ds else None

    def on_timer(self, now_ms: int) -> Records:
        records: Records = []
        if self._next_abort_ms is not None and now_ms >= self._next_abort_ms:
            records += self.abort_timed_out(now_ms)
            self._next_abort_ms = now_ms + self.config.abort_interval_ms
        if self._next_expire_ms is not None and now_ms >= self._next_expire_ms:
            records += self.expire(now_ms)
            self._next_expire_ms = now_ms + self.config.remove_expired_interval_ms
        return records

    # ------------------------------------------------------------------------------------
    # transitions
    # ------------------------------------------------------------------------------------
    def _transit(self, old: TxnMetadata | None, new: TxnMetadata) -> CoordinatorRecord:
        """Check ``old -> new`` against the table and remember the transit for replay."""
        check_transition(old.state if old is not None else None, new.state)
        self._transits[new.transactional_id] = new
        # v1 (flexible, with next producer id and client version) for version-2 transactions
        version = 1 if new.client_version >= 2 else self.config.log_value_version
        return encode(new, version)

    def _fence_and_abort(self, meta: TxnMetadata, now_ms: int) -> CoordinatorRecord:
        """Ongoing -> PrepareEpochFence -> PrepareAbort with the epoch bumped (one record).
        With transaction version 2 finalized the abort itself bumps once more (Kafka: the
        fence takes epoch + 1, the version-2 PrepareAbort epoch + 2), so a version-2 client
        still on the old epoch is told PRODUCER_FENCED rather than taken for a retry."""
        fenced = replace(
            meta, state=TxnState.PREPARE_EPOCH_FENCE, producer_epoch=meta.producer_epoch + 1,
            last_producer_epoch=NO_PRODUCER_EPOCH,
        )
        check_transition(meta.state, fenced.state)
        abort = replace(fenced, state=TxnState.PREPARE_ABORT, last_update_ms=now_ms)
        if self.config.transaction_version >= 2:
            abort = replace(
                abort, producer_epoch=fenced.producer_epoch + 1,
                last_producer_epoch=fenced.producer_epoch, client_version=2,
            )
        return self._transit(fenced, abort)

    def _fence_bumps(self) -> int:
        return 2 if self.config.transaction_version >= 2 else 1

    # ------------------------------------------------------------------------------------
    # InitProducerId
    # ------------------------------------------------------------------------------------
    def init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        now_ms: int,
        *,
        expected: tuple[int, int] | None = None,
        new_producer_id: int | None = None,
    ) -> tuple[Records, InitResult | NeedProducerId]:
        """InitProducerId with a transactional id. ``expected``: the (producer id, epoch) a
        v3+ client sends when it resumes after an error (KIP-360), None for a fresh start."""
        code = check_init_request(transactional_id, timeout_ms, self.config)
        if code != E.NONE:
            return [], InitResult(code)
        meta = self.txns.get(transactional_id)
        old = meta
        if meta is None:
            if new_producer_id is None:
                return [], NEED_PRODUCER_ID
            meta = TxnMetadata(
                transactional_id, new_producer_id, NO_PRODUCER_EPOCH, timeout_ms,
                TxnState.EMPTY, last_update_ms=now_ms,
            )
        if expected is not None and not _valid_producer_id(meta, expected):
            return [], InitResult(E.PRODUCER_FENCED)
        state = meta.state
        if state.is_prepare:
            return [], InitResult(E.CONCURRENT_TRANSACTIONS)
        if state is TxnState.ONGOING:
            # Abort the open transaction with a bumped epoch (fencing the old instance); the
            # client retries and gets the epoch bumped once more.
            if meta.producer_epoch >= INT16_MAX - self._fence_bumps() + 1:
                return [], InitResult(E.CONCURRENT_TRANSACTIONS)
            return [self._fence_and_abort(meta, now_ms)], InitResult(E.CONCURRENT_TRANSACTIONS)
        if state not in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            return [], InitResult(E.CONCURRENT_TRANSACTIONS)  # not persisted states; see state.py
        if epoch_exhausted(meta.producer_epoch) and (
            expected is None or expected[1] == meta.producer_epoch
        ):
            if new_producer_id is None:
                return [], NEED_PRODUCER_ID
            new = replace(
                meta, producer_id=new_producer_id, prev_producer_id=meta.producer_id,
                producer_epoch=0,
                last_producer_epoch=meta.producer_epoch if expected is not None else NO_PRODUCER_EPOCH,
            )
        else:
            bumped = meta.producer_epoch + 1
            if expected is None:
                epoch, last = bumped, NO_PRODUCER_EPOCH
            elif meta.producer_epoch == NO_PRODUCER_EPOCH or expected[1] == meta.producer_epoch:
                epoch, last = bumped, meta.producer_epoch
            elif expected[1] == meta.last_producer_epoch:
                epoch, last = meta.producer_epoch, meta.last_producer_epoch  # a retry
            else:
                return [], InitResult(E.PRODUCER_FENCED)
            new = replace(
                meta, producer_epoch=epoch, last_producer_epoch=last,
                prev_producer_id=meta.producer_id,
            )
        new = replace(
            new, state=TxnState.EMPTY, timeout_ms=timeout_ms, partitions=frozenset(),
            start_ms=-1, last_update_ms=now_ms,
        )
        return [self._transit(old, new)], InitResult(E.NONE, new.producer_id, new.producer_epoch)

    # ------------------------------------------------------------------------------------
    # AddPartitionsToTxn / AddOffsetsToTxn
    # ------------------------------------------------------------------------------------
    def _check_producer(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> TxnMetadata | ErrorCode:
        if transactional_id == "":
            return E.INVALID_REQUEST
        meta = self.txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING
        if meta.producer_epoch != producer_epoch:
            return E.PRODUCER_FENCED
        return meta

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        now_ms: int,
        client_version: int = 0,
    ) -> tuple[Records, ErrorCode]:
        """Add partitions (AddPartitionsToTxn, AddOffsetsToTxn; with ``client_version`` 2 the
        implicit add of Produce v12 / TxnOffsetCommit v5)."""
        meta = self._check_producer(transactional_id, producer_id, producer_epoch)
        if isinstance(meta, ErrorCode):
            return [], meta
        if meta.state.is_prepare:
            return [], E.CONCURRENT_TRANSACTIONS
        added = frozenset(partitions)
        if meta.state is TxnState.ONGOING and added <= meta.partitions:
            return [], E.NONE  # nothing new: no record (Kafka's shortcut)
        if meta.state not in (TxnState.EMPTY, TxnState.ONGOING) and not meta.state.is_complete:
            return [], E.CONCURRENT_TRANSACTIONS
        start = now_ms if meta.state is not TxnState.ONGOING else meta.start_ms
        new = replace(
            meta, state=TxnState.ONGOING, partitions=meta.partitions | added, start_ms=start,
            last_update_ms=now_ms, client_version=client_version,
        )
        return [self._transit(meta, new)], E.NONE

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v4+ ``VerifyOnly`` (KIP-890 part 1): is each partition part of
        the producer's ongoing transaction? TRANSACTION_ABORTABLE for one that is not."""
        parts = list(partitions)
        meta = self._check_producer(transactional_id, producer_id, producer_epoch)
        if isinstance(meta, ErrorCode):
            return {tp: meta for tp in parts}
        if meta.state.is_prepare:
            return {tp: E.CONCURRENT_TRANSACTIONS for tp in parts}
        return {
            tp: E.NONE if tp in meta.partitions else E.TRANSACTION_ABORTABLE for tp in parts
        }

    # ------------------------------------------------------------------------------------
    # EndTxn and the marker phase
    # ------------------------------------------------------------------------------------
    def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        now_ms: int,
    ) -> tuple[Records, ErrorCode]:
        meta = self._check_producer(transactional_id, producer_id, producer_epoch)
        if isinstance(meta, ErrorCode):
            return [], meta
        state = meta.state
        if state is TxnState.ONGOING:
            target = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
            new = replace(meta, state=target, last_update_ms=now_ms)
            return [self._transit(meta, new)], E.NONE
        if state.is_prepare:
            # Kafka's pending CompleteCommit/CompleteAbort while the markers are written
            return [], E.CONCURRENT_TRANSACTIONS
        if state is TxnState.COMPLETE_COMMIT and commit:
            return [], E.NONE  # a retry of a commit that completed
        if state is TxnState.COMPLETE_ABORT and not commit:
            return [], E.NONE
        return [], E.INVALID_TXN_STATE

    def end_txn_v2(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        now_ms: int,
        new_producer_id: int | None = None,
    ) -> tuple[Records, InitResult | NeedProducerId]:
        """EndTxn v5, transaction version 2 (KIP-890 part 2): every end bumps the epoch (the
        Prepare record carries epoch + 1 and the markers are written with it), and the reply
        names the producer id and epoch to use next. A retry is recognised by the epoch one
        below the current one; an EndTxn(abort) with nothing added is allowed. While the
        markers of the previous end are written (PrepareCommit / PrepareAbort) every EndTxn of
        that producer id gets CONCURRENT_TRANSACTIONS, whatever its epoch. Kafka's table::

                           Abort              Commit
                        retry  current     retry  current
            Empty       FENCED bump        FENCED INVALID_TXN_STATE
            CompleteAb. NONE   bump        ITS    ITS
            CompleteCo. ITS    bump        NONE   ITS

        When the bumped epoch would be exhausted, the transaction completes onto a fresh
        producer id (``next_producer_id``, epoch 0)."""
        if transactional_id == "":
            return [], InitResult(E.INVALID_REQUEST)
        meta = self.txns.get(transactional_id)
        if meta is None:
            return [], InitResult(E.INVALID_PRODUCER_ID_MAPPING)
        state = meta.state
        retry_overflow = (
            meta.prev_producer_id == producer_id and producer_epoch == INT16_MAX - 1
            and meta.producer_epoch == 0
        )
        retry_bump = meta.producer_epoch == producer_epoch + 1
        is_retry = retry_bump or retry_overflow
        if meta.producer_id != producer_id and not retry_overflow:
            return [], InitResult(E.INVALID_PRODUCER_ID_MAPPING)
        if state.is_prepare:
            # Before the epoch check (Kafka since KAFKA-18464): the EndTxn that moved the
            # transaction here already answered epoch + 1, so the client's next EndTxn (an
            # abort with nothing added, franz-go's after a revoke) carries that epoch while
            # the markers are still being written; it waits for them, it is not fenced.
            return [], InitResult(E.CONCURRENT_TRANSACTIONS)
        if state.is_complete:
            valid = is_retry or producer_epoch == meta.producer_epoch
        else:
            valid = producer_epoch == meta.producer_epoch
        if not valid:
            return [], InitResult(E.PRODUCER_FENCED)
        current = InitResult(E.NONE, meta.producer_id, meta.producer_epoch)
        if state is TxnState.ONGOING:
            target = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
            return self._end_v2(meta, target, now_ms, meta.start_ms, new_producer_id)
        if state is TxnState.COMPLETE_COMMIT:
            if commit:
                return [], current if is_retry else InitResult(E.INVALID_TXN_STATE)
            if is_retry:
                return [], InitResult(E.INVALID_TXN_STATE)
            return self._end_v2(meta, TxnState.PREPARE_ABORT, now_ms, now_ms, new_producer_id)
        if state is TxnState.COMPLETE_ABORT:
            if commit:
                return [], InitResult(E.INVALID_TXN_STATE)
            if is_retry:
                return [], current
            return self._end_v2(meta, TxnState.PREPARE_ABORT, now_ms, now_ms, new_producer_id)
        if state is TxnState.EMPTY and not commit:
            return self._end_v2(meta, TxnState.PREPARE_ABORT, now_ms, now_ms, new_producer_id)
        return [], InitResult(E.INVALID_TXN_STATE)

    def _end_v2(
        self, meta: TxnMetadata, target: TxnState, now_ms: int, start_ms: int,
        new_producer_id: int | None,
    ) -> tuple[Records, InitResult | NeedProducerId]:
        next_pid = NO_PRODUCER_ID
        if epoch_exhausted(meta.producer_epoch):
            if new_producer_id is None:
                return [], NEED_PRODUCER_ID
            next_pid = new_producer_id
        new = replace(
            meta, state=target, producer_epoch=meta.producer_epoch + 1,
            last_producer_epoch=meta.producer_epoch, next_producer_id=next_pid,
            start_ms=start_ms, last_update_ms=now_ms, client_version=2,
        )
        reply = (
            InitResult(E.NONE, next_pid, 0) if next_pid != NO_PRODUCER_ID
            else InitResult(E.NONE, new.producer_id, new.producer_epoch)
        )
        return [self._transit(meta, new)], reply

    def marker_jobs(self) -> list[MarkerJob]:
        """Transactions in a Prepare state whose markers nobody is writing yet; they count as
        being written until :meth:`complete` or :meth:`release`."""
        jobs = []
        for tid in sorted(self._due - self._in_flight):
            meta = self.txns[tid]
            if meta.state.is_prepare:
                self._in_flight.add(tid)
                jobs.append(
                    MarkerJob(
                        tid, meta.producer_id, meta.producer_epoch,
                        meta.state is TxnState.PREPARE_COMMIT, tuple(sorted(meta.partitions)),
                        2 if meta.client_version >= 2 else 0,
                    )
                )
        return jobs

    def release(self, transactional_id: str) -> None:
        """The driver gave up on a job for now; it becomes due again."""
        self._in_flight.discard(transactional_id)

    def complete(self, job: MarkerJob, now_ms: int) -> tuple[Records, bool]:
        """All markers of ``job`` are written: the Complete record (if the transaction is still
        the one the job was for)."""
        meta = self.txns.get(job.transactional_id)
        want = TxnState.PREPARE_COMMIT if job.commit else TxnState.PREPARE_ABORT
        if (
            meta is None or meta.state is not want or meta.producer_id != job.producer_id
            or meta.producer_epoch != job.producer_epoch
        ):
            self._in_flight.discard(job.transactional_id)
            return [], False
        done = TxnState.COMPLETE_COMMIT if job.commit else TxnState.COMPLETE_ABORT
        new = replace(meta, state=done, partitions=frozenset(), last_update_ms=now_ms)
        if meta.client_version >= 2 and meta.next_producer_id != NO_PRODUCER_ID:
            # transaction version 2 with an exhausted epoch: continue on the next producer id
            new = replace(
                new, producer_id=meta.next_producer_id, prev_producer_id=meta.producer_id,
                producer_epoch=0, next_producer_id=NO_PRODUCER_ID,
            )
        return [self._transit(meta, new)], True

    # ------------------------------------------------------------------------------------
    # timers
    # ------------------------------------------------------------------------------------
    def abort_timed_out(self, now_ms: int) -> Records:
        """Abort (with an epoch fence) every Ongoing transaction past its timeout."""
        out: Records = []
        for meta in list(self.txns.values()):
            if (
                meta.state is TxnState.ONGOING
                and meta.start_ms + meta.timeout_ms < now_ms
                and meta.producer_epoch <= INT16_MAX - self._fence_bumps()
            ):
                out.append(self._fence_and_abort(meta, now_ms))
        return out

    def expire(self, now_ms: int) -> Records:
        """Tombstones for transactional ids idle for ``transactional.id.expiration.ms``."""
        out: Records = []
        for tid, meta in list(self.txns.items()):
            if (
                meta.state.expiration_allowed
                and meta.last_update_ms <= now_ms - self.config.id_expiration_ms
            ):
                check_transition(meta.state, TxnState.DEAD)
                out.append(tombstone(tid))
        return out

    # ------------------------------------------------------------------------------------
    # DescribeTransactions / ListTransactions
    # ------------------------------------------------------------------------------------
    def describe(self, transactional_id: str) -> TxnDescription:
        if transactional_id == "":
            return TxnDescription(E.INVALID_REQUEST)
        meta = self.txns.get(transactional_id)
        if meta is None:
            return TxnDescription(E.TRANSACTIONAL_ID_NOT_FOUND)
        return TxnDescription(
            E.NONE, meta.state.kafka_name, meta.timeout_ms, meta.start_ms, meta.producer_id,
            meta.producer_epoch, tuple(sorted(meta.partitions)),
        )

    def list_transactions(
        self,
        states: Iterable[TxnState],
        producer_ids: Iterable[int],
        now_ms: int,
        duration_ms: int = -1,
        pattern: re.Pattern[str] | None = None,
        any_state_filter: bool = False,
    ) -> list[tuple[str, int, str]]:
        """(transactional id, producer id, state name) of the transactions passing the
        filters (Kafka's ``listTransactionStates``). ``any_state_filter``: the request named
        states (possibly none known, which then matches nothing)."""
        wanted = set(states)
        pids = set(producer_ids)
        out = []
        for tid, meta in self.txns.items():
            if pids and meta.producer_id not in pids:
                continue
            if (wanted or any_state_filter) and meta.state not in wanted:
                continue
            if duration_ms >= 0 and now_ms - meta.start_ms <= duration_ms:
                continue
            if pattern is not None and not pattern.fullmatch(tid):
                continue
            out.append((tid, meta.producer_id, meta.state.kafka_name))
        return out


def check_init_request(transactional_id: str, timeout_ms: int, config: TxnConfig) -> ErrorCode:
    """The checks Kafka makes before looking up the coordinator: an empty transactional id
    (INVALID_REQUEST), a timeout outside (0, transaction.max.timeout.ms]."""
    if transactional_id == "":
        return E.INVALID_REQUEST
    if not 0 < timeout_ms <= config.max_timeout_ms:
        return E.INVALID_TRANSACTION_TIMEOUT
    return E.NONE


def _valid_producer_id(meta: TxnMetadata, expected: tuple[int, int]) -> bool:
    """Kafka's ``isValidProducerId`` for an InitProducerId that names its producer id/epoch."""
    pid, epoch = expected
    return (
        meta.producer_epoch == NO_PRODUCER_EPOCH
        or pid == meta.producer_id
        or (pid == meta.prev_producer_id and epoch_exhausted(epoch))
    )


def state_names_to_filter(names: Iterable[str]) -> tuple[list[TxnState], list[str]]:
    """Known states and the unknown names (ListTransactions' UnknownStateFilters)."""
    known, unknown = [], []
    for n in names:
        s = from_name(n)
        if s is None:
            unknown.append(n)
        else:
            known.append(s)
    return known, unknown

