"""The broker: owns config, storage, the metadata image and the background tasks.

``Broker.run()`` formats storage on first start, opens the logs (recovering them), replays the
``__cluster_metadata`` log into the image, registers this node, starts the listeners and then
serves until cancelled. Handlers in ``kafkawire.apis`` read ``broker.image`` (immutable) and call
the broker's small set of mutating operations, which go through the metadata quorum.
"""

from __future__ import annotations

import hashlib
import logging
import math
import resource
import secrets
import time
import uuid
from pathlib import Path
from typing import Any

import trio

from groups.share_state import ShareStateShard
from kafkawire.apis import REGISTRY
from kafkawire.apis import alter_configs as _alter_configs
from kafkawire.apis import incremental_alter_configs as _incremental_alter_configs
from kafkawire.authorizer import Authorizer
from kafkawire.bootstrap import first_start_records, read_bootstrap
from kafkawire.broker_lifecycle import BrokerLifecycleManager, QuorumControllerChannel
from kafkawire.config import TOPIC_CONFIGS, BrokerConfig
from kafkawire.config_entries import connection_limits, effective_topic_values
from kafkawire.config_resources import group_consumer_settings
from kafkawire.controller_service import ControllerService
from kafkawire.coordinator_runtime import GROUP_TOPIC, SHARE_TOPIC, TXN_TOPIC, CoordinatorRuntime
from kafkawire.envelope import FORWARDABLE_KEYS
from kafkawire.fetch_session import INITIAL_EPOCH, INVALID_SESSION_ID, FetchSessionCache
from kafkawire.forwarding import Candidate, ForwardingManager
from kafkawire.group_coordinator import group_version_records, make_shard_factory
from kafkawire.inter_broker import (
    ClientSecurity,
    controller_security,
    inter_broker_listener,
    inter_broker_security,
)
from kafkawire.isr_manager import IsrManager
from kafkawire.listener_security import ListenerSecurity
from kafkawire.log_cleaner import LogCleanerService
from kafkawire.log_flusher import LogFlusher
from kafkawire.log_mover import LogDirMover
from kafkawire.metadata_log import METADATA_TOPIC, MetadataQuorum, metadata_log_config
from kafkawire.metadata_snapshots import SnapshotSettings
from kafkawire.metrics import BrokerMetrics
from kafkawire.peer_clients import PeerClients
from kafkawire.purgatory import AppendNotifier
from kafkawire.quorum_config import parse_bootstrap_servers, parse_voters
from kafkawire.quota_manager import (
    FETCH,
    PRODUCE,
    REQUEST,
    QuotaManager,
    TokenBucket,
    ip_connection_rate,
)
from kafkawire.replica_fetcher import FetcherSettings, ReplicaFetcherManager
from kafkawire.replica_manager import ReplicaManager
from kafkawire.replication_quota import replication_quotas
from kafkawire.retention import (
    run_producer_expiration,
    run_retention,
    run_token_expiration,
)
from kafkawire.sasl import SaslFailure
from kafkawire.security_config import SECURITY_PROTOCOL_IDS, listener_protocol
from kafkawire.server import Connection, FrameMemory, RequestContext, Server
from kafkawire.share_coordinator import ShareService, share_version_records
from kafkawire.storage import (
    META_PROPERTIES,
    base64_to_uuid,
    format_or_check,
    read_meta,
)
from kafkawire.telemetry import TelemetryManager
from kafkawire.txn_coordinator import TxnCoordinator, transaction_version_records
from kraft import controller
from kraft.acls import ALTER, CLUSTER, CLUSTER_NAME, DESCRIBE, DESCRIBE_CONFIGS
from kraft.cluster_control import Registration
from kraft.image import RESOURCE_BROKER, RESOURCE_TOPIC, MetadataImage, ScramCredential
from kraft.raft.config import RaftConfig
from kraft.scram import MECHANISMS, MIN_ITERATIONS, scram_keys
from kraft.tokens import token_password
from log.config import LogConfig
from log.dirs import DuplicateLogError, LogDirs
from log.file_cache import FILE_CACHE
from log.partition_log import PartitionLog
from protocol._generated.config_record import ConfigRecord
from protocol._generated.create_topics_request import CreateTopicsRequest
from protocol._generated.describe_user_scram_credentials_response import (
    DescribeUserScramCredentialsResponse,
)
from protocol._generated.partition_record import PartitionRecord
from protocol._generated.topic_record import TopicRecord
from protocol.errors import ErrorCode, KafkaError
from protocol.primitives import RemoteProtocolError

#: forwardable APIs a broker partly answers itself before forwarding the rest (by API key)
_PREPROCESSED_FORWARDS: dict[int, Any] = {
    33: _alter_configs.forward,
    44: _incremental_alter_configs.forward,
}

log = logging.getLogger("kafkawire.broker")

# feature name -> (min, max) we support. transaction.version 2 = KIP-890 part 2 (finalized at
# start, kafkawire/txn_coordinator.py); group.version 1 = KIP-848 consumer groups
# (groups/consumer.py); share.version 1 = KIP-932 share groups (kafkawire/share_coordinator.py).
SUPPORTED_FEATURES: dict[str, tuple[int, int]] = {
    "metadata.version": (7, controller.METADATA_VERSION_LEVEL),
    "kraft.version": (0, 0),
    "eligible.leader.replicas.version": (0, controller.ELR_VERSION_LEVEL),
    "group.version": (0, 1),
    "share.version": (0, 1),
    "streams.version": (0, 0),
    "transaction.version": (0, 2),
}


class StartupError(Exception):
    """The broker cannot start (a busy port, an unusable log directory): one line for the
    operator, no traceback."""


