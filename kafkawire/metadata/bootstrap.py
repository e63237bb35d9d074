"""A new cluster's first metadata records: ``bootstrap.checkpoint``, as Kafka's format writes it.

``kafkawire format`` writes the bootstrap records into ``bootstrap.checkpoint`` (snapshot
layout, offset 0): the finalized feature levels (``--release-version`` and ``--feature
name=level``, checked against what this node supports, with Kafka 4.3.1's messages; a level of
0 leaves the feature out, as Kafka does) and any ``--add-scram`` credentials. On the first
start of a formatted node (empty metadata log) ``first_start_records`` turns them into the
log's first batch; a feature the file does not finalize gets a level-0 record there, so that
kafkawire's start-up defaults (``group.version``, ``transaction.version``) respect the format
decision. Without a ``bootstrap.checkpoint`` the node bootstraps as before.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
from pathlib import Path
from typing import Any

from kraft import controller
from kraft.scram import MAX_ITERATIONS, MIN_ITERATIONS, scram_keys
from kraft.snapshot import SnapshotError, SnapshotId, decode_snapshot
from protocol._generated.config_record import ConfigRecord
from protocol._generated.feature_level_record import FeatureLevelRecord
from protocol._generated.user_scram_credential_record import UserScramCredentialRecord

BOOTSTRAP_CHECKPOINT = "bootstrap.checkpoint"
METADATA_VERSION_NAMES = {controller.METADATA_VERSION_LEVEL: "4.3-IV0"}
#: features finalized on a new cluster and their levels (Kafka 4.3.1's, within what we serve)
DEFAULT_LEVELS = {
    "metadata.version": controller.METADATA_VERSION_LEVEL,
    "eligible.leader.replicas.version": controller.ELR_VERSION_LEVEL,
    "group.version": 1,
    "transaction.version": 2,
}
SCRAM_MECHANISMS = {"SCRAM-SHA-256": (1, "sha256"), "SCRAM-SHA-512": (2, "sha512")}
DEFAULT_SCRAM_ITERATIONS = 4096


class BootstrapError(ValueError):
    """A format option Kafka refuses; the message is Kafka's."""


def supported_features() -> dict[str, tuple[int, int]]:
    from kafkawire.broker import SUPPORTED_FEATURES

    return SUPPORTED_FEATURES


def parse_release_version(text: str) -> int:
    for level, name in METADATA_VERSION_NAMES.items():
        if text in (name, name.split("-")[0]):
            return level
    raise BootstrapError(f"Unknown metadata.version '{text}'. Supported metadata.version are: "
                         + ", ".join(METADATA_VERSION_NAMES.values()))


def parse_feature(text: str, dynamic_quorum: bool) -> tuple[str, int]:
    name, eq, level = text.partition("=")
    if not eq:
        raise BootstrapError(
            f"Can't parse feature=level string {text}: equals sign not found.")
    name = name.strip()
    supported = supported_features()
    if name not in supported or name == "metadata.version":
        names = sorted(n for n in supported if n != "metadata.version")
        raise BootstrapError(
            f"Unsupported feature: {name}. Supported features are: {', '.join(names)}")
    try:
        value = int(level.strip())
    except ValueError:
        raise BootstrapError(f"Can't parse feature=level string {text}: "
                             f"unable to parse {level.strip()} as a short.") from None
    lo, hi = supported[name]
    if not (value == 0 or lo <= value <= hi):
        raise BootstrapError(f"No feature:{name} with feature level {value}")
    if name == "kraft.version" and value >= 1 and not dynamic_quorum:
        raise BootstrapError(
            "Cannot set kraft.version to 1 unless controller.quorum.voters is empty and one of "
            "the flags --standalone, --initial-controllers, or --no-initial-controllers is "
            "used. For dynamic controllers support, try using one of --standalone, "
            "--initial-controllers, or --no-initial-controllers and removing "
            "controller.quorum.voters.")
    return name, value


_SCRAM = re.compile(r"^([A-Z0-9-]+)=\[(.*)\]$")


