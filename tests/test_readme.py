"""The README's examples, run as written: the quick start (Python and CLI), the pytest
example of "In your own tests" and the Spark section. Only the bootstrap address changes
(127.0.0.1:9092 becomes a broker of the test's own); a README edit that breaks one fails
here."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafkawire.tools.testing import BrokerProcess

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
DEFAULT = "127.0.0.1:9092"


def blocks(section: str, lang: str) -> list[str]:
    """The ```lang code blocks under the ``## section`` heading."""
    m = re.search(rf"^## {re.escape(section)}\n(.*?)(?=^## |\Z)", README, re.S | re.M)
    assert m, f"no section {section!r} in README.md"
    return re.findall(rf"^```{lang}\n(.*?)^```", m.group(1), re.S | re.M)


def env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT))


def run_python(code: str, bootstrap: str, tmp_path: Path, timeout: float = 120
               ) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "snippet.py"
    script.write_text(code.replace(DEFAULT, bootstrap))
    # Spark's driver on loopback (it would pick the host's first interface otherwise)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=timeout, cwd=tmp_path,
                          env=dict(env(), SPARK_LOCAL_IP="127.0.0.1"))
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    return proc


def test_quick_start_python_and_cli(broker: BrokerProcess, tmp_path: Path) -> None:
    python, cli = blocks("Quick start", "python")[0], blocks("Quick start", "sh")[0]
    out = run_python(python, broker.bootstrap, tmp_path).stdout
    assert out.splitlines()[:3] == ["b'k0' b'hello 0'", "b'k1' b'hello 1'", "b'k2' b'hello 2'"]
    for line in cli.splitlines():
        command = line.split("#", 1)[0].strip()
        if not command.startswith(("kafkawire", "echo")):
            continue
        command = command.replace("kafkawire ", f"{sys.executable} -m kafkawire ")
        proc = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=120,
                              cwd=ROOT, env=dict(env(), KAFKAWIRE_BOOTSTRAP=broker.bootstrap))
        assert proc.returncode == 0, f"{command}: {proc.stdout}\n{proc.stderr}"
        if " consume " in command:
            assert "hello" in proc.stdout
        if " topic describe " in command:
            assert "PARTITIONS" in proc.stdout


def test_the_pytest_example(tmp_path: Path) -> None:
    """The "In your own tests" example, as a test file of a user's project: the plugin's
    fixture starts a broker; the example's imports come with ``kafkawire[cli]``."""
    (code,) = blocks("In your own tests", "python")
    (tmp_path / "test_example.py").write_text(code)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "test_example.py"], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, env=env())
    assert proc.returncode == 0 and "1 passed" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.spark
@pytest.mark.timeout(1200)
def test_the_spark_section(broker: BrokerProcess, tmp_path: Path) -> None:
    """Spark resolves the README's coordinates from Maven Central itself
    (spark.jars.packages), writes, reads in batch and streams, as written."""
    pytest.importorskip("pyspark")
    from compat_tests.spark_deps import java_major_version

    major = java_major_version()
    if major is None or major < 17:
        pytest.skip(f"Spark 4 needs Java 17+ (found {major})")
    from kafkawire.tools.spark import kafka_package

    (code,) = blocks("Spark", "python")
    coordinates = re.search(r'"spark\.jars\.packages", "([^"]+)"', code)
    assert coordinates and coordinates.group(1) == kafka_package(), (
        "README.md names other coordinates than `kafkawire spark-package` picks")
    started = time.monotonic()
    out = run_python(code, broker.bootstrap, tmp_path, timeout=900).stdout
    print(f"the README's Spark block took {time.monotonic() - started:.0f} s")
    assert re.search(r"\|\s*k1\|\s*hello\|", out), out
    assert re.search(r"\|\s*SPARK\|", out) and re.search(r"\|\s*HELLO\|", out), out
