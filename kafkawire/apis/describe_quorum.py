"""DescribeQuorum (key 55), versions 0-2: the state of our single-voter KRaft quorum.

``kafka-metadata-quorum describe --status|--replication`` (Admin ``describeMetadataQuorum``)
sends it to a broker listener. Answered the way Kafka 4.3.1's Raft leader answers
(``KafkaRaftClient.handleDescribeQuorumRequest`` as observed against the real broker):

- The request must name exactly one topic, ``__cluster_metadata``, with exactly partition 0.
  Anything else (another topic or partition, two partitions) answers every requested partition
  with UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.", leader 0,
  epoch 0, high watermark 0, no voters; an empty request answers no topics. Top level NONE.
- Leader = this node; leader epoch = the quorum's epoch (bumped on every start,
  ``kafkawire/metadata/quorum.py``); high watermark = the committed end of ``__cluster_metadata``
  (a one-voter quorum commits on its own fsync, so it equals the log end offset).
- Voters: this node only, its log end offset; v1+ ``last_fetch_timestamp`` and
  ``last_caught_up_timestamp`` are the current wall clock for the leader (Kafka reports the
  leader as caught up "now"). v2 ``replica_directory_id`` is the zero UUID, as Kafka reports
  voters of a static quorum (``kraft.version`` 0); a dynamic quorum (``kraft.version`` 1,
  formatted with ``--standalone``/``--initial-controllers``) reports the voter's directory id
  and endpoints from its VotersRecord. Observers: none (a combined node's broker
  side reads the log in-process, as in Kafka's combined mode).
- v2 ``nodes``: the voter's endpoints. Kafka lists the controller listener from
  ``controller.quorum.voters``; a node serving a controller listener lists it; without one
  (the implicit single node: the quorum lives in-process and is reachable on the broker
  listener) it lists the voter entry of
  ``controller.quorum.voters`` for this node when one is configured, else the advertised broker
  listeners (difference recorded in compat_tests/FINDINGS.md).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from kafkawire.metadata.quorum import METADATA_TOPIC
from kafkawire.net.node_client import NodeClient, NodeDisconnected, NodeUnsupportedVersion
from kraft.raft.replication import describe_quorum
from protocol._generated.describe_quorum_request import DescribeQuorumRequest
from protocol._generated.describe_quorum_response import DescribeQuorumResponse
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 55
VERSIONS = (0, 2)

R = DescribeQuorumResponse
NOT_HOSTED = "This server does not host this topic-partition."


def _is_metadata_partition(req: DescribeQuorumRequest) -> bool:
    if len(req.topics) != 1 or req.topics[0].topic_name != METADATA_TOPIC:
        return False
    parts = req.topics[0].partitions
    return len(parts) == 1 and parts[0].partition_index == 0


def _not_hosted(req: DescribeQuorumRequest) -> R:
    return R(
        error_code=ErrorCode.NONE,
        error_message="",
        topics=[
            R.TopicData(
                topic_name=t.topic_name,
                partitions=[
                    R.PartitionData(
                        partition_index=p.partition_index,
                        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        error_message=NOT_HOSTED,
                        leader_id=0,
                        leader_epoch=0,
                        high_watermark=0,
                        current_voters=[],
                        observers=[],
                    )
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ],
        nodes=[],
    )


def voter_listeners(broker: Broker) -> list[tuple[str, str, int]]:
    """(listener name, host, port) of this voter, as DescribeQuorum v2 lists them."""
    cfg = broker.config
    voters = broker.quorum.voters if broker.quorum is not None else None
    for v in voters.voters if voters is not None else []:
        if v.voter_id == broker.node_id and v.endpoints:
            return [(e.name, e.host, e.port) for e in v.endpoints]
    controller_names = [
        n.strip() for n in str(cfg.values["controller.listener.names"]).split(",") if n.strip()
    ]
    for entry in str(cfg.values["controller.quorum.voters"]).split(","):
        node, _, address = entry.strip().partition("@")
        host, _, port = address.rpartition(":")
        if node.strip() == str(broker.node_id) and port.isdigit() and controller_names:
            return [(controller_names[0], host.strip("[]"), int(port))]
    if cfg.controller_listeners:  # the node serves its controller listener: Kafka lists it
        return [(lst.name, lst.host, broker.bound_ports.get(lst.name, lst.port))
                for lst in cfg.controller_listeners]
    return [
        (lst.name, lst.host, broker.bound_ports.get(lst.name, lst.port) if lst.port == 0 else lst.port)
        for lst in cfg.advertised_listeners
    ]


async def handle(broker: Broker, ctx: RequestContext, req: DescribeQuorumRequest) -> R:
    if not _is_metadata_partition(req):
        return _not_hosted(req)
    quorum = broker.quorum
    assert quorum is not None and quorum.raft is not None
    raft = quorum.raft
    if not raft.is_leader:
        forwarded = await _ask_leader(broker, req, ctx.api_version)
        if forwarded is not None:
            return forwarded
    resp = describe_quorum(raft, int(time.time() * 1000))
    part = resp.topics[0].partitions[0]
    part.error_message = "" if part.error_code == ErrorCode.NONE else None
    directory_ids = {v.voter_id: v.voter_directory_id
                     for v in (quorum.voters.voters if quorum.voters is not None else [])}
    for rs in part.current_voters:
        if rs.replica_id in directory_ids:
            rs.replica_directory_id = directory_ids[rs.replica_id]
    resp.error_message = ""
    resp.nodes = [R.Node(node_id=node_id, listeners=[
        R.Listener(name=name, host=host, port=port) for name, host, port in listeners])
        for node_id, listeners in _voter_nodes(broker, [v.replica_id for v in
                                                       part.current_voters])]
    return resp


def _voter_nodes(broker: Broker, voter_ids: list[int]
                 ) -> list[tuple[int, list[tuple[str, str, int]]]]:
    """(voter id, its controller listeners) for DescribeQuorum v2 ``nodes``."""
    assert broker.quorum is not None
    names = sorted(broker.config.controller_listener_names) or ["CONTROLLER"]
    record = {v.voter_id: v for v in (broker.quorum.voters.voters
                                      if broker.quorum.voters is not None else [])}
    out: list[tuple[int, list[tuple[str, str, int]]]] = []
    for vid in voter_ids:
        if vid == broker.node_id:
            out.append((vid, voter_listeners(broker)))
        elif vid in record and record[vid].endpoints:
            out.append((vid, [(e.name, e.host, e.port) for e in record[vid].endpoints]))
        elif vid in broker.quorum.voter_addresses:
            host, port = broker.quorum.voter_addresses[vid]
            out.append((vid, [(names[0], host, port)]))
    return out


async def _ask_leader(broker: Broker, req: DescribeQuorumRequest, version: int) -> R | None:
    """A node that does not lead asks the leader (Kafka's brokers forward DescribeQuorum to
    the active controller); None when no leader is reachable."""
    _leader, addr = broker.active_controller()
    if addr is None:
        return None
    client = NodeClient(addr[0], addr[1], f"describe-quorum-{broker.node_id}",
                        lambda: int(time.time() * 1000), request_timeout_ms=10_000,
                        security=broker.controller_security())
    try:
        resp: R = await client.request(req, version)
        return resp
    except (NodeDisconnected, NodeUnsupportedVersion):
        return None
    finally:
        await client.aclose()
