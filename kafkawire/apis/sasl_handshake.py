"""SaslHandshake (key 17), versions 0-1.

On a SASL_PLAINTEXT or SASL_SSL listener: the mechanism must be one of the listener's
``sasl.enabled.mechanisms``; the answer lists them. Otherwise UNSUPPORTED_SASL_MECHANISM and the
connection closes after the response (as Kafka). v0: the client then sends bare SASL tokens
(no Kafka header) and gets bare tokens back; v1: the tokens travel in SaslAuthenticate. A
handshake on an authenticated connection starts a KIP-368 re-authentication when the session
has a lifetime (``connections.max.reauth.ms`` or a token's expiry), else ILLEGAL_SASL_STATE.

On PLAINTEXT and SSL listeners Kafka answers ILLEGAL_SASL_STATE with no mechanisms; so do we.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol._generated.sasl_handshake_request import SaslHandshakeRequest
from protocol._generated.sasl_handshake_response import SaslHandshakeResponse
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 17
VERSIONS = (0, 1)


async def handle(
    broker: Broker, ctx: RequestContext, req: SaslHandshakeRequest
) -> SaslHandshakeResponse:
    conn = ctx.connection
    security = broker.server.security
    if security is None or not security.uses_sasl(conn.listener) or (
            conn.authenticated and conn.session_expiry_ms is None):
        # PLAINTEXT/SSL, or an authenticated session that is not re-authenticatable
        # (connections.max.reauth.ms = 0): Kafka's request handler answers so
        return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
    enabled = list(security.sasl(conn.listener).mechanisms)
    if req.mechanism not in enabled:
        conn.close_after_ms = 0
        return SaslHandshakeResponse(
            error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled)
    conn.sasl = security.mechanism_server(conn.listener, req.mechanism, broker.scram_credential,
                                          broker.token_credential)
    conn.sasl_raw_tokens = ctx.api_version == 0
    return SaslHandshakeResponse(error_code=ErrorCode.NONE, mechanisms=enabled)
