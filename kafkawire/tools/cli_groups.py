"""``kafkawire group list|describe|reset`` (confluent-kafka's admin client).

describe: state, coordinator, protocol, members, and per partition the committed offset, the
log end offset and the lag (what ``kafka-consumer-groups --describe`` shows). reset: moves a
group's committed offsets (``--to start|end|N|-N|@TIME``) for a topic (or ``TOPIC:P,P``);
like Kafka's tool it prints the plan and changes nothing without ``--execute``, and the group
must have no active members.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from kafkawire.tools.cli_client import (
    CliError,
    admin,
    ck,
    existing_topic,
    metadata,
    section,
    table,
    wait,
)
from kafkawire.tools.cli_records import parse_start


def group_list(args: argparse.Namespace) -> int:
    res = wait(admin(args).list_consumer_groups(request_timeout=args.timeout), args,
               "list groups")
    rows = []
    for g in sorted(res.valid, key=lambda g: g.group_id):
        state = getattr(g.state, "name", str(g.state))
        gtype = getattr(getattr(g, "type", None), "name", "")
        rows.append((g.group_id, state, gtype))
    table(("GROUP", "STATE", "TYPE"), rows)
    for e in res.errors:
        print(f"kafkawire: {e}")
    return 0


def _committed(args: argparse.Namespace, group: str) -> list[Any]:
    K = ck("confluent_kafka")

    futures = admin(args).list_consumer_group_offsets(
        [K.ConsumerGroupTopicPartitions(group)], request_timeout=args.timeout)
    return list(wait(futures[group], args, f"offsets of {group}").topic_partitions or [])


def _ends(args: argparse.Namespace, tps: list[Any], spec: Any) -> dict[tuple[str, int], int]:
    if not tps:
        return {}
    K = ck("confluent_kafka")

    futures = admin(args).list_offsets(
        {K.TopicPartition(tp.topic, tp.partition): spec for tp in tps},
        request_timeout=args.timeout)
    return {(tp.topic, tp.partition): wait(f, args, "list offsets").offset
            for tp, f in futures.items()}


def _describe_rows(args: argparse.Namespace, g: Any,
                   committed: list[Any]) -> tuple[list[tuple[Any, ...]], int]:
    """One row per partition of every topic the group commits to or is assigned (partitions
    without a commit show "-", as kafka-consumer-groups does), and the total lag."""
    K, A = ck("confluent_kafka"), ck("confluent_kafka.admin")
    offsets = {(tp.topic, tp.partition): tp.offset for tp in committed}
    owner: dict[tuple[str, int], Any] = {}
    for m in g.members:
        for tp in (m.assignment.topic_partitions if m.assignment else []):
            owner[(tp.topic, tp.partition)] = m
    keys = set(offsets) | set(owner)
    for topic in {t for t, _p in keys}:
        t = metadata(args, topic).topics.get(topic)
        if t is not None and t.error is None:
            keys |= {(topic, p) for p in t.partitions}
    ends = _ends(args, [K.TopicPartition(t, p) for t, p in keys], A.OffsetSpec.latest())
    rows, total_lag = [], 0
    for key in sorted(keys):
        off, end, m = offsets.get(key, -1), ends.get(key), owner.get(key)
        lag = end - off if end is not None and off >= 0 else None
        total_lag += lag or 0
        rows.append((*key, off if off >= 0 else "-", end, lag if lag is not None else "-",
                     m.member_id if m else "", m.client_id if m else "", m.host if m else ""))
    return rows, total_lag


def group_describe(args: argparse.Namespace) -> int:
    """A group the coordinator does not know (DescribeGroups answers DEAD with no members,
    and it has no committed offsets) is an error, as kafka-consumer-groups reports "does not
    exist"; every group is described before anything is printed."""
    futures = admin(args).describe_consumer_groups(list(args.groups),
                                                   request_timeout=args.timeout)
    described = []
    for gid in args.groups:
        g = wait(futures[gid], args, f"describe {gid}")
        committed = _committed(args, gid)
        if getattr(g.state, "name", "") in ("DEAD", "UNKNOWN") and not g.members \
                and not committed:
            raise CliError(f"group {gid}: not found (no members and no committed offsets)")
        described.append((gid, g, committed))
    for i, (gid, g, committed) in enumerate(described):
        rows, total_lag = _describe_rows(args, g, committed)
        if i:
            print()
        section(f"GROUP {gid}")
        coord = g.coordinator.id if g.coordinator is not None else "-"
        table(("STATE", "COORDINATOR", "PROTOCOL", "MEMBERS", "TOTAL-LAG"),
              [(getattr(g.state, "name", g.state), coord, g.partition_assignor or "",
                len(g.members), total_lag)])
        print()
        table(("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "MEMBER-ID",
               "CLIENT-ID", "HOST"), rows)
    return 0


