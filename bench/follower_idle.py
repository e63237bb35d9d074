"""Leader CPU for followers fetching idle partitions: a 3-node cluster, N idle RF=3 partitions.

    .venv/bin/python bench/follower_idle.py                     # 3,000 partitions, 30 s
    .venv/bin/python bench/follower_idle.py --partitions 6000 --seconds 60

Starts a kafkawire cluster of 3 combined nodes (``kafkawire.tools.cluster.LocalCluster``, the code of
the package imported: set PYTHONPATH to measure another checkout), creates N partitions with
replication factor 3 (topics of 150), waits until every partition has its 3 replicas
in the ISR, lets it settle, then reads each node's CPU time (utime + stime from /proc) over
``--seconds`` while nothing is produced. Each node leads a third of the partitions and follows
the rest: its followers keep one KIP-227 session per leader and fetch every
``replica.fetch.wait.max.ms`` (500 ms): what the leaders spend answering these incremental
fetches of idle partitions is most of the CPU. Prints one markdown row per node and the total.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafkawire.tools.cluster import LocalCluster  # noqa: E402

#: partitions per CreateTopics: a large one keeps each node busy creating logs long enough
#: to miss heartbeats and Raft fetches on a loaded 2-core machine
TOPIC_PARTITIONS = 150


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100.0  # utime + stime, USER_HZ 100


def create(bootstrap: str, partitions: int) -> list[str]:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = []
    for i in range(0, partitions, TOPIC_PARTITIONS):
        name = f"idle-{i}"
        n = min(TOPIC_PARTITIONS, partitions - i)
        for _attempt in range(10):  # a controller election under load: ask again
            try:
                admin.create_topics([NewTopic(name, n, 3)])[name].result(300)
                break
            except Exception as e:
                if "TOPIC_ALREADY_EXISTS" in str(e):
                    break
                print(f"{name}: {e}; retrying", file=sys.stderr)
                time.sleep(5)
        names.append(name)
    return names


def wait_in_sync(bootstrap: str, names: list[str], partitions: int, timeout_s: float) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout_s
    while True:
        md = admin.list_topics(timeout=60).topics
        full = sum(1 for n in names if n in md for p in md[n].partitions.values()
                   if len(p.isrs) == 3 and p.leader >= 0)
        if full == partitions:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"only {full}/{partitions} partitions fully in sync")
        time.sleep(2)


def leaders(bootstrap: str, names: list[str]) -> dict[int, int]:
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=60).topics
    out: dict[int, int] = {}
    for n in names:
        for p in (md[n].partitions.values() if n in md else ()):
            out[p.leader] = out.get(p.leader, 0) + 1
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=3000)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--settle", type=float, default=10.0)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d, LocalCluster(Path(d) / "cluster") as c:
        c.up(3)
        names = create(c.bootstrap, a.partitions)
        wait_in_sync(c.bootstrap, names, a.partitions, 900)
        led = leaders(c.bootstrap, names)
        time.sleep(a.settle)
        pids = {n: c.pid_of(n) for n in c.broker_ids}
        before = {n: _cpu_s(pid) for n, pid in pids.items()}
        t0 = time.monotonic()
        time.sleep(a.seconds)
        wall = time.monotonic() - t0
        after = {n: _cpu_s(pid) for n, pid in pids.items()}
        print(f"\n{a.partitions} idle RF=3 partitions, 3 combined nodes, {wall:.0f} s\n")
        print("| node | partitions led | CPU % |")
        print("|---|---|---|")
        total = 0.0
        for n in sorted(pids):
            pct = 100 * (after[n] - before[n]) / wall
            total += pct
            print(f"| {n} | {led.get(n, 0)} | {pct:.1f} |")
        print(f"| all | {a.partitions} | {total:.1f} |")


if __name__ == "__main__":
    main()
