"""Differential scenarios for consumer groups beyond the classic protocol: online migration
between classic and consumer (KIP-848) groups, static KIP-848 members, regular-expression
subscriptions and the group edge cases an acceptance test would probe.

Raw requests (``compat_tests.wire``), one connection per member so that a parked JoinGroup
never blocks another member. Broker-generated member ids are named by order of appearance
(``MemberIds``); client-chosen KIP-848 member ids are fixed strings. Assignments are compared
as sets where the assignor decides them deterministically, and as sizes where the choice
depends on random member ids.
"""

# Steps.step() calls its lambda at once, so loop variables in them are bound correctly.
# ruff: noqa: B023
from __future__ import annotations

import struct
import time
from typing import Any

from compat_tests.cluster_wire import open_connection
from compat_tests.scenarios import (
    MemberIds,
    Outcome,
    Steps,
    connect,
    consumer_assignment,
    create_topic,
    norm,
    scenario,
)
from compat_tests.wire import Connection
from protocol._generated.consumer_group_describe_request import ConsumerGroupDescribeRequest
from protocol._generated.consumer_group_heartbeat_request import ConsumerGroupHeartbeatRequest
from protocol._generated.describe_groups_request import DescribeGroupsRequest
from protocol._generated.find_coordinator_request import FindCoordinatorRequest
from protocol._generated.heartbeat_request import HeartbeatRequest
from protocol._generated.join_group_request import JoinGroupRequest
from protocol._generated.leave_group_request import LeaveGroupRequest
from protocol._generated.list_groups_request import ListGroupsRequest
from protocol._generated.offset_commit_request import OffsetCommitRequest
from protocol._generated.offset_fetch_request import OffsetFetchRequest
from protocol._generated.sync_group_request import SyncGroupRequest

DROP = frozenset({"host", "port", "client_host", "throttle_time_ms", "heartbeat_interval_ms"})


def wait_coordinator(c: Connection, group: str) -> None:
    deadline = time.monotonic() + 30
    while c.request(FindCoordinatorRequest(key=group, key_type=0), 3).error_code != 0:
        if time.monotonic() > deadline:
            raise AssertionError("no group coordinator")
        time.sleep(0.1)


def subscription_v1(topics: list[str], owned: dict[str, list[int]]) -> bytes:
    """ConsumerProtocolSubscription v1: topics, null user data, owned partitions."""
    b = struct.pack(">hi", 1, len(topics))
    for t in topics:
        b += struct.pack(">h", len(t)) + t.encode()
    b += struct.pack(">i", -1) + struct.pack(">i", len(owned))
    for t, ps in owned.items():
        b += struct.pack(">h", len(t)) + t.encode() + struct.pack(">i", len(ps))
        b += b"".join(struct.pack(">i", p) for p in ps)
    return b


def parse_assignment(data: bytes) -> dict[str, list[int]] | str:
    """A ConsumerProtocolAssignment as topic -> sorted partitions (or "<n bytes>" if empty)."""
    if not data:
        return "<empty>"
    pos = 2
    (n,) = struct.unpack_from(">i", data, pos)
    pos += 4
    out: dict[str, list[int]] = {}
    for _ in range(n):
        (ln,) = struct.unpack_from(">h", data, pos)
        pos += 2
        t = data[pos : pos + ln].decode()
        pos += ln
        (m,) = struct.unpack_from(">i", data, pos)
        pos += 4
        out[t] = sorted(struct.unpack_from(f">{m}i", data, pos))
        pos += 4 * m
    return out


