"""Differential scenarios for share groups (KIP-932): membership, acquisition, acknowledgement
and their error codes, compared with Apache Kafka 4.3.1 over raw requests.

Member ids are client-chosen fixed strings. Each ShareFetch asks for few records with a long
MaxWaitMs so that both brokers answer with data in one round trip; record bytes are left out
(the acquired ranges and delivery counts are what is compared).
"""

# Steps.step() calls its lambda at once, so loop variables in them are bound correctly.
# ruff: noqa: B023
from __future__ import annotations

import time
import uuid
from typing import Any

from compat_tests.cluster_wire import open_connection
from compat_tests.scenarios import (
    Outcome,
    Steps,
    connect,
    create_topic,
    norm,
    produce,
    scenario,
    simple_records,
)
from compat_tests.wire import Connection, build_batch
from protocol._generated.alter_share_group_offsets_request import AlterShareGroupOffsetsRequest
from protocol._generated.delete_groups_request import DeleteGroupsRequest
from protocol._generated.describe_share_group_offsets_request import (
    DescribeShareGroupOffsetsRequest,
)
from protocol._generated.find_coordinator_request import FindCoordinatorRequest
from protocol._generated.incremental_alter_configs_request import (
    IncrementalAlterConfigsRequest as IAC,
)
from protocol._generated.list_groups_request import ListGroupsRequest
from protocol._generated.share_acknowledge_request import ShareAcknowledgeRequest
from protocol._generated.share_fetch_request import ShareFetchRequest
from protocol._generated.share_group_describe_request import ShareGroupDescribeRequest
from protocol._generated.share_group_heartbeat_request import ShareGroupHeartbeatRequest

# leader_id: the harness's Kafka is node 0, kafkawire node 1
DROP = frozenset({"records", "node_endpoints", "heartbeat_interval_ms", "client_host",
                  "topic_id", "client_id", "authorized_operations", "leader_id"})
GROUP_RESOURCE = 32


def wait_coordinator(c: Connection, group: str) -> None:
    deadline = time.monotonic() + 30
    while c.request(FindCoordinatorRequest(key=group, key_type=0), 3).error_code != 0:
        if time.monotonic() > deadline:
            raise AssertionError("no group coordinator")
        time.sleep(0.1)


class ShareMember:
    """One share consumer on its own connection: heartbeats, a share session, acks."""

    def __init__(self, bootstrap: str, group: str, member_id: str, topics: list[str]) -> None:
        self.c = open_connection(bootstrap)
        self.group, self.member_id, self.topics = group, member_id, topics
        self.epoch = 0
        self.session_epoch = 0
        self.assignment: Any = None

    def heartbeat(self, epoch: int | None = None) -> Any:
        req = ShareGroupHeartbeatRequest(
            group_id=self.group, member_id=self.member_id,
            member_epoch=self.epoch if epoch is None else epoch,
            subscribed_topic_names=self.topics if (epoch if epoch is not None else self.epoch) == 0
            else None)
        r = self.c.request(req, 1)
        if r.error_code == 0 and epoch is None:
            self.epoch = r.member_epoch
            if r.assignment is not None:
                self.assignment = r.assignment
        return r

    def join(self) -> dict[str, Any]:
        """Heartbeat until the member has an assignment (Kafka assigns asynchronously)."""
        first = self.heartbeat()
        epochs = [self.epoch]
        deadline = time.monotonic() + 30
        while not (self.assignment and self.assignment.topic_partitions):
            if time.monotonic() > deadline:
                break
            time.sleep(0.3)
            self.heartbeat()
            if self.epoch != epochs[-1]:
                epochs.append(self.epoch)
        return {"join_error": norm(first)["error_code"], "epochs": epochs,
                "assigned": sorted(p for tp in (self.assignment.topic_partitions
                                                if self.assignment else [])
                                   for p in tp.partitions)}

    def fetch(self, tid: uuid.UUID, acks: list[tuple[int, int, list[int]]] | None = None,
              max_records: int = 3, wait_ms: int = 5000, epoch: int | None = None) -> Any:
        batches = [ShareFetchRequest.AcknowledgementBatch(first_offset=a, last_offset=b,
                                                          acknowledge_types=t)
                   for a, b, t in acks or []]
        req = ShareFetchRequest(
            group_id=self.group, member_id=self.member_id,
            share_session_epoch=self.session_epoch if epoch is None else epoch,
            max_wait_ms=wait_ms, min_bytes=1, max_bytes=1 << 20, max_records=max_records,
            batch_size=max_records,
            topics=[ShareFetchRequest.FetchTopic(topic_id=tid, partitions=[
                ShareFetchRequest.FetchPartition(partition_index=0,
                                                 acknowledgement_batches=batches)])],
            forgotten_topics_data=[])
        r = self.c.request(req, 1)
        if epoch is None and r.error_code == 0:
            self.session_epoch += 1
        return r

    def ack(self, tid: uuid.UUID, acks: list[tuple[int, int, list[int]]],
            epoch: int | None = None) -> Any:
        req = ShareAcknowledgeRequest(
            group_id=self.group, member_id=self.member_id,
            share_session_epoch=self.session_epoch if epoch is None else epoch,
            topics=[ShareAcknowledgeRequest.AcknowledgeTopic(topic_id=tid, partitions=[
                ShareAcknowledgeRequest.AcknowledgePartition(
                    partition_index=0, acknowledgement_batches=[
                        ShareAcknowledgeRequest.AcknowledgementBatch(
                            first_offset=a, last_offset=b, acknowledge_types=t)
                        for a, b, t in acks])])])
        r = self.c.request(req, 1)
        if epoch is None and r.error_code == 0:
            self.session_epoch += 1
        return r

    def close(self) -> None:
        self.c.close()