def _reset_targets(args: argparse.Namespace) -> list[Any]:
    K = ck("confluent_kafka")

    topic, _, parts = args.topic.partition(":")
    if parts:
        return [K.TopicPartition(topic, int(p)) for p in parts.split(",") if p.strip()]
    t = existing_topic(args, topic)
    return [K.TopicPartition(topic, p) for p in sorted(t.partitions)]


def group_reset(args: argparse.Namespace) -> int:
    K = ck("confluent_kafka")
    A = ck("confluent_kafka.admin")

    tps = _reset_targets(args)
    kind, value = parse_start(args.to, int(time.time() * 1000))
    if kind == "offset":
        new = {(tp.topic, tp.partition): value for tp in tps}
    elif kind == "time":
        new = _ends(args, tps, A.OffsetSpec.for_timestamp(value))
        latest = _ends(args, tps, A.OffsetSpec.latest())
        new = {k: (v if v >= 0 else latest[k]) for k, v in new.items()}
    else:
        starts = _ends(args, tps, A.OffsetSpec.earliest())
        ends = _ends(args, tps, A.OffsetSpec.latest())
        new = {k: starts[k] if kind == "start" else ends[k] if kind == "end"
               else max(starts[k], ends[k] - value) for k in ends}
    current = {(tp.topic, tp.partition): tp.offset for tp in _committed(args, args.group)}
    table(("TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"),
          [(t, p, current.get((t, p), "-"), off) for (t, p), off in sorted(new.items())])
    if not args.execute:
        print("(dry run: add --execute to apply)")
        return 0
    req = K.ConsumerGroupTopicPartitions(
        args.group, [K.TopicPartition(t, p, off) for (t, p), off in sorted(new.items())])
    fut = admin(args).alter_consumer_group_offsets([req], request_timeout=args.timeout)
    wait(fut[args.group], args, f"reset {args.group}")
    print(f"group {args.group}: offsets reset")
    return 0


def add_commands(sub: Any, common: Callable[[argparse.ArgumentParser], argparse.ArgumentParser],
                 run: Callable[[Any], Any]) -> None:
    g = sub.add_parser("group", help="consumer groups: list, describe (lag), reset offsets")
    gs = g.add_subparsers(dest="action", required=True, metavar="ACTION")
    common(gs.add_parser("list", help="list groups")).set_defaults(func=run(group_list))
    d = common(gs.add_parser("describe", help="members, offsets and lag"))
    d.add_argument("groups", nargs="+", metavar="GROUP")
    d.set_defaults(func=run(group_describe))
    r = common(gs.add_parser("reset", help="move committed offsets (dry run by default)"))
    r.add_argument("group", metavar="GROUP")
    r.add_argument("--topic", "-t", required=True, metavar="TOPIC[:P,P]")
    r.add_argument("--to", required=True,
                   help="start, end, N (offset), -N (N before the end), @EPOCH_MS, @ISO-TIME, "
                        "@-DURATION")
    r.add_argument("--execute", action="store_true", help="apply (else: show the plan)")
    r.set_defaults(func=run(group_reset))
