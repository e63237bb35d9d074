"""The states of a KRaft replica and the one table of allowed transitions.

Theory (KIP-595 with KIP-996 pre-vote). Every replica is in exactly one state per epoch; the
epoch only grows, and each epoch has at most one leader because a candidate needs the votes of
a majority of voters and a voter votes at most once per epoch (the vote is durable in the
``quorum-state`` file before the answer leaves). States:

* ``UNATTACHED``: knows an epoch but no leader for it; may have voted (``voted_id``).
  After the election timeout a voter becomes ``PROSPECTIVE``; observers stay here and look for
  the leader by fetching from any voter.
* ``PROSPECTIVE`` (KIP-996): asks the voters whether they *would* vote for it (a Vote with
  ``pre_vote``), without bumping the epoch. A majority of yeses makes it ``CANDIDATE``; a
  replica that cannot win therefore cannot disturb a working quorum by inflating the epoch.
* ``CANDIDATE``: bumped the epoch, voted for itself and asks for real votes. A majority makes it
  ``LEADER``; losing or timing out sends it back to ``PROSPECTIVE`` after a random backoff.
* ``LEADER``: appends, replicates through followers' Fetch requests and advances the high
  watermark once a majority has fetched past the start of its epoch. Resigns (``RESIGNED``)
  on shutdown or when a majority stops fetching (check-quorum).
* ``FOLLOWER``: fetches from the known leader; a fetch timeout makes a voter ``PROSPECTIVE``
  (an observer ``UNATTACHED``).
* ``RESIGNED``: a former leader of this epoch (also how a leader restarts, so that it can
  neither vote again in its own epoch nor reuse an offset of it); it tells the voters with
  EndQuorumEpoch and waits for the next election.

Learning a higher epoch moves any state to ``UNATTACHED`` (or ``FOLLOWER`` when the leader of
that epoch is known). Observers (non-voters) only use ``UNATTACHED`` and ``FOLLOWER``.
An illegal transition asked by our own code is a bug and raises AssertionError; peers' messages
that would need one are answered with an error code instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class RaftState(Enum):
    UNATTACHED = "Unattached"
    PROSPECTIVE = "Prospective"
    CANDIDATE = "Candidate"
    LEADER = "Leader"
    FOLLOWER = "Follower"
    RESIGNED = "Resigned"


_U, _P, _C, _L, _F, _R = (RaftState.UNATTACHED, RaftState.PROSPECTIVE, RaftState.CANDIDATE,
                          RaftState.LEADER, RaftState.FOLLOWER, RaftState.RESIGNED)

TRANSITIONS: dict[RaftState, frozenset[RaftState]] = {
    _U: frozenset({_U, _P, _F}),
    _P: frozenset({_U, _P, _C, _F}),
    _C: frozenset({_U, _P, _L, _F}),
    _L: frozenset({_U, _F, _R}),
    _F: frozenset({_U, _P, _F}),
    _R: frozenset({_U, _F}),
}
OBSERVER_STATES = frozenset({_U, _F})


def check_transition(old: RaftState, new: RaftState, *, is_voter: bool) -> None:
    """Assert that ``old -> new`` is in the table (our own transitions only)."""
    assert new in TRANSITIONS[old], f"illegal Raft transition {old.value} -> {new.value}"
    leaving = old == RaftState.LEADER and new == RaftState.RESIGNED  # it removed itself
    assert is_voter or new in OBSERVER_STATES or leaving, f"an observer cannot become {new.value}"


@dataclass(frozen=True, slots=True)
class ElectionState:
    """What ``quorum-state`` keeps: the epoch, its leader and our vote in it (-1: none)."""

    epoch: int = 0
    leader_id: int = -1
    voted_id: int = -1
