"""Kill -9 the active controller of a 3-controller cluster again and again while topics are
created, and report the election time (``make quorum-failover ROUNDS=N``); first the metadata
commit latency of CreateTopics on the active controller (``--latency N``).

Starts a ``kafkawire.tools.cluster.LocalCluster`` of 3 controllers and 1 broker (dedicated controllers, Kafka's default
``controller.quorum.*`` timeouts unless given with ``--override``), runs
``tests/quorum_failover.run_failover`` for ``--rounds`` kills, checks that every acknowledged
CreateTopics is on the broker, and prints p50/p99/max of the time from the kill until a
survivor leads in a newer epoch and until the next write is acknowledged.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafkawire.tools.cluster import LocalCluster  # noqa: E402
from tests.quorum_failover import (  # noqa: E402
    create_latency_ms,
    percentile,
    run_failover,
    topics_on,
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--controllers", type=int, default=3)
    ap.add_argument("--latency", type=int, default=200, metavar="N",
                    help="first measure N CreateTopics one after the other (commit latency)")
    ap.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args()
    overrides = dict(o.split("=", 1) for o in args.override)
    with tempfile.TemporaryDirectory(prefix="kafkawire-failover-") as tmp:
        cluster = LocalCluster(Path(tmp))
        started = time.monotonic()
        try:
            cluster.up(1, args.controllers, overrides=overrides, defaults=False, timeout_s=240)
            latency = create_latency_ms(cluster, args.latency) if args.latency else []
            result = run_failover(cluster, args.rounds)
            broker = cluster.node(cluster.broker_ids[0]).address
            deadline = time.monotonic() + 60
            missing = set(result.acknowledged) - topics_on(broker)
            while missing and time.monotonic() < deadline:
                time.sleep(0.2)
                missing = set(result.acknowledged) - topics_on(broker)
        finally:
            cluster.down()
    for label, values in (("CreateTopics on the active controller", latency),
                          ("elected (kill -> a survivor leads)", result.elect_ms),
                          ("first write acknowledged after the kill", result.write_ms)):
        if not values:
            continue
        print(f"{label:42s} p50 {percentile(values, 50):6.0f} ms  p99 "
              f"{percentile(values, 99):6.0f} ms  max {max(values):6.0f} ms  (n={len(values)})")
    print(f"acknowledged CreateTopics: {len(result.acknowledged)}, lost: {len(missing)}; "
          f"other answers: {result.errors}; wall {time.monotonic() - started:.0f} s")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