class Member:
    """One classic member on its own connection."""

    def __init__(self, bootstrap: str, group: str, topics: list[str], ids: MemberIds,
                 instance: str | None = None, protocol: str = "range",
                 protocol_type: str = "consumer") -> None:
        self.c = open_connection(bootstrap)
        self.group = group
        self.topics = topics
        self.ids = ids
        self.instance = instance
        self.protocol = protocol
        self.protocol_type = protocol_type
        self.member_id = ""
        self.generation = -1
        self.owned: dict[str, list[int]] = {}
        self._corr: int | None = None

    def n(self, obj: Any) -> Any:
        return self.ids.scrub(norm(obj, DROP))

    def _join_req(self) -> JoinGroupRequest:
        return JoinGroupRequest(
            group_id=self.group, session_timeout_ms=10000, rebalance_timeout_ms=10000,
            member_id=self.member_id, group_instance_id=self.instance,
            protocol_type=self.protocol_type,
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(
                name=self.protocol, metadata=subscription_v1(self.topics, self.owned))],
            reason="compat",
        )

    def join(self, version: int = 9) -> Any:
        """JoinGroup (with the MEMBER_ID_REQUIRED round trip); returns the last response."""
        r = self.c.request(self._join_req(), version)
        if r.error_code == 79:  # MEMBER_ID_REQUIRED
            self.member_id = r.member_id
            r = self.c.request(self._join_req(), version)
        self._took(r)
        return r

    def join_send(self, version: int = 9) -> None:
        self._corr = self.c.send_only(self._join_req(), version)

    def join_recv(self, version: int = 9) -> Any:
        assert self._corr is not None
        r = self.c.read_response(11, version, self._corr)
        self._corr = None
        self._took(r)
        return r

    def _took(self, r: Any) -> None:
        if r.error_code == 0:
            self.member_id = r.member_id
            self.generation = r.generation_id

    def sync(self, assignments: dict[str, bytes] | None = None, version: int = 5) -> Any:
        r = self.c.request(SyncGroupRequest(
            group_id=self.group, generation_id=self.generation, member_id=self.member_id,
            group_instance_id=self.instance, protocol_type="consumer",
            protocol_name=self.protocol,
            assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
                         for m, a in (assignments or {}).items()],
        ), version)
        if r.error_code == 0:
            got = parse_assignment(bytes(r.assignment))
            self.owned = got if isinstance(got, dict) else {}
        return r

    def heartbeat(self, version: int = 4) -> Any:
        return self.c.request(HeartbeatRequest(
            group_id=self.group, generation_id=self.generation, member_id=self.member_id,
            group_instance_id=self.instance), version)

    def leave(self, version: int = 5) -> Any:
        return self.c.request(LeaveGroupRequest(group_id=self.group, members=[
            LeaveGroupRequest.MemberIdentity(member_id=self.member_id,
                                             group_instance_id=self.instance)]), version)

    def commit(self, topic: str, offsets: dict[int, int], generation: int | None = None,
               version: int = 9) -> Any:
        return self.c.request(OffsetCommitRequest(
            group_id=self.group,
            generation_id_or_member_epoch=self.generation if generation is None else generation,
            member_id=self.member_id, group_instance_id=self.instance,
            topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=[
                OffsetCommitRequest.OffsetCommitRequestPartition(
                    partition_index=p, committed_offset=o, committed_leader_epoch=-1)
                for p, o in offsets.items()])],
        ), version)

    def close(self) -> None:
        self.c.close()


class NewMember:
    """One KIP-848 (ConsumerGroupHeartbeat) member with a client-chosen member id."""

    def __init__(self, bootstrap: str, group: str, member_id: str, topics: list[str] | None,
                 names: dict[Any, str], regex: str | None = None, instance: str | None = None,
                 assignor: str | None = None) -> None:
        self.c = open_connection(bootstrap)
        self.group = group
        self.member_id = member_id
        self.topics = topics
        self.regex = regex
        self.instance = instance
        self.assignor = assignor
        self.epoch = 0
        self.owned: dict[Any, list[int]] = {}
        self.names = names  # topic id -> name (filled by the scenario)
        self.last_message: str | None = None

    def heartbeat(self, epoch: int | None = None, full: bool = False, version: int = 1) -> Any:
        e = self.epoch if epoch is None else epoch
        req = ConsumerGroupHeartbeatRequest(
            group_id=self.group, member_id=self.member_id, member_epoch=e,
            instance_id=self.instance)
        if e == 0 or full:
            req.rebalance_timeout_ms = 10000
            req.subscribed_topic_names = self.topics
            req.subscribed_topic_regex = self.regex
            req.server_assignor = self.assignor
        else:
            req.subscribed_topic_names = None
            req.rebalance_timeout_ms = -1
        req.topic_partitions = [
            ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=t, partitions=ps)
            for t, ps in self.owned.items()
        ] if e != 0 else []
        r = self.c.request(req, version)
        self.last_message = r.error_message
        if r.error_code == 0:
            self.epoch = r.member_epoch
            if r.assignment is not None:
                self.owned = {tp.topic_id: sorted(tp.partitions)
                              for tp in r.assignment.topic_partitions if tp.partitions}
        return r

    def outcome(self, r: Any) -> dict[str, Any]:
        d: dict[str, Any] = {"error": norm(r)["error_code"], "epoch": r.member_epoch}
        if r.assignment is not None:
            d["assignment"] = {self.names.get(tp.topic_id, "?"): sorted(tp.partitions)
                               for tp in r.assignment.topic_partitions}
        return d

    def close(self) -> None:
        self.c.close()


def topic_ids(c: Connection, topics: list[str]) -> dict[Any, str]:
    from compat_tests.scenarios import metadata

    md = metadata(c, topics)
    return {t.topic_id: t.name for t in md.topics}


def list_groups(c: Connection, group: str, version: int = 5) -> Any:
    r = c.request(ListGroupsRequest(states_filter=[], types_filter=[]), version)
    return [norm(g) for g in r.groups if g.group_id == group]


def describe_classic(c: Connection, group: str, ids: MemberIds, version: int = 5) -> Any:
    """DescribeGroups with members in member-name order (Kafka keeps a hash order)."""
    d = ids.scrub(norm(c.request(DescribeGroupsRequest(groups=[group]), version), DROP))
    for g in d["groups"]:
        g["members"] = sorted(g["members"], key=lambda m: m["member_id"])
    return d["groups"]


