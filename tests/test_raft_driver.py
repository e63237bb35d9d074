"""The Raft driver's I/O side (kafkawire/metadata/raft_driver.py): connections to the other voters."""

from __future__ import annotations

import random

import trio

from kafkawire.metadata.raft_driver import RaftDriver
from kraft.raft.log import MemoryQuorumStateStore, MemoryRaftLog
from kraft.raft.node import RaftNode


def test_a_voter_that_moved_gets_a_new_connection() -> None:
    """A VotersRecord naming another controller listener for a voter (UpdateRaftVoter after a
    restart on a new port) replaces the cached connection to its old one. A kept connection
    failed for ever: when that voter was elected, no follower could fetch from it, it resigned
    at each check-quorum and, its log being the longest, won every next election (seen as a
    remove-controller that never succeeded in tests/test_add_controller.py under load)."""
    node = RaftNode(1, frozenset({1, 2, 3}), "kw-test-cluster-id-0", MemoryRaftLog(),
                    MemoryQuorumStateStore(), random.Random(1), 0)
    peers = {2: ("127.0.0.1", 9001), 3: ("127.0.0.1", 9002)}
    driver = RaftDriver(node, peers, lambda: 0, lambda: None)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            driver._nursery = nursery
            first = driver._client(2, True)
            assert first is not None and (first.host, first.port) == ("127.0.0.1", 9001)
            assert driver._client(2, True) is first  # kept while the address holds
            driver.peers[2] = ("127.0.0.1", 9011)
            moved = driver._client(2, True)
            assert moved is not None and moved is not first
            assert (moved.host, moved.port) == ("127.0.0.1", 9011)
            assert driver._client(2, True) is moved
            other = driver._client(3, False)
            assert other is not None and other.port == 9002
            driver._nursery = None

    trio.run(main)
