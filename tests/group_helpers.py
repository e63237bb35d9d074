"""Helpers shared by the consumer-group tests: a broker tuned for quick rebalances, topics and
records through confluent-kafka, a raw client that waits for the group coordinator, polling."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from conftest import RawClient

from kafkawire.tools.testing import BrokerProcess
from protocol._generated.find_coordinator_request import FindCoordinatorRequest

#: rebalances without the 3 s initial delay, short sessions allowed, quick KIP-848 heartbeats
GROUP_OVERRIDES = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "100",
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.session.timeout.ms": "6000",
    "offsets.topic.num.partitions": "5",
}


def group_broker(data: Path, **extra: str) -> Iterator[BrokerProcess]:
    """A broker with GROUP_OVERRIDES (plus ``extra``) for a fixture to yield from."""
    bp = BrokerProcess(data, overrides={**GROUP_OVERRIDES, **extra}).start()
    try:
        yield bp
    finally:
        bp.close()


def ready_raw(bootstrap: str, client_id: str = "groups") -> RawClient:
    """A raw client, once the group coordinator's topic exists."""
    c = RawClient(bootstrap, client_id=client_id)
    deadline = time.monotonic() + 20
    while c.request(FindCoordinatorRequest(key="x", key_type=0), 3).error_code != 0:
        assert time.monotonic() < deadline, "no group coordinator"
        time.sleep(0.05)
    return c


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def produce(bootstrap: str, topic: str, values: list[str], partitions: int) -> None:
    """``values[i]`` to partition ``i % partitions``."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, v in enumerate(values):
        p.produce(topic, v.encode(), partition=i % partitions)
    assert p.flush(30) == 0


def wait_until(
    cond: Callable[[], bool], timeout_s: float, what: str, info: Callable[[], Any] = lambda: None
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}: {info()}")


def describe_when_loaded(c: RawClient, group: str, timeout_s: float = 20) -> Any:
    """ConsumerGroupDescribe of ``group`` once its shard has loaded (after a restart)."""
    from protocol._generated.consumer_group_describe_request import ConsumerGroupDescribeRequest
    from protocol.errors import ErrorCode

    deadline = time.monotonic() + timeout_s
    while True:
        d = c.request(ConsumerGroupDescribeRequest(group_ids=[group]), 1).groups[0]
        if d.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS or time.monotonic() > deadline:
            return d
        time.sleep(0.1)
