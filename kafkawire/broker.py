"""The broker: owns config, storage, the metadata image and the background tasks.

``Broker.run()`` formats storage on first start, opens the logs (recovering them), replays the
``__cluster_metadata`` log into the image, registers this node, starts the listeners and then
serves until cancelled. Handlers in ``kafkawire.apis`` read ``broker.image`` (immutable) and call
the broker's small set of mutating operations, which go through the metadata quorum.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

import trio

from kafkawire.apis import REGISTRY
from kafkawire.bootstrap import first_start_records, read_bootstrap
from kafkawire.broker_lifecycle import BrokerLifecycleManager, LocalControllerChannel
from kafkawire.config import TOPIC_CONFIGS, BrokerConfig
from kafkawire.config_entries import connection_limits, effective_topic_values
from kafkawire.config_resources import group_consumer_settings
from kafkawire.controller_service import ControllerService
from kafkawire.coordinator_runtime import GROUP_TOPIC, TXN_TOPIC, CoordinatorRuntime
from kafkawire.group_coordinator import group_version_records, make_shard_factory
from kafkawire.log_cleaner import LogCleanerService
from kafkawire.log_flusher import LogFlusher
from kafkawire.metadata_log import METADATA_TOPIC, MetadataQuorum, metadata_log_config
from kafkawire.metadata_snapshots import SnapshotSettings
from kafkawire.purgatory import AppendNotifier
from kafkawire.quorum_config import parse_voters
from kafkawire.replica_manager import ReplicaManager
from kafkawire.retention import run_producer_expiration, run_retention
from kafkawire.server import Connection, RequestContext, Server
from kafkawire.storage import StorageError, format_or_check
from kafkawire.txn_coordinator import TxnCoordinator, transaction_version_records
from kraft import controller
from kraft.cluster_control import Registration
from kraft.image import MetadataImage
from log.config import LogConfig
from log.manager import LogManager
from log.partition_log import PartitionLog
from protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("kafkawire.broker")

SECURITY_PROTOCOLS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}

# feature name -> (min, max) we support. transaction.version 2 = KIP-890 part 2 (finalized at
# start, kafkawire/txn_coordinator.py); group.version 1 = KIP-848 consumer groups
# (groups/consumer.py).
SUPPORTED_FEATURES: dict[str, tuple[int, int]] = {
    "metadata.version": (7, controller.METADATA_VERSION_LEVEL),
    "kraft.version": (0, 0),
    "eligible.leader.replicas.version": (0, controller.ELR_VERSION_LEVEL),
    "group.version": (0, 1),
    "share.version": (0, 0),
    "streams.version": (0, 0),
    "transaction.version": (0, 2),
}


def now_ms() -> int:
    return int(time.time() * 1000)


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self.cluster_id = ""
        self.incarnation_id = uuid.uuid4()
        self.logs: LogManager | None = None
        self.flusher: LogFlusher | None = None
        self.cleaner: LogCleanerService | None = None
        self.quorum: MetadataQuorum | None = None
        self.replicas: ReplicaManager | None = None
        self.notifier = AppendNotifier()
        self.server = Server(self.dispatch, config.socket_request_max_bytes, self.on_disconnect)
        self.server.connection_limits = lambda: connection_limits(self.config, self.image)
        self.bound_ports: dict[str, int] = {}
        self.started = trio.Event()
        self.start_time_ms = now_ms()
        self.disconnect_hooks: list[Any] = []
        self.metadata_lock = trio.Lock()
        self._pid_next = 0
        self._pid_end = 0
        # Coordinator runtimes (docs/COORDINATORS.md), one per internal topic. A coordinator
        # plugs in by setting its runtime's ``shard_factory`` before ``run``.
        self.group_runtime = CoordinatorRuntime(self, GROUP_TOPIC, make_shard_factory(
            config, lambda gid: group_consumer_settings(self.config, self.image, gid)))
        self.txn_runtime = CoordinatorRuntime(self, TXN_TOPIC)
        self.coordinators_by_key_type = {
            GROUP_TOPIC.key_type: self.group_runtime, TXN_TOPIC.key_type: self.txn_runtime
        }
        self.txn_coordinator = TxnCoordinator(self)
        # the active controller's broker-facing side (this node: single-voter quorum) and this
        # broker's registration with it (kafkawire/broker_lifecycle.py)
        self.controller = ControllerService(self, now_ms)
        self.lifecycle = BrokerLifecycleManager(
            LocalControllerChannel(self.controller), self.registration,
            lambda: self.image.offset, int(config["broker.heartbeat.interval.ms"]),
            int(config["initial.broker.registration.timeout.ms"]))
        self.server.controller_listeners = {lst.name for lst in config.controller_listeners}

    # ---- state --------------------------------------------------------------------------
    @property
    def image(self) -> MetadataImage:
        assert self.quorum is not None
        return self.quorum.image

    def supported_features(self) -> dict[str, tuple[int, int]]:
        return SUPPORTED_FEATURES

    def topic_log_config(self, topic: str) -> LogConfig:
        return LogConfig.from_properties(self.effective_topic_configs(topic))

    async def next_producer_id(self) -> int:
        """A producer id from the block this broker got from the controller
        (AllocateProducerIds)."""
        if self._pid_next >= self._pid_end:
            lc = self.lifecycle
            start = await lc.channel.allocate_producer_ids(self.node_id, lc.broker_epoch)
            self._pid_next, self._pid_end = start, start + controller.PRODUCER_ID_BLOCK_SIZE
        pid = self._pid_next
        self._pid_next += 1
        return pid

    def effective_topic_configs(self, topic: str) -> dict[str, Any]:
        """Typed topic configs: topic override, dynamic broker configs, server.properties."""
        return effective_topic_values(self.config, self.image, self.image.topic_config(topic))

    def refresh_log_configs(self, topics: list[str] | None = None) -> None:
        """Re-derive the LogConfig of the local logs of ``topics`` (all when None)."""
        assert self.logs is not None
        names = {tp[0] for tp, _log in self.logs if tp[0] != "__cluster_metadata"}
        for name in sorted(names if topics is None else names & set(topics)):
            self.logs.update_config(name, self.topic_log_config(name))

    def partition_log(self, topic: str, partition: int) -> PartitionLog | None:
        """The log of a hosted replica, for inspection only (producer state, sizes): appends,
        reads and the high watermark go through ``self.replicas``."""
        assert self.replicas is not None
        p = self.replicas.partition(topic, partition)
        return p.log if p is not None else None

    # ---- metadata operations (through the quorum) --------------------------------------
    async def commit_metadata(self, records: list[Any]) -> None:
        assert self.quorum is not None
        if records:
            await self.quorum.append(records)
            self.sync_logs_with_image()

    def sync_logs_with_image(self) -> None:
        """Host the partitions the image places here, each as leader or follower (the replica
        manager creates and deletes their logs), then let the coordinators follow."""
        assert self.replicas is not None
        self.replicas.apply_image(self.image, now_ms(), self.topic_log_config)
        for runtime in self.coordinators_by_key_type.values():
            runtime.sync()

    async def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, str] | None = None,
        assignments: dict[int, list[int]] | None = None,
    ) -> None:
        async with self.metadata_lock:
            records = controller.create_topic(
                self.image, name, num_partitions, replication_factor, configs or {},
                assignments=assignments,
            )
            await self.commit_metadata(records)

    async def auto_create_topic(self, name: str) -> ErrorCode:
        """Auto-creation on Metadata/FindCoordinator; returns the error for that topic."""
        try:
            await self.create_topic(
                name, self.config.num_partitions, self.config.default_replication_factor
            )
        except KafkaError as e:
            if e.code == ErrorCode.TOPIC_ALREADY_EXISTS:
                return ErrorCode.NONE
            return e.code
        return ErrorCode.NONE

    # ---- request dispatch ----------------------------------------------------------------
    async def dispatch(self, ctx: RequestContext, request: Any) -> Any:
        if not self.started.is_set() and ctx.connection.listener_type != "controller":
            # The listeners open before this node's registration is committed (its endpoint
            # needs the bound port); like Kafka, requests are processed only once it is, so
            # nothing sees a cluster without brokers (CreateTopics: "0 broker(s) registered").
            # The controller listener serves at once: brokers register through it.
            await self.started.wait()
        handler = REGISTRY[ctx.api_key]
        return await handler.handle(self, ctx, request)

    def on_disconnect(self, conn: Connection) -> None:
        for hook in self.disconnect_hooks:
            hook(conn)

    # ---- lifecycle ----------------------------------------------------------------------
    def open_storage(self) -> None:
        cfg = self.config
        self.cluster_id = format_or_check(cfg, now_ms())
        self.controller.open(self.cluster_id)
        defaults = LogConfig.from_properties(
            {name: self.config.topic_default(name)[0] for name in TOPIC_CONFIGS}
        )
        self.logs = LogManager.open(
            cfg.log_dirs[0], now_ms(), default_config=defaults,
            config_for=self._log_config_for,
        )
        self.flusher = LogFlusher(self.logs, cfg, now_ms)
        self.cleaner = LogCleanerService(self)
        self.replicas = ReplicaManager(self.logs, self.node_id, self.notifier)
        self.quorum = MetadataQuorum(
            self.replicas, self.node_id, now_ms, SnapshotSettings.from_config(cfg.values),
            self._metadata_log_config(),
            tuple(v.node_id for v in parse_voters(str(cfg.values["controller.quorum.voters"]))),
        )
        self.quorum.load()
        self._check_single_voter()
        if not self.image.features:
            min_isr = int(self.config["min.insync.replicas"])
            boot = read_bootstrap(cfg.metadata_log_dir)
            self.quorum.append_sync(
                controller.bootstrap_records(min_isr) if boot is None
                else first_start_records(boot, min_isr)
            )
        features = group_version_records(self.config, self.image)
        features += transaction_version_records(self.image)
        if features:
            self.quorum.append_sync(features)
        for topic in self.image.topics:
            self.logs.update_config(topic, self.topic_log_config(topic))
        self.sync_logs_with_image()

    def _check_single_voter(self) -> None:
        """Until the Raft driver lands (kraft/raft/), this node commits metadata alone: a
        quorum with any other voter must not start, or each node would commit on its own."""
        assert self.quorum is not None
        voters = set(self.quorum.static_voters)
        if self.quorum.voters is not None:
            voters |= {v.voter_id for v in self.quorum.voters.voters}
        if voters - {self.node_id}:
            raise StorageError(
                f"the KRaft quorum has voters {sorted(voters)}, but this build of kafkawire "
                f"runs a single-voter quorum of this node ({self.node_id}) only")

    def _metadata_log_config(self) -> LogConfig:
        cfg = self.config
        return metadata_log_config(cfg.metadata_log_segment_bytes,
                                   int(cfg.values["metadata.log.segment.ms"]))

    def _log_config_for(self, topic: str) -> LogConfig:
        if topic == METADATA_TOPIC:  # no retention, no cleaning: snapshots clean it
            return self._metadata_log_config()
        if self.quorum is None:
            return LogConfig.from_properties(
                {name: self.config.topic_default(name)[0] for name in TOPIC_CONFIGS}
            )
        return self.topic_log_config(topic)

    def registration(self) -> Registration:
        """What this broker registers with the controller: advertised listeners (with the
        bound ports), rack, features, and the epoch of its last clean shutdown."""
        cfg = self.config
        endpoints = []
        for lst in cfg.advertised_listeners:
            port = self.bound_ports.get(lst.name, lst.port) if lst.port == 0 else lst.port
            proto = SECURITY_PROTOCOLS.get(lst.name, 0)
            endpoints.append((lst.name, lst.host, port, proto))
        assert self.logs is not None
        rack = cfg.values.get("broker.rack")
        return Registration(
            broker_id=self.node_id, cluster_id=self.cluster_id,
            incarnation_id=self.incarnation_id, endpoints=endpoints, features=SUPPORTED_FEATURES,
            rack=str(rack) if rack else None,
            previous_broker_epoch=self.logs.clean_shutdown_broker_epoch,
        )

    async def _open_listeners(self, nursery: trio.Nursery) -> None:
        for lst in [*self.config.broker_listeners, *self.config.controller_listeners]:
            listeners = await trio.open_tcp_listeners(lst.port, host=lst.host)
            port = listeners[0].socket.getsockname()[1]
            self.bound_ports[lst.name] = port
            await nursery.start(self.server.serve_listener, lst.name, listeners)
            log.info(
                "kafkawire node %s listening on %s:%s (%s), cluster id %s, data in %s",
                self.node_id, lst.host, port, lst.name, self.cluster_id,
                self.config.log_dirs[0],
            )

    async def controlled_shutdown(self) -> None:
        """Before stopping: let the controller move leadership away (SIGTERM)."""
        # bounded by broker.session.timeout.ms: past it the controller would fence us anyway
        timeout_ms = int(self.config["broker.session.timeout.ms"])
        if await self.lifecycle.controlled_shutdown(timeout_ms) and self.logs is not None:
            self.logs.broker_epoch = self.lifecycle.broker_epoch

    async def run(self, task_status: trio.TaskStatus[Broker] = trio.TASK_STATUS_IGNORED) -> None:
        self.open_storage()
        try:
            async with trio.open_nursery() as nursery:
                await self._open_listeners(nursery)
                await nursery.start(self.controller.run_session_expiry)
                await nursery.start(self.lifecycle.run)  # returns once registered, unfenced
                for runtime in self.coordinators_by_key_type.values():
                    await nursery.start(runtime.serve)
                await nursery.start(self.txn_coordinator.serve)
                assert self.quorum is not None
                await nursery.start(self.quorum.run_snapshots)
                assert self.flusher is not None and self.cleaner is not None
                await nursery.start(self.flusher.run)
                nursery.start_soon(run_retention, self)
                nursery.start_soon(run_producer_expiration, self)
                nursery.start_soon(self.cleaner.run)
                self.started.set()
                task_status.started(self)
        finally:
            self.close()

    def close(self) -> None:
        if self.logs is not None:
            try:
                self.logs.close()
            except Exception:
                log.exception("error closing logs")
            self.logs = None
