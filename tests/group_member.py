"""One consumer-group member of a stock client family, as a process the group tests can kill.

    python tests/group_member.py FAMILY BOOTSTRAP GROUP TOPIC [--strategy S] [--instance ID]
                                 [--session-ms N] [--protocol classic|consumer] [--max N]

FAMILY: confluent (librdkafka), kafka-python, aiokafka. Prints JSON lines on stdout:
``{"assigned": [partitions]}`` whenever its assignment changes (also once it is first known),
``{"m": [partition, offset, value]}`` per record consumed (committed synchronously after each
poll), ``{"revoked": [partitions]}`` on revocations, ``{"closed": true}`` after a clean close
(SIGTERM). Offsets start at the earliest when the group has none.

A commit that fails (``{"commit_failed": "<error>"}``) is not fatal, as in any application
using these clients: a commit can lose a race with a rebalance in Apache Kafka too (e.g. a
classic member whose generation is behind the group epoch when a consumer group is converted
back to classic gets ILLEGAL_GENERATION: kafka-python's CommitFailedError, aiokafka's
CommitFailedError/IllegalGenerationError; librdkafka raises KafkaException). The records are
consumed again by the partition's next owner from the last committed offset.

Debugging: with ``KAFKAWIRE_MEMBER_DEBUG`` set (e.g. ``cgrp,consumer,protocol``) librdkafka
gets it as ``debug`` and the Python clients log their group coordinators at DEBUG, on stderr
(``Member`` keeps stderr in ``KAFKAWIRE_MEMBER_LOG_DIR`` when that is set).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
from typing import Any

stop = False


def emit(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class Reporter:
    """Emits the consumer's assignment whenever it changes."""

    def __init__(self, consumer: Any) -> None:
        self.consumer = consumer
        self.last: list[int] | None = None

    def __call__(self) -> None:
        now = sorted(tp.partition for tp in self.consumer.assignment())
        if now != self.last:
            self.last = now
            emit({"assigned": now})


def commit_failed(e: Exception) -> None:
    emit({"commit_failed": f"{type(e).__name__}: {e}"[:200]})


def emit_records(records: Any) -> int:
    """Emit the records of a kafka-python/aiokafka poll result; returns how many."""
    n = 0
    for _tp, msgs in records.items():
        for m in msgs:
            emit({"m": [m.partition, m.offset, m.value.decode()]})
            n += 1
    return n


