"""The states of a transactional id and the one table of allowed transitions.

A transactional id's state (Kafka's ``TransactionState``; the ids are the ``TransactionStatus``
byte of ``TransactionLogValue``, the names what DescribeTransactions / ListTransactions show)::

    Empty ──AddPartitions/AddOffsets──> Ongoing ──EndTxn(commit)──> PrepareCommit
      ^  \\                               │   \\                           │ markers written
      │   InitProducerId (epoch bump)    │    EndTxn(abort), timeout,    v
      │   Empty -> Empty                 │    InitProducerId fence    CompleteCommit ─┐
      │                                  v                                            │
      └──────InitProducerId──── CompleteAbort <──markers written── PrepareAbort <─────┘
                                                                   (AddPartitions from a
                                                                    Complete* state opens
                                                                    the next transaction)

* ``Ongoing`` is entered from ``Empty``, ``CompleteCommit`` or ``CompleteAbort`` when the first
  partition (or group) is added, and re-entered while more are added.
* ``PrepareCommit`` / ``PrepareAbort`` are written before the markers; while in them every
  request that would change the transaction gets CONCURRENT_TRANSACTIONS (the client retries).
  Once every partition has its marker, ``CompleteCommit`` / ``CompleteAbort`` is written.
* ``PrepareEpochFence`` is the step between ``Ongoing`` and ``PrepareAbort`` when the
  coordinator itself aborts (a transaction timeout, or an InitProducerId from a new producer
  instance while the old one's transaction is open): the producer epoch is bumped so the old
  instance is fenced. Kafka never persists it, and neither do we: the fence and the
  ``PrepareAbort`` with the bumped epoch are one record.
* ``Dead`` is the step before a transactional id is forgotten (``transactional.id.expiration.ms``
  of inactivity in ``Empty`` / ``Complete*``): its record is a tombstone.
* Transaction version 2 (KIP-890) also lets ``Empty`` / ``Complete*`` go to ``PrepareAbort``
  (an EndTxn(abort) with nothing added); the table allows it as Kafka's does, the TV1
  coordinator here never takes that edge.

Transitions are checked in one place (:func:`check_transition`): the coordinator asserts every
transition it prepares; replaying a record that breaks the table (a log written by someone
else) is reported to the caller, which keeps the record (the log is the truth).
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["TxnState", "VALID_PREVIOUS", "check_transition", "from_name", "IllegalTransition"]


class TxnState(IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name Kafka's DescribeTransactions / ListTransactions use."""
        return _NAMES[self]

    @property
    def is_prepare(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def is_complete(self) -> bool:
        return self in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)

    @property
    def expiration_allowed(self) -> bool:
        """States in which an idle transactional id may expire."""
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


_NAMES = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in _NAMES.items()}

_E, _O = TxnState.EMPTY, TxnState.ONGOING
_PC, _PA = TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT
_CC, _CA = TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT
_D, _PF = TxnState.DEAD, TxnState.PREPARE_EPOCH_FENCE

#: target state -> the states it may be entered from (Kafka's ``validPreviousStates``)
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    _E: frozenset({_E, _CC, _CA}),
    _O: frozenset({_O, _E, _CC, _CA}),
    _PC: frozenset({_O}),
    _PA: frozenset({_O, _PF, _E, _CC, _CA}),
    _CC: frozenset({_PC}),
    _CA: frozenset({_PA}),
    _D: frozenset({_E, _CC, _CA}),
    _PF: frozenset({_O}),
}


class IllegalTransition(AssertionError):
    """A transition outside :data:`VALID_PREVIOUS` (our own bug when we prepared it)."""


def check_transition(old: TxnState | None, new: TxnState) -> None:
    """Raise :class:`IllegalTransition` unless ``old -> new`` is allowed. ``old`` None is a
    transactional id not known yet: it starts in ``Empty``."""
    if old is None:
        if new is not TxnState.EMPTY:
            raise IllegalTransition(f"a new transactional id starts in Empty, not {new.kafka_name}")
        return
    if old not in VALID_PREVIOUS[new]:
        raise IllegalTransition(f"{old.kafka_name} -> {new.kafka_name} is not a valid transition")


def from_name(name: str) -> TxnState | None:
    return _BY_NAME.get(name)
