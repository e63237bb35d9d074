"""The states of groups and members, each an Enum with the one table of its allowed moves.

Three machines, as Kafka's group coordinator has them (``ClassicGroupState``,
``ConsumerGroup.ConsumerGroupState``, ``MemberState`` with ``CurrentAssignmentBuilder``). Each
table maps a state to the states it may move to. A move outside its table asked by our own code
is a bug and raises AssertionError (as Kafka's IllegalStateException); a peer never causes one:
requests that do not fit the state get an error code first (see each machine below).

**Classic groups** (``ClassicGroupState``, the JoinGroup/SyncGroup protocol). A group
rebalances in two phases, both driven by the members' requests and by timers:

* Empty: no members (offsets may still be stored). A JoinGroup moves it to PreparingRebalance
  (the first rebalance of an empty group waits ``group.initial.rebalance.delay.ms`` for more
  members).
* PreparingRebalance: the join phase. Every known member must (re)send JoinGroup; their
  requests are parked. The phase ends when all known members have joined, or at the rebalance
  deadline (the largest member rebalance timeout; JoinGroup v0 has none, so the session timeout
  is used), dropping the dynamic members that did not rejoin. Then the generation is bumped, a
  protocol chosen by vote, and every parked JoinGroup answered (the leader gets the member
  list): CompletingRebalance, or Empty when no member is left.
* CompletingRebalance: the sync phase. Followers' SyncGroups wait for the leader's, which
  carries the assignment; the group is then persisted (GroupMetadataValue) and Stable. A member
  that does not sync within the rebalance timeout is removed and the group rebalances again.
* Stable: heartbeats keep members alive (a member missing its session timeout is removed and
  the group rebalances); a JoinGroup from a new member, with changed metadata or from the
  leader starts a rebalance.
* Dead: deleted (DeleteGroups, offsets expiry, a conversion) or unloaded.

A group comes into being Empty, or Stable when it is rebuilt from its GroupMetadata record with
members or converted from a consumer group (``CLASSIC_INITIAL``, as Kafka's ClassicGroup
constructor). Requests that do not fit the state get Kafka's error codes:
SyncGroup while PreparingRebalance and Heartbeat while PreparingRebalance are
REBALANCE_IN_PROGRESS, Heartbeat of an Empty group UNKNOWN_MEMBER_ID, any request to a Dead
group COORDINATOR_NOT_AVAILABLE, DeleteGroups of a group with members NON_EMPTY_GROUP.

**Consumer groups** (``ConsumerGroupState``, KIP-848). The state is derived, as Kafka's
``maybeUpdateGroupState``, after every record replayed into the group: Empty without members;
Assigning while the group epoch is ahead of the target assignment's epoch; Reconciling while a
member is not yet at the target's epoch or not STABLE; Stable otherwise. Since records are
replayed one by one, any live state may follow any other; the table's rule is about Dead: a
group is deleted (its ConsumerGroupMetadata tombstone) only once Empty, and nothing leaves Dead
(Kafka throws IllegalStateException for a tombstone of a group that still has members).

**Consumer group members** (``MemberState``, Kafka's CurrentAssignmentBuilder; the value is
the ``State`` field of ConsumerGroupCurrentMemberAssignment). Moves are named by the event that
causes them (``MemberEvent``), and ``MEMBER_TRANSITIONS`` maps (state, event) to the next state:

* JOIN (a heartbeat with epoch 0: a first join or a rejoin after being fenced): a fresh start,
  nothing assigned: STABLE at epoch 0, from any state.
* HOLD: nothing to do yet: a STABLE member at the target's epoch, or an UNREVOKED_PARTITIONS
  member that still owns (or did not report) partitions it must revoke. Nothing else holds: an
  UNRELEASED_PARTITIONS member looks again at what the others released at every heartbeat.
* REVOKE: the target takes partitions away that the member still owns: it must revoke them
  first, at its current epoch (UNREVOKED_PARTITIONS).
* ADVANCE: the member reaches the target's epoch with every partition of its target
  (STABLE), or ADVANCE_UNRELEASED: with the partitions no other member holds any more, the rest
  following once released (UNRELEASED_PARTITIONS).

UNKNOWN (127) is what a future version's state reads as; the member goes on by the same events.
A static member leaving (epoch -2) keeps its state. Requests that do not fit a member's epoch
are answered before any move: FENCED_MEMBER_EPOCH (an epoch newer than the member's, or older
than it and not the previous epoch with owned partitions within the assignment),
UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID / UNRELEASED_INSTANCE_ID for static members.
"""

