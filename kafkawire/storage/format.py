"""Log directory formatting, as Kafka's ``kafka-storage format`` does it.

``kafkawire format --cluster-id ID [server.properties] [--override key=value]...`` formats every
directory of ``log.dirs`` plus ``metadata.log.dir``: ``bootstrap.checkpoint`` (a snapshot-format
file with the feature levels a new cluster starts with), then ``meta.properties`` (``node.id``,
``directory.id``, ``version=1``, ``cluster.id``; written last, it marks the directory
formatted). For a dynamic quorum (KIP-853: ``--standalone`` or ``--initial-controllers
id@host:port:directory-id,...``) the metadata directory of a controller also gets
``__cluster_metadata-0/00000000000000000000-0000000000.checkpoint`` holding
``kraft.version`` 1 and the initial voters, and a voter's metadata directory takes the
directory id given for it. The checks and messages are Kafka 4.3.1's.

A node whose configuration names a quorum (``controller.quorum.voters`` or
``controller.quorum.bootstrap.servers``) must be formatted before it starts
(``check_formatted``); the implicit single node formats its directories on first start with a
fresh cluster id (``format_or_check``), so ``make run`` needs no format step.
"""

from __future__ import annotations

import base64
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafkawire.config.broker_config import BrokerConfig, read_properties
from kafkawire.metadata.bootstrap import (
    BOOTSTRAP_CHECKPOINT,
    METADATA_VERSION_NAMES,
    BootstrapError,
    bootstrap_records,
    parse_add_scram,
    parse_feature,
    parse_release_version,
)
from kraft.snapshot import SnapshotId, encode_snapshot
from protocol._generated.voters_record import VotersRecord

META_PROPERTIES = "meta.properties"
#: the KRaft protocol versions this node supports (VotersRecord.KRaftVersionFeature)
KRAFT_VERSION_RANGE = (0, 1)


class StorageError(Exception):
    pass


def uuid_to_base64(u: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def base64_to_uuid(text: str) -> uuid.UUID:
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"{text!r} is not a 16-byte uuid")
    return uuid.UUID(bytes=raw)


def random_uuid() -> str:
    """A random id as Kafka's ``Uuid.randomUuid`` (``kafka-storage random-uuid``): URL-safe
    base64 of 16 random bytes, never one of the reserved ids, never starting with '-' (it
    would read as a command-line option)."""
    while True:
        u = uuid.uuid4()
        text = uuid_to_base64(u)
        if u.int > 100 and not text.startswith("-"):
            return text


new_cluster_id = random_uuid


def read_meta(path: Path) -> dict[str, str]:
    """``meta.properties``, read by Java's rules as Kafka reads it."""
    return read_properties(path)


def write_meta(directory: Path, cluster_id: str, node_id: int, directory_id: str) -> None:
    """``meta.properties`` in Kafka's layout (a Java properties file: date comment, then the
    keys in the order Kafka's writer leaves them), through a temp file and a rename."""
    directory.mkdir(parents=True, exist_ok=True)
    mp = directory / META_PROPERTIES
    tmp = mp.with_suffix(".tmp")
    stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime())
    tmp.write_text(
        f"#\n#{stamp}\nnode.id={node_id}\ndirectory.id={directory_id}\nversion=1\n"
        f"cluster.id={cluster_id}\n"
    )
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    tmp.replace(mp)


def storage_dirs(cfg: BrokerConfig) -> list[Path]:
    dirs = list(cfg.log_dirs)
    if cfg.metadata_log_dir not in dirs:
        dirs.append(cfg.metadata_log_dir)
    return dirs


def _check_meta(mp: Path, node_id: int, found: str | None) -> str | None:
    meta = read_meta(mp)
    if int(meta.get("node.id", node_id)) != node_id:
        raise StorageError(
            f"{mp}: stored node.id {meta.get('node.id')} does not match node.id {node_id}"
        )
    cid = meta.get("cluster.id")
    if found is not None and cid != found:
        raise StorageError(f"{mp}: cluster id {cid} differs from {found}")
    return cid


def check_formatted(cfg: BrokerConfig) -> str:
    """A node of a configured cluster: every directory formatted, one cluster id, this node's
    id. Returns the cluster id; ``StorageError`` (one line) otherwise."""
    found: str | None = None
    missing = []
    for d in storage_dirs(cfg):
        mp = d / META_PROPERTIES
        if not mp.exists():
            missing.append(str(d))
            continue
        found = _check_meta(mp, cfg.node_id, found)
    if found is None:
        raise StorageError(
            f"No readable meta.properties files found in {', '.join(missing)}: format this "
            "node first (kafkawire format --cluster-id ID [server.properties], as "
            "kafka-storage format -t ID -c server.properties)")
    if missing:
        raise StorageError(f"log directory {missing[0]} is not formatted (the others are, "
                           f"for cluster {found}): run kafkawire format --ignore-formatted")
    configured = cfg.values.get("cluster.id")
    if configured and configured != found:
        raise StorageError(f"configured cluster.id {configured} differs from stored {found}")
    return found


