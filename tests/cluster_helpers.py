"""Small helpers of the multi-process cluster tests: wait for a condition, one raw request."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from tests.conftest import RawClient

T = TypeVar("T")


def wait_for(cond: Callable[[], T | None], timeout_s: float = 90.0, what: str = "") -> T:
    """The first truthy value of ``cond()`` (OSError/ConnectionError count as not yet)."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = cond()
        except (OSError, ConnectionError) as e:
            last = e
        if last:
            return last  # type: ignore[no-any-return]
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}: last {last!r}")


def request(address: str, req: Any, version: int, client_id: str = "cluster-test") -> Any:
    """One request on a fresh connection to ``address``."""
    client = RawClient(address, client_id)
    try:
        return client.request(req, version)
    finally:
        client.close()
