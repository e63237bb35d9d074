"""Envelope (key 58), version 0; controller listener only (the server closes a connection that
sends it on a broker listener, as Kafka does for an API outside its listener type).

A broker forwards a client's admin request in it (kafkawire/metadata/envelope.py). Checked as Kafka's
controller checks, in this order, each answered with the envelope's top-level error and no
response data:

- the sender (the broker's own principal on the controller listener) needs CLUSTER_ACTION on
  the cluster: CLUSTER_AUTHORIZATION_FAILED;
- this node must be the active controller: NOT_CONTROLLER (the broker finds the new one);
- the principal must deserialize with Kafka's default serde: PRINCIPAL_DESERIALIZATION_FAILURE;
- the client address must be 4 or 16 bytes, the inner header must parse and name a forwardable
  API: INVALID_REQUEST; a version of it this node does not serve: UNSUPPORTED_VERSION.

The inner request is then handled by its own handler with the client's principal and address
(so ACLs and quotas apply to the client, not to the broker) and its answer returned with its
response header in ``response_data``. An answer that carries NOT_CONTROLLER anywhere becomes an
envelope NOT_CONTROLLER instead (Kafka does the same so the broker retries elsewhere).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING

from kafkawire.metadata.envelope import (
    EnvelopeError,
    deserialize_principal,
    encode_inner_response,
    error_codes,
    parse_address,
    parse_inner_header,
)
from kraft.acls import CLUSTER, CLUSTER_ACTION, CLUSTER_NAME
from protocol._generated.envelope_request import EnvelopeRequest
from protocol._generated.envelope_response import EnvelopeResponse
from protocol.errors import ErrorCode, KafkaError
from protocol.primitives import RemoteProtocolError

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 58
VERSIONS = (0, 0)

log = logging.getLogger("kafkawire.metadata.envelope")


async def _active(broker: Broker) -> bool:
    """The Raft leader, once it has committed the start of its epoch (a new leader waits for
    that, bounded, rather than deciding from an image that may lack committed records)."""
    if not broker.is_active_controller() or broker.quorum is None:
        return False
    try:
        await broker.quorum.wait_active()
    except KafkaError:
        return False
    return True


def _refused(code: ErrorCode) -> EnvelopeResponse:
    return EnvelopeResponse(response_data=None, error_code=code)


async def handle(broker: Broker, ctx: RequestContext, req: EnvelopeRequest) -> EnvelopeResponse:
    from kafkawire.apis import REGISTRY
    from kafkawire.net.server import RequestContext

    if not ctx.allowed(CLUSTER_ACTION, CLUSTER, CLUSTER_NAME):
        return _refused(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if not await _active(broker):
        return _refused(ErrorCode.NOT_CONTROLLER)
    try:
        principal, _token = deserialize_principal(bytes(req.request_principal or b""))
        address = parse_address(bytes(req.client_host_address or b""))
        data = bytes(req.request_data or b"")
        header, r = parse_inner_header(data)
    except EnvelopeError as e:
        log.info("envelope from %s refused: %s", ctx.connection.peer, e)
        return _refused(e.code)
    key, version = header.request_api_key, header.request_api_version
    handler = REGISTRY.get(key)
    if handler is None or not handler.min_version <= version <= handler.max_version:
        return _refused(ErrorCode.UNSUPPORTED_VERSION)
    try:
        inner = handler.request_cls.read(r, version)
    except (RemoteProtocolError, ValueError, IndexError) as e:
        log.info("envelope from %s: unreadable %s v%d: %s", ctx.connection.peer, handler.name,
                 version, e)
        return _refused(ErrorCode.INVALID_REQUEST)
    conn = dataclasses.replace(ctx.connection, principal=principal, peer=f"{address}:0",
                               state={}, buf=bytearray())
    inner_ctx = RequestContext(key, version, header.correlation_id, header.client_id, conn,
                               header, size_bytes=len(data) + 4)
    response = await broker.dispatch(inner_ctx, inner)
    if response is None:  # no forwardable API answers nothing
        return _refused(ErrorCode.UNKNOWN_SERVER_ERROR)
    if ErrorCode.NOT_CONTROLLER in error_codes(response):
        return _refused(ErrorCode.NOT_CONTROLLER)
    return EnvelopeResponse(
        response_data=encode_inner_response(header.correlation_id, key, version, response),
        error_code=ErrorCode.NONE)
