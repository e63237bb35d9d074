"""A deterministic simulation of a KRaft quorum (in the spirit of Kafka's RaftEventSimulationTest
and TigerBeetle's VOPR): the real RaftNode, MemoryRaftLogs, a virtual clock and one seeded
event queue. Everything random comes from ``random.Random(seed)``, so a seed replays exactly:
``python -m kraft.raft.sim --seed N`` (add ``--trace`` to print every event).

Each run has three phases:

1. chaos: the network drops, delays (reordering), duplicates and partitions messages; nodes
   crash (losing what they had not flushed) and restart; clients append to whoever leads;
   nodes take snapshots, so lagging followers must fetch them;
2. a majority partition: a random majority is connected and reliable, the rest is cut off;
   a leader must be elected in the majority and commit a new entry within
   ``LIVENESS_BOUND_MS`` of virtual time;
3. healed: everyone restarts and connects; every voter and observer must reach the new
   committed end within the same bound.

After every event the invariants hold: at most one leader per epoch, a new leader holds every
committed entry, no durable epoch and no high watermark goes back (within a process life),
committed batches never change or disappear (a majority of voters keep them durably) and every
replica's log agrees with them.
"""

from __future__ import annotations

import argparse
import functools
import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kraft.raft import messages as m
from kraft.raft.config import RaftConfig
from kraft.raft.log import MemoryQuorumStateStore, MemoryRaftLog
from kraft.raft.messages import RaftMessage, wire_round_trip
from kraft.raft.node import RaftNode
from kraft.raft.state import RaftState
from kraft.raft.voters import voter_sets_in
from protocol.records import iter_headers

CLUSTER_ID = "kafkawire-sim-cluster0"
ADMIN = 0  # the node id the admin client's voter changes come from
LIVENESS_BOUND_MS = 30_000


class InvariantError(AssertionError):
    pass


@dataclass
class SimConfig:
    voters: int = 3
    observers: int = 1
    chaos_ms: int = 20_000
    drop_rate: float = 0.05
    duplicate_rate: float = 0.02
    delay_ms: tuple[int, int] = (1, 30)
    slow_rate: float = 0.02          # a message held up to slow_delay_ms (reorders)
    slow_delay_ms: int = 3_000
    crash_every_ms: int = 4_000      # mean time between crashes
    down_ms: tuple[int, int] = (100, 6_000)
    partition_every_ms: int = 6_000  # mean time between partitions
    partition_ms: tuple[int, int] = (500, 8_000)
    append_every_ms: int = 150
    snapshot_every_ms: int = 3_000
    voter_change_every_ms: int = 10**9  # KIP-853 AddRaftVoter / RemoveRaftVoter
    shutdown_every_ms: int = 10**9   # the leader resigns (EndQuorumEpoch), then stops
    wire: bool = True                # every message through the real codecs

    @classmethod
    def random(cls, rng: random.Random) -> SimConfig:
        """A per-seed mix: cluster size and fault rates vary with the seed."""
        return cls(voters=rng.choice([1, 3, 3, 3, 5, 5]), observers=rng.choice([0, 1, 2]),
                   drop_rate=rng.choice([0.0, 0.02, 0.1, 0.3]),
                   duplicate_rate=rng.choice([0.0, 0.05]),
                   crash_every_ms=rng.choice([2_000, 5_000, 20_000]),
                   partition_every_ms=rng.choice([3_000, 8_000, 30_000]),
                   snapshot_every_ms=rng.choice([1_000, 5_000]),
                   voter_change_every_ms=rng.choice([10**9, 3_000, 8_000]),
                   shutdown_every_ms=rng.choice([10**9, 5_000]))


@dataclass
class Replica:
    node_id: int
    log: MemoryRaftLog = field(default_factory=MemoryRaftLog)
    store: MemoryQuorumStateStore = field(default_factory=MemoryQuorumStateStore)
    node: RaftNode | None = None
    incarnation: int = 0
    next_poll_ms: int = -1
    last_hw: int = 0
    last_epoch: int = 0
    checked: tuple[int, int, int] = (-1, -1, -1)
    durable: int = 0