def configure_file_cache(wanted: int) -> int:
    """Size the log file handle cache: ``log.open.files.max``, at most half of the soft
    open-file limit (the rest is for connections, checkpoints and fetches in progress)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    size = wanted
    if soft != resource.RLIM_INFINITY and wanted > soft // 2:
        size = max(1, soft // 2)
        log.info("log.open.files.max %d lowered to %d (half of the open-file limit %d)",
                 wanted, size, soft)
    FILE_CACHE.configure(size)
    return size


# APIs that need one operation on the cluster and answer a denial with a top-level
# CLUSTER_AUTHORIZATION_FAILED (Kafka's checks; the others check in their handlers)
CLUSTER_GATED: dict[int, int] = {
    35: DESCRIBE,  # DescribeLogDirs
    43: ALTER,  # ElectLeaders
    45: ALTER,  # AlterPartitionReassignments
    46: DESCRIBE,  # ListPartitionReassignments
    48: DESCRIBE_CONFIGS,  # DescribeClientQuotas
    50: DESCRIBE,  # DescribeUserScramCredentials
    55: DESCRIBE,  # DescribeQuorum
    57: ALTER,  # UpdateFeatures
}


def cluster_denied(response_cls: Any, request: Any = None) -> Any:
    """The response of a CLUSTER_GATED API denied (the request's ``getErrorResponse``).
    DescribeUserScramCredentials also carries one result per user named, with the error (and
    no user name), as Kafka's."""
    resp = response_cls()
    resp.error_code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    if hasattr(resp, "error_message"):
        resp.error_message = "Cluster authorization failed."
    if isinstance(resp, DescribeUserScramCredentialsResponse) and request is not None:
        resp.results = [DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult(
            user="", error_code=resp.error_code, error_message=resp.error_message,
            credential_infos=[]) for _user in request.users or ()]
    return resp


PRODUCE_KEY, FETCH_KEY = 0, 1
#: CreateTopics, DeleteTopics, CreatePartitions (controller_mutation_rate)
MUTATION_KEYS = frozenset({19, 20, 37})
ALTER_LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
#: requests that wait in purgatory: their wall time is not handler time (request_percentage)
LONG_POLL_KEYS = frozenset({1, 11, 14, 68})


def _from_follower(ctx: RequestContext, request: Any) -> bool:
    """A Fetch from a replica (v15+ ``replica_state.replica_id``, before ``replica_id``)."""
    if request is None:
        return False
    if ctx.api_version >= 15:
        return bool(request.replica_state is not None and request.replica_state.replica_id >= 0)
    return bool(request.replica_id >= 0)


def fetch_response_bytes(response: Any) -> int:
    total = 0
    for t in response.responses:
        for p in t.partitions:
            recs = p.records
            if recs is None:
                continue
            total += recs.size if hasattr(recs, "size") else len(recs)
    return total


def directory_ids(cfg: BrokerConfig) -> tuple[uuid.UUID, ...]:
    """The ``directory.id`` of each formatted log directory (meta.properties), for the broker
    registration (Kafka's controller refuses one without directories)."""
    out: list[uuid.UUID] = []
    for d in cfg.log_dirs:
        mp = Path(d) / "meta.properties"
        if mp.exists():
            did = read_meta(mp).get("directory.id")
            if did:
                out.append(base64_to_uuid(did))
    return tuple(out)


def now_ms() -> int:
    return int(time.time() * 1000)


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self.cluster_id = ""
        self.incarnation_id = uuid.uuid4()
        self.logs: LogDirs | None = None
        self.flusher: LogFlusher | None = None
        self.cleaner: LogCleanerService | None = None
        self.log_mover: LogDirMover | None = None
        self.quorum: MetadataQuorum | None = None
        self.replicas: ReplicaManager | None = None
        #: the image's configs the local logs' LogConfigs were last derived from
        self._log_configs_from: dict[tuple[int, str], dict[str, str]] | None = None
        self.notifier = AppendNotifier()
        self.metrics = BrokerMetrics()
        #: KIP-227 incremental fetch sessions (kafkawire/fetch_session.py)
        self.fetch_sessions = FetchSessionCache(
            int(config["max.incremental.fetch.session.cache.slots"]),
            int(config["min.incremental.fetch.session.eviction.ms"]))
        self.telemetry = TelemetryManager()
        self.metrics.client_telemetry = self.telemetry.series
        self.server = Server(self.dispatch, config.socket_request_max_bytes, self.on_disconnect,
                             self.metrics)
        self.server.connection_limits = lambda: connection_limits(self.config, self.image)
        idle_ms = int(config["connections.max.idle.ms"])
        self.server.idle_ms = idle_ms if idle_ms >= 0 else float("inf")
        queued_bytes = int(config["queued.max.request.bytes"])
        if queued_bytes > 0:
            self.server.frame_memory = FrameMemory(queued_bytes)
        self.server.security = ListenerSecurity(config, self.dynamic_broker_config)
        self.server.raw_token = self.raw_sasl_token
        self.server.idle_timeout_ms = int(config["connections.max.idle.ms"])
        self.server.now_ms = self.clock_ms
        self.server.creation_limits = self.connection_creation_limits
        self.authorizer = Authorizer(config, lambda: self.image)
        self._token_credentials: dict[tuple[str, int], ScramCredential] = {}
        self.quotas = QuotaManager(
            lambda: self.image, int(config.explicit.get("quota.window.num", "11")),
            int(config.explicit.get("quota.window.size.seconds", "1")) * 1000)
        #: replication throttles (KIP-73): the leader's on follower fetches, the follower's
        #: on its fetchers
        self.leader_quota, self.follower_quota = replication_quotas(config, lambda: self.image)
        self.bound_ports: dict[str, int] = {}
        self.started = trio.Event()
        self.start_time_ms = now_ms()
        self.disconnect_hooks: list[Any] = []
        #: partitions hosted here whose log could not be created or opened (KAFKA_STORAGE_ERROR)
        self.metadata_lock = trio.Lock()
        self._pid_next = 0
        self._pid_end = 0
        # Coordinator runtimes (docs/COORDINATORS.md), one per internal topic. A coordinator
        # plugs in by setting its runtime's ``shard_factory`` before ``run``.
        self.group_runtime = CoordinatorRuntime(self, GROUP_TOPIC, make_shard_factory(
            config, lambda gid: group_consumer_settings(self.config, self.image, gid)))
        self.txn_runtime = CoordinatorRuntime(self, TXN_TOPIC)
        self.share_runtime = CoordinatorRuntime(self, SHARE_TOPIC, ShareStateShard)
        self.coordinators_by_key_type = {
            GROUP_TOPIC.key_type: self.group_runtime, TXN_TOPIC.key_type: self.txn_runtime,
            SHARE_TOPIC.key_type: self.share_runtime,
        }
        self.txn_coordinator = TxnCoordinator(self)
        self.share = ShareService(self)
        self.disconnect_hooks.append(self.share.on_disconnect)
        # the active controller's broker-facing side (served while this node leads the
        # metadata quorum) and this broker's registration with the active controller, local or
        # remote (kafkawire/broker_lifecycle.py)
        self.controller = ControllerService(self, now_ms)
        self.is_controller = "controller" in config.process_roles
        self.is_broker = "broker" in config.process_roles or not config.names_a_quorum
        self.lifecycle = BrokerLifecycleManager(
            QuorumControllerChannel(self.node_id,
                                    self.controller if self.is_controller else None,
                                    self.active_controller, now_ms,
                                    heartbeat_timeout_ms=int(
                                        config["broker.session.timeout.ms"]) // 2,
                                    security=self.controller_security),
            self.registration,
            lambda: self.image.offset, int(config["broker.heartbeat.interval.ms"]),
            int(config["initial.broker.registration.timeout.ms"]))
        self.server.controller_listeners = {lst.name for lst in config.controller_listeners}
        #: admin writes to the active controller in an Envelope (kafkawire/forwarding.py): on
        #: every node of a configured quorum; the implicit single node decides them itself
        self.forwarding: ForwardingManager | None = None
        if config.names_a_quorum:
            self.forwarding = ForwardingManager(
                self.controller_candidates, f"broker-{self.node_id}-forwarding", now_ms,
                security=self.controller_security)

    # ---- state --------------------------------------------------------------------------
    @property
    def image(self) -> MetadataImage:
        assert self.quorum is not None
        return self.quorum.image

    def clock_ms(self) -> int:
        return now_ms()

    def active_controller(self) -> tuple[int, tuple[str, int] | None]:
        """(node id of the active controller or -1, its controller listener address)."""
        quorum = self.quorum
        if quorum is None:
            return -1, None
        leader = quorum.leader_id
        return leader, quorum.voter_addresses.get(leader)

    def connection_creation_limits(
        self, host: str, listener: str,
    ) -> tuple[float, float | None, float | None]:
        """(max.connection.creation.rate, listener.name.<l>.max.connection.creation.rate or
        None, the address's connection_creation_rate quota or None)."""
        key = "max.connection.creation.rate"
        prefixed = f"listener.name.{listener.lower()}.{key}"
        if self.quorum is None:
            per_broker: dict[str, str] = {}
            default: dict[str, str] = {}
        else:
            per_broker = self.dynamic_broker_config()
            default = self.image.configs.get((RESOURCE_BROKER, ""), {})
        dynamic = per_broker.get(key) or default.get(key)
        rate = float(dynamic) if dynamic else float(self.config[key])
        own = per_broker.get(prefixed) or default.get(prefixed) or \
            self.config.explicit.get(prefixed)
        ip_rate = None if self.quorum is None else ip_connection_rate(self.image, host)
        return rate, float(own) if own else None, ip_rate

    def dynamic_broker_config(self) -> dict[str, str]:
        """This broker's dynamic config (AlterConfigs on BROKER <node id>)."""
        if self.quorum is None:
            return {}
        return self.image.configs.get((RESOURCE_BROKER, str(self.node_id)), {})

    def scram_credential(self, user: str, mechanism: int) -> ScramCredential | None:
        return self.image.scram.get(user, {}).get(mechanism)

    def token_settings(self) -> tuple[str | None, int, int]:
        """(delegation.token.secret.key or None: tokens disabled,
        delegation.token.max.lifetime.ms, delegation.token.expiry.time.ms)."""
        e = self.config.explicit
        secret = e.get("delegation.token.secret.key") or e.get("delegation.token.master.key")
        return (secret or None, int(e.get("delegation.token.max.lifetime.ms", "604800000")),
                int(e.get("delegation.token.expiry.time.ms", "86400000")))

    def token_credential(self, token_id: str,
                         mechanism: int) -> tuple[ScramCredential, str] | None:
        """A live delegation token's SCRAM credential (derived from its HMAC with a salt of
        this broker's, as Kafka) and its owner's name."""
        secret = self.token_settings()[0]
        info = self.image.tokens.get(token_id)
        if secret is None or info is None or info.expiry_ms < now_ms():
            return None
        cached = self._token_credentials.get((token_id, mechanism))
        if cached is None:
            digest = MECHANISMS[mechanism][1]
            salt = secrets.token_bytes(32)
            salted = hashlib.pbkdf2_hmac(digest, token_password(secret, token_id).encode(),
                                         salt, MIN_ITERATIONS)
            stored, server = scram_keys(digest, salted)
            cached = ScramCredential(salt, stored, server, MIN_ITERATIONS)
            self._token_credentials[(token_id, mechanism)] = cached
        return cached, info.owner.partition(":")[2]

    async def raw_sasl_token(self, conn: Connection, token: bytes) -> bytes | None:
        """A bare SASL token after SaslHandshake v0; a failure closes the connection."""
        from kafkawire.apis.sasl_authenticate import evaluate

        try:
            challenge, _lifetime = await evaluate(self, conn, token)
        except SaslFailure as e:
            raise RemoteProtocolError(f"SASL authentication failed: {e}") from None
        conn.sasl_raw_tokens = conn.sasl is not None
        return challenge

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
        names = self.logs.topics() - {"__cluster_metadata"}
        for name in sorted(names if topics is None else names & set(topics)):
            self.logs.update_config(name, self.topic_log_config(name))

    def partition_log(self, topic: str, partition: int) -> PartitionLog | None:
        """The log of a hosted replica, for inspection only (producer state, sizes): appends,
        reads and the high watermark go through ``self.replicas``. None when it is not here or
        its log directory is offline."""
        assert self.replicas is not None and self.logs is not None
        if self.logs.is_offline(topic, partition):
            return None
        p = self.replicas.partition(topic, partition)
        return p.log if p is not None else None

    def is_offline(self, topic: str, partition: int) -> bool:
        """The partition lives here but cannot be used (KAFKA_STORAGE_ERROR): its directory
        went offline, or its log could not be created."""
        assert self.logs is not None
        assert self.replicas is not None
        return (self.logs.is_offline(topic, partition)
                or (topic, partition) in self.replicas.offline_logs)

    def storage_failed(self, exc: BaseException, topic: str | None = None,
                       partition: int = -1) -> None:
        """An I/O error from a log of this node: its log directory (the one holding the
        partition, else the one the error names) goes offline (as Kafka's
        LogDirFailureChannel), except for running out of descriptors."""
        if self.logs is not None and isinstance(exc, OSError):
            self.logs.mark_offline(exc, tp=(topic, partition) if topic is not None else None)

    # ---- metadata operations (through the quorum) --------------------------------------
    async def commit_metadata(self, records: list[Any]) -> None:
        """Commit ``records`` to the metadata log and bring the local logs in line.

        The logs of partitions the records create here are created FIRST: when that fails
        (no descriptors left, a full disk) the records are not committed and the caller gets
        KAFKA_STORAGE_ERROR, so the metadata never lists a partition whose log could not be
        made."""
        assert self.quorum is not None
        if records:
            created = self.create_logs_for(records)
            try:
                await self.quorum.append(records)
            except BaseException:
                self._drop_logs(created)
                raise

    def create_logs_for(self, records: list[Any]) -> list[tuple[str, int]]:
        """Create the logs of the new partitions in ``records`` that live on this node.
        All or nothing: on failure the ones made are deleted and KAFKA_STORAGE_ERROR raised."""
        assert self.logs is not None
        names = {r.topic_id: r.name for r in records if isinstance(r, TopicRecord)}
        overrides: dict[str, dict[str, str]] = {}
        for r in records:
            if isinstance(r, ConfigRecord) and r.resource_type == 2 and r.value is not None:
                overrides.setdefault(r.resource_name, {})[r.name] = r.value
        created: list[tuple[str, int]] = []
        configs: dict[str, LogConfig] = {}  # one per topic, not per partition
        try:
            for r in records:
                if not isinstance(r, PartitionRecord) or self.node_id not in r.replicas:
                    continue
                topic = names.get(r.topic_id)
                if topic is None:
                    known = self.image.topics_by_id.get(r.topic_id)
                    topic = known.name if known is not None else None
                if topic is None or self.logs.get(topic, r.partition_id) is not None:
                    continue
                cfg = configs.get(topic)
                if cfg is None:
                    cfg = configs[topic] = LogConfig.from_properties(effective_topic_values(
                        self.config, self.image,
                        {**self.image.topic_config(topic), **overrides.get(topic, {})},
                    ))
                self.logs.create(topic, r.partition_id, now_ms(), cfg, sync_dir=False)
                created.append((topic, r.partition_id))
            if created:
                self.logs.sync_dir()
        except (OSError, KafkaError) as exc:
            self._drop_logs(created)
            if isinstance(exc, OSError):
                self.storage_failed(exc)
            if not self.logs.offline:
                log.error("could not create the logs of %d new partition(s): %s; nothing was "
                          "committed", len(created) + 1, exc)
            raise KafkaError(
                ErrorCode.KAFKA_STORAGE_ERROR, f"could not create the partition logs: {exc}"
            ) from exc
        return created

    def _drop_logs(self, created: list[tuple[str, int]]) -> None:
        assert self.logs is not None
        for topic, partition in created:
            try:
                self.logs.delete(topic, partition)
            except OSError:
                log.exception("could not delete the log of %s-%d", topic, partition)

    def sync_logs_with_image(self) -> None:
        """Host the partitions the image places here, each as leader or follower (the replica
        manager creates and deletes their logs), then let the coordinators follow."""
        assert self.replicas is not None
        self.replicas.apply_image(self.image, now_ms(), self.topic_log_config)
        for runtime in self.coordinators_by_key_type.values():
            runtime.sync()
        self.share.on_image()

    async def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, str] | None = None,
        assignments: dict[int, list[int]] | None = None,
    ) -> None:
        if self.forwarding is not None and not self.is_active_controller():
            await self._create_topic_remotely(name, num_partitions, replication_factor,
                                              configs or {}, assignments)
            return
        async with self.metadata_lock:
            records = controller.create_topic(
                self.image, name, num_partitions, replication_factor, configs or {},
                assignments=assignments,
            )
            await self.commit_metadata(records)

    async def _create_topic_remotely(self, name: str, num_partitions: int,
                                     replication_factor: int, configs: dict[str, str],
                                     assignments: dict[int, list[int]] | None) -> None:
        """An internal or auto-created topic on a node that is not the active controller: a
        CreateTopics of the broker's own to the controller (Kafka's AutoTopicCreationManager).
        KafkaError with the controller's answer for the topic."""
        assert self.forwarding is not None
        topic = CreateTopicsRequest.CreatableTopic(
            name=name, num_partitions=-1 if assignments else num_partitions,
            replication_factor=-1 if assignments else replication_factor,
            assignments=[CreateTopicsRequest.CreatableReplicaAssignment(
                partition_index=p, broker_ids=list(b)) for p, b in (assignments or {}).items()],
            configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                     for k, v in configs.items()])
        resp = await self.forwarding.send(CreateTopicsRequest(
            topics=[topic], timeout_ms=int(self.config["request.timeout.ms"])))
        result = resp.topics[0] if resp.topics else None
        if result is None:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "no answer for the topic")
        if result.error_code != ErrorCode.NONE:
            raise KafkaError(ErrorCode(result.error_code), result.error_message or "")

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

    # ---- the active controller -----------------------------------------------------------
    def is_active_controller(self) -> bool:
        """Does this node decide metadata writes: is it the Raft leader of the metadata quorum?
        (A new leader is active once it has committed the start of its epoch; callers that
        decide wait for that with ``quorum.wait_active()``.)"""
        q = self.quorum
        return q is not None and q.leader_id == self.node_id and q.leader_id >= 0

    def controller_candidates(self) -> list[Candidate]:
        """The controller listeners to forward to: the quorum's view (the known leader first,
        then the other voters, then ``controller.quorum.bootstrap.servers``), else the static
        voters of the configuration: a NOT_CONTROLLER moves on to the next."""
        q = self.quorum
        found = q.controller_candidates() if q is not None else []
        if found:
            return found
        voters = parse_voters(str(self.config.values["controller.quorum.voters"]))
        if voters:
            return [(v.node_id, v.host, v.port) for v in voters]
        return [(-2 - i, h, p) for i, (h, p) in enumerate(parse_bootstrap_servers(
            str(self.config.values["controller.quorum.bootstrap.servers"])))]

    # ---- request dispatch ----------------------------------------------------------------
    async def dispatch(self, ctx: RequestContext, request: Any) -> Any:
        if not self.started.is_set() and ctx.connection.listener_type != "controller":
            # The listeners open before this node's registration is committed (its endpoint
            # needs the bound port); like Kafka, requests are processed only once it is, so
            # nothing sees a cluster without brokers (CreateTopics: "0 broker(s) registered").
            # The controller listener serves at once: brokers register through it.
            await self.started.wait()
        if (self.forwarding is not None and ctx.api_key in FORWARDABLE_KEYS
                and ctx.connection.listener_type == "broker" and not self.is_active_controller()):
            # as Kafka's broker: the active controller decides (authorization included, with
            # the client's principal); the broker only wraps and unwraps, except for the
            # config resources that name this node (BROKER ids, BROKER_LOGGER)
            preprocess = _PREPROCESSED_FORWARDS.get(ctx.api_key)
            if preprocess is not None:
                return await preprocess(self, ctx, request)
            return await self.forwarding.forward(ctx, request)
        handler = REGISTRY[ctx.api_key]
        if self.authorizer.enabled:
            ctx.authorizer = self.authorizer
            gate = CLUSTER_GATED.get(ctx.api_key)
            if gate is not None and not ctx.allowed(gate, CLUSTER, CLUSTER_NAME):
                return cluster_denied(handler.response_cls, request)
        if not self.image.client_quotas:
            return await handler.handle(self, ctx, request)
        started = time.perf_counter()
        response = await handler.handle(self, ctx, request)
        return self.enforce_quotas(ctx, response, time.perf_counter() - started, request)

    def _mutation_bucket(self, ctx: RequestContext) -> TokenBucket | None:
        if not self.image.client_quotas:
            return None
        user = ctx.connection.principal.partition(":")[2]
        return self.quotas.mutation_bucket(user, ctx.client_id or "", now_ms())

    def mutation_exceeded(self, ctx: RequestContext, strict: bool) -> bool:
        """KIP-599: refuse a topic of a strict request while the client's
        controller_mutation_rate bucket is negative (THROTTLING_QUOTA_EXCEEDED)."""
        bucket = self._mutation_bucket(ctx)
        return strict and bucket is not None and bucket.tokens < 0

    def record_mutation(self, ctx: RequestContext, partitions: int) -> None:
        bucket = self._mutation_bucket(ctx)
        if bucket is not None:
            bucket.tokens -= partitions

    def enforce_quotas(self, ctx: RequestContext, response: Any, elapsed_s: float,
                       request: Any = None) -> Any:
        """Record the request against the client's quotas (kafkawire.quota_manager); set
        throttle_time_ms and mute the connection for it. A throttled Fetch answers empty."""
        q = self.quotas
        now = now_ms()
        user = ctx.connection.principal.partition(":")[2]
        client = ctx.client_id or ""
        throttle = 0
        if ctx.api_key == PRODUCE_KEY:
            throttle = q.record(PRODUCE, user, client, ctx.size_bytes, now)
        elif ctx.api_key == FETCH_KEY and response is not None \
                and not _from_follower(ctx, request):  # Kafka: followers are exempt
            size = fetch_response_bytes(response)
            throttle = q.record(FETCH, user, client, size, now)
            if throttle > 0:  # as Kafka: unrecord, answer an empty response
                q.record(FETCH, user, client, -size, now)
                self._throttled_fetch(ctx, request, response)
        if ctx.api_key not in LONG_POLL_KEYS:
            throttle = max(throttle, q.record(REQUEST, user, client, elapsed_s * 100, now))
        if ctx.api_key in MUTATION_KEYS:
            bucket = q.mutation_bucket(user, client, now)
            if bucket is not None:
                throttle = max(throttle, bucket.throttle_ms())
        if throttle > 0:
            if response is not None and hasattr(response, "throttle_time_ms"):
                response.throttle_time_ms = max(response.throttle_time_ms, throttle)
            ctx.connection.throttle_ms = max(ctx.connection.throttle_ms, throttle)
        return response

    def _throttled_fetch(self, ctx: RequestContext, request: Any, response: Any) -> None:
        """Kafka's ``FetchContext.getThrottledResponse``: no partitions; a full fetch (epoch 0)
        creates no session (session id 0: the client sends a full fetch again); an
        incremental one keeps its session, whose partitions are sent again next time."""
        full = ctx.api_version >= 7 and request is not None \
            and request.session_epoch == INITIAL_EPOCH
        if response.session_id and full:
            self.fetch_sessions.close(response.session_id)
            response.session_id = INVALID_SESSION_ID
        elif response.session_id:
            v13 = ctx.api_version >= 13
            self.fetch_sessions.unanswered(response.session_id, [
                (t.topic_id if v13 else t.topic, p.partition_index)
                for t in response.responses for p in t.partitions])
        response.responses = []

    def on_disconnect(self, conn: Connection) -> None:
        for hook in self.disconnect_hooks:
            hook(conn)

    # ---- lifecycle ----------------------------------------------------------------------
    def open_storage(self) -> None:
        cfg = self.config
        unformatted = [d for d in cfg.log_dirs if not (d / META_PROPERTIES).exists()]
        replaced = len(unformatted) < len(cfg.log_dirs) and unformatted  # others were formatted
        self.cluster_id = format_or_check(cfg, now_ms())
        self.controller.open(self.cluster_id)
        configure_file_cache(int(cfg["log.open.files.max"]))
        defaults = LogConfig.from_properties(
            {name: self.config.topic_default(name)[0] for name in TOPIC_CONFIGS}
        )
        self.logs = LogDirs.open(
            cfg.log_dirs, now_ms(), default_config=defaults,
            config_for=self._log_config_for, metadata_dir=cfg.metadata_log_dir,
        )
        if replaced:  # Kafka formats them too; the partitions they held are not made afresh
            log.warning("log director%s %s had no meta.properties and %s formatted now; "
                        "partitions missing from every log directory at this start stay "
                        "offline (KAFKA_STORAGE_ERROR) instead of starting empty",
                        "ies" if len(replaced) > 1 else "y",
                        ", ".join(str(d) for d in replaced), "were" if len(replaced) > 1
                        else "was")
            self.logs.guard_missing()
        self.flusher = LogFlusher(self.logs, cfg, now_ms)
        self.cleaner = LogCleanerService(self)
        self.replicas = ReplicaManager(self.logs, self.node_id, self.notifier)
        self.log_mover = LogDirMover(self.logs, self.replicas, now_ms, self._alter_log_dirs_rate,
                                     flusher=self.flusher, cleaner=self.cleaner)
        self.replicas.min_isr_default = int(self.config["min.insync.replicas"])
        self._start_replication(self.replicas)
        addresses = quorum_addresses(cfg)
        self.quorum = MetadataQuorum(
            self.replicas, self.node_id, now_ms, SnapshotSettings.from_config(cfg.values),
            self._metadata_log_config(), tuple(sorted(addresses)),
            voter_addresses=addresses, raft_config=raft_config(cfg),
            cluster_id=self.cluster_id,
            controller_listener_names=frozenset(cfg.controller_listener_names),
            controller_security=self.controller_security,
        )
        self.quorum.load()
        if self.quorum.is_active:  # a lone voter: it leads at once, start-up stays synchronous
            for _ in range(2):
                for records in self.bootstrap_records():
                    self.quorum.append_sync(records)
        for topic in self.image.topics:
            self.logs.update_config(topic, self.topic_log_config(topic))
        self._log_configs_from = self.image.configs
        self.quorum.on_publish = self._image_published
        if self.quorum.caught_up.is_set():
            self.sync_logs_with_image()
            self.logs.finish_start()

    def _alter_log_dirs_rate(self) -> float:
        """``replica.alter.log.dirs.io.max.bytes.per.second`` (dynamic, per broker or cluster
        default; unbounded unless set)."""
        from kafkawire.config_entries import dynamic_broker_configs

        per_broker, default = dynamic_broker_configs(self.image, self.node_id)
        raw = per_broker.get(ALTER_LOG_DIRS_RATE, default.get(ALTER_LOG_DIRS_RATE))
        if raw is None:
            raw = self.config.explicit.get(ALTER_LOG_DIRS_RATE)
        try:
            return float(raw) if raw is not None else math.inf
        except ValueError:
            return math.inf

    def bootstrap_records(self) -> list[list[Any]]:
        """What the active controller writes when it finds the metadata without them: the
        bootstrap records of a new cluster (``bootstrap.checkpoint``), then the feature
        levels this node's configuration finalizes (one batch each)."""
        out: list[list[Any]] = []
        if not self.image.features:
            min_isr = int(self.config["min.insync.replicas"])
            boot = read_bootstrap(self.config.metadata_log_dir)
            out.append(controller.bootstrap_records(min_isr) if boot is None
                       else first_start_records(boot, min_isr))
            return out  # the feature records are derived from the image once it has these
        features = group_version_records(self.config, self.image)
        features += transaction_version_records(self.image)
        features += share_version_records(self.image)
        if features:
            out.append(features)
        return out

    def _start_replication(self, replicas: ReplicaManager) -> None:
        """The replica fetchers (followers) and the ISR manager (leaders) over ``replicas``."""
        cfg = self.config
        lc = self.lifecycle
        self.fetchers = ReplicaFetcherManager(
            self.node_id, FetcherSettings.from_config(cfg.values), now_ms, lambda: self.image,
            lambda: lc.broker_epoch, self.inter_broker_listener, self.follower_quota,
            self.inter_broker_security)
        replicas.on_roles_applied = lambda: self.fetchers.update(list(replicas))
        flusher = self.flusher
        if flusher is not None:  # new logs' directory entries: fsynced on its worker thread
            def flush_new(logs: list[PartitionLog]) -> None:
                for plog in logs:
                    flusher.request(plog)
            replicas.on_logs_created = flush_new
        self.peers = PeerClients(self.node_id, lambda: self.image, self.inter_broker_listener,
                                 now_ms, int(cfg["request.timeout.ms"]),
                                 self.inter_broker_security)
        #: Produce's transaction checks have connections of their own, as Kafka's
        #: AddPartitionsToTxnManager has its own network client: on ``peers`` they waited
        #: behind WriteTxnMarkers (each held until its marker was replicated), since a broker
        #: handles one request of a connection at a time
        self.txn_check_peers = PeerClients(self.node_id, lambda: self.image,
                                           self.inter_broker_listener, now_ms,
                                           int(cfg["request.timeout.ms"]),
                                           self.inter_broker_security)
        self.isr = IsrManager(replicas, lambda: lc.channel, lambda: lc.broker_epoch,
                              lambda: self.image, now_ms, int(cfg["replica.lag.time.max.ms"]))

    def inter_broker_listener(self) -> str | None:
        """The listener followers fetch on (``kafkawire.inter_broker``):
        ``inter.broker.listener.name``, else the one ``security.inter.broker.protocol``
        names, else this broker's first (non-controller) listener."""
        return inter_broker_listener(self.config)

    def inter_broker_security(self) -> ClientSecurity:
        """TLS / SASL of this broker's connections to the others, with the listener's own
        settings (this broker's dynamic ones included) at the time of the connection."""
        return inter_broker_security(self.config, self.dynamic_broker_config(),
                                     self.inter_broker_listener())

    def controller_security(self) -> ClientSecurity:
        """TLS / SASL of this node's connections to the controllers (Raft, registration,
        heartbeats, AlterPartition, forwarding): the controller listener's settings with
        ``sasl.mechanism.controller.protocol``, at the time of the connection."""
        return controller_security(self.config, self.dynamic_broker_config())

    async def run_controller_activation(
        self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Each time this node becomes the active controller: write the bootstrap and feature
        records if the metadata lacks them (a new cluster's first leader)."""
        quorum = self.quorum
        assert quorum is not None and quorum.driver is not None
        task_status.started()
        while True:
            while not quorum.is_active:
                await quorum.driver.wait_for_change()
            try:
                async with self.metadata_lock:
                    for _ in range(2):
                        for records in self.bootstrap_records():
                            await self.commit_metadata(records)
            except KafkaError as e:
                log.warning("could not write the bootstrap records: %s", e)
            while quorum.is_active:
                await quorum.driver.wait_for_change()

    async def _see_self_unfenced(self, timeout_s: float = 10.0) -> None:
        """The controller said we are unfenced; wait (bounded) until our own image says so
        too, so the first Metadata answers of this node already list it."""
        quorum = self.quorum
        assert quorum is not None and quorum.driver is not None
        with trio.move_on_after(timeout_s):
            while True:
                me = self.image.brokers.get(self.node_id)
                if me is not None and not me.fenced:
                    return
                await quorum.driver.wait_for_change()

    def _image_published(self, image: MetadataImage) -> None:
        """A new committed image (this node's own writes, or replicated ones): host what it
        places here, once the image has caught up with the quorum after start (before, the
        partitions it lacks would look deleted)."""
        assert self.quorum is not None
        self._follow_config_changes(image)
        if self.quorum.caught_up.is_set() and self.logs is not None:
            self.sync_logs_with_image()
            self.logs.finish_start()  # the start-up replay is over (JBOD placement)

    def _follow_config_changes(self, image: MetadataImage) -> None:
        """Topic and broker config changes replicated from the controller reach the local
        logs (Kafka's DynamicConfigPublisher -> LogManager.updateTopicConfig): the node that
        took an AlterConfigs refreshes its own logs, every other node does it here, so
        ``cleanup.policy=compact`` set after creation makes every leader refuse keyless
        records and every replica's cleaner take the log."""
        seen, now = self._log_configs_from, image.configs
        self._log_configs_from = now
        if seen is None or seen is now or self.logs is None:
            return
        changed = {key for key in seen.keys() | now.keys() if seen.get(key) != now.get(key)}
        if not changed:
            return
        own = {(RESOURCE_BROKER, ""), (RESOURCE_BROKER, str(self.node_id))}
        if changed & own:
            self.refresh_log_configs(None)  # dynamic broker defaults of topic configs
        else:
            topics = [name for rtype, name in changed if rtype == RESOURCE_TOPIC]
            if topics:
                self.refresh_log_configs(topics)

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
            proto = SECURITY_PROTOCOL_IDS[listener_protocol(cfg, lst.name)]
            endpoints.append((lst.name, lst.host, port, proto))
        assert self.logs is not None
        rack = cfg.values.get("broker.rack")
        return Registration(
            broker_id=self.node_id, cluster_id=self.cluster_id,
            incarnation_id=self.incarnation_id, endpoints=endpoints, features=SUPPORTED_FEATURES,
            rack=str(rack) if rack else None,
            previous_broker_epoch=self.logs.clean_shutdown_broker_epoch,
            log_dirs=directory_ids(cfg),
        )

    async def bind_listeners(self) -> list[tuple[str, str, list[trio.SocketListener]]]:
        """Bind every listener before anything else happens (a second broker on a busy port
        must not touch the data directory): (name, host, sockets). StartupError if a port
        cannot be bound."""
        bound: list[tuple[str, str, list[trio.SocketListener]]] = []
        for lst in [*self.config.broker_listeners, *self.config.controller_listeners]:
            try:
                listeners = await trio.open_tcp_listeners(lst.port, host=lst.host)
            except OSError as e:
                for _name, _host, ls in bound:
                    for sock in ls:
                        await sock.aclose()
                raise StartupError(
                    f"cannot listen on {lst.host}:{lst.port} ({lst.name}): "
                    f"{e.strerror or e}"
                ) from None
            self.bound_ports[lst.name] = listeners[0].socket.getsockname()[1]
            bound.append((lst.name, lst.host, listeners))
        return bound

    async def controlled_shutdown(self) -> None:
        """Before stopping: let the controller move leadership away (SIGTERM)."""
        # bounded by broker.session.timeout.ms: past it the controller would fence us anyway
        timeout_ms = int(self.config["broker.session.timeout.ms"])
        if self.is_broker and await self.lifecycle.controlled_shutdown(timeout_ms) \
                and self.logs is not None:
            self.logs.broker_epoch = self.lifecycle.broker_epoch
        if self.quorum is not None:  # the leader hands over at once (EndQuorumEpoch)
            await self.quorum.resign()

    async def run(self, task_status: trio.TaskStatus[Broker] = trio.TASK_STATUS_IGNORED) -> None:
        assert self.server.security is not None
        self.server.security.check([lst.name for lst in self.config.listeners])
        self.metrics.idle.start()
        bound = await self.bind_listeners()
        try:
            self.open_storage()
        except (OSError, DuplicateLogError) as e:
            for _name, _host, ls in bound:
                for sock in ls:
                    await sock.aclose()
            self.close()
            raise StartupError(f"cannot open the log directories: {e}") from None
        try:
            async with trio.open_nursery() as nursery:
                for name, host, listeners in bound:
                    await nursery.start(self.server.serve_listener, name, listeners)
                    log.info(
                        "kafkawire node %s listening on %s:%s (%s), cluster id %s, data in %s",
                        self.node_id, host, self.bound_ports[name], name, self.cluster_id,
                        ", ".join(str(d) for d in self.config.log_dirs),
                    )
                assert self.quorum is not None
                await nursery.start(self.quorum.run)  # the Raft driver, snapshots
                await nursery.start(self.controller.run_session_expiry)
                await nursery.start(self.controller.run_leader_rebalance)
                await nursery.start(self.controller.run_unclean_elections)
                await nursery.start(self.fetchers.run)
                await nursery.start(self.isr.run)
                self.fetchers.update(list(self.replicas or ()))
                if self.is_controller:
                    await nursery.start(self.run_controller_activation)
                if self.is_broker:  # returns once registered and unfenced
                    await nursery.start(self.lifecycle.run)
                    await self._see_self_unfenced()
                for runtime in self.coordinators_by_key_type.values():
                    await nursery.start(runtime.serve)
                await nursery.start(self.txn_coordinator.serve)
                await nursery.start(self.share.serve)
                assert self.flusher is not None and self.cleaner is not None
                await nursery.start(self.flusher.run)
                if self.log_mover is not None:
                    await nursery.start(self.log_mover.run)
                nursery.start_soon(run_retention, self)
                nursery.start_soon(run_producer_expiration, self)
                nursery.start_soon(run_token_expiration, self)
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


def raft_config(cfg: BrokerConfig) -> RaftConfig:
    """The Raft node's timing settings from ``controller.quorum.*``."""
    v = cfg.values
    return RaftConfig(
        election_timeout_ms=int(v["controller.quorum.election.timeout.ms"]),
        fetch_timeout_ms=int(v["controller.quorum.fetch.timeout.ms"]),
        election_backoff_max_ms=int(v["controller.quorum.election.backoff.max.ms"]),
        request_timeout_ms=int(v["controller.quorum.request.timeout.ms"]),
        retry_backoff_ms=int(v["controller.quorum.retry.backoff.ms"]),
        listeners=voter_endpoints(cfg),
    )


def voter_endpoints(cfg: BrokerConfig) -> tuple[tuple[str, str, int], ...]:
    """A controller's own endpoints as a VotersRecord names them (listener name, host, port):
    its controller listeners, advertised (``advertised.listeners``) where named there, a
    wildcard host as ``localhost``; () for a broker-only node or a listener on port 0 (its port
    is not known before binding). Compared with its VotersRecord entry (UpdateRaftVoter)."""
    advertised = {lst.name: lst for lst in cfg.advertised_listeners}
    out = []
    for lst in cfg.controller_listeners:
        lst = advertised.get(lst.name, lst)
        if lst.port <= 0:
            return ()
        host = lst.host if lst.host not in ("0.0.0.0", "::", "") else "localhost"
        out.append((lst.name, host, int(lst.port)))
    return tuple(out)


def quorum_addresses(cfg: BrokerConfig) -> dict[int, tuple[str, int]]:
    """Node id -> controller listener of each voter of ``controller.quorum.voters``; else the
    ``controller.quorum.bootstrap.servers`` under ids -2, -3, ... (Kafka's ids for them: the
    real voters and their endpoints come from the VotersRecord in the metadata log)."""
    voters = parse_voters(str(cfg.values["controller.quorum.voters"]))
    if voters:
        return {v.node_id: (v.host, v.port) for v in voters}
    servers = parse_bootstrap_servers(str(cfg.values["controller.quorum.bootstrap.servers"]))
    return {-2 - i: hp for i, hp in enumerate(servers)}
