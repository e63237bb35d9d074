"""Reconciliation of a KIP-848 member towards its target (Kafka's CurrentAssignmentBuilder).

A member that still owns partitions its target no longer holds revokes them first (REVOKE:
UNREVOKED_PARTITIONS, epoch unchanged) and reports it in a later heartbeat; a member that
already owns none of them goes straight on. Then it receives its target at the new epoch
(ADVANCE: STABLE), minus partitions another member has not released yet (ADVANCE_UNRELEASED:
UNRELEASED_PARTITIONS), which follow once released. The moves are the member table's
(``groups/states.py``); ``reconcile`` names the event and the table gives the state.
"""

from __future__ import annotations

from groups.assignors import Assignment
from groups.consumer_group import (
    ConsumerGroup,
    ConsumerMember,
    copy_of,
    held_epochs,
    inter,
    is_empty,
    minus,
    union,
)
from groups.states import MemberEvent, MemberState, member_next


def reconcile(
    m: ConsumerMember, target_epoch: int, target: Assignment, owned: Assignment | None,
    owned_by_others: Assignment,
) -> ConsumerMember:
    """The member's next current assignment (a new object when it moves; ``m`` is not
    changed). ``owned`` None: the member did not say what it owns."""
    if m.state == MemberState.UNREVOKED_PARTITIONS:
        if owned is None or not is_empty(inter(m.pending_revocation, owned)):
            member_next(m.state, MemberEvent.HOLD)
            return m
    elif m.state == MemberState.STABLE and m.member_epoch == target_epoch:
        member_next(m.state, MemberEvent.HOLD)
        return m
    kept = inter(m.assigned, target)
    revoke = minus(m.assigned, target)
    to_assign = minus(target, m.assigned)
    unreleased = inter(to_assign, owned_by_others)
    if not is_empty(revoke) and (owned is None or not is_empty(inter(revoke, owned))):
        return m.moved(MemberEvent.REVOKE, assigned=kept, pending_revocation=revoke)
    epochs = {"previous_member_epoch": m.member_epoch, "member_epoch": target_epoch,
              "pending_revocation": {}}
    if not is_empty(unreleased):
        new = m.moved(MemberEvent.ADVANCE_UNRELEASED, assigned=union(kept, minus(to_assign, unreleased)),
                      **epochs)
    else:
        new = m.moved(MemberEvent.ADVANCE, assigned=copy_of(target), **epochs)
    new.epochs = held_epochs(new, target_epoch)
    return new


def owned_by_others(members: dict[str, ConsumerMember], member_id: str) -> Assignment:
    """Every partition the other members hold (assigned or pending revocation)."""
    others: Assignment = {}
    for mid, x in members.items():
        if mid != member_id:
            others = union(others, union(x.assigned, x.pending_revocation))
    return others


def waiting_on_unreleased(g: ConsumerGroup, m: ConsumerMember) -> bool:
    """Whether a partition of ``m``'s target is still held by another member."""
    pending = minus(g.target.get(m.member_id, {}), m.assigned)
    for mid, x in g.members.items():
        if mid != m.member_id and not is_empty(inter(pending, union(x.assigned, x.pending_revocation))):
            return True
    return False
