"""The ``__cluster_metadata`` log of a single-voter KRaft quorum.

A one-voter quorum commits an entry as soon as it is durable on its own disk, so ``append``
writes one batch of metadata records (framed as Kafka's MetadataRecordSerde does), fsyncs it off
the event loop, then replays it into a new ``MetadataImage`` which it publishes. ``load``
replays the whole log on start. The leader epoch is bumped on every start and kept in the
partition's ``quorum-state`` file (Kafka's JSON layout). Multi-voter quorums add Raft
replication in front of the same log and image (kraft/), not a new design.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from kraft.image import MetadataImage, apply
from kraft.records import decode_record, encode_record
from log.config import LogConfig
from log.manager import LogManager
from log.partition_log import PartitionLog
from protocol.records import SimpleRecord, build_batch, decode_batch_records, iter_headers

log = logging.getLogger("kafkawire.metadata")

METADATA_TOPIC = "__cluster_metadata"
READ_CHUNK_BYTES = 8 * 1024 * 1024


class MetadataQuorum:
    def __init__(self, logs: LogManager, node_id: int, clock: Callable[[], int]) -> None:
        self.logs = logs
        self.node_id = node_id
        self.clock = clock
        self.image = MetadataImage()
        self.epoch = 0
        self.log: PartitionLog | None = None

    def log_end_offset(self) -> int:
        assert self.log is not None
        return int(self.log.log_end_offset)

    def _quorum_state_path(self) -> Path:
        assert self.log is not None
        return Path(self.log.dir) / "quorum-state"

    def load(self) -> None:
        cfg = LogConfig(segment_bytes=64 * 1024 * 1024, retention_ms=-1, retention_bytes=-1)
        self.log = self.logs.get_or_create(METADATA_TOPIC, 0, self.clock(), cfg)
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

    def _write(self, records: list[Any]) -> tuple[int, int]:
        assert self.log is not None
        now = self.clock()
        batch = bytearray(build_batch(
            [SimpleRecord(key=None, value=encode_record(r), timestamp=now) for r in records],
            partition_leader_epoch=self.epoch,
        ))
        batches = iter_headers(batch)
        info = self.log.append(batch, batches, leader_epoch=self.epoch, now_ms=now,
                               log_append_time=False)
        return int(info.first_offset), int(info.last_offset)

    def _publish(self, records: list[Any], last_offset: int) -> None:
        assert self.log is not None
        self.log.update_high_watermark(self.log.log_end_offset)
        old = self.image
        self.image = apply(self.image, records, last_offset, self.epoch)
        if log.isEnabledFor(logging.INFO):
            for line in metadata_events(old, records):
                log.info("%s", line)

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
