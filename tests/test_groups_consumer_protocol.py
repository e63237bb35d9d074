"""KIP-848 consumer groups (librdkafka with ``group.protocol=consumer`` is in
test_groups_clients.py, Java's in test_groups_java_tools.py): raw ConsumerGroupHeartbeat/Describe (errors, regex subscriptions, the
range assignor, epochs), group.version gating in ApiVersions, replay after kill -9, and
properties of the server-side assignors (Hypothesis)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import RawClient
from group_helpers import (
    GROUP_OVERRIDES,
    create_topic,
    describe_when_loaded,
    group_broker,
    ready_raw,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from groups.assignors import range_assign, uniform_assign
from kafkawire.tools.testing import BrokerProcess
from protocol._generated.api_versions_request import ApiVersionsRequest
from protocol._generated.consumer_group_describe_request import ConsumerGroupDescribeRequest
from protocol._generated.consumer_group_heartbeat_request import ConsumerGroupHeartbeatRequest
from protocol.errors import ErrorCode


@pytest.fixture(scope="module")
def cbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    # assignment batching off: raw tests see every target at once
    yield from group_broker(tmp_path_factory.mktemp("kwc") / "data",
                            **{"group.consumer.assignment.interval.ms": "0"})


def heartbeat(c: RawClient, group: str, member: str, epoch: int, version: int = 1, **kw: Any) -> Any:
    req = ConsumerGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=epoch, **kw)
    if epoch == 0 and "topic_partitions" not in kw:
        req.topic_partitions = []
    return c.request(req, version)


def test_raw_heartbeat_describe_regex_range_and_errors(cbroker: BrokerProcess) -> None:
    c = ready_raw(cbroker.bootstrap)
    try:
        tag = uuid.uuid4().hex[:6]
        t1, t2 = f"rx{tag}-a", f"rx{tag}-b"
        create_topic(cbroker.bootstrap, t1, 2)
        create_topic(cbroker.bootstrap, t2, 2)
        g = f"raw848-{tag}"
        a = heartbeat(c, g, "member-a", 0, rebalance_timeout_ms=30000,
                      subscribed_topic_regex=f"rx{tag}-.*", server_assignor="range")
        # the regex is resolved asynchronously: the member starts at the group's first epoch
        # with nothing; the resolution bumps the group epoch; the next heartbeat assigns
        assert a.error_code == 0 and a.member_epoch == 1 and a.assignment.topic_partitions == [], a
        deadline = time.monotonic() + 10
        while True:
            a = heartbeat(c, g, "member-a", a.member_epoch)
            if a.assignment is not None and a.assignment.topic_partitions or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert a.member_epoch == 2, a
        got = {(tp.topic_id, p) for tp in a.assignment.topic_partitions for p in tp.partitions}
        assert len(got) == 4
        owned_all = [ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=tp.topic_id, partitions=list(tp.partitions))
                     for tp in a.assignment.topic_partitions]
        b = heartbeat(c, g, "member-b", 0, rebalance_timeout_ms=30000, subscribed_topic_names=[t1],
                      server_assignor="range")
        # b is at the new epoch but gets nothing yet: its partition is not released by a
        assert b.error_code == 0 and b.member_epoch == 3 and b.assignment.topic_partitions == []
        # a learns what to revoke at epoch 2 (it still owns everything) ...
        a2 = heartbeat(c, g, "member-a", 2, topic_partitions=owned_all)
        assert a2.member_epoch == 2
        kept = [tp for tp in a2.assignment.topic_partitions]
        assert sum(len(tp.partitions) for tp in kept) == 3  # range: t1 split, t2 kept
        # ... reports it, and moves to epoch 3
        owned = [ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=tp.topic_id, partitions=list(tp.partitions))
                 for tp in kept]
        a3 = heartbeat(c, g, "member-a", 2, topic_partitions=owned)
        assert a3.member_epoch == 3
        b2 = heartbeat(c, g, "member-b", 3)
        assert b2.member_epoch == 3 and sum(len(tp.partitions) for tp in b2.assignment.topic_partitions) == 1
        # errors
        assert heartbeat(c, g, "member-a", 7).error_code == ErrorCode.FENCED_MEMBER_EPOCH
        assert heartbeat(c, g, "nobody", 3).error_code == ErrorCode.UNKNOWN_MEMBER_ID
        assert heartbeat(c, g, "x", 0, rebalance_timeout_ms=1, subscribed_topic_names=[t1],
                         server_assignor="nope").error_code == ErrorCode.UNSUPPORTED_ASSIGNOR
        assert heartbeat(c, g, "", 0, rebalance_timeout_ms=1, subscribed_topic_names=[t1]).error_code \
            == ErrorCode.INVALID_REQUEST
        assert heartbeat(c, g, "x", 0, rebalance_timeout_ms=1, subscribed_topic_regex="(").error_code \
            == ErrorCode.INVALID_REGULAR_EXPRESSION
        d = c.request(ConsumerGroupDescribeRequest(group_ids=[g, "nope-" + g]), 1)
        grp, missing = d.groups
        assert missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND
        assert grp.error_code == 0 and grp.group_epoch == 3 and grp.assignment_epoch == 3
        assert grp.assignor_name == "range"
        assert grp.group_state == "Stable"
        by_id = {m.member_id: m for m in grp.members}
        assert by_id["member-a"].subscribed_topic_regex == f"rx{tag}-.*"
        assert {tp.topic_name for tp in by_id["member-b"].assignment.topic_partitions} == {t1}
        # leaving
        out = heartbeat(c, g, "member-b", -1)
        assert out.error_code == 0 and out.member_epoch == -1
        d = c.request(ConsumerGroupDescribeRequest(group_ids=[g]), 0)
        assert [m.member_id for m in d.groups[0].members] == ["member-a"]
        # leaving bumps the group epoch; the target follows at the next heartbeat
        assert (d.groups[0].group_epoch, d.groups[0].assignment_epoch) == (4, 3)
    finally:
        c.close()


def test_group_version_gates_the_apis(cbroker: BrokerProcess, tmp_path: Any) -> None:
    c = RawClient(cbroker.bootstrap)
    try:
        r = c.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 4)
        keys = {k.api_key for k in r.api_keys}
        assert {68, 69} <= keys
        assert {f.name: f.max_version_level for f in r.finalized_features}["group.version"] == 1
    finally:
        c.close()
    # Kafka 4.3.1 with group.coordinator.rebalance.protocols=classic: group.version is still
    # finalized at 1 and both APIs are still listed, answering UNSUPPORTED_VERSION
    off = BrokerProcess(tmp_path / "d", overrides={"group.coordinator.rebalance.protocols": "classic"}).start()
    try:
        c = RawClient(off.bootstrap)
        r = c.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 4)
        assert {68, 69} <= {k.api_key for k in r.api_keys}
        assert {f.name: f.max_version_level for f in r.finalized_features}["group.version"] == 1
        hb = heartbeat(c, "g", "abcdefghijklmnopqrstuv", 0, rebalance_timeout_ms=30000,
                       subscribed_topic_names=["t"])
        assert (hb.error_code, hb.member_id, hb.heartbeat_interval_ms) == (
            ErrorCode.UNSUPPORTED_VERSION, None, 0)
        d = c.request(ConsumerGroupDescribeRequest(group_ids=["g"]), 1).groups[0]
        assert (d.error_code, d.group_state, d.members) == (ErrorCode.UNSUPPORTED_VERSION, "", [])
        c.close()
    finally:
        off.close()


def test_consumer_group_replayed_after_kill9(tmp_path: Any) -> None:
    bp = BrokerProcess(tmp_path / "data", overrides=GROUP_OVERRIDES).start()
    try:
        c = ready_raw(bp.bootstrap)
        create_topic(bp.bootstrap, "replay848", 3)
        r = heartbeat(c, "gr", "m1", 0, rebalance_timeout_ms=30000, subscribed_topic_names=["replay848"])
        assert r.member_epoch == 2  # a new group starts at epoch 1; the first member bumps it
        before = c.request(ConsumerGroupDescribeRequest(group_ids=["gr"]), 1).groups[0]
        c.close()
        bp.kill()
        bp.start()
        c = ready_raw(bp.bootstrap)
        after = describe_when_loaded(c, "gr")
        assert after.error_code == 0
        assert (after.group_epoch, after.assignment_epoch, after.group_state) == (
            before.group_epoch, before.assignment_epoch, before.group_state)
        assert [(m.member_id, m.member_epoch) for m in after.members] == [("m1", 2)]
        # the member goes on with its epoch
        assert heartbeat(c, "gr", "m1", 2).error_code == 0
        c.close()
    finally:
        bp.close()


def test_commit_with_an_older_epoch_checks_assignment_epochs_also_after_kill9(tmp_path: Any) -> None:
    """KIP-1251 (Kafka 4.3): a member's OffsetCommit with an epoch older than its current one
    (sent before the heartbeat response that bumped it arrived) commits the partitions it has
    held since that epoch; a partition it got later or no longer holds, or a newer epoch, is
    STALE_MEMBER_EPOCH for the whole request. The epochs are in the member's
    ConsumerGroupCurrentMemberAssignment record, so a restart keeps them."""
    from protocol._generated.offset_commit_request import OffsetCommitRequest

    bp = BrokerProcess(tmp_path / "data", overrides={
        **GROUP_OVERRIDES, "group.consumer.assignment.interval.ms": "0"}).start()
    try:
        c = ready_raw(bp.bootstrap)
        create_topic(bp.bootstrap, "ep1251", 4)

        def commit(member: str, epoch: int, parts: list[int]) -> list[int]:
            r = c.request(OffsetCommitRequest(
                group_id="g1251", generation_id_or_member_epoch=epoch, member_id=member,
                topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name="ep1251", partitions=[
                    OffsetCommitRequest.OffsetCommitRequestPartition(
                        partition_index=p, committed_offset=1, committed_leader_epoch=-1) for p in parts])]), 9)
            return [p.error_code for t in r.topics for p in t.partitions]

        sub = {"rebalance_timeout_ms": 30000, "subscribed_topic_names": ["ep1251"]}
        a = heartbeat(c, "g1251", "a", 0, **sub)
        assert a.member_epoch == 2 and sum(len(tp.partitions) for tp in a.assignment.topic_partitions) == 4
        tid = a.assignment.topic_partitions[0].topic_id
        owned = [ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=tid, partitions=[0, 1, 2, 3])]
        assert heartbeat(c, "g1251", "b", 0, **sub).member_epoch == 3
        r = heartbeat(c, "g1251", "a", 2, topic_partitions=owned)  # revoke first: still epoch 2
        kept = sorted(r.assignment.topic_partitions[0].partitions)
        gone = sorted({0, 1, 2, 3} - set(kept))
        assert r.member_epoch == 2 and len(kept) == 2, r
        owned[0].partitions = kept
        assert heartbeat(c, "g1251", "a", 2, topic_partitions=owned).member_epoch == 3
        stale = ErrorCode.STALE_MEMBER_EPOCH
        for _restart in range(2):
            assert commit("a", 2, kept) == [0, 0]
            assert commit("a", 3, [0, 1, 2, 3]) == [0] * 4  # its current epoch commits anything
            assert commit("a", 2, gone) == [stale, stale]
            assert commit("a", 2, [kept[0], gone[0]]) == [stale, stale]
            assert commit("a", 4, kept) == [stale, stale]
            assert commit("a", 1, kept) == [stale, stale]
            c.close()
            bp.kill()
            bp.start()
            c = ready_raw(bp.bootstrap)
            describe_when_loaded(c, "g1251")
        c.close()
    finally:
        bp.close()


@st.composite
def groups_and_topics(draw: Any) -> tuple[dict[str, set[Any]], dict[Any, tuple[str, int]], bool]:
    ntopics = draw(st.integers(1, 4))
    topics = {uuid.UUID(int=i + 1): (f"t{i}", draw(st.integers(0, 12))) for i in range(ntopics)}
    members = [f"m{i}" for i in range(draw(st.integers(1, 6)))]
    homogeneous = draw(st.booleans())
    subs = {
        m: set(topics) if homogeneous else set(draw(st.sets(st.sampled_from(sorted(topics)), min_size=1)))
        for m in members
    }
    return subs, topics, homogeneous


@settings(max_examples=200, deadline=None)
@given(groups_and_topics(), st.randoms(use_true_random=False))
def test_assignors_assign_every_partition_once(data: Any, rnd: Any) -> None:
    subs, topics, homogeneous = data
    for fn in ("uniform", "range"):
        out = uniform_assign(subs, topics, {}) if fn == "uniform" else range_assign(subs, topics)
        owners: dict[tuple[Any, int], str] = {}
        for m, a in out.items():
            for tid, parts in a.items():
                assert tid in subs[m]  # only subscribed topics
                for p in parts:
                    assert (tid, p) not in owners
                    owners[(tid, p)] = m
        wanted = {(t, p) for t, (_n, cnt) in topics.items() for p in range(cnt)
                  if any(t in s for s in subs.values())}
        assert set(owners) == wanted
        if fn == "uniform" and homogeneous:
            loads = [sum(len(p) for p in a.values()) for a in out.values()]
            assert max(loads) - min(loads) <= 1
    # sticky: a member that leaves only moves its own partitions (homogeneous)
    if homogeneous and len(subs) > 1:
        before = uniform_assign(subs, topics, {})
        gone = rnd.choice(sorted(subs))
        rest = {m: s for m, s in subs.items() if m != gone}
        after = uniform_assign(rest, topics, {m: before[m] for m in rest})
        for m in rest:
            for tid, parts in before[m].items():
                assert parts <= after[m].get(tid, set()) or sum(len(p) for p in after[m].values()) <= sum(
                    len(p) for p in before[m].values())
