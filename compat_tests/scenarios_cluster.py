"""Scenarios against a 3-node cluster: replication as clients see it (issue 13).

A cluster scenario is a function ``(cluster) -> JSON-able outcome``, registered with
``@cluster_scenario`` into ``CLUSTER_SCENARIOS``; ``cluster`` is a :class:`ClusterTarget`: three
combined broker+controller nodes with ids 1, 2, 3 (Apache Kafka: ``kafka_cluster.KafkaCluster``;
kafkawire: ``kafkawire.cluster.LocalCluster``), both with ``kafka_cluster.SCENARIO_PROPS``.

Node ids are the same on both systems, so where the client chooses the replicas (manual
assignments, reassignments) leaders, replica lists and ISRs are compared exactly; where the
controller places them (replication factor only) only the shape is (three distinct replicas,
the leader first and in the ISR, ...). Ports become ``<port>``. The scenarios run in
registration order; the last two stop (or kill) a node and start it again.
"""

# ruff: noqa: B023
from __future__ import annotations

import json
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from compat_tests.scenarios import (
    Outcome,
    Steps,
    _java,
    batches_summary,
    connect,
    err,
    fetch,
    list_offsets,
    norm,
    produce_partition,
    relativize,
    simple_records,
)
from compat_tests.wire import Connection, build_batch
from protocol._generated.create_topics_request import CreateTopicsRequest as CT
from protocol._generated.describe_topic_partitions_request import (
    DescribeTopicPartitionsRequest as DTP,
)
from protocol._generated.elect_leaders_request import ElectLeadersRequest as EL
from protocol._generated.metadata_request import MetadataRequest
from protocol._generated.offset_for_leader_epoch_request import (
    OffsetForLeaderEpochRequest as OFLE,
)

#: bound of every wait for the cluster's asynchronous effects (a loaded 2-core machine)
WAIT_S = 60.0
TOPICS_TOOL = "org.apache.kafka.tools.TopicCommand"
ELECTION_TOOL = "org.apache.kafka.tools.LeaderElectionCommand"
REASSIGN_TOOL = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"


class ClusterTarget(Protocol):
    """What a cluster scenario needs of a running 3-node cluster."""

    @property
    def node_ids(self) -> list[int]: ...

    def address(self, node_id: int) -> str: ...

    def stop_node(self, node_id: int) -> object: ...

    def start_node(self, node_id: int) -> object: ...

    def kill_node(self, node_id: int) -> object: ...


ClusterScenarioFn = Callable[[ClusterTarget], Outcome]
CLUSTER_SCENARIOS: dict[str, ClusterScenarioFn] = {}


def cluster_scenario(fn: ClusterScenarioFn) -> ClusterScenarioFn:
    CLUSTER_SCENARIOS[fn.__name__] = fn
    return fn


def run_cluster_scenario(name: str, cluster: ClusterTarget) -> Outcome:
    """Run one scenario; the outcome as JSON would store it (like ``run_scenario``)."""
    try:
        result = CLUSTER_SCENARIOS[name](cluster)
    except Exception as e:
        result = {"scenario_raised": f"{type(e).__name__}: {e}".splitlines()[0][:200]}
    return json.loads(json.dumps(relativize(result), sort_keys=True, default=str))


# --- helpers ------------------------------------------------------------------------------------


def bootstrap_of(cluster: ClusterTarget, ids: list[int] | None = None) -> str:
    return ",".join(cluster.address(i) for i in (ids or cluster.node_ids))


def md(c: Connection, topics: list[str]) -> Any:
    req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
                          allow_auto_topic_creation=False)
    return c.request(req, 12)


def partition_view(p: Any) -> dict[str, Any]:
    return {
        "error_code": err(p.error_code),
        "leader": p.leader_id,
        "leader_epoch": p.leader_epoch,
        "replicas": list(p.replica_nodes),
        "isr": list(p.isr_nodes),
        "offline": list(p.offline_replicas),
    }


