"""The coordinator runtime: drives the sans-I/O coordinators over their internal topics.

One ``CoordinatorRuntime`` per internal topic (``__consumer_offsets`` for the group coordinator,
``__transaction_state`` for the transaction coordinator). It owns everything with I/O in it, so
that the coordinators themselves (``groups/``, ``txn/``) stay pure; see docs/COORDINATORS.md
for the contract a coordinator implements.

* **Topic creation on first need**, as Kafka: the first FindCoordinator (or any coordinator
  request) for a missing internal topic creates it through the controller
  (``Broker.create_topic``) with ``<prefix>.num.partitions`` partitions,
  ``<prefix>.replication.factor`` replicas, ``cleanup.policy=compact``,
  ``segment.bytes=<prefix>.segment.bytes`` and ``compression.type=producer``, and that request
  is answered COORDINATOR_NOT_AVAILABLE (the client retries and finds it). **Deviation:**
  Kafka's default replication factor for both topics is 3, which a single node can never
  satisfy (creation fails until enough brokers exist); our embedded defaults are 1
  (``offsets.topic.replication.factor=1``, ``transaction.state.log.replication.factor=1``, what
  every single-node Kafka set-up configures). A larger value than there are live brokers
  fails the creation, and coordinator requests keep answering COORDINATOR_NOT_AVAILABLE, as
  Kafka's do.
* **Key -> partition** exactly as Kafka: ``Utils.abs(key.hashCode()) % partitionCount`` with
  Java's String.hashCode over UTF-16 code units and ``Utils.abs(Integer.MIN_VALUE) == 0``.
* **Shards**: one coordinator state object per internal partition led by this node, created by
  the coordinator's ``shard_factory(partition)`` and loaded by replaying the partition's log
  from its start (transactional batches are replayed with their producer id/epoch, COMMIT and
  ABORT markers with ``replay_end_txn``). While a shard loads, requests for its keys get
  COORDINATOR_LOAD_IN_PROGRESS; keys of partitions not led here get NOT_COORDINATOR. Loading
  yields to the event loop between chunks, so a big log never stalls the broker.
* **Writes**: ``run(key, op)`` calls ``op(shard, now_ms) -> (records, reply)``, appends the
  records as ONE batch to the partition (offsets and leader epoch assigned by the log), replays
  them into the shard, then returns the reply. Nothing awaits between the op and the replay,
  so operations on one shard are atomic with respect to each other. ``append`` writes records
  directly (transactional ones with a producer id/epoch, for TxnOffsetCommit), and
  ``append_marker`` / ``replay_marker`` bring COMMIT/ABORT markers into the shard.
* **Parked replies**: an op may return a ``protocol.coordinator.Pending``; the API handler
  awaits ``runtime.wait(pending)``, which sleeps until a later operation or timer completes it.
* **Timers**: each shard reports ``next_deadline_ms()``; one background task sleeps until the
  earliest, calls ``on_timer(now_ms)`` and appends the records that returns. Every operation
  re-arms it (a deadline may have moved closer).
* **Commit before reply**: writes go through the partition-state layer
  (``Partition.append_as_leader``, ``AppendOrigin.COORDINATOR`` semantics: no sequence checks)
  and ``run`` releases the reply only once the partition's high watermark passes the last
  offset this runtime wrote there (an operation that wrote nothing waits for earlier writes
  too, as Kafka's runtime defers a read behind pending writes). ``append`` / ``append_marker``
  callers await ``wait_committed`` themselves. With one replica the high watermark moves with
  the append, so nothing actually waits. A write that can no longer commit (leadership lost,
  ISR below min.insync.replicas) answers NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE; the
  shard has replayed it already, so reverting it (Kafka's snapshot registry) comes with
  followers.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import trio

from log.replica import FetchIsolation
from protocol.coordinator import CoordinatorRecord, Pending
from protocol.errors import ErrorCode, KafkaError
from protocol.records import (
    ControlType,
    InvalidRecordError,
    RecordError,
    SimpleRecord,
    build_batch,
    build_control_batch,
    decode_batch_records,
    iter_headers,
    parse_control_record,
    validate_batches,
)

if TYPE_CHECKING:
    from kafkawire.broker import Broker

log = logging.getLogger("kafkawire.coordinator")

R = TypeVar("R")
T = TypeVar("T")

#: Bytes read from an internal partition per step while a shard loads.
LOAD_CHUNK_BYTES = 1024 * 1024
#: the replication factor of an internal topic whose key is not set, capped by live brokers
INTERNAL_TOPIC_RF = 3


@dataclass(frozen=True)
class CoordinatorTopic:
    """An internal topic and the broker config keys that shape it."""

    name: str
    key_type: int  # FindCoordinator key type (0 group, 1 transaction)
    partitions_key: str
    replication_factor_key: str
    segment_bytes_key: str
    compression_codec_key: str | None
    #: the key giving the topic's min.insync.replicas (None: the broker's)
    min_isr_key: str | None = None


GROUP_TOPIC = CoordinatorTopic(
    "__consumer_offsets", 0, "offsets.topic.num.partitions", "offsets.topic.replication.factor",
    "offsets.topic.segment.bytes", "offsets.topic.compression.codec",
)
TXN_TOPIC = CoordinatorTopic(
    "__transaction_state", 1, "transaction.state.log.num.partitions",
    "transaction.state.log.replication.factor", "transaction.state.log.segment.bytes", None,
    "transaction.state.log.min.isr",
)

#: KIP-932's share coordinator (``groups/share_state.py``); FindCoordinator key type 2
SHARE_TOPIC = CoordinatorTopic(
    "__share_group_state", 2, "share.coordinator.state.topic.num.partitions",
    "share.coordinator.state.topic.replication.factor",
    "share.coordinator.state.topic.segment.bytes", None, "share.coordinator.state.topic.min.isr",
)


class Shard(Protocol):
    """What a coordinator's per-partition state implements (see docs/COORDINATORS.md)."""

    def replay(
        self, offset: int, producer_id: int, producer_epoch: int, record: CoordinatorRecord
    ) -> None:
        """Apply one record; ``producer_id`` >= 0 only for records of a transactional batch."""

    def replay_end_txn(
        self, offset: int, producer_id: int, producer_epoch: int, committed: bool
    ) -> None:
        """A COMMIT (``committed``) or ABORT marker of ``producer_id`` at ``offset``."""

    def on_loaded(self, now_ms: int) -> None:
        """The whole partition has been replayed; start the timers of the loaded state."""

    def on_unloaded(self) -> None:
        """This node no longer coordinates the partition: complete parked replies with
        NOT_COORDINATOR. The shard is dropped afterwards."""

    def next_deadline_ms(self) -> int | None:
        """The earliest time ``on_timer`` has work to do, None for none."""

    def on_timer(self, now_ms: int) -> list[CoordinatorRecord]:
        """Expire what is due at ``now_ms``; returns records to append (replayed after)."""

    # Optional: ``on_metadata(image, now_ms) -> list[CoordinatorRecord]``, called after the
    # shard loaded and after every metadata change (``sync``); its records are appended.


