"""The chaos history check on made-up histories (each anomaly found, a clean history passes,
Hypothesis for the ordering check), and a bounded live run of ``kafkawire cluster chaos``
against real processes with a stock client."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from kafkawire.tools.chaos_check import Read, Send, check, reordered_keys, unavailable_windows

ROOT = Path(__file__).resolve().parent.parent


def clean_history(n: int = 30) -> tuple[list[Send], list[Read]]:
    sends, reads = [], []
    for i in range(n):
        p, off = i % 3, i // 3
        sends.append(Send(f"p1-{i}", p, sent_s=i * 0.1, acked_s=i * 0.1 + 0.01, offset=off))
        reads.append(Read(p, off, f"p1-{i}", i * 0.1 + 0.02))
    return sends, reads


def test_clean_history_passes() -> None:
    sends, reads = clean_history()
    rep = check(sends, reads + reads[:5])  # re-reading an offset is no duplicate
    assert rep.ok and rep.acknowledged == 30 and rep.read == 30
    assert not rep.unavailable and rep.latency_ms_p50 == 10.0


def test_each_anomaly_is_found() -> None:
    sends, reads = clean_history()
    reads = [r for r in reads if r.key != "p1-4"]  # lost
    reads.append(Read(0, 99, "p1-3", 9.0))  # duplicate at a second offset
    a, b = reads[0], reads[3]  # p1-0 and p1-3 (partition 0, offsets 0 and 1) swapped
    reads[0], reads[3] = Read(0, 0, b.key, 1.0), Read(0, 1, a.key, 1.0)
    sends.append(Send("t1-0-0", 1, 5.0, 5.5, txn="aborted"))
    reads.append(Read(1, 50, "t1-0-0", 6.0))
    sends.append(Send("p1-30", 0, 4.0, error="timed out"))
    reads.append(Read(0, 60, "p1-30", 6.0))
    rep = check(sends, reads)
    assert rep.lost == ["p1-4"]
    assert rep.duplicates == ["p1-3"]
    assert "p1-0" in rep.reordered
    assert rep.aborted_reads == ["t1-0-0"]
    assert rep.unacknowledged_reads == 1 and rep.failed == 1
    assert not rep.ok


def test_committed_transactions_must_be_read_unknown_ones_need_not() -> None:
    sends = [Send("t1-0-0", 0, 1.0, 1.1, txn="committed"), Send("t1-1-0", 0, 2.0, txn="unknown")]
    rep = check(sends, [])
    assert rep.lost == ["t1-0-0"]


def test_unavailability_windows() -> None:
    sends = [Send(f"p1-{i}", 0, i * 0.1, i * 0.1 + 0.01) for i in range(10)]
    sends += [Send(f"p1-{10 + i}", 0, 1.0 + i * 0.1, 4.0) for i in range(10)]  # stalled 3 s
    sends += [Send("p1-99", 0, 4.5, 4.51)]
    windows = unavailable_windows(sends, gap_s=1.0)
    assert windows == [(0.91, 4.0)]
    assert unavailable_windows(sends[:10], gap_s=1.0) == []
    # partition 1 acknowledges all along: no whole-workload window, one for partition 0
    other = [Send(f"p1-{100 + i}", 1, i * 0.2, i * 0.2 + 0.01) for i in range(25)]
    rep = check(sends + other, [])
    assert rep.unavailable == [] and rep.partition_unavailable == [(0, 0.91, 4.0)]


@given(st.lists(st.integers(0, 50), unique=True, min_size=2))
def test_reordering_is_any_inversion(seqs: list[int]) -> None:
    reads = [Read(0, off, f"p1-{s}", 0.0) for off, s in enumerate(seqs)]
    found = reordered_keys(reads)
    inversions = {f"p1-{s}" for i, s in enumerate(seqs) if any(t > s for t in seqs[:i])}
    assert set(found) == inversions
    assert (found == []) == (seqs == sorted(seqs))


def test_short_live_chaos_run(tmp_path: Path) -> None:
    """A single node (what every build runs) under kill/stop/pause for a bounded 40 s; the
    3-node run is the same command with --nodes 3."""
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run(
        [sys.executable, "-m", "kafkawire", "cluster", "chaos", "--dir", str(tmp_path / "c"),
         "--nodes", "1", "--duration", "40s", "--interval", "8s", "--hold", "3s",
         "--rate", "100", "--out", str(out)],
        capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ok"] and not summary["lost"] and not summary["duplicates"]
    assert len(summary["faults"]) >= 2
    assert summary["acknowledged"] > 1000
    assert "RESULT: OK" in r.stdout
    assert (out / "chaos.png").stat().st_size > 10_000
    history = json.loads((out / "history.json").read_text())
    assert {f["kind"] for f in history["faults"]} <= {"kill", "stop", "pause"}
    assert not (tmp_path / "c" / "cluster.json").exists() or "stopped" in subprocess.run(
        [sys.executable, "-m", "kafkawire", "cluster", "status", "--dir", str(tmp_path / "c")],
        capture_output=True, text=True, env=env).stdout
