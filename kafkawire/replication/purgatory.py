"""Waiting for appends: Fetch long-polls park here until data arrives or their deadline.

A waiter registers one event under every partition key it watches; ``notify`` (called after an
append, a high-watermark move, a truncation or a deletion) wakes every waiter of that key.
Deadlines use trio's clock, so every long-poll is answered by its ``max_wait_ms``.
"""

from __future__ import annotations

from collections.abc import Iterable

import trio

Key = tuple[str, int]


class AppendNotifier:
    def __init__(self) -> None:
        self._waiters: dict[Key, set[trio.Event]] = {}

    def notify(self, topic: str, partition: int) -> None:
        events = self._waiters.pop((topic, partition), None)
        if events:
            for ev in events:
                ev.set()

    def notify_all(self) -> None:
        waiters, self._waiters = self._waiters, {}
        for events in waiters.values():
            for ev in events:
                ev.set()

    async def wait_any(self, keys: Iterable[Key], deadline: float) -> bool:
        """Wait until one of ``keys`` is notified (True) or trio's clock passes deadline."""
        ev = trio.Event()
        keys = list(keys)
        for k in keys:
            self._waiters.setdefault(k, set()).add(ev)
        try:
            with trio.move_on_at(deadline):
                await ev.wait()
                return True
            return False
        finally:
            for k in keys:
                s = self._waiters.get(k)
                if s is not None:
                    s.discard(ev)
                    if not s:
                        del self._waiters[k]

    def waiting(self) -> int:
        return sum(len(s) for s in self._waiters.values())
