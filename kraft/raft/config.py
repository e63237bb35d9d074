"""Timing and size settings of the Raft state machine, by their Kafka names (milliseconds)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RaftConfig:
    # controller.quorum.election.timeout.ms: base election timeout; each wait is randomized
    # uniformly in [timeout, 2 * timeout) as Kafka does.
    election_timeout_ms: int = 1000
    # controller.quorum.fetch.timeout.ms: a follower that hears nothing from the leader for
    # this long starts an election (a voter) or looks for a leader again (an observer).
    fetch_timeout_ms: int = 2000
    # controller.quorum.election.backoff.max.ms: upper bound of the random backoff after a
    # lost election (binary exponential from RETRY_BACKOFF_BASE_MS).
    election_backoff_max_ms: int = 1000
    # controller.quorum.request.timeout.ms: an unanswered request is forgotten after this.
    request_timeout_ms: int = 2000
    # controller.quorum.retry.backoff.ms: wait after a failed request before retrying.
    retry_backoff_ms: int = 20
    # How long the leader parks a Fetch with nothing new (Kafka's fixed fetchMaxWaitMs).
    fetch_max_wait_ms: int = 500
    # Bytes of records per Fetch answer and per FetchSnapshot chunk.
    fetch_max_bytes: int = 8 * 1024 * 1024
    snapshot_chunk_bytes: int = 1024 * 1024
    # The kraft.version feature: 0 = a static quorum (controller.quorum.voters; strangers are
    # refused, the voter set never changes), 1 = KIP-853 voters in VotersRecords.
    kraft_version: int = 0
    # This replica's own controller endpoints (listener name, host, port), the first one on
    # the listener its peers use (controller.listener.names' first). A voter whose entry in
    # the VotersRecord differs tells the leader with UpdateRaftVoter (KIP-853); () = never.
    listeners: tuple[tuple[str, str, int], ...] = ()

    @property
    def check_quorum_timeout_ms(self) -> int:
        """A leader not fetched from by a majority for this long resigns (1.5 fetch timeouts)."""
        return self.fetch_timeout_ms * 3 // 2


RETRY_BACKOFF_BASE_MS = 50
