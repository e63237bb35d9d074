"""groups/share_group.py: share-group membership and assignment, unit cases and a Hypothesis
state machine (joins, heartbeats with right and wrong epochs, leaves, session expiry,
partitions becoming assignable) checking the invariants after every step."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from groups.share_group import HeartbeatError, ShareGroups, ShareGroupSettings, assign
from protocol.errors import ErrorCode

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
SETTINGS = ShareGroupSettings(session_timeout_ms=1000, heartbeat_interval_ms=100,
                              assignment_interval_ms=50)


def test_join_epochs_and_errors() -> None:
    parts = {"a": (T1, [0, 1])}
    sg = ShareGroups(max_size=2)

    def hb(mid: str, epoch: int, now: int, topics: list[str] | None = None) -> object:
        return sg.heartbeat("g", mid, epoch, None, topics, "c", "/h", SETTINGS,
                            parts.get, now)

    r = hb("m1", 0, 0, ["a"])
    assert (r.member_epoch, r.assignment) == (2, {T1: [0, 1]})  # type: ignore[attr-defined]
    r = hb("m2", 0, 10, ["a"])  # within the assignment interval: epoch 2, nothing yet
    assert (r.member_epoch, r.assignment) == (2, {})  # type: ignore[attr-defined]
    r = hb("m2", 2, 100, None)
    assert (r.member_epoch, r.assignment) == (3, {T1: [1]})  # type: ignore[attr-defined]
    r = hb("m1", 2, 110, None)
    assert (r.member_epoch, r.assignment) == (3, {T1: [0]})  # type: ignore[attr-defined]
    assert hb("m1", 3, 120, None).assignment is None  # type: ignore[attr-defined]
    with pytest.raises(HeartbeatError) as e:
        hb("m1", 2, 130, None)
    assert e.value.code == ErrorCode.FENCED_MEMBER_EPOCH
    with pytest.raises(HeartbeatError) as e:
        hb("nobody", 3, 130, None)
    assert e.value.code == ErrorCode.UNKNOWN_MEMBER_ID
    with pytest.raises(HeartbeatError) as e:
        hb("m3", 0, 130, ["a"])
    assert e.value.code == ErrorCode.GROUP_MAX_SIZE_REACHED
    with pytest.raises(HeartbeatError) as e:
        hb("m4", 0, 130, None)
    assert e.value.code == ErrorCode.INVALID_REQUEST
    assert hb("m2", -1, 140).member_epoch == -1  # type: ignore[attr-defined]
    g = sg.group("g")
    assert g is not None and g.epoch == 4 and g.assignment_epoch == 3  # no recompute on leave
    assert sg.on_timer(10_000) == [("g", "m1")]
    assert g.state == "Empty" and sg.delete("g") == ErrorCode.NONE


def test_more_members_than_partitions_share_them() -> None:
    from groups.share_group import ShareMember

    members = {f"m{i}": ShareMember(f"m{i}", 0, "c", "h", None, ["a"]) for i in range(5)}
    out = assign(members, {"a": (T1, [0, 1])}.get)
    assert sorted(p for a in out.values() for p in a[T1]) == [0, 0, 0, 1, 1]


MEMBERS = [f"m{i}" for i in range(5)]
TOPICS = ["a", "b"]


class ShareGroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.sg = ShareGroups(max_size=4)
        self.now = 0
        self.parts: dict[str, tuple[uuid.UUID, list[int]]] = {"a": (T1, []), "b": (T2, [])}
        self.epochs: dict[str, int] = {}  # what each member believes its epoch is
        self.last_group_epoch = 0

    def _hb(self, mid: str, epoch: int, topics: list[str] | None) -> object:
        return self.sg.heartbeat("g", mid, epoch, None, topics, "c", "/h", SETTINGS,
                                 self.parts.get, self.now)

    @rule(mid=st.sampled_from(MEMBERS), topics=st.lists(st.sampled_from(TOPICS), min_size=1,
                                                         max_size=2, unique=True))
    def join(self, mid: str, topics: list[str]) -> None:
        g = self.sg.group("g")
        full = g is not None and len(g.members) >= 4 and mid not in g.members
        try:
            r = self._hb(mid, 0, topics)
        except HeartbeatError as e:
            assert full and e.code == ErrorCode.GROUP_MAX_SIZE_REACHED
            return
        assert not full
        self.epochs[mid] = r.member_epoch  # type: ignore[attr-defined]

    @rule(mid=st.sampled_from(MEMBERS), wrong=st.booleans())
    def heartbeat(self, mid: str, wrong: bool) -> None:
        g = self.sg.group("g")
        known = g is not None and mid in g.members
        epoch = self.epochs.get(mid, 1) + (7 if wrong else 0)
        try:
            r = self._hb(mid, epoch, None)
        except HeartbeatError as e:
            assert e.code == (ErrorCode.FENCED_MEMBER_EPOCH if known
                              else ErrorCode.UNKNOWN_MEMBER_ID)
            return
        assert known and not wrong
        assert r.member_epoch >= epoch  # type: ignore[attr-defined]
        self.epochs[mid] = r.member_epoch  # type: ignore[attr-defined]

    @rule(mid=st.sampled_from(MEMBERS))
    def leave(self, mid: str) -> None:
        g = self.sg.group("g")
        known = g is not None and mid in g.members
        try:
            self._hb(mid, -1, None)
        except HeartbeatError as e:
            assert not known and e.code == ErrorCode.UNKNOWN_MEMBER_ID
            return
        assert known
        self.epochs.pop(mid, None)

    @rule(ms=st.integers(1, 1500))
    def tick(self, ms: int) -> None:
        self.now += ms
        for _g, mid in self.sg.on_timer(self.now):
            self.epochs.pop(mid, None)

    @rule(t=st.sampled_from(TOPICS))
    def partition_initialized(self, t: str) -> None:
        tid, ps = self.parts[t]
        if len(ps) < 3:
            self.parts[t] = (tid, [*ps, len(ps)])

    @invariant()
    def consistent(self) -> None:
        g = self.sg.group("g")
        if g is None:
            return
        assert g.epoch >= self.last_group_epoch and g.assignment_epoch <= g.epoch
        self.last_group_epoch = g.epoch
        for m in g.members.values():
            assert m.epoch <= g.assignment_epoch
            for tid, ps in m.assignment.items():
                name = "a" if tid == T1 else "b"
                # a subscription change waits for the next computation of the assignment
                assert name in m.topics or g.assignment_epoch < g.epoch
                assert set(ps) <= set(self.parts[name][1])
        if g.assignment_epoch == g.epoch and g.members:
            for name, (tid, _now_ps) in self.parts.items():
                ps = list(g.metadata.get(name, ()))  # what the group saw at its last heartbeat
                subs = [m for m in g.members.values() if name in m.topics]
                if not subs:
                    continue
                owners = [p for m in subs for p in m.assignment.get(tid, [])]
                assert sorted(set(owners)) == sorted(ps)  # every partition has a member
                if len(subs) <= len(ps):
                    assert len(owners) == len(ps)  # each exactly once


TestShareGroupMachine = ShareGroupMachine.TestCase
TestShareGroupMachine.settings = settings(max_examples=200, stateful_step_count=40,
                                          deadline=None)
