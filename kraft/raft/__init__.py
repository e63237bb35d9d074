"""KRaft (KIP-595/630/996/853) as a sans-I/O state machine; see docs/RAFT.md."""
