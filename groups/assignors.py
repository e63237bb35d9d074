"""Server-side partition assignors of KIP-848 consumer groups: ``uniform`` and ``range``.

Input: every member's subscribed topic ids, the topics (id -> partition count, and a name for
ordering) and the current target assignment; output: the new target assignment. Both are
deterministic (members and topics sorted), so replaying a group always gives the same answer.

* ``uniform`` (Kafka's UniformAssignor, the default): balanced and sticky. Members keep what
  they already have; unassigned partitions go to the least loaded subscriber; then partitions
  move from the most to the least loaded subscriber while they differ by more than one.
* ``range`` (Kafka's RangeAssignor): per topic, the sorted subscribers get contiguous ranges,
  the first ``partitions % members`` one partition more (co-partitioned topics line up).
"""

from __future__ import annotations

import uuid

Assignment = dict[uuid.UUID, set[int]]
TopicInfo = dict[uuid.UUID, tuple[str, int]]  # id -> (name, partition count)


def assign(
    name: str,
    subscriptions: dict[str, set[uuid.UUID]],
    topics: TopicInfo,
    current: dict[str, Assignment],
) -> dict[str, Assignment]:
    if name == "range":
        return range_assign(subscriptions, topics)
    return uniform_assign(subscriptions, topics, current)


def range_assign(subscriptions: dict[str, set[uuid.UUID]], topics: TopicInfo) -> dict[str, Assignment]:
    out: dict[str, Assignment] = {m: {} for m in subscriptions}
    for tid, (_name, n) in sorted(topics.items(), key=lambda kv: kv[1][0]):
        subs = sorted(m for m, s in subscriptions.items() if tid in s)
        if not subs or n <= 0:
            continue
        base, extra = divmod(n, len(subs))
        start = 0
        for i, m in enumerate(subs):
            count = base + (1 if i < extra else 0)
            if count:
                out[m][tid] = set(range(start, start + count))
            start += count
    return out


def uniform_assign(
    subscriptions: dict[str, set[uuid.UUID]], topics: TopicInfo, current: dict[str, Assignment]
) -> dict[str, Assignment]:
    members = sorted(subscriptions)
    owner: dict[tuple[uuid.UUID, int], str] = {}
    load = {m: 0 for m in members}
    # 1. stickiness: keep what is still valid
    for m in members:
        for tid, parts in sorted(current.get(m, {}).items()):
            if tid not in topics or tid not in subscriptions[m]:
                continue
            for p in sorted(parts):
                if p < topics[tid][1] and (tid, p) not in owner:
                    owner[(tid, p)] = m
                    load[m] += 1
    # 2. the rest to the least loaded subscriber
    for tid, (_name, n) in sorted(topics.items(), key=lambda kv: kv[1][0]):
        subs = [m for m in members if tid in subscriptions[m]]
        if not subs:
            continue
        for p in range(n):
            if (tid, p) in owner:
                continue
            m = min(subs, key=lambda x: (load[x], x))
            owner[(tid, p)] = m
            load[m] += 1
    # 3. balance: move from the most to the least loaded while they differ by more than one
    by_member: dict[str, list[tuple[uuid.UUID, int]]] = {m: [] for m in members}
    for tp, m in owner.items():
        by_member[m].append(tp)
    for _ in range(len(owner) * max(1, len(members))):
        moved = False
        for hi in sorted(members, key=lambda x: (-load[x], x)):
            for lo in sorted(members, key=lambda x: (load[x], x)):
                if load[hi] - load[lo] <= 1:
                    break
                movable = sorted(tp for tp in by_member[hi] if tp[0] in subscriptions[lo])
                if not movable:
                    continue
                tp = movable[-1]
                by_member[hi].remove(tp)
                by_member[lo].append(tp)
                load[hi] -= 1
                load[lo] += 1
                moved = True
                break
            if moved:
                break
        if not moved:
            break
    out: dict[str, Assignment] = {m: {} for m in members}
    for m, tps in by_member.items():
        for tid, p in tps:
            out[m].setdefault(tid, set()).add(p)
    return out
