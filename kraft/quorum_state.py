"""The ``quorum-state`` file of ``__cluster_metadata-0``, as Kafka's FileQuorumState writes it.

One line of compact JSON: the QuorumStateData fields of the file's version plus
``data_version``. Version 0 (``kraft.version`` 0, static voters) holds ``clusterId`` (always
empty), ``leaderId``, ``leaderEpoch``, ``votedId``, ``appliedOffset`` (always 0) and
``currentVoters``; version 1 (``kraft.version`` 1, KIP-853) holds ``leaderId``, ``leaderEpoch``,
``votedId`` and ``votedDirectoryId`` (a Kafka base64 uuid, all zeros when none). Absent ids
are -1. Pure: the driver (kafkawire) reads and writes the file (``.tmp``, fsync, rename).
"""

from __future__ import annotations

import base64
import json
import uuid
from dataclasses import dataclass, field

QUORUM_STATE_FILE = "quorum-state"
ZERO_UUID = uuid.UUID(int=0)


class QuorumStateError(Exception):
    """A quorum-state file that cannot be read."""


def uuid_to_kafka(u: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def kafka_to_uuid(text: str) -> uuid.UUID:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        return uuid.UUID(bytes=raw)
    except (ValueError, TypeError):
        raise QuorumStateError(f"invalid uuid {text!r}") from None


@dataclass(frozen=True)
class QuorumState:
    leader_id: int = -1
    leader_epoch: int = -1
    voted_id: int = -1
    voted_directory_id: uuid.UUID = ZERO_UUID
    #: only in data_version 0 (a static quorum): the voter ids
    current_voters: tuple[int, ...] = field(default_factory=tuple)
    data_version: int = 0


def encode_quorum_state(state: QuorumState) -> str:
    """The file's text, field for field as Kafka writes it."""
    if state.data_version == 0:
        doc: dict[str, object] = {
            "clusterId": "",
            "leaderId": state.leader_id,
            "leaderEpoch": state.leader_epoch,
            "votedId": state.voted_id,
            "appliedOffset": 0,
            "currentVoters": [{"voterId": v} for v in state.current_voters],
        }
    elif state.data_version == 1:
        doc = {
            "leaderId": state.leader_id,
            "leaderEpoch": state.leader_epoch,
            "votedId": state.voted_id,
            "votedDirectoryId": uuid_to_kafka(state.voted_directory_id),
        }
    else:
        raise ValueError(f"unknown quorum-state data_version {state.data_version}")
    doc["data_version"] = state.data_version
    return json.dumps(doc, separators=(",", ":"))


def _int(doc: dict[str, object], key: str, default: int) -> int:
    value = doc.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool):
        raise QuorumStateError(f"{key} is not an integer: {value!r}")
    return value


def decode_quorum_state(text: str) -> QuorumState:
    """Parse a quorum-state file (either version); ``QuorumStateError`` if it is not one."""
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise QuorumStateError(f"not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise QuorumStateError("not a JSON object")
    version = _int(doc, "data_version", -1)
    if version not in (0, 1):
        raise QuorumStateError(f"unknown data_version {doc.get('data_version')!r}")
    voters: tuple[int, ...] = ()
    directory = ZERO_UUID
    if version == 0:
        raw = doc.get("currentVoters") or []
        if not isinstance(raw, list) or not all(isinstance(v, dict) for v in raw):
            raise QuorumStateError("currentVoters is not a list of voters")
        voters = tuple(_int(v, "voterId", -1) for v in raw)
    else:
        text_id = doc.get("votedDirectoryId", "AAAAAAAAAAAAAAAAAAAAAA")
        if not isinstance(text_id, str):
            raise QuorumStateError("votedDirectoryId is not a string")
        directory = kafka_to_uuid(text_id)
    return QuorumState(
        leader_id=_int(doc, "leaderId", -1),
        leader_epoch=_int(doc, "leaderEpoch", -1),
        voted_id=_int(doc, "votedId", -1),
        voted_directory_id=directory,
        current_voters=voters,
        data_version=version,
    )
