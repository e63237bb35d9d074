"""A raw connection to a whole cluster: the single-node scenarios against 3 nodes (issue 27).

The scenarios of ``scenarios*.py`` speak to one broker through :class:`wire.Connection`. Given
a bootstrap of several addresses (``"h:p1,h:p2,h:p3"``), :func:`open_connection` returns a
:class:`ClusterConnection` instead, which sends each request where a client would:

* requests about partitions (Produce, Fetch, ListOffsets, DeleteRecords, OffsetForLeaderEpoch,
  DescribeProducers, ShareFetch, ShareAcknowledge) to the partition's leader, as the cluster's
  Metadata names it when the request is sent; a request whose partitions have different leaders
  is split into one request per leader and the answers are joined in the request's order (a
  Fetch inside a KIP-227 session is never split: a session lives on one broker);
* group requests to the group's coordinator, transaction requests to the transaction
  coordinator (FindCoordinator, remembered; once more when a broker answers NOT_COORDINATOR);
* ListGroups and ListTransactions to every broker (each lists its own), answers joined;
* DescribeConfigs / AlterConfigs / IncrementalAlterConfigs of a BROKER or BROKER_LOGGER
  resource to that broker;
* everything else (ApiVersions, Metadata, CreateTopics, ACLs, quotas, SCRAM, DescribeCluster,
  DescribeQuorum, ...) to the first address.

Routing is all it does: it never retries an error a broker answered (except NOT_COORDINATOR
after a coordinator moved, which any client follows), so the outcome is what the cluster said.
"""

from __future__ import annotations

import copy
import re
import time
import uuid
from typing import Any

from compat_tests.wire import Connection

# API keys
PRODUCE, FETCH, LIST_OFFSETS, DELETE_RECORDS, OFFSET_FOR_LEADER_EPOCH = 0, 1, 2, 21, 23
DESCRIBE_PRODUCERS, SHARE_FETCH, SHARE_ACKNOWLEDGE = 61, 78, 79
FIND_COORDINATOR, LIST_GROUPS, LIST_TRANSACTIONS, METADATA = 10, 16, 66, 3
DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 33, 44

#: partition-addressed requests: (topics field, topic name field, partitions field, partition
#: index field or None when the partitions are plain ints), (answer's topics field, answer's
#: partitions field)
PARTITIONED: dict[int, tuple[tuple[str, str, str, str | None], tuple[str, str]]] = {
    PRODUCE: (("topic_data", "name", "partition_data", "index"),
              ("responses", "partition_responses")),
    FETCH: (("topics", "topic", "partitions", "partition"), ("responses", "partitions")),
    LIST_OFFSETS: (("topics", "name", "partitions", "partition_index"), ("topics", "partitions")),
    DELETE_RECORDS: (("topics", "name", "partitions", "partition_index"),
                     ("topics", "partitions")),
    OFFSET_FOR_LEADER_EPOCH: (("topics", "topic", "partitions", "partition"),
                              ("topics", "partitions")),
    DESCRIBE_PRODUCERS: (("topics", "name", "partition_indexes", None), ("topics", "partitions")),
    SHARE_FETCH: (("topics", "topic_name", "partitions", "partition_index"),
                  ("responses", "partitions")),
    SHARE_ACKNOWLEDGE: (("topics", "topic_name", "partitions", "partition_index"),
                        ("responses", "partitions")),
}

