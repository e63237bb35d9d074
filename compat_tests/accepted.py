"""Differences from Apache Kafka that kafkawire makes on purpose.

``ACCEPTED[scenario]`` lists ``(path glob, reason)`` pairs; a differing JSON path (as printed by
the test, e.g. ``v4.api_keys.76 ShareGroupHeartbeat``) matching a glob does not fail the test.
Every entry must have a row in FINDINGS.md explaining it. Keep the globs narrow.
"""

from __future__ import annotations

ACCEPTED: dict[str, list[tuple[str, str]]] = {
    # "api_versions": [("v*.api_keys.76 ShareGroupHeartbeat", "share groups not implemented")],
}
