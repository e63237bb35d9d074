"""Regular-expression subscriptions of KIP-848 groups, resolved as Kafka does it: asynchronously.

A heartbeat that needs a resolution schedules one (a timer due at once, outside the heartbeat),
which writes a ConsumerGroupRegularExpression record per regex and bumps the group epoch when a
resolution changed; the next heartbeat computes the new target. A group resolves again when a
member brings an unresolved regex, when topics were created since its last resolution, or after
``REGEX_REFRESH_MAX_INTERVAL_MS``, never more often than every 10 s
(``REGEX_REFRESH_MIN_INTERVAL_MS``). Matching is a full match over every topic name, internal
topics included, as Kafka's. **Deviation:** Python's ``re`` instead of RE2/J: RE2 syntax is a
subset of ``re`` except for a few escapes (``\\pN``, ``\\C``), which ``re`` rejects or reads
otherwise; look-arounds and back-references, which RE2 rejects (INVALID_REGULAR_EXPRESSION),
are accepted here. No RE2 binding ships as a pure-Python wheel for every platform we run on.
"""

from __future__ import annotations

import re

from groups.config import REGEX_REFRESH_MAX_INTERVAL_MS, REGEX_REFRESH_MIN_INTERVAL_MS
from groups.consumer_group import ConsumerGroup, ConsumerMember, ResolvedRegex, TopicsView
from groups.records import Records, epoch_record, regex_record
from groups.target import metadata_hash
from groups.timers import Timers

#: the timer of a group's pending resolution: (REGEX_TIMER, group id)
REGEX_TIMER = "cregex"


def compile_regex(regex: str) -> re.Pattern[str] | None:
    try:
        return re.compile(regex)
    except (re.error, RecursionError, OverflowError):
        return None


def maybe_update_regexes(
    g: ConsumerGroup, old: ConsumerMember | None, m: ConsumerMember, records: Records,
    now_ms: int, timers: Timers, new_topics_version: int,
) -> tuple[bool, bool]:
    """Kafka's maybeUpdateRegularExpressions: (regex changed, changed to a regex already
    resolved). Schedules a resolution when one is due."""
    old_rx = old.subscribed_topic_regex if old is not None else None
    new_rx = m.subscribed_topic_regex
    counts = g.regex_counts()
    updated = resolved = require = False
    if old_rx != new_rx:
        updated = True
        if old_rx and counts.get(old_rx, 0) == 1 and old_rx in g.regexes:
            records.append(regex_record(g.group_id, old_rx, None))
        if new_rx:
            if counts.get(new_rx, 0) == 0:
                require = True
            elif new_rx in g.regexes:
                resolved = True
    after = dict(counts)
    if old_rx:
        after[old_rx] = after.get(old_rx, 0) - 1
    if new_rx:
        after[new_rx] = after.get(new_rx, 0) + 1
    wanted = {rx for rx, n in after.items() if n > 0}
    if not wanted:
        return updated, resolved
    key = (REGEX_TIMER, g.group_id)
    if key in timers:
        return updated, resolved
    if counts and now_ms <= g.last_regex_refresh_ms + REGEX_REFRESH_MIN_INTERVAL_MS:
        return updated, resolved
    require = require or any(rx not in g.regexes for rx in wanted)
    require = require or g.last_regex_version < new_topics_version
    require = require or now_ms >= g.last_regex_refresh_ms + REGEX_REFRESH_MAX_INTERVAL_MS
    if require:
        timers.schedule(key, now_ms)
    return updated, resolved


def resolve_regexes(g: ConsumerGroup, topics: TopicsView, metadata_version: int, now_ms: int) -> Records:
    """The asynchronous part: resolve the group's regexes against the current topics,
    persist them, bump the group epoch when a resolution changed."""
    wanted = sorted(g.regex_counts())
    records: Records = []
    changed = False
    names = sorted(topics)
    for rx in wanted:
        pattern = compile_regex(rx)
        matched = frozenset(n for n in names if pattern is not None and pattern.fullmatch(n))
        old = g.regexes.get(rx)
        if old is None or old.topics != matched:
            changed = True
        records.append(regex_record(g.group_id, rx, ResolvedRegex(matched, metadata_version, now_ms)))
    for rx in sorted(set(g.regexes) - set(wanted)):
        records.append(regex_record(g.group_id, rx, None))
    if changed and g.group_epoch <= g.assignment_epoch:
        resolved = dict(g.regexes)
        for rx in wanted:
            pattern = compile_regex(rx)
            resolved[rx] = ResolvedRegex(
                frozenset(n for n in names if pattern is not None and pattern.fullmatch(n)), 0, 0)
        view = ConsumerGroup(g.group_id, regexes=resolved)
        records.append(epoch_record(g.group_id, g.group_epoch + 1, metadata_hash(view, g.members, topics)))
    return records
