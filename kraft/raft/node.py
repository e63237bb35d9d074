"""RaftNode: one KRaft replica as a sans-I/O state machine (KIP-595, KIP-996 pre-vote).

The driver feeds it ``handle(now_ms, message)`` for every message that arrives and calls
``poll(now_ms)``, which returns the messages to send and the time by which it wants to be
polled again. Nothing here reads a clock, touches a socket or draws unseeded randomness: time
comes in as ``now_ms``, randomness from the ``random.Random`` the driver passes, the log and
the ``quorum-state`` store through the interfaces of :mod:`kraft.raft.log`. The election state
is written to the store before any message that depends on it leaves (a vote, a candidacy).

Message handling lives in :mod:`kraft.raft.election` (Vote, BeginQuorumEpoch,
EndQuorumEpoch) and :mod:`kraft.raft.replication` (Fetch, FetchSnapshot, DescribeQuorum, the
leader's bookkeeping); this module holds the state, the transitions and the timers.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from kraft.raft import election, replication
from kraft.raft.config import RETRY_BACKOFF_BASE_MS, RaftConfig
from kraft.raft.log import QuorumStateStore, RaftLog, SnapshotId
from kraft.raft.messages import RaftMessage, RaftRequest, RaftResponse
from kraft.raft.state import ElectionState, RaftState, check_transition
from kraft.raft.voters import VoterHistory, voter_records_in
from protocol.records import SimpleRecord, build_batch

NO_DEADLINE = 2**62


class NotLeaderError(Exception):
    """append() on a replica that is not the leader (Kafka's NOT_LEADER_OR_FOLLOWER)."""


@dataclass(slots=True)
class Inflight:
    """A request we sent and still wait for; a response that matches none is dropped."""

    dst: int
    kind: type
    epoch: int
    sent_ms: int
    round: int = 0
    pre_vote: bool = False


class RaftNode:
    def __init__(self, node_id: int, voters: frozenset[int], cluster_id: str, log: RaftLog,
                 store: QuorumStateStore, rng: random.Random, now_ms: int,
                 config: RaftConfig | None = None) -> None:
        self.node_id = node_id
        self.history = VoterHistory(frozenset(voters))
        self.cluster_id = cluster_id
        self.log = log
        self.store = store
        self.rng = rng
        self.config = config or RaftConfig()
        self.outbox: list[RaftMessage] = []
        self.inflight: dict[int, Inflight] = {}
        self._next_correlation = 0
        self.high_watermark = log.start_offset
        self.timer_ms = NO_DEADLINE
        self.backoff_until_ms = -1
        self.fetch_backoff_until_ms = -1
        self.votes: dict[int, bool] = {}
        self.vote_round = 0
        self.election_retries = 0
        self.leader: replication.LeaderState | None = None
        self.snapshot_fetch: replication.SnapshotFetch | None = None
        self.end_epoch_sent: set[int] = set()
        self.fetched_from_leader = False
        self.update_voter_next_ms = -1  # KIP-853 UpdateRaftVoter: not before (kraft/raft/update_voter.py)
        self._load_voters()
        self._restore(now_ms)

    # -- the voter set (KIP-853: the latest VotersRecord on our log) -------------------------
    @property
    def voters(self) -> frozenset[int]:
        return self.history.current

    @property
    def kraft_version(self) -> int:
        """The kraft.version in force: the configured one (from the snapshot), or 1 once a
        VotersRecord is on our log (only kraft.version 1 writes them: a controller that joined
        through the log has no snapshot telling it)."""
        return max(self.config.kraft_version, 1 if self.history.entries else 0)

    def _load_voters(self) -> None:
        sid = self.log.latest_snapshot_id()
        if sid is not None:
            data, size = self.log.read_snapshot(sid, 0, 1 << 62)
            self.history.reset(voter_records_in(data), sid.end_offset)
        self.history.add_from(self.log.read(self.log.start_offset, 1 << 62))

    def log_appended(self, now_ms: int, data: bytes) -> None:
        """Every append to our log comes through here (voter sets ride in control batches)."""
        before = self.voters
        self.history.add_from(data)
        if self.voters != before:
            self._voters_changed(now_ms)

    def log_truncated(self, now_ms: int) -> None:
        before = self.voters
        self.history.truncate(self.log.end_offset)
        if self.voters != before:
            self._voters_changed(now_ms)

    def snapshot_installed(self, now_ms: int, data: bytes, end_offset: int) -> None:
        before = self.voters
        self.history.reset(voter_records_in(data), end_offset)
        if self.voters != before:
            self._voters_changed(now_ms)

    def _voters_changed(self, now_ms: int) -> None:
        if self.leader is not None:
            replication.sync_voters(self)
        if self.is_voter and self.timer_ms == NO_DEADLINE and self.state != RaftState.LEADER:
            self._reset_timer(now_ms)  # an observer that became a voter

    # -- the election state --------------------------------------------------------------
    def _restore(self, now_ms: int) -> None:
        """Start in the state quorum-state describes (a former leader restarts Resigned)."""
        es = self.store.read() or ElectionState()
        self.state = RaftState.UNATTACHED
        self.epoch, self.leader_id, self.voted_id = es.epoch, -1, -1
        if es.epoch < self.log.last_epoch():
            self.epoch = self.log.last_epoch()
        elif es.leader_id == self.node_id and self.is_voter:
            self.state, self.leader_id, self.voted_id = RaftState.RESIGNED, es.leader_id, es.voted_id
        elif es.leader_id >= 0:
            self.state, self.leader_id = RaftState.FOLLOWER, es.leader_id
        else:
            self.voted_id = es.voted_id
        self._persist()
        self._reset_timer(now_ms)
        if self.voters == {self.node_id}:  # a lone voter elects itself at once (epoch + 1)
            if self.state == RaftState.RESIGNED:  # keeping its own vote in the old epoch
                self.become_unattached(now_ms, self.epoch, voted_id=self.node_id)
            self.timer_ms = now_ms

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.voters

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    @property
    def is_leader(self) -> bool:
        return self.state == RaftState.LEADER

    def election_state(self) -> ElectionState:
        return ElectionState(self.epoch, self.leader_id, self.voted_id)

    def _persist(self) -> None:
        es = self.election_state()
        if self.store.read() != es:
            self.store.write(es)

    def random_election_timeout_ms(self) -> int:
        t = self.config.election_timeout_ms
        return t + self.rng.randrange(t) if t > 0 else 0

    def election_backoff_ms(self) -> int:
        retries = min(max(self.election_retries, 1), 16)
        return min(RETRY_BACKOFF_BASE_MS * self.rng.randrange(2 << (retries - 1)),
                   self.config.election_backoff_max_ms)

    def _reset_timer(self, now_ms: int) -> None:
        if self.state == RaftState.FOLLOWER:
            self.timer_ms = now_ms + self.config.fetch_timeout_ms
        elif self.state == RaftState.LEADER or not self.is_voter:
            self.timer_ms = NO_DEADLINE
        else:
            self.timer_ms = now_ms + self.random_election_timeout_ms()

    def _transition(self, new: RaftState, now_ms: int, epoch: int, leader_id: int = -1,
                    voted_id: int = -1) -> None:
        check_transition(self.state, new, is_voter=self.is_voter)
        assert epoch >= self.epoch, f"epoch going back {self.epoch} -> {epoch}"
        if self.state == RaftState.LEADER and new != RaftState.LEADER:
            replication.leave_leadership(self, now_ms)
        self.state, self.epoch, self.leader_id, self.voted_id = new, epoch, leader_id, voted_id
        self.votes = {}
        self.backoff_until_ms = -1
        self.snapshot_fetch = None
        self._persist()
        self._reset_timer(now_ms)

    def become_unattached(self, now_ms: int, epoch: int, voted_id: int = -1) -> None:
        self._transition(RaftState.UNATTACHED, now_ms, epoch, -1, voted_id)

    def become_follower(self, now_ms: int, epoch: int, leader_id: int) -> None:
        # The leader need not be in our voter set: we may not have its VotersRecord yet.
        assert leader_id != self.node_id
        self._transition(RaftState.FOLLOWER, now_ms, epoch, leader_id, -1)
        self.fetched_from_leader = False
        self.election_retries = 0

    def become_prospective(self, now_ms: int) -> None:
        # Keeps the leader it followed (KIP-996): a pre-vote answer naming that leader brings
        # it back as a follower without an election.
        self._transition(RaftState.PROSPECTIVE, now_ms, self.epoch, self.leader_id,
                         self.voted_id)
        self.votes = {self.node_id: True}
        self.vote_round += 1
        if self.voted_majority()[0] >= self.majority:
            self.become_candidate(now_ms)

    def become_candidate(self, now_ms: int) -> None:
        self._transition(RaftState.CANDIDATE, now_ms, self.epoch + 1, -1, self.node_id)
        self.votes = {self.node_id: True}
        self.vote_round += 1
        self.election_retries += 1
        if self.voted_majority()[0] >= self.majority:
            self.become_leader(now_ms)

    def become_leader(self, now_ms: int) -> None:
        granted = sorted(v for v, ok in self.votes.items() if ok and v in self.voters)
        self._transition(RaftState.LEADER, now_ms, self.epoch, self.node_id, self.node_id)
        self.election_retries = 0
        replication.start_leadership(self, now_ms, granted)

    def resign(self, now_ms: int) -> None:
        """Graceful shutdown of a leader: stop appending and tell the voters (EndQuorumEpoch)."""
        if self.state == RaftState.LEADER:
            self._transition(RaftState.RESIGNED, now_ms, self.epoch, self.node_id, self.node_id)
            self.end_epoch_sent = set()

    def observe_leader(self, now_ms: int, epoch: int, leader_id: int) -> bool:
        """React to a peer's (epoch, leader); True when our state changed."""
        known = leader_id >= 0 and leader_id != self.node_id
        if epoch > self.epoch:
            if known:
                self.become_follower(now_ms, epoch, leader_id)
            else:
                self.become_unattached(now_ms, epoch)
            return True
        if epoch == self.epoch and known and self.leader_id < 0:
            # Only news when we knew no leader of this epoch: a Prospective that left its
            # leader keeps it, so a peer naming that same leader does not pull it back.
            self.become_follower(now_ms, epoch, leader_id)
            return True
        return False

    # -- messages ------------------------------------------------------------------------
    def send(self, now_ms: int, dst: int, body: RaftRequest, **meta: int | bool) -> int:
        self._next_correlation += 1
        corr = self._next_correlation
        self.inflight[corr] = Inflight(dst, type(body), self.epoch, now_ms,
                                       int(meta.get("round", 0)), bool(meta.get("pre_vote")))
        self.outbox.append(RaftMessage(self.node_id, dst, corr, body))
        return corr

    def respond(self, msg: RaftMessage, body: RaftResponse) -> None:
        self.outbox.append(RaftMessage(self.node_id, msg.src, msg.correlation_id, body))

    def has_inflight(self, dst: int, kind: type) -> bool:
        return any(f.dst == dst and f.kind is kind for f in self.inflight.values())

    def handle(self, now_ms: int, msg: RaftMessage) -> None:
        """Take one inbound message (a request to answer or a response to our request)."""
        if msg.is_request:
            reply = election.handle_request(self, now_ms, msg)
            if reply is None:
                reply = replication.handle_request(self, now_ms, msg)
            if reply is not None:
                self.respond(msg, reply)
            return
        sent = self.inflight.pop(msg.correlation_id, None)
        if sent is None or sent.dst != msg.src or not isinstance(msg.body, _RESPONSE_OF[sent.kind]):
            return  # a duplicate, a late answer to a forgotten request, or a stranger
        if not election.handle_response(self, now_ms, msg, sent):
            replication.handle_response(self, now_ms, msg, sent)

    def poll(self, now_ms: int) -> tuple[list[RaftMessage], int]:
        """Run the timers; return the messages to send and when to poll next."""
        timeout = self.config.request_timeout_ms
        for corr in [c for c, f in self.inflight.items() if now_ms - f.sent_ms >= timeout]:
            del self.inflight[corr]
        for _ in range(4):  # again while the state changes (a lone voter: elected, then lead)
            state = self.state
            if state == RaftState.LEADER:
                replication.poll_leader(self, now_ms)
            elif state == RaftState.FOLLOWER or (state == RaftState.UNATTACHED
                                                 and not self.is_voter):
                replication.poll_follower(self, now_ms)
            else:
                election.poll_election(self, now_ms)
            if self.state == state:
                break
        out, self.outbox = self.outbox, []
        return out, now_ms if out else self._next_deadline(now_ms)

    def _next_deadline(self, now_ms: int) -> int:
        deadlines = [self.timer_ms]
        deadlines += [f.sent_ms + self.config.request_timeout_ms for f in self.inflight.values()]
        for t in (self.backoff_until_ms, self.fetch_backoff_until_ms):
            if t > now_ms:
                deadlines.append(t)
        if self.leader is not None:
            deadlines.append(self.leader.next_deadline_ms())
            if self.log.flushed_end_offset < self.log.end_offset:
                deadlines.append(now_ms)  # flush what append() added
        return max(min(deadlines), now_ms + 1) if self.outbox == [] else now_ms

    # -- the application side ------------------------------------------------------------
    def append(self, now_ms: int, values: list[bytes]) -> int:
        """Leader only: append one batch of records; returns the offset of the last one.

        The records are committed once ``high_watermark`` passes that offset.
        """
        if self.state != RaftState.LEADER or not values:
            raise NotLeaderError(f"node {self.node_id} is {self.state.value}")
        base = self.log.end_offset
        batch = build_batch([SimpleRecord(None, v, (), now_ms) for v in values],
                            base_offset=base, partition_leader_epoch=self.epoch)
        self.log.append(batch)
        return base + len(values) - 1

    def voted_majority(self) -> tuple[int, int]:
        """(granted, rejected) among the current voters."""
        granted = sum(1 for v, ok in self.votes.items() if ok and v in self.voters)
        rejected = sum(1 for v, ok in self.votes.items() if not ok and v in self.voters)
        return granted, rejected

    def snapshot(self) -> SnapshotId | None:
        """Snapshot the committed prefix (what the controller does every N bytes or ms)."""
        return self.log.create_snapshot(self.high_watermark)


def _response_of() -> dict[type, type]:
    from kraft.raft import messages as m
    return {m.VoteRequest: m.VoteResponse, m.BeginQuorumEpochRequest: m.BeginQuorumEpochResponse,
            m.EndQuorumEpochRequest: m.EndQuorumEpochResponse, m.FetchRequest: m.FetchResponse,
            m.FetchSnapshotRequest: m.FetchSnapshotResponse,
            m.DescribeQuorumRequest: m.DescribeQuorumResponse,
            m.AddRaftVoterRequest: m.AddRaftVoterResponse,
            m.RemoveRaftVoterRequest: m.RemoveRaftVoterResponse,
            m.UpdateRaftVoterRequest: m.UpdateRaftVoterResponse}


_RESPONSE_OF = _response_of()