def describe_consumer(c: Connection, group: str, ids: MemberIds, names: dict[Any, str]) -> Any:
    r = c.request(ConsumerGroupDescribeRequest(group_ids=[group]), 1)
    g = r.groups[0]
    out: dict[str, Any] = {
        "error": norm(g)["error_code"], "state": g.group_state, "group_epoch": g.group_epoch,
        "assignment_epoch": g.assignment_epoch, "assignor": g.assignor_name,
    }
    members = []
    known = set(ids.names)
    for m in sorted(g.members, key=lambda m: (
            m.member_type, ids(m.member_id) if m.member_id in known else "~" + m.member_id)):
        members.append({
            "member_id": ids(m.member_id), "instance_id": m.instance_id,
            "member_epoch": m.member_epoch, "member_type": m.member_type,
            "client_id": m.client_id,
            "subscribed": sorted(m.subscribed_topic_names), "regex": m.subscribed_topic_regex,
            "assigned": sum(len(tp.partitions) for tp in m.assignment.topic_partitions),
            "target": sum(len(tp.partitions) for tp in m.target_assignment.topic_partitions),
        })
    out["members"] = members
    return out


def offsets(c: Connection, group: str, topic: str, parts: list[int]) -> Any:
    grp = OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, topics=[
        OffsetFetchRequest.OffsetFetchRequestTopics(name=topic, partition_indexes=parts)])
    r = norm(c.request(OffsetFetchRequest(groups=[grp]), 8))
    return {p["partition_index"]: [p["committed_offset"], p["error_code"]]
            for t in r["groups"][0]["topics"] for p in t["partitions"]}


@scenario
def group_migration_upgrade(bootstrap: str) -> Outcome:
    """A classic group upgraded online by a KIP-848 member; its classic member served from the
    consumer group (heartbeat, rejoin, sync, commit); the consumer member's departure
    downgrades the group back to classic."""
    out = Steps()
    topic = "group_migration_upgrade"
    g = "group_migration_upgrade-g"
    ids = MemberIds()
    with connect(bootstrap) as c:
        create_topic(c, topic, 4)
        wait_coordinator(c, g)
        names = topic_ids(c, [topic])
        a = Member(bootstrap, g, [topic], ids)
        b = NewMember(bootstrap, g, "compat-consumer-1", [topic], names)
        try:
            r = a.join()
            out.step("classic_join", lambda: a.n(r))
            out.step("classic_sync", lambda: a.n(a.sync(
                {a.member_id: consumer_assignment(topic, [0, 1, 2, 3])})))
            out.step("classic_list", lambda: list_groups(c, g))
            # the KIP-848 member upgrades the group
            r1 = b.heartbeat()
            out.step("consumer_join", lambda: b.outcome(r1))
            out.step("upgraded_list", lambda: list_groups(c, g))
            out.step("upgraded_list_v2", lambda: list_groups(c, g, 2))
            out.step("upgraded_describe_groups_v5", lambda: describe_classic(c, g, ids))
            out.step("upgraded_describe_groups_v6", lambda: describe_classic(c, g, ids, 6))
            out.step("upgraded_consumer_describe", lambda: describe_consumer(c, g, ids, names))
            # the classic member is told to rejoin
            out.step("classic_heartbeat_after_upgrade", lambda: a.n(a.heartbeat()))
            out.step("classic_commit_old_generation", lambda: a.n(a.commit(topic, {0: 1})))
            a.owned = {}  # eager: revoke everything before rejoining
            r2 = a.join()
            out.step("classic_rejoin", lambda: a.n(r2))
            s2 = a.sync()
            out.step("classic_sync_in_consumer_group", lambda: a.n(s2))
            out.step("classic_sync_assignment", lambda: parse_assignment(bytes(s2.assignment)))
            out.step("classic_heartbeat_after_sync", lambda: a.n(a.heartbeat()))
            out.step("classic_commit", lambda: a.n(a.commit(topic, {0: 3})))
            out.step("classic_commit_bad_generation", lambda: a.n(a.commit(topic, {0: 4}, a.generation + 7)))
            r3 = b.heartbeat()
            out.step("consumer_heartbeat", lambda: b.outcome(r3))
            out.step("consumer_commit", lambda: norm(b.c.request(OffsetCommitRequest(
                group_id=g, generation_id_or_member_epoch=b.epoch, member_id=b.member_id,
                topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=[
                    OffsetCommitRequest.OffsetCommitRequestPartition(
                        partition_index=1, committed_offset=9, committed_leader_epoch=-1)])],
            ), 9)))
            out.step("offsets", lambda: offsets(c, g, topic, [0, 1]))
            out.step("mixed_consumer_describe", lambda: describe_consumer(c, g, ids, names))
            out.step("mixed_list", lambda: list_groups(c, g))
            # a second classic member joins the consumer group
            d = Member(bootstrap, g, [topic], ids)
            try:
                rd = d.join()
                out.step("classic2_join", lambda: d.n(rd))
                out.step("classic2_sync", lambda: d.n(d.sync()))
                other = Member(bootstrap, g, [topic], ids, protocol_type="connect")
                out.step("join_other_protocol_type", lambda: a.n(other.join()))
                other.close()
                out.step("mixed2_consumer_describe", lambda: describe_consumer(c, g, ids, names))
                # the last KIP-848 member leaves: the group goes back to classic
                out.step("consumer_leave", lambda: b.outcome(b.heartbeat(-1)))
                out.step("downgraded_list", lambda: list_groups(c, g))
                out.step("downgraded_describe", lambda: describe_classic(c, g, ids))
                out.step("downgraded_consumer_describe",
                         lambda: describe_consumer(c, g, ids, names))
                out.step("classic_heartbeat_after_downgrade", lambda: a.n(a.heartbeat()))
                out.step("classic2_heartbeat_after_downgrade", lambda: d.n(d.heartbeat()))
                a.join_send()
                d.join_send()
                ja, jd = a.join_recv(), d.join_recv()
                def rejoined(r: Any) -> Any:
                    x = a.n(r)
                    x["leader"] = "<the leader>" if x["leader"] in ("<member-1>", "<member-3>") else x["leader"]
                    x["members"] = len(r.members)
                    x["member_id"] = "<a member>"
                    return x

                # which of the two leads depends on Kafka's hash order: sorted outcomes
                out.step("rejoin_after_downgrade", lambda: sorted(
                    [rejoined(ja), rejoined(jd)], key=lambda x: x["members"]))
                leader = a if ja.leader == ja.member_id else d
                follower = d if leader is a else a
                plan = {a.member_id: consumer_assignment(topic, [0, 1]),
                        d.member_id: consumer_assignment(topic, [2, 3])}
                out.step("sync_after_downgrade", lambda: [
                    leader.n(leader.sync(plan)), follower.n(follower.sync())])
                out.step("stable_after_downgrade", lambda: describe_classic(c, g, ids))
                out.step("leave_all", lambda: [a.n(a.leave()), d.n(d.leave())])
                out.step("empty_list", lambda: list_groups(c, g))
            finally:
                d.close()
        finally:
            a.close()
            b.close()
    return out


