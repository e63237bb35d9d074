"""DescribeCluster (key 60), versions 0-2.

- On a controller listener (KIP-919, ``--bootstrap-controller``) it answers as Kafka's
  controller: endpoint type CONTROLLER (2), the voters with their controller listener and the
  active controller as ``controller_id``; a request for BROKER endpoints there is MISMATCHED_ENDPOINT_TYPE.
- On a broker listener it answers as a Kafka broker: endpoint type BROKER (1). A request for CONTROLLER (2) endpoints:
  MISMATCHED_ENDPOINT_TYPE (INVALID_REQUEST on v0), an unknown type: UNSUPPORTED_ENDPOINT_TYPE
  (INVALID_REQUEST on v0), with Kafka's messages.
- Brokers are the registered, unfenced brokers with their endpoint on the listener the request
  came in on; v2 ``include_fenced_brokers`` adds fenced ones with ``is_fenced`` set.
- ``controller_id`` is this node, the live broker Metadata also names as controller.
- ``cluster_authorized_operations``: -2147483648 unless requested, then every cluster
  operation (there is no authorizer).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkawire.apis.metadata import AUTH_OPS_NOT_REQUESTED
from kraft.acls import CLUSTER, CLUSTER_NAME
from protocol._generated.describe_cluster_request import DescribeClusterRequest
from protocol._generated.describe_cluster_response import DescribeClusterResponse
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 60
VERSIONS = (0, 2)

ENDPOINT_BROKER = 1
ENDPOINT_CONTROLLER = 2
ENDPOINT_NAMES = {1: "BROKER", 2: "CONTROLLER"}


def endpoint_error(version: int, endpoint_type: int, served: int = ENDPOINT_BROKER
                   ) -> DescribeClusterResponse | None:
    if endpoint_type == served:
        return None
    if endpoint_type not in ENDPOINT_NAMES:
        code = ErrorCode.INVALID_REQUEST if version == 0 else ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
        msg = f"Unsupported endpoint type {endpoint_type}"
    else:
        code = ErrorCode.INVALID_REQUEST if version == 0 else ErrorCode.MISMATCHED_ENDPOINT_TYPE
        msg = (
            f"The request was sent to an endpoint of type {ENDPOINT_NAMES[served]}, but we "
            f"wanted an endpoint of type {ENDPOINT_NAMES[endpoint_type]}"
        )
    return DescribeClusterResponse(
        error_code=code, error_message=msg, endpoint_type=served, cluster_id="",
        controller_id=-1, brokers=[],
    )


def describe_controllers(broker: Broker, ctx: RequestContext, req: DescribeClusterRequest
                         ) -> DescribeClusterResponse:
    """On a controller listener (KIP-919, ``--bootstrap-controller``): the voters of the
    metadata quorum with their controller listener, and the active controller (-1 while none
    is known), where the admin client then sends its controller requests."""
    listener = ctx.connection.listener
    spec = next((lst for lst in broker.config.listeners if lst.name == listener), None)
    controllers = []
    quorum = broker.quorum
    voters = sorted(quorum.raft.voters) if quorum is not None and quorum.raft is not None \
        else [broker.node_id]
    for vid in voters:
        if vid == broker.node_id and spec is not None:
            host, port = spec.host, broker.bound_ports.get(listener, spec.port)
        elif quorum is not None and vid in quorum.voter_addresses:
            host, port = quorum.voter_addresses[vid]
        else:
            continue
        controllers.append(DescribeClusterResponse.DescribeClusterBroker(
            broker_id=vid, host=host, port=port, rack=None, is_fenced=False))
    leader = quorum.leader_id if quorum is not None else broker.node_id
    return DescribeClusterResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
        endpoint_type=ENDPOINT_CONTROLLER, cluster_id=broker.cluster_id,
        controller_id=leader, brokers=controllers,
        cluster_authorized_operations=(
            ctx.operations(CLUSTER, CLUSTER_NAME) if req.include_cluster_authorized_operations
            else AUTH_OPS_NOT_REQUESTED),
    )


async def handle(
    broker: Broker, ctx: RequestContext, req: DescribeClusterRequest
) -> DescribeClusterResponse:
    v = ctx.api_version
    served = ENDPOINT_CONTROLLER if ctx.connection.listener_type == "controller" \
        else ENDPOINT_BROKER
    endpoint_type = req.endpoint_type if v >= 1 else ENDPOINT_BROKER
    failed = endpoint_error(v, endpoint_type, served)
    if failed is not None:
        return failed
    if served == ENDPOINT_CONTROLLER:
        return describe_controllers(broker, ctx, req)
    include_fenced = v >= 2 and req.include_fenced_brokers
    listener = ctx.connection.listener
    brokers = []
    for b in sorted(broker.image.brokers.values(), key=lambda b: b.broker_id):
        if b.fenced and not include_fenced:
            continue
        ep = next((e for e in b.endpoints if e.listener == listener), None)
        if ep is None:
            continue
        brokers.append(DescribeClusterResponse.DescribeClusterBroker(
            broker_id=b.broker_id, host=ep.host, port=ep.port, rack=b.rack, is_fenced=b.fenced,
        ))
    controller_id = broker.node_id if any(b.broker_id == broker.node_id for b in brokers) else -1
    return DescribeClusterResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        error_message=None,
        endpoint_type=ENDPOINT_BROKER,
        cluster_id=broker.cluster_id,
        controller_id=controller_id,
        brokers=brokers,
        cluster_authorized_operations=(
            ctx.operations(CLUSTER, CLUSTER_NAME) if req.include_cluster_authorized_operations
            else AUTH_OPS_NOT_REQUESTED
        ),
    )
