"""The ``__cluster_metadata`` log, written through a one-voter KRaft quorum (kraft/raft).

The node runs ``RaftNode`` with itself as the only voter over the partition's real log
(``PartitionRaftLog``): on start it elects itself (a new epoch, a LeaderChange control record,
the election state in the partition's ``quorum-state`` file in Kafka's JSON layout), then
``append`` hands one batch of metadata records (framed as Kafka's MetadataRecordSerde does) to
the leader, fsyncs it off the event loop, and publishes the new ``MetadataImage`` once the high
watermark has passed it. ``load`` replays the whole log on start. A quorum of several voters
adds the trio driver that carries RaftNode's messages (Vote, BeginQuorumEpoch, Fetch, ...) in
front of the same log and image.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from kraft.image import MetadataImage, apply
from kraft.raft.node import RaftNode
from kraft.raft.partition_log import PartitionRaftLog
from kraft.raft.state import ElectionState
from kraft.records import decode_record, encode_record
from log.config import LogConfig
from log.manager import LogManager
from log.partition_log import PartitionLog
from protocol.records import decode_batch_records, iter_headers

METADATA_TOPIC = "__cluster_metadata"
READ_CHUNK_BYTES = 8 * 1024 * 1024


class QuorumStateFile:
    """``quorum-state`` as Kafka writes it (JSON, replaced atomically and fsynced)."""

    def __init__(self, path: Path, voters: list[int]) -> None:
        self.path = path
        self.voters = voters
        self._last: ElectionState | None = None

    def read(self) -> ElectionState | None:
        if self._last is None and self.path.exists():
            try:
                data = json.loads(self.path.read_text())
                self._last = ElectionState(int(data.get("leaderEpoch", 0)),
                                           int(data.get("leaderId", -1)),
                                           int(data.get("votedId", -1)))
            except (ValueError, OSError, TypeError, AttributeError):
                self._last = None
        return self._last

    def write(self, state: ElectionState) -> None:
        tmp = self.path.with_suffix(".tmp")
        body = json.dumps({
            "clusterId": "", "leaderId": state.leader_id, "leaderEpoch": state.epoch,
            "votedId": state.voted_id, "appliedOffset": 0,
            "currentVoters": [{"voterId": v} for v in self.voters], "data_version": 0,
        })
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, body.encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        self._last = state


class MetadataQuorum:
    def __init__(self, logs: LogManager, node_id: int, clock: Callable[[], int]) -> None:
        self.logs = logs
        self.node_id = node_id
        self.clock = clock
        self.image = MetadataImage()
        self.epoch = 0
        self.log: PartitionLog | None = None
        self.raft: RaftNode | None = None

    def log_end_offset(self) -> int:
        assert self.log is not None
        return int(self.log.log_end_offset)

    def _quorum_state_path(self) -> Path:
        assert self.log is not None
        return Path(self.log.dir) / "quorum-state"

    def load(self) -> None:
        cfg = LogConfig(segment_bytes=64 * 1024 * 1024, retention_ms=-1, retention_bytes=-1)
        self.log = self.logs.get_or_create(METADATA_TOPIC, 0, self.clock(), cfg)
        store = QuorumStateFile(self._quorum_state_path(), [self.node_id])
        self.raft = RaftNode(self.node_id, frozenset({self.node_id}), "",
                             PartitionRaftLog(self.log, self.clock), store, random.Random(),
                             self.clock())
        self.raft.poll(self.clock())  # the lone voter elects itself: a new epoch
        assert self.raft.is_leader, self.raft.state
        self.epoch = self.raft.epoch
        self.log.update_high_watermark(self.raft.high_watermark)
        records: list[Any] = []
        last = -1
        for offset, value in self._read_values(self.log.log_start_offset):
            rec, _version = decode_record(value)
            records.append(rec)
            last = offset
        self.image = apply(MetadataImage(), records, last, self.epoch)

    def _read_values(self, start: int) -> list[tuple[int, bytes]]:
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
                offset = h.next_offset
        return out

    def _write(self, records: list[Any]) -> int:
        """Hand the records to the leader; the offset of the last one."""
        assert self.raft is not None
        return self.raft.append(self.clock(), [encode_record(r) for r in records])

    def _publish(self, records: list[Any], last_offset: int) -> None:
        assert self.log is not None and self.raft is not None
        self.raft.poll(self.clock())  # the leader counts what is flushed: the high watermark
        assert self.raft.high_watermark > last_offset, "a lone voter commits what it flushed"
        self.log.update_high_watermark(self.raft.high_watermark)
        self.image = apply(self.image, records, last_offset, self.epoch)

    def append_sync(self, records: list[Any]) -> None:
        """Append, fsync and publish on the calling thread (start-up only)."""
        assert self.log is not None
        last = self._write(records)
        self.log.flush()
        self._publish(records, last)

    async def append(self, records: list[Any]) -> None:
        """Append, fsync off the event loop, then publish the new image."""
        assert self.log is not None
        last = self._write(records)
        await trio.to_thread.run_sync(self.log.flush)
        self._publish(records, last)
