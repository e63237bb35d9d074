"""The import direction of ARCHITECTURE.md section 1, checked with ast over every module.

protocol (0) <- log (1) <- kraft (2) <- groups, txn (3, siblings) <- kafkawire (4). Only
kafkawire may import trio, socket, threading, or read the wall clock / environment, and
unseeded randomness is kept out of the lower layers.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYER = {"protocol": 0, "log": 1, "kraft": 2, "groups": 3, "txn": 3, "kafkawire": 4}
RUNTIME_ONLY = {"trio", "socket", "threading", "asyncio", "selectors", "concurrent"}
FORBIDDEN_CALLS = {("time", "time"), ("time", "monotonic"), ("time", "time_ns"),
                   ("time", "monotonic_ns"), ("os", "environ"), ("os", "getenv")}
UNSEEDED_RANDOM = {"random", "randint", "choice", "shuffle", "uniform", "randrange", "sample"}


def modules() -> list[tuple[str, Path]]:
    out = []
    for pkg in LAYER:
        for p in sorted((ROOT / pkg).rglob("*.py")):
            out.append((pkg, p))
    return out


def imported_tops(tree: ast.AST) -> list[tuple[str, int]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name.split(".")[0], node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.module.split(".")[0], node.lineno))
    return out


@pytest.mark.parametrize("pkg,path", modules(), ids=lambda x: str(x))
def test_imports_go_down_only(pkg: str, path: Path) -> None:
    tree = ast.parse(path.read_text(), str(path))
    mine = LAYER[pkg]
    for top, line in imported_tops(tree):
        if top in LAYER and top != pkg:
            assert LAYER[top] < mine, f"{path}:{line} imports {top} (layer {LAYER[top]}) upward"
            assert not (pkg in ("groups", "txn") and top in ("groups", "txn")), (
                f"{path}:{line}: groups and txn are siblings"
            )
        if pkg != "kafkawire":
            assert top not in RUNTIME_ONLY, f"{path}:{line} imports {top} outside kafkawire/"
    if pkg == "kafkawire":
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            pair = (node.value.id, node.attr)
            assert pair not in FORBIDDEN_CALLS, f"{path}:{node.lineno} uses {pair[0]}.{pair[1]}"
            if node.value.id == "random" and node.attr in UNSEEDED_RANDOM:
                raise AssertionError(f"{path}:{node.lineno} uses unseeded random.{node.attr}")
        if isinstance(node, ast.ImportFrom) and node.module == "time":
            names = {a.name for a in node.names}
            assert not names & {"time", "monotonic", "time_ns", "monotonic_ns"}, (
                f"{path}:{node.lineno} imports the clock"
            )


def test_the_checker_catches_an_upward_import(tmp_path: Path) -> None:
    tree = ast.parse("from kafkawire.broker import Broker\nimport trio\n")
    tops = [t for t, _ in imported_tops(tree)]
    assert "kafkawire" in tops and "trio" in tops


# The partition-state layer (log/replica.py) is the only way above log/ to move a partition's
# high watermark or cut its log: handlers and coordinators go through it (docs/DESIGN.md).
LOG_ONLY_CALLS = {"update_high_watermark", "truncate_to", "truncate_fully_and_start_at",
                  "delete_records_before", "append_as_follower"}


# kraft/raft is the other replication layer: the Raft quorum owns ``__cluster_metadata``'s log
# (its high watermark, truncation on a diverging epoch) through its small log interface, as
# Kafka's KafkaRaftClient owns KafkaMetadataLog; data partitions go through log/replica.py.
@pytest.mark.parametrize(
    "pkg,path",
    [m for m in modules() if m[0] != "log" and "/kraft/raft/" not in str(m[1])],
    ids=lambda v: str(v).rsplit("/", 1)[-1],
)
def test_only_the_partition_layer_moves_the_high_watermark(pkg: str, path: Path) -> None:
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            name = node.func.attr
            if name in LOG_ONLY_CALLS:
                # a Partition's own methods of the same name are fine only when called on one
                target = ast.unparse(node.func.value)
                assert "log" not in target.lower(), f"{path}:{node.lineno} calls {target}.{name}"