def parse_add_scram(text: str) -> UserScramCredentialRecord:
    """``SCRAM-SHA-256=[name=alice,password=secret]`` (or ``iterations=``, ``salt=`` and
    ``saltedpassword=`` in base64), as ``kafka-storage format --add-scram``."""
    m = _SCRAM.match(text.strip())
    if m is None:
        raise BootstrapError(f"Failed to parse add-scram argument {text!r}: expected "
                             "MECHANISM=[name=...,password=...]")
    mech_name, body = m.groups()
    if mech_name not in SCRAM_MECHANISMS:
        raise BootstrapError(f"The add-scram mechanism {mech_name} is not supported.")
    mechanism, digest = SCRAM_MECHANISMS[mech_name]
    fields: dict[str, str] = {}
    for part in [p for p in body.split(",") if p]:
        k, eq, v = part.partition("=")
        if not eq:
            raise BootstrapError(f"Failed to parse add-scram entry {part!r}: expected key=value")
        fields[k.strip()] = v.strip().strip('"')
    if "name" not in fields:
        raise BootstrapError("You must supply 'name' to add-scram")
    iterations = int(fields.get("iterations", DEFAULT_SCRAM_ITERATIONS))
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise BootstrapError(f"The 'iterations' value must be >= {MIN_ITERATIONS} and <= "
                             f"{MAX_ITERATIONS} for add-scram")
    if "saltedpassword" in fields:
        if "salt" not in fields:
            raise BootstrapError("You must supply 'salt' with 'saltedpassword' to add-scram")
        salt = base64.b64decode(fields["salt"])
        salted = base64.b64decode(fields["saltedpassword"])
    elif "password" in fields:
        salt = base64.b64decode(fields["salt"]) if "salt" in fields else os.urandom(24)
        salted = hashlib.pbkdf2_hmac(digest, fields["password"].encode(), salt, iterations)
    else:
        raise BootstrapError("You must supply one of 'password' or 'saltedpassword' to add-scram")
    stored_key, server_key = scram_keys(digest, salted)
    return UserScramCredentialRecord(name=fields["name"], mechanism=mechanism, salt=salt,
                                     stored_key=stored_key, server_key=server_key,
                                     iterations=iterations)


def bootstrap_records(
    release_level: int | None = None,
    features: list[tuple[str, int]] | None = None,
    scram: list[UserScramCredentialRecord] | None = None,
) -> list[Any]:
    """What ``bootstrap.checkpoint`` holds: feature levels (level 0 left out) and credentials."""
    levels = dict(DEFAULT_LEVELS)
    if release_level is not None:
        levels["metadata.version"] = release_level
    for name, level in features or []:
        levels[name] = level
    out: list[Any] = [FeatureLevelRecord(name=n, feature_level=lv)
                      for n, lv in levels.items() if lv > 0]
    return out + list(scram or [])


def read_bootstrap(directory: Path) -> list[Any] | None:
    """The records of ``directory/bootstrap.checkpoint``, None when there is none."""
    path = directory / BOOTSTRAP_CHECKPOINT
    if not path.exists():
        return None
    try:
        records = decode_snapshot(path.read_bytes(), SnapshotId(0, 0)).records
    except SnapshotError as e:
        raise BootstrapError(f"{path}: {e}") from None
    supported = supported_features()
    for r in records:
        if isinstance(r, FeatureLevelRecord) and r.feature_level > 0:
            lo, hi = supported.get(r.name, (0, 0))
            if not lo <= r.feature_level <= hi:
                # as Kafka's controller: a finalized level the node cannot serve is refused
                raise BootstrapError(
                    f"{path} finalizes {r.name} at level {r.feature_level}, which this node "
                    f"does not support (levels {lo}-{hi}): format it with kafkawire format, "
                    f"or with kafka-storage format --feature {r.name}=0")
    return records


def first_start_records(bootstrap: list[Any], min_insync_replicas: int) -> list[Any]:
    """The first batch of a formatted cluster's metadata log."""
    out = list(bootstrap)
    named = {r.name for r in bootstrap if isinstance(r, FeatureLevelRecord)}
    out += [FeatureLevelRecord(name=n, feature_level=0) for n in DEFAULT_LEVELS if n not in named]
    elr = next((r.feature_level for r in bootstrap if isinstance(r, FeatureLevelRecord)
                and r.name == "eligible.leader.replicas.version"), 0)
    if elr >= 1:  # Kafka's cluster-wide min.insync.replicas under ELR (controller.bootstrap_records)
        out.append(ConfigRecord(resource_type=4, resource_name="", name="min.insync.replicas",
                                value=str(min_insync_replicas)))
    return out
