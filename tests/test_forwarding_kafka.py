"""Our Envelope against Apache Kafka 4.3.1's controller: kafkawire's ForwardingManager (what a
kafkawire broker-only node runs) forwards admin writes to a real Kafka controller listener.

This checks the wire forms against Kafka itself: the inner request with its header, the
principal in Kafka's default serde (Kafka's controller authorizes the forwarded principal, not
the sender's), the client address, and the unwrapped answer with its response header.
Heavy (a Kafka JVM); skipped without java or the jars unless KAFKAWIRE_REQUIRE_KAFKA=1.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import pytest
import trio

from compat_tests.kafka_dist import KafkaBroker, kafka_required, unavailable_reason
from compat_tests.wire import Connection as WireConnection
from kafkawire.metadata.forwarding import ForwardingManager
from kafkawire.net.server import Connection, RequestContext
from protocol._generated.create_topics_request import CreateTopicsRequest
from protocol._generated.delete_topics_request import DeleteTopicsRequest
from protocol._generated.metadata_request import MetadataRequest
from protocol._generated.request_header import RequestHeader
from protocol.errors import ErrorCode

pytestmark = [pytest.mark.slow, pytest.mark.compat]


@pytest.fixture(scope="module")
def kafka() -> Iterator[KafkaBroker]:
    reason = unavailable_reason("4.x")
    if reason is not None:
        if kafka_required():
            pytest.fail(reason)
        pytest.skip(reason)
    k = KafkaBroker(overrides={
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS"})
    k.start(timeout=180)
    try:
        yield k
    finally:
        k.stop()


def ctx_for(request: Any, version: int, principal: str) -> RequestContext:
    conn = Connection(cast(Any, None), "127.0.0.1:40000", "PLAINTEXT", 1)
    conn.principal = principal
    hdr = RequestHeader(request_api_key=request.API_KEY, request_api_version=version,
                        correlation_id=5, client_id="admin")
    return RequestContext(request.API_KEY, version, 5, "admin", conn, hdr)


def forward(kafka: KafkaBroker, *calls: tuple[Any, int, str]) -> list[Any]:
    async def main() -> list[Any]:
        fm = ForwardingManager(lambda: [(1, "127.0.0.1", kafka.controller_port)], "broker-9",
                               lambda: int(trio.current_time() * 1000), retry_timeout_ms=60_000)
        try:
            return [await fm.forward(ctx_for(r, v, p), r) for r, v, p in calls]
        finally:
            await fm.aclose()
    return trio.run(main)


def create(name: str, partitions: int = 2) -> CreateTopicsRequest:
    return CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1)], timeout_ms=30_000)


def test_kafka_controller_takes_our_envelopes(kafka: KafkaBroker) -> None:
    made, old_version, denied = forward(
        kafka, (create("from-kafkawire"), 7, "User:ANONYMOUS"),
        (create("from-kafkawire-v4", 1), 4, "User:ANONYMOUS"),
        (create("not-for-alice"), 7, "User:alice"))
    assert [(t.name, t.error_code, t.num_partitions) for t in made.topics] == [
        ("from-kafkawire", 0, 2)]
    assert old_version.topics[0].error_code == ErrorCode.NONE
    # Kafka's controller authorized the forwarded principal, not the envelope's sender
    assert denied.topics[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    with WireConnection(kafka.bootstrap) as c:
        md = c.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
            name="from-kafkawire")]), 12)
    assert md.topics[0].error_code == 0 and len(md.topics[0].partitions) == 2
    (gone,) = forward(kafka, (DeleteTopicsRequest(topic_names=["from-kafkawire"],
                                                  timeout_ms=30_000), 5, "User:ANONYMOUS"))
    assert [(t.name, t.error_code) for t in gone.responses] == [("from-kafkawire", 0)]
