"""The broker's forwarding of admin writes to the active controller (Kafka's ForwardingManager
over its node-to-controller channel).

A node that is not the active controller does not decide CreateTopics, DeleteTopics,
CreatePartitions, (Incremental)AlterConfigs, Create/DeleteAcls, AlterClientQuotas,
AlterUserScramCredentials, UpdateFeatures, AlterPartitionReassignments, ElectLeaders ...
(``kafkawire.metadata.envelope.FORWARDABLE_KEYS``): it wraps the request in an Envelope with the
client's principal and address and sends it to the active controller's controller listener.
(Incremental)AlterConfigs are preprocessed first, as Kafka's ``ConfigAdminManager``: the broker
refuses BROKER resources naming another node and applies BROKER_LOGGER itself, and forwards the
rest (``kafkawire.apis.alter_configs.forward_preprocessed``).

- Where to: ``candidates()`` lists the controllers to try, the known leader first (the quorum
  driver's view; with a static quorum every voter of ``controller.quorum.voters`` follows it).
  The controller that answered last is tried first next time.
- NOT_CONTROLLER in the envelope, a lost or refused connection, or a peer that does not serve
  Envelope: the next candidate (a controller whose connection failed lately waits out its
  reconnect backoff while the others are tried), and after a full round a pause of
  ``retry.backoff.ms``; all
  within ``FORWARD_RETRY_TIMEOUT_MS`` of the request's arrival (Kafka's forwarding channel
  retries the same way for 60 s), after which the client gets REQUEST_TIMED_OUT in every item.
- UNSUPPORTED_VERSION in the envelope: the controller does not serve the client's version; the
  client's connection is closed so it renegotiates (Kafka does the same).
- Any other envelope error (a broker misconfiguration, e.g. a denied CLUSTER_ACTION):
  UNKNOWN_SERVER_ERROR to the client, as Kafka answers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from kafkawire.metadata.envelope import (
    address_bytes,
    decode_inner_response,
    encode_inner_request,
    error_codes,
    error_response,
    serialize_principal,
)
from kafkawire.net.node_client import NodeClient, NodeDisconnected, NodeUnsupportedVersion
from kafkawire.security.inter_broker import ClientSecurity
from protocol._generated.envelope_request import EnvelopeRequest
from protocol._generated.envelope_response import EnvelopeResponse
from protocol.errors import ErrorCode
from protocol.primitives import RemoteProtocolError

if TYPE_CHECKING:
    from kafkawire.net.server import RequestContext

log = logging.getLogger("kafkawire.metadata.forwarding")

#: how long a forwarded request is retried across controllers (Kafka's forwarding channel:
#: 60 s, not configurable), milliseconds
FORWARD_RETRY_TIMEOUT_MS = 60_000
#: pause after every candidate refused or failed (Kafka's ``retry.backoff.ms`` default), ms
RETRY_BACKOFF_MS = 100

#: (node id, host, port) of a controller listener
Candidate = tuple[int, str, int]


class ForwardingManager:
    def __init__(
        self,
        candidates: Callable[[], list[Candidate]],
        client_id: str,
        clock_ms: Callable[[], int],
        retry_timeout_ms: int = FORWARD_RETRY_TIMEOUT_MS,
        retry_backoff_ms: int = RETRY_BACKOFF_MS,
        security: Callable[[], ClientSecurity] | None = None,
    ) -> None:
        self.candidates = candidates
        #: TLS / SASL of the controller listener, read at each new connection
        self.security = security
        self.client_id = client_id
        self.clock_ms = clock_ms
        self.retry_timeout_ms = retry_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self._clients: dict[Candidate, NodeClient] = {}
        #: the controller that answered last
        self.preferred: Candidate | None = None
        #: forwarded requests answered / retried on another controller (for tests and metrics)
        self.forwarded = 0
        self.retries = 0

    def _order(self) -> list[Candidate]:
        found = list(dict.fromkeys(self.candidates()))
        if self.preferred in found:
            found.remove(self.preferred)
            found.insert(0, self.preferred)
        return found

    def _client(self, cand: Candidate) -> NodeClient:
        c = self._clients.get(cand)
        if c is None:
            c = NodeClient(cand[1], cand[2], self.client_id, self.clock_ms,
                           security=self.security() if self.security else None)
            self._clients[cand] = c
        return c

    async def aclose(self) -> None:
        for c in self._clients.values():
            await c.aclose()
        self._clients.clear()

    def envelope_for(self, ctx: RequestContext, request: Any) -> EnvelopeRequest:
        conn = ctx.connection
        sasl = conn.sasl
        token = bool(getattr(sasl, "token_authenticated", False))
        return EnvelopeRequest(
            request_data=encode_inner_request(ctx.header, request),
            request_principal=serialize_principal(conn.principal, token),
            client_host_address=address_bytes(conn.host))

    async def forward(self, ctx: RequestContext, request: Any) -> Any:
        """The active controller's answer to a client's ``request``, sent in an Envelope
        (RemoteProtocolError: close the client's connection)."""
        from kafkawire.apis import REGISTRY

        response_cls = REGISTRY[ctx.api_key].response_cls
        resp = await self._to_controller(self.envelope_for(ctx, request))
        if resp is None:
            log.info("forwarding API %d from %s timed out after %d ms", ctx.api_key,
                     ctx.connection.peer, self.retry_timeout_ms)
            return error_response(response_cls, request, ErrorCode.REQUEST_TIMED_OUT,
                                   "Timed out waiting for the active controller.")
        assert isinstance(resp, EnvelopeResponse)
        return self._unwrap(ctx, request, response_cls, resp)

    async def send(self, request: Any) -> Any:
        """A request of this broker's own (no client behind it, so no Envelope: the broker's
        principal on the controller listener), e.g. the CreateTopics of an internal or
        auto-created topic, as Kafka's AutoTopicCreationManager sends it; the same retries.
        The answer, or Kafka's whole-request error response with REQUEST_TIMED_OUT."""
        from kafkawire.apis import REGISTRY

        resp = await self._to_controller(request)
        if resp is None:
            return error_response(REGISTRY[int(request.API_KEY)].response_cls, request,
                                  ErrorCode.REQUEST_TIMED_OUT,
                                  "Timed out waiting for the active controller.")
        return resp

    async def _to_controller(self, request: Any) -> Any:
        """The active controller's answer to ``request``, None after the retry timeout."""
        deadline = self.clock_ms() + self.retry_timeout_ms
        while True:
            waits: list[int] = []
            for cand in self._order():
                remaining = deadline - self.clock_ms()
                if remaining <= 0:
                    break
                backoff = self._client(cand).backoff_remaining_ms()
                if backoff > 0:  # failed lately: the others first, it is retried after
                    waits.append(backoff)
                    continue
                resp = await self._try(cand, request, remaining)
                if resp is None:
                    self.retries += 1
                    continue
                self.preferred = cand
                return resp
            remaining = deadline - self.clock_ms()
            if remaining <= 0:
                return None
            pause = min([self.retry_backoff_ms, *waits])
            await trio.sleep(max(1, min(pause, remaining)) / 1000)

    async def _try(self, cand: Candidate, request: Any, remaining_ms: int) -> Any:
        """The controller's answer, or None: try another controller (it is not the active
        one, or could not be reached)."""
        client = self._client(cand)
        try:
            with trio.fail_after(remaining_ms / 1000):  # a connection attempt included
                resp = await client.request(request, timeout_ms=max(1, remaining_ms))
        except trio.TooSlowError:
            await client.aclose()  # whatever was in flight on it is abandoned
            return None
        except (NodeDisconnected, NodeUnsupportedVersion) as e:
            log.debug("forwarding to node %d at %s:%d failed: %s", cand[0], cand[1], cand[2], e)
            if self.preferred == cand:
                self.preferred = None
            return None
        if ErrorCode.NOT_CONTROLLER in error_codes(resp):
            if self.preferred == cand:
                self.preferred = None
            return None
        return resp

    def _unwrap(self, ctx: RequestContext, request: Any, response_cls: Any,
                resp: EnvelopeResponse) -> Any:
        if resp.error_code == ErrorCode.UNSUPPORTED_VERSION:
            raise RemoteProtocolError(
                f"the active controller does not serve API {ctx.api_key} v{ctx.api_version}")
        if resp.error_code != ErrorCode.NONE or resp.response_data is None:
            log.warning("forwarded API %d failed with envelope error %d", ctx.api_key,
                        resp.error_code)
            return error_response(response_cls, request, ErrorCode.UNKNOWN_SERVER_ERROR)
        self.forwarded += 1
        return decode_inner_response(bytes(resp.response_data), ctx.api_key, ctx.api_version,
                                     ctx.correlation_id, response_cls)
