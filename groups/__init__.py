"""groups: the group coordinator, sans-I/O (no clock, no I/O; ``now_ms`` is passed in), split by
job as Kafka's group coordinator is. Layout, one line per module:

* ``shard.py``: ``GroupShard``, the runtime's shard of one ``__consumer_offsets`` partition; a
  facade that composes the jobs below and routes requests, records and timers to them.
* ``group_type.py``: ``GroupType``, what every group type offers offsets/admin/the shard
  (classic and consumer now; streams, KIP-1071, is the next one: a new module, not new branches).
* ``states.py``: every state Enum with its one transition table (classic groups, consumer groups,
  KIP-848 members) and the theory of each machine.
* ``records.py``: the coordinator records we write, in Kafka's schemas (types, builders).
* ``replay.py``: ``Replayer``, the only writer of state from records (offsets, classic groups
  while loading, consumer groups always).
* ``offsets.py``: ``OffsetStore``, committed and pending transactional offsets (replayed).
* ``offset_manager.py``: ``OffsetManager``, OffsetCommit/TxnOffsetCommit validation,
  OffsetFetch, OffsetDelete, retention, offsets of deleted topics.
* ``classic.py``: the classic group model (``ClassicGroup``, ``ClassicMember``; join/sync errors).
* ``classic_rebalance.py``: ``ClassicRebalance``, the join and sync phases and their timers.
* ``classic_protocol.py``: ``ClassicGroups``, JoinGroup/SyncGroup/Heartbeat/LeaveGroup of classic
  groups, and their answers to offsets and admin.
* ``consumer_group.py``: the KIP-848 model (``ConsumerGroup``, ``ConsumerMember``) and
  assignment set operations.
* ``consumer.py``: ``ConsumerGroups``, the KIP-848 protocol: ConsumerGroupHeartbeat, leave,
  fencing, member timers, ConsumerGroupDescribe, answers to offsets and admin.
* ``reconcile.py``: a member's reconciliation towards its target (CurrentAssignmentBuilder).
* ``target.py``: the target assignment (subscriptions, metadata hash, assignor choice).
* ``assignors.py``: the server-side assignors, ``uniform`` and ``range``.
* ``regexes.py``: regular-expression subscriptions, resolved asynchronously.
* ``consumer_classic.py``: ``ClassicMembers``, classic-protocol members of a consumer group.
* ``migration.py``: ``Migration``, conversions between classic and consumer groups.
* ``admin.py``: ``GroupAdmin``, ListGroups, DescribeGroups, ConsumerGroupDescribe, DeleteGroups.
* ``consumer_protocol.py``: the embedded consumer protocol bytes (subscription, assignment).
* ``config.py``: ``GroupConfig``, limits and timeouts with their Kafka keys.
* ``timers.py``: ``Timers``, keyed deadlines.
* ``share_group.py``, ``share_partition.py``, ``share_state.py``: KIP-932 share groups (membership,
  share partitions, the share-group state shard; served by kafkawire/share_coordinator.py).
"""
