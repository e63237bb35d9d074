"""The ``__cluster_metadata`` log of a single-voter KRaft quorum.

A one-voter quorum commits an entry as soon as it is durable on its own disk, so ``append``
writes one batch of metadata records (framed as Kafka's MetadataRecordSerde does), fsyncs it off
the event loop, then replays it into a new ``MetadataImage`` which it publishes. The log is a
partition of the replica manager (``log.replica``) led by this node whose high watermark counts
only flushed offsets: the flush, not this module, moves it. ``load``
loads the newest snapshot (``kafkawire.metadata_snapshots``) and replays the log after it on
start; ``run_snapshots`` takes snapshots by Kafka's rules and cleans the log behind them. The
leader epoch is bumped on every start and kept in the partition's ``quorum-state`` file
(``kraft.quorum_state``: Kafka's JSON layout). Multi-voter quorums add Raft replication in
front of the same log and image (kraft/), not a new design.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from kafkawire.metadata_snapshots import (
    SnapshotSettings,
    SnapshotStore,
    clean_step,
    load_latest,
    write_snapshot,
)
from kafkawire.replica_manager import ReplicaManager
from kraft.image import MetadataImage, apply
from kraft.quorum_state import (
    QUORUM_STATE_FILE,
    QuorumState,
    QuorumStateError,
    decode_quorum_state,
    encode_quorum_state,
)
from kraft.records import decode_record, encode_record
from kraft.snapshot import SnapshotId
from log.checkpoint import fsync_dir
from log.config import LogConfig
from log.partition_log import PartitionLog
from log.replica import Partition
from protocol._generated.voters_record import VotersRecord
from protocol.records import SimpleRecord, build_batch, decode_batch_records, iter_headers

METADATA_TOPIC = "__cluster_metadata"
READ_CHUNK_BYTES = 8 * 1024 * 1024
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
    ) -> None:
        self.replicas = replicas
        self.node_id = node_id
        self.clock = clock
        self.image = MetadataImage()
        self.epoch = 0
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

    def log_end_offset(self) -> int:
        assert self.log is not None
        return int(self.log.log_end_offset)

    def _quorum_state_path(self) -> Path:
        assert self.log is not None
        return Path(self.log.dir) / QUORUM_STATE_FILE

    def _bump_quorum_state(self) -> None:
        """Read the last epoch from ``quorum-state`` and write this start's (epoch + 1). Never
        below the epoch of the last record (a lost or stale quorum-state file)."""
        qs = self._quorum_state_path()
        prev_epoch = max(self.last_epoch, 0)
        if qs.exists():
            try:
                prev_epoch = max(decode_quorum_state(qs.read_text()).leader_epoch, prev_epoch)
            except (QuorumStateError, OSError) as e:
                log.warning("ignoring unreadable %s: %s", qs, e)
        self.epoch = prev_epoch + 1
        state = QuorumState(
            leader_id=self.node_id, leader_epoch=self.epoch, voted_id=-1,
            current_voters=self.static_voters, data_version=1 if self.kraft_version >= 1 else 0,
        )
        write_file_atomically(qs, encode_quorum_state(state).encode())

    def load(self) -> None:
        self.log = self.replicas.logs.get_or_create(
            METADATA_TOPIC, 0, self.clock(), self.log_config
        )
        self.snapshots = SnapshotStore(Path(self.log.dir))
        snap = load_latest(self.snapshots, self.log.log_start_offset, self.log.log_end_offset)
        self.last_snapshot_ms = self.clock()
        base = MetadataImage()
        start = self.log.log_start_offset
        if snap is not None:
            sid = self.latest_snapshot = snap.snapshot_id
            self.kraft_version, self.voters = snap.kraft_version, snap.voters
            if sid.offset > self.log.log_end_offset:
                replica = self.replicas.adopt_metadata_log(self.log)
                replica.truncate_fully_and_start_at(sid.offset)
            base = apply(base, snap.records, sid.offset - 1, sid.epoch)
            start = sid.offset
            self.last_epoch, self.last_timestamp = sid.epoch, snap.last_contained_log_timestamp
        records: list[Any] = []
        last = base.offset
        for offset, value in self._read_values(start):
            rec, _version = decode_record(value)
            records.append(rec)
            last = offset
        self._bump_quorum_state()  # after the replay: never below the last record's epoch
        self.partition = self.replicas.host_metadata_log(self.log, self.epoch, self.clock())
        self.image = apply(base, records, last, self.epoch)

    def _read_values(self, start: int) -> list[tuple[int, bytes]]:
        """The records from ``start`` to the log end, read from the log itself: this runs at
        start-up, before the epoch is known and the partition is hosted."""
        assert self.log is not None
        out: list[tuple[int, bytes]] = []
        offset = start
        end = self.log.log_end_offset
        while offset < end:
            res = self.log.read(offset, READ_CHUNK_BYTES, max_offset=end, min_one_message=True)
            if res.size == 0:
                break
            data = bytearray()
            data += res.read_bytes()
            for pos, h in iter_headers(data):
                if h.is_control:
                    offset = h.next_offset
                    continue
                _hdr, recs = decode_batch_records(data, pos)
                for r in recs:
                    if r.offset >= start and r.value is not None:
                        out.append((r.offset, r.value))
                        self.last_epoch = h.partition_leader_epoch
                        self.last_timestamp = h.max_timestamp
                offset = h.next_offset
        return out

    def _write(self, records: list[Any]) -> tuple[int, int, int]:
        """Append one batch; (first offset, last offset, append time)."""
        assert self.partition is not None
        now = self.clock()
        batch = bytearray(build_batch(
            [SimpleRecord(key=None, value=encode_record(r), timestamp=now) for r in records],
            partition_leader_epoch=self.epoch,
        ))
        batches = iter_headers(batch)
        info = self.partition.append_as_leader(batch, batches, now_ms=now, log_append_time=False)
        self.bytes_since_snapshot += len(batch)
        return int(info.first_offset), int(info.last_offset), now

    def _publish(self, records: list[Any], last_offset: int, append_ms: int) -> None:
        assert self.partition is not None
        self.partition.on_flushed()  # the high watermark passes the flushed entries
        assert self.partition.high_watermark > last_offset, self.partition
        old = self.image
        self.image = apply(self.image, records, last_offset, self.epoch)
        self.last_epoch, self.last_timestamp = self.epoch, append_ms
        if log.isEnabledFor(logging.INFO):
            for line in metadata_events(old, records):
                log.info("%s", line)
        if self.snapshot_due(self.clock()):
            self._snapshot_wakeup.set()

    def append_sync(self, records: list[Any]) -> None:
        """Append, fsync and publish on the calling thread (start-up only)."""
        assert self.log is not None
        _first, last, ts = self._write(records)
        self.log.flush()
        self._publish(records, last, ts)

    async def append(self, records: list[Any]) -> None:
        """Append, fsync off the event loop, then publish the new image."""
        assert self.log is not None
        _first, last, ts = self._write(records)
        await trio.to_thread.run_sync(self.log.flush)
        self._publish(records, last, ts)

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
            # until the interval ends; once it has, the next append wakes us (``_publish``)
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
                                      self.kraft_version, self.voters)
        self.latest_snapshot = sid
        log.info("wrote metadata snapshot %s", self.snapshots.path(sid))
        self.clean()
        return sid

    def clean(self) -> None:
        """Drop old snapshots and the log segments before them (Kafka's retention rules)."""
        assert self.log is not None and self.snapshots is not None
        assert self.partition is not None
        while True:
            start = clean_step(self.snapshots, self.snapshot_settings,
                               self.log.size_bytes, self.clock())
            if start is None or start.offset > self.log.high_watermark:
                return
            self.partition.delete_records(start.offset)  # the log start moves, via the layer
            for sid in self.snapshots.snapshot_ids():
                if sid < start:
                    self.snapshots.delete(sid)
            log.info("metadata log now starts at the snapshot at offset %s", start.offset)


def metadata_log_config(
    segment_bytes: int = 1024 * 1024 * 1024, segment_ms: int = 7 * 24 * 3_600_000
) -> LogConfig:
    """``__cluster_metadata``: no retention and no cleaning of its own (snapshots clean it),
    ``metadata.log.segment.bytes`` / ``metadata.log.segment.ms``."""
    return LogConfig(segment_bytes=segment_bytes, segment_ms=segment_ms, retention_ms=-1,
                     retention_bytes=-1)


def write_file_atomically(path: Path, data: bytes) -> None:
    """``<path>.tmp``, fsync, rename over ``path``, fsync the directory."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


_SECRET_WORDS = ("password", "jaas", "secret")


def metadata_events(old: MetadataImage, records: list[Any]) -> list[str]:
    """One line per change an operator cares about in a committed batch of metadata records:
    topics created or deleted, partitions added, leader changes, brokers registered, fenced or
    unfenced, configs set."""
    out: list[str] = []
    names = {t.topic_id: t.name for t in old.topics.values()}
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
            out.append(f"leader of {names.get(rec.topic_id)}-{rec.partition_id}: "
                       f"{p.leader if p is not None else '?'} -> {rec.leader}")
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
    for tid, parts in new_topics.items():
        rf = max((len(p.replicas) for p in parts), default=0)
        configs = new_configs.get(names[tid])
        out.insert(0, f"topic created: {names[tid]} ({len(parts)} partition(s), "
                      f"replication factor {rf}"
                      + (f", {', '.join(configs)})" if configs else ")"))
    return out


_RESOURCE_NAMES = {2: "topic", 4: "broker", 8: "broker logger", 16: "client metrics",
                   32: "group"}