@dataclass
class Figures:
    seed: int = 0
    voters: int = 0
    elections: int = 0
    first_elect_ms: int = -1
    majority_elect_ms: int = -1
    heal_converge_ms: int = -1
    commits: int = 0
    messages: int = 0
    drops: int = 0
    duplicates: int = 0
    crashes: int = 0
    partitions: int = 0
    snapshots: int = 0
    snapshot_installs: int = 0
    voter_changes: int = 0
    resignations: int = 0
    truncations: int = 0
    events: int = 0


class Simulation:
    def __init__(self, seed: int, cfg: SimConfig | None = None,
                 trace: Callable[[str], None] | None = None) -> None:
        self.rng = random.Random(seed)
        self.cfg = cfg or SimConfig.random(self.rng)
        self.trace = trace
        self.now = 0
        self._seq = 0
        self._queue: list[tuple[int, int, str, Any]] = []
        n = self.cfg.voters
        self.voter_ids = frozenset(range(1, n + 1))
        ids = list(range(1, n + 1 + self.cfg.observers))
        self.replicas = {i: Replica(i) for i in ids}
        self.group = {i: 0 for i in ids}   # replicas talk only inside their group
        self.reliable = False
        self.leaders: dict[int, int] = {}   # epoch -> leader id
        self.committed: list[tuple[int, int, bytes]] = []  # (base, next, batch bytes)
        self.committed_end = 0
        self.committed_voters = self.voter_ids
        self._ever_voters: set[int] = set(self.voter_ids)
        self._index: dict[int, tuple[int, bytes]] = {}
        self._parsed_snapshots: dict[Any, tuple[bytes, list[tuple[int, int, bytes]]]] = {}
        self.figures = Figures(seed=seed, voters=n)
        dynamic = self.cfg.voter_change_every_ms < 10**9
        self.raft_config = RaftConfig(kraft_version=1 if dynamic else 0)
        self.faults_on = False
        self._admin_correlation = 0
        for r in self.replicas.values():
            self._start(r)

    # -- the event queue -------------------------------------------------------------------
    def _at(self, t: int, kind: str, arg: Any) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (t, self._seq, kind, arg))

    def _start(self, r: Replica) -> None:
        r.incarnation += 1
        r.next_poll_ms = -1
        r.node = RaftNode(r.node_id, self.voter_ids, CLUSTER_ID, r.log, r.store,
                          random.Random(self.rng.getrandbits(64)), self.now, self.raft_config)
        r.last_hw = r.node.high_watermark
        self._poll(r)

    def _poll(self, r: Replica) -> None:
        node = r.node
        if node is None:
            return
        out, deadline = node.poll(self.now)
        for msg in out:
            self._send(msg)
        if r.next_poll_ms <= self.now or deadline < r.next_poll_ms:
            r.next_poll_ms = deadline
            self._at(deadline, "poll", (r.node_id, r.incarnation))

    def _send(self, msg: RaftMessage) -> None:
        self.figures.messages += 1
        rng, cfg = self.rng, self.cfg
        if not self.reliable and rng.random() < cfg.drop_rate:
            self.figures.drops += 1
            return
        copies = 1
        if not self.reliable and rng.random() < cfg.duplicate_rate:
            copies = 2
            self.figures.duplicates += 1
        for _ in range(copies):
            delay = rng.randint(*cfg.delay_ms)
            if not self.reliable and rng.random() < cfg.slow_rate:
                delay += rng.randint(0, cfg.slow_delay_ms)
            body = wire_round_trip(msg.body) if cfg.wire else msg.body
            self._at(self.now + delay, "deliver", RaftMessage(msg.src, msg.dst,
                                                              msg.correlation_id, body))

    def step(self) -> bool:
        if not self._queue:
            return False
        t, _seq, kind, arg = heapq.heappop(self._queue)
        assert t >= self.now
        self.now = t
        self.figures.events += 1
        if self.trace is not None:
            self.trace(f"{t:>8} {kind} {arg!r:.160}")
        getattr(self, "_on_" + kind)(arg)
        self.check()
        return True

    def run_until(self, t: int, stop: Callable[[], bool] | None = None) -> bool:
        if stop is not None and stop():
            return True
        while self._queue and self._queue[0][0] <= t:
            self.step()
            if stop is not None and stop():
                return True
        self.now = max(self.now, t)
        return stop is not None and stop()

    # -- events ----------------------------------------------------------------------------
    def _on_poll(self, arg: tuple[int, int]) -> None:
        r = self.replicas[arg[0]]
        if r.incarnation != arg[1] or r.node is None or r.next_poll_ms != self.now:
            return
        r.next_poll_ms = -1
        self._poll(r)

    def _on_deliver(self, msg: RaftMessage) -> None:
        if msg.dst == ADMIN:
            return  # an answer to a voter change; the committed log shows what happened
        r = self.replicas[msg.dst]
        if r.node is None or (msg.src != ADMIN and self.group[msg.src] != self.group[msg.dst]):
            return
        before, snap = r.log.end_offset, r.log.latest_snapshot_id()
        r.node.handle(self.now, msg)
        if r.log.end_offset < before:
            self.figures.truncations += 1
        if r.log.latest_snapshot_id() != snap:
            self.figures.snapshot_installs += 1
        self._poll(r)

    def _on_crash(self, node_id: int) -> None:
        r = self.replicas[node_id]
        if r.node is None or not self.faults_on:
            return
        self.figures.crashes += 1
        r.node = None
        r.log.crash()
        lo, hi = self.cfg.down_ms
        self._at(self.now + self.rng.randint(lo, hi), "restart", node_id)

    def _on_restart(self, node_id: int) -> None:
        r = self.replicas[node_id]
        if r.node is None:
            self._start(r)

    def _on_partition(self, groups: dict[int, int]) -> None:
        if not self.faults_on:
            return
        self.figures.partitions += 1
        self.group = dict(groups)
        lo, hi = self.cfg.partition_ms
        self._at(self.now + self.rng.randint(lo, hi), "heal", self.figures.partitions)

    def _on_heal(self, which: int) -> None:
        if which == self.figures.partitions and self.faults_on:
            self.group = {i: 0 for i in self.replicas}

    def _on_append(self, values: list[bytes]) -> None:
        if not self.faults_on:
            return
        leaders = [r for r in self.replicas.values() if r.node is not None and r.node.is_leader]
        if leaders:
            r = max(leaders, key=lambda x: x.node.epoch if x.node else -1)
            assert r.node is not None
            r.node.append(self.now, values)
            self._poll(r)

    def _on_voter_change(self, pick: float) -> None:
        """An admin asks the leader to add an observer or remove a voter (KIP-853)."""
        leaders = [r.node for r in self.replicas.values() if r.node is not None
                   and r.node.is_leader]
        if not leaders or not self.faults_on:
            return
        leader = max(leaders, key=lambda n: n.epoch)
        voters = leader.voters
        others = sorted(set(self.replicas) - voters)
        body: m.RaftRequest
        if others and (len(voters) < 3 or pick < 0.5):
            body = m.AddRaftVoterRequest(cluster_id=CLUSTER_ID, timeout_ms=5_000,
                                         voter_id=others[int(pick * 1e6) % len(others)])
        elif len(voters) > 1:
            # Not the leader itself: see docs/RAFT.md, "known gaps" (a leader that removes
            # itself and dies before a voter fetched the record leaves the rest without a
            # majority for anyone).
            rest = sorted(voters - {leader.node_id})
            body = m.RemoveRaftVoterRequest(cluster_id=CLUSTER_ID,
                                            voter_id=rest[int(pick * 1e6) % len(rest)])
        else:
            return
        self._admin_correlation += 1
        self._send(RaftMessage(ADMIN, leader.node_id, self._admin_correlation, body))

    def _on_shutdown(self, linger_ms: int) -> None:
        """Graceful shutdown of the leader: it resigns, tells the voters, and stops."""
        leaders = [r for r in self.replicas.values() if r.node is not None and r.node.is_leader]
        if not leaders or not self.faults_on:
            return
        r = max(leaders, key=lambda x: x.node.epoch if x.node else -1)
        assert r.node is not None
        r.node.resign(self.now)
        self.figures.resignations += 1
        self._poll(r)
        self._at(self.now + linger_ms, "crash", r.node_id)

    def _on_snapshot(self, node_id: int) -> None:
        r = self.replicas[node_id]
        if r.node is not None and r.node.snapshot() is not None:
            self.figures.snapshots += 1

    # -- the run ---------------------------------------------------------------------------
    def run(self) -> Figures:
        """Chaos, then a majority partition, then healed; raises InvariantError on a failure."""
        self._schedule_chaos()
        self.run_until(self.cfg.chaos_ms)
        self.faults_on = False
        self._phase_majority()
        self._phase_healed()
        return self.figures

    def _schedule_chaos(self) -> None:
        self.faults_on = True
        rng, cfg, end = self.rng, self.cfg, self.cfg.chaos_ms
        ids = sorted(self.replicas)

        def times(mean_ms: int) -> list[int]:
            out: list[int] = []
            t = 0.0
            while True:
                t += rng.expovariate(1.0 / mean_ms)
                if t >= end:
                    return out
                out.append(int(t))

        for t in times(cfg.crash_every_ms):
            self._at(t, "crash", rng.choice(ids))
        for t in times(cfg.partition_every_ms):
            shuffled = rng.sample(ids, len(ids))
            k = rng.randint(2, 3)
            self._at(t, "partition", {n: i % k for i, n in enumerate(shuffled)})
        for t in times(cfg.append_every_ms):
            self._at(t, "append", [self._value() for _ in range(rng.randint(1, 3))])
        for t in times(cfg.snapshot_every_ms):
            self._at(t, "snapshot", rng.choice(ids))
        for t in times(cfg.voter_change_every_ms):
            self._at(t, "voter_change", rng.random())
        for t in times(cfg.shutdown_every_ms):
            self._at(t, "shutdown", rng.randint(10, 300))

    def _value(self) -> bytes:
        self._values = getattr(self, "_values", 0) + 1
        return b"<v%d>" % self._values

    def _live_leader(self, members: set[int]) -> RaftNode | None:
        """A leader among ``members`` whose epoch has committed (HW past its LeaderChange)."""
        for i in members:
            node = self.replicas[i].node
            if node is not None and node.is_leader and node.leader is not None and (
                    node.high_watermark > node.leader.epoch_start_offset):
                return node
        return None

    def _settle(self, members: set[int], groups: dict[int, int]) -> None:
        """Everyone up, reliable links, the given partition; no more faults."""
        self.reliable = True
        self.group = groups
        for r in self.replicas.values():
            if r.node is None:
                self._start(r)

    def _await(self, what: str, cond: Callable[[], bool]) -> int:
        start = self.now
        if not self.run_until(start + LIVENESS_BOUND_MS, cond):
            raise InvariantError(f"{what}: not within {LIVENESS_BOUND_MS} ms of virtual time "
                                 f"(from {start})")
        return self.now - start

    def _commit_through(self, members: set[int]) -> int:
        """Append a fresh value through a leader of ``members`` until it commits (a leader that
        was about to lose its place may drop it: then try again). Returns its offset."""
        value = self._value()
        start = self.now
        while self.now - start < LIVENESS_BOUND_MS:
            leader = self._live_leader(members)
            if leader is None:
                self._await("a leader", lambda: self._live_leader(members) is not None)
                continue
            leader.append(self.now, [value])
            self._poll(self.replicas[leader.node_id])
            if self.run_until(self.now + 5_000, functools.partial(self._found, value)):
                return self._find(value, 0)
        raise InvariantError(f"no commit within {LIVENESS_BOUND_MS} ms of virtual time")

    def _find(self, value: bytes, since: int) -> int:
        """The base offset of the committed batch (from index ``since``) holding ``value``."""
        for base, _nxt, data in self.committed[since:]:
            if value in data:
                return base
        return -1

    def _found(self, value: bytes) -> bool:
        return self._find(value, max(0, len(self.committed) - 16)) >= 0

    def _voter_sets(self) -> list[frozenset[int]]:
        """The committed voter set, then every newer set some replica has on its log."""
        sets = [self.committed_voters]
        for r in self.replicas.values():  # down replicas too: they come back with their log
            sets += [v for off, v in voter_sets_in(r.log.read(self.committed_end, 1 << 62))
                     if off >= self.committed_end and v not in sets]
        return sets

    def _phase_majority(self) -> None:
        """Cut off a minority (the old leader in it when possible): the rest must elect."""
        old = {r.node_id for r in self.replicas.values() if r.node is not None and r.node.is_leader}
        sets = self._voter_sets()
        if len(sets) > 1:
            # A removal in flight can leave the longest log with a replica that no longer
            # counts itself a voter while the others still need its vote (docs/RAFT.md, known
            # gaps): then every voter of every set stays connected.
            majority = set(frozenset().union(*sets))
        else:
            voters = sets[0]
            need = len(voters) // 2 + 1
            pool = sorted(voters - old) if len(voters - old) >= need else sorted(voters)
            majority = set(self.rng.sample(pool, need))
        every_voter = frozenset().union(*self._voter_sets())
        observers = [i for i in self.replicas if i not in every_voter]
        members = majority | {o for o in observers if self.rng.random() < 0.5}
        self._settle(members, {i: 0 if i in members else 1 for i in self.replicas})
        elect = self._await("a leader in the majority",
                            lambda: self._live_leader(majority) is not None)
        self._commit_through(majority)
        self.figures.majority_elect_ms = elect

    def _phase_healed(self) -> None:
        everyone = set(self.replicas)
        self._settle(everyone, {i: 0 for i in everyone})
        self._await("a leader after healing", lambda: self._live_leader(everyone) is not None)
        offset = self._commit_through(everyone)

        # A voter removed while it was off campaigning in a higher epoch never hears from the
        # leader again (docs/RAFT.md, known gaps): removed voters are not waited for.
        removed = self._ever_voters - self.committed_voters

        def caught_up() -> bool:
            return all(r.node is not None and r.node.high_watermark > offset
                       for r in self.replicas.values() if r.node_id not in removed)
        self.figures.heal_converge_ms = self._await("every replica caught up", caught_up)

    # -- invariants ------------------------------------------------------------------------
    def check(self) -> None:
        for r in self.replicas.values():
            epoch = r.store.state.epoch if r.store.state else 0
            if epoch < r.last_epoch:
                raise InvariantError(f"node {r.node_id} epoch went back {r.last_epoch} -> {epoch}")
            r.last_epoch = epoch
            node = r.node
            if node is None:
                continue
            if node.high_watermark < r.last_hw:
                raise InvariantError(f"node {r.node_id} high watermark went back")
            r.last_hw = node.high_watermark
            if node.state == RaftState.LEADER:
                self._check_leader(r, node)
            if node.high_watermark > self.committed_end:
                self._extend_committed(r, node.high_watermark)
        self._check_committed()

    def _check_leader(self, r: Replica, node: RaftNode) -> None:
        seen = self.leaders.setdefault(node.epoch, r.node_id)
        if seen != r.node_id:
            raise InvariantError(f"two leaders in epoch {node.epoch}: {seen} and {r.node_id}")
        if len(self.leaders) != self.figures.elections:
            self.figures.elections = len(self.leaders)
            if self.figures.first_elect_ms < 0:
                self.figures.first_elect_ms = self.now
            if r.log.end_offset < self.committed_end:
                raise InvariantError(f"leader {r.node_id} of epoch {node.epoch} misses "
                                     f"committed entries below {self.committed_end}")

    def _batches(self, r: Replica) -> list[tuple[int, int, bytes]]:
        """(base, next, bytes) of the replica's snapshot batches and log batches."""
        out: list[tuple[int, int, bytes]] = []
        snap = r.log.snapshot()
        if snap is not None:
            parsed = self._parsed_snapshots.get(snap[0])
            if parsed is None or parsed[0] is not snap[1]:
                data = snap[1]
                parsed = (data, [(h.base_offset, h.next_offset, data[pos:pos + h.size])
                                 for pos, h in iter_headers(data)])
                self._parsed_snapshots[snap[0]] = parsed
            out += parsed[1]
        out += [(b, n, d) for b, n, _e, d in r.log.batches()]
        return out

    def _extend_committed(self, r: Replica, hw: int) -> None:
        for base, nxt, data in self._batches(r):
            if base < self.committed_end:
                continue
            if base != self.committed_end or nxt > hw:
                break
            self.committed.append((base, nxt, data))
            for _off, voters in voter_sets_in(data):
                self.committed_voters = voters
                self._ever_voters |= voters
                self.figures.voter_changes += 1
            self._index[base] = (nxt, data)
            self.committed_end = nxt
            self.figures.commits += 1
        if self.committed_end != hw:
            raise InvariantError(f"node {r.node_id} reports high watermark {hw} but its log "
                                 f"holds committed batches only to {self.committed_end}")

    def _check_committed(self) -> None:
        """Below its own high watermark every replica holds exactly the committed batches, and
        no majority of the voters can be formed without a replica holding all of them."""
        index = self._index
        holders: set[int] = set()
        for r in self.replicas.values():
            key = (r.log.version, self.committed_end, r.last_hw)
            if r.checked != key:
                r.checked = key
                r.durable = int(self._agreed_to(r, index) >= self.committed_end)
            if r.durable:
                holders.add(r.node_id)
        # Every majority of the committed voter set must contain a replica holding every
        # committed batch durably, so any leader it elects has them. (While a KIP-853 change
        # is in flight the leader counts the new set; single-server changes keep every old
        # and new majority overlapping, which is what this checks.)
        voters = self.committed_voters
        if len(voters - holders) >= len(voters) // 2 + 1:
            raise InvariantError(f"committed offset {self.committed_end} durable on "
                                 f"{sorted(holders)} only, voters {sorted(voters)}")

    def _agreed_to(self, r: Replica, index: dict[int, tuple[int, bytes]]) -> int:
        """How far the replica's flushed log holds the committed batches (raises where a batch
        below its own high watermark differs)."""
        agreed = 0
        limit = min(r.last_hw, self.committed_end)
        flushed = r.log.flushed_end_offset
        for base, nxt, data in self._batches(r):
            if base >= self.committed_end:
                break
            if index.get(base) != (nxt, data):
                if nxt <= limit:
                    raise InvariantError(f"node {r.node_id} (hw {r.last_hw}) disagrees with the "
                                         f"committed batch at offset {base}")
                break
            if nxt <= flushed:
                agreed = nxt
        return agreed


