"""PartitionRaftLog (RaftLog over a real PartitionLog) against MemoryRaftLog as the model, and a
lone RaftNode over it that survives a restart with its log and elects itself again."""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.raft.log import MemoryQuorumStateStore, MemoryRaftLog
from kraft.raft.node import RaftNode
from kraft.raft.partition_log import PartitionRaftLog
from kraft.raft.state import RaftState
from log.config import LogConfig
from log.partition_log import PartitionLog
from protocol.records import SimpleRecord, build_batch

CONFIG = LogConfig(segment_bytes=4096, retention_ms=-1, retention_bytes=-1)


def batch(base: int, epoch: int, n: int) -> bytes:
    return build_batch([SimpleRecord(None, b"r%d" % (base + i), (), 1000) for i in range(n)],
                       base_offset=base, partition_leader_epoch=epoch)


def clock() -> int:
    return 1000


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(1, 3), st.booleans()),
                min_size=1, max_size=12),
       st.integers(0, 40), st.integers(0, 8))
def test_partition_raft_log_matches_the_memory_log(
        appends: list[tuple[int, int, bool]], cut: int, ask_epoch: int) -> None:
    """Appends of batches (epochs growing), one truncation, then every read answer agrees."""
    with tempfile.TemporaryDirectory() as d:
        real = PartitionRaftLog(PartitionLog.open(Path(d) / "__cluster_metadata-0", CONFIG, 0),
                                clock)
        model = MemoryRaftLog()
        epoch = 0
        for bump, records, truncate in appends:
            epoch += bump
            data = batch(model.end_offset, epoch, records)
            real.append(data)
            model.append(data)
            if truncate and cut < model.end_offset:
                real.truncate_to(cut)
                model.truncate_to(cut)
                assert real.end_offset == model.end_offset
        real.flush()
        model.flush()
        assert real.end_offset == model.end_offset
        assert real.flushed_end_offset == model.flushed_end_offset
        assert real.last_epoch() == model.last_epoch()
        assert real.end_offset_for_epoch(ask_epoch) == model.end_offset_for_epoch(ask_epoch)
        assert real.read(0, 1 << 30) == model.read(0, 1 << 30)
        real.plog.close()


def test_a_lone_voter_on_disk_commits_and_comes_back(tmp_path: Path) -> None:
    store = MemoryQuorumStateStore()
    plog = PartitionLog.open(tmp_path / "__cluster_metadata-0", CONFIG, 0)
    node = RaftNode(1, frozenset({1}), "c", PartitionRaftLog(plog, clock), store,
                    random.Random(1), 0)
    node.poll(0)
    assert node.is_leader
    offsets = [node.append(10, [b"a%d" % i, b"b"]) for i in range(50)]
    node.poll(11)
    assert node.high_watermark == offsets[-1] + 1 == plog.log_end_offset
    first_epoch = node.epoch
    data = plog.read(0, 1 << 30).read_bytes()
    plog.close()
    plog = PartitionLog.open(tmp_path / "__cluster_metadata-0", CONFIG, 0)
    again = RaftNode(1, frozenset({1}), "c", PartitionRaftLog(plog, clock), store,
                     random.Random(2), 100)
    again.poll(100)
    assert again.state == RaftState.LEADER and again.epoch > first_epoch
    assert plog.read(0, len(data)).read_bytes()[:len(data)] == data  # the log survived
    off = again.append(101, [b"after"])
    again.poll(102)
    assert again.high_watermark == off + 1
    plog.close()
