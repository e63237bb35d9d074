"""Group coordinator figures: OffsetCommit and OffsetFetch round trips, a one-member classic
rebalance (JoinGroup x2 + SyncGroup), a KIP-848 join (ConsumerGroupHeartbeat), and the time
to load ``__consumer_offsets`` after a restart. Starts its own node (data in a temp dir).

    .venv/bin/python bench/groups.py [--commits N] [--groups N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from conftest import RawClient  # noqa: E402
from group_helpers import GROUP_OVERRIDES, ready_raw  # noqa: E402

from kafkawire.tools.testing import BrokerProcess  # noqa: E402
from protocol._generated.consumer_group_heartbeat_request import (  # noqa: E402
    ConsumerGroupHeartbeatRequest,
)
from protocol._generated.create_topics_request import CreateTopicsRequest  # noqa: E402
from protocol._generated.join_group_request import JoinGroupRequest  # noqa: E402
from protocol._generated.offset_commit_request import OffsetCommitRequest  # noqa: E402
from protocol._generated.offset_fetch_request import OffsetFetchRequest  # noqa: E402
from protocol._generated.sync_group_request import SyncGroupRequest  # noqa: E402

TOPIC = "bench-groups"


def commit_req(group: str, offset: int, parts: int) -> OffsetCommitRequest:
    P = OffsetCommitRequest.OffsetCommitRequestPartition
    return OffsetCommitRequest(group_id=group, topics=[OffsetCommitRequest.OffsetCommitRequestTopic(
        name=TOPIC, partitions=[P(partition_index=p, committed_offset=offset) for p in range(parts)])])


def timed(fn: object, n: int) -> list[float]:
    out = []
    for i in range(n):
        t = time.perf_counter()
        fn(i)  # type: ignore[operator]
        out.append((time.perf_counter() - t) * 1000)
    return out


def row(name: str, ms: list[float]) -> None:
    ms = sorted(ms)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    print(f"| {name} | {len(ms)} | {1000 / statistics.mean(ms):,.0f} | {statistics.median(ms):.2f} | {p99:.2f} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--commits", type=int, default=5000)
    ap.add_argument("--groups", type=int, default=300)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kw-bench-groups-") as tmp:
        bp = BrokerProcess(Path(tmp) / "data", overrides=GROUP_OVERRIDES).start()
        try:
            c = ready_raw(bp.bootstrap, "bench")
            c.request(CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
                name=TOPIC, num_partitions=8, replication_factor=1)], timeout_ms=10000), 7)
            print("| operation (one connection, sequential) | n | ops/s | p50 ms | p99 ms |")
            print("|---|---|---|---|---|")
            row("OffsetCommit v9, 1 partition", timed(lambda i: c.request(commit_req("bg", i, 1), 9), a.commits))
            row("OffsetCommit v9, 8 partitions", timed(lambda i: c.request(commit_req("bg", i, 8), 9), a.commits // 5))
            grp = OffsetFetchRequest.OffsetFetchRequestGroup(group_id="bg")
            grp.topics = None
            row("OffsetFetch v9, all offsets", timed(lambda i: c.request(OffsetFetchRequest(groups=[grp]), 9), a.commits))

            def rebalance(i: int) -> None:
                g = f"rb-{i}"
                proto = [JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x00")]
                r = c.request(JoinGroupRequest(group_id=g, session_timeout_ms=10000, rebalance_timeout_ms=10000,
                                               protocol_type="consumer", protocols=proto), 9)
                r = c.request(JoinGroupRequest(group_id=g, session_timeout_ms=10000, rebalance_timeout_ms=10000,
                                               member_id=r.member_id, protocol_type="consumer", protocols=proto), 9)
                c.request(SyncGroupRequest(group_id=g, generation_id=r.generation_id, member_id=r.member_id,
                                           assignments=[SyncGroupRequest.SyncGroupRequestAssignment(
                                               member_id=r.member_id, assignment=b"x")]), 5)
            row("classic rebalance, 1 member (Join x2 + Sync)", timed(rebalance, a.groups))

            def kip848(i: int) -> None:
                c.request(ConsumerGroupHeartbeatRequest(
                    group_id=f"cg-{i}", member_id=f"m{i}", member_epoch=0, rebalance_timeout_ms=10000,
                    subscribed_topic_names=[TOPIC], topic_partitions=[]), 1)
            row("KIP-848 join (ConsumerGroupHeartbeat epoch 0)", timed(kip848, a.groups))
            c.close()
            size = sum(f.stat().st_size for f in (Path(tmp) / "data").glob("__consumer_offsets-*/*.log"))
            bp.stop()
            t = time.perf_counter()
            bp.start()
            c2 = RawClient(bp.bootstrap)
            while c2.request(OffsetFetchRequest(groups=[grp]), 9).groups[0].error_code != 0:
                time.sleep(0.01)
            print(f"\nrestart until the group's offsets are served again: {time.perf_counter() - t:.2f} s "
                  f"({size / 1e6:.1f} MB of __consumer_offsets)")
            c2.close()
        finally:
            bp.close()


if __name__ == "__main__":
    main()
