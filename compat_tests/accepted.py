"""Differences from Apache Kafka that kafkawire makes on purpose.

``ACCEPTED[scenario]`` lists ``(path glob, reason)`` pairs; a differing JSON path (as printed by
the test, e.g. ``api_keys.76 ShareGroupHeartbeat``) matching a glob does not fail the test.
Every entry must have a row in FINDINGS.md explaining it. Keep the globs narrow.
"""

from __future__ import annotations

_SESSIONS = "fetch sessions declined by design (session id 0), see FINDINGS.md"

_INTERNAL_RF = (
    "internal topics' replication factor defaults to 1 on a single node (Kafka: 3), see FINDINGS.md"
)

ACCEPTED: dict[str, list[tuple[str, str]]] = {
    "describe_configs_broker": [
        ("selected[0].configs.offsets.topic.replication.factor.synonyms[1].value", _INTERNAL_RF),
        (
            "selected[0].configs.transaction.state.log.replication.factor.synonyms[1].value",
            _INTERNAL_RF,
        ),
    ],
    "fetch_sessions": [
        ("new_session.session_id_set", _SESSIONS),
        # The session steps run only when the broker created a session.
        ("incremental_nothing_new", _SESSIONS),
        ("incremental_new_data_p1", _SESSIONS),
        ("wrong_epoch", _SESSIONS),
        ("unknown_session", _SESSIONS),
        ("close_session", _SESSIONS),
    ],
}