def fetched(r: Any) -> dict[str, Any]:
    """A ShareFetch answer: top error, lock timeout and per partition errors and ranges."""
    parts = [p for t in r.responses for p in t.partitions]
    return {
        "error_code": norm(r)["error_code"],
        "lock_ms": r.acquisition_lock_timeout_ms,
        "partitions": [norm(p, DROP) for p in parts],
    }


def acked(r: Any) -> dict[str, Any]:
    parts = [p for t in r.responses for p in t.partitions]
    return {"error_code": norm(r)["error_code"], "partitions": [norm(p, DROP) for p in parts]}


def describe(c: Connection, group: str) -> Any:
    d = c.request(ShareGroupDescribeRequest(group_ids=[group],
                                            include_authorized_operations=False), 1)
    g = norm(d.groups[0], DROP)
    g["members"] = sorted(g["members"], key=lambda m: m["member_id"])
    return g


def offsets(c: Connection, group: str, topic: str) -> Any:
    R = DescribeShareGroupOffsetsRequest
    d = c.request(R(groups=[R.DescribeShareGroupOffsetsRequestGroup(
        group_id=group, topics=[R.DescribeShareGroupOffsetsRequestTopic(
            topic_name=topic, partitions=[0])])]), 1)
    return norm(d.groups[0], DROP)


def set_group_config(c: Connection, group: str, name: str, value: str) -> Any:
    r = c.request(IAC(resources=[IAC.AlterConfigsResource(
        resource_type=GROUP_RESOURCE, resource_name=group,
        configs=[IAC.AlterableConfig(name=name, config_operation=0, value=value)])],
        validate_only=False), 1)
    return norm(r.responses[0])["error_code"]


def _topic_id(c: Connection, topic: str) -> uuid.UUID:
    from compat_tests.scenarios import metadata

    return metadata(c, [topic]).topics[0].topic_id  # type: ignore[no-any-return]


