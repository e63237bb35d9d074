"""The ``__cluster_metadata`` log, written through the KRaft quorum (kraft/raft/).

Every node runs a ``RaftNode`` over the partition's real log (``kafkawire/metadata/raft_storage.py``:
``__cluster_metadata-0`` segments, ``.checkpoint`` snapshots, ``quorum-state``), carried over
the network by ``kafkawire/metadata/raft_driver.py``. A controller is a voter; a broker-only node
(``process.roles=broker``) is an observer that fetches the log from the leader. The implicit
single node (no quorum configured, ``make run``) is a quorum of one voter: on start it elects
itself at once (a new epoch, a LeaderChange control record), so it loads synchronously as before.

The image follows the high watermark: whatever the quorum has committed is read back from the
log, decoded (records framed as Kafka's MetadataRecordSerde does) and replayed into a new
``MetadataImage``, which is published (``on_publish``). ``load`` starts from the newest snapshot
and applies nothing uncommitted; a snapshot installed from the leader replaces the image.
``append`` (the active controller only) hands one batch to the leader and returns once it is
committed and applied, or raises NOT_CONTROLLER when leadership was lost first.
``run_snapshots`` takes snapshots by Kafka's rules on every node and cleans the log behind them.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from kafkawire.metadata.raft_driver import RaftDriver
from kafkawire.metadata.raft_storage import (
    MetadataRaftLog,
    QuorumStateFile,
    voters_records_in,
    write_file_atomically,
)
from kafkawire.metadata.snapshots import (
    SnapshotSettings,
    SnapshotStore,
    clean_step,
    load_latest,
    write_snapshot,
)
from kafkawire.replication.replica_manager import ReplicaManager
from kafkawire.security.inter_broker import ClientSecurity
from kraft.image import MetadataImage, apply
from kraft.quorum_state import QUORUM_STATE_FILE
from kraft.raft.config import RaftConfig
from kraft.raft.node import RaftNode
from kraft.records import decode_record, encode_record
from kraft.snapshot import SnapshotId
from log.config import LogConfig
from log.partition_log import PartitionLog
from log.replica import Partition
from protocol._generated.voters_record import VotersRecord
from protocol.errors import ErrorCode, KafkaError
from protocol.records import decode_batch_records, iter_headers

__all__ = ["METADATA_TOPIC", "MetadataQuorum", "metadata_log_config", "metadata_events",
           "write_file_atomically"]

METADATA_TOPIC = "__cluster_metadata"
READ_CHUNK_BYTES = 8 * 1024 * 1024
#: how long a controller write waits for a new leader to have committed its epoch start
ACTIVATION_WAIT_MS = 5_000
#: how long a leader that shuts down waits for its EndQuorumEpoch to be acknowledged
RESIGN_WAIT_MS = 2_000
log = logging.getLogger("kafkawire.metadata")


class MetadataQuorum:
    def __init__(
        self,
        replicas: ReplicaManager,
        node_id: int,
        clock: Callable[[], int],
        snapshot_settings: SnapshotSettings | None = None,
        log_config: LogConfig | None = None,
        static_voters: tuple[int, ...] = (),
        voter_addresses: dict[int, tuple[str, int]] | None = None,
        raft_config: RaftConfig | None = None,
        cluster_id: str = "",
        rng: random.Random | None = None,
        controller_listener_names: frozenset[str] = frozenset({"CONTROLLER"}),
        controller_security: Callable[[], ClientSecurity] | None = None,
    ) -> None:
        self.replicas = replicas
        #: TLS / SASL of the voters' connections to each other (the controller listener)
        self.controller_security = controller_security
        self.node_id = node_id
        self.clock = clock
        self.image = MetadataImage()
        self.log: PartitionLog | None = None
        self.partition: Partition | None = None
        self.snapshot_settings = snapshot_settings or SnapshotSettings()
        self.snapshots: SnapshotStore | None = None
        self.latest_snapshot: SnapshotId | None = None
        self.kraft_version = 0
        self.voters: VotersRecord | None = None  # a dynamic quorum's (kraft.version 1)
        # epoch and append time of the last record in the image (the snapshot id's epoch)
        self.last_epoch = -1
        self.last_timestamp = -1
        self.bytes_since_snapshot = 0
        self.last_snapshot_ms = 0
        self._snapshot_wakeup = trio.Event()
        self.log_config = log_config or metadata_log_config()
        #: controller.quorum.voters ids (quorum-state v0 lists them); () = this node alone
        self.static_voters = static_voters or (node_id,)
        #: node id -> controller listener (host, port) of each voter
        self.voter_addresses = dict(voter_addresses or {})
        self.raft_config = raft_config or RaftConfig()
        self.controller_listener_names = controller_listener_names
        self.cluster_id = cluster_id
        self.rng = rng or random.Random()
        self.raft: RaftNode | None = None
        self.driver: RaftDriver | None = None
        #: the first offset not yet applied to the image (everything below is committed)
        self.applied_end = 0
        #: called with each new image built from committed records (not during ``load``)
        self.on_publish: Callable[[MetadataImage], None] | None = None
        #: set once the image has caught up with the leader's high watermark after start
        self.caught_up = trio.Event()
        #: metadata records applied before catching up (the INFO summary of a start)
        self.replayed_records = 0
        self._catch_up_target = -1

    # ---- what the node asks -------------------------------------------------------------
    @property
    def epoch(self) -> int:
        return self.raft.epoch if self.raft is not None else 0

    @property
    def leader_id(self) -> int:
        """The active controller's node id (-1: none known yet)."""
        return self.raft.leader_id if self.raft is not None else -1

    @property
    def is_active(self) -> bool:
        """The leader, and it has committed (and applied) the start of its epoch: its image
        holds everything ever committed, so controller decisions may be taken from it."""
        raft = self.raft
        return (raft is not None and raft.is_leader and raft.leader is not None
                and self.applied_end > raft.leader.epoch_start_offset)

    def is_active_controller(self) -> bool:
        """For the forwarding layer: this node may decide metadata writes now."""
        return self.is_active

    def controller_candidates(self) -> list[tuple[int, str, int]]:
        """(node id, host, port) of the voters' controller listeners, the known leader first
        (negative ids: ``controller.quorum.bootstrap.servers`` entries)."""
        leader = self.leader_id
        ids = sorted(self.voter_addresses, key=lambda i: (i != leader, i < 0, i))
        return [(i, *self.voter_addresses[i]) for i in ids]

    def _learn_voters(self, record: VotersRecord) -> None:
        """A VotersRecord (snapshot or log): where each voter's controller listener is."""
        self.voters = record
        self.kraft_version = max(self.kraft_version, 1)  # VotersRecords exist from version 1
        for v in record.voters:
            for e in v.endpoints:
                if e.name.upper() in self.controller_listener_names:
                    self.voter_addresses[v.voter_id] = (e.host, int(e.port))
                    break

    def _voters_at(self, end_offset: int) -> VotersRecord | None:
        """The VotersRecord in force for the log before ``end_offset`` (a snapshot's)."""
        if self.raft is None or not self.raft.history.entries:
            return self.voters
        return self.raft.history.record_at(end_offset)

    @property
    def is_voter(self) -> bool:
        return self.raft is not None and self.raft.is_voter

    def log_end_offset(self) -> int:
        assert self.log is not None
        return int(self.log.log_end_offset)

    # ---- start-up -----------------------------------------------------------------------
    def load(self) -> None:
        """Open the log, load the newest snapshot, start the Raft node. A lone voter elects
        itself and commits its log here; others apply what they learn is committed later."""
        self.log = self.replicas.logs.get_or_create(
            METADATA_TOPIC, 0, self.clock(), self.log_config
        )
        self.snapshots = SnapshotStore(Path(self.log.dir))
        snap = load_latest(self.snapshots, self.log.log_start_offset, self.log.log_end_offset)
        self.last_snapshot_ms = self.clock()
        self.partition = self.replicas.adopt_metadata_log(self.log)
        if snap is not None:
            sid = self.latest_snapshot = snap.snapshot_id
            self.kraft_version, self.voters = snap.kraft_version, snap.voters
            if sid.offset > self.log.log_end_offset:
                self.partition.truncate_fully_and_start_at(sid.offset)
            self.image = apply(MetadataImage(), snap.records, sid.offset - 1, sid.epoch)
            self.applied_end = sid.offset
            self.last_epoch, self.last_timestamp = sid.epoch, snap.last_contained_log_timestamp
        else:
            self.applied_end = self.log.log_start_offset
        self._start_raft()

    def _start_raft(self) -> None:
        assert self.log is not None and self.snapshots is not None
        if self.voters is not None:
            self._learn_voters(self.voters)
        rlog = MetadataRaftLog(self.log, self.clock, self.snapshots, self._snapshot_installed,
                               self._learn_voters)
        for record in voters_records_in(self.log.read(self.log.log_start_offset, 1 << 62,
                                                      min_one_message=True).read_bytes()
                                        if self.log.log_end_offset > self.log.log_start_offset
                                        else b""):
            self._learn_voters(record)
        store = QuorumStateFile(Path(self.log.dir) / QUORUM_STATE_FILE,
                                tuple(v for v in self.static_voters if v >= 0),
                                1 if self.kraft_version >= 1 else 0)
        config = self.raft_config
        if self.kraft_version != config.kraft_version:
            config = RaftConfig(**{**_fields(config), "kraft_version": self.kraft_version})
        self.raft = RaftNode(self.node_id, frozenset(self.static_voters), self.cluster_id, rlog,
                             store, self.rng, self.clock(), config)
        self.driver = RaftDriver(self.raft, self.voter_addresses, self.clock,
                                 self._on_raft_change, security=self.controller_security)
        self.driver.peers = self.voter_addresses  # shared: VotersRecords add addresses
        if self.raft.voters == {self.node_id}:
            self.driver.step()  # a lone voter elects itself at once and commits its log
            assert self.raft.is_leader, self.raft.state
            self.driver.step()

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The Raft driver and the snapshot task, until cancelled."""
        assert self.driver is not None
        async with trio.open_nursery() as nursery:
            await nursery.start(self.driver.run)
            await nursery.start(self.run_snapshots)
            task_status.started()

    # ---- following the high watermark ---------------------------------------------------
    def _on_raft_change(self) -> None:
        raft = self.raft
        assert raft is not None and self.log is not None
        hw = raft.high_watermark
        if self.partition is not None:
            self.partition.set_quorum_high_watermark(hw)
        if hw > self.applied_end:
            self._apply_committed(hw)
        if not self.caught_up.is_set():
            # caught up: everything committed when we learned the leader's high watermark is
            # applied (a leader: once its epoch start committed, it holds everything)
            assert self.driver is not None
            if self.is_active:
                self._catch_up_target = hw
            elif self._catch_up_target < 0 and self.driver.leader_high_watermark >= 0:
                self._catch_up_target = self.driver.leader_high_watermark
            if 0 <= self._catch_up_target <= self.applied_end:
                image = self.image
                log.info("metadata caught up with the quorum at offset %s: %d record(s) "
                         "replayed (%d topic(s), %d partition(s), %d broker(s))",
                         self.applied_end, self.replayed_records, len(image.topics),
                         sum(len(t.partitions) for t in image.topics.values()),
                         len(image.brokers))
                self.caught_up.set()

    def _apply_committed(self, hw: int) -> None:
        records: list[Any] = []
        last = self.image.offset
        epoch, ts = self.last_epoch, self.last_timestamp
        for offset, value, batch_epoch, batch_ts, size in self._read_batches(self.applied_end, hw):
            self.bytes_since_snapshot += size
            epoch, ts = batch_epoch, batch_ts
            if value is not None:
                records.append(decode_record(value)[0])
                last = offset
        self.applied_end = hw
        self.last_epoch, self.last_timestamp = epoch, ts
        if records:
            old = self.image
            self.image = apply(self.image, records, last, epoch)
            # history replayed at a start (or a new node catching up) is not news: at DEBUG,
            # summed up in one INFO line once caught up; live changes at INFO
            level = logging.INFO if self.caught_up.is_set() else logging.DEBUG
            if not self.caught_up.is_set():
                self.replayed_records += len(records)
            if log.isEnabledFor(level):
                for line in metadata_events(old, records):
                    log.log(level, "%s", line)
            if self.on_publish is not None:
                self.on_publish(self.image)
        if self.snapshot_due(self.clock()):
            self._snapshot_wakeup.set()

    def _read_batches(self, start: int, end: int
                      ) -> list[tuple[int, bytes | None, int, int, int]]:
        """(offset, value or None for a control batch, batch epoch, max timestamp, bytes) of
        the records in [start, end)."""
        assert self.log is not None
        out: list[tuple[int, bytes | None, int, int, int]] = []
        offset = start
        while offset < end:
            res = self.log.read(offset, READ_CHUNK_BYTES, max_offset=end, min_one_message=True)
            if res.size == 0:
                break
            data = bytearray()
            data += res.read_bytes()
            for pos, h in iter_headers(data):
                if h.next_offset <= offset:
                    continue
                if h.base_offset >= end:
                    return out
                if h.is_control:
                    out.append((h.next_offset - 1, None, h.partition_leader_epoch,
                                h.max_timestamp, h.size))
                else:
                    _hdr, recs = decode_batch_records(data, pos)
                    size = h.size
                    for r in recs:
                        if offset <= r.offset < end and r.value is not None:
                            out.append((r.offset, r.value, h.partition_leader_epoch,
                                        h.max_timestamp, size))
                            size = 0
                offset = h.next_offset
        return out

    def _snapshot_installed(self, sid: SnapshotId) -> None:
        """The leader's snapshot replaced our log: the image restarts from it."""
        assert self.snapshots is not None
        snap = self.snapshots.read(sid)
        self.latest_snapshot = sid
        self.kraft_version, self.voters = snap.kraft_version, snap.voters
        if snap.voters is not None:
            self._learn_voters(snap.voters)
        self.image = apply(MetadataImage(), snap.records, sid.offset - 1, sid.epoch)
        self.applied_end = sid.offset
        self.last_epoch, self.last_timestamp = sid.epoch, snap.last_contained_log_timestamp
        self.bytes_since_snapshot = 0
        if self.on_publish is not None:
            self.on_publish(self.image)

    # ---- writes (the active controller) -------------------------------------------------
    def _check_leader(self) -> RaftNode:
        raft = self.raft
        if raft is None or not raft.is_leader:
            leader = raft.leader_id if raft is not None else -1
            raise KafkaError(ErrorCode.NOT_CONTROLLER,
                             f"node {self.node_id} is not the active controller "
                             f"(the leader is {leader})")
        return raft

    def _append(self, records: list[Any]) -> tuple[int, int]:
        """Hand the records to the leader: (its epoch, the offset of the last record).

        As Kafka's QuorumController (``MAX_RECORDS_PER_BATCH``), more than 10,000 records go
        in several batches: fencing or registering a broker that leads 100,000 partitions
        writes a PartitionChangeRecord for each (several MB). Requests that must be atomic
        stay under that (CreateTopics and CreatePartitions refuse more records per request)."""
        raft = self._check_leader()
        now = self.clock()
        last = -1
        for i in range(0, len(records), MAX_RECORDS_PER_BATCH):
            chunk = records[i : i + MAX_RECORDS_PER_BATCH]
            last = raft.append(now, [encode_record(r) for r in chunk])
        return raft.epoch, last

    def append_sync(self, records: list[Any]) -> None:
        """Append, fsync and apply on the calling thread (start-up of a lone voter only)."""
        assert self.driver is not None and self.log is not None
        _epoch, last = self._append(records)
        self.log.flush()
        self.driver.step()
        assert self.applied_end > last, "a lone voter commits what it flushed"

    async def wait_active(self, timeout_ms: int = ACTIVATION_WAIT_MS) -> None:
        """Until this node is the active controller; NOT_CONTROLLER when it is not the leader
        (or does not become active within ``timeout_ms``)."""
        with trio.move_on_after(timeout_ms / 1000):
            while not self.is_active:
                self._check_leader()
                assert self.driver is not None
                await self.driver.wait_for_change()
            return
        self._check_leader()
        raise KafkaError(ErrorCode.NOT_CONTROLLER, "the new leader has not committed its epoch")

    async def append(self, records: list[Any]) -> None:
        """Append on the active controller; return once committed and applied to ``image``.

        The records were decided from ``image``, so this node must be active already (its
        image holds everything committed): NOT_CONTROLLER otherwise, and when leadership is
        lost before the commit (the write may still commit under the next leader)."""
        assert self.driver is not None
        if not self.is_active:
            self._check_leader()
            raise KafkaError(ErrorCode.NOT_CONTROLLER,
                             "the new leader has not committed the start of its epoch yet")
        epoch, last = self._append(records)
        raft = self.raft
        assert raft is not None
        self.driver.wake()
        while self.applied_end <= last:
            if raft.epoch != epoch or not raft.is_leader:
                raise KafkaError(ErrorCode.NOT_CONTROLLER,
                                 "leadership was lost before the write was committed")
            await self.driver.wait_for_change()

    async def resign(self, timeout_ms: int = RESIGN_WAIT_MS) -> None:
        """Graceful shutdown of the leader (Kafka does the same): stop leading and tell the
        other voters at once (EndQuorumEpoch, best caught-up first) so one of them is elected
        without waiting out the fetch timeout. Waits until they acknowledged, at most
        ``timeout_ms``."""
        raft, driver = self.raft, self.driver
        if raft is None or driver is None or not raft.is_leader:
            return
        others = set(raft.voters) - {self.node_id}
        if not others:
            return
        raft.resign(self.clock())
        driver.wake()
        with trio.move_on_after(timeout_ms / 1000):
            while others - raft.end_epoch_sent:
                await driver.wait_for_change()
        log.info("resigned the leadership of epoch %s", raft.epoch)

    # ---- snapshots ------------------------------------------------------------------------
    def snapshot_due(self, now_ms: int) -> bool:
        """Kafka's SnapshotGenerator rules: enough bytes, or the interval with new records."""
        st = self.snapshot_settings
        if self.bytes_since_snapshot <= 0 or self.image.offset < 0:
            return False
        if self.bytes_since_snapshot >= st.max_bytes_between_snapshots:
            return True
        return st.max_interval_ms > 0 and now_ms - self.last_snapshot_ms >= st.max_interval_ms

    async def run_snapshots(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                            ) -> None:
        """Take snapshots when they are due (woken by appends, or by the interval)."""
        task_status.started()
        while True:
            st = self.snapshot_settings
            # until the interval ends; once it has, the next commit wakes us
            wait_s = float("inf")
            left_ms = self.last_snapshot_ms + st.max_interval_ms - self.clock()
            if st.max_interval_ms > 0 and left_ms > 0:
                wait_s = left_ms / 1000
            with trio.move_on_after(wait_s):
                await self._snapshot_wakeup.wait()
            self._snapshot_wakeup = trio.Event()
            if self.snapshot_due(self.clock()):
                await self.take_snapshot()

    async def take_snapshot(self) -> SnapshotId | None:
        """Write a snapshot of the current image, then clean the log behind it."""
        assert self.log is not None and self.snapshots is not None
        image, epoch, ts = self.image, self.last_epoch, self.last_timestamp
        sid = SnapshotId(image.offset + 1, epoch)
        if image.offset < 0 or (self.latest_snapshot is not None and self.latest_snapshot >= sid):
            return None
        self.bytes_since_snapshot = 0
        now = self.clock()
        self.last_snapshot_ms = now
        await trio.to_thread.run_sync(write_snapshot, self.snapshots, image, epoch, ts, now,
                                      self.kraft_version, self._voters_at(sid.offset))
        self.latest_snapshot = sid
        log.info("wrote metadata snapshot %s", self.snapshots.path(sid))
        self.clean()
        return sid

    def clean(self) -> None:
        """Drop old snapshots and the log segments before them (Kafka's retention rules)."""
        assert self.log is not None and self.snapshots is not None
        while True:
            start = clean_step(self.snapshots, self.snapshot_settings,
                               self.log.size_bytes, self.clock())
            if start is None or start.offset > self.log.high_watermark:
                return
            assert self.partition is not None
            self.partition.start_after_snapshot(start.offset)  # via the partition layer
            for sid in self.snapshots.snapshot_ids():
                if sid < start:
                    self.snapshots.delete(sid)
            log.info("metadata log now starts at the snapshot at offset %s", start.offset)


