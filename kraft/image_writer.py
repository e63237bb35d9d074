"""The records that rebuild a ``MetadataImage``: what a metadata snapshot holds.

``apply(MetadataImage(), image_records(img), ...)`` equals ``img`` (apart from offset and epoch).
The order follows Kafka's ``MetadataImage.write``: features, brokers, topics (each TopicRecord
followed by its PartitionRecords), configs, client quotas, producer ids, SCRAM credentials.
A feature that a FeatureLevelRecord set to level 0 is written as a level-0 record so that the
start-up defaults keep treating it as decided (``MetadataImage.features_recorded``).
Records the image does not model (ACLs, delegation tokens) are not in the image, so not here.
PartitionRecord's ELR and LastKnownElr (tagged fields, KIP-966) are written only when
``eligible.leader.replicas.version`` >= 1 and not empty, as Kafka writes them.
"""

from __future__ import annotations

import uuid
from typing import Any

from kraft.image import ELR_FEATURE, MetadataImage
from protocol._generated.client_quota_record import ClientQuotaRecord
from protocol._generated.config_record import ConfigRecord
from protocol._generated.feature_level_record import FeatureLevelRecord
from protocol._generated.partition_record import PartitionRecord
from protocol._generated.producer_ids_record import ProducerIdsRecord
from protocol._generated.register_broker_record import RegisterBrokerRecord
from protocol._generated.topic_record import TopicRecord
from protocol._generated.user_scram_credential_record import UserScramCredentialRecord

_ZERO = uuid.UUID(int=0)


def _features(img: MetadataImage) -> list[Any]:
    out: list[Any] = []
    names = [n for n in ("metadata.version",) if n in img.features]
    names += sorted(n for n in img.features if n != "metadata.version")
    for name in names:
        out.append(FeatureLevelRecord(name=name, feature_level=img.features[name]))
    for name in sorted(img.features_recorded - set(img.features)):
        out.append(FeatureLevelRecord(name=name, feature_level=0))
    return out


def _brokers(img: MetadataImage) -> list[Any]:
    return [
        RegisterBrokerRecord(
            broker_id=b.broker_id,
            incarnation_id=b.incarnation_id,
            broker_epoch=b.epoch,
            end_points=[
                RegisterBrokerRecord.BrokerEndpoint(
                    name=e.listener, host=e.host, port=e.port, security_protocol=e.security_protocol
                )
                for e in b.endpoints
            ],
            features=[
                RegisterBrokerRecord.BrokerFeature(
                    name=k, min_supported_version=lo, max_supported_version=hi
                )
                for k, (lo, hi) in sorted(b.features.items())
            ],
            rack=b.rack,
            fenced=b.fenced,
            in_controlled_shutdown=b.in_controlled_shutdown,
            log_dirs=list(b.log_dirs),
        )
        for _id, b in sorted(img.brokers.items())
    ]


def _topics(img: MetadataImage) -> list[Any]:
    # the KIP-966 tagged fields only with eligible.leader.replicas.version >= 1 and only when
    # not empty, as Kafka's PartitionRegistration.toRecord (the image holds none otherwise)
    elr = img.features.get(ELR_FEATURE, 0) >= 1
    out: list[Any] = []
    for name, topic in sorted(img.topics.items()):
        out.append(TopicRecord(name=name, topic_id=topic.topic_id))
        for p, part in sorted(topic.partitions.items()):
            out.append(PartitionRecord(
                partition_id=p,
                topic_id=topic.topic_id,
                replicas=list(part.replicas),
                isr=list(part.isr),
                removing_replicas=list(part.removing_replicas),
                adding_replicas=list(part.adding_replicas),
                leader=part.leader,
                leader_recovery_state=0,
                leader_epoch=part.leader_epoch,
                partition_epoch=part.partition_epoch,
                directories=(list(part.directories)
                             if len(part.directories) == len(part.replicas)
                             else [_ZERO] * len(part.replicas)),
                eligible_leader_replicas=(list(part.eligible_leader_replicas) or None
                                          if elr else None),
                last_known_elr=list(part.last_known_elr) or None if elr else None,
            ))
    return out


def _configs(img: MetadataImage) -> list[Any]:
    return [
        ConfigRecord(resource_type=rtype, resource_name=rname, name=k, value=v)
        for (rtype, rname), values in sorted(img.configs.items())
        for k, v in sorted(values.items())
    ]


def _quotas(img: MetadataImage) -> list[Any]:
    return [
        ClientQuotaRecord(
            entity=[ClientQuotaRecord.EntityData(entity_type=t, entity_name=n) for t, n in entity],
            key=key, value=value, remove=False,
        )
        for entity, values in sorted(img.client_quotas.items(), key=lambda kv: repr(kv[0]))
        for key, value in sorted(values.items())
    ]


def _scram(img: MetadataImage) -> list[Any]:
    return [
        UserScramCredentialRecord(
            name=user, mechanism=mech, salt=c.salt, stored_key=c.stored_key,
            server_key=c.server_key, iterations=c.iterations,
        )
        for user, creds in sorted(img.scram.items())
        for mech, c in sorted(creds.items())
    ]


def image_records(img: MetadataImage) -> list[Any]:
    """Metadata records that replayed on an empty image rebuild ``img``."""
    out = _features(img) + _brokers(img) + _topics(img) + _configs(img) + _quotas(img)
    if img.next_producer_id > 0:
        out.append(ProducerIdsRecord(broker_id=-1, broker_epoch=-1,
                                     next_producer_id=img.next_producer_id))
    return out + _scram(img)