def _err(r: Any) -> list[Any]:
    return [norm(r)["error_code"], r.member_epoch if hasattr(r, "member_epoch") else None]


@scenario
def group_static_members(bootstrap: str) -> Outcome:
    """KIP-848 static members: -2 keeps the member and its partitions, a new member id for
    the instance takes them back without a rebalance; UNRELEASED_INSTANCE_ID,
    FENCED_INSTANCE_ID; leave and heartbeat errors for unknown groups and members."""
    out = Steps()
    topic = "group_static_members"
    g = "group_static_members-g"
    ids = MemberIds()
    with connect(bootstrap) as c:
        create_topic(c, topic, 4)
        wait_coordinator(c, g)
        names = topic_ids(c, [topic])
        a = NewMember(bootstrap, g, "static-a1", [topic], names, instance="ia")
        b = NewMember(bootstrap, g, "static-b1", [topic], names, instance="ib")
        others: list[NewMember] = []

        def other(mid: str, instance: str | None, epoch: int, group: str = g) -> Any:
            m = NewMember(bootstrap, group, mid, [topic], names, instance=instance)
            others.append(m)
            return _err(m.heartbeat(epoch=epoch))

        try:
            out.step("a_join", lambda: a.outcome(a.heartbeat()))
            time.sleep(1.1)  # past the assignment interval: b's join assigns at once
            out.step("b_join", lambda: b.outcome(b.heartbeat()))
            for i in range(3):
                out.step(f"a_hb{i}", lambda: a.outcome(a.heartbeat()))
                out.step(f"b_hb{i}", lambda: b.outcome(b.heartbeat()))
            out.step("stable", lambda: describe_consumer(c, g, ids, names))
            out.step("join_held_instance", lambda: other("static-a2", "ia", 0))
            out.step("heartbeat_other_member_id", lambda: other("static-zz", "ia", 3))
            out.step("heartbeat_unknown_instance", lambda: other("static-yy", "unknown", 3))
            out.step("a_static_leave", lambda: a.outcome(a.heartbeat(-2)))
            out.step("after_static_leave", lambda: describe_consumer(c, g, ids, names))
            out.step("b_hb_after", lambda: b.outcome(b.heartbeat()))
            a2 = NewMember(bootstrap, g, "static-a2", [topic], names, instance="ia")
            others.append(a2)
            out.step("a2_rejoin", lambda: a2.outcome(a2.heartbeat()))
            out.step("after_rejoin", lambda: describe_consumer(c, g, ids, names))
            out.step("old_a_heartbeat", lambda: _err(a.heartbeat(epoch=3)))
            out.step("a2_leave", lambda: a2.outcome(a2.heartbeat(-1)))
            out.step("a2_leave_again", lambda: _err(a2.heartbeat(-1)))
            out.step("after_leave", lambda: describe_consumer(c, g, ids, names))
            out.step("leave_unknown_group", lambda: other("q", None, -1, g + "-none"))
            out.step("heartbeat_unknown_group", lambda: other("q", None, 5, g + "-none"))
            out.step("heartbeat_unknown_member", lambda: other("nobody", None, 5))
            out.step("heartbeat_greater_epoch", lambda: _err(b.heartbeat(epoch=b.epoch + 3)))
            out.step("b_leave", lambda: b.outcome(b.heartbeat(-1)))
            out.step("empty", lambda: describe_consumer(c, g, ids, names))
            out.step("empty_list", lambda: list_groups(c, g))
        finally:
            for m in (a, b, *others):
                m.close()
    return out