@scenario
def share_acquire_ack(bootstrap: str) -> Outcome:
    """Two members on one partition: batch-aligned acquisition, distinct records, accept /
    release / reject, redelivery with delivery count 2, the share-partition start offset, the
    errors of acknowledgements and sessions, describe, leave, delete."""
    out = Steps()
    topic = "share_acquire_ack"
    g = "share_acquire_ack-g"
    with connect(bootstrap) as c:
        create_topic(c, topic, 1)
        for n in (2, 3, 1, 2):
            produce(c, topic, build_batch(simple_records(n)))
        wait_coordinator(c, g)
        out.step("earliest", lambda: set_group_config(c, g, "share.auto.offset.reset", "earliest"))
        tid = _topic_id(c, topic)
        a = ShareMember(bootstrap, g, "share-member-a", [topic])
        b = ShareMember(bootstrap, g, "share-member-b", [topic])
        try:
            out.step("a_join", a.join)
            out.step("a_fetch", lambda: fetched(a.fetch(tid)))
            out.step("b_join", b.join)
            out.step("a_heartbeat", lambda: norm(a.heartbeat(), DROP))
            out.step("describe_joined", lambda: describe(c, g))
            out.step("b_fetch", lambda: fetched(b.fetch(tid, max_records=1)))
            out.step("b_acks_a_records", lambda: acked(b.ack(tid, [(0, 1, [1])])))
            out.step("a_ack_mixed", lambda: acked(a.ack(tid, [(0, 4, [1, 1, 2, 3, 1])])))
            out.step("offsets_after_ack", lambda: offsets(c, g, topic))
            out.step("a_fetch_again", lambda: fetched(a.fetch(tid, wait_ms=500)))
            out.step("offsets_after_refetch", lambda: offsets(c, g, topic))
            out.step("b_accept_and_fetch", lambda: fetched(b.fetch(tid, [(5, 5, [1])])))
            out.step("offsets_after_b", lambda: offsets(c, g, topic))
            out.step("a_accept_2", lambda: acked(a.ack(tid, [(2, 2, [1])])))
            out.step("offsets_after_a", lambda: offsets(c, g, topic))
            out.step("a_wrong_session_epoch", lambda: acked(a.ack(tid, [(2, 2, [1])], epoch=9)))
            out.step("unknown_session", lambda: fetched(ShareMember(
                bootstrap, g, "share-nobody", [topic]).fetch(tid, epoch=3)))
            out.step("initial_fetch_with_acks", lambda: fetched(ShareMember(
                bootstrap, g, "share-c", [topic]).fetch(tid, [(0, 0, [1])], epoch=0)))
            out.step("ack_epoch_zero", lambda: acked(a.ack(tid, [(2, 2, [1])], epoch=0)))
            out.step("describe", lambda: describe(c, g))
            out.step("alter_while_members", lambda: norm(c.request(
                AlterShareGroupOffsetsRequest(group_id=g, topics=[
                    AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic(
                        topic_name=topic, partitions=[
                            AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestPartition(
                                partition_index=0, start_offset=0)])]), 0))["error_code"])
            out.step("a_leave", lambda: norm(a.heartbeat(-1), DROP))
            out.step("after_a_left", lambda: describe(c, g))
            out.step("b_heartbeat", lambda: norm(b.heartbeat(), DROP))
            out.step("b_leave", lambda: norm(b.heartbeat(-1), DROP))
            out.step("empty", lambda: describe(c, g))
            out.step("offsets_empty", lambda: offsets(c, g, topic))
            out.step("list", lambda: [norm(x) for x in c.request(
                ListGroupsRequest(states_filter=[], types_filter=["share"]), 5).groups
                if x.group_id == g])
            out.step("delete", lambda: [norm(x) for x in c.request(
                DeleteGroupsRequest(groups_names=[g]), 2).results])
        finally:
            a.close()
            b.close()
    return out


SHARE_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"


def _tool_rows(stdout: str) -> list[list[str]]:
    """Table output as rows of cells; the coordinator's host:port made neutral."""
    import re

    rows = []
    for line in stdout.strip().splitlines():
        line = re.sub(r"\S+:\d+\s+\(\d+\)", "<coordinator>", line)
        if line.strip():
            rows.append(line.split())
    return rows


@scenario
def java_share_groups(bootstrap: str) -> Outcome:
    """``kafka-share-groups`` (4.x): reset offsets of a new group, describe offsets and lag,
    state and members, list, delete offsets, delete; errors for unknown groups."""
    from compat_tests.scenarios import _java, _last_error_line

    topic = "java_share_groups"
    g = "java_share_groups-g"
    out = Steps()
    with connect(bootstrap) as c:
        create_topic(c, topic, 2)
        for p in (0, 1):
            from compat_tests.scenarios import produce_partition

            produce_partition(c, topic, build_batch(simple_records(3 + p)), partition=p)
    base = ["--bootstrap-server", bootstrap]
    runs = {
        "describe_unknown": ["--describe", "--group", g + "-none"],
        "reset_dry_run": ["--reset-offsets", "--group", g, "--topic", topic, "--to-earliest",
                          "--dry-run"],
        "reset": ["--reset-offsets", "--group", g, "--topic", topic, "--to-earliest",
                  "--execute"],
        "reset_to_offset": ["--reset-offsets", "--group", g, "--topic", f"{topic}:1",
                            "--to-offset", "2", "--execute"],
        "describe": ["--describe", "--group", g],
        "describe_state": ["--describe", "--group", g, "--state"],
        "describe_members": ["--describe", "--group", g, "--members"],
        "list": ["--list"],
        "delete_offsets": ["--delete-offsets", "--group", g, "--topic", topic],
        "describe_after_delete_offsets": ["--describe", "--group", g],
        "delete": ["--delete", "--group", g],
        "delete_again": ["--delete", "--group", g],
    }
    for name, args in runs.items():
        rc, so, se = _java(SHARE_GROUP_COMMAND, base + args)
        out.step(name, lambda: [rc, _tool_rows(so), _last_error_line(se)])
    return out


