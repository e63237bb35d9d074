"""The partition-state layer: one hosted replica of a partition (Kafka's ``Partition``).

Every request handler and coordinator that touches a partition's data goes through this
object, never through the :class:`~log.partition_log.PartitionLog` directly: appends (as leader,
offsets assigned here; as follower, the leader's offsets kept), reads (consumers up to the high
watermark or the last stable offset, followers up to the log end), the high watermark, and the
waiters that acks=all produces and coordinator replies park on. It is sans-I/O: no clock (``now_ms``
is passed in), no tasks; the runtime (``kafkawire.replica_manager``) turns waiter callbacks into
trio events and drives leadership from the metadata image.

State:

* ``role``: NONE (just opened), LEADER, FOLLOWER or OFFLINE, changed only through :meth:`become_leader`,
  :meth:`become_follower` and :meth:`make_offline` (table ``ROLE_TRANSITIONS``);
* ``leader_epoch``, ``leader_id``, ``replicas`` and ``isr`` as the controller last decided;
* per follower (leader only): the log end offset it last fetched from, its log start offset,
  and when it was last caught up (``FollowerState``; what ISR shrinking will use);
* the high watermark, kept in the log (so checkpoints and reads see it) but MOVED only here.

The high watermark on a leader is the smallest log end offset among the ISR members: this
node's own (its log end offset, or with ``hw_requires_flush`` the offset known durable, as a
Raft leader counts only flushed entries) and each other ISR member's last fetch position. It
never goes back while this node leads; it is clamped only by truncation. It does not move at
all while the ISR is smaller than the topic's ``min.insync.replicas`` (at most the replica
count; ``min_insync_replicas``, kept current by the runtime), as Kafka 4.3.1's
``maybeIncrementLeaderHW`` (KIP-966): acks=1 writes are taken but not committed, so a replica
that left the ISR meanwhile still holds everything below the high watermark. With an ISR of one
(every partition today) it equals the log end offset right after each append, as before.

Waiters (:meth:`wait_for_high_watermark`) are kept in a heap by required offset and released,
in order, exactly when the high watermark reaches them; a waiter for acks=all carries
``min.insync.replicas`` and completes with NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank
below it meanwhile (Kafka's ``checkEnoughReplicasReachOffset``). Losing leadership completes
every waiter with NOT_LEADER_OR_FOLLOWER.

Followers (not started yet): a fetcher fetches from the leader with a replica id,
:meth:`append_as_follower` writes the leader's batches verbatim, :meth:`update_follower_high_watermark`
takes the leader's high watermark from the response, and :meth:`truncation_offset` /
:meth:`truncate_to` cut a diverging tail found through OffsetForLeaderEpoch or the Fetch
response's diverging epoch (which :meth:`read` reports, as Kafka's leader does).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

from log.leader_epoch import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
from log.partition_log import AppendInfo, PartitionLog, ReadResult
from protocol.errors import ErrorCode, KafkaError
from protocol.records import BatchHeader

__all__ = [
    "FetchIsolation",
    "FollowerState",
    "HighWatermarkWaiter",
    "Partition",
    "PartitionRead",
    "ReplicaRole",
    "ROLE_TRANSITIONS",
    "broker_epoch_isr_eligible",
    "check_leader_epoch",
]

#: "no epoch given" in the wire protocol's current_leader_epoch / last_fetched_epoch fields
NO_EPOCH = -1


class ReplicaRole(Enum):
    NONE = "none"  # hosted, no role given yet (just opened)
    LEADER = "leader"
    FOLLOWER = "follower"
    OFFLINE = "offline"


#: Allowed role changes. A leader or follower may be told again (a new leader epoch, a new
#: ISR); an offline replica (log being deleted, or its directory failed) stays offline.
_ROLES = frozenset({ReplicaRole.LEADER, ReplicaRole.FOLLOWER, ReplicaRole.OFFLINE})
ROLE_TRANSITIONS: dict[ReplicaRole, frozenset[ReplicaRole]] = {
    ReplicaRole.NONE: _ROLES,
    ReplicaRole.FOLLOWER: _ROLES,
    ReplicaRole.LEADER: _ROLES,
    ReplicaRole.OFFLINE: frozenset({ReplicaRole.OFFLINE}),
}


class FetchIsolation(Enum):
    """How far a read may go (Kafka's ``FetchIsolation``)."""

    LOG_END = 0  # followers, and this node's own coordinators loading their state
    HIGH_WATERMARK = 1  # consumers at read_uncommitted
    TXN_COMMITTED = 2  # consumers at read_committed: the last stable offset


def check_leader_epoch(requested: int, current: int) -> ErrorCode:
    """A request's current leader epoch against ours: -1 means the client knows none; an older
    one is FENCED_LEADER_EPOCH, a newer one (we have not heard of it yet) UNKNOWN_LEADER_EPOCH."""
    if requested == NO_EPOCH or requested == current:
        return ErrorCode.NONE
    return ErrorCode.FENCED_LEADER_EPOCH if requested < current else ErrorCode.UNKNOWN_LEADER_EPOCH


def broker_epoch_isr_eligible(fetch_broker_epoch: int | None, registered_epoch: int | None) -> bool:
    """KIP-903 (Kafka's ``isBrokerEpochIsrEligible``): a follower may join the ISR only when
    it has fetched in this leader epoch, its broker is registered, and the broker epoch its
    fetch carried is that registration's (or -1: a Fetch before v15, which carries none)."""
    if fetch_broker_epoch is None or registered_epoch is None:
        return False
    return fetch_broker_epoch == -1 or fetch_broker_epoch == registered_epoch


@dataclass(slots=True)
class FollowerState:
    """What the leader knows about one other replica (Kafka's ``Replica``)."""

    replica_id: int
    log_end_offset: int = -1  # unknown until it fetches
    log_start_offset: int = -1
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    #: the broker epoch its last fetch carried (Fetch v15+ ``replica_state.replica_epoch``,
    #: -1 from older versions); None until it fetches in this leader epoch (KIP-903)
    broker_epoch: int | None = None


class PartitionRead(NamedTuple):
    """One partition's answer to a fetch, with the offsets as they were before the read."""

    records: ReadResult | None
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    log_end_offset: int
    #: (epoch, end offset) when the fetcher's last fetched epoch diverges from this log
    diverging_epoch: tuple[int, int] | None = None


class HighWatermarkWaiter:
    """A parked acks=all produce or coordinator reply: done once the high watermark reaches
    ``required_offset``; ``error`` tells how (NONE, or why it cannot be acknowledged)."""

    __slots__ = ("required_offset", "min_insync_replicas", "done", "error", "on_done", "cancelled")

    def __init__(self, required_offset: int, min_insync_replicas: int) -> None:
        self.required_offset = required_offset
        self.min_insync_replicas = min_insync_replicas
        self.done = False
        self.cancelled = False
        self.error = ErrorCode.NONE
        #: called once when done (the runtime sets a trio event here)
        self.on_done: Callable[[], None] | None = None

    def _complete(self, error: ErrorCode) -> None:
        if self.done:
            return
        self.done = True
        self.error = error
        if self.on_done is not None:
            self.on_done()


class Partition:
    """One hosted replica of ``topic``-``partition`` on node ``local_id``, with no role until
    :meth:`become_leader` / :meth:`become_follower`."""

    def __init__(self, log: PartitionLog, local_id: int, *, hw_requires_flush: bool = False) -> None:
        self.log = log
        self.topic = log.topic
        self.partition = log.partition
        self.local_id = local_id
        self.hw_requires_flush = hw_requires_flush
        self.role = ReplicaRole.NONE
        self.leader_id = -1
        self.leader_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: frozenset[int] = frozenset()
        #: leader only: the ISR asked of the controller by an AlterPartition still in flight
        #: (Kafka's PendingExpandIsr / PendingShrinkIsr); the high watermark counts its
        #: members too (the "maximal" ISR, KIP-497)
        self.pending_isr: frozenset[int] | None = None
        #: the controller's partition epoch for ``isr`` (AlterPartition sends it back)
        self.partition_epoch = -1
        #: the topic's ``min.insync.replicas`` (the runtime keeps it current): while the ISR is
        #: below it (at most the replica count) the leader holds the high watermark
        self.min_insync_replicas = 1
        self.followers: dict[int, FollowerState] = {}
        self._waiters: list[tuple[int, int, HighWatermarkWaiter]] = []
        self._seq = itertools.count()
        #: called after anything a waiting reader may care about (append, high watermark move,
        #: truncation, deletion, role change); the runtime wakes Fetch long-polls there
        self.on_change: Callable[[Partition], None] | None = None
        #: leader only: called when a replica outside the ISR has caught up (the runtime asks
        #: the controller to add it with AlterPartition)
        self.on_isr_expand: Callable[[Partition], None] | None = None

    # ---- roles ------------------------------------------------------------------------------
    def _transition(self, role: ReplicaRole) -> None:
        assert role in ROLE_TRANSITIONS[self.role], f"{self}: {self.role} -> {role}"
        self.role = role

    def become_leader(
        self, leader_epoch: int, isr: frozenset[int], replicas: tuple[int, ...], now_ms: int
    ) -> bool:
        """The controller made this node the leader (``leader_epoch``, ``isr``). A new epoch
        starts at the log end offset in the leader epoch cache (Kafka's ``makeLeader``) and
        resets what is known of the followers. Returns True when the epoch is new."""
        new_epoch = self.role is not ReplicaRole.LEADER or leader_epoch != self.leader_epoch
        self._transition(ReplicaRole.LEADER)
        self.leader_id = self.local_id
        self.leader_epoch = leader_epoch
        self.replicas = tuple(replicas)
        self.isr = frozenset(isr)
        self.pending_isr = None  # the controller's decision replaces what was asked
        if new_epoch:
            latest = self.log.leader_epochs.latest_epoch()
            if leader_epoch >= 0 and (latest is None or latest < leader_epoch):
                self.log.assign_leader_epoch(leader_epoch, self.log.log_end_offset)
            self.followers = {}
        known = self.followers
        self.followers = {  # as Kafka: ISR members count as caught up when the epoch starts
            r: known.get(r) or FollowerState(r, last_caught_up_ms=now_ms if r in self.isr else -1)
            for r in self.replicas if r != self.local_id
        }
        self._maybe_increment_high_watermark()
        self._changed()
        return new_epoch

    def become_follower(
        self, leader_id: int, leader_epoch: int, isr: frozenset[int], replicas: tuple[int, ...]
    ) -> bool:
        """Another node leads (or none, ``leader_id`` -1). Parked waiters fail with
        NOT_LEADER_OR_FOLLOWER. Truncation is the fetcher's job (:meth:`truncation_offset`).
        Returns True when the leader or epoch changed."""
        changed = (
            self.role is not ReplicaRole.FOLLOWER
            or leader_epoch != self.leader_epoch
            or leader_id != self.leader_id
        )
        self._transition(ReplicaRole.FOLLOWER)
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.replicas = tuple(replicas)
        self.isr = frozenset(isr)
        self.pending_isr = None
        self.followers = {}
        self._fail_waiters(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        self._changed()
        return changed

    def make_offline(self) -> None:
        """The replica is going away (deleted, or its log directory failed)."""
        self._transition(ReplicaRole.OFFLINE)
        self.followers = {}
        self._fail_waiters(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        self._changed()

    @property
    def is_leader(self) -> bool:
        return self.role is ReplicaRole.LEADER

    def check(self, current_leader_epoch: int = NO_EPOCH, *, require_leader: bool = True) -> ErrorCode:
        """Kafka's ``getLocalLog``: the epoch first, then leadership when required."""
        if self.role in (ReplicaRole.OFFLINE, ReplicaRole.NONE):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        code = check_leader_epoch(current_leader_epoch, self.leader_epoch)
        if code:
            return code
        if require_leader and self.role is not ReplicaRole.LEADER:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.NONE

    def _require(self, current_leader_epoch: int = NO_EPOCH, *, require_leader: bool = True) -> None:
        code = self.check(current_leader_epoch, require_leader=require_leader)
        if code:
            raise KafkaError(code, f"{self.topic}-{self.partition}: {code.name} on node {self.local_id}")

    # ---- appends -----------------------------------------------------------------------------
    def effective_min_isr(self, min_insync_replicas: int) -> int:
        """Kafka 4's effective ``min.insync.replicas``: at most the number of replicas (a
        topic with min.insync.replicas 4 on 3 replicas takes acks=all writes with all 3 in
        sync, one on a single replica with min.insync.replicas 2 too; measured on 4.3.1)."""
        if self.replicas:
            return min(min_insync_replicas, len(self.replicas))
        return min_insync_replicas

    def append_as_leader(
        self,
        buf: bytearray | memoryview,
        batches: list[tuple[int, BatchHeader]],
        *,
        now_ms: int,
        required_acks: int = 1,
        min_insync_replicas: int = 1,
        log_append_time: bool | None = None,
        coordinator: bool = False,
        marker_transaction_version: int = 0,
    ) -> AppendInfo:
        """Append on the leader: offsets and this leader epoch are assigned by the log. With
        ``required_acks`` -1 an ISR smaller than ``min_insync_replicas`` refuses the append with
        NOT_ENOUGH_REPLICAS (Kafka checks before writing). The high watermark moves as far as
        the ISR allows; the caller waits for ``info.last_offset + 1`` when it needs the commit."""
        if self.role is not ReplicaRole.LEADER:
            raise KafkaError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"Leader not local for partition {self.topic}-{self.partition} on broker "
                f"{self.local_id}",
            )
        min_insync_replicas = self.effective_min_isr(min_insync_replicas)
        if required_acks == -1 and len(self.isr) < min_insync_replicas:
            members = ", ".join(str(r) for r in sorted(self.isr))
            raise KafkaError(  # Kafka's message, with its Scala set
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"The size of the current ISR Set({members}) is insufficient to satisfy the "
                f"min.isr requirement of {min_insync_replicas} for partition "
                f"{self.topic}-{self.partition}",
            )
        info = self.log.append(
            buf, batches, leader_epoch=self.leader_epoch, now_ms=now_ms,
            log_append_time=log_append_time, coordinator=coordinator,
            marker_transaction_version=marker_transaction_version,
        )
        if not info.duplicate:
            self._maybe_increment_high_watermark()
            self._changed()
        return info

    def append_as_follower(
        self, buf: bytearray | memoryview, batches: list[tuple[int, BatchHeader]], *, now_ms: int
    ) -> AppendInfo:
        """Append the leader's batches verbatim (its offsets, epochs, timestamps)."""
        if self.role is not ReplicaRole.FOLLOWER:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{self}: not a follower")
        info = self.log.append_as_follower(buf, batches, now_ms=now_ms)
        self._changed()
        return info

    def update_follower_high_watermark(self, leader_high_watermark: int) -> int:
        """A follower takes the leader's high watermark (capped by its own log end offset)."""
        if self.role is not ReplicaRole.FOLLOWER:
            return self.high_watermark
        old = self.log.high_watermark
        new = self.log.update_high_watermark(min(leader_high_watermark, self.log.log_end_offset))
        if new != old:
            self._changed()
        return new

    def set_quorum_high_watermark(self, quorum_high_watermark: int) -> bool:
        """A Raft-replicated log (``__cluster_metadata``): the Raft node decides the high
        watermark (what a majority of voters flushed), capped by the local log end. True when
        it moved."""
        old = self.log.high_watermark
        new = self.log.update_high_watermark(min(quorum_high_watermark, self.log.log_end_offset))
        if new != old:
            self._changed()
        return new != old

    # ---- the high watermark --------------------------------------------------------------------
    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    def _local_end_offset(self) -> int:
        log = self.log
        return min(log.recovery_point, log.log_end_offset) if self.hw_requires_flush else log.log_end_offset

    @property
    def under_min_isr(self) -> bool:
        """Kafka's ``isUnderMinIsr``: leading with an ISR smaller than the effective
        ``min.insync.replicas``."""
        return self.role is ReplicaRole.LEADER and len(self.isr) < self.effective_min_isr(
            self.min_insync_replicas)

    def set_min_insync_replicas(self, value: int) -> None:
        """The topic's ``min.insync.replicas`` (changed by a config change)."""
        if value != self.min_insync_replicas:
            self.min_insync_replicas = value
            if self._maybe_increment_high_watermark():
                self._changed()

    @property
    def maximal_isr(self) -> frozenset[int]:
        """The ISR and the members an AlterPartition in flight would add (Kafka's
        ``maximalIsr``): a replica being added counts before the controller commits it."""
        pending = self.pending_isr
        return self.isr if pending is None else self.isr | pending

    def set_pending_isr(self, isr: frozenset[int] | None) -> None:
        """An AlterPartition asking for ``isr`` was sent (None: it was answered, or failed)."""
        self.pending_isr = isr
        if isr is None and self._maybe_increment_high_watermark():
            self._changed()

    def _maybe_increment_high_watermark(self) -> bool:
        """Leader only: min log end offset over the maximal ISR (the ISR and any member an
        AlterPartition in flight adds, KIP-497: a replica joining the ISR has every committed
        record, so nothing is committed without it while it is being added); moves forward
        only, and not at all while the ISR is below min.insync.replicas (KIP-966, Kafka
        4.3.1's ``maybeIncrementLeaderHW``: a replica that left such an ISR keeps everything
        below the high watermark, which makes it an eligible leader replica)."""
        if self.role is not ReplicaRole.LEADER or self.under_min_isr:
            return False
        new = self._local_end_offset()
        for r in self.maximal_isr:
            if r == self.local_id:
                continue
            f = self.followers.get(r)
            if f is None or f.log_end_offset < 0:
                return False  # an ISR member whose position is not known yet holds it
            new = min(new, f.log_end_offset)
        if new <= self.log.high_watermark:
            return False
        hw = self.log.update_high_watermark(new)
        self._release_waiters(hw)
        return True

    def on_flushed(self) -> None:
        """The log's recovery point moved (``hw_requires_flush`` partitions count only durable
        offsets towards the high watermark)."""
        if self._maybe_increment_high_watermark():
            self._changed()

    def update_isr(self, isr: frozenset[int], now_ms: int) -> None:
        """The ISR changed (AlterPartition answered, or the controller decided): the
        change asked for is no longer pending."""
        self.isr = frozenset(isr)
        self.pending_isr = None
        self._maybe_increment_high_watermark()
        # waiters at or below the high watermark were released; a smaller ISR may now let more
        # through, and acks=all ones check min.insync.replicas as they complete
        self._changed()

    # ---- waiters -------------------------------------------------------------------------------
    def wait_for_high_watermark(
        self, required_offset: int, min_insync_replicas: int = 1
    ) -> HighWatermarkWaiter:
        """A waiter released when the high watermark reaches ``required_offset`` (at once when
        it already has). Not leading: completed at once with NOT_LEADER_OR_FOLLOWER."""
        w = HighWatermarkWaiter(required_offset, self.effective_min_isr(min_insync_replicas))
        if self.role is not ReplicaRole.LEADER:
            w._complete(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        elif self.log.high_watermark >= required_offset:
            w._complete(self._ack_error(w))
        else:
            heapq.heappush(self._waiters, (required_offset, next(self._seq), w))
        return w

    def cancel(self, waiter: HighWatermarkWaiter) -> None:
        """The waiter's owner gave up (request timeout); it is dropped lazily."""
        waiter.cancelled = True

    def _ack_error(self, w: HighWatermarkWaiter) -> ErrorCode:
        if len(self.isr) < w.min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return ErrorCode.NONE

    def _release_waiters(self, hw: int) -> None:
        waiters = self._waiters
        while waiters and waiters[0][0] <= hw:
            _, _, w = heapq.heappop(waiters)
            if not w.cancelled:
                w._complete(self._ack_error(w))

    def _fail_waiters(self, error: ErrorCode) -> None:
        waiters, self._waiters = self._waiters, []
        for _, _, w in sorted(waiters):
            w._complete(error)

    @property
    def waiting(self) -> int:
        return sum(1 for _, _, w in self._waiters if not w.cancelled and not w.done)

    # ---- reads -----------------------------------------------------------------------------------
    def read(
        self,
        replica_id: int,
        fetch_offset: int,
        max_bytes: int,
        *,
        isolation: FetchIsolation,
        now_ms: int,
        current_leader_epoch: int = NO_EPOCH,
        last_fetched_epoch: int = NO_EPOCH,
        replica_log_start_offset: int = -1,
        replica_epoch: int = -1,
        min_one_message: bool = True,
        require_leader: bool = True,
    ) -> PartitionRead:
        """A fetch of this partition (Kafka's ``fetchRecords``). ``replica_id`` >= 0 is a
        follower: it reads up to the log end offset and its fetch offset is its log end offset,
        which may move the high watermark. The offsets reported are those from before the
        read (a follower learns about its own effect on the next fetch). Raises KafkaError."""
        self._require(current_leader_epoch, require_leader=require_leader or replica_id >= 0)
        follower: FollowerState | None = None
        if replica_id >= 0:
            follower = self.followers.get(replica_id)
            if follower is None:  # not (yet) a replica in this leader epoch
                raise KafkaError(
                    ErrorCode.UNKNOWN_LEADER_EPOCH if current_leader_epoch != NO_EPOCH
                    else ErrorCode.NOT_LEADER_OR_FOLLOWER,
                    f"replica {replica_id} is not a replica of {self.topic}-{self.partition} "
                    f"in leader epoch {self.leader_epoch}",
                )
        log = self.log
        hw, lso, start, leo = log.high_watermark, log.last_stable_offset, log.log_start_offset, log.log_end_offset
        if last_fetched_epoch != NO_EPOCH:
            diverging = self._diverging_epoch(last_fetched_epoch, fetch_offset, start)
            if diverging is not None:
                return PartitionRead(None, hw, lso, start, leo, diverging)
        upper = leo if isolation is FetchIsolation.LOG_END else (
            hw if isolation is FetchIsolation.HIGH_WATERMARK else lso
        )
        res = log.read(fetch_offset, max_bytes, max_offset=upper, min_one_message=min_one_message)
        if follower is not None:
            follower.broker_epoch = replica_epoch
            self._update_follower(follower, fetch_offset, replica_log_start_offset, leo, now_ms)
        return PartitionRead(res, hw, lso, start, leo)

    def idle_offsets(self, fetch_offset: int, isolation: FetchIsolation,
                     current_leader_epoch: int, require_leader: bool) -> tuple[int, int] | None:
        """A consumer's fetch that ``read`` would answer with no records and no error (the
        offset at or past the high watermark, within the log), answered without reading:
        (high watermark, log start offset); the last stable offset is the log's. None when it
        needs ``read`` (a follower fetch, an error, or records to return). The checks are
        ``check``'s."""
        role = self.role
        if not (role is ReplicaRole.LEADER or (role is ReplicaRole.FOLLOWER and not require_leader)):
            return None
        if current_leader_epoch != NO_EPOCH and current_leader_epoch != self.leader_epoch:
            return None
        if isolation is FetchIsolation.LOG_END:
            return None
        log = self.log
        hw, start = log.high_watermark, log.log_start_offset
        if fetch_offset < hw or fetch_offset < start or fetch_offset > log.log_end_offset:
            return None
        return hw, start

    def idle_follower_offsets(self, replica_id: int, fetch_offset: int,
                              current_leader_epoch: int, last_fetched_epoch: int,
                              replica_log_start_offset: int, replica_epoch: int,
                              now_ms: int) -> tuple[int, int] | None:
        """A follower's fetch that ``read`` would answer with no records and no error, and
        that changes nothing but the follower's fetch times: an ISR member fetching at the
        log end offset it already reported, with the same log start offset and broker epoch,
        whose last fetched epoch is this log's latest (so not diverging). Answered without
        reading: (high watermark, log start offset), as ``read`` reports them. As Kafka's
        ``updateFollowerFetchState``, the follower is caught up at ``now_ms`` (its last
        caught-up time moves, which keeps it in the ISR) and the high watermark, which only
        a change of its log end offset could move, is left alone. None: ``read`` decides."""
        if self.role is not ReplicaRole.LEADER:
            return None
        if current_leader_epoch != NO_EPOCH and current_leader_epoch != self.leader_epoch:
            return None
        f = self.followers.get(replica_id)
        log = self.log
        if f is None or fetch_offset != log.log_end_offset or f.log_end_offset != fetch_offset \
                or f.log_start_offset != replica_log_start_offset \
                or f.broker_epoch != replica_epoch or replica_id not in self.isr:
            return None
        if last_fetched_epoch != NO_EPOCH \
                and last_fetched_epoch != log.leader_epochs.latest_epoch():
            return None
        f.last_fetch_ms = f.last_caught_up_ms = now_ms
        return log.high_watermark, log.log_start_offset

    def _diverging_epoch(self, last_fetched_epoch: int, fetch_offset: int, start: int) -> tuple[int, int] | None:
        epoch, end = self.log.end_offset_for_epoch(last_fetched_epoch)
        if epoch == UNDEFINED_EPOCH or end == UNDEFINED_EPOCH_OFFSET:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"cannot determine the end offset of epoch {last_fetched_epoch}",
            )
        if fetch_offset < start:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE, f"offset {fetch_offset} below {start}")
        if epoch < last_fetched_epoch or end < fetch_offset:
            return (epoch, end)
        return None

    def _update_follower(
        self, f: FollowerState, fetch_offset: int, log_start: int, leader_end: int, now_ms: int
    ) -> None:
        f.log_end_offset = fetch_offset
        f.log_start_offset = log_start
        f.last_fetch_ms = now_ms
        if fetch_offset >= leader_end:
            f.last_caught_up_ms = now_ms
        if self._maybe_increment_high_watermark():
            self._changed()
        if f.replica_id not in self.isr and self.on_isr_expand is not None \
                and self._caught_up(f):
            self.on_isr_expand(self)

    def _caught_up(self, f: FollowerState) -> bool:
        """Kafka's ``isFollowerInSync``: the follower reached the high watermark and the
        start of this leader epoch."""
        epoch_start = dict(self.log.leader_epochs.entries()).get(self.leader_epoch, 0)
        return f.log_end_offset >= self.log.high_watermark and f.log_end_offset >= epoch_start

    def wanted_isr(self, now_ms: int, replica_lag_time_max_ms: int,
                   eligible: Callable[[int, int | None], bool]) -> frozenset[int] | None:
        """Leader only: the ISR this leader should ask the controller for, or None when it
        is right as it is. ISR members that have not caught up with the log end offset for
        ``replica.lag.time.max.ms`` leave (Kafka's ``getOutOfSyncReplicas``); replicas outside
        it that reached the high watermark and the start of this epoch, and that ``eligible``
        accepts given the broker epoch of their last fetch (registered, unfenced, not shutting
        down, that epoch current: Kafka's ``isReplicaIsrEligible``), join
        (``isFollowerInSync``)."""
        if self.role is not ReplicaRole.LEADER:
            return None
        isr = set(self.isr)
        for r, f in self.followers.items():
            if r in isr:
                if now_ms - f.last_caught_up_ms > replica_lag_time_max_ms:
                    isr.discard(r)
            elif f.log_end_offset >= 0 and self._caught_up(f) and eligible(r, f.broker_epoch):
                isr.add(r)
        isr.add(self.local_id)
        new = frozenset(isr)
        return None if new == self.isr else new

    def member_broker_epoch(self, replica_id: int, local_broker_epoch: int) -> int:
        """The broker epoch an AlterPartition names for an ISR member (Kafka's
        ``addBrokerEpochToIsr``): ours for this node, else the one its last fetch carried
        (-1 when unknown: the controller then does not check it)."""
        if replica_id == self.local_id:
            return local_broker_epoch
        f = self.followers.get(replica_id)
        return -1 if f is None or f.broker_epoch is None else f.broker_epoch

    def fetchable_offset(self, isolation: FetchIsolation) -> int:
        log = self.log
        if isolation is FetchIsolation.LOG_END:
            return log.log_end_offset
        return log.high_watermark if isolation is FetchIsolation.HIGH_WATERMARK else log.last_stable_offset

    def offset_for_timestamp(
        self,
        timestamp: int,
        isolation: FetchIsolation,
        *,
        current_leader_epoch: int = NO_EPOCH,
        require_leader: bool = True,
        consumer: bool = True,
    ) -> tuple[int, int, int] | None:
        """ListOffsets (Kafka's ``fetchOffsetForTimestamp``): (offset, timestamp, leader epoch)
        or None. -1 latest, -2 earliest (and -4 earliest local), -3 the max timestamp, else
        the first record at or after ``timestamp``, all below the fetchable offset. For a
        consumer, a leader whose high watermark lags behind the start of its epoch (just
        elected) answers OFFSET_NOT_AVAILABLE for "latest" and lookups, as Kafka does."""
        self._require(current_leader_epoch, require_leader=require_leader)
        log = self.log
        upper = self.fetchable_offset(isolation)
        epochs = log.leader_epochs
        if timestamp in (-2, -4):
            e = epochs.epoch_for_offset(log.log_start_offset)
            return (log.log_start_offset, -1, self.leader_epoch if e is None else e)
        epoch_start = None
        if self.role is ReplicaRole.LEADER:
            epoch_start = dict(epochs.entries()).get(self.leader_epoch)
        if consumer and epoch_start is not None and epoch_start > log.high_watermark:
            raise KafkaError(
                ErrorCode.OFFSET_NOT_AVAILABLE,
                f"the high watermark of {self.topic}-{self.partition} lags behind the start "
                f"of leader epoch {self.leader_epoch}",
            )
        if timestamp == -1:
            return (upper, -1, self.leader_epoch)
        found = (
            log.max_timestamp(max_offset=upper) if timestamp == -3
            else log.offset_for_timestamp(timestamp, max_offset=upper)
        )
        if found is None or found[0] >= upper:
            return None
        e = epochs.epoch_for_offset(found[0])
        return (found[0], found[1], -1 if e is None else e)

    def end_offset_for_epoch(self, current_leader_epoch: int, leader_epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch on the leader: (largest epoch <= ``leader_epoch``, its end)."""
        self._require(current_leader_epoch)
        return self.log.end_offset_for_epoch(leader_epoch)

    # ---- truncation and deletion -------------------------------------------------------------
    def truncation_offset(self, leader_epoch: int, leader_end_offset: int) -> tuple[int, bool]:
        """Where a follower cuts its log given the leader's OffsetForLeaderEpoch answer (or a
        Fetch diverging epoch) for this log's latest epoch: (offset, complete). Not complete
        means the leader named an epoch this log does not have: cut to the end of our largest
        epoch below it and ask again with that one."""
        leo = self.log.log_end_offset
        if leader_end_offset == UNDEFINED_EPOCH_OFFSET:
            return (min(self.log.high_watermark, leo), True)
        if leader_epoch == UNDEFINED_EPOCH:
            return (min(leader_end_offset, leo), True)
        epoch, end = self.log.end_offset_for_epoch(leader_epoch)
        if epoch == UNDEFINED_EPOCH:
            return (min(leader_end_offset, leo), True)
        if epoch != leader_epoch:
            return (min(end, leo), False)
        return (min(end, leader_end_offset, leo), True)

    def truncate_to(self, offset: int) -> None:
        """Follower truncation (never on a leader: its log is the truth)."""
        if self.role is ReplicaRole.LEADER:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{self}: leaders do not truncate")
        self.log.truncate_to(offset)
        self._changed()

    def update_follower_log_start_offset(self, leader_log_start_offset: int) -> None:
        """A follower follows the leader's log start offset (retention, DeleteRecords), up to
        its own high watermark (Kafka's ``maybeIncrementLogStartOffset`` on followers)."""
        if self.role is not ReplicaRole.FOLLOWER:
            return
        target = min(leader_log_start_offset, self.log.high_watermark)
        if target > self.log.log_start_offset:
            self.log.delete_records_before(target)
            self._changed()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        if self.role is ReplicaRole.LEADER:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{self}: leaders do not truncate")
        self.log.truncate_fully_and_start_at(offset)
        self._changed()

    def start_after_snapshot(self, offset: int) -> int:
        """A Raft-replicated log whose snapshot covers everything before ``offset`` (at or
        below the high watermark): the log start moves there, whatever the role. Returns the
        new log start."""
        before = self.log.log_start_offset
        low = self.log.delete_records_before(min(offset, self.log.high_watermark))
        if low != before:
            self._changed()
        return low

    def delete_records(self, offset: int) -> int:
        """DeleteRecords on the leader (-1: the high watermark). Returns the low watermark."""
        self._require()
        if not self.log.config.delete:
            raise KafkaError(
                ErrorCode.POLICY_VIOLATION,
                f"Records of partition {self.topic}-{self.partition} can not be deleted due to "
                "the configured policy",
            )
        target = self.log.high_watermark if offset == -1 else offset
        before = self.log.log_start_offset
        low = self.log.delete_records_before(target)
        if low != before:
            self._changed()
        return low

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change(self)

    def __repr__(self) -> str:
        return (
            f"Partition({self.topic}-{self.partition} on {self.local_id}, {self.role.value}, "
            f"epoch={self.leader_epoch}, isr={sorted(self.isr)}, leo={self.log.log_end_offset}, "
            f"hw={self.log.high_watermark})"
        )