#: group coordinator requests -> the field holding the group id (a list: the first one counts
#: unless the request is split by coordinator, see SPLIT_BY_GROUP; "a|b": a, else b)
GROUP_KEYED: dict[int, str] = {
    8: "group_id", 9: "group_id|groups", 11: "group_id", 12: "group_id", 13: "group_id",
    14: "group_id", 15: "groups", 28: "group_id", 42: "groups_names", 47: "group_id",
    68: "group_id", 69: "group_ids", 76: "group_id", 77: "group_ids", 90: "groups",
    91: "group_id", 92: "group_id",
}
#: requests naming several groups: split by coordinator, answers joined (request field, answer
#: field)
SPLIT_BY_GROUP: dict[int, tuple[str, str]] = {
    15: ("groups", "groups"), 42: ("groups_names", "results"), 69: ("group_ids", "groups"),
    77: ("group_ids", "groups"),
}
#: transaction coordinator requests -> the field holding the transactional id
TXN_KEYED: dict[int, str] = {22: "transactional_id", 25: "transactional_id",
                             26: "transactional_id"}
NOT_COORDINATOR = 16
COORDINATOR_NOT_READY = (14, 15)  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE
BROKER_RESOURCE_TYPES = (4, 8)  # BROKER, BROKER_LOGGER
#: bound of the waits for a coordinator (the internal topic may be being created)
COORDINATOR_WAIT_S = 60.0


def open_connection(bootstrap: str, timeout: float = 60.0) -> Connection:
    """A :class:`Connection` for one address, a :class:`ClusterConnection` for several."""
    if "," in bootstrap:
        return ClusterConnection(bootstrap, timeout)
    return Connection(bootstrap, timeout)


def _group_key(msg: Any, field: str) -> str | None:
    v = getattr(msg, field, None)
    if isinstance(v, list):
        if not v:
            return None
        first = v[0]
        return first if isinstance(first, str) else str(getattr(first, "group_id", ""))
    return v if isinstance(v, str) else None