def _txn_log(bootstrap: str, topic: str) -> None:
    """Offsets 0-2 committed txn (+ marker 3), 4-5 aborted txn (+ marker 6), 7-8 plain."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": topic + "-tx",
                  "linger.ms": 0})
    p.init_transactions(60)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=f"c{i}")
    p.commit_transaction(60)
    p.begin_transaction()
    for i in range(2):
        p.produce(topic, value=f"a{i}")
    p.flush(30)
    p.abort_transaction(60)
    with connect(bootstrap) as c:
        produce(c, topic, build_batch(simple_records(2)))


@scenario
def share_limits_and_transactions(bootstrap: str) -> Outcome:
    """share.delivery.count.limit 2: a record released twice is archived and the start offset
    passes it; GAP and RENEW acknowledgements; closing a share session releases; transactional
    data at read_uncommitted and read_committed (control batches, aborted records)."""
    out = Steps()
    topic, g = "share_limits_txn", "share_limits_txn-g"
    with connect(bootstrap) as c:
        create_topic(c, topic, 1)
        wait_coordinator(c, g)
        for name, value in (("share.auto.offset.reset", "earliest"),
                            ("share.delivery.count.limit", "2")):
            out.step(f"config_{name}", lambda: set_group_config(c, g, name, value))
        for n in (2, 1):
            produce(c, topic, build_batch(simple_records(n)))
        tid = _topic_id(c, topic)
        a = ShareMember(bootstrap, g, "limits-a", [topic])
        try:
            out.step("join", a.join)
            out.step("fetch_1", lambda: fetched(a.fetch(tid, max_records=1)))
            out.step("release_1", lambda: fetched(a.fetch(tid, [(0, 1, [2])], max_records=1)))
            out.step("release_2_gap", lambda: fetched(a.fetch(tid, [(0, 0, [2]), (1, 1, [0])],
                                                              max_records=1, wait_ms=500)))
            out.step("offsets", lambda: offsets(c, g, topic))
            out.step("renew_v1", lambda: acked(a.ack(tid, [(2, 2, [4])])))
            out.step("close_session", lambda: acked(a.ack(tid, [], epoch=-1)))
            b = ShareMember(bootstrap, g, "limits-b", [topic])
            try:
                time.sleep(1.1)  # past share.assignment.interval.ms: b is assigned at once
                out.step("b_join", b.join)
                out.step("b_gets_released", lambda: fetched(b.fetch(tid, wait_ms=2000)))
            finally:
                b.close()
        finally:
            a.close()
    for iso in ("read_uncommitted", "read_committed"):
        t2, g2 = f"share_txn_{iso}", f"share_txn_{iso}-g"
        with connect(bootstrap) as c:
            create_topic(c, t2, 1)
            wait_coordinator(c, g2)
            set_group_config(c, g2, "share.auto.offset.reset", "earliest")
            out.step(f"{iso}_config",
                     lambda: set_group_config(c, g2, "share.isolation.level", iso))
            _txn_log(bootstrap, t2)
            tid2 = _topic_id(c, t2)
            m = ShareMember(bootstrap, g2, f"txn-{iso}", [t2])
            try:
                out.step(f"{iso}_join", m.join)
                out.step(f"{iso}_fetch", lambda: fetched(m.fetch(tid2, max_records=20)))
                out.step(f"{iso}_fetch_more",
                         lambda: fetched(m.fetch(tid2, max_records=20, wait_ms=500)))
            finally:
                m.close()
    return out


@scenario
def share_locks_and_empty_fetches(bootstrap: str) -> Outcome:
    """share.partition.max.record.locks (100) against batches of 60, a long poll that finds
    nothing, an acquisition lock expiring (share.record.lock.duration.ms at its 15 s minimum)
    and the records coming back with delivery count 2."""
    out = Steps()
    topic, g = "share_locks", "share_locks-g"
    with connect(bootstrap) as c:
        create_topic(c, topic, 1)
        wait_coordinator(c, g)
        for name, value in (("share.auto.offset.reset", "earliest"),
                            ("share.partition.max.record.locks", "100"),
                            ("share.record.lock.duration.ms", "15000")):
            out.step(f"config_{name}", lambda: set_group_config(c, g, name, value))
        for _ in range(3):
            produce(c, topic, build_batch(simple_records(60)))
        tid = _topic_id(c, topic)
        a = ShareMember(bootstrap, g, "locks-a", [topic])
        try:
            out.step("join", a.join)
            out.step("fetch_all", lambda: fetched(a.fetch(tid, max_records=500)))
            t0 = time.monotonic()
            out.step("fetch_nothing", lambda: fetched(a.fetch(tid, max_records=500,
                                                              wait_ms=300)))
            out.step("long_poll_waited", lambda: time.monotonic() - t0 >= 0.25)
            time.sleep(16)
            out.step("after_lock_expiry", lambda: fetched(a.fetch(tid, max_records=500)))
            out.step("offsets", lambda: offsets(c, g, topic))
        finally:
            a.close()
    return out
