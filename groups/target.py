"""The target assignment of a KIP-848 group (Kafka's TargetAssignmentBuilder): what the members
subscribe to, the hash of the subscribed topics' metadata (a change bumps the group epoch), the
assignor the group uses, and the records of a newly computed target. The assignors themselves
are ``groups/assignors.py``.
"""

from __future__ import annotations

import uuid
import zlib

from groups.assignors import Assignment, TopicInfo, assign
from groups.consumer_group import ConsumerGroup, ConsumerMember, TopicsView, copy_of
from groups.records import Records, target_metadata_record, target_record, target_tombstone


def subscribed(g: ConsumerGroup, m: ConsumerMember, topics: TopicsView) -> set[str]:
    """The existing topics ``m`` subscribes to, by name and through its resolved regex."""
    names = {t for t in m.subscribed_topic_names if t in topics}
    if m.subscribed_topic_regex:
        r = g.regexes.get(m.subscribed_topic_regex)
        if r is not None:
            names |= {t for t in r.topics if t in topics}
    return names


def metadata_hash(g: ConsumerGroup, members: dict[str, ConsumerMember], topics: TopicsView) -> int:
    names: set[str] = set()
    for m in members.values():
        names |= subscribed(g, m, topics)
    text = ";".join(f"{n}:{topics[n][0]}:{topics[n][1]}" for n in sorted(names))
    return zlib.crc32(text.encode()) if names else 0


def choose_assignor(members: dict[str, ConsumerMember], default: str) -> str:
    """The server assignor most members ask for (ties: the first by name), else ``default``."""
    votes: dict[str, int] = {}
    for m in members.values():
        if m.server_assignor:
            votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
    if votes:
        return max(sorted(votes), key=lambda a: votes[a])
    return default


def compute_target(
    g: ConsumerGroup, members: dict[str, ConsumerMember], current: dict[str, Assignment],
    epoch: int, now_ms: int, topics: TopicsView, default_assignor: str,
) -> tuple[Records, dict[str, Assignment]]:
    """A new target for ``members`` at ``epoch``: the records of what changed, and the target."""
    subs: dict[str, set[uuid.UUID]] = {}
    info: TopicInfo = {}
    for mid, m in members.items():
        names = subscribed(g, m, topics)
        subs[mid] = {topics[n][0] for n in names}
        for n in names:
            info[topics[n][0]] = (n, topics[n][1])
    target = assign(choose_assignor(members, default_assignor), subs, info, current)
    records: Records = []
    for mid in sorted(target):
        if mid not in current or target[mid] != copy_of(current[mid]):
            records.append(target_record(g.group_id, mid, target[mid]))
    for mid in sorted(set(current) - set(target)):
        records.append(target_tombstone(g.group_id, mid))
    records.append(target_metadata_record(g.group_id, epoch, now_ms))
    return records, target


def subscribed_topics(g: ConsumerGroup) -> set[str]:
    """Every topic name the group subscribes to (names and resolved regexes, existing or not)."""
    out: set[str] = set()
    for m in g.members.values():
        out |= set(m.subscribed_topic_names)
        if m.subscribed_topic_regex:
            r = g.regexes.get(m.subscribed_topic_regex)
            if r is not None:
                out |= r.topics
    return out
