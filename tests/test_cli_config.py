"""CLI and configuration: Kafka property names, unknown keys reported, formatting, clean stop."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafkawire.config.broker_config import (
    BrokerConfig,
    ConfigError,
    read_properties,
    validate_topic_config,
)
from kafkawire.tools.testing import BrokerProcess, api_versions_ok, free_port


def test_defaults_serve_a_single_node_with_data_in_dot_data() -> None:
    cfg = BrokerConfig.load(None, [])
    assert cfg.node_id == 1
    assert [(lst.name, lst.host, lst.port) for lst in cfg.listeners] == [
        ("PLAINTEXT", "127.0.0.1", 9092)
    ]
    assert cfg.log_dirs == [Path("./data")]
    assert cfg.num_partitions == 1 and cfg.auto_create_topics_enable
    assert cfg.message_max_bytes == 1048588
    assert cfg.socket_request_max_bytes == 104857600
    assert cfg.log_retention_ms == 168 * 3600 * 1000


def test_properties_file_and_overrides(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text(
        "# a comment\nnode.id=3\nlisteners=PLAINTEXT://0.0.0.0:9999\n"
        "log.dirs=/a,/b\nnum.partitions = 4\nlog.retention.minutes=5\n"
        "no.such.key=1\nssl.keystore.location=/x\nmetrics.num.samples=3\n"
    )
    cfg = BrokerConfig.load(props, ["num.partitions=6"])
    assert cfg.node_id == 3 and cfg.num_partitions == 6
    assert cfg.log_dirs == [Path("/a"), Path("/b")]
    assert cfg.log_retention_ms == 300_000
    assert cfg.unknown == ["no.such.key"]
    # security keys are read per listener (kafkawire.config.security), not ignored
    assert cfg.ignored == ["metrics.num.samples"]
    assert cfg.explicit["ssl.keystore.location"] == "/x"
    assert cfg.advertised_listeners[0].host == "localhost"
    assert cfg.topic_default("retention.ms") == (300_000, "STATIC_BROKER_CONFIG",
                                                  "log.retention.minutes")


def test_bad_values_are_reported() -> None:
    with pytest.raises(ConfigError):
        BrokerConfig.load(None, ["num.partitions=many"])
    with pytest.raises(ConfigError):
        BrokerConfig.load(None, ["listeners=nonsense"])
    with pytest.raises(ConfigError):
        validate_topic_config("cleanup.policy", "sometimes")
    with pytest.raises(ConfigError):
        validate_topic_config("no.such.config", "1")
    assert validate_topic_config("cleanup.policy", "compact,delete") == "compact,delete"


def test_read_properties_continuations(tmp_path: Path) -> None:
    p = tmp_path / "x.properties"
    p.write_text("a=1\nb = two \\\n  parts\n! bang comment\nc: 3\n")
    assert read_properties(p) == {"a": "1", "b": "two parts", "c": "3"}


def test_serve_logs_unknown_keys_formats_storage_and_stops_cleanly(tmp_path: Path) -> None:
    port = free_port()
    data = tmp_path / "data"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkawire", "serve", "--override",
         f"listeners=PLAINTEXT://127.0.0.1:{port}", "--override", f"log.dir={data}",
         "--override", "bogus.key=1", "--override", "metrics.port=0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        deadline = time.monotonic() + 20
        while not api_versions_ok("127.0.0.1", port) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert api_versions_ok("127.0.0.1", port)
        meta = (data / "meta.properties").read_text()
        assert "cluster.id=" in meta and "node.id=1" in meta
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0
    assert "unknown configuration key 'bogus.key'" in out
    assert sum("listening on" in line for line in out.splitlines()) == 1
    assert (data / ".kafka_cleanshutdown").exists()


def test_restart_keeps_the_cluster_id(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "d") as b:
        first = (tmp_path / "d" / "meta.properties").read_text()
        b.restart()
        assert (tmp_path / "d" / "meta.properties").read_text() == first


def test_sigint_stops_cleanly(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "d").start()
    assert b.proc is not None
    b.proc.send_signal(signal.SIGINT)
    assert b.proc.wait(20) == 0
    b.proc = None
    b.close()
