"""Run the Raft simulation over many seeds and report the figures (``make raft-sim SEEDS=N``).

Seeds are split over ``--jobs`` worker processes (default 2); every seed is independent and
replays exactly with ``python -m kraft.raft.sim --seed N``. Prints the summed fault counts and
the election-time percentiles in virtual milliseconds, plus the wall time of the sweep.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kraft.raft import sim  # noqa: E402


def _run(seed: int) -> tuple[int, sim.Figures | None, str]:
    try:
        return seed, sim.run_seed(seed), ""
    except sim.InvariantError as e:
        return seed, None, str(e)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=10_000)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    t0 = time.monotonic()
    runs: list[sim.Figures] = []
    failed: list[tuple[int, str]] = []
    seeds = range(args.start, args.start + args.seeds)
    with multiprocessing.Pool(args.jobs) as pool:
        for seed, fig, err in pool.imap_unordered(_run, seeds, chunksize=16):
            if fig is None:
                failed.append((seed, err))
                print(f"seed {seed} FAILED: {err}", flush=True)
            else:
                runs.append(fig)
    wall = time.monotonic() - t0
    summary = sim.summarize(runs)
    print(f"seeds {args.start}..{args.start + args.seeds - 1}, {args.jobs} jobs, "
          f"{wall:.0f} s wall")
    for key, value in summary.items():
        print(f"  {key:28} {value}")
    voters = sorted({f.voters for f in runs})
    for n in voters:
        mine = [f for f in runs if f.voters == n]
        el = sorted(f.majority_elect_ms for f in mine)
        print(f"  {n} voters: {len(mine)} seeds, majority-partition elect p50 "
              f"{sim.percentile(el, 0.5)} ms, p99 {sim.percentile(el, 0.99)} ms")
    print(f"  failed                       {len(failed)} {[s for s, _ in failed[:20]]}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
