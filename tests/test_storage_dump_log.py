"""Kafka's own ``kafka-dump-log`` (org.apache.kafka.tools.DumpLogSegments, Kafka 4.3.1 jars)
reads the segments, indexes and producer snapshots kafkawire writes, a compacted segment too.

Skipped without java or without the jars fetched by ``python -m compat_tests.kafka_dist fetch``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkawire.tools.testing import BrokerProcess

pytestmark = pytest.mark.slow

CACHE = Path(os.environ.get("KAFKAWIRE_CACHE", Path.home() / ".cache" / "kafkawire"))
LIBS = CACHE / "kafka-4.3.1" / "libs"
DUMP = "org.apache.kafka.tools.DumpLogSegments"
JVM = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xmx256m", "-Djava.awt.headless=true"]


def dump(*args: str) -> str:
    p = subprocess.run(
        ["java", *JVM, "-cp", f"{LIBS}/*", DUMP, *args], capture_output=True, text=True,
        timeout=120,
    )
    out = "\n".join(ln for ln in (p.stdout + p.stderr).splitlines() if not ln.startswith("SLF4J"))
    assert p.returncode == 0, out
    return out


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    if shutil.which("java") is None or not any(LIBS.glob("kafka-clients*")):
        pytest.skip("java or the Kafka 4.3.1 jars are not available")
    data = tmp_path_factory.mktemp("dump") / "data"
    plain, compacted = f"plain-{uuid.uuid4().hex[:6]}", f"cmp-{uuid.uuid4().hex[:6]}"
    with BrokerProcess(data, overrides={"log.initial.task.delay.ms": "0",
                                        "log.cleaner.backoff.ms": "100"}) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        futs = admin.create_topics([
            NewTopic(plain, 1, 1, config={"internal.segment.bytes": "1500", "index.interval.bytes": "200"}),
            NewTopic(compacted, 1, 1, config={
                "cleanup.policy": "compact", "segment.ms": "100",
                "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "60000",
            }),
        ])
        for f in futs.values():
            f.result(30)
        p = Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": True,
                      "linger.ms": 0, "batch.num.messages": 5, "compression.type": "lz4"})
        for i in range(200):
            p.produce(plain, key=f"key{i}".encode(), value=f"value-{i}".encode(), partition=0)
        for rnd in range(4):
            for k in range(5):
                p.produce(compacted, key=f"k{k}".encode(), value=f"r{rnd}".encode(), partition=0)
        p.produce(compacted, key=b"k2", value=None, partition=0)
        assert p.flush(30) == 0
        time.sleep(0.3)
        p.produce(compacted, key=b"tail", value=b"t", partition=0)  # rolls: the rest is cleanable
        assert p.flush(30) == 0
        done = f"cleaned {compacted}-0 up to offset 21"  # the tail's segment starts at 21
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and done not in b.log_path.read_text(errors="replace"):
            time.sleep(0.2)
        assert done in b.log_path.read_text(errors="replace")
    return data, plain, compacted


def test_dump_log_reads_segments_and_indexes(written: tuple[Path, str, str]) -> None:
    data, plain, _ = written
    d = data / f"{plain}-0"
    logs = sorted(d.glob("*.log"))
    assert len(logs) > 2
    files = [str(p) for p in logs]
    files += [str(p) for p in sorted(d.glob("*.index"))]
    files += [str(p) for p in sorted(d.glob("*.timeindex"))]
    out = dump("--files", ",".join(files), "--print-data-log", "--deep-iteration")
    batches = re.findall(r"^baseOffset: \d+ .*isvalid: (\w+)", out, re.M)
    assert batches and set(batches) == {"true"}
    records = re.findall(r"^\| offset: (\d+) .* key: (\S+) payload: (\S+)", out, re.M)
    assert [(int(o), k, v) for o, k, v in records] == [
        (i, f"key{i}", f"value-{i}") for i in range(200)
    ]
    assert "compresscodec: " in out
    assert "producerId: " in out and "producerId: -1 " not in out  # idempotent batches
    # the index checks DumpLogSegments makes against the log find nothing wrong
    for word in ("mismatch", "Mismatch", "corrupt", "Exception"):
        assert word not in out, out
    idx = re.findall(r"^offset: (\d+) position: (\d+)", out, re.M)
    assert idx, "offset index entries"
    tidx = re.findall(r"^timestamp: (\d+) offset: (\d+)", out, re.M)
    assert tidx, "time index entries"


def test_dump_log_reads_a_compacted_segment(written: tuple[Path, str, str]) -> None:
    data, _, compacted = written
    d = data / f"{compacted}-0"
    logs = sorted(d.glob("*.log"))
    out = dump("--files", ",".join(str(p) for p in logs), "--print-data-log", "--deep-iteration")
    assert set(re.findall(r"isvalid: (\w+)", out)) == {"true"}
    first = out.split("Dumping")[1]  # the cleaned segment
    keys = re.findall(r"^\| offset: \d+ .* key: (\S+)", first, re.M)
    assert len(keys) == len(set(keys)), first  # one record per key left
    assert "key: k0 payload: r3" in first and "payload: r0" not in first
    # the tombstone of k2 is kept, in a batch that now carries a delete horizon (KIP-534)
    assert re.search(r"deleteHorizonMs: OptionalLong\[\d+\]", first)
    assert re.search(r"key: k2$", first, re.M)


def test_dump_log_reads_producer_snapshots(written: tuple[Path, str, str]) -> None:
    data, plain, _ = written
    snaps = sorted((data / f"{plain}-0").glob("*.snapshot"))
    assert snaps
    out = dump("--files", str(snaps[-1]))
    assert re.search(r"producerId: \d+ producerEpoch: \d+", out), out
