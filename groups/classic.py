"""The classic group model (Kafka's ClassicGroup / ClassicGroupMember): members, protocols,
generation, leader. Its state (``groups/states.py``, ``ClassicGroupState``) changes only through
``ClassicGroup.transition``, checked against the table there; the rebalance that drives it is
``groups/classic_rebalance.py``, the requests ``groups/classic_protocol.py``.
"""

from __future__ import annotations

import logging
from dataclasses import InitVar, dataclass, field

from groups.states import CLASSIC_INITIAL, ClassicGroupState, check_classic
from protocol._generated.join_group_response import JoinGroupResponse
from protocol._generated.sync_group_response import SyncGroupResponse
from protocol.coordinator import Pending
from protocol.errors import ErrorCode

log = logging.getLogger("kafkawire.groups")


S = ClassicGroupState


@dataclass(eq=False)
class ClassicMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    #: the parked JoinGroup / SyncGroup of this member, if any
    join_pending: Pending[object] | None = None
    sync_pending: Pending[object] | None = None
    #: joined during the current rebalance without having been a member before
    is_new: bool = False

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]


@dataclass(eq=False)
class ClassicGroup:
    group_id: str
    #: the state the group is created in (``CLASSIC_INITIAL``); then only ``transition``
    initial_state: InitVar[ClassicGroupState] = S.EMPTY
    protocol_type: str | None = None
    protocol_name: str | None = None
    generation_id: int = 0
    leader_id: str | None = None
    members: dict[str, ClassicMember] = field(default_factory=dict)
    #: member ids handed out with MEMBER_ID_REQUIRED, awaiting their second JoinGroup
    pending_members: set[str] = field(default_factory=set)
    #: group.instance.id -> member id
    static_members: dict[str, str] = field(default_factory=dict)
    #: members that must still send SyncGroup in this generation
    pending_sync: set[str] = field(default_factory=set)
    state_timestamp_ms: int = -1
    #: the first rebalance of an empty group: time left of the rebalance timeout, and
    #: whether a member joined during the current delay
    initial_delay_remaining_ms: int = -1
    new_member_added: bool = False
    _state: ClassicGroupState = field(init=False, default=S.EMPTY)

    def __post_init__(self, initial_state: ClassicGroupState) -> None:
        assert initial_state in CLASSIC_INITIAL, f"a classic group is not created {initial_state.value}"
        self._state = initial_state

    # ---- state -----------------------------------------------------------------------
    @property
    def state(self) -> ClassicGroupState:
        return self._state

    def transition(self, target: ClassicGroupState, now_ms: int) -> None:
        check_classic(self._state, target)
        if target == S.COMPLETING_REBALANCE and log.isEnabledFor(logging.INFO):
            # one line per rebalance, for operators: the new generation is formed
            log.info("group %s: generation %d with %d member(s), protocol %s (rebalance %d ms)",
                     self.group_id, self.generation_id, len(self.members), self.protocol_name,
                     max(0, now_ms - self.state_timestamp_ms))
        elif target == S.EMPTY and self.state != S.EMPTY and log.isEnabledFor(logging.INFO):
            log.info("group %s: empty (generation %d)", self.group_id, self.generation_id)
        self._state = target
        self.state_timestamp_ms = now_ms

    def is_in(self, *states: ClassicGroupState) -> bool:
        return self.state in states

    # ---- members ---------------------------------------------------------------------
    def add(self, member: ClassicMember) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> ClassicMember | None:
        m = self.members.pop(member_id, None)
        if m is None:
            return None
        if m.group_instance_id is not None and self.static_members.get(m.group_instance_id) == member_id:
            del self.static_members[m.group_instance_id]
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return m

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.join_pending is not None)

    def all_joined(self) -> bool:
        return self.awaiting_join() == len(self.members) and not self.pending_members

    def supports(self, protocol_type: str, names: list[str]) -> bool:
        """Kafka's check before a join: an empty group takes any non-empty type/protocols;
        otherwise the type must match and one protocol be supported by every member."""
        if self.state == S.EMPTY or not self.members:
            return bool(protocol_type) and bool(names)
        if protocol_type != self.protocol_type:
            return False
        common = self.candidate_protocols()
        return any(n in common for n in names)

    def candidate_protocols(self) -> set[str]:
        sets = [set(m.protocol_names) for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def select_protocol(self) -> str | None:
        """Each member votes for its most preferred protocol among those all support."""
        candidates = self.candidate_protocols()
        if not candidates:
            return None
        votes: dict[str, int] = {}
        order: list[str] = []
        for m in self.members.values():
            choice = next(n for n in m.protocol_names if n in candidates)
            if choice not in votes:
                order.append(choice)
            votes[choice] = votes.get(choice, 0) + 1
        return max(order, key=lambda n: votes[n])

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol), None when not known."""
        from groups.consumer_protocol import subscribed_topics

        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        out: set[str] = set()
        for m in self.members.values():
            topics = subscribed_topics(m.metadata(self.protocol_name))
            if topics is None:
                return None
            out |= topics
        return out


def join_error(code: ErrorCode, member_id: str = "") -> JoinGroupResponse:
    return JoinGroupResponse(
        error_code=code, generation_id=-1, protocol_type=None, protocol_name=None,
        leader="", member_id=member_id, members=[],
    )


def sync_error(code: ErrorCode) -> SyncGroupResponse:
    return SyncGroupResponse(error_code=code, protocol_type=None, protocol_name=None, assignment=b"")
