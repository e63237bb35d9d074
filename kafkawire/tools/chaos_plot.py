"""The chaos run's picture: acknowledged records per second and acknowledgement latency (p50,
p99, max per second) over time, each fault a shaded span labelled with its kind and node, and
the per-partition unavailability windows as red bars (one lane per partition). Needs matplotlib (the optional extra ``chaos``)."""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)

from kafkawire.tools.chaos_check import Fault, Report, Send  # noqa: E402

FAULT_COLOURS = {"kill": "tab:red", "stop": "tab:orange", "pause": "tab:purple",
                 "partition": "tab:blue"}


def _per_second(sends: list[Send]) -> tuple[list[int], list[int], dict[int, list[float]]]:
    counts: dict[int, int] = defaultdict(int)
    latencies: dict[int, list[float]] = defaultdict(list)
    for s in sends:
        if s.acked_s is None or s.txn is not None:
            continue
        sec = int(s.acked_s)
        counts[sec] += 1
        latencies[sec].append((s.acked_s - s.sent_s) * 1000)
    end = max(counts, default=0)
    xs = list(range(end + 1))
    return xs, [counts.get(x, 0) for x in xs], latencies


def plot(path: Path, sends: list[Send], faults: list[Fault], rep: Report,
         duration_s: float) -> None:
    xs, counts, latencies = _per_second(sends)
    fig, (ax1, ax2) = plt.subplots(2, 1, sharex=True, figsize=(12, 7))
    ax1.plot(xs, counts, color="black", linewidth=1)
    ax1.set_ylabel("acknowledged records / s")
    title = (f"kafkawire chaos: {rep.acknowledged} acknowledged, lost {len(rep.lost)}, "
             f"duplicates {len(rep.duplicates)}, reordered {len(rep.reordered)}, "
             f"aborted reads {len(rep.aborted_reads)}")
    ax1.set_title(title, fontsize=10)
    for q, colour, name in ((0.5, "tab:green", "p50"), (0.99, "tab:orange", "p99"),
                            (1.0, "tab:red", "max")):
        ys = []
        for x in xs:
            lat = sorted(latencies.get(x, []))
            ys.append(lat[min(len(lat) - 1, math.floor(q * (len(lat) - 1)))] if lat else
                      float("nan"))
        ax2.plot(xs, ys, color=colour, linewidth=1, label=name)
    ax2.set_yscale("log")
    ax2.set_ylabel("ack latency ms (per second)")
    ax2.set_xlabel("seconds since start")
    ax2.legend(loc="upper right", fontsize=8)
    top = max(counts, default=1) or 1
    for f in faults:
        end = f.end_s if f.end_s is not None else duration_s
        colour = FAULT_COLOURS.get(f.kind, "grey")
        for ax in (ax1, ax2):
            ax.axvspan(f.start_s, end, color=colour, alpha=0.15)
        ax1.text(f.start_s, top * 1.02, f"{f.kind} {','.join(map(str, f.nodes))}",
                 fontsize=7, color=colour, rotation=30)
    parts = sorted({p for p, _a, _b in rep.partition_unavailable})
    for p, a, b in rep.partition_unavailable:  # one red lane per partition below zero
        y = -top * 0.04 * (1 + parts.index(p))
        ax1.hlines(y, a, b, colors="red", linewidth=3)
        ax1.text(b, y, f" p{p}", fontsize=6, color="red", va="center")
    ax1.set_ylim(-top * 0.04 * (len(parts) + 1.5), top * 1.2)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
