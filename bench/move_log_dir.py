"""Move a ~100 MB partition between two log dirs of one broker while a producer sends
(acks=all, one record at a time) and measure: the move's time, the swap's event-loop hold (from
the broker log), produce latency before and during the move.

    PYTHONPATH=. python bench/move_log_dir.py
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Producer

from kafkawire.tools.testing import BrokerProcess
from tests.test_log_dir_moves import _alter, _fill, _moved, _new_topic

RECORDS, RECORD_BYTES = 100_000, 1000


def _stats(xs: list[float]) -> str:
    xs = sorted(xs)
    if not xs:
        return "n=0"
    return (f"n={len(xs)} p50={1000 * xs[len(xs) // 2]:.1f} ms "
            f"p99={1000 * xs[int(len(xs) * 0.99)]:.1f} ms max={1000 * xs[-1]:.1f} ms")


def _produce_one_by_one(bootstrap: str, topic: str, stop: threading.Event,
                        lat: list[tuple[float, float]]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    while not stop.is_set():
        t = time.monotonic()
        p.produce(topic, value=b"x" * 100, partition=0,
                  on_delivery=lambda _e, _m, t=t: lat.append((t, time.monotonic() - t)))
        p.flush(30)
        time.sleep(0.005)


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="move-log-dir-"))
    d1, d2 = tmp / "d1", tmp / "d2"
    bp = BrokerProcess(d1, overrides={"log.dirs": f"{d1},{d2}"}, log_file=tmp / "b.log")
    bp.start()
    try:
        topic = _new_topic(bp.bootstrap, 1)
        t0 = time.monotonic()
        _fill(bp.bootstrap, topic, 0, RECORDS, RECORD_BYTES)
        print(f"filled {RECORDS * RECORD_BYTES / 1e6:.0f} MB in {time.monotonic() - t0:.1f} s")
        lat: list[tuple[float, float]] = []
        stop = threading.Event()
        th = threading.Thread(target=_produce_one_by_one, args=(bp.bootstrap, topic, stop, lat))
        th.start()
        time.sleep(5)
        start = time.monotonic()
        assert _alter(bp.bootstrap, [(str(d2), topic, 0)]) == [0]
        while not _moved(d1, d2, topic, 0):
            time.sleep(0.02)
        end = time.monotonic()
        time.sleep(2)
        stop.set()
        th.join()
        mb = RECORDS * RECORD_BYTES / 1e6
        print(f"move took {end - start:.2f} s ({mb / (end - start):.0f} MB/s)")
        print("produce before:", _stats([x for t, x in lat if t < start]))
        print("produce during:", _stats([x for t, x in lat if start <= t <= end]))
        print(*(ln for ln in bp.log().splitlines() if "log_mover" in ln), sep="\n")
    finally:
        bp.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
