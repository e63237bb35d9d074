"""SaslAuthenticate (key 36), versions 0-2: one SASL token of the exchange SaslHandshake v1
started (``kafkawire.security.sasl``).

- A failed credential: SASL_AUTHENTICATION_FAILED with Kafka's message, then the connection
  closes after ``connection.failed.authentication.delay.ms`` (Kafka's delay against password
  guessing).
- Without a SaslHandshake first: ILLEGAL_SASL_STATE and the connection closes; on an
  authenticated connection (or a PLAINTEXT/SSL listener) Kafka's "SaslAuthenticate request
  received after successful authentication".
- Success: the connection's principal becomes ``User:<name>``; v1+ carries
  ``session_lifetime_ms`` (KIP-368): the smaller of ``connections.max.reauth.ms`` and the
  credential's remaining lifetime (an OAUTHBEARER token's ``exp``), 0 when neither applies.
  After it expires any request other than a re-authentication closes the connection. A
  re-authentication must keep the principal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkawire.security.sasl import SaslFailure
from protocol._generated.sasl_authenticate_request import SaslAuthenticateRequest
from protocol._generated.sasl_authenticate_response import SaslAuthenticateResponse
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import Connection, RequestContext

API_KEY = 36
VERSIONS = (0, 2)


def _response(code: ErrorCode, message: str | None, token: bytes = b"",
              lifetime_ms: int = 0) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(error_code=code, error_message=message, auth_bytes=token,
                                    session_lifetime_ms=lifetime_ms)


async def evaluate(broker: Broker, conn: Connection, token: bytes) -> tuple[bytes, int]:
    """(challenge, session lifetime ms) of one token; SaslFailure when authentication fails."""
    now = broker.clock_ms()
    mech = conn.sasl
    challenge = mech.evaluate(token, now)
    if not mech.complete:
        return challenge, 0
    principal = "User:" + mech.principal
    if conn.authenticated and conn.principal != principal and conn.session_expiry_ms is not None:
        raise SaslFailure("Cannot change principals during re-authentication from "
                          f"{conn.principal}: {principal}")
    assert broker.server.security is not None
    reauth_ms = broker.server.security.sasl(conn.listener).reauth_ms
    limits = [reauth_ms] if reauth_ms > 0 else []
    if mech.expiry_ms is not None:
        limits.append(max(1, mech.expiry_ms - now))
    lifetime = min(limits) if limits else 0
    conn.principal = principal
    conn.authenticated = True
    conn.state["token_authenticated"] = bool(getattr(mech, "token_authenticated", False))
    conn.sasl = None
    conn.session_expiry_ms = now + lifetime if lifetime else None
    return challenge, lifetime


def fail(broker: Broker, conn: Connection) -> None:
    assert broker.server.security is not None
    conn.close_after_ms = broker.server.security.sasl(conn.listener).failed_auth_delay_ms
    conn.sasl = None


async def handle(
    broker: Broker, ctx: RequestContext, req: SaslAuthenticateRequest
) -> SaslAuthenticateResponse:
    conn = ctx.connection
    if conn.sasl is None:
        if conn.authenticated:
            return _response(ErrorCode.ILLEGAL_SASL_STATE,
                             "SaslAuthenticate request received after successful "
                             "authentication")
        conn.close_after_ms = 0
        return _response(ErrorCode.ILLEGAL_SASL_STATE,
                         "Unexpected SaslAuthenticate request with no SaslHandshake")
    try:
        challenge, lifetime = await evaluate(broker, conn, bytes(req.auth_bytes))
    except SaslFailure as e:
        fail(broker, conn)
        return _response(ErrorCode.SASL_AUTHENTICATION_FAILED, str(e))
    return _response(ErrorCode.NONE, None, challenge, lifetime if ctx.api_version >= 1 else 0)