@scenario
def group_regex_subscription(bootstrap: str) -> Outcome:
    """A regex member: resolved asynchronously (the join answers at the group's first epoch
    with nothing; a heartbeat after the resolution gets the partitions); an invalid regex."""
    out = Steps()
    topic = "group_regex_subscription"
    g = "group_regex_subscription-g"
    ids = MemberIds()
    with connect(bootstrap) as c:
        create_topic(c, topic + "-a", 2)
        create_topic(c, topic + "-b", 1)
        create_topic(c, "other_group_regex_subscription", 1)
        wait_coordinator(c, g)
        names = topic_ids(c, [topic + "-a", topic + "-b"])
        m = NewMember(bootstrap, g, "regex-1", None, names, regex=topic + "-.*")
        try:
            out.step("join", lambda: m.outcome(m.heartbeat()))
            got: list[Any] = []
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not m.owned:
                time.sleep(0.2)
                got.append(m.outcome(m.heartbeat()))
            out.step("assigned_after_resolution", lambda: got[-1])
            out.step("describe", lambda: describe_consumer(c, g, ids, names))
            bad = NewMember(bootstrap, g, "regex-bad", None, names, regex="(")
            out.step("invalid_regex", lambda: _err(bad.heartbeat()))
            bad.close()
            out.step("leave", lambda: m.outcome(m.heartbeat(-1)))
        finally:
            m.close()
    return out


