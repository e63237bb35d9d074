"""Deterministic synthetic clickstream and the aggregates it must produce, in plain Python.

Events are generated on a simulated clock starting at :data:`EPOCH_MS`. Each event's event time
lags the clock by up to :data:`MAX_SKEW_MS` (events arrive out of order), which is less than
the Spark job's watermark delay, so none of them can ever be late. After them comes one
heartbeat far enough ahead to close every window (its own window stays open, so it never shows
up in the results), and then a few events for an already-closed window: those are late and the
job must drop them.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from dataclasses import asdict, dataclass

EPOCH_MS = 1_735_689_600_000  # 2025-01-01T00:00:00Z
WINDOW_MS = 60_000  # 1-minute tumbling windows
WATERMARK_DELAY_MS = 120_000  # "2 minutes" in the Spark job
MAX_SKEW_MS = 30_000  # event time may lag the producing clock by this much (< the delay)
HEARTBEAT_PAGE = "__heartbeat__"

PAGES = ["/", "/search", "/product", "/cart", "/checkout", "/help", "/account", "/blog"]
PAGE_WEIGHTS = [30, 20, 25, 8, 4, 3, 6, 4]


@dataclass(frozen=True)
class Event:
    event_id: int
    user: str
    page: str
    ts: int  # event time, ms since the epoch
    dwell_ms: int

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()


@dataclass(frozen=True)
class Stream:
    events: list[Event]  # on time, in producing order
    heartbeat: Event  # advances the watermark past every window of ``events``
    late: list[Event]  # behind the watermark once the heartbeat is seen


def generate(n: int, seed: int = 7, users: int = 40, mean_gap_ms: int = 400) -> Stream:
    rng = random.Random(seed)
    clock = EPOCH_MS
    events = []
    for i in range(n):
        clock += int(rng.expovariate(1 / mean_gap_ms)) + 1
        page = rng.choices(PAGES, PAGE_WEIGHTS)[0]
        events.append(
            Event(
                event_id=i,
                user=f"u{rng.randrange(users):03d}",
                page=page,
                ts=clock - rng.randrange(MAX_SKEW_MS),
                dwell_ms=rng.randrange(200, 60_000),
            )
        )
    last_window_end = (clock // WINDOW_MS + 1) * WINDOW_MS
    heartbeat = Event(n, "system", HEARTBEAT_PAGE, last_window_end + WATERMARK_DELAY_MS + 1, 0)
    late = [
        Event(n + 1 + j, f"u{j:03d}", PAGES[j % len(PAGES)], EPOCH_MS + 1_000 * j, 1_000)
        for j in range(5)
    ]
    return Stream(events, heartbeat, late)


Key = tuple[int, str]  # (window start ms, page)


def expected_aggregates(events: list[Event]) -> dict[Key, tuple[int, int]]:
    """{(window start, page): (views, total dwell ms)} over 1-minute tumbling windows."""
    out: dict[Key, list[int]] = defaultdict(lambda: [0, 0])
    for e in events:
        if e.page == HEARTBEAT_PAGE:
            continue
        acc = out[(e.ts // WINDOW_MS * WINDOW_MS, e.page)]
        acc[0] += 1
        acc[1] += e.dwell_ms
    return {k: (v[0], v[1]) for k, v in out.items()}
