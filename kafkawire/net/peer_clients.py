"""Connections from this broker to the other brokers (Kafka's inter-broker NetworkClient use
outside the replica fetchers: WriteTxnMarkers from the transaction coordinator).

``PeerClients.get(broker_id)`` returns one ``NodeClient`` per broker, on the inter-broker
listener of its registration in the metadata image, with that listener's TLS / SASL
(``kafkawire.security.inter_broker``) (re-created when the broker registers again
on another address), or None while the broker is unknown. Requests to one broker are serialized
by its NodeClient; callers retry on ``NodeDisconnected``.
"""

from __future__ import annotations

from collections.abc import Callable

from kafkawire.net.node_client import NodeClient
from kafkawire.security.inter_broker import ClientSecurity
from kraft.image import MetadataImage

__all__ = ["PeerClients", "endpoint_of"]


def endpoint_of(image: MetadataImage, broker_id: int, listener: str | None
                ) -> tuple[str, int] | None:
    """``broker_id``'s (host, port) on ``listener`` (None: its first endpoint)."""
    reg = image.brokers.get(broker_id)
    if reg is None or not reg.endpoints:
        return None
    for ep in reg.endpoints:
        if listener is not None and ep.listener == listener:
            return (ep.host, ep.port)
    return (reg.endpoints[0].host, reg.endpoints[0].port) if listener is None else None


class PeerClients:
    def __init__(self, node_id: int, image: Callable[[], MetadataImage],
                 listener: Callable[[], str | None], clock_ms: Callable[[], int],
                 request_timeout_ms: int,
                 security: Callable[[], ClientSecurity] | None = None) -> None:
        self.node_id = node_id
        self.image = image
        self.listener = listener
        self.clock_ms = clock_ms
        self.request_timeout_ms = request_timeout_ms
        self.security = security
        self._clients: dict[int, tuple[tuple[str, int], NodeClient]] = {}

    def get(self, broker_id: int) -> NodeClient | None:
        ep = endpoint_of(self.image(), broker_id, self.listener())
        if ep is None:
            return None
        found = self._clients.get(broker_id)
        if found is not None and found[0] == ep:
            return found[1]
        client = NodeClient(ep[0], ep[1], f"broker-{self.node_id}", self.clock_ms,
                            request_timeout_ms=self.request_timeout_ms,
                            security=self.security() if self.security is not None else None)
        self._clients[broker_id] = (ep, client)
        return client

    async def aclose(self) -> None:
        clients, self._clients = self._clients, {}
        for _ep, c in clients.values():
            await c.aclose()