@scenario
def group_edge_cases(bootstrap: str) -> Outcome:
    """Edges an acceptance test probes: DescribeGroups v0-v6 and ListGroups filters for
    unknown/empty/consumer groups, OffsetCommit/OffsetFetch across versions with leader epochs
    and metadata (null, empty, too large), heartbeats while rebalancing, a rejoin with another
    protocol list, offsets of a deleted topic, DeleteGroups and OffsetDelete on a consumer
    group."""
    from protocol._generated.delete_groups_request import DeleteGroupsRequest
    from protocol._generated.delete_topics_request import DeleteTopicsRequest
    from protocol._generated.offset_delete_request import OffsetDeleteRequest

    out = Steps()
    topic = "group_edge_cases"
    g = "group_edge_cases-g"
    ids = MemberIds()
    with connect(bootstrap) as c:
        create_topic(c, topic, 2)
        wait_coordinator(c, g)
        names = topic_ids(c, [topic])
        for v in range(7):
            out.step(f"describe_unknown_v{v}", lambda: describe_classic(c, g + "-none", ids, v))
        # commits across versions (simple commits: generation -1, no member)
        for v in (2, 5, 7, 8, 9):
            meta: Any = None if v == 5 else ("" if v == 7 else f"meta-v{v}")

            def commit_v() -> Any:
                r = c.request(OffsetCommitRequest(
                    group_id=g, generation_id_or_member_epoch=-1, member_id="",
                    topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=[
                        OffsetCommitRequest.OffsetCommitRequestPartition(
                            partition_index=0, committed_offset=10 + v, committed_leader_epoch=v,
                            committed_metadata=meta),
                        OffsetCommitRequest.OffsetCommitRequestPartition(
                            partition_index=7, committed_offset=1, committed_leader_epoch=-1)])],
                ), v)
                return norm(r)

            out.step(f"commit_v{v}", commit_v)
            for fv in (1, 5, 8):
                def fetch_v() -> Any:
                    if fv >= 8:
                        grp = OffsetFetchRequest.OffsetFetchRequestGroup(group_id=g, topics=[
                            OffsetFetchRequest.OffsetFetchRequestTopics(name=topic, partition_indexes=[0, 1])])
                        return norm(c.request(OffsetFetchRequest(groups=[grp]), fv))["groups"]
                    return norm(c.request(OffsetFetchRequest(group_id=g, topics=[
                        OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[0, 1])]), fv))

                out.step(f"fetch_v{fv}_after_commit_v{v}", fetch_v)
        big = c.request(OffsetCommitRequest(
            group_id=g, generation_id_or_member_epoch=-1, member_id="",
            topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=[
                OffsetCommitRequest.OffsetCommitRequestPartition(
                    partition_index=1, committed_offset=5, committed_leader_epoch=-1,
                    committed_metadata="x" * 4097)])]), 9)
        out.step("commit_metadata_too_large", lambda: norm(big))
        out.step("describe_simple_group_v5", lambda: describe_classic(c, g, ids, 5))
        out.step("list_simple_group", lambda: list_groups(c, g))
        # a classic group: heartbeats while it rebalances; a rejoin with another protocol list
        cg = g + "-classic"
        a = Member(bootstrap, cg, [topic], ids)
        b = Member(bootstrap, cg, [topic], ids)
        try:
            ja = a.join()
            out.step("a_join", lambda: a.n(ja))
            out.step("a_sync", lambda: a.n(a.sync({a.member_id: consumer_assignment(topic, [0, 1])})))
            b.join_send()
            time.sleep(0.5)
            out.step("heartbeat_preparing_rebalance", lambda: a.n(a.heartbeat()))
            out.step("describe_preparing_rebalance", lambda: describe_classic(c, cg, ids))
            out.step("list_states_filter", lambda: [
                norm(x) for x in c.request(ListGroupsRequest(
                    states_filter=["PREPARINGREBALANCE"], types_filter=[]), 4).groups if x.group_id == cg])
            a.join_send()
            ja2, jb = a.join_recv(), b.join_recv()
            out.step("rejoined", lambda: sorted(len(r.members) for r in (ja2, jb)))
            out.step("heartbeat_completing_rebalance", lambda: a.n(a.heartbeat()))
            out.step("describe_completing_rebalance", lambda: [
                {k: v for k, v in grp.items() if k != "members"} for grp in describe_classic(c, cg, ids)])
            leader = a if ja2.leader == ja2.member_id else b
            follower = b if leader is a else a
            plan = {a.member_id: consumer_assignment(topic, [0]), b.member_id: consumer_assignment(topic, [1])}
            out.step("syncs", lambda: [leader.n(leader.sync(plan)), follower.n(follower.sync())])
            out.step("list_types_classic", lambda: [norm(x) for x in c.request(ListGroupsRequest(
                states_filter=[], types_filter=["Classic"]), 5).groups if x.group_id == cg])
            out.step("list_types_consumer", lambda: [norm(x) for x in c.request(ListGroupsRequest(
                states_filter=[], types_filter=["consumer"]), 5).groups if x.group_id == cg])
            # rejoin with a protocol the other member does not support
            b.protocol = "roundrobin"
            out.step("rejoin_other_protocol", lambda: b.n(b.join()))
            out.step("leave_b", lambda: b.n(b.leave()))
            out.step("leave_a", lambda: a.n(a.leave()))
            for v in (0, 3, 5, 6):
                out.step(f"describe_empty_v{v}", lambda: describe_classic(c, cg, ids, v))
        finally:
            a.close()
            b.close()
        # a consumer group: DeleteGroups while it has members, OffsetDelete of a subscribed topic
        kg = g + "-consumer"
        k = NewMember(bootstrap, kg, "edge-1", [topic], names)
        try:
            out.step("consumer_join", lambda: k.outcome(k.heartbeat()))
            out.step("consumer_commit", lambda: norm(k.c.request(OffsetCommitRequest(
                group_id=kg, generation_id_or_member_epoch=k.epoch, member_id=k.member_id,
                topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=[
                    OffsetCommitRequest.OffsetCommitRequestPartition(
                        partition_index=0, committed_offset=3, committed_leader_epoch=0)])]), 9)))
            out.step("consumer_commit_stale_epoch", lambda: norm(k.c.request(OffsetCommitRequest(
                group_id=kg, generation_id_or_member_epoch=k.epoch + 5, member_id=k.member_id,
                topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=[
                    OffsetCommitRequest.OffsetCommitRequestPartition(
                        partition_index=0, committed_offset=4, committed_leader_epoch=0)])]), 9)))
            out.step("consumer_commit_v8", lambda: norm(k.c.request(OffsetCommitRequest(
                group_id=kg, generation_id_or_member_epoch=k.epoch, member_id=k.member_id,
                topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=[
                    OffsetCommitRequest.OffsetCommitRequestPartition(
                        partition_index=0, committed_offset=4, committed_leader_epoch=0)])]), 8)))
            def fetch_as(member: str | None, epoch: int) -> Any:
                grp = OffsetFetchRequest.OffsetFetchRequestGroup(
                    group_id=kg, member_id=member, member_epoch=epoch, topics=[
                        OffsetFetchRequest.OffsetFetchRequestTopics(name=topic, partition_indexes=[0])])
                return norm(c.request(OffsetFetchRequest(groups=[grp]), 9))["groups"]

            out.step("fetch_as_member", lambda: fetch_as(k.member_id, k.epoch))
            out.step("fetch_stale_epoch", lambda: fetch_as(k.member_id, k.epoch - 1))
            out.step("fetch_unknown_member", lambda: fetch_as("nobody", 3))
            out.step("fetch_as_admin", lambda: fetch_as(None, -1))
            out.step("fetch_empty_member_id", lambda: fetch_as("", -1))
            out.step("delete_nonempty", lambda: norm(c.request(DeleteGroupsRequest(groups_names=[kg]), 2)))
            out.step("offset_delete_subscribed", lambda: norm(c.request(OffsetDeleteRequest(
                group_id=kg, topics=[OffsetDeleteRequest.OffsetDeleteRequestTopic(
                    name=topic, partitions=[OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)])]), 0)))
            out.step("describe_groups_consumer", lambda: describe_classic(c, kg, ids, 5))
            out.step("consumer_leave", lambda: k.outcome(k.heartbeat(-1)))
            out.step("delete_empty", lambda: norm(c.request(DeleteGroupsRequest(groups_names=[kg]), 2)))
        finally:
            k.close()
        # offsets of a deleted topic go with it
        dt = topic + "-deleted"
        create_topic(c, dt, 2)
        out.step("commit_deleted_topic", lambda: norm(c.request(OffsetCommitRequest(
            group_id=g, generation_id_or_member_epoch=-1, member_id="",
            topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=dt, partitions=[
                OffsetCommitRequest.OffsetCommitRequestPartition(
                    partition_index=p, committed_offset=5, committed_leader_epoch=-1) for p in (0, 1)])]), 9)))
        out.step("fetch_before_delete", lambda: offsets(c, g, dt, [0, 1]))
        c.request(DeleteTopicsRequest(topic_names=[dt], timeout_ms=30000), 4)
        time.sleep(1.0)
        out.step("fetch_after_delete", lambda: offsets(c, g, dt, [0, 1]))
        create_topic(c, dt, 2)
        out.step("fetch_after_recreate", lambda: offsets(c, g, dt, [0, 1]))
    return out