def format_or_check(cfg: BrokerConfig, now_ms: int) -> str:
    """The start-up check: a configured cluster must be formatted; the implicit single node
    formats what is new (with the stored or configured cluster id, else a fresh one)."""
    if cfg.names_a_quorum:
        return check_formatted(cfg)
    found: str | None = None
    for d in storage_dirs(cfg):
        mp = d / META_PROPERTIES
        if mp.exists():
            found = _check_meta(mp, cfg.node_id, found)
    configured = cfg.values.get("cluster.id")
    if configured is not None and found is not None and configured != found:
        raise StorageError(f"configured cluster.id {configured} differs from stored {found}")
    cid = found or configured or random_uuid()
    for d in storage_dirs(cfg):
        if not (d / META_PROPERTIES).exists():
            d.mkdir(parents=True, exist_ok=True)
            _write_bootstrap(d, now_ms)
            write_meta(d, cid, cfg.node_id, random_uuid())
    return cid


# ---- kafkawire format ---------------------------------------------------------------------


@dataclass(frozen=True)
class InitialController:
    node_id: int
    host: str
    port: int
    directory_id: str


def parse_initial_controllers(raw: str) -> list[InitialController]:
    """``--initial-controllers``: ``id@host:port:directory-id`` entries, comma-separated."""
    out = []
    for entry in [e.strip() for e in raw.split(",") if e.strip()]:
        node, at, rest = entry.partition("@")
        if not at:
            raise StorageError(f"No '@' found in {entry!r}: expected id@host:port:directory-id")
        try:
            node_id = int(node)
        except ValueError:
            raise StorageError(f"Failed to parse node id {node!r} in {entry!r}") from None
        address, sep, directory = rest.rpartition(":")
        host, sep2, port = address.rpartition(":")
        if not sep or not sep2 or not port.isdigit():
            raise StorageError("No colon following port could be found.")
        try:
            base64_to_uuid(directory)
        except ValueError:
            raise StorageError(f"Invalid directory id {directory!r} in {entry!r}") from None
        out.append(InitialController(node_id, host.strip("[]"), int(port), directory))
    if not out:
        raise StorageError("--initial-controllers needs at least one id@host:port:directory-id")
    return out


@dataclass(frozen=True)
class FormatOptions:
    cluster_id: str
    standalone: bool = False
    initial_controllers: str | None = None
    no_initial_controllers: bool = False
    ignore_formatted: bool = False
    release_version: str | None = None
    features: tuple[str, ...] = ()
    add_scram: tuple[str, ...] = ()


def _bootstrap_for(cfg: BrokerConfig, opts: FormatOptions, dynamic: bool) -> list[Any]:
    try:
        release = (parse_release_version(opts.release_version)
                   if opts.release_version is not None else None)
        features = [parse_feature(f, dynamic) for f in opts.features]
        scram = [parse_add_scram(a) for a in opts.add_scram]
    except BootstrapError as e:
        raise StorageError(str(e)) from None
    return bootstrap_records(release, features, scram)


