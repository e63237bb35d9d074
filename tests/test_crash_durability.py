"""kill -9 loops while stock clients produce with acks=all.

Every record a producer saw acknowledged must be readable after the restarts, and, with the
idempotent producer, nothing may appear twice (retries of batches that reached the log before
the crash are recognized from the producer state rebuilt at recovery). A second loop kills the
broker while the log cleaner works on a compacted topic: after every restart each key's value
is at least as new as the newest acknowledged one, and the files are consistent.
"""

from __future__ import annotations

import os
import random
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkawire.tools.testing import BrokerProcess

pytestmark = pytest.mark.slow

#: kill -9 rounds per loop: 5 in the test run; `make crash-soak` runs more (KILL9_ROUNDS)
ROUNDS = int(os.environ.get("KAFKAWIRE_KILL9_ROUNDS", "5"))

FAST = {
    "log.retention.check.interval.ms": "200",
    "log.initial.task.delay.ms": "0",
    "log.cleaner.backoff.ms": "50",
}


def create(bootstrap: str, topic: str, partitions: int, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=configs)])[topic].result(30)


class Pump:
    """A confluent-kafka idempotent producer (acks=all) sending until stopped."""

    def __init__(
        self, bootstrap: str, topic: str, keys: int | None = None, batch_size: int = 16384
    ) -> None:
        self.topic = topic
        self.keys = keys
        self.acked: list[bytes] = []
        self.failed: list[bytes] = []
        self.errors: Counter[str] = Counter()
        self.sent = 0
        self._stop = threading.Event()
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
            "linger.ms": 2, "message.timeout.ms": 120_000, "retry.backoff.ms": 50,
            "reconnect.backoff.max.ms": 200, "socket.connection.setup.timeout.ms": 2000,
            "batch.size": batch_size,  # below segment.bytes (else RECORD_LIST_TOO_LARGE)
        })
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, err: Any, msg: Any) -> None:
        (self.failed if err is not None else self.acked).append(msg.value())
        if err is not None:
            self.errors[str(err)] += 1

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            key = None if self.keys is None else f"k{i % self.keys}".encode()
            value = f"v{i:08d}".encode() if key is None else key + f":{i:08d}".encode()
            try:
                self.producer.produce(self.topic, key=key, value=value, on_delivery=self._delivered)
                i += 1
            except BufferError:
                self.producer.poll(0.05)
                continue
            self.producer.poll(0)
            if i % 50 == 0:
                time.sleep(0.005)
        self.sent = i

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(30)
        assert self.producer.flush(120) == 0, "messages left undelivered"


def read_all(bootstrap: str, topic: str, partitions: int) -> list[tuple[bytes | None, bytes]]:
    out: list[tuple[bytes | None, bytes]] = []
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                  "enable.auto.commit": False})
    try:
        for p in range(partitions):
            low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=20)
            if high <= low:
                continue
            c.assign([TopicPartition(topic, p, OFFSET_BEGINNING)])
            deadline = time.monotonic() + 60
            last = -1
            while last < high - 1 and time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is None:
                    continue
                if m.error():
                    raise KafkaException(m.error())
                out.append((m.key(), m.value()))
                last = m.offset()
            assert last >= high - 1, f"partition {p}: read up to {last}, high watermark {high}"
    finally:
        c.close()
    return out


def test_acked_records_survive_kill9_loops(tmp_path: Path) -> None:
    rng = random.Random(20261122)
    b = BrokerProcess(tmp_path / "data", overrides=FAST).start()
    try:
        topic = f"crash-{uuid.uuid4().hex[:6]}"
        create(b.bootstrap, topic, 2, **{"internal.segment.bytes": "65536"})
        pump = Pump(b.bootstrap, topic)
        pump.start()
        for _ in range(ROUNDS):
            time.sleep(rng.uniform(0.3, 1.2))
            b.kill()
            time.sleep(rng.uniform(0.0, 0.3))
            b.start()
        time.sleep(0.5)
        pump.stop()
        got = read_all(b.bootstrap, topic, 2)
    finally:
        b.close()
    values = [v for _k, v in got]
    counts = Counter(values)
    dupes = [v for v, n in counts.items() if n > 1]
    assert not dupes, f"{len(dupes)} records appear more than once, e.g. {dupes[:5]}"
    missing = set(pump.acked) - set(counts)
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:5]}"
    assert len(pump.acked) > 100 * ROUNDS
    assert not pump.failed, pump.errors


def test_kill9_during_compaction(tmp_path: Path) -> None:
    rng = random.Random(7)
    b = BrokerProcess(tmp_path / "data", overrides=FAST).start()
    keys = 50
    try:
        topic = f"crashc-{uuid.uuid4().hex[:6]}"
        create(b.bootstrap, topic, 1, **{
            "cleanup.policy": "compact", "internal.segment.bytes": "8192", "segment.ms": "200",
            "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "100",
        })
        pump = Pump(b.bootstrap, topic, keys=keys, batch_size=4096)
        pump.start()
        for _ in range(ROUNDS):
            time.sleep(rng.uniform(0.5, 1.5))
            b.kill()
            b.start()
        pump.stop()
        time.sleep(1.0)  # a last cleaning round or two
        got = read_all(b.bootstrap, topic, 1)
        log_text = b.log_path.read_text(errors="replace")
    finally:
        b.close()
    newest_acked: dict[bytes, int] = {}
    for v in pump.acked:
        k, _, seq = v.partition(b":")
        newest_acked[k] = max(newest_acked.get(k, -1), int(seq))
    newest_read: dict[bytes, int] = {}
    for k, v in got:
        assert k is not None and v.startswith(k + b":")
        seq = int(v.partition(b":")[2])
        assert seq > newest_read.get(k, -1), "values of a key out of order"
        newest_read[k] = seq
    for k, seq in newest_acked.items():
        assert newest_read.get(k, -1) >= seq, f"key {k!r}: acked {seq}, read {newest_read.get(k)}"
    assert "cleaned" in log_text  # the cleaner did run between the kills
    assert len(got) < pump.sent  # and compacted