@scenario
def group_commit_assignment_epochs(bootstrap: str) -> Outcome:
    """KIP-1251 (Kafka 4.3): OffsetCommit from a KIP-848 member with an epoch older than its
    current one (its heartbeat response with the new epoch not yet seen) commits partitions it
    holds since that epoch; a partition it got later or no longer holds, or a newer epoch, is
    STALE_MEMBER_EPOCH for the whole request."""
    out = Steps()
    topic = "group_commit_assignment_epochs"
    g = "group_commit_assignment_epochs-g"
    with connect(bootstrap) as c:
        create_topic(c, topic, 4)
        wait_coordinator(c, g)
        names = topic_ids(c, [topic])
        a = NewMember(bootstrap, g, "epochs-a", [topic], names)
        b = NewMember(bootstrap, g, "epochs-b", [topic], names)

        def commit(m: NewMember, parts: list[int], epoch: int) -> Any:
            r = m.c.request(OffsetCommitRequest(
                group_id=g, generation_id_or_member_epoch=epoch, member_id=m.member_id,
                topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=[
                    OffsetCommitRequest.OffsetCommitRequestPartition(
                        partition_index=p, committed_offset=p + 1, committed_leader_epoch=-1)
                    for p in parts])]), 9)
            return sorted({(p.partition_index, p.error_code) for t in r.topics for p in t.partitions})

        def held(m: NewMember) -> list[int]:
            return sorted(p for ps in m.owned.values() for p in ps)

        try:
            deadline = time.monotonic() + 30
            r = a.heartbeat()
            while r.error_code in (14, 15, 16) and time.monotonic() < deadline:  # shard loading
                time.sleep(0.2)
                r = a.heartbeat()
            out.step("a_join", lambda: a.outcome(r))
            out.step("a_ack", lambda: a.outcome(a.heartbeat()))
            first = a.epoch
            out.step("a_commit_current", lambda: commit(a, [0, 1, 2, 3], first))
            time.sleep(1.1)  # past the assignment interval: b's join assigns at once
            out.step("b_join", lambda: b.outcome(b.heartbeat()))
            second = b.epoch
            out.step("a_revoke", lambda: a.outcome(a.heartbeat()))  # keeps two, revokes two
            kept = held(a)
            gone = sorted(set(range(4)) - set(kept))
            out.step("a_commit_while_revoking", lambda: commit(a, [0, 1, 2, 3], first))
            a.owned = {t: kept for t in a.owned}  # revoked
            out.step("a_revoked", lambda: a.outcome(a.heartbeat()))
            out.step("epochs", lambda: [first, second, a.epoch])
            out.step("a_commit_old_epoch_kept", lambda: commit(a, kept, first))
            out.step("a_commit_old_epoch_revoked", lambda: commit(a, gone, first))
            out.step("a_commit_old_epoch_mixed", lambda: commit(a, [kept[0], gone[0]], first))
            out.step("a_commit_newer_epoch", lambda: commit(a, kept, a.epoch + 1))
            out.step("a_commit_epoch_zero", lambda: commit(a, kept, 0))
            out.step("b_heartbeat", lambda: b.outcome(b.heartbeat()))
            out.step("b_commit_current", lambda: commit(b, held(b), b.epoch))
            out.step("b_commit_before_assignment", lambda: commit(b, held(b), first))
            out.step("b_commit_no_partitions_old_epoch", lambda: commit(b, [], first))
        finally:
            a.close()
            b.close()
    return out


