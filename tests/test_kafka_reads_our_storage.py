"""Apache Kafka 4.3.1 itself starts on storage that kafkawire wrote.

1. ``kafkawire format --standalone``: Kafka starts as the leader of the dynamic quorum it
   describes (its voter's directory id is the one we wrote).
2. A static-quorum node formatted by ``kafkawire format`` and run by kafkawire (metadata log
   plus a snapshot): Kafka's controller loads our snapshot and the log after it, and serves our
   topic.

Heavy (a Kafka JVM each); skipped without java or the jars unless KAFKAWIRE_REQUIRE_KAFKA=1.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from compat_tests.kafka_dist import (
    _wait_metadata,
    free_port,
    java_command,
    kafka_required,
    unavailable_reason,
)
from kafkawire.storage.format import read_meta
from kafkawire.tools.testing import BrokerProcess

pytestmark = [pytest.mark.slow, pytest.mark.compat]
ROOT = Path(__file__).resolve().parents[1]
CID = "MkU3OEVBNTcwNTJENDM2Qg"


@pytest.fixture(autouse=True)
def _need_kafka() -> None:
    reason = unavailable_reason("4.x")
    if reason is not None:
        if kafka_required():
            pytest.fail(reason)
        pytest.skip(reason)


def _props(work: Path, port: int, cport: int, quorum: dict[str, str]) -> dict[str, str]:
    return {
        "process.roles": "broker,controller", "node.id": "1", **quorum,
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER", "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": str(work / "data"), "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
    }


def _format(conf: Path, *extra: str) -> None:
    p = subprocess.run([sys.executable, "-m", "kafkawire", "format", "-t", CID, str(conf),
                        *extra], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0, p.stderr


@contextmanager
def _kafka(work: Path, conf: Path, port: int) -> Iterator[None]:
    cmd = java_command("kafka.Kafka", [str(conf)], "4.x", heap="512m", role="server",
                       log_file=work / "server.log", jvm_opts=["-Xms64m"])
    with open(work / "stdout.log", "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)

    def alive() -> None:
        if proc.poll() is not None:
            raise AssertionError((work / "stdout.log").read_text(errors="replace")[-3000:])

    try:
        _wait_metadata(f"127.0.0.1:{port}", time.monotonic() + 240, alive)
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _tool(*args: str) -> str:
    p = subprocess.run(java_command(args[0], args[1:], "4.x"), capture_output=True, text=True,
                       timeout=180)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def test_kafka_starts_on_our_standalone_format(tmp_path: Path) -> None:
    port, cport = free_port(), free_port()
    props = _props(tmp_path, port, cport,
                   {"controller.quorum.bootstrap.servers": f"127.0.0.1:{cport}"})
    props["advertised.listeners"] += f",CONTROLLER://127.0.0.1:{cport}"
    conf = tmp_path / "server.properties"
    conf.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    _format(conf, "--standalone")
    directory_id = read_meta(tmp_path / "data" / "meta.properties")["directory.id"]
    with _kafka(tmp_path, conf, port):
        out = _tool("org.apache.kafka.tools.MetadataQuorumCommand", "--bootstrap-controller",
                    f"127.0.0.1:{cport}", "describe", "--status")
    assert f"ClusterId:              {CID}" in out, out
    assert "LeaderId:               1" in out
    assert f'"directoryId": "{directory_id}"' in out


def test_kafka_loads_our_metadata_log_and_snapshot(tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    port, cport = free_port(), free_port()
    props = _props(tmp_path, port, cport, {"controller.quorum.voters": f"1@127.0.0.1:{cport}"})
    conf = tmp_path / "server.properties"
    conf.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    _format(conf)
    meta = tmp_path / "data" / "__cluster_metadata-0"
    ours = {**props, "metadata.log.max.record.bytes.between.snapshots": "500"}
    with BrokerProcess(tmp_path / "data", port=port, overrides=ours) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        for f in admin.create_topics([NewTopic("from-kw", 3, 1)]).values():
            f.result(60)
        deadline = time.monotonic() + 60
        while not list(meta.glob("*.checkpoint")) and time.monotonic() < deadline:
            time.sleep(0.2)
        for f in admin.create_topics([NewTopic("after-snapshot", 2, 1)]).values():
            f.result(60)
    snapshot = sorted(meta.glob("*.checkpoint"))[-1]
    with _kafka(tmp_path, conf, port):
        md = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"}).list_topics(timeout=60)
    assert {t: len(md.topics[t].partitions) for t in ("from-kw", "after-snapshot")} == {
        "from-kw": 3, "after-snapshot": 2}
    log = (tmp_path / "server.log").read_text(errors="replace")
    assert f"Successfully loaded snapshot {snapshot.name.removesuffix('.checkpoint')}" in log
    shutil.rmtree(tmp_path / "data", ignore_errors=True)
