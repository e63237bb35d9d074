"""Moving replicas between log directories (issue 18): AlterReplicaLogDirs really moves a
partition to another directory of ``log.dirs`` (a ``-future`` log filled from the current one,
then swapped in), with Kafka 4.3.1's ``kafka-reassign-partitions`` and ``kafka-log-dirs``, while
an idempotent confluent-kafka producer keeps producing; every acknowledged record is there
afterwards, in the new directory, and after a kill -9. A kill -9 in the middle of a move
resumes it; a crash between the two renames of the swap keeps the complete copy."""

from __future__ import annotations

import json
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kafkawire.tools.testing import BrokerProcess
from protocol._generated.alter_replica_log_dirs_request import AlterReplicaLogDirsRequest
from protocol._generated.describe_log_dirs_request import DescribeLogDirsRequest
from protocol.errors import ErrorCode
from tests.conftest import RawClient
from tests.javatools import JavaTools, require_line
from tests.test_limits import _consume_all, creatable, create, uname

R = AlterReplicaLogDirsRequest


def _wait(cond: Callable[[], Any], what: str, timeout_s: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _new_topic(bootstrap: str, partitions: int) -> str:
    raw = RawClient(bootstrap)
    try:
        topic = uname("mv")
        assert create(raw, creatable(topic, partitions)).topics[0].error_code == 0
    finally:
        raw.close()
    return topic


def _dirs_of(d: Path, topic: str) -> set[str]:
    """Names of ``topic``'s partition directories in ``d`` (``-future``/``-delete`` ones too)."""
    return {p.name for p in d.iterdir() if p.is_dir() and p.name.startswith(topic + "-")}


def _describe(bootstrap: str, version: int = 4) -> dict[str, dict[tuple[str, int], Any]]:
    """DescribeLogDirs: log dir -> (topic, partition, is future) -> the partition's result."""
    raw = RawClient(bootstrap)
    try:
        req = DescribeLogDirsRequest()
        req.topics = None  # every partition
        resp = raw.request(req, version)
    finally:
        raw.close()
    return {r.log_dir: {(t.name, p.partition_index, p.is_future_key): p
                        for t in r.topics for p in t.partitions} for r in resp.results}


def _alter(bootstrap: str, moves: list[tuple[str, str, int]]) -> list[int]:
    """AlterReplicaLogDirs v2, one (path, topic, partition) each; their error codes."""
    raw = RawClient(bootstrap)
    try:
        r = raw.request(R(dirs=[R.AlterReplicaLogDir(path=path, topics=[
            R.AlterReplicaLogDirTopic(name=topic, partitions=[p])]) for path, topic, p in moves]),
            2)
    finally:
        raw.close()
    codes = {(t.topic_name, p.partition_index): p.error_code
             for t in r.results for p in t.partitions}
    return [codes[(t, p)] for _path, t, p in moves]


class Producing:
    """An idempotent confluent-kafka producer sending numbered records to every partition of
    a topic on a thread until stopped; what was acknowledged, per partition, in offset order."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, size: int = 200) -> None:
        self.bootstrap, self.topic, self.partitions, self.size = bootstrap, topic, partitions, size
        self.acked: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Producing:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True,
                      "acks": "all", "linger.ms": 5, "message.timeout.ms": 60000})

        def done(err: Any, m: Any) -> None:
            if err is not None:
                self.errors.append(str(err))
            else:
                self.acked[m.partition()].append((m.offset(), m.value()))

        n = 0
        while not self._stop.is_set():
            for part in range(self.partitions):
                value = f"{part}-{n}-".encode().ljust(self.size, b"v")
                p.produce(self.topic, value=value, partition=part, on_delivery=done)
            n += 1
            if n % 50 == 0:
                p.poll(0.01)
        p.flush(60)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(90)

    def count(self) -> int:
        return sum(len(v) for v in self.acked.values())

    def check(self, got: dict[tuple[str, int], list[bytes]]) -> None:
        assert not self.errors, self.errors[:3]
        for part, acked in self.acked.items():
            want = [v for _o, v in sorted(acked)]
            assert got.get((self.topic, part), []) == want, (part, len(want))


def _moved(d_from: Path, d_to: Path, topic: str, partition: int) -> bool:
    name = f"{topic}-{partition}"
    return (name in _dirs_of(d_to, topic) and name not in _dirs_of(d_from, topic)
            and not any(n.endswith(("-future", "-delete"))
                        for n in _dirs_of(d_from, topic) | _dirs_of(d_to, topic)))


@pytest.mark.slow
def test_kafka_reassign_partitions_moves_replicas_while_producing(tmp_path: Path) -> None:
    """kafka-reassign-partitions --execute with ``log_dirs`` swaps the directories of two
    partitions while a producer keeps producing; --verify and kafka-log-dirs see them there;
    nothing acknowledged is lost or doubled, before and after a kill -9."""
    require_line("4.x")
    tools = JavaTools("4.x")
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    bp = BrokerProcess(d1, overrides={"log.dirs": f"{d1},{d2}"}, log_file=tmp_path / "b.log")
    bp.start()
    try:
        topic = _new_topic(bp.bootstrap, 2)
        assert (_dirs_of(d1, topic), _dirs_of(d2, topic)) == ({f"{topic}-0"}, {f"{topic}-1"})
        bs = ["--bootstrap-server", bp.bootstrap]
        with Producing(bp.bootstrap, topic, 2, size=1000) as prod:
            _wait(lambda: prod.count() > 4000, "4,000 records acknowledged", 120)
            plan = tmp_path / "plan.json"
            plan.write_text(json.dumps({"version": 1, "partitions": [
                {"topic": topic, "partition": 0, "replicas": [1], "log_dirs": [str(d2)]},
                {"topic": topic, "partition": 1, "replicas": [1], "log_dirs": [str(d1)]}]}))
            out = tools.run("reassign-partitions", *bs, "--execute",
                            "--reassignment-json-file", str(plan)).output
            assert "Successfully started partition reassignment" in out, out
            _wait(lambda: _moved(d1, d2, topic, 0) and _moved(d2, d1, topic, 1),
                  "both replicas in their new directories", 120)
            moved_at = prod.count()
            _wait(lambda: prod.count() > moved_at + 1000, "records after the move", 60)
        out = tools.run("reassign-partitions", *bs, "--verify",
                        "--reassignment-json-file", str(plan)).output
        assert f"Reassignment of replica {topic}-0-1 completed successfully" in out, out
        assert f"Reassignment of replica {topic}-1-1 completed successfully" in out, out
        doc = json.loads(tools.run("log-dirs", *bs, "--describe", "--topic-list", topic)
                         .output.strip().splitlines()[-1])
        where = {d["logDir"]: sorted(p["partition"] for p in d["partitions"])
                 for d in doc["brokers"][0]["logDirs"]}
        assert where == {str(d1.resolve()): [f"{topic}-1"], str(d2.resolve()): [f"{topic}-0"]}
        total = prod.count()
        got = _consume_all(bp.bootstrap, [topic], 2, want_per_partition=total // 2 - 1)
        prod.check(got)
        assert "moved " in bp.log() and "Traceback" not in bp.log()
        bp.kill()
        bp.start(timeout_s=120)
        assert _moved(d1, d2, topic, 0) and _moved(d2, d1, topic, 1)
        prod.check(_consume_all(bp.bootstrap, [topic], 2, want_per_partition=total // 2 - 1))
    finally:
        bp.close()


def _throttle(bootstrap: str, rate: int | None) -> None:
    """Set (or delete) ``replica.alter.log.dirs.io.max.bytes.per.second`` on broker 1."""
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    name = "replica.alter.log.dirs.io.max.bytes.per.second"
    op = AlterConfigOpType.DELETE if rate is None else AlterConfigOpType.SET
    res = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry(name, "" if rate is None else str(rate), incremental_operation=op)])
    admin = AdminClient({"bootstrap.servers": bootstrap})  # alive until the answers came
    for f in admin.incremental_alter_configs([res]).values():
        f.result(30)


def _fill(bootstrap: str, topic: str, partition: int, count: int, size: int) -> list[bytes]:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                  "linger.ms": 20})
    values = [f"{i}-".encode().ljust(size, b"f") for i in range(count)]
    for v in values:
        while True:
            try:
                p.produce(topic, value=v, partition=partition)
                break
            except BufferError:
                p.poll(0.1)
    assert p.flush(60) == 0
    return values


def test_a_kill_in_the_middle_of_a_move_resumes_it(tmp_path: Path) -> None:
    """With the move throttled, DescribeLogDirs shows the future replica (IsFutureKey, its
    size and lag) in the destination; a kill -9 then leaves the current log and the partial
    future, and the restarted broker resumes the copy from where it was and finishes it."""
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    bp = BrokerProcess(d1, overrides={"log.dirs": f"{d1},{d2}"}, log_file=tmp_path / "b.log")
    bp.start()
    try:
        topic = _new_topic(bp.bootstrap, 1)
        values = _fill(bp.bootstrap, topic, 0, 4000, 1000)  # about 4 MB
        _throttle(bp.bootstrap, 500_000)
        assert _alter(bp.bootstrap, [(str(d2), topic, 0)]) == [ErrorCode.NONE]
        future = _wait(lambda: _describe(bp.bootstrap)[str(d2.resolve())].get((topic, 0, True)),
                       "the future replica listed")
        current = _describe(bp.bootstrap)[str(d1.resolve())][(topic, 0, False)]
        assert current.partition_size > future.partition_size
        partial = _wait(lambda: (f := _describe(bp.bootstrap)[str(d2.resolve())]
                                 .get((topic, 0, True))) and 0 < f.partition_size
                        and f.offset_lag > 0 and f, "a partial copy")
        assert partial.offset_lag < 4000
        bp.kill()
        assert {n for n in _dirs_of(d2, topic) if n.endswith("-future")}
        assert f"{topic}-0" in _dirs_of(d1, topic)
        bp.start(timeout_s=60)
        assert "resuming the move of" in bp.log()
        _throttle(bp.bootstrap, None)
        _wait(lambda: _moved(d1, d2, topic, 0), "the move finished after the restart")
        assert _consume_all(bp.bootstrap, [topic], 1, want_per_partition=4000)[(topic, 0)] \
            == values
        assert "Traceback" not in bp.log()
    finally:
        bp.close()


def test_a_crash_between_the_renames_keeps_the_copy(tmp_path: Path) -> None:
    """The on-disk state of a crash after the current log was renamed ``-delete`` and before
    the complete future was renamed into place: the start renames the future in (Kafka's
    abandoned future log recovery) and removes the old one; nothing is lost or doubled."""
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    bp = BrokerProcess(d1, overrides={"log.dirs": f"{d1},{d2}"}, log_file=tmp_path / "b.log")
    bp.start()
    try:
        topic = _new_topic(bp.bootstrap, 1)
        values = _fill(bp.bootstrap, topic, 0, 500, 300)
        assert bp.stop() == 0
        uid = uuid.uuid4().hex
        current = d1 / f"{topic}-0"
        shutil.copytree(current, d2 / f"{topic}-0.{uid}-future")
        current.rename(d1 / f"{topic}-0.{uid}-delete")
        bp.start()
        assert _dirs_of(d1, topic) == set() and _dirs_of(d2, topic) == {f"{topic}-0"}
        got = _consume_all(bp.bootstrap, [topic], 1, want_per_partition=len(values))
        assert got[(topic, 0)] == values
        assert "recovering the abandoned future log" in bp.log()
    finally:
        bp.close()


def test_alter_replica_log_dirs_errors_and_cancel(tmp_path: Path) -> None:
    """Kafka's answers: an unknown or relative directory LOG_DIR_NOT_FOUND, an unknown topic or
    partition UNKNOWN_TOPIC_OR_PARTITION, the replica's own directory NONE (and it cancels a
    move in progress: the future replica goes)."""
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    bp = BrokerProcess(d1, overrides={"log.dirs": f"{d1},{d2}"}, log_file=tmp_path / "b.log")
    bp.start()
    try:
        topic = _new_topic(bp.bootstrap, 1)
        _fill(bp.bootstrap, topic, 0, 2000, 1000)
        assert _alter(bp.bootstrap, [("/nonexistent/dir", topic, 0)]) == [
            ErrorCode.LOG_DIR_NOT_FOUND]
        assert _alter(bp.bootstrap, [("relative", topic, 0)]) == [ErrorCode.LOG_DIR_NOT_FOUND]
        assert _alter(bp.bootstrap, [(str(d2), topic, 5), (str(d2), uname("none"), 0)]) == [
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION] * 2
        assert _alter(bp.bootstrap, [(str(d1), topic, 0)]) == [ErrorCode.NONE]
        _throttle(bp.bootstrap, 200_000)  # slow enough to cancel it midway
        assert _alter(bp.bootstrap, [(str(d2), topic, 0)]) == [ErrorCode.NONE]
        assert any(n.endswith("-future") for n in _dirs_of(d2, topic))
        assert (topic, 0, True) in _describe(bp.bootstrap)[str(d2.resolve())]
        assert _alter(bp.bootstrap, [(str(d1), topic, 0)]) == [ErrorCode.NONE]  # cancel
        _wait(lambda: not _dirs_of(d2, topic), "the future replica removed")
        assert _describe(bp.bootstrap)[str(d2.resolve())] == {}
        assert _dirs_of(d1, topic) == {f"{topic}-0"}
    finally:
        bp.close()

