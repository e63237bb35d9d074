"""Creating, stopping and restarting thousands of partitions on one node (issue 18).

    .venv/bin/python bench/create_partitions.py                     # 5,000 (+1,000)
    .venv/bin/python bench/create_partitions.py --partitions 10000 --profile /tmp/prof

One CreateTopics of ``--partitions`` partitions (librdkafka's AdminClient), one
CreatePartitions adding ``--more``, a clean stop, a start, a kill -9 and a start; each start
timed to the first ApiVersions answer. The partitions stay empty: what is measured is the cost
of a partition itself (directories, files, checkpoints, metadata records, leadership).
``--profile PREFIX`` runs the broker under cProfile and writes ``PREFIX.<n>`` for the n-th
process that exits cleanly (1: create + stop; 3: the restart after kill -9 + the final stop).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafkawire.tools.testing import BrokerProcess  # noqa: E402


class ProfiledBroker(BrokerProcess):
    """A BrokerProcess whose process runs under cProfile when ``prefix`` is set."""

    def __init__(self, *args: object, prefix: str | None = None, **kw: object) -> None:
        super().__init__(*args, **kw)  # type: ignore[arg-type]
        self.prefix = prefix
        self.launches = 0

    def command(self) -> list[str]:
        cmd = super().command()
        if not self.prefix:
            return cmd
        self.launches += 1
        return [cmd[0], "-m", "cProfile", "-o", f"{self.prefix}.{self.launches}", *cmd[1:]]


def _timed(out: dict[str, float], key: str, label: str, fn: Callable[[], object]) -> None:
    t = time.monotonic()
    fn()
    out[key] = time.monotonic() - t
    print(f"{label}: {out[key]:.2f} s", flush=True)


def _create(bootstrap: str, partitions: int, more: int, bound: float,
            out: dict[str, float]) -> None:
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 300000})
    _timed(out, "create", f"CreateTopics, {partitions} partitions",
           lambda: admin.create_topics([NewTopic("t0", partitions, 1)],
                                       request_timeout=bound)["t0"].result(bound))
    _timed(out, "create_partitions", f"CreatePartitions, {partitions} -> {partitions + more}",
           lambda: admin.create_partitions([NewPartitions("t0", partitions + more)],
                                           request_timeout=bound)["t0"].result(bound))


def run(partitions: int, more: int, nofile: int, prefix: str | None) -> dict[str, float]:
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="kw-create-") as tmp:
        bp = ProfiledBroker(Path(tmp) / "data", open_files_limit=nofile, prefix=prefix)
        bound = max(600.0, partitions * 0.1)
        try:
            bp.start(bound)
            _create(bp.bootstrap, partitions, more, bound, out)
            _timed(out, "stop", "clean stop", lambda: bp.stop(bound))
            _timed(out, "clean_start", "clean restart", lambda: bp.start(bound))
            bp.kill()
            _timed(out, "kill9_start", "restart after kill -9", lambda: bp.start(bound))
        finally:
            bp.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--partitions", type=int, default=5000)
    ap.add_argument("--more", type=int, default=1000, help="partitions CreatePartitions adds")
    ap.add_argument("--nofile", type=int, default=1024, help="the broker's ulimit -n")
    ap.add_argument("--profile", default=None, help="cProfile output prefix")
    args = ap.parse_args()
    run(args.partitions, args.more, args.nofile, args.profile)


if __name__ == "__main__":
    main()
