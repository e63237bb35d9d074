"""Consumer groups with every stock client family, each member a process of its own.

Groups of 1-5 members of confluent-kafka (librdkafka), kafka-python and aiokafka on a
multi-partition topic: after every rebalance each partition is owned by exactly one member;
members joining, leaving (SIGTERM: LeaveGroup) and crashing (kill -9: no LeaveGroup, evicted
at the session timeout) lead to a reassignment; consumed records resume from the committed
offsets. The broker runs with ``group.initial.rebalance.delay.ms=0`` and a low
``group.min.session.timeout.ms`` so the tests stay quick.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from group_helpers import create_topic, group_broker, produce, wait_until

from kafkawire.tools.testing import BrokerProcess

HERE = Path(__file__).resolve().parent
FAMILIES = ["confluent", "kafka-python", "aiokafka"]
SESSION_MS = 3000
#: generous: eviction needs the session timeout, then a rebalance of every member
REBALANCE_S = 45.0


@pytest.fixture(scope="module")
def gbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from group_broker(tmp_path_factory.mktemp("kwg") / "data")


class Member:
    def __init__(self, family: str, bootstrap: str, group: str, topic: str, *extra: str) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = str(HERE.parent) + os.pathsep + env.get("PYTHONPATH", "")
        log_dir = os.environ.get("KAFKAWIRE_MEMBER_LOG_DIR")  # see group_member.py
        err: Any = subprocess.DEVNULL
        if log_dir:
            err = open(Path(log_dir) / f"{family}-{'-'.join(extra)}-{time.time():.3f}.log", "wb")
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "group_member.py"), family, bootstrap, group, topic,
             "--session-ms", str(SESSION_MS), *extra],
            stdout=subprocess.PIPE, stderr=err, text=True, env=env,
        )
        if log_dir:
            err.close()
        self.events: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if isinstance(ev, dict):
                ev["t"] = time.time()  # when the test saw it (to match with broker logs)
            with self.lock:
                self.events.append(ev)

    @property
    def assigned(self) -> list[int] | None:
        with self.lock:
            for ev in reversed(self.events):
                if "assigned" in ev:
                    return list(ev["assigned"])
        return None

    def messages(self) -> list[tuple[int, int, str]]:
        with self.lock:
            return [tuple(ev["m"]) for ev in self.events if "m" in ev]  # type: ignore[misc]

    def revocations(self) -> list[list[int]]:
        with self.lock:
            return [ev["revoked"] for ev in self.events if "revoked" in ev]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def terminate(self, timeout_s: float = 30) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.reader.join(5)

    def kill9(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.reader.join(5)


def partitioned(members: list[Member], partitions: int) -> bool:
    """Every partition owned by exactly one live member."""
    owned: list[int] = []
    for m in members:
        a = m.assigned
        if a is None:
            return False
        owned += a
    return sorted(owned) == list(range(partitions))


def assignments(members: list[Member]) -> list[list[int] | None]:
    return [m.assigned for m in members]


@pytest.mark.parametrize(
    "family,protocol", [(f, "classic") for f in FAMILIES] + [("confluent", "consumer")]
)
def test_group_join_leave_crash_reassigns(gbroker: BrokerProcess, family: str, protocol: str) -> None:
    """Classic protocol for each family; KIP-848 (``group.protocol=consumer``) for librdkafka."""
    parts = 6
    topic = f"grp-{family}-{protocol}-{uuid.uuid4().hex[:6]}"
    group = f"g-{topic}"
    create_topic(gbroker.bootstrap, topic, parts)
    produce(gbroker.bootstrap, topic, [f"v{i}" for i in range(60)], parts)
    members: list[Member] = []
    try:
        for n in range(1, 4):
            members.append(Member(family, gbroker.bootstrap, group, topic, "--protocol", protocol))
            wait_until(lambda: partitioned(members, parts) and all(m.assigned for m in members),
                       REBALANCE_S, f"{n} member(s) to share {parts} partitions",
                       lambda: assignments(members))
        if protocol == "consumer":  # incremental: the first member never gave up everything
            assert all(len(r) < parts for r in members[0].revocations() if r)
        # every record consumed exactly once across the group so far (commits after each poll)
        wait_until(lambda: len({m for x in members for m in x.messages()}) >= 60, REBALANCE_S,
                   "all 60 records consumed")
        # crash: kill -9, no LeaveGroup; the survivors get its partitions after the session
        crashed = members.pop(0)
        crashed.kill9()
        wait_until(lambda: partitioned(members, parts), REBALANCE_S,
                   "the survivors to take over after the session timeout",
                   lambda: assignments(members))
        # graceful leave
        leaving = members.pop(0)
        leaving.terminate()
        wait_until(lambda: partitioned(members, parts) and members[0].assigned == list(range(parts)),
                   REBALANCE_S, "the last member to own everything", lambda: assignments(members))
        # new records go to the remaining member only, from the committed positions
        produce(gbroker.bootstrap, topic, [f"w{i}" for i in range(12)], parts)
        wait_until(lambda: sum(1 for _p, _o, v in members[0].messages() if v.startswith("w")) >= 12,
                   REBALANCE_S, "the new records")
        values = [v for m in (crashed, leaving, *members) for _p, _o, v in m.messages()]
        assert set(values) >= {f"v{i}" for i in range(60)} | {f"w{i}" for i in range(12)}
    finally:
        for m in members:
            m.terminate()


@pytest.mark.parametrize("family", FAMILIES)
def test_group_of_five(gbroker: BrokerProcess, family: str) -> None:
    parts = 10
    topic = f"grp5-{family}-{uuid.uuid4().hex[:6]}"
    create_topic(gbroker.bootstrap, topic, parts)
    members = [Member(family, gbroker.bootstrap, f"g-{topic}", topic, "--strategy", "roundrobin")
               for _ in range(5)]
    try:
        wait_until(lambda: partitioned(members, parts) and all(m.assigned for m in members),
                   REBALANCE_S, "5 members sharing 10 partitions", lambda: assignments(members))
        assert sorted(len(m.assigned or []) for m in members) == [2, 2, 2, 2, 2]
    finally:
        for m in members:
            m.terminate()


def test_cooperative_sticky_keeps_untouched_partitions(gbroker: BrokerProcess) -> None:
    parts = 6
    topic = f"coop-{uuid.uuid4().hex[:6]}"
    group = f"g-{topic}"
    create_topic(gbroker.bootstrap, topic, parts)
    first = Member("confluent", gbroker.bootstrap, group, topic, "--strategy", "cooperative-sticky")
    members = [first]
    try:
        wait_until(lambda: first.assigned == list(range(parts)), REBALANCE_S, "first member owns all")
        members.append(Member("confluent", gbroker.bootstrap, group, topic, "--strategy", "cooperative-sticky"))
        wait_until(lambda: partitioned(members, parts) and all(m.assigned for m in members),
                   REBALANCE_S, "two members sharing", lambda: assignments(members))
        # incremental: the first member only gave up what moved, never everything at once
        revoked = first.revocations()
        assert revoked, "no incremental revocation seen"
        assert all(len(r) < parts for r in revoked), revoked
        kept = set(first.assigned or [])
        assert kept and kept <= set(range(parts))
    finally:
        for m in members:
            m.terminate()


@pytest.mark.parametrize("family", ["confluent", "kafka-python"])
def test_static_member_restart_without_rebalance(gbroker: BrokerProcess, family: str) -> None:
    parts = 4
    topic = f"static-{family}-{uuid.uuid4().hex[:6]}"
    group = f"g-{topic}"
    create_topic(gbroker.bootstrap, topic, parts)
    # a static member must be back within its session timeout: give the restart room
    slow = ("--session-ms", "15000")
    a = Member(family, gbroker.bootstrap, group, topic, "--instance", "inst-a", *slow)
    b = Member(family, gbroker.bootstrap, group, topic, "--instance", "inst-b", *slow)
    members = [a, b]
    try:
        wait_until(lambda: partitioned(members, parts) and all(m.assigned for m in members),
                   REBALANCE_S, "two static members sharing", lambda: assignments(members))
        before_b = b.assigned
        revocations_b = len(b.revocations())
        a.kill9()  # a static member leaves no LeaveGroup behind anyway
        a2 = Member(family, gbroker.bootstrap, group, topic, "--instance", "inst-a", *slow)
        members = [a2, b]
        wait_until(lambda: partitioned(members, parts) and all(m.assigned for m in members),
                   REBALANCE_S, "the static member back", lambda: assignments(members))
        time.sleep(1.0)
        # no rebalance: b kept its partitions and was never asked to give them up
        assert b.assigned == before_b
        assert len(b.revocations()) == revocations_b
    finally:
        for m in members:
            m.terminate()