class ClusterConnection(Connection):
    """A connection to every node of a cluster, routing each request (module docstring)."""

    def __init__(self, bootstrap: str, timeout: float = 60.0) -> None:
        self.addresses = [a.strip() for a in bootstrap.split(",") if a.strip()]
        super().__init__(self.addresses[0], timeout)
        self.cluster_bootstrap = bootstrap
        self._nodes: dict[int, Connection] = {}
        self._node_address: dict[int, str] = {}
        self._coordinators: dict[tuple[int, str], int] = {}
        self._sent_on: dict[int, Connection] = {}

    # -- connections to nodes ------------------------------------------------------------------

    def close(self) -> None:
        for c in self._nodes.values():
            c.close()
        self._nodes.clear()
        super().close()

    def _plain_request(self, msg: Any, version: int) -> Any:
        return Connection.request(self, msg, version)

    def _refresh_nodes(self) -> None:
        from protocol._generated.metadata_request import MetadataRequest

        r = self._plain_request(MetadataRequest(topics=[], allow_auto_topic_creation=False), 12)
        for b in r.brokers:
            self._node_address[b.node_id] = f"{b.host}:{b.port}"

    def node(self, node_id: int) -> Connection:
        c = self._nodes.get(node_id)
        if c is None:
            if node_id not in self._node_address:
                self._refresh_nodes()
            address = self._node_address.get(node_id)
            if address is None:
                return self  # a node the cluster does not list: the first address answers
            if address == self.bootstrap:
                return self
            c = self._nodes[node_id] = Connection(address, self.timeout)
        return c

    def node_ids(self) -> list[int]:
        self._refresh_nodes()
        return sorted(self._node_address)

    # -- routing -------------------------------------------------------------------------------

    def request(self, msg: Any, version: int) -> Any:
        key = msg.API_KEY
        if key in PARTITIONED:
            return self._partitioned(msg, version)
        if key in (LIST_GROUPS, LIST_TRANSACTIONS):
            return self._everywhere(msg, version)
        if key in SPLIT_BY_GROUP:
            return self._split_by_group(msg, version)
        if key in GROUP_KEYED or key in TXN_KEYED or key == 24:
            return self._coordinated(msg, version)
        if key in (DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS):
            return self._by_resource(msg, version)
        return self._plain_request(msg, version)

    def send_only(self, msg: Any, version: int) -> int:
        conn = self._destination(msg)
        cid = conn.send_only(msg, version) if conn is not self else Connection.send_only(
            self, msg, version)
        self._sent_on[cid] = conn
        return cid

    def read_response(self, api_key: int, version: int, correlation_id: int) -> Any:
        conn = self._sent_on.pop(correlation_id, self)
        if conn is self:
            return Connection.read_response(self, api_key, version, correlation_id)
        return conn.read_response(api_key, version, correlation_id)

    def _destination(self, msg: Any) -> Connection:
        """Where a request sent without waiting for its answer goes (no split, no retry)."""
        key = msg.API_KEY
        if key in PARTITIONED:
            leaders = self._leaders_of(msg)
            nodes = {n for n in leaders.values() if n is not None}
            return self.node(min(nodes)) if nodes else self
        coord = self._coordinator_key(msg)
        if coord is not None:
            return self.node(self.coordinator(*coord))
        return self

    # -- coordinators --------------------------------------------------------------------------

    def _coordinator_key(self, msg: Any) -> tuple[int, str] | None:
        key = msg.API_KEY
        if key in GROUP_KEYED:
            for field in GROUP_KEYED[key].split("|"):
                g = _group_key(msg, field)
                if g is not None:
                    return (0, g)
            return None
        if key in TXN_KEYED:
            t = getattr(msg, TXN_KEYED[key], None)
            return None if t is None else (1, t)
        if key == 24:  # AddPartitionsToTxn: v3 and below from clients, v4+ batched by brokers
            t = msg.v3_and_below_transactional_id
            if t:
                return (1, t)
            if msg.transactions:
                return (1, msg.transactions[0].transactional_id)
        return None

    def coordinator(self, key_type: int, key: str, refresh: bool = False) -> int:
        """The coordinator's node id (FindCoordinator v4 on the first address, remembered)."""
        from protocol._generated.find_coordinator_request import FindCoordinatorRequest

        if not refresh and (key_type, key) in self._coordinators:
            return self._coordinators[(key_type, key)]
        deadline = time.monotonic() + COORDINATOR_WAIT_S
        while True:
            r = self._plain_request(
                FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key]), 4)
            c = r.coordinators[0]
            if c.error_code == 0:
                self._node_address[c.node_id] = f"{c.host}:{c.port}"
                self._coordinators[(key_type, key)] = c.node_id
                return int(c.node_id)
            if c.error_code not in COORDINATOR_NOT_READY or time.monotonic() > deadline:
                return -1  # the first address answers (with the error a client would see)
            time.sleep(0.1)

    def _coordinated(self, msg: Any, version: int) -> Any:
        ck = self._coordinator_key(msg)
        if ck is None:
            return self._plain_request(msg, version)
        deadline = time.monotonic() + COORDINATOR_WAIT_S
        refresh = False
        while True:
            conn = self.node(self.coordinator(*ck, refresh=refresh))
            r = conn.request(msg, version) if conn is not self else self._plain_request(
                msg, version)
            if getattr(r, "error_code", 0) != NOT_COORDINATOR or time.monotonic() > deadline:
                return r
            refresh = True
            time.sleep(0.1)

    def _split_by_group(self, msg: Any, version: int) -> Any:
        req_field, resp_field = SPLIT_BY_GROUP[msg.API_KEY]
        groups = list(getattr(msg, req_field) or [])
        by_node: dict[int, list[Any]] = {}
        for g in groups:
            gid = g if isinstance(g, str) else g.group_id
            by_node.setdefault(self.coordinator(0, gid), []).append(g)
        if len(by_node) <= 1:
            return self._coordinated(msg, version)
        answers = []
        for part in by_node.values():
            sub = copy.copy(msg)
            setattr(sub, req_field, part)
            answers.append(self._coordinated(sub, version))
        out = answers[0]
        items = [x for a in answers for x in getattr(a, resp_field)]

        def position(x: Any) -> int:
            name = getattr(x, "group_id", None)
            names = [g if isinstance(g, str) else g.group_id for g in groups]
            return names.index(name) if name in names else len(names)

        setattr(out, resp_field, sorted(items, key=position))
        return out

    def _everywhere(self, msg: Any, version: int) -> Any:
        """ListGroups / ListTransactions: every broker lists its own; answers joined."""
        field = "groups" if msg.API_KEY == LIST_GROUPS else "transaction_states"
        answers = []
        for n in self.node_ids():
            conn = self.node(n)
            answers.append(conn.request(msg, version) if conn is not self
                           else self._plain_request(msg, version))
        out = answers[0]
        for a in answers:
            if a.error_code != 0:
                out.error_code = a.error_code
                break
        setattr(out, field, [x for a in answers for x in getattr(a, field)])
        return out

    def _by_resource(self, msg: Any, version: int) -> Any:
        nodes = {
            int(r.resource_name)
            for r in msg.resources
            if r.resource_type in BROKER_RESOURCE_TYPES and r.resource_name.isdigit()
        }
        if len(nodes) != 1:
            return self._plain_request(msg, version)
        (n,) = nodes
        conn = self.node(n)
        return conn.request(msg, version) if conn is not self else self._plain_request(
            msg, version)

    # -- partition leaders ---------------------------------------------------------------------

    def _leaders_of(self, msg: Any) -> dict[tuple[int, int], int | None]:
        """(topic index, partition index in the request) -> leader node (None: unknown)."""
        from protocol._generated.metadata_request import MetadataRequest

        (tf, nf, pf, xf), _ = PARTITIONED[msg.API_KEY]
        topics = getattr(msg, tf) or []
        names: list[str | None] = []
        need_ids = False
        for t in topics:
            name = getattr(t, nf, None)
            if not name and getattr(t, "topic_id", None) not in (None, uuid.UUID(int=0)):
                need_ids = True
                name = None
            names.append(name or None)
        wanted = sorted({n for n in names if n})
        md: dict[str, dict[int, int]] = {}
        ids: dict[uuid.UUID, str] = {}
        if wanted or need_ids:
            req = MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name=n) for n in wanted],
                allow_auto_topic_creation=False,
            )
            if need_ids:
                req.topics = None
            r = self._plain_request(req, 12)
            for b in r.brokers:
                self._node_address[b.node_id] = f"{b.host}:{b.port}"
            for t in r.topics:
                if t.error_code == 0:
                    md[t.name] = {p.partition_index: p.leader_id for p in t.partitions}
                    ids[t.topic_id] = t.name
        out: dict[tuple[int, int], int | None] = {}
        for i, t in enumerate(topics):
            name = names[i] or ids.get(getattr(t, "topic_id", None))  # type: ignore[arg-type]
            parts = md.get(name or "", {})
            for j, p in enumerate(getattr(t, pf) or []):
                idx = p if xf is None else getattr(p, xf)
                leader = parts.get(idx)
                out[(i, j)] = leader if leader is not None and leader >= 0 else None
        return out

    def _partitioned(self, msg: Any, version: int) -> Any:
        (tf, _nf, pf, _xf), (rtf, rpf) = PARTITIONED[msg.API_KEY]
        leaders = self._leaders_of(msg)
        nodes = sorted({n for n in leaders.values() if n is not None})
        sessionful = msg.API_KEY == FETCH and (msg.session_id != 0 or msg.session_epoch != -1)
        if len(nodes) <= 1 or sessionful or msg.API_KEY in (SHARE_FETCH, SHARE_ACKNOWLEDGE):
            # one leader (unknown partitions answer from there too), or a session
            if not nodes:
                return self._plain_request(msg, version)
            conn = self.node(nodes[0])
            return conn.request(msg, version) if conn is not self else self._plain_request(
                msg, version)
        # one request per leader; partitions without a known leader go with the first
        topics = getattr(msg, tf)
        answers = []
        for n in nodes:
            sub = copy.copy(msg)
            sub_topics = []
            for i, t in enumerate(topics):
                parts = [p for j, p in enumerate(getattr(t, pf) or [])
                         if (leaders[(i, j)] or nodes[0]) == n]
                if parts:
                    st = copy.copy(t)
                    setattr(st, pf, parts)
                    sub_topics.append(st)
            setattr(sub, tf, sub_topics)
            conn = self.node(n)
            answers.append(conn.request(sub, version) if conn is not self
                           else self._plain_request(sub, version))
        return _join_partitioned(answers, rtf, rpf)


