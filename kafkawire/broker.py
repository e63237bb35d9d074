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
from kafkawire.config import TOPIC_CONFIGS, BrokerConfig
from kafkawire.config_entries import connection_limits, effective_topic_values
from kafkawire.config_resources import group_consumer_settings
from kafkawire.coordinator_runtime import GROUP_TOPIC, TXN_TOPIC, CoordinatorRuntime
from kafkawire.group_coordinator import group_version_records, make_shard_factory
from kafkawire.log_cleaner import LogCleanerService
from kafkawire.log_flusher import LogFlusher
from kafkawire.metadata_log import METADATA_TOPIC, MetadataQuorum
from kafkawire.metrics import BrokerMetrics
from kafkawire.purgatory import AppendNotifier
from kafkawire.retention import run_producer_expiration, run_retention
from kafkawire.server import Connection, RequestContext, Server
from kafkawire.storage import format_or_check
from kafkawire.telemetry import TelemetryManager
from kafkawire.txn_coordinator import TxnCoordinator, transaction_version_records
from kraft import controller
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
        self.notifier = AppendNotifier()
        self.metrics = BrokerMetrics()
        self.telemetry = TelemetryManager()
        self.metrics.client_telemetry = self.telemetry.series
        self.server = Server(self.dispatch, config.socket_request_max_bytes, self.on_disconnect,
                             self.metrics)
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
        """A producer id from the block this broker reserved in the metadata log."""
        if self._pid_next >= self._pid_end:
            async with self.metadata_lock:
                start, records = controller.allocate_producer_ids(
                    self.image, self.node_id, self.quorum.log_end_offset() if self.quorum else 0
                )
                await self.commit_metadata(records)
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
        assert self.logs is not None
        return self.logs.get(topic, partition)

    # ---- metadata operations (through the quorum) --------------------------------------
    async def commit_metadata(self, records: list[Any]) -> None:
        assert self.quorum is not None
        if records:
            await self.quorum.append(records)
            self.sync_logs_with_image()

    def sync_logs_with_image(self) -> None:
        """Create local logs for partitions led here; delete logs of removed topics."""
        assert self.logs is not None
        img = self.image
        wanted: set[tuple[str, int]] = set()
        for topic in img.topics.values():
            for p in topic.partitions.values():
                if self.node_id in p.replicas:
                    wanted.add((topic.name, p.partition))
        have = {tp for tp, _log in self.logs}
        for topic_name, index in sorted(wanted - have):
            self.logs.get_or_create(topic_name, index, now_ms(), self.topic_log_config(topic_name))
        # As Kafka's Partition.makeLeader: the leader epoch starts at the log end offset, so
        # OffsetForLeaderEpoch answers (epoch, LEO) for the current epoch even on an empty log.
        for topic_name, index in wanted:
            p = img.topics[topic_name].partitions[index]
            plog = self.logs.get(topic_name, index)
            if plog is not None and p.leader == self.node_id:
                latest = plog.leader_epochs.latest_epoch()
                if latest is None or latest < p.leader_epoch:
                    plog.leader_epochs.assign(p.leader_epoch, plog.log_end_offset)
        for topic_name, index in sorted(have - wanted):
            if topic_name == "__cluster_metadata":
                continue
            self.logs.delete(topic_name, index)
            self.notifier.notify(topic_name, index)
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
        if not self.started.is_set():
            # The listeners open before this node's registration is committed (its endpoint
            # needs the bound port); like Kafka, requests are processed only once it is, so
            # nothing sees a cluster without brokers (CreateTopics: "0 broker(s) registered").
            await self.started.wait()
        handler = REGISTRY[ctx.api_key]
        return await handler.handle(self, ctx, request)

    def on_disconnect(self, conn: Connection) -> None:
        for hook in self.disconnect_hooks:
            hook(conn)

    # ---- lifecycle ----------------------------------------------------------------------
    def open_storage(self) -> None:
        cfg = self.config
        dirs = cfg.log_dirs
        if cfg.metadata_log_dir not in dirs:
            dirs = [*dirs, cfg.metadata_log_dir]
        self.cluster_id = format_or_check(dirs, self.node_id, cfg.values.get("cluster.id"))
        defaults = LogConfig.from_properties(
            {name: self.config.topic_default(name)[0] for name in TOPIC_CONFIGS}
        )
        self.logs = LogManager.open(
            cfg.log_dirs[0], now_ms(), default_config=defaults,
            config_for=self._log_config_for,
        )
        self.flusher = LogFlusher(self.logs, cfg, now_ms)
        self.cleaner = LogCleanerService(self)
        self.quorum = MetadataQuorum(self.logs, self.node_id, now_ms)
        self.quorum.load()
        if not self.image.features:
            self.quorum.append_sync(
                controller.bootstrap_records(int(self.config["min.insync.replicas"]))
            )
        features = group_version_records(self.config, self.image)
        features += transaction_version_records(self.image)
        if features:
            self.quorum.append_sync(features)
        for topic in self.image.topics:
            self.logs.update_config(topic, self.topic_log_config(topic))
        self.sync_logs_with_image()

    def _log_config_for(self, topic: str) -> LogConfig:
        if topic == METADATA_TOPIC:  # no retention, no cleaning: it is replayed whole
            return LogConfig(segment_bytes=64 * 1024 * 1024, retention_ms=-1, retention_bytes=-1)
        if self.quorum is None:
            return LogConfig.from_properties(
                {name: self.config.topic_default(name)[0] for name in TOPIC_CONFIGS}
            )
        return self.topic_log_config(topic)

    def register(self) -> list[Any]:
        cfg = self.config
        endpoints = []
        for lst in cfg.advertised_listeners:
            port = self.bound_ports.get(lst.name, lst.port) if lst.port == 0 else lst.port
            proto = SECURITY_PROTOCOLS.get(lst.name, 0)
            endpoints.append((lst.name, lst.host, port, proto))
        assert self.quorum is not None
        epoch = self.quorum.log_end_offset()
        return controller.register_broker(
            self.node_id, self.incarnation_id, epoch, endpoints, None, SUPPORTED_FEATURES
        )

    async def run(self, task_status: trio.TaskStatus[Broker] = trio.TASK_STATUS_IGNORED) -> None:
        self.metrics.idle.start()
        self.open_storage()
        try:
            async with trio.open_nursery() as nursery:
                for lst in self.config.broker_listeners:
                    listeners = await trio.open_tcp_listeners(lst.port, host=lst.host)
                    port = listeners[0].socket.getsockname()[1]
                    self.bound_ports[lst.name] = port
                    await nursery.start(self.server.serve_listener, lst.name, listeners)
                    log.info(
                        "kafkawire node %s listening on %s:%s (%s), cluster id %s, data in %s",
                        self.node_id, lst.host, port, lst.name, self.cluster_id,
                        self.config.log_dirs[0],
                    )
                await self.commit_metadata(self.register())
                for runtime in self.coordinators_by_key_type.values():
                    await nursery.start(runtime.serve)
                await nursery.start(self.txn_coordinator.serve)
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