def percentile(values: list[int], q: float) -> int:
    if not values:
        return -1
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summarize(runs: list[Figures]) -> dict[str, int]:
    """The figures of many seeds: sums and the percentiles of the election times."""
    out: dict[str, int] = {"seeds": len(runs)}
    for key in ("elections", "commits", "messages", "drops", "duplicates", "crashes",
                "partitions", "snapshots", "snapshot_installs", "voter_changes", "resignations",
                "truncations", "events"):
        out[key] = sum(getattr(f, key) for f in runs)
    for key in ("first_elect_ms", "majority_elect_ms", "heal_converge_ms"):
        vals = [getattr(f, key) for f in runs if getattr(f, key) >= 0]
        out[key + "_p50"] = percentile(vals, 0.50)
        out[key + "_p99"] = percentile(vals, 0.99)
        out[key + "_max"] = max(vals) if vals else -1
    return out


def run_seed(seed: int, trace: Callable[[str], None] | None = None) -> Figures:
    return Simulation(seed, trace=trace).run()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, help="replay one seed")
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--trace", action="store_true")
    args = ap.parse_args(argv)
    if args.seed is not None:
        print(run_seed(args.seed, print if args.trace else None))
        return 0
    runs, failed = [], []
    for seed in range(args.start, args.start + args.seeds):
        try:
            runs.append(run_seed(seed))
        except InvariantError as e:
            failed.append(seed)
            print(f"seed {seed} FAILED: {e}")
    for k, v in summarize(runs).items():
        print(f"{k:28} {v}")
    print(f"{'failed':28} {len(failed)} {failed[:20]}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
