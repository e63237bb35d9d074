"""The transaction coordinator's driver: plugs ``txn.TxnShard`` into the coordinator runtime
and writes transaction markers.

* ``__transaction_state`` partitions are loaded, appended to and timed by the shared
  ``CoordinatorRuntime`` (``broker.txn_runtime``, docs/COORDINATORS.md); this module sets its
  shard factory from the broker config (``transaction.max.timeout.ms``,
  ``transactional.id.expiration.ms``, ``transaction.abort.timed.out.transaction.cleanup.interval.ms``,
  ``transaction.remove.expired.transaction.cleanup.interval.ms``).
* :meth:`TxnCoordinator.run` runs one coordinator operation by transactional id and asks again
  with a fresh producer id when the shard needs one (``Broker.next_producer_id``: ids come in
  blocks reserved through the metadata log, so they never repeat across restarts).
* The marker sender (:meth:`serve`) takes the shards' marker jobs (transactions in
  PrepareCommit / PrepareAbort: after EndTxn, after a coordinator abort, and after a restart
  for those replayed in a Prepare state) and, once the Prepare record is committed (the
  ``__transaction_state`` high watermark passed it; Kafka sends markers from the acks=all
  append's callback), writes a marker to every partition of the transaction, in-process (``kafkawire.txn_markers``: the partition log, or the group
  coordinator's runtime for ``__consumer_offsets``), then appends CompleteCommit /
  CompleteAbort. Each transaction is its own task; partitions that are not available yet are
  retried with a backoff (``MARKER_RETRY_BACKOFF_MAX_MS``).
* Failures per partition as Kafka's TransactionMarkerRequestCompletionHandler: a deleted topic
  (UNKNOWN_TOPIC_OR_PARTITION) is dropped from the transaction; NOT_LEADER / loading /
  storage errors are retried. **Deviation:** INVALID_PRODUCER_EPOCH or
  TRANSACTION_COORDINATOR_FENCED from a partition make Kafka stop sending (another coordinator
  took over) and leave the transaction to that coordinator; a single node has no other
  coordinator, so the partition is counted as done (it has already moved past this epoch)
  rather than leaving the transaction stuck in a Prepare state.

Partitions led by another node are reached with WriteTxnMarkers (key 27, served by
``apis/write_txn_markers.py``) to their leader, one request per leader with all its partitions,
every leader and the local partitions at once (``kafkawire.txn_markers.write_markers``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

import trio

from kafkawire.node_client import NodeDisconnected, NodeUnsupportedVersion
from kafkawire.txn_markers import OFFSETS_TOPIC, write_markers
from protocol._generated.add_partitions_to_txn_request import AddPartitionsToTxnRequest
from protocol.coordinator import CoordinatorRecord
from protocol.errors import ErrorCode, KafkaError
from txn.coordinator import NEED_PRODUCER_ID, MarkerJob, NeedProducerId, TxnConfig, TxnShard

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kraft.image import MetadataImage

log = logging.getLogger("kafkawire.txn")

R = TypeVar("R")

#: Longest wait between two attempts at a partition whose marker could not be written yet.
MARKER_RETRY_BACKOFF_MAX_MS = 1000
#: Marker jobs are also looked for this often (shards that finished loading, missed wakeups).
MARKER_POLL_INTERVAL_MS = 1000

_DONE = (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
_MOVED_ON = (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED)
_RETRY_LATER = (
    ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
)


def _mapped(code: ErrorCode, abortable_supported: bool) -> ErrorCode:
    """A coordinator answer as a write (Produce, TxnOffsetCommit) reports it."""
    if code == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if code == ErrorCode.TRANSACTION_ABORTABLE and not abortable_supported:
        return ErrorCode.INVALID_TXN_STATE
    if code in _RETRY_LATER:
        return ErrorCode.NOT_ENOUGH_REPLICAS
    return code


#: transaction.version finalized at start (Kafka 4.x's default): KIP-890 part 2. Kafka 4.x Java
#: clients then add partitions with Produce v12 / TxnOffsetCommit v5 and bump the epoch with
#: every EndTxn v5; librdkafka, kafka-python, aiokafka and Java 3.9 keep version 1.
TRANSACTION_VERSION = 2


def transaction_version_records(image: MetadataImage) -> list[Any]:
    """Finalize ``transaction.version`` on fresh clusters (and clusters formatted before this
    broker served version 2); a level set with UpdateFeatures stays as it was set."""
    from protocol._generated.feature_level_record import FeatureLevelRecord

    if "transaction.version" in image.features_recorded:
        return []
    return [FeatureLevelRecord(name="transaction.version", feature_level=TRANSACTION_VERSION)]


def txn_config(values: dict[str, Any]) -> TxnConfig:
    return TxnConfig(
        max_timeout_ms=int(values["transaction.max.timeout.ms"]),
        id_expiration_ms=int(values["transactional.id.expiration.ms"]),
        abort_interval_ms=int(values["transaction.abort.timed.out.transaction.cleanup.interval.ms"]),
        remove_expired_interval_ms=int(
            values["transaction.remove.expired.transaction.cleanup.interval.ms"]
        ),
    )


class _RemoteAsk:
    """One partition a write asks a remote coordinator to add or verify."""

    def __init__(self, transactional_id: str, producer_id: int, producer_epoch: int,
                 verify_only: bool, partition: tuple[str, int]) -> None:
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.verify_only = verify_only
        self.partition = partition
        self.code = ErrorCode.NOT_COORDINATOR
        self.done = trio.Event()

    def finish(self, code: ErrorCode) -> None:
        if not self.done.is_set():
            self.code = code
            self.done.set()


class _RemoteQueue:
    """The asks waiting for one coordinator broker, and whether a request to it is out."""

    def __init__(self) -> None:
        self.waiting: list[_RemoteAsk] = []
        self.sending = False
        #: set (and replaced) each time a request is answered: the waiting writers look again
        self.turn = trio.Event()


def _one_batch(waiting: list[_RemoteAsk]) -> tuple[list[_RemoteAsk], list[_RemoteAsk]]:
    """The asks that can share one request (a transactional id once, with one producer id,
    epoch and verify flag), and the rest for the next one."""
    batch: list[_RemoteAsk] = []
    rest: list[_RemoteAsk] = []
    seen: dict[str, tuple[int, int, bool]] = {}
    for e in waiting:
        key = (e.producer_id, e.producer_epoch, e.verify_only)
        if seen.setdefault(e.transactional_id, key) == key:
            batch.append(e)
        else:
            rest.append(e)
    return batch, rest


class TxnCoordinator:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.runtime = broker.txn_runtime
        self.config = txn_config(broker.config.values)
        self.runtime.shard_factory = self._new_shard
        self.runtime.after_timer.append(lambda _partition: self.wake())
        self._wake = trio.Event()
        #: AddPartitionsToTxn asks waiting per coordinator broker (:meth:`ask_remote`)
        self._remote_asks: dict[int, _RemoteQueue] = {}

    def verification_enabled(self) -> bool:
        """``transaction.partition.verification.enable``, dynamic broker configs included."""
        from kafkawire.config_entries import broker_value

        return bool(broker_value(self.broker.config, self.broker.image,
                                 "transaction.partition.verification.enable"))

    def _new_shard(self, partition: int) -> TxnShard:
        # the finalized transaction.version as the shard loads (a feature change reloads it
        # with the next leadership change; with one node: the next start)
        level = self.broker.image.features.get("transaction.version", 0)
        return TxnShard(partition, replace(self.config, transaction_version=level))

    def on_features_changed(self) -> None:
        """A new ``transaction.version`` (UpdateFeatures) applies to the loaded shards at once."""
        level = self.broker.image.features.get("transaction.version", 0)
        for _partition, shard in self.runtime.loaded_shards():
            assert isinstance(shard, TxnShard)
            shard.config = replace(shard.config, transaction_version=level)

    def wake(self) -> None:
        """Look for marker jobs now (after EndTxn, a fence, a timer)."""
        self._wake.set()

    # ---- operations ---------------------------------------------------------------------
    async def run(
        self, transactional_id: str, op: Callable[[TxnShard, int], tuple[list[CoordinatorRecord], R]]
    ) -> R:
        """``op(shard, now_ms)`` on the shard of ``transactional_id``; raises KafkaError with
        the coordinator errors (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, ...)."""
        reply: R = await self.runtime.run(transactional_id, op)
        self.wake()
        return reply

    async def run_with_producer_id(
        self,
        transactional_id: str,
        op: Callable[[TxnShard, int, int | None], tuple[list[CoordinatorRecord], R | NeedProducerId]],
    ) -> R:
        """Like :meth:`run` for an op that may need a fresh producer id (third argument)."""
        pid: int | None = None
        while True:
            reply = await self.run(
                transactional_id, lambda shard, now, pid=pid: op(shard, now, pid)  # type: ignore[misc]
            )
            if reply is not NEED_PRODUCER_ID:
                return reply  # type: ignore[return-value]
            pid = await self.broker.next_producer_id()

    def verify(
        self,
        transactional_id: str,
        topic: str,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        abortable_supported: bool,
    ) -> tuple[ErrorCode, ErrorCode]:
        """KIP-890 part 1 (``transaction.partition.verification.enable``, on by default as in
        Kafka): the first transactional write of a producer to a partition is accepted only if
        the coordinator has that partition in the producer's ongoing transaction. This keeps a
        late or stray write from opening a transaction nobody will ever close (a hanging
        transaction holding the LSO back). Errors as Kafka maps them: not in the transaction
        -> TRANSACTION_ABORTABLE (INVALID_TXN_STATE for requests older than the one that
        introduced it: Produce v11, TxnOffsetCommit v4), another epoch ->
        INVALID_PRODUCER_EPOCH, coordinator busy or moving -> NOT_ENOUGH_REPLICAS (retriable).
        Produce uses it; a TxnOffsetCommit handler can call it for the group's
        ``__consumer_offsets`` partition the same way. Returns (the error to answer, the
        coordinator's own error)."""
        shard = self.shard_or_error(transactional_id)
        if isinstance(shard, ErrorCode):
            code = shard
        else:
            code = shard.verify_partitions(
                transactional_id, producer_id, producer_epoch, [(topic, partition)]
            )[(topic, partition)]
        return _mapped(code, abortable_supported), code

    async def check_offsets_partition(
        self, transactional_id: str, partition: int, producer_id: int, producer_epoch: int,
        version: int,
    ) -> ErrorCode:
        """TxnOffsetCommit's side (Kafka's GroupCoordinator does the same through the
        partition writer): v5 (transaction version 2) adds the group's ``__consumer_offsets``
        partition to the transaction; older versions have it verified (KIP-890 part 1, the
        producer must have sent AddOffsetsToTxn) unless the producer already has data there.
        Errors in TxnOffsetCommit's terms (a busy coordinator: COORDINATOR_NOT_AVAILABLE,
        retriable)."""
        remote = self.remote_coordinator(transactional_id)
        if remote is not None:
            plog = self.broker.partition_log(OFFSETS_TOPIC, partition)
            if version < 5 and (not self.verification_enabled() or (
                    plog is not None
                    and plog.producer_state.has_ongoing_txn(producer_id, producer_epoch))):
                return ErrorCode.NONE
            code = _mapped(await self.ask_remote(
                remote, transactional_id, OFFSETS_TOPIC, partition, producer_id, producer_epoch,
                verify_only=version < 5), version >= 4)
        elif version >= 5:
            code, _ = await self.add_implicitly(
                transactional_id, OFFSETS_TOPIC, partition, producer_id, producer_epoch
            )
        else:
            plog = self.broker.partition_log(OFFSETS_TOPIC, partition)
            if not self.verification_enabled() or (
                plog is not None
                and plog.producer_state.has_ongoing_txn(producer_id, producer_epoch)
            ):
                return ErrorCode.NONE
            code, _ = self.verify(
                transactional_id, OFFSETS_TOPIC, partition, producer_id, producer_epoch,
                version >= 4,
            )
        if code == ErrorCode.NOT_ENOUGH_REPLICAS:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return code

    async def add_implicitly(
        self, transactional_id: str, topic: str, partition: int, producer_id: int,
        producer_epoch: int, *, retry: bool = False,
    ) -> tuple[ErrorCode, ErrorCode]:
        """Transaction version 2 (Produce v12+, TxnOffsetCommit v5+): the partition joins the
        producer's transaction with the write itself, no AddPartitionsToTxn. Errors mapped as
        :meth:`verify` maps them (TRANSACTION_ABORTABLE is understood by these versions).

        ``retry`` (Produce, as Kafka's ReplicaManager since KAFKA-18654): CONCURRENT_TRANSACTIONS
        (the previous transaction's markers are still being written, the normal case right
        after an EndTxn) is retried here every ``add.partitions.to.txn.retry.backoff.ms`` for
        up to ``add.partitions.to.txn.retry.backoff.max.ms`` (at most ``request.timeout.ms``)
        before the caller gets it (the underlying code, second in the pair)."""
        async def add() -> ErrorCode:
            try:
                code: ErrorCode = await self.run(
                    transactional_id,
                    lambda shard, now: shard.add_partitions(
                        transactional_id, producer_id, producer_epoch, [(topic, partition)],
                        now, client_version=2,
                    ),
                )
            except KafkaError as e:
                code = e.code
            return code

        code = await (self._retry_concurrent(add) if retry else add())
        return _mapped(code, True), code

    async def _retry_concurrent(self, attempt: Callable[[], Awaitable[ErrorCode]]) -> ErrorCode:
        """``attempt()`` again every ``add.partitions.to.txn.retry.backoff.ms`` while it answers
        CONCURRENT_TRANSACTIONS, for up to ``add.partitions.to.txn.retry.backoff.max.ms`` (at
        most ``request.timeout.ms``): Kafka's ReplicaManager for a transaction-version-2 write
        (KAFKA-18654), whether the coordinator is on this broker or another one."""
        values = self.broker.config.values
        backoff_ms = int(values["add.partitions.to.txn.retry.backoff.ms"])
        budget_ms = min(int(values["add.partitions.to.txn.retry.backoff.max.ms"]),
                        int(values["request.timeout.ms"]))
        deadline = trio.current_time() + budget_ms / 1000
        while True:
            code = await attempt()
            if (code != ErrorCode.CONCURRENT_TRANSACTIONS
                    or trio.current_time() + backoff_ms / 1000 > deadline):
                return code
            await trio.sleep(backoff_ms / 1000)

    def remote_coordinator(self, transactional_id: str) -> int | None:
        """The broker leading ``transactional_id``'s ``__transaction_state`` partition when
        that is another broker (None: this one, or none known)."""
        if self.runtime.topic.name not in self.broker.image.topics:
            return None
        leader = self.runtime.leader_of(self.runtime.partition_for(transactional_id))
        return leader if leader >= 0 and leader != self.broker.node_id else None

    async def ask_remote(
        self, leader: int, transactional_id: str, topic: str, partition: int,
        producer_id: int, producer_epoch: int, *, verify_only: bool,
    ) -> ErrorCode:
        """AddPartitionsToTxn v4+ (broker to coordinator, KIP-890) to the coordinator on
        ``leader``: ``verify_only`` checks that the partition is in the transaction, else it is
        added (transaction version 2). The coordinator's code for the partition; a connection
        failure is NOT_COORDINATOR (retriable for the writer).

        As Kafka's AddPartitionsToTxnManager: the asks for one coordinator broker that arrive
        while a request to it is in flight wait and go out together in the next one (one
        AddPartitionsToTxn with every transaction and partition), instead of one round trip
        each over the one connection to that broker. Asked one by one, a Produce to n new
        partitions of a transaction waited n coordinator writes in turn, and on a loaded
        3-node cluster the writes of many producers queued long enough for Produce requests
        to time out (franz-go's TestTxnEtl)."""
        entry = _RemoteAsk(transactional_id, producer_id, producer_epoch, verify_only,
                           (topic, partition))
        queue = self._remote_asks.setdefault(leader, _RemoteQueue())
        queue.waiting.append(entry)
        # whoever finds no request out sends the next one (with everything waiting), and hands
        # over once it is answered: a writer never serves others past its own answer
        while not entry.done.is_set():
            if queue.sending:
                await queue.turn.wait()
                continue
            queue.sending = True
            batch: list[_RemoteAsk] = []
            try:
                batch, queue.waiting = _one_batch(queue.waiting)
                await self._send_asks(leader, batch)
            finally:
                for e in batch:  # a cancelled send: retriable for the writers in it
                    e.finish(ErrorCode.NOT_COORDINATOR)
                queue.sending = False
                queue.turn.set()
                queue.turn = trio.Event()
        return entry.code

    async def _send_asks(self, leader: int, batch: list[_RemoteAsk]) -> None:
        """One AddPartitionsToTxn for ``batch`` (distinct transactional ids); each entry gets
        its partition's code."""
        # connections of their own (Broker.txn_check_peers), not behind WriteTxnMarkers
        client = self.broker.txn_check_peers.get(leader)
        if client is None:
            for e in batch:
                e.finish(ErrorCode.NOT_COORDINATOR)
            return
        Req = AddPartitionsToTxnRequest
        by_txn: dict[str, list[_RemoteAsk]] = {}
        for e in batch:
            by_txn.setdefault(e.transactional_id, []).append(e)
        txns = []
        for tid, entries in by_txn.items():
            topics: dict[str, list[int]] = {}
            for e in entries:
                topics.setdefault(e.partition[0], []).append(e.partition[1])
            first = entries[0]
            txns.append(Req.AddPartitionsToTxnTransaction(
                transactional_id=tid, producer_id=first.producer_id,
                producer_epoch=first.producer_epoch, verify_only=first.verify_only,
                topics=[Req.AddPartitionsToTxnTopic(name=t, partitions=ps)
                        for t, ps in topics.items()]))
        try:
            resp = await client.request(Req(transactions=txns))
        except (NodeDisconnected, NodeUnsupportedVersion):
            for e in batch:
                e.finish(ErrorCode.NOT_COORDINATOR)
            return
        codes: dict[tuple[str, str, int], ErrorCode] = {}
        for t in resp.results_by_transaction:
            for tr in t.topic_results:
                for pr in tr.results_by_partition:
                    codes[(t.transactional_id, tr.name, pr.partition_index)] = ErrorCode(
                        pr.partition_error_code)
        for e in batch:
            if resp.error_code != ErrorCode.NONE:
                e.finish(ErrorCode(resp.error_code))
            else:
                e.finish(codes.get((e.transactional_id, *e.partition),
                                   ErrorCode.UNKNOWN_SERVER_ERROR))

    async def verify_remote(
        self, leader: int, transactional_id: str, topic: str, partition: int,
        producer_id: int, producer_epoch: int, version: int,
    ) -> tuple[ErrorCode, ErrorCode]:
        """Produce's KIP-890 check when the coordinator is on ``leader``: v12+ adds the
        partition (retrying CONCURRENT_TRANSACTIONS as :meth:`add_implicitly` does: on 3 nodes
        most partitions are led away from the coordinator, and without it the first write after
        an EndTxn went back to the client, which refreshes its metadata before trying again),
        older versions verify it. (mapped code, coordinator's code) as :meth:`verify`."""
        async def ask() -> ErrorCode:
            return await self.ask_remote(leader, transactional_id, topic, partition, producer_id,
                                         producer_epoch, verify_only=version < 12)

        code = await (self._retry_concurrent(ask) if version >= 12 else ask())
        return _mapped(code, version >= 11), code

    def shard_or_error(self, transactional_id: str) -> TxnShard | ErrorCode:
        try:
            shard: TxnShard = self.runtime.shard_for(transactional_id)  # type: ignore[assignment]
        except KafkaError as e:
            return e.code
        return shard

    # ---- markers ------------------------------------------------------------------------
    async def serve(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            task_status.started()
            while True:
                self._wake = trio.Event()
                for partition, shard in self.runtime.loaded_shards():
                    if not isinstance(shard, TxnShard):
                        continue
                    for job in shard.marker_jobs():
                        nursery.start_soon(self._send, partition, shard, job)
                with trio.move_on_after(MARKER_POLL_INTERVAL_MS / 1000):
                    await self._wake.wait()

    def _current(self, partition: int, shard: TxnShard) -> bool:
        return any(s is shard for p, s in self.runtime.loaded_shards() if p == partition)

    async def _send(self, partition: int, shard: TxnShard, job: MarkerJob) -> None:
        coordinator_epoch = self.runtime.coordinator_epoch(partition)
        pending = list(job.partitions)
        backoff_ms = 50
        try:
            # as Kafka (markers are sent from appendTransactionToLog's callback, after the
            # Prepare record is replicated with acks=all): a marker written before the record
            # commits could commit the transaction on some partitions while a new coordinator,
            # whose log lost the record in a failover, aborts it on the others
            code = await self.runtime.wait_log_committed(partition)
            if code:
                raise KafkaError(code, f"{job.transactional_id}: Prepare record not committed")
            while pending:
                left = []
                # all partitions at once: one WriteTxnMarkers per other leader, the ones led
                # here appended together (kafkawire.txn_markers.write_markers)
                codes = await write_markers(
                    self.broker, pending, job.producer_id, job.producer_epoch, job.commit,
                    coordinator_epoch, job.transaction_version, forward=True,
                )
                for topic, p in pending:
                    code = codes[(topic, p)]
                    if code in _MOVED_ON:
                        log.warning(
                            "marker for %s (producer %d epoch %d) on %s-%d: %s; counted as done",
                            job.transactional_id, job.producer_id, job.producer_epoch, topic, p,
                            code.name,
                        )
                    elif code not in _DONE:
                        left.append((topic, p))
                pending = left
                if pending:
                    await trio.sleep(backoff_ms / 1000)
                    backoff_ms = min(backoff_ms * 2, MARKER_RETRY_BACKOFF_MAX_MS)
                    if not self._current(partition, shard):
                        return  # the partition moved; its new shard owns the job
            await self.runtime.run_on(partition, lambda s, now: s.complete(job, now))
        except KafkaError as e:
            log.info("markers of %s not completed: %s", job.transactional_id, e)
            shard.release(job.transactional_id)
        except Exception:
            # never let one transaction's failure take the broker down: retried on next poll
            log.exception("writing the markers of %s", job.transactional_id)
            shard.release(job.transactional_id)
        except BaseException:
            shard.release(job.transactional_id)
            raise
