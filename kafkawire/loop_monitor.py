"""Who holds the event loop: a trio instrument that times every task step.

A broker on trio is one thread: a task step that runs long (a big synchronous computation, a
blocking call) delays every other task, Raft fetches and heartbeats included. With
``KAFKAWIRE_SLOW_STEP_MS=N`` in the environment, each task step longer than N ms is logged
(``kafkawire.loop`` at WARNING, rate limited) with the task's name, and every minute the
totals: steps, the time in steps over N ms by task name, the longest. With
``KAFKAWIRE_SLOW_REQUEST_MS=N``, requests slower than N ms are logged (``kafkawire.slow_requests``). The wall time of a step
includes time the process was not scheduled by the OS (a CPU-starved node shows long steps
everywhere; a blocking task shows long steps in one place).
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter

import trio

log = logging.getLogger("kafkawire.loop")
#: with ``KAFKAWIRE_SLOW_REQUEST_MS=N`` in the environment, requests that took longer than N ms
#: from their frame to their answer are logged (``kafkawire.server``), and the parts of them
#: worth naming (a Produce's transaction verification)
slow_requests = logging.getLogger("kafkawire.slow_requests")
REPORT_EVERY_S = 60.0
#: at most this many slow-step lines per report interval
MAX_LINES = 50


class SlowStepMonitor(trio.abc.Instrument):
    def __init__(self, threshold_ms: float) -> None:
        self.threshold_s = threshold_ms / 1000
        self._started = 0.0
        self.steps = 0
        self.slow: Counter[str] = Counter()
        self.slow_ms: Counter[str] = Counter()
        self.longest: tuple[float, str] = (0.0, "")
        self._lines = 0
        self._report_at = time.perf_counter() + REPORT_EVERY_S

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self._started = time.perf_counter()

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        now = time.perf_counter()
        took = now - self._started
        self.steps += 1
        if took >= self.threshold_s:
            name = task.name
            self.slow[name] += 1
            self.slow_ms[name] += round(took * 1000)
            if took > self.longest[0]:
                self.longest = (took, name)
            if self._lines < MAX_LINES:
                self._lines += 1
                log.warning("task step of %.0f ms: %s", took * 1000, name)
        if now >= self._report_at:
            self._report(now)

    def _report(self, now: float) -> None:
        top = ", ".join(f"{n} {c}x {self.slow_ms[n]} ms" for n, c in self.slow.most_common(8))
        log.warning("loop: %d steps, %d over %.0f ms (longest %.0f ms: %s); %s", self.steps,
                    sum(self.slow.values()), self.threshold_s * 1000, self.longest[0] * 1000,
                    self.longest[1], top or "-")
        self.steps, self._lines = 0, 0
        self.slow.clear()
        self.slow_ms.clear()
        self.longest = (0.0, "")
        self._report_at = now + REPORT_EVERY_S


def _env_ms(name: str) -> float:
    try:
        return float(os.environ.get(name) or 0)
    except ValueError:
        return 0.0


SLOW_REQUEST_S = _env_ms("KAFKAWIRE_SLOW_REQUEST_MS") / 1000


def instruments_from_env() -> list[trio.abc.Instrument]:
    threshold = _env_ms("KAFKAWIRE_SLOW_STEP_MS")
    return [SlowStepMonitor(threshold)] if threshold > 0 else []