class NullShard:
    """A shard that keeps nothing: serves an internal topic whose coordinator is absent."""

    def replay(self, offset: int, producer_id: int, producer_epoch: int, record: CoordinatorRecord) -> None:
        pass

    def replay_end_txn(self, offset: int, producer_id: int, producer_epoch: int, committed: bool) -> None:
        pass

    def on_loaded(self, now_ms: int) -> None:
        pass

    def on_unloaded(self) -> None:
        pass

    def next_deadline_ms(self) -> int | None:
        return None

    def on_timer(self, now_ms: int) -> list[CoordinatorRecord]:
        return []


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode()`` (UTF-16 code units, int32 arithmetic)."""
    data = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def java_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: ``Integer.MIN_VALUE`` maps to 0."""
    return 0 if n == -(1 << 31) else abs(n)


def partition_for(key: str, num_partitions: int) -> int:
    return java_abs(java_string_hash(key)) % num_partitions


def now_ms() -> int:
    return int(time.time() * 1000)


class _Slot:
    __slots__ = ("partition", "shard", "loaded", "leader_epoch")

    def __init__(self, partition: int, shard: Shard, leader_epoch: int) -> None:
        self.partition = partition
        self.shard = shard
        self.loaded = False
        self.leader_epoch = leader_epoch


