"""The KIP-848 consumer group model (Kafka's ConsumerGroup / ConsumerGroupMember): members with
their subscription and current assignment, the target assignment, resolved regexes, epochs;
and the set operations on assignments (topic id -> partitions) that reconciliation uses.

A member's state (``groups/states.py``, ``MemberState``) changes by ``ConsumerMember.moved``
(an event of the table) or is restored from its record (``restored``, replay only); the
group's state (``ConsumerGroupState``) is derived after every record replayed into it
(``refresh_state``) and checked against its table. Nothing here writes records or reads
configuration.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from typing import Any

from groups.assignors import Assignment
from groups.states import (
    ConsumerGroupState,
    MemberEvent,
    MemberState,
    check_consumer_group,
    member_next,
)
from protocol.errors import ErrorCode

#: topic name -> (topic id, partition count): the metadata the coordinator works with
TopicsView = dict[str, tuple[uuid.UUID, int]]

LEAVE_EPOCH, STATIC_LEAVE_EPOCH = -1, -2
#: the epoch (and empty target) a new group starts with (Kafka 4.3, KAFKA-20268)
INITIAL_EPOCH = 1
PROTOCOL_TYPE = "consumer"


class GroupOpError(Exception):
    """An error code (and message) for the request at hand."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class ClassicMeta:
    """A member that speaks the classic protocol: its session timeout and JoinGroup
    protocols (name, ConsumerProtocolSubscription)."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]

    @property
    def protocol_names(self) -> list[str]:
        return [n for n, _ in self.protocols]


@dataclass(frozen=True)
class ResolvedRegex:
    topics: frozenset[str]
    version: int
    timestamp_ms: int


@dataclass(eq=False)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    classic: ClassicMeta | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    #: KIP-1251: (topic id, partition) -> the epoch at which the member got the partition, for
    #: every partition it holds (assigned or pending revocation)
    epochs: dict[tuple[uuid.UUID, int], int] = field(default_factory=dict)

    def copy(self, **changes: Any) -> ConsumerMember:
        """A copy with ``changes`` (never the state: ``moved``)."""
        assert "state" not in changes, "a member's state changes by moved()"
        return replace(self, **changes)

    def moved(self, event: MemberEvent, **changes: Any) -> ConsumerMember:
        """A copy in the state ``event`` leads to from this one's (the member table)."""
        return replace(self, state=member_next(self.state, event), **changes)

    def restored(self, state: MemberState) -> None:
        """Replay only: the state of the member's ConsumerGroupCurrentMemberAssignment record."""
        self.state = state


METADATA_FIELDS = ("instance_id", "rack_id", "client_id", "client_host", "subscribed_topic_names",
                   "subscribed_topic_regex", "rebalance_timeout_ms", "server_assignor", "classic")
ASSIGNMENT_FIELDS = ("member_epoch", "previous_member_epoch", "state", "assigned",
                     "pending_revocation", "epochs")


def differs(a: ConsumerMember, b: ConsumerMember, names: tuple[str, ...]) -> bool:
    return any(getattr(a, f) != getattr(b, f) for f in names)


@dataclass(eq=False)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    metadata_hash: int = 0
    assignment_epoch: int = 0
    assignment_timestamp_ms: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    regexes: dict[str, ResolvedRegex] = field(default_factory=dict)
    last_regex_refresh_ms: int = 0
    last_regex_version: int = -1
    _state: ConsumerGroupState = field(default=ConsumerGroupState.EMPTY, init=False)

    @property
    def state(self) -> ConsumerGroupState:
        return self._state

    def derived_state(self) -> ConsumerGroupState:
        """What the members and epochs say (Kafka's maybeUpdateGroupState)."""
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state != MemberState.STABLE:
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def refresh_state(self) -> None:
        """After a record was replayed into the group (replay only)."""
        new = self.derived_state()
        check_consumer_group(self._state, new)
        self._state = new

    def mark_dead(self) -> None:
        """The group is deleted (its ConsumerGroupMetadata tombstone, or made way for a
        classic group): only an Empty group goes."""
        check_consumer_group(self._state, ConsumerGroupState.DEAD)
        self._state = ConsumerGroupState.DEAD

    def static_member(self, instance_id: str | None) -> ConsumerMember | None:
        if instance_id is None:
            return None
        for m in self.members.values():
            if m.instance_id == instance_id:
                return m
        return None

    def regex_counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for m in self.members.values():
            if m.subscribed_topic_regex:
                out[m.subscribed_topic_regex] = out.get(m.subscribed_topic_regex, 0) + 1
        return out

    def classic_members(self) -> list[ConsumerMember]:
        return [m for m in self.members.values() if m.classic is not None]


# ---- assignments: topic id -> partitions ---------------------------------------------------
def copy_of(a: Assignment) -> Assignment:
    return {t: set(p) for t, p in a.items() if p}


def minus(a: Assignment, b: Assignment) -> Assignment:
    return {t: p - b.get(t, set()) for t, p in a.items() if p - b.get(t, set())}


def inter(a: Assignment, b: Assignment) -> Assignment:
    return {t: p & b[t] for t, p in a.items() if t in b and p & b[t]}


def union(a: Assignment, b: Assignment) -> Assignment:
    out = copy_of(a)
    for t, p in b.items():
        out.setdefault(t, set()).update(p)
    return {t: p for t, p in out.items() if p}


def from_wire(tps: Any) -> Assignment:
    return {tp.topic_id: set(tp.partitions) for tp in tps if tp.partitions}


def is_empty(a: Assignment) -> bool:
    return not any(a.values())


def held_epochs(m: ConsumerMember, new_epoch: int) -> dict[tuple[uuid.UUID, int], int]:
    """KIP-1251: the assignment epochs of what ``m`` holds: a partition it held already keeps
    its epoch, a new one gets ``new_epoch`` (Kafka's CurrentAssignmentBuilder)."""
    return {(t, p): m.epochs.get((t, p), new_epoch)
            for a in (m.assigned, m.pending_revocation) for t, ps in a.items() for p in ps}


def record_epochs(tps: Any, default: int) -> dict[tuple[uuid.UUID, int], int]:
    """The assignment epochs of a ConsumerGroupCurrentMemberAssignment record's partitions
    (``default``, the member epoch, where the record has none: Kafka's replay)."""
    out: dict[tuple[uuid.UUID, int], int] = {}
    for tp in tps:
        epochs = tp.assignment_epochs or []
        for i, p in enumerate(tp.partitions):
            out[(tp.topic_id, p)] = epochs[i] if len(epochs) == len(tp.partitions) else default
    return out
