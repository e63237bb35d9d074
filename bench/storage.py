"""Storage benchmarks: the log layer alone (no network, no client), on this machine's disk.

    .venv/bin/python bench/storage.py                 # everything (~10 GB written, ~5 minutes)
    .venv/bin/python bench/storage.py append recovery cleaner   # some parts only
    .venv/bin/python bench/storage.py large --large-gb 2        # a smaller "large" log

Parts:
  append    PartitionLog.append of 64 KiB batches (1 KiB records, as a producer sends them):
            MB/s to the page cache, and with fsync (one at the end; group commit every 16 MiB)
  recovery  reopen after a crash with nothing flushed (recovery point 0): seconds per GB,
            page cache warm and cold (pages dropped with posix_fadvise DONTNEED)
  cleaner   the log cleaner over a compacted log (100-byte values, 100k keys, uncompressed and
            lz4 batches): MB/s and records/s read
  layer     the partition-state layer's cost per call (log/replica.py): small batches appended
            and read through Partition (acks=all waiter included) vs on the PartitionLog directly
  large     a 10 GB log of 4 MiB segments: write rate, clean open time and memory, unclean open
            (recovery point at the last flush), cold reads (p50/p99 of random 1 MiB reads and
            sequential MB/s after dropping the pages)

Prints a Markdown table per part (figures go to docs/BENCHMARKS.md). Data lives in a temporary
directory (``--dir`` to choose where) that is always removed.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from log.cleaner import clean_log, log_to_clean  # noqa: E402
from log.config import LogConfig  # noqa: E402
from log.partition_log import PartitionLog  # noqa: E402
from log.replica import FetchIsolation, Partition  # noqa: E402
from protocol.records import SimpleRecord, build_batch, iter_headers  # noqa: E402

MB = 1024 * 1024
NOW = int(time.time() * 1000)


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def drop_pages(d: Path) -> None:
    """Evict the directory's files from the page cache (they are clean after an fsync)."""
    for p in d.rglob("*"):
        if p.is_file():
            fd = os.open(p, os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def batch_of(n_records: int, value_size: int, *, keys: Callable[[int], bytes] | None = None,
             codec: int = 0, seed: int = 0) -> bytes:
    rnd = random.Random(seed)
    recs = [
        SimpleRecord(keys(i) if keys else None, rnd.randbytes(value_size), (), NOW)
        for i in range(n_records)
    ]
    return build_batch(recs, compression=codec)


def fill(log: PartitionLog, template: bytes, total_bytes: int) -> tuple[int, float]:
    """Append copies of ``template`` until ``total_bytes``; returns (bytes, seconds)."""
    headers = iter_headers(template)
    n = max(1, total_bytes // len(template))
    buf = bytearray(template)
    t0 = time.perf_counter()
    for _ in range(n):
        buf[:] = template
        log.append(buf, headers, leader_epoch=0, now_ms=NOW)
    return n * len(template), time.perf_counter() - t0


def table(title: str, rows: list[tuple[str, str]]) -> None:
    print(f"\n### {title}\n")
    print("| measurement | figure |")
    print("|---|---|")
    for k, v in rows:
        print(f"| {k} | {v} |")
    sys.stdout.flush()


# ---------------------------------------------------------------------------------------------


def bench_append(root: Path, total: int) -> None:
    template = batch_of(64, 1000)  # ~64 KiB, 1 KiB records
    rows = []
    cfg = LogConfig(segment_bytes=512 * MB)

    d = root / "append-nofsync-0"
    log = PartitionLog.open(d, cfg, NOW)
    n, s = fill(log, template, total)
    rows.append(("append to the page cache, no fsync", f"{n / MB / s:.0f} MB/s"))
    log.close()
    shutil.rmtree(d)

    d = root / "append-fsync-0"
    log = PartitionLog.open(d, cfg, NOW)
    t0 = time.perf_counter()
    n, _ = fill(log, template, total)
    log.flush()
    s = time.perf_counter() - t0
    rows.append((f"append {n // MB} MiB then one fsync", f"{n / MB / s:.0f} MB/s"))
    log.close()
    shutil.rmtree(d)

    d = root / "append-group-0"
    log = PartitionLog.open(d, cfg, NOW)
    headers = iter_headers(template)
    buf = bytearray(template)
    per_flush = max(1, 16 * MB // len(template))
    waits: list[float] = []
    t0 = time.perf_counter()
    count = total // len(template)
    for i in range(count):
        buf[:] = template
        log.append(buf, headers, leader_epoch=0, now_ms=NOW)
        if (i + 1) % per_flush == 0:
            f0 = time.perf_counter()
            log.flush()
            waits.append(time.perf_counter() - f0)
    log.flush()
    s = time.perf_counter() - t0
    rows.append(("append with an fsync every 16 MiB (group commit)",
                 f"{count * len(template) / MB / s:.0f} MB/s"))
    rows.append(("fsync of 16 MiB, p50 / max", f"{statistics.median(waits) * 1e3:.1f} ms / "
                 f"{max(waits) * 1e3:.1f} ms"))
    log.close()
    shutil.rmtree(d)
    table(f"Append (PartitionLog.append, 64 KiB batches of 1 KiB records, {total // MB} MiB)",
          rows)


def bench_recovery(root: Path, total: int) -> None:
    template = batch_of(64, 1000)
    cfg = LogConfig(segment_bytes=256 * MB)
    d = root / "recovery-0"
    log = PartitionLog.open(d, cfg, NOW)
    n, _ = fill(log, template, total)
    # a crash: nothing closed, nothing flushed, recovery from offset 0
    del log
    gb = n / 1024**3
    rows = []
    for label, cold in (("page cache warm", False), ("page cache cold", True)):
        if cold:
            drop_pages(d)
        t0 = time.perf_counter()
        log = PartitionLog.open(d, cfg, NOW, clean_shutdown=False, recovery_point=0)
        s = time.perf_counter() - t0
        rows.append((f"recovery of {gb:.1f} GB, {label}", f"{s:.2f} s ({s / gb:.2f} s/GB, "
                     f"{n / MB / s:.0f} MB/s)"))
        del log
    t0 = time.perf_counter()
    log = PartitionLog.open(d, cfg, NOW, clean_shutdown=True)
    rows.append(("clean open of the same log", f"{(time.perf_counter() - t0) * 1e3:.0f} ms"))
    log.close()
    shutil.rmtree(d)
    table("Recovery after a crash (every batch CRC-checked, indexes rebuilt)", rows)


def bench_cleaner(root: Path, total: int) -> None:
    rows = []
    for codec, label in ((0, "uncompressed"), (3, "lz4")):
        d = root / f"cleaner-{codec}-0"
        cfg = LogConfig(segment_bytes=64 * MB, cleanup_policy="compact",
                        min_cleanable_dirty_ratio=0.01)
        log = PartitionLog.open(d, cfg, NOW)
        keys = 100_000
        per_batch = 200
        written = 0
        i = 0
        rnd = random.Random(codec)
        headers = None
        while written < total:
            start = rnd.randrange(keys)
            b = batch_of(per_batch, 100, keys=lambda j, s=start, n=keys: b"key-%08d" % ((s + j) % n),
                         codec=codec, seed=i)
            headers = iter_headers(b)
            log.append(bytearray(b), headers, leader_epoch=0, now_ms=NOW)
            written += len(b)
            i += 1
        log.roll()
        log.update_high_watermark(log.log_end_offset)
        records = i * per_batch
        ltc, _ = log_to_clean(("bench", 0), log, None, NOW)
        t0 = time.perf_counter()
        _end, stats = clean_log(ltc, NOW, 10_000_000)
        s = time.perf_counter() - t0
        rows.append((f"{label}: {written // MB} MiB, {records / 1e6:.1f} M records -> "
                     f"{stats.bytes_written // MB} MiB",
                     f"{s:.1f} s: {written / MB / s:.1f} MB/s, {records / s / 1e3:.0f} k records/s"))
        log.close()
        shutil.rmtree(d)
    table("Log cleaner (offset map + rewrite + swap; 100-byte values, 100k keys)", rows)


def bench_large(root: Path, total: int) -> None:
    seg = 4 * MB
    cfg = LogConfig(segment_bytes=seg)
    template = batch_of(256, 1000)  # ~256 KiB batches: 16 per segment
    d = root / "large-0"
    rows = []
    log = PartitionLog.open(d, cfg, NOW)
    flushes = 0
    t0 = time.perf_counter()
    headers = iter_headers(template)
    buf = bytearray(template)
    n = total // len(template)
    for k in range(n):
        buf[:] = template
        log.append(buf, headers, leader_epoch=0, now_ms=NOW)
        if k % 400 == 399:  # as the broker does after rolls: fsync, recovery point moves
            log.flush()
            flushes += 1
    log.flush()
    s = time.perf_counter() - t0
    segments = len(log.segments)
    size = log.size_bytes
    leo = log.log_end_offset
    rows.append((f"write {size / 1024**3:.1f} GB ({segments} segments of 4 MiB)",
                 f"{s:.0f} s, {size / MB / s:.0f} MB/s"))
    # crash after the last flush, then a clean close and reopen
    del log
    base_rss = rss_mb()
    t0 = time.perf_counter()
    log = PartitionLog.open(d, cfg, NOW, clean_shutdown=False, recovery_point=leo)
    rows.append(("unclean open, recovery point at the end (one segment scanned)",
                 f"{time.perf_counter() - t0:.2f} s"))
    log.close()
    del log
    t0 = time.perf_counter()
    log = PartitionLog.open(d, cfg, NOW, clean_shutdown=True)
    open_s = time.perf_counter() - t0
    rows.append(("clean open", f"{open_s:.2f} s"))
    rows.append(("memory held by the open log", f"{rss_mb() - base_rss:.0f} MB RSS "
                 f"({(rss_mb() - base_rss) * 1024 / segments:.1f} KiB per segment)"))
    # cold reads
    log.close()
    drop_pages(d)
    log = PartitionLog.open(d, cfg, NOW, clean_shutdown=True)
    rnd = random.Random(1)
    lat = []
    for _ in range(200):
        off = rnd.randrange(0, leo - 1000)
        t0 = time.perf_counter()
        res = log.read(off, MB)
        res.read_bytes()
        lat.append(time.perf_counter() - t0)
    lat.sort()
    rows.append(("cold random read of 1 MiB (index lookup, CRC check, pread)",
                 f"p50 {lat[len(lat) // 2] * 1e3:.1f} ms, p99 {lat[int(len(lat) * .99)] * 1e3:.1f} ms"))
    t0 = time.perf_counter()
    off = 0
    got = 0
    while got < min(512 * MB, size - MB):
        data = log.read(off, MB).read_bytes()
        if not data:
            break
        got += len(data)
        off = iter_headers(data)[-1][1].next_offset
    s = time.perf_counter() - t0
    rows.append(("cold sequential read from the start, 512 MiB", f"{got / MB / s:.0f} MB/s"))
    rows.append(("memory after the reads", f"{rss_mb() - base_rss:.0f} MB RSS above the "
                 "process before opening"))
    log.close()
    shutil.rmtree(d)
    table(f"A large log ({total / 1024**3:.0f} GB)", rows)


def _layer_run(root: Path, template: bytes, direct: bool, calls: int) -> tuple[float, float]:
    d = root / f"layer-{int(direct)}-0"
    log = PartitionLog.open(d, LogConfig(segment_bytes=1024 * MB), NOW)
    p = Partition(log, 1)
    p.become_leader(0, frozenset({1}), (1,), NOW)
    per_batch = next(iter(iter_headers(template)))[1].records_count
    t0 = time.process_time()
    for _ in range(calls):
        buf = bytearray(template)
        if direct:  # what the handlers did before the layer
            log.append(buf, iter_headers(buf), leader_epoch=0, now_ms=NOW)
            log.update_high_watermark(log.log_end_offset)
        else:
            info = p.append_as_leader(buf, iter_headers(buf), now_ms=NOW, required_acks=-1)
            p.wait_for_high_watermark(info.last_offset + 1)
    append_us = (time.process_time() - t0) / calls * 1e6
    t0 = time.process_time()
    for i in range(calls):
        if direct:
            log.read(i * per_batch, MB, max_offset=log.high_watermark)
        else:
            p.read(-1, i * per_batch, MB, isolation=FetchIsolation.HIGH_WATERMARK, now_ms=NOW)
    read_us = (time.process_time() - t0) / calls * 1e6
    log.close()
    shutil.rmtree(d)
    return append_us, read_us


def bench_layer(root: Path, calls: int) -> None:
    template = batch_of(10, 100)
    runs: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    for _ in range(5):
        for direct in (True, False):
            runs[direct].append(_layer_run(root, template, direct, calls))
    rows = []
    for direct, label in ((True, "PartitionLog directly"), (False, "through Partition")):
        a = statistics.median(r[0] for r in runs[direct])
        r = statistics.median(r[1] for r in runs[direct])
        rows.append((label, f"append {a:.1f} us, read {r:.1f} us"))
    table(f"Partition-state layer ({calls} calls of 10 x 100 B batches, median of 5, CPU time)", rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("parts", nargs="*",
                    default=["append", "recovery", "cleaner", "layer", "large"])
    ap.add_argument("--dir", default=None, help="where to write (default: a temp dir)")
    ap.add_argument("--append-mb", type=int, default=2048)
    ap.add_argument("--recovery-mb", type=int, default=2048)
    ap.add_argument("--cleaner-mb", type=int, default=256)
    ap.add_argument("--large-gb", type=float, default=10.0)
    ap.add_argument("--layer-calls", type=int, default=20000)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="kw-storage-bench-", dir=args.dir))
    try:
        print(f"kafkawire storage benchmarks, {time.strftime('%Y-%m-%d')}, data in {root}")
        if "append" in args.parts:
            bench_append(root, args.append_mb * MB)
        if "recovery" in args.parts:
            bench_recovery(root, args.recovery_mb * MB)
        if "cleaner" in args.parts:
            bench_cleaner(root, args.cleaner_mb * MB)
        if "layer" in args.parts:
            bench_layer(root, args.layer_calls)
        if "large" in args.parts:
            bench_large(root, int(args.large_gb * 1024**3))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