def topic_view(c: Connection, topic: str) -> dict[str, Any]:
    t = md(c, [topic]).topics[0]
    parts = sorted(t.partitions, key=lambda p: p.partition_index)
    return {"error_code": err(t.error_code),
            "partitions": {str(p.partition_index): partition_view(p) for p in parts}}


def shape(p: dict[str, Any], brokers: list[int]) -> dict[str, Any]:
    """A partition's layout without node ids: what must hold whoever placed it."""
    return {
        "error_code": p["error_code"],
        "leader_epoch": p["leader_epoch"],
        "replicas": len(p["replicas"]),
        "distinct_replicas": len(set(p["replicas"])),
        "replicas_are_brokers": set(p["replicas"]) <= set(brokers),
        "leader_is_first_replica": bool(p["replicas"]) and p["leader"] == p["replicas"][0],
        "leader_in_isr": p["leader"] in p["isr"],
        "isr_is_replicas": sorted(p["isr"]) == sorted(p["replicas"]),
        "offline": p["offline"],
    }


def wait_view(c: Connection, topic: str, ok: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """Metadata of ``topic`` once ``ok(view)`` holds (or the last one after ``WAIT_S``)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            view = topic_view(c, topic)
        except (OSError, ConnectionError):
            view = {"error_code": "NO_ANSWER", "partitions": {}}
        if ok(view) or time.monotonic() > deadline:
            return view
        time.sleep(0.1)


def all_led(n: int) -> Callable[[dict[str, Any]], bool]:
    def ok(view: dict[str, Any]) -> bool:
        ps = view["partitions"]
        return len(ps) == n and all(p["leader"] >= 0 for p in ps.values())
    return ok


def full_isr(n: int, size: int = 3) -> Callable[[dict[str, Any]], bool]:
    def ok(view: dict[str, Any]) -> bool:
        ps = view["partitions"]
        return all_led(n)(view) and all(len(p["isr"]) == size for p in ps.values())
    return ok


def creatable(
    name: str, partitions: int = -1, rf: int = -1,
    assignments: list[list[int]] | None = None, configs: dict[str, str] | None = None,
) -> CT.CreatableTopic:
    return CT.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=rf,
        assignments=[CT.CreatableReplicaAssignment(partition_index=i, broker_ids=b)
                     for i, b in enumerate(assignments or [])],
        configs=[CT.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()],
    )


def create(c: Connection, topics: list[CT.CreatableTopic], validate_only: bool = False) -> Any:
    r = c.request(CT(topics=topics, timeout_ms=30000, validate_only=validate_only), 7)
    return [{"name": t.name, "error_code": err(t.error_code), "num_partitions": t.num_partitions,
             "replication_factor": t.replication_factor} for t in r.topics]


def create_and_wait(
    c: Connection, topic: CT.CreatableTopic, cluster: ClusterTarget
) -> dict[str, Any]:
    """Create ``topic`` and wait until every node's Metadata shows it led with a full ISR
    (a node learns new topics from the metadata log a little later than the controller)."""
    res = create(c, [topic])[0]
    if res["error_code"] != "NONE":
        raise AssertionError(f"create {topic.name}: {res}")
    ok = full_isr(res["num_partitions"], res["replication_factor"])
    view: dict[str, Any] = {}
    for node_id in cluster.node_ids:
        with connect(cluster.address(node_id)) as other:
            view = wait_view(other, topic.name, ok)
    return view


def leader_of(c: Connection, topic: str, partition: int = 0) -> int:
    leader: int = topic_view(c, topic)["partitions"][str(partition)]["leader"]
    return leader


def text_lines(out: str) -> list[str]:
    """Tool output without topic ids, ports and blank lines."""
    out = re.sub(r"TopicId: \S+", "TopicId: <id>", out)
    out = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:<port>", out)
    return [ln.strip() for ln in out.splitlines() if ln.strip()]


def describe_tool(bootstrap: str, *args: str) -> list[Any]:
    rc, so, se = _java(TOPICS_TOOL, ["--bootstrap-server", bootstrap, "--describe", *args])
    return [rc, [ln.split() for ln in text_lines(so)], _error_lines(se)]


def _error_lines(stderr: str) -> list[str]:
    return [re.sub(r"^\[[^]]*\] ", "", ln)[:300] for ln in text_lines(stderr)
            if ln.startswith("Error") or "ERROR" in ln]


def one_partition(r: Any) -> dict[str, Any]:
    """The single partition of a ListOffsets / Produce / Fetch answer."""
    return norm(r)  # type: ignore[no-any-return]


def produce_to(address: str, topic: str, n: int, partition: int = 0, acks: int = -1) -> Any:
    with connect(address) as c:
        return produce_partition(c, topic, build_batch(simple_records(n)), partition=partition,
                                 acks=acks)


def ofle(address: str, topic: str, partition: int, leader_epoch: int) -> Any:
    req = OFLE(replica_id=-1, topics=[OFLE.OffsetForLeaderTopic(topic=topic, partitions=[
        OFLE.OffsetForLeaderPartition(partition=partition, current_leader_epoch=-1,
                                      leader_epoch=leader_epoch)])])
    with connect(address) as c:
        return norm(c.request(req, 4).topics[0].partitions[0])


def fetch_at(address: str, topic: str, offset: int, version: int = 12) -> dict[str, Any]:
    with connect(address) as c:
        r = fetch(c, topic, offset, version=version)
    p = r.responses[0].partitions[0]
    d: dict[str, Any] = norm(p, frozenset({"records", "current_leader", "diverging_epoch",
                                           "snapshot_id", "aborted_transactions"}))
    d["batches"] = [[b["base_offset"], b["records_count"]] for b in batches_summary(p.records)]
    return d


def wait_follower_hw(address: str, topic: str, hw: int, timeout: float = WAIT_S) -> Any:
    """The high watermark a Fetch (v12, served by followers too) answers on ``address``, once
    it is ``hw`` (or the last one after ``timeout``)."""
    deadline = time.monotonic() + timeout
    while True:
        seen = fetch_at(address, topic, 0)
        if seen["high_watermark"] == hw or time.monotonic() > deadline:
            return {"error_code": seen["error_code"], "high_watermark": seen["high_watermark"]}
        time.sleep(0.1)


def offsets_at(address: str, topic: str) -> Any:
    """ListOffsets (earliest, latest) on ``address``, asked again while it answers
    NOT_LEADER_OR_FOLLOWER (a node applies a leadership change a moment after another node's
    Metadata shows it; clients refresh and retry the same way)."""
    deadline = time.monotonic() + 10
    while True:
        with connect(address) as c:
            got = list_offsets(c, topic, [-2, -1])
        if time.monotonic() > deadline or not any(
                isinstance(r, dict) and r.get("error_code") == "NOT_LEADER_OR_FOLLOWER"
                for r in got):
            return got
        time.sleep(0.2)


def dtp(c: Connection, topics: list[str]) -> Any:
    r = norm(c.request(DTP(topics=[DTP.TopicRequest(name=t) for t in topics]), 0))
    for t in r["topics"]:
        t.pop("topic_authorized_operations", None)
    return r["topics"]


def elect(c: Connection, election_type: int, parts: dict[str, list[int]] | None) -> Any:
    tps = None if parts is None else [EL.TopicPartitions(topic=t, partitions=ps)
                                      for t, ps in parts.items()]
    r = c.request(EL(election_type=election_type, topic_partitions=tps, timeout_ms=30000), 2)
    rows = []
    for t in r.replica_election_results:
        if parts is None and not t.topic.startswith("cluster_"):
            continue
        for p in t.partition_result:
            rows.append([t.topic, p.partition_id, err(p.error_code)])
    return {"error_code": err(r.error_code), "partitions": sorted(rows)}


def tool_partitions(lines: list[str], prefix: str) -> list[str]:
    """kafka-leader-election's lines with only this scenario's partitions, sorted."""
    out = []
    for ln in lines:
        head, sep, tail = ln.partition(" for partitions ")
        if not sep:
            out.append(ln)
            continue
        parts = sorted(p for p in tail.split(", ") if p.startswith(prefix))
        if parts:
            out.append(f"{head}{sep}{', '.join(parts)}")
    return out


def write_json(obj: Any) -> str:
    f = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, prefix="compat-reassign-")
    with f:
        json.dump(obj, f)
    return f.name


def _unlink(path: str) -> None:
    Path(path).unlink(missing_ok=True)


# --- scenarios ----------------------------------------------------------------------------------


@cluster_scenario
def cluster_create_topics(cluster: ClusterTarget) -> Outcome:
    """CreateTopics with replication factor 3 (placed by the controller), the cluster defaults,
    manual assignments, and the errors: RF 4 > 3 brokers, unknown and repeated brokers."""
    out = Steps()
    t = "cluster_create_topics"
    brokers = cluster.node_ids
    with connect(cluster.address(1)) as c:
        out.step("rf3", lambda: create(c, [creatable(f"{t}-rf3", 3, 3)]))
        out.step("defaults", lambda: create(c, [creatable(f"{t}-defaults")]))
        for name in ("rf3", "defaults"):
            view = wait_view(c, f"{t}-{name}", full_isr(3))
            out.step(f"{name}_shape", lambda: {
                k: shape(p, brokers) for k, p in view["partitions"].items()})
            out.step(f"{name}_distinct_leaders", lambda: len(
                {p["leader"] for p in view["partitions"].values()}))
        manual = [[1, 2, 3], [2, 3, 1], [3, 1, 2]]
        out.step("manual", lambda: create(c, [creatable(f"{t}-manual", assignments=manual)]))
        out.step("manual_metadata", lambda: wait_view(c, f"{t}-manual", full_isr(3)))
        errors = {
            "rf4": creatable(f"{t}-rf4", 1, 4),
            "rf0": creatable(f"{t}-rf0", 1, 0),
            "unknown_broker": creatable(f"{t}-unknown", assignments=[[1, 2, 9]]),
            "repeated_broker": creatable(f"{t}-repeated", assignments=[[1, 1, 2]]),
            "uneven": creatable(f"{t}-uneven", assignments=[[1, 2], [3]]),
            "assignment_and_rf": creatable(f"{t}-both", rf=2, assignments=[[1, 2]]),
            "min_isr_above_rf": creatable(f"{t}-isr", 1, 3, configs={
                "min.insync.replicas": "4"}),
        }
        for key, topic in errors.items():
            out.step(key, lambda: create(c, [topic]))
        out.step("rf4_validate_only", lambda: create(c, [creatable(f"{t}-rf4v", 1, 4)], True))
        out.step("describe_topic_partitions", lambda: dtp(c, [f"{t}-manual"]))
    return out


@cluster_scenario
def cluster_metadata_and_tools(cluster: ClusterTarget) -> Outcome:
    """Metadata's brokers and controller, and ``kafka-topics`` creating with
    ``--replica-assignment`` (and ``--replication-factor 4``: the error) and describing."""
    out = Steps()
    t = "cluster_metadata_and_tools"
    bootstrap = bootstrap_of(cluster)
    with connect(cluster.address(2)) as c:
        def brokers() -> Any:
            r = md(c, [])
            return {"brokers": sorted([b.node_id, b.host, b.rack] for b in r.brokers),
                    "controller_is_a_broker": r.controller_id in cluster.node_ids}

        out.step("brokers", brokers)
    base = ["--bootstrap-server", bootstrap, "--create", "--topic"]
    for key, args in (
        ("create_assignment", [f"{t}-a", "--replica-assignment", "1:2:3,2:3:1,3:1:2"]),
        ("create_rf4", [f"{t}-rf4", "--partitions", "1", "--replication-factor", "4"]),
    ):
        rc, so, se = _java(TOPICS_TOOL, base + args)
        out.step(key, lambda: [rc, text_lines(so), _error_lines(se)])
    for node_id in cluster.node_ids:
        with connect(cluster.address(node_id)) as c:
            wait_view(c, f"{t}-a", full_isr(3))
    out.step("describe_assignment", lambda: describe_tool(bootstrap, "--topic", f"{t}-a"))
    return out


@cluster_scenario
def cluster_produce_and_followers(cluster: ClusterTarget) -> Outcome:
    """acks=all with min.insync.replicas 2, 3 and 4 on replication factor 3; Produce, ListOffsets,
    OffsetForLeaderEpoch and Fetch (v4, without client metadata; v12 without a rack) sent to the
    leader (node 1) and to a follower (node 2)."""
    out = Steps()
    t = "cluster_produce_and_followers"
    leader, follower = cluster.address(1), cluster.address(2)
    with connect(leader) as c:
        for isr in (2, 3, 4):
            create_and_wait(c, creatable(f"{t}-isr{isr}", assignments=[[1, 2, 3]],
                                         configs={"min.insync.replicas": str(isr)}), cluster)
    for isr in (2, 3, 4):
        out.step(f"acks_all_min_isr{isr}", lambda: produce_to(leader, f"{t}-isr{isr}", 3))
    out.step("acks_1_min_isr4", lambda: produce_to(leader, f"{t}-isr4", 2, acks=1))
    out.step("acks_all_to_follower", lambda: produce_to(follower, f"{t}-isr2", 1))
    out.step("acks_1_to_follower", lambda: produce_to(follower, f"{t}-isr2", 1, acks=1))
    topic = f"{t}-isr2"
    wait_follower_hw(follower, topic, 3)  # the follower learns it with its next fetch
    for who, address in (("leader", leader), ("follower", follower)):
        out.step(f"list_offsets_{who}", lambda: offsets_at(address, topic))
        out.step(f"ofle_{who}", lambda: ofle(address, topic, 0, 0))
        out.step(f"fetch_v12_{who}", lambda: fetch_at(address, topic, 0))
        out.step(f"fetch_v4_{who}", lambda: fetch_at(address, topic, 0, version=4))
        out.step(f"fetch_v12_{who}_unknown_partition", lambda: fetch_at(address, f"{t}-none", 0))
    return out


def _json_lines(lines: list[str]) -> list[Any]:
    """The tool's lines, JSON ones parsed (log directories are paths: ``<log dir>``)."""
    out: list[Any] = []
    for ln in lines:
        if ln.startswith("{"):
            doc = json.loads(ln)
            for p in doc.get("partitions", []):
                if "log_dirs" in p:
                    p["log_dirs"] = [d if d == "any" else "<log dir>" for d in p["log_dirs"]]
            out.append(doc)
        else:
            out.append(ln)
    return out


def reassign_tool(bootstrap: str, *args: str) -> tuple[int, list[Any], list[str]]:
    rc, so, se = _java(REASSIGN_TOOL, ["--bootstrap-server", bootstrap, *args])
    return rc, _json_lines(text_lines(so)), _error_lines(se)


def proposed_shape(lines: list[Any], allowed: set[int]) -> list[Any]:
    """``--generate``'s proposal is random (Kafka's placement starts at a random broker): keep
    the current assignment, and of the proposal only which brokers and how many replicas."""
    out: list[Any] = []
    for i, ln in enumerate(lines):
        if isinstance(ln, dict) and i > 0 and lines[i - 1] == \
                "Proposed partition reassignment configuration":
            out.append([[p["topic"], p["partition"], len(p["replicas"]),
                         set(p["replicas"]) <= allowed, len(set(p["replicas"]))]
                        for p in ln["partitions"]])
        else:
            out.append(ln)
    return out


@cluster_scenario
def cluster_reassign_partitions(cluster: ClusterTarget) -> Outcome:
    """``kafka-reassign-partitions --generate/--execute/--verify`` moving replicas of an RF-2
    topic; the Metadata and offsets after, and ``--execute`` with a broker that does not
    exist."""
    out = Steps()
    t = "cluster_reassign_partitions"
    bootstrap = bootstrap_of(cluster)
    with connect(cluster.address(1)) as c:
        create_and_wait(c, creatable(t, assignments=[[1, 2], [2, 3]]), cluster)
        produce_partition(c, t, build_batch(simple_records(4)))
        move = write_json({"version": 1, "topics": [{"topic": t}]})
        plan = write_json({"version": 1, "partitions": [
            {"topic": t, "partition": 0, "replicas": [3, 1]},
            {"topic": t, "partition": 1, "replicas": [3, 2]}]})
        bad = write_json({"version": 1, "partitions": [
            {"topic": t, "partition": 0, "replicas": [1, 9]}]})
        try:
            out.step("generate", lambda: proposed_shape(list(reassign_tool(
                bootstrap, "--generate", "--topics-to-move-json-file", move,
                "--broker-list", "1,3")[1]), {1, 3}))
            out.step("execute", lambda: reassign_tool(
                bootstrap, "--execute", "--reassignment-json-file", plan))

            def verify() -> Any:
                deadline = time.monotonic() + WAIT_S
                while True:
                    res = reassign_tool(bootstrap, "--verify", "--reassignment-json-file", plan)
                    if not any("in progress" in str(ln) for ln in res[1]) or \
                            time.monotonic() > deadline:
                        return res
                    time.sleep(0.5)

            out.step("verify", verify)
            out.step("metadata_after", lambda: wait_view(c, t, full_isr(2, 2)))
            out.step("offsets_after", lambda: offsets_at(cluster.address(leader_of(c, t)), t))
            out.step("execute_unknown_broker", lambda: reassign_tool(
                bootstrap, "--execute", "--reassignment-json-file", bad))
        finally:
            for f in (move, plan, bad):
                _unlink(f)
    return out


def _down_view(view: dict[str, Any]) -> bool:
    """Node 1 gone for good: led elsewhere, out of the ISR, offline (fenced). The fence can
    come a moment after the ISR change (kafkawire: 0.8 s when node 1 was the active
    controller), so the scenario waits for all three."""
    ps = view["partitions"]
    return bool(ps) and all(p["leader"] not in (-1, 1) and 1 not in p["isr"]
                            and 1 in p["offline"] for p in ps.values())


@cluster_scenario
def cluster_leader_failover(cluster: ClusterTarget) -> Outcome:
    """SIGTERM of the leader (node 1): the new leader, ISR and offline replicas clients see,
    acks=all with 2 of 3 (min.insync.replicas 2 and 3), offsets kept, ElectLeaders while the
    preferred leader is away; then node 1 back, its return to the ISR, preferred election
    (raw and ``kafka-leader-election --election-type preferred --all-topic-partitions``)."""
    out = Steps()
    t = "cluster_leader_failover"
    topics = {f"{t}-isr2": "2", f"{t}-isr3": "3"}
    with connect(cluster.address(2)) as c:
        for name, isr in topics.items():
            create_and_wait(c, creatable(name, assignments=[[1, 2, 3], [2, 3, 1]],
                                         configs={"min.insync.replicas": isr}), cluster)
            out.step(f"{name}_produce", lambda: produce_to(cluster.address(1), name, 3))
        for name in topics:  # the followers know the high watermark before the leader goes
            for node_id in (2, 3):
                wait_follower_hw(cluster.address(node_id), name, 3)
        cluster.stop_node(1)
        for name in topics:
            out.step(f"{name}_after_stop", lambda: wait_view(c, name, _down_view))
        out.step("describe_topic_partitions", lambda: dtp(c, list(topics)))
        for name in topics:
            out.step(f"{name}_produce_2_of_3", lambda: produce_to(
                cluster.address(leader_of(c, name)), name, 2))
            out.step(f"{name}_offsets", lambda: offsets_at(cluster.address(leader_of(c, name)),
                                                           name))
        isr3 = f"{t}-isr3"
        out.step("isr3_acks_1_under_min_isr", lambda: produce_to(
            cluster.address(leader_of(c, isr3)), isr3, 1, acks=1))
        # KIP-966: the high watermark does not move while the ISR is below min.insync.replicas
        out.step("isr3_high_watermark_under_min_isr", lambda: wait_follower_hw(
            cluster.address(leader_of(c, isr3)), isr3, 4, timeout=5.0))
        out.step("describe_tool", lambda: describe_tool(
            bootstrap_of(cluster, [2, 3]), "--topic", f"{t}-.*"))
        parts = {name: [0] for name in topics}
        out.step("elect_preferred_while_down", lambda: elect(c, 0, parts))
        out.step("elect_unclean_while_down", lambda: elect(c, 1, parts))
        cluster.start_node(1)
        for name in topics:
            out.step(f"{name}_after_restart", lambda: wait_view(c, name, full_isr(2)))
        out.step("elect_preferred", lambda: elect(c, 0, {f"{t}-isr2": [0, 1]}))
        out.step("isr2_after_election", lambda: wait_view(
            c, f"{t}-isr2", lambda v: v["partitions"]["0"]["leader"] == 1))
        rc, so, se = _java(ELECTION_TOOL, ["--bootstrap-server", bootstrap_of(cluster),
                                           "--election-type", "preferred",
                                           "--all-topic-partitions"])
        out.step("election_tool_all", lambda: [rc, tool_partitions(text_lines(so), t),
                                               _error_lines(se)])
        for name in topics:
            out.step(f"{name}_final", lambda: wait_view(
                c, name, lambda v: v["partitions"]["0"]["leader"] == 1))
            out.step(f"{name}_offsets_final", lambda: offsets_at(cluster.address(1), name))
    return out


def _killed_view(view: dict[str, Any]) -> bool:
    """Node 3 fenced after SIGKILL: out of every ISR of more than one member, offline."""
    ps = view["partitions"]
    return bool(ps) and all(3 in p["offline"] and (3 not in p["isr"] or p["leader"] == -1)
                            for p in ps.values())


@cluster_scenario
def cluster_elr_unclean_restart(cluster: ClusterTarget) -> Outcome:
    """KIP-966 after SIGKILL (no controlled shutdown) of node 3, the only replica of an RF 1
    topic and a follower of an RF 3 topic with min.insync.replicas 3: ISR, ELR and
    LastKnownElr while it is fenced (DescribeTopicPartitions, ``kafka-topics --describe``);
    its return after an unclean shutdown (it leaves ELR at registration); who leads then, and
    the offsets."""
    out = Steps()
    t = "cluster_elr_unclean_restart"
    rf1, rf3 = f"{t}-rf1", f"{t}-rf3"
    with connect(cluster.address(1)) as c:
        create_and_wait(c, creatable(rf1, assignments=[[3]]), cluster)
        create_and_wait(c, creatable(rf3, assignments=[[1, 2, 3]],
                                     configs={"min.insync.replicas": "3"}), cluster)
        out.step("rf1_produce", lambda: produce_to(cluster.address(3), rf1, 2))
        out.step("rf3_produce", lambda: produce_to(cluster.address(1), rf3, 2))
        for node_id in (2, 3):
            wait_follower_hw(cluster.address(node_id), rf3, 2)
        cluster.kill_node(3)
        for name in (rf1, rf3):
            out.step(f"{name}_killed", lambda: wait_view(c, name, _killed_view))
        out.step("dtp_killed", lambda: dtp(c, [rf1, rf3]))
        out.step("describe_tool_killed", lambda: describe_tool(
            bootstrap_of(cluster, [1, 2]), "--topic", f"{t}-.*"))
        out.step("rf3_acks_1", lambda: produce_to(cluster.address(1), rf3, 1, acks=1))
        out.step("rf3_hw_killed", lambda: wait_follower_hw(cluster.address(1), rf3, 3,
                                                           timeout=5.0))
        cluster.start_node(3)
        out.step(f"{rf1}_back", lambda: wait_view(c, rf1, all_led(1)))
        out.step(f"{rf3}_back", lambda: wait_view(c, rf3, full_isr(1)))
        out.step("dtp_back", lambda: dtp(c, [rf1, rf3]))
        out.step("rf1_offsets", lambda: offsets_at(cluster.address(3), rf1))
        out.step("rf3_offsets", lambda: offsets_at(cluster.address(1), rf3))
    return out


# share groups on the cluster (issue 27): registered after the scenarios above
from compat_tests import scenarios_share_cluster as _share  # noqa: E402,F401
