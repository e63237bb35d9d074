"""``make test-fast`` runs the modules of tests/fast_tests.txt: each must exist and must not
reach for a broker process, a cluster, Java, Docker or Spark (checked on the module's names)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: names whose use means a process, the JVM, Docker or Spark
SLOW_NAMES = {"subprocess", "BrokerProcess", "LocalCluster", "replication_cluster",
              "ReplicationCluster", "JavaTools", "kafka_dist", "running_kafka", "pyspark",
              "docker_env", "interop_kraft"}
#: fixtures (tests/conftest.py, the kafkawire plugin) that start one
SLOW_FIXTURES = {"broker", "own_broker", "raw", "spark", "small_disk", "java_line",
                 "kafkawire_cluster", "kafkawire_bootstrap", "kafkawire_broker"}


def listed() -> list[Path]:
    lines = (ROOT / "tests" / "fast_tests.txt").read_text().splitlines()
    return [ROOT / line.strip() for line in lines if line.strip() and not line.startswith("#")]


def test_the_fast_tier_starts_no_process() -> None:
    files = listed()
    assert files and all(f.is_file() for f in files), [f for f in files if not f.is_file()]
    for f in files:
        tree = ast.parse(f.read_text())
        used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        # a test's arguments are fixtures, except those it is parametrized over
        params = {name.strip() for n in ast.walk(tree) if isinstance(n, ast.Call)
                  and getattr(n.func, "attr", "") == "parametrize" and n.args
                  and isinstance(n.args[0], ast.Constant)
                  for name in str(n.args[0].value).split(",")}
        params |= {e.value for n in ast.walk(tree) if isinstance(n, ast.Call)
                   and getattr(n.func, "attr", "") == "parametrize" and n.args
                   and isinstance(n.args[0], ast.Tuple)
                   for e in n.args[0].elts if isinstance(e, ast.Constant)}
        fixtures = {a.arg for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
                    and n.name.startswith("test") for a in n.args.args} - params
        used |= {alias.name.split(".")[-1] for n in ast.walk(tree)
                 if isinstance(n, (ast.Import, ast.ImportFrom)) for alias in n.names}
        used |= {(n.module or "").split(".")[-1] for n in ast.walk(tree)
                 if isinstance(n, ast.ImportFrom)}
        assert not used & SLOW_NAMES, (f.name, sorted(used & SLOW_NAMES))
        assert not fixtures & SLOW_FIXTURES, (f.name, sorted(fixtures & SLOW_FIXTURES))
