"""The ``__cluster_metadata`` log of a single-voter KRaft quorum.

A one-voter quorum commits an entry as soon as it is durable on its own disk, so ``append``
writes one batch of metadata records (framed as Kafka's MetadataRecordSerde does), fsyncs it off
the event loop, then replays it into a new ``MetadataImage`` which it publishes. The log is a
partition of the replica manager (``log.replica``) led by this node whose high watermark counts
only flushed offsets: the flush, not this module, moves it. ``load``
replays the whole log on start. The leader epoch is bumped on every start and kept in the
partition's ``quorum-state`` file (Kafka's JSON layout). Multi-voter quorums add Raft
replication in front of the same log and image (kraft/), not a new design.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from kafkawire.replica_manager import ReplicaManager
from kraft.image import MetadataImage, apply
from kraft.records import decode_record, encode_record
from log.config import LogConfig
from log.partition_log import PartitionLog
from log.replica import FetchIsolation, Partition
from protocol.records import SimpleRecord, build_batch, decode_batch_records, iter_headers

METADATA_TOPIC = "__cluster_metadata"
READ_CHUNK_BYTES = 8 * 1024 * 1024


class MetadataQuorum:
    def __init__(self, replicas: ReplicaManager, node_id: int, clock: Callable[[], int]) -> None:
        self.replicas = replicas
        self.node_id = node_id
        self.clock = clock
        self.image = MetadataImage()
        self.epoch = 0
        self.log: PartitionLog | None = None
        self.partition: Partition | None = None

    def log_end_offset(self) -> int:
        assert self.log is not None
        return int(self.log.log_end_offset)

    def _quorum_state_path(self) -> Path:
        assert self.log is not None
        return Path(self.log.dir) / "quorum-state"

    def load(self) -> None:
        cfg = LogConfig(segment_bytes=64 * 1024 * 1024, retention_ms=-1, retention_bytes=-1)
        self.log = self.replicas.logs.get_or_create(METADATA_TOPIC, 0, self.clock(), cfg)
        prev_epoch = 0
        qs = self._quorum_state_path()
        if qs.exists():
            try:
                prev_epoch = int(json.loads(qs.read_text()).get("leaderEpoch", 0))
            except (ValueError, OSError):
                prev_epoch = 0
        self.epoch = prev_epoch + 1
        tmp = qs.with_suffix(".tmp")
        tmp.write_text(json.dumps({
            "clusterId": "", "leaderId": self.node_id, "leaderEpoch": self.epoch,
            "votedId": -1, "appliedOffset": 0, "currentVoters": [{"voterId": self.node_id}],
            "data_version": 0,
        }))
        os.replace(tmp, qs)
        self.partition = self.replicas.host_metadata_log(self.log, self.epoch, self.clock())
        records: list[Any] = []
        last = -1
        for offset, value in self._read_values(self.log.log_start_offset):
            rec, _version = decode_record(value)
            records.append(rec)
            last = offset
        self.image = apply(MetadataImage(), records, last, self.epoch)

    def _read_values(self, start: int) -> list[tuple[int, bytes]]:
        assert self.log is not None and self.partition is not None
        out: list[tuple[int, bytes]] = []
        offset = start
        end = self.log.log_end_offset
        while offset < end:
            res = self.partition.read(
                -1, offset, READ_CHUNK_BYTES, isolation=FetchIsolation.LOG_END, now_ms=self.clock()
            ).records
            if res is None or res.size == 0:
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
                offset = h.next_offset
        return out

    def _write(self, records: list[Any]) -> tuple[int, int]:
        assert self.partition is not None
        now = self.clock()
        batch = bytearray(build_batch(
            [SimpleRecord(key=None, value=encode_record(r), timestamp=now) for r in records],
            partition_leader_epoch=self.epoch,
        ))
        batches = iter_headers(batch)
        info = self.partition.append_as_leader(batch, batches, now_ms=now, log_append_time=False)
        return int(info.first_offset), int(info.last_offset)

    def _publish(self, records: list[Any], last_offset: int) -> None:
        assert self.partition is not None
        self.partition.on_flushed()  # the high watermark passes the flushed entries
        assert self.partition.high_watermark > last_offset, self.partition
        self.image = apply(self.image, records, last_offset, self.epoch)

    def append_sync(self, records: list[Any]) -> None:
        """Append, fsync and publish on the calling thread (start-up only)."""
        assert self.log is not None
        _first, last = self._write(records)
        self.log.flush()
        self._publish(records, last)

    async def append(self, records: list[Any]) -> None:
        """Append, fsync off the event loop, then publish the new image."""
        assert self.log is not None
        _first, last = self._write(records)
        await trio.to_thread.run_sync(self.log.flush)
        self._publish(records, last)