def _topic_key(t: Any) -> Any:
    for f in ("name", "topic", "topic_name"):
        v = getattr(t, f, None)
        if v:
            return v
    return getattr(t, "topic_id", None)


def _join_partitioned(answers: list[Any], rtf: str, rpf: str) -> Any:
    """One answer of several leaders' answers: topics in order of appearance, partitions
    joined; the first non-zero top-level error code."""
    out = answers[0]
    joined: dict[Any, Any] = {}
    order: list[Any] = []
    for a in answers:
        for t in getattr(a, rtf) or []:
            k = _topic_key(t)
            if k in joined:
                setattr(joined[k], rpf, list(getattr(joined[k], rpf)) + list(getattr(t, rpf)))
            else:
                joined[k] = copy.copy(t)
                order.append(k)
        if getattr(a, "error_code", 0) and not getattr(out, "error_code", 0):
            out.error_code = a.error_code
    for t in joined.values():
        setattr(t, rpf, sorted(getattr(t, rpf), key=_partition_index))
    setattr(out, rtf, [joined[k] for k in order])
    return out


def _partition_index(p: Any) -> int:
    for f in ("partition_index", "partition", "index"):
        v = getattr(p, f, None)
        if isinstance(v, int):
            return v
    return 0


# --- outcomes of single-node scenarios on a cluster ---------------------------------------------