def consumer_kwargs(a: argparse.Namespace) -> dict[str, Any]:
    """The settings kafka-python and aiokafka share (same names)."""
    kw: dict[str, Any] = {
        "bootstrap_servers": a.bootstrap, "group_id": a.group, "auto_offset_reset": "earliest",
        "enable_auto_commit": False, "session_timeout_ms": a.session_ms,
        "heartbeat_interval_ms": max(100, a.session_ms // 6),
    }
    if a.instance:
        kw["group_instance_id"] = a.instance
    return kw


def on_term(_sig: int, _frm: Any) -> None:
    global stop
    stop = True


def run_confluent(a: argparse.Namespace) -> None:
    from confluent_kafka import Consumer, KafkaException

    conf: dict[str, Any] = {
        "bootstrap.servers": a.bootstrap,
        "group.id": a.group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    if a.protocol == "consumer":
        conf["group.protocol"] = "consumer"
    else:
        conf["session.timeout.ms"] = a.session_ms
        conf["heartbeat.interval.ms"] = max(100, a.session_ms // 6)
        conf["partition.assignment.strategy"] = a.strategy or "range"
    if a.instance:
        conf["group.instance.id"] = a.instance
    if os.environ.get("KAFKAWIRE_MEMBER_DEBUG"):
        conf["debug"] = os.environ["KAFKAWIRE_MEMBER_DEBUG"]
    c = Consumer(conf)
    last: list[int] | None = None
    incremental = a.strategy == "cooperative-sticky" or a.protocol == "consumer"

    def report() -> None:
        nonlocal last
        now = sorted(tp.partition for tp in c.assignment())
        if now != last:
            last = now
            emit({"assigned": now})

    def assigned(consumer: Any, parts: list[Any]) -> None:
        if incremental:
            consumer.incremental_assign(parts)
        else:
            consumer.assign(parts)
        report()

    def revoked(consumer: Any, parts: list[Any]) -> None:
        emit({"revoked": sorted(tp.partition for tp in parts)})
        if incremental:
            consumer.incremental_unassign(parts)
        else:
            consumer.unassign()
        report()

    c.subscribe([a.topic], on_assign=assigned, on_revoke=revoked)
    n = 0
    while not stop:
        msgs = c.consume(100, 0.2)
        report()
        got = False
        for m in msgs:
            if m.error():
                continue
            emit({"m": [m.partition(), m.offset(), m.value().decode()]})
            got = True
            n += 1
        if got:
            try:
                c.commit(asynchronous=False)
            except KafkaException as e:
                commit_failed(e)
        if a.max and n >= a.max:
            break
    c.close()
    emit({"closed": True})


def run_kafka_python(a: argparse.Namespace) -> None:
    import kafka.coordinator.assignors.range as r
    import kafka.coordinator.assignors.roundrobin as rr
    from kafka import KafkaConsumer
    from kafka.consumer.subscription_state import ConsumerRebalanceListener
    from kafka.errors import KafkaError

    class UserDataAssignor(r.RangePartitionAssignor):  # type: ignore[misc]
        """A custom assignor: range, with user data in every assignment (Kafka refuses to
        upgrade such a group online: the consumer protocol has no place for it)."""

        name = "range-userdata"

        @classmethod
        def assign(cls, cluster: Any, members: Any) -> Any:
            out = super().assign(cluster, members)
            for mid, x in out.items():
                out[mid] = type(x)(x.version, x.assigned_partitions, b"custom")
            return out

    assignor = {"range": r.RangePartitionAssignor, "roundrobin": rr.RoundRobinPartitionAssignor,
                "userdata": UserDataAssignor}
    if a.strategy == "sticky":
        import kafka.coordinator.assignors.sticky.sticky_assignor as st

        assignor["sticky"] = st.StickyPartitionAssignor
    c = KafkaConsumer(
        partition_assignment_strategy=[assignor[a.strategy or "range"]], **consumer_kwargs(a)
    )
    report = Reporter(c)

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            emit({"revoked": sorted(tp.partition for tp in revoked)})

        def on_partitions_assigned(self, assigned: Any) -> None:
            report()

    c.subscribe([a.topic], listener=Listener())
    n = 0
    while not stop:
        got = emit_records(c.poll(timeout_ms=200))
        report()
        n += got
        if got:
            try:
                c.commit()
            except KafkaError as e:
                commit_failed(e)
        if a.max and n >= a.max:
            break
    c.close()
    emit({"closed": True})


def run_aiokafka(a: argparse.Namespace) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from aiokafka.errors import KafkaError

    assignor = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}

    async def main() -> None:
        c = AIOKafkaConsumer(
            partition_assignment_strategy=(assignor[a.strategy or "range"],), **consumer_kwargs(a)
        )
        report = Reporter(c)

        class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            async def on_partitions_revoked(self, revoked: Any) -> None:
                emit({"revoked": sorted(tp.partition for tp in revoked)})

            async def on_partitions_assigned(self, assigned: Any) -> None:
                report()

        await c.start()
        c.subscribe([a.topic], listener=Listener())
        n = 0
        try:
            while not stop:
                got = emit_records(await c.getmany(timeout_ms=200))
                report()
                n += got
                if got:
                    try:
                        await c.commit()
                    except KafkaError as e:
                        commit_failed(e)
                if a.max and n >= a.max:
                    break
        finally:
            await c.stop()
        emit({"closed": True})

    asyncio.run(main())


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("family")
    p.add_argument("bootstrap")
    p.add_argument("group")
    p.add_argument("topic")
    p.add_argument("--strategy", default=None)
    p.add_argument("--instance", default=None)
    p.add_argument("--session-ms", type=int, default=6000)
    p.add_argument("--protocol", default="classic")
    p.add_argument("--max", type=int, default=0)
    a = p.parse_args()
    if os.environ.get("KAFKAWIRE_MEMBER_DEBUG") and a.family != "confluent":
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
        for name in ("kafka.coordinator", "kafka.consumer", "aiokafka.consumer", "kafka.conn"):
            logging.getLogger(name).setLevel(logging.DEBUG)
    signal.signal(signal.SIGTERM, on_term)
    {"confluent": run_confluent, "kafka-python": run_kafka_python, "aiokafka": run_aiokafka}[
        a.family
    ](a)


if __name__ == "__main__":
    main()