from __future__ import annotations

from enum import Enum


# ---- classic groups -----------------------------------------------------------------------
class ClassicGroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_CE, _CP, _CC, _CS, _CD = (ClassicGroupState.EMPTY, ClassicGroupState.PREPARING_REBALANCE,
                           ClassicGroupState.COMPLETING_REBALANCE, ClassicGroupState.STABLE,
                           ClassicGroupState.DEAD)

#: state -> the states it may move to (Kafka's validPreviousStates, read the other way)
CLASSIC_TRANSITIONS: dict[ClassicGroupState, frozenset[ClassicGroupState]] = {
    _CE: frozenset({_CP, _CD}),
    _CP: frozenset({_CC, _CE, _CD}),
    _CC: frozenset({_CP, _CS, _CD}),
    _CS: frozenset({_CP, _CD}),
    _CD: frozenset({_CD}),
}
#: the states a classic group may be created in
CLASSIC_INITIAL = frozenset({_CE, _CS})


def check_classic(old: ClassicGroupState, new: ClassicGroupState) -> None:
    assert new in CLASSIC_TRANSITIONS[old], f"illegal classic group transition {old.value} -> {new.value}"


# ---- consumer groups (KIP-848) ------------------------------------------------------------
class ConsumerGroupState(Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


_GE, _GA, _GR, _GS, _GD = (ConsumerGroupState.EMPTY, ConsumerGroupState.ASSIGNING,
                           ConsumerGroupState.RECONCILING, ConsumerGroupState.STABLE,
                           ConsumerGroupState.DEAD)
_LIVE = frozenset({_GE, _GA, _GR, _GS})

CONSUMER_GROUP_TRANSITIONS: dict[ConsumerGroupState, frozenset[ConsumerGroupState]] = {
    _GE: _LIVE | {_GD},
    _GA: _LIVE,
    _GR: _LIVE,
    _GS: _LIVE,
    _GD: frozenset(),
}


def check_consumer_group(old: ConsumerGroupState, new: ConsumerGroupState) -> None:
    assert new in CONSUMER_GROUP_TRANSITIONS[old], (
        f"illegal consumer group transition {old.value} -> {new.value}")


# ---- consumer group members (KIP-848) -----------------------------------------------------
class MemberState(Enum):
    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127

    @classmethod
    def from_value(cls, value: int) -> MemberState:
        """The state a record's value stands for (UNKNOWN for a value we do not know)."""
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


class MemberEvent(Enum):
    JOIN = "join"
    HOLD = "hold"
    REVOKE = "revoke"
    ADVANCE = "advance"
    ADVANCE_UNRELEASED = "advance-unreleased"


_MS, _MV, _ML, _MU = (MemberState.STABLE, MemberState.UNREVOKED_PARTITIONS,
                      MemberState.UNRELEASED_PARTITIONS, MemberState.UNKNOWN)
_ME = MemberEvent

#: (state, event) -> next state; a pair not in the table is not a legal move
MEMBER_TRANSITIONS: dict[tuple[MemberState, MemberEvent], MemberState] = {
    **{(s, _ME.JOIN): _MS for s in MemberState},
    **{(s, _ME.REVOKE): _MV for s in MemberState},
    **{(s, _ME.ADVANCE): _MS for s in MemberState},
    **{(s, _ME.ADVANCE_UNRELEASED): _ML for s in MemberState},
    (_MS, _ME.HOLD): _MS,
    (_MV, _ME.HOLD): _MV,
}


def member_next(state: MemberState, event: MemberEvent) -> MemberState:
    """The state ``event`` moves a member in ``state`` to (AssertionError when illegal)."""
    new = MEMBER_TRANSITIONS.get((state, event))
    assert new is not None, f"illegal member move: {event.value} from {state.name}"
    return new