class CoordinatorRuntime:
    def __init__(
        self,
        broker: Broker,
        topic: CoordinatorTopic,
        shard_factory: Callable[[int], Shard] | None = None,
    ) -> None:
        self.broker = broker
        self.topic = topic
        self.shard_factory: Callable[[int], Shard] = shard_factory or (lambda _p: NullShard())
        self.slots: dict[int, _Slot] = {}
        self._create_error = ""  # the last reason the topic could not be created (logged once)
        self._changed = trio.Event()
        self._rearm = trio.Event()
        self._nursery: trio.Nursery | None = None
        #: called with the partition after each timer run (txn: send markers after aborts)
        self.after_timer: list[Callable[[int], None]] = []
        #: partitions being loaded, and (partitions, records, start) of the current wave, for
        #: one INFO line per wave instead of one per partition
        self._loading: set[int] = set()
        self._wave = [0, 0, 0.0]
        #: per partition, the end offset of the last batch this runtime wrote
        self._written_end: dict[int, int] = {}

    # ---- the internal topic -------------------------------------------------------------
    def _config(self, key: str) -> int:
        return int(self.broker.config.values[key])

    def num_partitions(self) -> int:
        t = self.broker.image.topics.get(self.topic.name)
        if t is not None and t.partitions:
            return len(t.partitions)
        return self._config(self.topic.partitions_key)

    def partition_for(self, key: str) -> int:
        return partition_for(key, self.num_partitions())

    def replication_factor(self) -> int:
        """The configured replication factor; when the key is not set, Kafka's default of 3
        where the cluster has that many live brokers, else as many as it has (kafkawire's
        embedded default is 1 so that a single node works as Kafka's quickstart does)."""
        key = self.topic.replication_factor_key
        if key in self.broker.config.explicit:
            return self._config(key)
        live = sum(1 for b in self.broker.image.brokers.values() if not b.fenced)
        return max(1, min(INTERNAL_TOPIC_RF, live))

    def topic_configs(self, replication_factor: int) -> dict[str, str]:
        configs = {
            "cleanup.policy": "compact",
            "compression.type": "producer",
            "segment.bytes": str(self._config(self.topic.segment_bytes_key)),
        }
        key = self.topic.min_isr_key
        if key is not None:
            # Kafka's default is 2 (with 3 replicas); unset here: 2 with 3 replicas, else 1
            configs["min.insync.replicas"] = str(
                self._config(key) if key in self.broker.config.explicit
                else max(1, min(2, replication_factor - 1)))
        return configs

    async def ensure_topic(self) -> ErrorCode:
        """NONE when the topic exists; otherwise start creating it and answer
        COORDINATOR_NOT_AVAILABLE (the request that triggers the creation, as in Kafka)."""
        if self.topic.name in self.broker.image.topics:
            return ErrorCode.NONE
        rf = self.replication_factor()
        try:
            await self.broker.create_topic(
                self.topic.name,
                self._config(self.topic.partitions_key),
                rf,
                self.topic_configs(rf),
            )
        except KafkaError as e:
            # retried every second while clients ask: say it once per distinct reason
            if e.code != ErrorCode.TOPIC_ALREADY_EXISTS and str(e) != self._create_error:
                log.warning("cannot create %s: %s", self.topic.name, e)
            self._create_error = str(e)
        return ErrorCode.COORDINATOR_NOT_AVAILABLE

    def leader_of(self, partition: int) -> int:
        """The node leading ``partition`` of the internal topic, -1 when none/unknown."""
        img = self.broker.image
        t = img.topics.get(self.topic.name)
        p = t.partitions.get(partition) if t is not None else None
        if p is None or p.leader < 0:
            return -1
        b = img.brokers.get(p.leader)
        if b is None or b.fenced:
            return -1
        return p.leader

    def coordinator_epoch(self, partition: int) -> int:
        """The epoch this node coordinates ``partition`` in (its leader epoch), -1 when not."""
        slot = self.slots.get(partition)
        return slot.leader_epoch if slot is not None else -1

    # ---- shards ---------------------------------------------------------------------------
    def check(self, partition: int) -> _Slot:
        """The loaded shard of ``partition``; raises KafkaError with Kafka's coordinator
        errors otherwise."""
        if self.topic.name not in self.broker.image.topics:
            raise KafkaError(ErrorCode.NOT_COORDINATOR)  # as Kafka: no shard for the key
        slot = self.slots.get(partition)
        if slot is None:
            if self.leader_of(partition) == self.broker.node_id:
                raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
            raise KafkaError(ErrorCode.NOT_COORDINATOR)
        if not slot.loaded:
            raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        return slot

    def shard_for(self, key: str) -> Shard:
        return self.check(self.partition_for(key)).shard

    def loaded_shards(self) -> list[tuple[int, Shard]]:
        return [(p, s.shard) for p, s in sorted(self.slots.items()) if s.loaded]

    def sync(self) -> None:
        """Follow the metadata image: load partitions led here, unload the others."""
        if self._nursery is None:
            return
        t = self.broker.image.topics.get(self.topic.name)
        led: dict[int, int] = {}
        if t is not None:
            for p in t.partitions.values():
                if p.leader == self.broker.node_id:
                    led[p.partition] = p.leader_epoch
        for partition in sorted(set(self.slots) - set(led)):
            slot = self.slots.pop(partition)
            self._written_end.pop(partition, None)
            slot.shard.on_unloaded()
            self._notify()
        for partition, epoch in sorted(led.items()):
            old = self.slots.get(partition)
            if old is not None and old.leader_epoch == epoch:
                continue
            if old is not None:
                old.shard.on_unloaded()
            self.slots[partition] = _Slot(partition, self.shard_factory(partition), epoch)
            if not self._loading:
                self._wave = [0, 0, time.monotonic()]
            self._loading.add(partition)
            self._nursery.start_soon(self._load, partition)
        for slot in list(self.slots.values()):
            if slot.loaded:
                self._metadata_changed(slot)
        self._notify()

    def _metadata_changed(self, slot: _Slot) -> None:
        """Hand the metadata image to a shard that wants it (optional ``on_metadata(image,
        now_ms) -> records``: e.g. offsets of deleted topics are deleted) and append what it
        returns."""
        hook = getattr(slot.shard, "on_metadata", None)
        if hook is None:
            return
        try:
            records = hook(self.broker.image, now_ms())
            if records:
                self._append(slot, records)
        except KafkaError as e:
            log.warning("metadata update of %s-%d: %s", self.topic.name, slot.partition, e)

    async def _load(self, partition: int) -> None:
        try:
            await self._load_partition(partition)
        finally:
            self._loading.discard(partition)
            if not self._loading and self._wave[0]:
                parts, records, started = self._wave
                log.info("loaded %d partition(s) of %s: %d records in %.0f ms", parts,
                         self.topic.name, records, (time.monotonic() - started) * 1000)
                self._wave = [0, 0, 0.0]

    async def _load_partition(self, partition: int) -> None:
        slot = self.slots.get(partition)
        replicas = self.broker.replicas
        p = replicas.partition(self.topic.name, partition) if replicas is not None else None
        if slot is None:
            return
        started = time.monotonic()
        offset = p.log.log_start_offset if p is not None else 0
        records = 0
        while p is not None and not p.log.closed:
            if offset >= p.log_end_offset:
                break
            try:
                res = p.read(-1, offset, LOAD_CHUNK_BYTES, isolation=FetchIsolation.LOG_END,
                             now_ms=now_ms()).records
                data = res.read_bytes() if res is not None else b""
            except (KafkaError, OSError):
                log.exception("loading %s-%d at offset %d", self.topic.name, partition, offset)
                break
            if not data:
                break
            for pos, h in iter_headers(data):
                if h.next_offset <= offset:
                    continue
                records += self._replay_batch(slot, data, pos, h.is_control)
                offset = h.next_offset
            if self.slots.get(partition) is not slot:
                return  # unloaded (or reloaded) meanwhile
            await trio.sleep(0)
        if self.slots.get(partition) is not slot:
            return
        slot.loaded = True
        slot.shard.on_loaded(now_ms())
        self._metadata_changed(slot)
        log.debug(
            "loaded %s-%d: %d records in %.0f ms", self.topic.name, partition, records,
            (time.monotonic() - started) * 1000,
        )
        self._wave[0] += 1
        self._wave[1] += records
        self._notify()

    def _replay_batch(self, slot: _Slot, data: bytes, pos: int, control: bool) -> int:
        try:
            h, recs = decode_batch_records(data, pos, check_crc=False)
        except RecordError:
            log.exception("undecodable batch in %s-%d", self.topic.name, slot.partition)
            return 0
        shard = slot.shard
        if control:
            for r in recs:
                try:
                    ctype, _epoch = parse_control_record(r)
                except InvalidRecordError:
                    continue
                if ctype in (ControlType.COMMIT, ControlType.ABORT):
                    shard.replay_end_txn(
                        r.offset, h.producer_id, h.producer_epoch, ctype == ControlType.COMMIT
                    )
            return len(recs)
        pid = h.producer_id if h.is_transactional else -1
        for r in recs:
            if r.key is None:
                continue
            try:
                shard.replay(r.offset, pid, h.producer_epoch, CoordinatorRecord(r.key, r.value))
            except Exception:
                # a record we cannot read must not make the whole partition unavailable
                log.exception("cannot replay record at %s-%d@%d", self.topic.name, slot.partition, r.offset)
        return len(recs)

    # ---- writes -------------------------------------------------------------------------
    async def run(self, key: str, op: Callable[[Any, int], tuple[list[CoordinatorRecord], R]]) -> R:
        """Run ``op(shard, now_ms)`` on the shard coordinating ``key``; append its records,
        replay them, return its reply. Raises KafkaError with the coordinator errors."""
        return await self.run_on(self.partition_for(key), op)

    async def run_on(
        self, partition: int, op: Callable[[Any, int], tuple[list[CoordinatorRecord], R]]
    ) -> R:
        slot = self.check(partition)
        records, reply = op(slot.shard, now_ms())
        if records:
            self._append(slot, records)
        self._notify()
        code = await self.wait_committed(partition)
        if code:
            raise KafkaError(code, f"{self.topic.name}-{partition}: write not committed")
        return reply

    def append(
        self,
        partition: int,
        records: list[CoordinatorRecord],
        *,
        producer_id: int = -1,
        producer_epoch: int = -1,
        transactional: bool = False,
    ) -> int:
        """Append ``records`` as one batch (transactional with the producer's id/epoch when
        asked) and replay them; returns the first offset."""
        slot = self.check(partition)
        offset = self._append(slot, records, producer_id, producer_epoch, transactional)
        self._notify()
        return offset

    def _write(self, partition: int, batch: bytes, ts: int) -> int:
        assert self.broker.replicas is not None
        try:
            p = self.broker.replicas.leader_partition(self.topic.name, partition)
        except KafkaError as e:
            raise KafkaError(ErrorCode.NOT_COORDINATOR, f"internal partition: {e}") from e
        buf = bytearray(batch)
        batches = validate_batches(buf, from_client=False)
        info = p.append_as_leader(buf, batches, now_ms=ts, coordinator=True)
        self._written_end[partition] = info.last_offset + 1
        return info.first_offset

    async def wait_committed(self, partition: int) -> ErrorCode:
        """Until everything this runtime wrote to ``partition`` is committed (the high
        watermark passed it): NONE, or the coordinator error to answer instead."""
        end = self._written_end.get(partition)
        if end is None:
            return ErrorCode.NONE
        return await self._wait_high_watermark(partition, lambda _log_end: end)

    async def wait_log_committed(self, partition: int) -> ErrorCode:
        """Until everything in ``partition``'s log at the time of the call is committed: what
        this runtime wrote and what it loaded (a new leader may hold records beyond its high
        watermark). NONE, or the coordinator error. Side effects of a replayed record that
        reach other partitions (transaction markers) wait for this: the record must survive
        a failover of this partition first."""
        return await self._wait_high_watermark(
            partition, lambda log_end: max(log_end, self._written_end.get(partition, 0)))

    async def _wait_high_watermark(self, partition: int, end: Callable[[int], int]) -> ErrorCode:
        """Until the partition's high watermark reaches ``end(its log end offset)``: NONE, or
        the coordinator error to answer instead."""
        replicas = self.broker.replicas
        p = replicas.partition(self.topic.name, partition) if replicas is not None else None
        if p is None or replicas is None:
            return ErrorCode.NOT_COORDINATOR
        code = await replicas.wait_for_high_watermark(p, end(p.log_end_offset))
        if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.COORDINATOR_NOT_AVAILABLE if code else ErrorCode.NONE

    def _append(
        self,
        slot: _Slot,
        records: list[CoordinatorRecord],
        producer_id: int = -1,
        producer_epoch: int = -1,
        transactional: bool = False,
    ) -> int:
        ts = now_ms()
        codec = 0
        if self.topic.compression_codec_key is not None:
            codec = self._config(self.topic.compression_codec_key)
        batch = build_batch(
            [SimpleRecord(r.key, r.value, (), ts) for r in records],
            compression=codec,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            is_transactional=transactional,
        )
        first = self._write(slot.partition, batch, ts)
        pid = producer_id if transactional else -1
        for i, r in enumerate(records):
            slot.shard.replay(first + i, pid, producer_epoch, r)
        return first

    def append_marker(
        self, partition: int, producer_id: int, producer_epoch: int, committed: bool,
        coordinator_epoch: int,
    ) -> int:
        """Append a COMMIT/ABORT control batch for ``producer_id`` and replay it."""
        slot = self.check(partition)
        ts = now_ms()
        batch = build_control_batch(
            ControlType.COMMIT if committed else ControlType.ABORT,
            producer_id, producer_epoch, coordinator_epoch, timestamp=ts,
        )
        offset = self._write(partition, batch, ts)
        slot.shard.replay_end_txn(offset, producer_id, producer_epoch, committed)
        self._notify()
        return offset

    def replay_marker(
        self, partition: int, offset: int, producer_id: int, producer_epoch: int, committed: bool
    ) -> None:
        """A marker someone else appended to ``partition`` (WriteTxnMarkers): replay it."""
        slot = self.slots.get(partition)
        if slot is not None and slot.loaded:
            slot.shard.replay_end_txn(offset, producer_id, producer_epoch, committed)
            self._notify()

    # ---- parking and timers -------------------------------------------------------------
    def _notify(self) -> None:
        ev, self._changed = self._changed, trio.Event()
        ev.set()
        self._rearm.set()

    async def wait(self, pending: Pending[T], partition: int | None = None) -> T:
        """Wait until ``pending`` is completed by a later operation or timer, then (with
        ``partition``) until what the runtime wrote there is committed; raises KafkaError
        with the coordinator error when it cannot be."""
        while not pending.done:
            await self._changed.wait()
        if partition is not None:
            code = await self.wait_committed(partition)
            if code:
                raise KafkaError(code, f"{self.topic.name}-{partition}: write not committed")
        return pending.value  # type: ignore[return-value]

    async def serve(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Background task: loads shards and runs their timers until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self.sync()
            task_status.started()
            while True:
                deadline: int | None = None
                for _p, shard in self.loaded_shards():
                    d = shard.next_deadline_ms()
                    if d is not None and (deadline is None or d < deadline):
                        deadline = d
                self._rearm = trio.Event()
                wait_s = math.inf if deadline is None else max(0.0, (deadline - now_ms()) / 1000)
                with trio.move_on_after(wait_s):
                    await self._rearm.wait()
                    continue
                self.run_timers(now_ms())

    def run_timers(self, now: int) -> None:
        for partition, shard in self.loaded_shards():
            d = shard.next_deadline_ms()
            if d is None or d > now:
                continue
            slot = self.slots[partition]
            try:
                records = shard.on_timer(now)
                if records:
                    self._append(slot, records)
            except KafkaError as e:
                log.warning("timer of %s-%d: %s", self.topic.name, partition, e)
            for hook in self.after_timer:
                hook(partition)
        self._notify()