#: keys whose integer values are node ids chosen by the cluster (which node leads a partition,
#: the quorum, a coordinator), not by the scenario: shown as "<node>" (-1, "none", stays)
NODE_KEYS = frozenset({
    "leader_id", "leader", "controller_id", "node_id", "coordinator_id", "leader_id_and_epoch",
    "preferred_leader", "current_leader",
})
#: keys whose values are lists of node ids (replicas, ISR...): compared as sorted lists, their
#: order being the placement's
NODE_LIST_KEYS = frozenset({
    "replica_nodes", "isr_nodes", "offline_replicas", "eligible_leader_replicas",
    "last_known_elr", "replicas", "isr", "elr", "adding_replicas", "removing_replicas",
})
_TEXT_NODE_FIELDS = re.compile(r"\b(Leader|Replicas|Isr|Elr|LastKnownElr|Coordinator|"
                               r"COORDINATOR \(ID\)|LeaderId|LeaderEpoch)(:?\s+)(-?[\d,]+)")


#: the same as text, in the Java tools' parsed outputs (``kafka-metadata-quorum`` status):
#: node ids, the quorum's epoch, and follower lags (timing)
TEXT_NODE_KEYS = frozenset({"LeaderId"})
TEXT_TIMING_KEYS = {"LeaderEpoch": "<quorum epoch>", "MaxFollowerLag": "<lag>",
                    "MaxFollowerLagTimeMs": "<lag>"}
#: tokens of the tools' split output lines followed by a node id / a list of node ids
TOKEN_NODE = frozenset({"Leader:", "Coordinator:"})
TOKEN_NODE_LIST = frozenset({"Replicas:", "Isr:", "Elr:", "LastKnownElr:"})
#: ``kafka-metadata-quorum describe --replication`` rows end with the node's role
QUORUM_ROLES = frozenset({"Leader", "Follower", "Observer"})


