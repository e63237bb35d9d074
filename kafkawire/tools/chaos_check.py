"""The history check of ``kafkawire cluster chaos``: pure functions over what the clients saw.

A history is what the workload recorded, nothing taken from the brokers:

- ``Send``: one record a producer handed to its client: its key (``p<n>-<seq>`` for the
  idempotent producer, ``t<n>-<txn>-<i>`` for the transactional one), the partition it was sent
  to, when (seconds since the start), when it was acknowledged and at which offset, or the
  error the client gave up with, and for transactional records whether the transaction was
  committed, aborted or left unknown.
- ``Read``: one record a read_committed consumer returned: partition, offset, key, when.

Checks (Jepsen's vocabulary):

- lost: acknowledged (committed, for transactions) and never read;
- duplicates: a key read at more than one offset (reading the same offset twice, as after a
  consumer restart, is not a duplicate);
- reordered: within a partition, a key of the idempotent producer read at a higher offset than
  a later key of the same producer (one producer sends each partition's keys in order; with
  idempotence they must land in that order);
- moved: read at another offset than the one acknowledged;
- aborted reads: a record of an aborted transaction returned at read_committed;
- unacknowledged reads: read although the client gave up on it (allowed: an "indeterminate"
  write may land; counted, not an error);
- unavailability windows: stretches of at least ``gap_s`` without any acknowledgement while
  sends were outstanding.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Send:
    key: str
    partition: int
    sent_s: float
    acked_s: float | None = None
    offset: int | None = None
    error: str | None = None
    txn: str | None = None  # None (idempotent producer), "committed", "aborted", "unknown"

    @property
    def acknowledged(self) -> bool:
        if self.txn is not None:
            return self.txn == "committed" and self.error is None
        return self.acked_s is not None and self.error is None


@dataclass
class Read:
    partition: int
    offset: int
    key: str
    read_s: float


@dataclass
class Fault:
    kind: str  # kill, pause, partition, stop
    nodes: list[int]
    start_s: float
    end_s: float | None = None


@dataclass
class Report:
    sent: int = 0
    acknowledged: int = 0
    failed: int = 0
    read: int = 0
    lost: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    reordered: list[str] = field(default_factory=list)
    moved: list[str] = field(default_factory=list)
    aborted_reads: list[str] = field(default_factory=list)
    unacknowledged_reads: int = 0
    #: whole-workload windows (no acknowledgement at all) as (start, end)
    unavailable: list[tuple[float, float]] = field(default_factory=list)
    #: per-partition windows as (partition, start, end)
    partition_unavailable: list[tuple[int, float, float]] = field(default_factory=list)
    txn_committed: int = 0
    txn_aborted: int = 0
    latency_ms_p50: float = 0.0
    latency_ms_p99: float = 0.0
    latency_ms_max: float = 0.0
    faults: list[Fault] = field(default_factory=list)
    gap_s: float = 1.0

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicates or self.reordered or self.moved
                    or self.aborted_reads)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ok"] = self.ok
        d["unavailable_s_total"] = round(sum(b - a for a, b in self.unavailable), 3)
        d["partition_unavailable_s_total"] = round(
            sum(b - a for _p, a, b in self.partition_unavailable), 3)
        return d


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    i = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[i]


def _seq(key: str) -> tuple[str, int] | None:
    """(producer, sequence) of an idempotent producer's key ``p<n>-<seq>``."""
    if not key.startswith("p"):
        return None
    producer, _, seq = key.partition("-")
    return (producer, int(seq)) if seq.isdigit() else None


def reordered_keys(reads: list[Read]) -> list[str]:
    """Keys read after (at a higher offset than) a later key of the same producer in the
    same partition."""
    out = []
    by_partition: dict[int, dict[int, str]] = defaultdict(dict)
    for r in reads:
        by_partition[r.partition].setdefault(r.offset, r.key)
    for offsets in by_partition.values():
        highest: dict[str, int] = {}
        for off in sorted(offsets):
            ps = _seq(offsets[off])
            if ps is None:
                continue
            producer, seq = ps
            if seq < highest.get(producer, -1):
                out.append(offsets[off])
            highest[producer] = max(seq, highest.get(producer, -1))
    return out


def unavailable_windows(sends: list[Send], gap_s: float) -> list[tuple[float, float]]:
    """Stretches of at least ``gap_s`` between two acknowledgements (or from the first send,
    or up to the last send) while some send was outstanding (sent before the stretch ended,
    not acknowledged when it began)."""
    if not sends:
        return []
    marks = sorted({min(s.sent_s for s in sends),
                    *(s.acked_s for s in sends if s.acked_s is not None)})
    last_send = max(s.sent_s for s in sends)
    if last_send > marks[-1]:
        marks.append(last_send)
    out = []
    for begin, end in zip(marks, marks[1:], strict=False):
        if end - begin < gap_s:
            continue
        if any(s.sent_s < end and (s.acked_s is None or s.acked_s > begin) for s in sends):
            out.append((round(begin, 3), round(end, 3)))
    return out


