"""Operator logs: one INFO line per event, JSON lines on request, no traceback for a client's
bad input, one summary for a __consumer_offsets load."""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

from kafkawire.tools.testing import api_versions_ok, free_port

ROOT = Path(__file__).resolve().parent.parent


def kw(*args: str) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "kafkawire", *args], capture_output=True,
                          text=True, timeout=120, cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stderr


def send_frame(port: int, payload: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(struct.pack(">i", len(payload)) + payload)
        s.settimeout(10)
        try:
            while s.recv(4096):
                pass
        except OSError:
            pass


def test_json_operator_events_and_no_traceback_for_bad_input(tmp_path: Path) -> None:
    port = free_port()
    log_path = tmp_path / "broker.log"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kafkawire", "serve", "--log-format", "json",
             "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
             "--override", f"log.dir={tmp_path / 'data'}", "--override", "metrics.port=0"],
            stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while not api_versions_ok("127.0.0.1", port):
            assert time.monotonic() < deadline and proc.poll() is None, log_path.read_text()
            time.sleep(0.1)
        b = ["--bootstrap-server", f"127.0.0.1:{port}"]
        kw("topic", "create", "logged", "-p", "2", "-c", "retention.ms=60000", *b)
        kw("consume", "logged", "-g", "logged-g", "--idle-timeout", "8", *b)
        kw("topic", "delete", "logged", *b)
        # bad input: an unknown API key, a truncated Produce, an unsupported Fetch version
        send_frame(port, struct.pack(">hhi", 999, 0, 7) + b"\x00\x01x")
        send_frame(port, struct.pack(">hhih", 0, 9, 8, 1) + b"x" + b"\x00\x01")
        send_frame(port, struct.pack(">hhih", 1, 99, 9, 1) + b"x")
        deadline = time.monotonic() + 30
        while "topic deleted: logged" not in log_path.read_text():
            assert time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(30)
    lines = [json.loads(line) for line in log_path.read_text().splitlines() if line.strip()]
    assert all(set(r) >= {"ts", "level", "logger", "message"} for r in lines)
    messages = [r["message"] for r in lines]
    assert "topic created: logged (2 partition(s), replication factor 1, retention.ms=60000)" \
        in messages
    assert "topic deleted: logged" in messages
    assert any(m.startswith("broker 1 registered") for m in messages)
    assert any(m.startswith("group logged-g: generation 1 with 1 member(s)") for m in messages)
    loads = [m for m in messages if "__consumer_offsets" in m and m.startswith("loaded")]
    assert loads == [m for m in loads if m.startswith("loaded 50 partition(s)")] and len(loads) == 1
    closed = [r for r in lines if r["level"] == "WARNING" and "closing connection" in r["message"]]
    assert len(closed) == 3, messages
    assert not [r for r in lines if "exception" in r or "Traceback" in r["message"]]


def test_a_restart_is_quiet(tmp_path: Path) -> None:
    """A restart replays the metadata history at DEBUG with one INFO summary, not as if every
    topic were created again now; leader moves of a topic's partitions are one line."""
    from kafkawire.tools.testing import BrokerProcess

    bp = BrokerProcess(tmp_path / "data", log_file=tmp_path / "first.log").start(60)
    try:
        b = ["--bootstrap-server", bp.bootstrap]
        kw("topic", "create", "quiet", "-p", "3", *b)
        kw("topic", "create", "gone", *b)
        kw("topic", "delete", "gone", *b)
        kw("consume", "quiet", "-g", "quiet-g", "--idle-timeout", "3", *b)  # __consumer_offsets
        bp.stop()
        bp.log_path = tmp_path / "second.log"
        bp.start(60)
        deadline = time.monotonic() + 60
        while "loaded 50 partition(s) of __consumer_offsets" not in bp.log():
            assert time.monotonic() < deadline, bp.log()
            time.sleep(0.2)
    finally:
        bp.close()
    second = (tmp_path / "second.log").read_text().split("received SIGTERM")[0]
    lines = [line for line in second.splitlines() if " INFO " in line]
    assert len(lines) <= 13, "\n".join(lines)  # before: 131
    text = "\n".join(lines)
    assert "topic created" not in text and "topic deleted" not in text, text
    summary = [line for line in lines if "metadata caught up with the quorum" in line]
    assert len(summary) == 1 and "record(s) replayed (2 topic(s), 53 partition(s)" in \
        summary[0], text
    offsets = [line for line in lines if "leader of __consumer_offsets" in line]
    assert offsets == [line for line in offsets if "(50 partitions: 0-49): -1 -> 1" in line] \
        and len(offsets) == 1, text