def normalize_on_cluster(obj: Any, nodes: set[int], ports: set[int]) -> Any:
    """What legitimately differs between two 3-node clusters running the same scenario: which
    node leads (partitions, quorum, coordinators) and in which order the controller listed the
    replicas, the quorum's epoch and follower lags (timing), and the nodes' ports. Node ids
    become ``"<node>"``, replica lists are sorted, ports ``"<port>"`` (as numbers and inside
    text)."""
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        # a DescribeQuorum partition (raw, or as scenarios_admin._quorum_outcome shows it)
        quorum = "current_voters" in obj or ("voters" in obj and "high_watermark" in obj)
        for k, v in obj.items():
            if quorum and k == "leader_epoch" and isinstance(v, int) and v > 0:
                out[k] = "<quorum epoch>"  # counts elections: timing, on three voters
            elif k in NODE_KEYS and isinstance(v, int) and not isinstance(v, bool) and v in nodes:
                out[k] = "<node>"
            elif k in NODE_LIST_KEYS and isinstance(v, list) and all(
                    isinstance(x, int) for x in v):
                out[k] = sorted(v)
            elif k in TEXT_NODE_KEYS and isinstance(v, str) and v.isdigit() and int(v) in nodes:
                out[k] = "<node>"
            elif k in TEXT_TIMING_KEYS and isinstance(v, str) and v.isdigit():
                out[k] = TEXT_TIMING_KEYS[k]
            else:
                out[k] = normalize_on_cluster(v, nodes, ports)
        return out
    if isinstance(obj, list):
        items = [normalize_on_cluster(x, nodes, ports) for x in obj]
        if items and all(isinstance(x, str) for x in items):
            return _tokens(items, nodes)
        rows = [x for x in items if _quorum_row(x, nodes)]
        if rows:
            for r in rows:
                r[0] = "<node>"
            head = [x for x in items if not _quorum_row(x, nodes) and x not in rows]
            return head + sorted(rows, key=json_key)
        return items
    if isinstance(obj, int) and not isinstance(obj, bool) and obj in ports:
        return "<port>"
    if isinstance(obj, str):
        s = re.sub(r"\d+", lambda m: "<port>" if int(m.group()) in ports else m.group(), obj) \
            if any(str(p) in obj for p in ports) else obj
        return _TEXT_NODE_FIELDS.sub(_text_nodes, s)
    return obj


def json_key(x: Any) -> str:
    import json

    return json.dumps(x, sort_keys=True)


def _quorum_row(x: Any, nodes: set[int]) -> bool:
    return (isinstance(x, list) and len(x) > 2 and isinstance(x[0], str) and x[0].isdigit()
            and int(x[0]) in nodes and x[-1] in QUORUM_ROLES)


def _tokens(items: list[str], nodes: set[int]) -> list[str]:
    """A tool's output line split into tokens: ``Leader: 2 Replicas: 2,3,1`` ->
    ``Leader: <node> Replicas: 1,2,3``."""
    out = list(items)
    for i in range(len(out) - 1):
        nxt = out[i + 1]
        if out[i] in TOKEN_NODE and nxt.isdigit() and int(nxt) in nodes:
            out[i + 1] = "<node>"
        elif out[i] in TOKEN_NODE_LIST and re.fullmatch(r"\d+(,\d+)*", nxt):
            out[i + 1] = ",".join(str(n) for n in sorted(int(x) for x in nxt.split(",")))
    return out


def _text_nodes(m: re.Match[str]) -> str:
    field, sep, value = m.group(1), m.group(2), m.group(3)
    if field == "LeaderEpoch":
        return f"{field}{sep}<quorum epoch>"
    if field in ("Leader", "Coordinator", "COORDINATOR (ID)", "LeaderId"):
        return f"{field}{sep}{value if value.startswith('-') else '<node>'}"
    ids = sorted(int(x) for x in value.split(",") if x)
    return f"{field}{sep}{','.join(map(str, ids))}"