@scenario
def group_static_classic_replaces_consumer_member(bootstrap: str) -> Outcome:
    """A classic static member (JoinGroup with the group.instance.id of the group's last
    KIP-848 static member) replaces it: the consumer group is converted back to a classic
    group holding the new member with the old one's partitions. Once after the KIP-848 member
    left with epoch -2, once while it is still active."""
    out = Steps()
    topic = "group_static_classic_replaces"
    with connect(bootstrap) as c:
        create_topic(c, topic, 2)
        names = topic_ids(c, [topic])
        for case in ("after_static_leave", "while_active"):
            g = f"{topic}-{case}"
            ids = MemberIds()
            wait_coordinator(c, g)
            s = NewMember(bootstrap, g, f"static-848-{case}", [topic], names, instance="ia")
            m = Member(bootstrap, g, [topic], ids, instance="ia")
            try:
                deadline = time.monotonic() + 30
                r = s.heartbeat()
                while r.error_code in (14, 15, 16) and time.monotonic() < deadline:  # loading
                    time.sleep(0.2)
                    r = s.heartbeat()
                out.step(f"{case}_consumer_join", lambda: s.outcome(r))
                out.step(f"{case}_consumer_ack", lambda: s.outcome(s.heartbeat()))
                if case == "after_static_leave":
                    out.step(f"{case}_static_leave", lambda: s.outcome(s.heartbeat(-2)))
                j = m.join()
                out.step(f"{case}_classic_join", lambda: m.n(j))
                out.step(f"{case}_list", lambda: list_groups(c, g))
                out.step(f"{case}_describe", lambda: describe_classic(c, g, ids))
                out.step(f"{case}_consumer_describe", lambda: describe_consumer(c, g, ids, names))
                sy = m.sync()
                out.step(f"{case}_classic_sync", lambda: m.n(sy))
                out.step(f"{case}_classic_assignment", lambda: parse_assignment(bytes(sy.assignment)))
                out.step(f"{case}_classic_heartbeat", lambda: m.n(m.heartbeat()))
                out.step(f"{case}_old_member_heartbeat", lambda: _err(s.heartbeat()))
                out.step(f"{case}_classic_commit", lambda: m.n(m.commit(topic, {0: 5})))
                out.step(f"{case}_stable", lambda: describe_classic(c, g, ids))
                out.step(f"{case}_leave", lambda: m.n(m.leave()))
                out.step(f"{case}_after_leave", lambda: list_groups(c, g))
            finally:
                s.close()
                m.close()
    return out


@scenario
def group_upgrade_refused(bootstrap: str) -> Outcome:
    """Online upgrades Kafka refuses (ConsumerGroupHeartbeat GROUP_ID_NOT_FOUND, the classic
    group going on): a classic group whose assignment carries user data of a custom assignor,
    one of another protocol type (connect), and one with a malformed assignment; a classic
    group with the custom assignor name but no user data upgrades."""
    out = Steps()
    topic = "group_upgrade_refused"
    with connect(bootstrap) as c:
        create_topic(c, topic, 2)
        names = topic_ids(c, [topic])
        plain = consumer_assignment(topic, [0, 1])
        cases = {
            "custom_user_data": ("consumer", "my-assignor", plain[:-4] + struct.pack(">i", 3) + b"xyz"),
            "custom_empty_user_data": ("consumer", "my-assignor", plain[:-4] + struct.pack(">i", 0)),
            "custom_no_user_data": ("consumer", "my-assignor", plain),
            "connect": ("connect", "range", plain),
            "malformed_assignment": ("consumer", "range", b"\x00\x00\x00\x00\x00\x07zz"),
        }
        for case, (ptype, proto, assignment) in cases.items():
            g = f"{topic}-{case}"
            ids = MemberIds()
            wait_coordinator(c, g)
            m = Member(bootstrap, g, [topic], ids, protocol=proto, protocol_type=ptype)
            n = NewMember(bootstrap, g, f"upgrader-{case}", [topic], names)
            try:
                j = m.join()
                out.step(f"{case}_join", lambda: m.n(j))
                out.step(f"{case}_sync", lambda: m.n(m.c.request(SyncGroupRequest(
                    group_id=g, generation_id=m.generation, member_id=m.member_id,
                    protocol_type=ptype, protocol_name=proto,
                    assignments=[SyncGroupRequest.SyncGroupRequestAssignment(
                        member_id=m.member_id, assignment=assignment)]), 5)))
                out.step(f"{case}_upgrade", lambda: {**n.outcome(n.heartbeat()),
                                                      "message": n.last_message})
                out.step(f"{case}_list", lambda: list_groups(c, g))
                out.step(f"{case}_classic_heartbeat", lambda: m.n(m.heartbeat()))
            finally:
                m.close()
                n.close()
    return out
