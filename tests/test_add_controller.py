"""KIP-853 end to end with Kafka's own tool and real processes: a dynamic quorum of three
controllers (formatted with ``--initial-controllers``), a 4th controller formatted with
``--no-initial-controllers`` that knows only ``controller.quorum.bootstrap.servers``;
``kafka-metadata-quorum add-controller`` makes it a voter (its endpoints travel in the
VotersRecord, so the others can reach it), it survives a kill -9 of the leader (with four
voters the new leader needs its vote), it tells the leader its new endpoints after a restart
on another port (UpdateRaftVoter), and ``remove-controller`` removes it."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from kafkawire.tools.cluster import LocalCluster
from kafkawire.tools.testing import BrokerProcess, free_port
from tests.javatools import JavaTools, ToolResult, require_line, write_properties

T = TypeVar("T")
NEW = 4


def wait_for(fn: Callable[[], T | None], timeout_s: float, what: str) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        got = fn()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.5)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    require_line("4.x")
    with LocalCluster(tmp_path_factory.mktemp("addctl")) as c:
        c.up(0, 3, dynamic=True, defaults=False, timeout_s=180)
        yield c


def controller_props(cluster: LocalCluster, port: int) -> dict[str, str]:
    return {
        "node.id": str(NEW), "process.roles": "controller",
        "listeners": f"CONTROLLER://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT",
        "controller.quorum.bootstrap.servers": cluster.controller_bootstrap,
    }


class Quorum:
    """``kafka-metadata-quorum describe`` through the live controllers."""

    def __init__(self, tools: JavaTools, bootstrap: str) -> None:
        self.tools, self.bootstrap = tools, bootstrap

    def replication(self) -> dict[int, str]:
        res = self.tools.run("metadata-quorum", "--bootstrap-controller", self.bootstrap,
                             "describe", "--replication", check=False)
        rows = [ln.split() for ln in res.output.splitlines() if re.match(r"^\d+\s", ln)]
        return {int(r[0]): r[-1] for r in rows}

    def replication_if(self, ok: Callable[[dict[int, str]], bool]) -> dict[int, str] | None:
        got = self.replication()
        return got if ok(got) else None

    def voters(self) -> list[dict[str, object]]:
        res = self.tools.run("metadata-quorum", "--bootstrap-controller", self.bootstrap,
                             "describe", "--status", check=False)
        m = re.search(r"CurrentVoters:\s+(\[.*\])", res.output)
        return json.loads(m.group(1)) if m else []


def test_add_controller_survive_leader_kill_update_and_remove(
        cluster: LocalCluster, tmp_path: Path) -> None:
    tools = JavaTools("4.x")
    port = free_port()
    data = tmp_path / f"node-{NEW}"
    node = BrokerProcess(data, port=port, overrides=controller_props(cluster, port),
                         metrics_port=0)
    node.format(cluster.cluster_id, "--no-initial-controllers")
    node.start(timeout_s=120)
    try:
        directory = dict(ln.split("=", 1) for ln in (data / "meta.properties").read_text()
                         .splitlines() if "=" in ln and not ln.startswith("#"))["directory.id"]
        props = write_properties(tmp_path / "controller-4.properties", {
            **controller_props(cluster, port), "log.dirs": str(data)})
        quorum = Quorum(tools, cluster.controller_bootstrap)
        wait_for(lambda: quorum.replication().get(NEW) == "Observer", 120,
                 "the new controller fetching as an observer")

        def add() -> bool:  # REQUEST_TIMED_OUT until the leader counts it caught up
            res = tools.run("metadata-quorum", "--bootstrap-controller",
                            cluster.controller_bootstrap, "--command-config", str(props),
                            "add-controller", check=False)
            return res.returncode == 0
        wait_for(add, 120, "add-controller to succeed")
        status = wait_for(lambda: quorum.replication_if(
            lambda s: s.get(NEW) in ("Follower", "Leader")), 60, "node 4 listed as a voter")
        assert sum(1 for v in status.values() if v in ("Leader", "Follower")) == 4, status
        entry = next(v for v in quorum.voters() if v["id"] == NEW)
        assert entry["directoryId"] == directory, entry
        assert entry["endpoints"] == [f"CONTROLLER://127.0.0.1:{port}"], entry

        # kill -9 of the leader: 3 of 4 voters are left, so the new leader needs node 4's vote
        # (the others found its controller listener in the VotersRecord)
        old = cluster.quorum_leader(60)
        cluster.kill(old)
        live = ",".join(f"127.0.0.1:{p}" for i, p in cluster.controller_ports.items()
                        if i != old) + f",127.0.0.1:{port}"
        quorum = Quorum(tools, live)
        after = wait_for(lambda: quorum.replication_if(lambda s: any(
            i != old and v == "Leader" for i, v in s.items())), 120,
            "a new leader among the survivors")
        assert after.get(NEW) in ("Leader", "Follower"), after

        # node 4 restarts on another port: it tells the leader (UpdateRaftVoter)
        node.stop()
        port2 = free_port()
        node.port = port2
        node.overrides.update(controller_props(cluster, port2))
        node.start(timeout_s=120)
        quorum = Quorum(tools, live.replace(f":{port}", f":{port2}"))
        wait_for(lambda: any(v["id"] == NEW and v["endpoints"] == [
            f"CONTROLLER://127.0.0.1:{port2}"] for v in quorum.voters()), 120,
            "node 4's new endpoint in the VotersRecord")

        def remove() -> ToolResult | None:
            r = tools.run("metadata-quorum", "--bootstrap-controller", quorum.bootstrap,
                          "remove-controller", "--controller-id", str(NEW),
                          "--controller-directory-id", directory, check=False)
            return r if r.returncode == 0 else None
        res = wait_for(remove, 120, "remove-controller to succeed")
        assert re.search(r"Removed\s+KRaft controller 4 with directory id", res.output), res.output
        wait_for(lambda: NEW not in [v["id"] for v in quorum.voters()], 60,
                 "node 4 gone from the voters")
        assert quorum.replication().get(NEW) in (None, "Observer")
    finally:
        node.close()


def test_kafka_decodes_the_first_leaders_voters_batch(tmp_path: Path) -> None:
    """A ``--standalone`` node's first leader writes LeaderChange, KRaftVersion and the
    bootstrap VotersRecord in one control batch; Kafka's DumpLogSegments decodes it."""
    from tests.test_forwarding import start_node
    from tests.test_metadata_snapshots import _java, _need_java
    _need_java()
    data = tmp_path / "data"
    b, cport = start_node(data, standalone=True)
    b.close()
    segment = data / "__cluster_metadata-0" / "00000000000000000000.log"
    out = _java("org.apache.kafka.tools.DumpLogSegments", "--cluster-metadata-decoder",
                "--files", str(segment))
    first = next(ln for ln in out.splitlines() if "baseOffset: 0 " in ln)
    assert "isControl: true" in first and "count: 3" in first, first
    assert 'LeaderChange: {"version":0,"leaderId":1,' in out, out
    assert 'KRaftVersion {"version":0,"kRaftVersion":1}' in out, out
    voters = next(ln for ln in out.splitlines() if "KRaftVoters {" in ln)
    assert '"voterId":1,' in voters and f'"port":{cport}' in voters, voters