def check(sends: list[Send], reads: list[Read], faults: list[Fault] | None = None,
          gap_s: float = 1.0) -> Report:
    rep = Report(faults=list(faults or []), gap_s=gap_s)
    rep.sent = len(sends)
    rep.acknowledged = sum(1 for s in sends if s.acknowledged)
    rep.failed = sum(1 for s in sends if s.error is not None)
    rep.txn_committed = sum(1 for s in sends if s.txn == "committed")
    rep.txn_aborted = sum(1 for s in sends if s.txn == "aborted")
    offsets_of: dict[str, set[tuple[int, int]]] = defaultdict(set)
    for r in reads:
        offsets_of[r.key].add((r.partition, r.offset))
    rep.read = len(offsets_of)
    by_key = {s.key: s for s in sends}
    for s in sends:
        seen = offsets_of.get(s.key)
        if s.acknowledged and not seen:
            rep.lost.append(s.key)
        if seen and s.txn == "aborted":
            rep.aborted_reads.append(s.key)
        if seen and not s.acknowledged and s.txn != "aborted":
            rep.unacknowledged_reads += 1
        if seen and s.offset is not None and s.txn is None and len(seen) == 1 \
                and (s.partition, s.offset) not in seen:
            rep.moved.append(s.key)
    rep.duplicates = sorted(k for k, seen in offsets_of.items() if len(seen) > 1)
    rep.reordered = reordered_keys(reads)
    plain = [s for s in sends if s.txn is None]
    rep.unavailable = unavailable_windows(plain, gap_s)
    for p in sorted({s.partition for s in plain}):
        rep.partition_unavailable += [(p, a, b) for a, b in unavailable_windows(
            [s for s in plain if s.partition == p], gap_s)]
    lat = sorted((s.acked_s - s.sent_s) * 1000 for s in sends
                 if s.acked_s is not None and s.txn is None)
    rep.latency_ms_p50 = round(_percentile(lat, 0.5), 2)
    rep.latency_ms_p99 = round(_percentile(lat, 0.99), 2)
    rep.latency_ms_max = round(lat[-1], 2) if lat else 0.0
    unknown = [k for k in offsets_of if k not in by_key]
    rep.moved.extend(f"{k} (never sent)" for k in unknown)
    return rep


def summary_text(rep: Report, duration_s: float) -> str:
    lines = [
        f"chaos run: {duration_s:.0f}s, {len(rep.faults)} faults injected "
        f"({', '.join(sorted({f.kind for f in rep.faults})) or 'none'})",
        f"records sent {rep.sent}, acknowledged {rep.acknowledged}, failed {rep.failed}, "
        f"read (distinct) {rep.read}; of them in transactions: committed "
        f"{rep.txn_committed}, aborted on purpose {rep.txn_aborted}",
        f"lost acknowledged: {len(rep.lost)}   duplicates: {len(rep.duplicates)}   "
        f"reordered: {len(rep.reordered)}   moved: {len(rep.moved)}   "
        f"aborted reads: {len(rep.aborted_reads)}",
        f"unacknowledged but read (indeterminate writes that landed): {rep.unacknowledged_reads}",
        f"ack latency ms: p50 {rep.latency_ms_p50}  p99 {rep.latency_ms_p99}  "
        f"max {rep.latency_ms_max}",
        f"unavailability (no ack for {rep.gap_s:g} s or more while sends waited): whole workload "
        f"{len(rep.unavailable)} windows, {sum(b - a for a, b in rep.unavailable):.1f}s; "
        f"per partition {len(rep.partition_unavailable)} windows, "
        f"{sum(b - a for _p, a, b in rep.partition_unavailable):.1f}s",
    ]
    for p, a, b in rep.partition_unavailable[:30]:
        lines.append(f"  partition {p}: {a:8.1f}s .. {b:8.1f}s  ({b - a:.1f}s)")
    lines.append("faults:")
    for f in rep.faults:
        end = f"{f.end_s:8.1f}s" if f.end_s is not None else "   (open)"
        lines.append(f"  {f.start_s:8.1f}s .. {end}  {f.kind} {','.join(map(str, f.nodes))}")
    for name in ("lost", "duplicates", "reordered", "moved", "aborted_reads"):
        keys = getattr(rep, name)
        if keys:
            lines.append(f"{name} (first 10): {', '.join(keys[:10])}")
    lines.append("RESULT: " + ("OK" if rep.ok else "FAILED"))
    return "\n".join(lines) + "\n"
