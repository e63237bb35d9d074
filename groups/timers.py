"""Keyed deadlines for the sans-I/O coordinator: schedule, cancel, pop what is due.

A heap with lazy deletion: rescheduling a key leaves its old heap entry behind, recognised as
stale because the key's current deadline differs. The runtime asks ``next_deadline()`` and
calls back with ``now_ms``; nothing here reads a clock.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable


class Timers:
    def __init__(self) -> None:
        self._deadline: dict[Hashable, int] = {}
        self._heap: list[tuple[int, int, Hashable]] = []
        self._seq = 0

    def schedule(self, key: Hashable, deadline_ms: int) -> None:
        self._deadline[key] = deadline_ms
        self._seq += 1
        heapq.heappush(self._heap, (deadline_ms, self._seq, key))

    def cancel(self, key: Hashable) -> None:
        self._deadline.pop(key, None)

    def deadline(self, key: Hashable) -> int | None:
        return self._deadline.get(key)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._deadline

    def _clean(self) -> None:
        heap = self._heap
        while heap and self._deadline.get(heap[0][2]) != heap[0][0]:
            heapq.heappop(heap)
        if len(heap) > 64 and len(heap) > 4 * len(self._deadline):
            self._heap = [(d, i, k) for i, (k, d) in enumerate(self._deadline.items())]
            heapq.heapify(self._heap)

    def next_deadline(self) -> int | None:
        self._clean()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now_ms: int) -> list[Hashable]:
        """Keys whose deadline is <= now_ms, earliest first; they are unscheduled."""
        out: list[Hashable] = []
        while True:
            self._clean()
            if not self._heap or self._heap[0][0] > now_ms:
                return out
            _d, _s, key = heapq.heappop(self._heap)
            del self._deadline[key]
            out.append(key)
