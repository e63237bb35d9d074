"""Fetch cost per idle partition: one consumer naming N empty partitions, nothing to return.

    .venv/bin/python bench/fetch_idle.py                       # 10,000 partitions, 200 fetches
    .venv/bin/python bench/fetch_idle.py --partitions 2000 --requests 100
    .venv/bin/python bench/fetch_idle.py --target kafka        # Apache Kafka 4.3.1

Creates topics of up to 5,000 partitions (N in all) on a fresh broker, then times Fetch requests
(``max_wait_ms`` 0, every partition at its log end, so every answer is empty) over one
connection, one at a time:

- ``full``: sessionless full fetches (epoch -1), every partition named and answered;
- ``incremental``: a KIP-227 session created by one full fetch (epoch 0), then incremental
  fetches naming no partition: the broker still looks at all N, and answers none.

Prints ms per request and requests/s for each, and the broker's CPU seconds per request
(from /proc, kafkawire only).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compat_tests.scenarios import create_topic  # noqa: E402
from compat_tests.wire import Connection  # noqa: E402
from protocol._generated.fetch_request import FetchRequest  # noqa: E402

FETCH_VERSION = 16
#: Kafka refuses a CreateTopics of more than 10,000 metadata records: topics of 5,000
TOPIC_PARTITIONS_MAX = 5000


def _cpu_s(pid: int | None) -> float:
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100.0  # utime + stime, USER_HZ 100


def _topic_id(c: Connection, topic: str, partitions: int, timeout_s: float = 600) -> Any:
    """The topic's id once Metadata shows a leader for each of its partitions."""
    from protocol._generated.metadata_request import MetadataRequest

    deadline = time.monotonic() + timeout_s
    while True:
        md = c.request(MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=topic)]), 12)
        t = md.topics[0]
        if t.error_code == 0 and sum(p.leader_id >= 0 for p in t.partitions) == partitions:
            return t.topic_id
        if time.monotonic() > deadline:
            raise AssertionError(f"{topic}: no leaders after {timeout_s} s")
        time.sleep(0.5)


def fetch_request(topics_parts: list[tuple[Any, int]], session_id: int, epoch: int
                  ) -> FetchRequest:
    topics = [FetchRequest.FetchTopic(topic_id=tid, partitions=[
        FetchRequest.FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1 << 20)
        for p in range(n)]) for tid, n in topics_parts]
    return FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=50 << 20,
                        isolation_level=0, session_id=session_id, session_epoch=epoch,
                        topics=topics, forgotten_topics_data=[], rack_id="")


def _wait_servable(c: Connection, topics: list[tuple[Any, int]], timeout_s: float = 900
                   ) -> None:
    """Until a sessionless fetch of every partition answers no error (Kafka becomes the
    leader of thousands of new partitions some time after Metadata names it)."""
    deadline = time.monotonic() + timeout_s
    while True:
        r = c.request(fetch_request(topics, 0, -1), FETCH_VERSION)
        if not any(p.error_code for t in r.responses for p in t.partitions):
            return
        if time.monotonic() > deadline:
            raise AssertionError("partitions still answer errors")
        time.sleep(1)


def _time(label: str, n: int, one: Callable[[int], None], pid: int | None) -> None:
    one(0)  # warm up
    cpu0, t0 = _cpu_s(pid), time.perf_counter()
    for i in range(1, n + 1):
        one(i)
    wall = time.perf_counter() - t0
    cpu = _cpu_s(pid) - cpu0
    print(f"| {label} | {1000 * wall / n:.2f} | {n / wall:.1f} | "
          f"{1000 * cpu / n:.2f} |" if pid else f"| {label} | {1000 * wall / n:.2f} | "
          f"{n / wall:.1f} | |")


def measure(bootstrap: str, partitions: int, requests: int, pid: int | None) -> None:
    with Connection(bootstrap, timeout=600) as c:
        topics: list[tuple[Any, int]] = []
        for i in range(0, partitions, TOPIC_PARTITIONS_MAX):
            n = min(TOPIC_PARTITIONS_MAX, partitions - i)
            create_topic(c, f"idle-{i}", n, wait=False)
            topics.append((_topic_id(c, f"idle-{i}", n), n))
        print(f"\n{partitions} idle partitions, {requests} fetches each (Fetch v{FETCH_VERSION})\n")
        print("| fetch | ms/request | requests/s | broker CPU ms/request |")
        print("|---|---|---|---|")

        _wait_servable(c, topics)

        def full(_i: int) -> None:
            r = c.request(fetch_request(topics, 0, -1), FETCH_VERSION)
            assert r.error_code == 0
            assert sum(len(t.partitions) for t in r.responses) == partitions

        _time("full (sessionless)", requests, full, pid)
        first = c.request(fetch_request(topics, 0, 0), FETCH_VERSION)
        sid, epoch = first.session_id, 1
        if sid == 0:
            print("| incremental | (broker created no session) | | |")
            return

        def incremental(_i: int) -> None:
            nonlocal epoch
            r = c.request(fetch_request([], sid, epoch), FETCH_VERSION)
            assert r.error_code == 0, r.error_code
            if r.responses:  # not expected: show what the broker found new
                p = r.responses[0].partitions[0]
                print(f"epoch {epoch}: {sum(len(t.partitions) for t in r.responses)} "
                      f"partitions answered, e.g. {p.partition_index} error {p.error_code} "
                      f"hw {p.high_watermark} lso {p.last_stable_offset} "
                      f"start {p.log_start_offset}")
            epoch += 1

        _time("incremental, nothing new", requests, incremental, pid)


@contextmanager
def _target(name: str) -> Iterator[tuple[str, int | None]]:
    if name == "kafka":
        from compat_tests.kafka_dist import running_kafka

        with running_kafka() as bootstrap:
            yield bootstrap, None
        return
    from kafkawire.tools.testing import BrokerProcess

    with tempfile.TemporaryDirectory() as d, BrokerProcess(Path(d) / "data") as b:
        assert b.proc is not None
        yield b.bootstrap, b.proc.pid


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=10000)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--target", choices=("kafkawire", "kafka"), default="kafkawire")
    a = ap.parse_args()
    with _target(a.target) as (bootstrap, pid):
        measure(bootstrap, a.partitions, a.requests, pid)


if __name__ == "__main__":
    main()
