"""The metadata image: an immutable view of the cluster built by replaying metadata records.

Handlers read ``MetadataImage``; nothing mutates it. ``apply(image, records)`` returns a new
image with the records replayed (copy-on-write of the maps that change), which the driver
publishes atomically once the records are committed in ``__cluster_metadata``.

Resource types in ConfigRecord follow Kafka's ConfigResource.Type: 2 TOPIC, 4 BROKER,
8 BROKER_LOGGER, 16 CLIENT_METRICS, 32 GROUP.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from typing import Any

from kraft.acls import Acl, acl_of_record
from kraft.tokens import TokenInfo, info_of_record

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_CLIENT_METRICS = 16
RESOURCE_GROUP = 32
#: KIP-966; below level 1 the image holds no ELR or LastKnownElr (see ``_Builder.replay``)
ELR_FEATURE = "eligible.leader.replicas.version"


@dataclass(frozen=True)
class PartitionImage:
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    eligible_leader_replicas: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()
    #: the log directory of each replica (KIP-858; zero: UNASSIGNED); empty: none recorded
    directories: tuple[uuid.UUID, ...] = ()
    #: a reassignment in progress (replicas being added / removed), else empty
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


def _directories(dirs: list[uuid.UUID] | None, replicas: Any) -> tuple[uuid.UUID, ...]:
    """The image's form of a partition's directories: one per replica, or () when none is
    assigned (all UNASSIGNED, or not one per replica), so every history of the same state
    gives the same image."""
    out = tuple(dirs or ())
    if len(out) != len(replicas) or all(d.int == 0 for d in out):
        return ()
    return out


@dataclass(frozen=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionImage]

    @property
    def is_internal(self) -> bool:
        return self.name in ("__consumer_offsets", "__transaction_state", "__share_group_state")


@dataclass(frozen=True)
class Endpoint:
    listener: str
    host: str
    port: int
    security_protocol: int


@dataclass(frozen=True)
class BrokerImage:
    broker_id: int
    incarnation_id: uuid.UUID
    epoch: int
    endpoints: tuple[Endpoint, ...]
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool
    features: dict[str, tuple[int, int]]
    #: the broker's log directory ids (RegisterBrokerRecord ``log_dirs``)
    log_dirs: tuple[uuid.UUID, ...] = ()


#: a client quota entity: its (entity type, entity name or None for the default) pairs, sorted
QuotaEntity = tuple[tuple[str, str | None], ...]


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


@dataclass(frozen=True)
class MetadataImage:
    offset: int = -1  # offset of the last record replayed
    epoch: int = -1
    topics: dict[str, TopicImage] = field(default_factory=dict)
    topics_by_id: dict[uuid.UUID, TopicImage] = field(default_factory=dict)
    configs: dict[tuple[int, str], dict[str, str]] = field(default_factory=dict)
    brokers: dict[int, BrokerImage] = field(default_factory=dict)
    features: dict[str, int] = field(default_factory=dict)
    #: features that have a FeatureLevelRecord in the log (a level-0 record removes the feature
    #: from ``features`` but stays a decision the start-up defaults must not override)
    features_recorded: frozenset[str] = frozenset()
    next_producer_id: int = 0
    client_quotas: dict[QuotaEntity, dict[str, float]] = field(default_factory=dict)
    #: user -> SCRAM mechanism (1 SCRAM-SHA-256, 2 SCRAM-SHA-512) -> credential
    scram: dict[str, dict[int, ScramCredential]] = field(default_factory=dict)
    #: ACL id -> ACL (kraft.acls)
    acls: dict[uuid.UUID, Acl] = field(default_factory=dict)
    #: delegation token id -> token (kraft.tokens)
    tokens: dict[str, TokenInfo] = field(default_factory=dict)

    def topic_config(self, topic: str) -> dict[str, str]:
        return self.configs.get((RESOURCE_TOPIC, topic), {})

    def partition(self, topic: str, partition: int) -> PartitionImage | None:
        t = self.topics.get(topic)
        return None if t is None else t.partitions.get(partition)


class _Builder:
    """Mutable working copy used while replaying a batch of records."""

    def __init__(self, img: MetadataImage) -> None:
        self.img = img
        self.topics: dict[str, TopicImage] | None = None
        self.by_id: dict[uuid.UUID, TopicImage] | None = None
        self.configs: dict[tuple[int, str], dict[str, str]] | None = None
        self.brokers: dict[int, BrokerImage] | None = None
        self.features: dict[str, int] | None = None
        self.recorded = img.features_recorded
        self.next_pid = img.next_producer_id
        self.quotas: dict[QuotaEntity, dict[str, float]] | None = None
        self.scram: dict[str, dict[int, ScramCredential]] | None = None
        self.acls: dict[uuid.UUID, Acl] | None = None
        self.tokens: dict[str, TokenInfo] | None = None
        #: topics whose partition dict is this builder's own copy (changed in place: a
        #: PartitionRecord per partition must not copy the topic's whole dict, which made
        #: creating a topic of n partitions cost n*n/2)
        self.owned: set[uuid.UUID] = set()

    def tk(self) -> dict[str, TokenInfo]:
        if self.tokens is None:
            self.tokens = dict(self.img.tokens)
        return self.tokens

    def a(self) -> dict[uuid.UUID, Acl]:
        if self.acls is None:
            self.acls = dict(self.img.acls)
        return self.acls

    def t(self) -> tuple[dict[str, TopicImage], dict[uuid.UUID, TopicImage]]:
        if self.topics is None or self.by_id is None:
            self.topics = dict(self.img.topics)
            self.by_id = dict(self.img.topics_by_id)
        return self.topics, self.by_id

    def c(self) -> dict[tuple[int, str], dict[str, str]]:
        if self.configs is None:
            self.configs = dict(self.img.configs)
        return self.configs

    def b(self) -> dict[int, BrokerImage]:
        if self.brokers is None:
            self.brokers = dict(self.img.brokers)
        return self.brokers

    def f(self) -> dict[str, int]:
        if self.features is None:
            self.features = dict(self.img.features)
        return self.features

    def q(self) -> dict[QuotaEntity, dict[str, float]]:
        if self.quotas is None:
            self.quotas = dict(self.img.client_quotas)
        return self.quotas

    def s(self) -> dict[str, dict[int, ScramCredential]]:
        if self.scram is None:
            self.scram = dict(self.img.scram)
        return self.scram

    def put_topic(self, topic: TopicImage) -> None:
        topics, by_id = self.t()
        topics[topic.name] = topic
        by_id[topic.topic_id] = topic

    def parts(self, topic_id: uuid.UUID) -> dict[int, PartitionImage]:
        """The partitions of a topic, copied once per batch and then changed in place."""
        _topics, by_id = self.t()
        topic = by_id[topic_id]
        if topic_id not in self.owned:
            topic = replace(topic, partitions=dict(topic.partitions))
            self.put_topic(topic)
            self.owned.add(topic_id)
        return topic.partitions

    def _clear_elr(self, topic_name: str) -> None:
        """ClearElrRecord (KIP-966, written after a ``min.insync.replicas`` change): empty
        ELR and LastKnownElr of every partition of the topic, or of every topic ('')."""
        topics, _by_id = self.t()
        names = [topic_name] if topic_name else list(topics)
        for name in names:
            topic = topics.get(name)
            if topic is None or not any(p.eligible_leader_replicas or p.last_known_elr
                                        for p in topic.partitions.values()):
                continue
            parts = self.parts(topic.topic_id)
            for i, p in parts.items():
                if p.eligible_leader_replicas or p.last_known_elr:
                    # as a PartitionChangeRecord clearing both (Kafka's TopicsDelta does it
                    # that way): the partition epoch moves
                    parts[i] = replace(p, eligible_leader_replicas=(), last_known_elr=(),
                                       partition_epoch=p.partition_epoch + 1)

    def elr_on(self) -> bool:
        feats = self.features if self.features is not None else self.img.features
        return feats.get(ELR_FEATURE, 0) >= 1

    def _drop_elr(self) -> None:
        """``eligible.leader.replicas.version`` below 1: no partition keeps ELR or
        LastKnownElr. Kafka's snapshots leave both out then (``PartitionRegistration.toRecord``),
        so dropping them here keeps the live image equal to one reloaded from a snapshot (no
        partition epoch moves: nothing was written for the partitions)."""
        topics, _by_id = self.t()
        for topic in list(topics.values()):
            if any(p.eligible_leader_replicas or p.last_known_elr
                   for p in topic.partitions.values()):
                parts = self.parts(topic.topic_id)
                for i, p in parts.items():
                    if p.eligible_leader_replicas or p.last_known_elr:
                        parts[i] = replace(p, eligible_leader_replicas=(), last_known_elr=())

    def replay(self, rec: Any) -> None:
        name = type(rec).__name__
        if name == "TopicRecord":
            self.put_topic(TopicImage(rec.name, rec.topic_id, {}))
            self.owned.add(rec.topic_id)
        elif name == "PartitionRecord":
            parts = self.parts(rec.topic_id)
            elr_on = self.elr_on()  # (a controller writes no ELR with the feature off)
            parts[rec.partition_id] = PartitionImage(
                rec.partition_id,
                tuple(rec.replicas),
                tuple(rec.isr),
                rec.leader,
                rec.leader_epoch,
                rec.partition_epoch,
                tuple(rec.eligible_leader_replicas or ()) if elr_on else (),
                tuple(rec.last_known_elr or ()) if elr_on else (),
                _directories(rec.directories, rec.replicas),
                tuple(rec.adding_replicas or ()),
                tuple(rec.removing_replicas or ()),
            )
        elif name == "PartitionChangeRecord":
            parts = self.parts(rec.topic_id)
            old = parts[rec.partition_id]
            new = old
            if rec.isr is not None:
                new = replace(new, isr=tuple(rec.isr))
            if rec.replicas is not None:
                new = replace(new, replicas=tuple(rec.replicas))
                if rec.directories is None and old.directories:
                    # as Kafka's merge: a replica keeps its directory, a new one is UNASSIGNED
                    known = dict(zip(old.replicas, old.directories, strict=True))
                    new = replace(new, directories=_directories(
                        [known.get(r, uuid.UUID(int=0)) for r in new.replicas], new.replicas))
            if rec.directories is not None:
                new = replace(new, directories=_directories(rec.directories, new.replicas))
            if rec.adding_replicas is not None:
                new = replace(new, adding_replicas=tuple(rec.adding_replicas))
            if rec.removing_replicas is not None:
                new = replace(new, removing_replicas=tuple(rec.removing_replicas))
            if rec.eligible_leader_replicas is not None and self.elr_on():
                new = replace(new, eligible_leader_replicas=tuple(rec.eligible_leader_replicas))
            if rec.last_known_elr is not None and self.elr_on():
                new = replace(new, last_known_elr=tuple(rec.last_known_elr))
            if rec.leader != -2:
                new = replace(new, leader=rec.leader, leader_epoch=old.leader_epoch + 1)
            new = replace(new, partition_epoch=old.partition_epoch + 1)
            parts[rec.partition_id] = new
        elif name == "ClearElrRecord":
            self._clear_elr(rec.topic_name)
        elif name == "RemoveTopicRecord":
            topics, by_id = self.t()
            self.owned.discard(rec.topic_id)
            gone = by_id.pop(rec.topic_id) if rec.topic_id in by_id else None
            if gone is not None:
                topics.pop(gone.name, None)
                self.c().pop((RESOURCE_TOPIC, gone.name), None)
        elif name == "ConfigRecord":
            configs = self.c()
            key = (rec.resource_type, rec.resource_name)
            cur = dict(configs.get(key, {}))
            if rec.value is None:
                cur.pop(rec.name, None)
            else:
                cur[rec.name] = rec.value
            if cur:
                configs[key] = cur
            else:
                configs.pop(key, None)
        elif name == "FeatureLevelRecord":
            feats = self.f()
            self.recorded = self.recorded | {rec.name}
            if rec.feature_level == 0:
                feats.pop(rec.name, None)
            else:
                feats[rec.name] = rec.feature_level
            if rec.name == ELR_FEATURE and rec.feature_level < 1:
                self._drop_elr()
        elif name == "RegisterBrokerRecord":
            self.b()[rec.broker_id] = BrokerImage(
                rec.broker_id,
                rec.incarnation_id,
                rec.broker_epoch,
                tuple(
                    Endpoint(e.name, e.host, e.port, e.security_protocol) for e in rec.end_points
                ),
                rec.rack,
                rec.fenced,
                rec.in_controlled_shutdown,
                {f.name: (f.min_supported_version, f.max_supported_version) for f in rec.features},
                tuple(rec.log_dirs),
            )
        elif name == "UnregisterBrokerRecord":
            self.b().pop(rec.broker_id, None)
        elif name in ("FenceBrokerRecord", "UnfenceBrokerRecord"):
            brokers = self.b()
            old_b = brokers.get(rec.id)
            if old_b is not None:
                brokers[rec.id] = replace(old_b, fenced=(name == "FenceBrokerRecord"))
        elif name == "BrokerRegistrationChangeRecord":
            brokers = self.b()
            old_b = brokers.get(rec.broker_id)
            if old_b is not None:
                fenced = old_b.fenced if rec.fenced == 0 else rec.fenced == 1
                shut = (
                    old_b.in_controlled_shutdown
                    if rec.in_controlled_shutdown == 0
                    else rec.in_controlled_shutdown == 1
                )
                dirs = tuple(rec.log_dirs) if rec.log_dirs else old_b.log_dirs
                brokers[rec.broker_id] = replace(old_b, fenced=fenced, in_controlled_shutdown=shut,
                                                 log_dirs=dirs)
        elif name == "ProducerIdsRecord":
            self.next_pid = max(self.next_pid, rec.next_producer_id)
        elif name == "ClientQuotaRecord":
            quotas = self.q()
            entity: QuotaEntity = tuple(sorted((e.entity_type, e.entity_name) for e in rec.entity))
            values = dict(quotas.get(entity, {}))
            if rec.remove:
                values.pop(rec.key, None)
            else:
                values[rec.key] = rec.value
            if values:
                quotas[entity] = values
            else:
                quotas.pop(entity, None)
        elif name == "UserScramCredentialRecord":
            scram = self.s()
            creds = dict(scram.get(rec.name, {}))
            creds[rec.mechanism] = ScramCredential(
                bytes(rec.salt), bytes(rec.stored_key), bytes(rec.server_key), rec.iterations
            )
            scram[rec.name] = creds
        elif name == "RemoveUserScramCredentialRecord":
            scram = self.s()
            creds = dict(scram.get(rec.name, {}))
            creds.pop(rec.mechanism, None)
            if creds:
                scram[rec.name] = creds
            else:
                scram.pop(rec.name, None)
        elif name == "AccessControlEntryRecord":
            self.a()[rec.id] = acl_of_record(rec)
        elif name == "RemoveAccessControlEntryRecord":
            self.a().pop(rec.id, None)
        elif name == "DelegationTokenRecord":
            self.tk()[rec.token_id] = info_of_record(rec)
        elif name == "RemoveDelegationTokenRecord":
            self.tk().pop(rec.token_id, None)
        # NoOpRecord and records we do not model change nothing.

    def build(self, offset: int, epoch: int) -> MetadataImage:
        img = self.img
        return MetadataImage(
            offset=offset,
            epoch=epoch,
            topics=self.topics if self.topics is not None else img.topics,
            topics_by_id=self.by_id if self.by_id is not None else img.topics_by_id,
            configs=self.configs if self.configs is not None else img.configs,
            brokers=self.brokers if self.brokers is not None else img.brokers,
            features=self.features if self.features is not None else img.features,
            features_recorded=self.recorded,
            next_producer_id=self.next_pid,
            client_quotas=self.quotas if self.quotas is not None else img.client_quotas,
            scram=self.scram if self.scram is not None else img.scram,
            acls=self.acls if self.acls is not None else img.acls,
            tokens=self.tokens if self.tokens is not None else img.tokens,
        )


def apply(image: MetadataImage, records: list[Any], offset: int, epoch: int) -> MetadataImage:
    """A new image with ``records`` replayed; ``offset`` is the offset of the last one."""
    b = _Builder(image)
    for rec in records:
        b.replay(rec)
    return b.build(offset, epoch)
