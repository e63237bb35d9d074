"""Shared fixtures: a real kafkawire broker process (see kafkawire.tools.testing) and raw wire helpers."""

from __future__ import annotations

import socket
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkawire.tools.testing import BrokerProcess
from tests.javatools import java_line  # noqa: F401  (fixture: Kafka's Java tools, both lines)

# ---- running under pytest-xdist (`make test` runs tests/ with `-n 2 --dist loadfile`) -----------
#: Files that take longest (in a serial run), scheduled first so that no long file starts last
#: and runs alone at the end; the rest keep their order. (Every Spark test is in test_spark.py:
#: one file is one worker's, so one SparkSession starts, not one per worker.)
SLOW_FIRST = (
    "test_replication_cluster.py", "test_spark.py", "test_local_cluster.py", "test_chaos.py",
    "test_exactly_once.py", "test_eos_chain.py", "test_fetch_sessions_clients.py",
    "test_limits.py", "test_replication_netns.py", "test_controller_listener_security.py",
    "test_elr_cluster.py", "test_groups_clients.py", "test_security_quotas.py",
    "test_log_dir_moves.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The slowest files first (a stable sort: otherwise the collection order)."""
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker per test module (fast); tests use unique topic names."""
    bp = BrokerProcess(tmp_path_factory.mktemp("kw") / "data").start()
    try:
        yield bp
    finally:
        bp.close()


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker of the test's own (restart / kill -9 tests)."""
    bp = BrokerProcess(tmp_path / "data").start()
    try:
        yield bp
    finally:
        bp.close()


class RawClient:
    """Speaks the Kafka protocol with this repo's generated codecs over a plain socket."""

    def __init__(self, bootstrap: str, client_id: str = "raw") -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.client_id = client_id
        self.correlation = 0

    def send_raw(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def recv_frame(self) -> bytes:
        head = self._recv_exact(4)
        (n,) = struct.unpack(">i", head)
        return self._recv_exact(n)

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed by broker")
            buf += chunk
        return bytes(buf)

    def request(self, req: Any, version: int) -> Any:
        import importlib

        from protocol._generated import API_INFO, RESPONSES
        from protocol._generated.request_header import RequestHeader

        key = req.API_KEY
        flexible = 0 <= API_INFO[key][3] <= version
        self.correlation += 1
        hdr = RequestHeader(
            request_api_key=key, request_api_version=version,
            correlation_id=self.correlation, client_id=self.client_id,
        )
        self.send_raw(hdr.encode(2 if flexible else 1) + req.encode(version))
        frame = self.recv_frame()
        (corr,) = struct.unpack_from(">i", frame, 0)
        assert corr == self.correlation
        pos = 4
        if flexible and key != 18:
            assert frame[4] == 0  # no tagged fields in our response headers
            pos = 5
        mod, cls = RESPONSES[key]
        resp_cls = getattr(importlib.import_module(f"protocol._generated.{mod}"), cls)
        return resp_cls.decode(frame[pos:], version)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def raw(broker: BrokerProcess) -> Iterator[RawClient]:
    c = RawClient(broker.bootstrap)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One local[2] SparkSession with Spark's Kafka connector, shared by the whole session.

    Skips when pyspark, Java or Maven is missing; the connector jars are fetched once into
    ``$KAFKAWIRE_CACHE`` (see compat_tests/spark_deps.py).
    """
    pytest.importorskip("pyspark")
    from compat_tests import spark_deps

    java = spark_deps.java_major_version()
    if java is None or java < 17:
        pytest.skip(f"Spark 4 needs Java 17+ (found: {java or 'no java on PATH'})")

    try:
        spark_deps.kafka_connector_jars()
    except spark_deps.SparkDepsError as e:
        pytest.skip(f"Spark's Kafka connector is not available: {e}")
    session = spark_deps.local_spark_session(
        "kafkawire-tests", workdir=tmp_path_factory.mktemp("spark")
    )
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture
def small_disk(tmp_path: Path) -> Any:
    """A 4 MiB tmpfs (needs root; skipped elsewhere)."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (not root?)")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
