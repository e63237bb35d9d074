"""Share groups (KIP-932): membership, epochs and server-side assignment, sans-I/O.

ShareGroupHeartbeat (key 76) as Kafka 4.3.1 serves it:

* The client makes up its member id (a UUID, KIP-1082) and joins with epoch 0 and its
  ``SubscribedTopicNames``; it leaves with epoch -1 (the response carries epoch -1). Any other
  epoch must be the member's current one (FENCED_MEMBER_EPOCH otherwise); an unknown member id
  with a non-zero epoch is UNKNOWN_MEMBER_ID.
* A new group starts at epoch 1 with an empty assignment at epoch 1. The **group epoch** is
  bumped by a member joining, leaving or expiring, a subscription or rack change, and a change
  in the assignable partitions of the subscribed topics. Only partitions whose share-partition
  state is initialized are assignable (as in Kafka 4.1+): the heartbeat that brings a new
  subscription gets an assignment without them, the runtime initializes them, and the next
  heartbeat sees the change. The **assignment** is recomputed at a heartbeat when the group
  epoch is ahead of it, at most once per ``share.assignment.interval.ms`` (meanwhile members
  stay at the assignment's epoch; share groups have no revocation, so there is nothing else to
  wait for: a partition can be consumed by several members, the share partition hands each
  record to one of them). A member whose subscription changed loses the topics it left at
  that heartbeat, whenever the next computation is due. A member's epoch is the assignment
  epoch; its assignment is sent when it joins and whenever it changed.
* The assignor is Kafka's ``simple`` one in shape: per subscribed topic, partitions are spread
  over the members subscribed to it round-robin; with more members than partitions every
  member still gets one partition, so partitions are shared by several members.
* A member that does not heartbeat within ``share.session.timeout.ms`` (group config, else
  ``group.share.session.timeout.ms``) is removed (its acquired records are not released here,
  as in Kafka: its share session closing or the acquisition locks expiring do that).
  ``group.share.max.size`` bounds the members.
* Group state: Empty (no members), Stable; Dead after DeleteGroups.

**Deviation:** membership is kept in memory, not in Kafka's ShareGroup* coordinator records
(their definitions are not in our spec set): after a broker restart members get
UNKNOWN_MEMBER_ID and rejoin with epoch 0 (what clients do on that error), and an empty group
is known again once a member joins or state for it is found in ``__share_group_state``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from protocol.errors import ErrorCode

#: topic name -> (topic id, its assignable partitions), the metadata the assignor needs
TopicsView = Callable[[str], "tuple[uuid.UUID, list[int]] | None"]
Assignment = dict[uuid.UUID, list[int]]

ASSIGNOR = "simple"
LEAVE_EPOCH = -1


class HeartbeatError(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(code, message)
        self.code = code
        self.message = message


@dataclass
class ShareMember:
    member_id: str
    epoch: int
    client_id: str
    client_host: str
    rack_id: str | None
    topics: list[str]
    assignment: Assignment = field(default_factory=dict)
    sent: Assignment | None = None  # the assignment last sent to the member
    deadline_ms: int = 0


@dataclass
class ShareGroup:
    group_id: str
    epoch: int = 1
    assignment_epoch: int = 1
    members: dict[str, ShareMember] = field(default_factory=dict)
    #: topic name -> assignable partitions at the last heartbeat
    metadata: dict[str, tuple[int, ...]] = field(default_factory=dict)
    assigned_at_ms: int | None = None  # when the assignment was last computed

    @property
    def state(self) -> str:
        return "Empty" if not self.members else "Stable"


@dataclass
class ShareGroupSettings:
    session_timeout_ms: int = 45000  # share.session.timeout.ms
    heartbeat_interval_ms: int = 5000  # share.heartbeat.interval.ms
    assignment_interval_ms: int = 1000  # share.assignment.interval.ms


@dataclass
class HeartbeatReply:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: Assignment | None  # None: unchanged since the last response


def assign(members: dict[str, ShareMember], topics: TopicsView) -> dict[str, Assignment]:
    """Round-robin per topic over the members subscribed to it; every subscribed member gets
    at least one partition when the topic has any (partitions shared then)."""
    out: dict[str, Assignment] = {mid: {} for mid in members}
    names = sorted({t for m in members.values() for t in m.topics})
    for name in names:
        meta = topics(name)
        if meta is None or not meta[1]:
            continue
        tid, parts = meta[0], sorted(meta[1])
        n = len(parts)
        subs = sorted(mid for mid, m in members.items() if name in m.topics)
        if len(subs) <= n:
            for i, p in enumerate(parts):
                out[subs[i % len(subs)]].setdefault(tid, []).append(p)
        else:
            for i, mid in enumerate(subs):
                out[mid].setdefault(tid, []).append(parts[i % n])
    return out


class ShareGroups:
    def __init__(self, max_size: int = 200) -> None:
        self.max_size = max_size  # group.share.max.size
        self.groups: dict[str, ShareGroup] = {}
        self.on_member_removed: list[Callable[[str, str], None]] = []

    def group(self, group_id: str) -> ShareGroup | None:
        return self.groups.get(group_id)

    def ensure(self, group_id: str) -> ShareGroup:
        g = self.groups.get(group_id)
        if g is None:
            g = self.groups[group_id] = ShareGroup(group_id)
        return g

    # ---- heartbeat --------------------------------------------------------------------------
    def heartbeat(
        self, group_id: str, member_id: str, epoch: int, rack_id: str | None,
        topics_sub: list[str] | None, client_id: str, client_host: str,
        settings: ShareGroupSettings, topics: TopicsView, now_ms: int,
    ) -> HeartbeatReply:
        if not group_id:
            raise HeartbeatError(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
        if not member_id:
            raise HeartbeatError(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
        if epoch == LEAVE_EPOCH:
            self.leave(group_id, member_id)
            return HeartbeatReply(member_id, LEAVE_EPOCH, 0, None)
        if epoch < LEAVE_EPOCH:
            raise HeartbeatError(ErrorCode.INVALID_REQUEST, f"MemberEpoch is {epoch}, but must be "
                                 "greater than or equal to -1.")
        g = self.groups.get(group_id)
        m = g.members.get(member_id) if g is not None else None
        joined = False
        if epoch == 0:
            if not topics_sub and (m is None):
                raise HeartbeatError(ErrorCode.INVALID_REQUEST,
                                     "SubscribedTopicNames must be set in first request.")
            g = self.ensure(group_id)
            if m is None and len(g.members) >= self.max_size:
                raise HeartbeatError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                     f"The share group has reached its maximum capacity of "
                                     f"{self.max_size} members.")
            if m is None:
                m = ShareMember(member_id, 0, client_id, client_host, rack_id, list(topics_sub or []))
                g.members[member_id] = m
                joined = True
            m.sent = None  # a (re)join gets its assignment again
        else:
            if g is None or m is None:
                raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID,
                                     f"Member {member_id} is not a member of group {group_id}.")
            if epoch != m.epoch:
                raise HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH,
                                     f"The share group member has a smaller member epoch ({epoch})"
                                     f" than the one known by the group coordinator ({m.epoch}). "
                                     "The member must abandon all its partitions and rejoin.")
        assert g is not None
        changed = self._update_member(m, rack_id, topics_sub)
        if changed:
            self._drop_unsubscribed(m, topics)
        changed = self._metadata_changed(g, topics) or changed or joined
        if changed:  # one bump per heartbeat, whatever changed
            g.epoch += 1
        self._maybe_reassign(g, topics, now_ms, settings.assignment_interval_ms)
        m.deadline_ms = now_ms + settings.session_timeout_ms
        m.epoch = g.assignment_epoch
        send = m.sent is None or m.sent != m.assignment
        if send:
            m.sent = {t: list(ps) for t, ps in m.assignment.items()}
        return HeartbeatReply(member_id, m.epoch, settings.heartbeat_interval_ms,
                              dict(m.assignment) if send else None)

    @staticmethod
    def _update_member(m: ShareMember, rack_id: str | None, topics_sub: list[str] | None) -> bool:
        changed = False
        if topics_sub is not None and sorted(topics_sub) != sorted(m.topics):
            m.topics = list(topics_sub)
            changed = True
        if rack_id is not None and rack_id != m.rack_id:
            m.rack_id = rack_id
            changed = True
        return changed

    @staticmethod
    def _drop_unsubscribed(m: ShareMember, topics: TopicsView) -> None:
        """A member whose subscription changed loses the topics it left at once, whenever the
        next assignment is computed (``share.assignment.interval.ms``): it must not fetch
        them meanwhile (as Kafka 4.3.1: after subscribe([b]) only b's records come)."""
        keep = set()
        for name in m.topics:
            meta = topics(name)
            if meta is not None:
                keep.add(meta[0])
        m.assignment = {tid: ps for tid, ps in m.assignment.items() if tid in keep}

    @staticmethod
    def _metadata_changed(g: ShareGroup, topics: TopicsView) -> bool:
        """Whether the assignable partitions of the subscribed topics changed (a topic with
        none yet counts as unchanged, so a first subscription bumps the epoch once)."""
        subscribed = {t for m in g.members.values() for t in m.topics}
        metadata = {}
        for name in subscribed:
            meta = topics(name)
            if meta is not None and meta[1]:
                metadata[name] = tuple(sorted(meta[1]))
        if metadata == g.metadata:
            return False
        g.metadata = metadata
        return True

    def _maybe_reassign(
        self, g: ShareGroup, topics: TopicsView, now_ms: int, interval_ms: int,
    ) -> None:
        if g.assignment_epoch == g.epoch:
            return
        if g.assigned_at_ms is not None and now_ms < g.assigned_at_ms + interval_ms:
            return  # batched: at most one computation per share.assignment.interval.ms
        target = assign(g.members, topics)
        for mid, a in target.items():
            g.members[mid].assignment = a
        g.assignment_epoch = g.epoch
        g.assigned_at_ms = now_ms

    # ---- leaving and expiry -----------------------------------------------------------------
    def leave(self, group_id: str, member_id: str) -> None:
        g = self.groups.get(group_id)
        if g is None or member_id not in g.members:
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {member_id} is not a member of group {group_id}.")
        self._remove(g, member_id)

    def _remove(self, g: ShareGroup, member_id: str) -> None:
        """The group epoch moves; the assignment is recomputed at the next heartbeat."""
        del g.members[member_id]
        g.epoch += 1
        for hook in self.on_member_removed:
            hook(g.group_id, member_id)

    def next_deadline_ms(self) -> int | None:
        ds = [m.deadline_ms for g in self.groups.values() for m in g.members.values()]
        return min(ds) if ds else None

    def on_timer(self, now_ms: int) -> list[tuple[str, str]]:
        """Remove members whose session expired; returns (group, member) removed."""
        gone = [(g, mid) for g in self.groups.values() for mid, m in g.members.items()
                if m.deadline_ms <= now_ms]
        for g, mid in gone:
            self._remove(g, mid)
        return [(g.group_id, mid) for g, mid in gone]

    def is_member(self, group_id: str, member_id: str) -> bool:
        g = self.groups.get(group_id)
        return g is not None and member_id in g.members

    def delete(self, group_id: str) -> ErrorCode:
        """DeleteGroups: only an empty group."""
        g = self.groups.get(group_id)
        if g is None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if g.members:
            return ErrorCode.NON_EMPTY_GROUP
        del self.groups[group_id]
        return ErrorCode.NONE
