"""Arbitrary bytes at a live broker: each bad connection is closed or answered, the broker stays up
and keeps serving everyone else with nothing lost."""

from __future__ import annotations

import socket
import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkawire.tools.testing import BrokerProcess, api_versions_ok
from protocol._generated import REQUESTS

KEYS = sorted(REQUESTS)


def _send(port: int, payload: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.settimeout(2)
        try:
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
            while s.recv(65536):
                pass
        except OSError:
            pass


frames = st.one_of(
    st.binary(max_size=300),  # anything at all, even without a size prefix
    st.builds(  # a well-formed frame around a header for a real API with a random body
        lambda key, ver, body: struct.pack(">i", 8 + 2 + len(body))
        + struct.pack(">hhih", key, ver, 1, 0) + body,
        st.sampled_from(KEYS), st.integers(-1, 20), st.binary(max_size=200),
    ),
)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(payload=frames)
def test_live_broker_survives_arbitrary_frames(broker: BrokerProcess, payload: bytes) -> None:
    _send(broker.port, payload)
    assert api_versions_ok("127.0.0.1", broker.port), broker.log()


def test_broker_still_serves_data_after_fuzzing(broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        p.produce("after-fuzz", value=str(i).encode())
    assert p.flush(20) == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "x"})
    c.assign([TopicPartition("after-fuzz", 0, 0)])
    got = []
    while len(got) < 10:
        m = c.poll(5)
        assert m is not None
        got.append(m.value())
    c.close()
    assert got == [str(i).encode() for i in range(10)]