def _fields(config: RaftConfig) -> dict[str, Any]:
    from dataclasses import fields
    return {f.name: getattr(config, f.name) for f in fields(config)}


#: Kafka's QuorumController.MAX_RECORDS_PER_BATCH: the records of one metadata batch
MAX_RECORDS_PER_BATCH = 10_000
#: Kafka's KafkaRaftClient.MAX_BATCH_SIZE_BYTES, the metadata log's max.message.bytes
MAX_BATCH_SIZE_BYTES = 8 * 1024 * 1024


def metadata_log_config(
    segment_bytes: int = 1024 * 1024 * 1024, segment_ms: int = 7 * 24 * 3_600_000
) -> LogConfig:
    """``__cluster_metadata``: no retention and no cleaning of its own (snapshots clean it),
    ``metadata.log.segment.bytes`` / ``metadata.log.segment.ms``."""
    return LogConfig(segment_bytes=segment_bytes, segment_ms=segment_ms, retention_ms=-1,
                     retention_bytes=-1, max_message_bytes=MAX_BATCH_SIZE_BYTES)


_SECRET_WORDS = ("password", "jaas", "secret")


def metadata_events(old: MetadataImage, records: list[Any]) -> list[str]:
    """One line per change an operator cares about in a committed batch of metadata records:
    topics created or deleted, partitions added, leader changes, brokers registered, fenced or
    unfenced, configs set."""
    out: list[str] = []
    names = {t.topic_id: t.name for t in old.topics.values()}
    # leader changes, grouped per topic and (old, new) leader: a broker's start or controlled
    # shutdown moves every partition it leads at once (one line, not 50 for __consumer_offsets)
    leaders: dict[tuple[Any, Any, int], list[int]] = {}
    new_topics: dict[Any, list[Any]] = {}
    new_configs: dict[str, list[str]] = {}
    created = {rec.name for rec in records if type(rec).__name__ == "TopicRecord"}
    for rec in records:
        kind = type(rec).__name__
        if kind == "TopicRecord":
            names[rec.topic_id] = rec.name
            new_topics[rec.topic_id] = []
        elif kind == "PartitionRecord":
            if rec.topic_id in new_topics:
                new_topics[rec.topic_id].append(rec)
            else:
                out.append(f"partition added: {names.get(rec.topic_id)}-{rec.partition_id} "
                           f"(replicas {list(rec.replicas)})")
        elif kind == "RemoveTopicRecord":
            out.append(f"topic deleted: {names.get(rec.topic_id, rec.topic_id)}")
        elif kind == "PartitionChangeRecord" and rec.leader != -2:
            prev = old.topics_by_id.get(rec.topic_id)
            p = prev.partitions.get(rec.partition_id) if prev is not None else None
            key = (rec.topic_id, p.leader if p is not None else "?", rec.leader)
            if key not in leaders:
                out.append("")  # its place in the order of events
                leaders[key] = [len(out) - 1]
            leaders[key].append(rec.partition_id)
        elif kind == "RegisterBrokerRecord":
            eps = ", ".join(f"{e.name}://{e.host}:{e.port}" for e in rec.end_points)
            out.append(f"broker {rec.broker_id} registered (epoch {rec.broker_epoch}, {eps}"
                       f"{', fenced' if rec.fenced else ''})")
        elif kind in ("FenceBrokerRecord", "UnfenceBrokerRecord"):
            out.append(f"broker {rec.id} {'fenced' if kind[0] == 'F' else 'unfenced'}")
        elif kind == "BrokerRegistrationChangeRecord" and rec.fenced in (1, -1):
            out.append(f"broker {rec.broker_id} {'fenced' if rec.fenced == 1 else 'unfenced'}")
        elif kind == "ConfigRecord" and rec.resource_type == 2 and rec.resource_name in created:
            new_configs.setdefault(rec.resource_name, []).append(f"{rec.name}={rec.value}")
        elif kind == "ConfigRecord":
            secret = any(w in rec.name for w in _SECRET_WORDS)
            value = "(deleted)" if rec.value is None else "(hidden)" if secret else rec.value
            target = rec.resource_name or "(cluster default)"
            out.append(f"config of {_RESOURCE_NAMES.get(rec.resource_type, rec.resource_type)} "
                       f"{target}: {rec.name} = {value}")
    for (tid, was, now), (at, *partitions) in leaders.items():
        if len(partitions) == 1:
            out[at] = f"leader of {names.get(tid)}-{partitions[0]}: {was} -> {now}"
        else:
            out[at] = (f"leader of {names.get(tid)} ({len(partitions)} partitions: "
                       f"{_ranges(sorted(partitions))}): {was} -> {now}")
    for tid, parts in new_topics.items():
        rf = max((len(p.replicas) for p in parts), default=0)
        configs = new_configs.get(names[tid])
        out.insert(0, f"topic created: {names[tid]} ({len(parts)} partition(s), "
                      f"replication factor {rf}"
                      + (f", {', '.join(configs)})" if configs else ")"))
    return out


def _ranges(ids: list[int]) -> str:
    """``0-49`` or ``0-2,5,7-8`` for sorted partition ids."""
    out: list[str] = []
    start = prev = ids[0]
    for i in [*ids[1:], None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
        if i is not None:
            start = prev = i
    return ",".join(out)


_RESOURCE_NAMES = {2: "topic", 4: "broker", 8: "broker logger", 16: "client metrics",
                   32: "group"}
