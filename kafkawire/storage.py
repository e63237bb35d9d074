"""Log directory formatting: ``meta.properties`` as Kafka writes it.

On first start an empty log dir is formatted with a fresh cluster id (22 characters of
URL-safe base64 of a random UUID, Kafka's format) and a directory id; later starts check the
node id and cluster id still match and refuse to start otherwise.
"""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

META_PROPERTIES = "meta.properties"


class StorageError(Exception):
    pass


def new_cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def uuid_to_base64(u: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def read_meta(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        k, _, v = line.partition("=")
        out[k.strip()] = v.strip()
    return out


def format_or_check(log_dirs: list[Path], node_id: int, cluster_id: str | None) -> str:
    """Format the dirs that are new; check the rest. Returns the cluster id."""
    found: str | None = None
    for d in log_dirs:
        mp = d / META_PROPERTIES
        if mp.exists():
            meta = read_meta(mp)
            if int(meta.get("node.id", node_id)) != node_id:
                raise StorageError(
                    f"{mp}: stored node.id {meta.get('node.id')} does not match node.id {node_id}"
                )
            cid = meta.get("cluster.id")
            if found is not None and cid != found:
                raise StorageError(f"{mp}: cluster id {cid} differs from {found}")
            found = cid
    if cluster_id is not None and found is not None and cluster_id != found:
        raise StorageError(f"configured cluster.id {cluster_id} differs from stored {found}")
    cid = found or cluster_id or new_cluster_id()
    for d in log_dirs:
        d.mkdir(parents=True, exist_ok=True)
        mp = d / META_PROPERTIES
        if not mp.exists():
            tmp = mp.with_suffix(".tmp")
            tmp.write_text(
                "#\n#Written by kafkawire\n"
                f"cluster.id={cid}\n"
                f"directory.id={uuid_to_base64(uuid.uuid4())}\n"
                f"node.id={node_id}\n"
                "version=1\n"
            )
            tmp.replace(mp)
    return cid