def _write_bootstrap(directory: Path, now_ms: int, records: list[Any] | None = None) -> None:
    data = encode_snapshot(bootstrap_records() if records is None else records,
                           SnapshotId(0, 0), last_contained_log_timestamp=0, now_ms=now_ms)
    tmp = directory / (BOOTSTRAP_CHECKPOINT + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(directory / BOOTSTRAP_CHECKPOINT)


def _controller_endpoints(cfg: BrokerConfig) -> list[tuple[str, str, int]]:
    names = cfg.controller_listener_names
    return [(lst.name, lst.host if lst.host not in ("0.0.0.0", "::", "") else "localhost",
             lst.port) for lst in cfg.listeners if lst.name in names]


def _initial_voters(cfg: BrokerConfig, opts: FormatOptions) -> list[InitialController] | None:
    """The dynamic quorum's initial voters, or None for a static/joining node."""
    has_voters = bool(str(cfg.values["controller.quorum.voters"] or "").strip())
    dynamic = opts.standalone or opts.initial_controllers is not None
    is_controller = "controller" in cfg.process_roles
    if dynamic and has_voters:
        raise StorageError(
            "You cannot specify controller.quorum.voters and format the node with "
            "--initial-controllers or --standalone. If you want to use dynamic quorum, please "
            "remove controller.quorum.voters and specify controller.quorum.bootstrap.servers "
            "instead.")
    if opts.standalone and not is_controller:
        raise StorageError("You can only use --standalone on a controller.")
    if opts.initial_controllers is not None and not is_controller:
        raise StorageError("You can only use --initial-controllers on a controller.")
    if (cfg.names_a_quorum and is_controller and not has_voters and not dynamic
            and not opts.no_initial_controllers):
        raise StorageError(
            "Because controller.quorum.voters is not set on this controller, you must specify "
            "one of the following: --standalone, --initial-controllers, or "
            "--no-initial-controllers.")
    if opts.initial_controllers is not None:
        return parse_initial_controllers(opts.initial_controllers)
    if opts.standalone:
        endpoints = _controller_endpoints(cfg)
        if not endpoints:
            raise StorageError("--standalone needs a controller listener in listeners "
                               f"(one of controller.listener.names: "
                               f"{', '.join(sorted(cfg.controller_listener_names))})")
        _name, host, port = endpoints[0]
        return [InitialController(cfg.node_id, host, port, random_uuid())]
    return None


def voters_record(cfg: BrokerConfig, voters: list[InitialController]) -> VotersRecord:
    name = sorted(cfg.controller_listener_names)[0]
    first = [n for n, _h, _p in _controller_endpoints(cfg)]
    if first:
        name = first[0]
    return VotersRecord(version_=0, voters=[
        VotersRecord.Voter(
            voter_id=v.node_id,
            voter_directory_id=base64_to_uuid(v.directory_id),
            endpoints=[VotersRecord.Endpoint(name=name, host=v.host, port=v.port)],
            k_raft_version_feature=VotersRecord.KRaftVersionFeature(
                min_supported_version=KRAFT_VERSION_RANGE[0],
                max_supported_version=KRAFT_VERSION_RANGE[1]),
        ) for v in voters
    ])


def format_storage(cfg: BrokerConfig, opts: FormatOptions, out: Callable[[str], None],
                   now_ms: int) -> None:
    """``kafkawire format``: see the module docstring. ``StorageError`` with Kafka's message
    when the options do not fit the configuration or a directory is already formatted."""
    if not opts.cluster_id.strip():
        raise StorageError("--cluster-id must not be empty (kafkawire random-uuid makes one)")
    voters = _initial_voters(cfg, opts)
    dynamic = voters is not None or opts.no_initial_controllers
    bootstrap = _bootstrap_for(cfg, opts, dynamic)
    dirs = storage_dirs(cfg)
    formatted = [d for d in dirs if (d / META_PROPERTIES).exists()]
    if formatted and not opts.ignore_formatted:
        raise StorageError(
            f"Log directory {formatted[0]} is already formatted. Use --ignore-formatted to "
            "ignore this directory and format the others.")
    empty = [d for d in dirs if d not in formatted]
    if not empty:
        out("All of the log directories are already formatted.")
        return
    for d in empty:
        directory_id = random_uuid()
        kind = "data directory"
        if d == cfg.metadata_log_dir:
            kind = "metadata directory"
            if voters is not None:
                kind = "dynamic metadata directory"
                mine = [v for v in voters if v.node_id == cfg.node_id]
                if mine:
                    kind = "dynamic metadata voter directory"
                    directory_id = mine[0].directory_id
        level = next(r.feature_level for r in bootstrap if getattr(r, "name", "") ==
                     "metadata.version")
        out(f"Formatting {kind} {d} with metadata.version {METADATA_VERSION_NAMES[level]}.")
        d.mkdir(parents=True, exist_ok=True)
        _write_bootstrap(d, now_ms, bootstrap)
        if voters is not None and d == cfg.metadata_log_dir:
            _write_voters_snapshot(d, voters_record(cfg, voters), now_ms)
        write_meta(d, opts.cluster_id, cfg.node_id, directory_id)


def _write_voters_snapshot(directory: Path, voters: VotersRecord, now_ms: int) -> None:
    part = directory / "__cluster_metadata-0"
    part.mkdir(parents=True, exist_ok=True)
    sid = SnapshotId(0, 0)
    data = encode_snapshot([], sid, last_contained_log_timestamp=now_ms, now_ms=now_ms,
                           kraft_version=1, voters=voters)
    final = part / sid.file_name
    tmp = part / (sid.file_name + ".part")
    tmp.write_bytes(data)
    os.chmod(tmp, 0o400)
    tmp.replace(final)
