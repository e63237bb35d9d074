"""Structure-aware fuzzing of every API key and version a live broker serves.

Requests are built by Hypothesis from the generated schemas (``tests/protocol_strategies.py``),
encoded with their real header, then sent as they are or mutated: a flipped byte, a cut frame,
a wrong declared size, trailing bytes, another version's body. For each one the broker must
answer with a response our codec decodes at that version (a Kafka error code inside is fine),
or close the connection; nothing may be logged as an uncaught error, and a clean client must
still produce and consume afterwards.

Bounded here (``KAFKAWIRE_FUZZ_EXAMPLES`` examples per API key, default 6); ``make fuzz-soak``
runs it with many more. Values that would make a request legitimately slow (timeouts, waits,
partition counts) are clamped so the run stays bounded.
"""

from __future__ import annotations

import importlib
import os
import socket
import struct
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkawire.apis import REGISTRY
from kafkawire.tools.testing import BrokerProcess
from protocol._generated import RESPONSES
from protocol._generated.request_header import RequestHeader
from protocol.primitives import Struct
from tests.protocol_strategies import instance

EXAMPLES = int(os.environ.get("KAFKAWIRE_FUZZ_EXAMPLES", "6"))
KEYS = sorted(REGISTRY)
SMALL_FIELDS = ("num_partitions", "count", "replication_factor", "max_records", "max_bytes",
                "partition_max_bytes", "min_bytes")


@pytest.fixture(scope="module")
def fuzz_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    bp = BrokerProcess(tmp_path_factory.mktemp("fuzz") / "data",
                       overrides={"group.initial.rebalance.delay.ms": "0"})
    bp.start()
    try:
        yield bp
    finally:
        bp.close()


def _clamp(obj: Any) -> Any:
    """Bound waits and sizes (a 24-day max_wait_ms is legal, and slow)."""
    if isinstance(obj, list):
        for o in obj:
            _clamp(o)
        return obj
    if not isinstance(obj, Struct):
        return obj
    for attr in obj.__slots__:
        value = getattr(obj, attr, None)
        if isinstance(value, bool):
            continue
        if isinstance(value, int) and (attr.endswith("_ms") or "timeout" in attr):
            setattr(obj, attr, max(-1, min(value, 50)))
        elif isinstance(value, int) and attr in SMALL_FIELDS:
            setattr(obj, attr, max(-1, min(value, 3)))
        elif isinstance(value, (list, Struct)):
            _clamp(value)
    return obj


def _frame(key: int, version: int, body: bytes, correlation: int) -> bytes:
    handler = REGISTRY[key]
    hdr = RequestHeader(request_api_key=key, request_api_version=version,
                        correlation_id=correlation, client_id="fuzz")
    head = hdr.encode(2 if handler.flexible(version) else 1)
    return head + body


def _mutate(frame: bytes, how: str, where: int, byte: int) -> bytes:
    """The whole wire frame (size prefix included) after a structure-aware mutation."""
    if how == "flip" and frame:
        i = where % len(frame)
        frame = frame[:i] + bytes([frame[i] ^ (byte or 1)]) + frame[i + 1 :]
    elif how == "cut" and len(frame) > 8:
        frame = frame[: 8 + where % (len(frame) - 8)]
    elif how == "trailing":
        frame = frame + bytes([byte]) * (1 + where % 16)
    size = len(frame)
    if how == "size":
        size = [size - 1, size + 1, 0, -1, size * 2][where % 5]
    return struct.pack(">i", size) + frame


def _exchange(port: int, payload: bytes) -> bytes | None:
    """Send; return the first response frame, or None if the broker closed the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        data = bytearray()
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        except OSError:
            pass
    if len(data) < 4:
        return None
    (n,) = struct.unpack_from(">i", data)
    assert len(data) >= 4 + n, f"a truncated response frame: {len(data) - 4} of {n} bytes"
    return bytes(data[4 : 4 + n])


def _check_response(key: int, version: int, correlation: int, frame: bytes) -> None:
    (corr,) = struct.unpack_from(">i", frame)
    assert corr == correlation
    handler = REGISTRY[key]
    pos = 4 + (1 if key != 18 and handler.flexible(version) else 0)
    mod, cls_name = RESPONSES[key]
    cls = getattr(importlib.import_module(f"protocol._generated.{mod}"), cls_name)
    cls.decode(frame[pos:], version)  # raises on a malformed answer


@pytest.mark.parametrize("key", KEYS, ids=[REGISTRY[k].name for k in KEYS])
def test_every_api_version_with_mutations(fuzz_broker: BrokerProcess, key: int) -> None:
    handler = REGISTRY[key]
    versions = list(range(handler.min_version, handler.max_version + 1))
    cls = handler.request_cls

    @settings(max_examples=max(EXAMPLES, len(versions)), deadline=None, derandomize=False,
              suppress_health_check=list(HealthCheck))
    @given(data=st.data(),
           how=st.sampled_from(["none", "none", "flip", "cut", "trailing", "size", "version"]),
           where=st.integers(0, 1 << 16), byte=st.integers(0, 255))
    def run(data: st.DataObject, how: str, where: int, byte: int) -> None:
        version = data.draw(st.sampled_from(versions), label="version")
        req = _clamp(data.draw(instance(cls, cls, version), label="request"))
        try:
            body = req.encode(version)
        except (ValueError, TypeError, OverflowError, struct.error):
            return  # the strategy built something this version cannot carry
        sent_version = version
        if how == "version":  # a body of one version announced as another
            sent_version = versions[where % len(versions)]
        correlation = where + 1
        frame = _frame(key, sent_version, body, correlation)
        answer = _exchange(fuzz_broker.port, _mutate(frame, how, where, byte))
        if answer is not None and how in ("none", "trailing") and sent_version == version:
            _check_response(key, version, correlation, answer)
        elif answer is not None and len(answer) >= 4:
            (corr,) = struct.unpack_from(">i", answer)  # whatever was understood is answered
            assert corr >= -(2**31)

    run()
    log = fuzz_broker.log_path.read_text(errors="replace")
    assert "Traceback" not in log and "error serving connection" not in log, log[-5000:]


def test_clean_client_after_fuzzing(fuzz_broker: BrokerProcess, tmp_path: Path) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic = f"after-fuzz-{uuid.uuid4().hex[:6]}"
    p = Producer({"bootstrap.servers": fuzz_broker.bootstrap})
    for i in range(10):
        p.produce(topic, value=str(i).encode())
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": fuzz_broker.bootstrap, "group.id": "after-fuzz"})
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    while len(got) < 10:
        m = c.poll(10)
        assert m is not None
        if m.error() is None:
            got.append(m.value())
    c.close()
    assert got == [str(i).encode() for i in range(10)]
    log = fuzz_broker.log_path.read_text(errors="replace")
    assert "Traceback" not in log
    assert "error serving connection" not in log
