"""How this broker connects to the other brokers: the inter-broker listener and its security,
as Kafka's inter-broker NetworkClient (replica fetchers, WriteTxnMarkers and other peer
requests through ``kafkawire.net.peer_clients``).

- The listener: ``inter.broker.listener.name``; else the listener named by
  ``security.inter.broker.protocol`` when that is set (Kafka: the two are exclusive); else
  this broker's first broker listener. The peer's endpoint of that name is taken from its
  registration.
- Its protocol (``listener.security.protocol.map``) decides the rest, with that listener's
  own settings (``listener.name.<l>.`` prefixed keys first, as everywhere, see
  docs/SECURITY.md):
  SSL / SASL_SSL: TLS with the listener's truststore (the peer's certificate and, with
  ``ssl.endpoint.identification.algorithm=https``, Kafka's default, its host name are
  checked) and its keystore as this broker's client certificate;
  SASL_PLAINTEXT / SASL_SSL: ``sasl.mechanism.inter.broker.protocol`` (Kafka's default is
  GSSAPI, which kafkawire does not speak: set PLAIN or SCRAM-SHA-256/512) with the
  ``username`` / ``password`` of that mechanism's JAAS config on the listener
  (``listener.name.<l>.<mechanism>.sasl.jaas.config``, then ``...sasl.jaas.config``,
  then ``sasl.jaas.config``), through SaslHandshake v1 and SaslAuthenticate after ApiVersions,
  as Kafka's clients authenticate.
- A configuration that cannot connect (no keystore/truststore readable, GSSAPI, no
  credentials) stops the broker at start with one line, as the listeners' own checks do.

- The controller listener (``controller_security``): the same client side for the first name
  of ``controller.listener.names``, with ``sasl.mechanism.controller.protocol``: Raft between
  voters, registration, heartbeats, AlterPartition and forwarding (docs/SECURITY.md).

``SaslClient`` holds the client side of PLAIN and SCRAM (RFC 5802 / 7677).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import ssl
from collections.abc import Mapping
from dataclasses import dataclass

from kafkawire.config.broker_config import BrokerConfig, ConfigError
from kafkawire.config.security import jaas_config, listener_protocol, lookup, ssl_settings
from kafkawire.security.sasl import jaas_options
from kafkawire.security.tls import client_context

__all__ = ["ClientSecurity", "SaslClient", "controller_listener", "controller_security",
           "inter_broker_listener", "inter_broker_security", "listener_client_security"]

CLIENT_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def inter_broker_listener(cfg: BrokerConfig) -> str | None:
    name = cfg.values.get("inter.broker.listener.name")
    proto = cfg.explicit.get("security.inter.broker.protocol")
    if name and proto:
        raise ConfigError("Only one of inter.broker.listener.name and "
                          "security.inter.broker.protocol should be set.")
    if name:
        return str(name)
    listeners = cfg.broker_listeners
    if proto:
        for lst in listeners:
            if lst.name.upper() == proto.strip().upper():
                return lst.name
        raise ConfigError(f"security.inter.broker.protocol {proto}: no listener of that name")
    return listeners[0].name if listeners else None


@dataclass(frozen=True)
class ClientSecurity:
    """What a connection to another broker's inter-broker listener needs."""

    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str = ""
    password: str = ""


PLAINTEXT = ClientSecurity()


def inter_broker_security(cfg: BrokerConfig, dynamic: Mapping[str, str],
                          listener: str | None) -> ClientSecurity:
    """The security of ``listener`` for this broker's connections (ConfigError if unusable)."""
    return listener_client_security(cfg, dynamic, listener, "sasl.mechanism.inter.broker.protocol")


def controller_listener(cfg: BrokerConfig) -> str:
    """The listener brokers and controllers reach the controllers on: the first name of
    ``controller.listener.names`` (Kafka's ``controllerListenerNames.head``)."""
    names = [n.strip().upper() for n in str(cfg.values["controller.listener.names"]).split(",")
             if n.strip()]
    return names[0] if names else "CONTROLLER"


def controller_security(cfg: BrokerConfig, dynamic: Mapping[str, str]) -> ClientSecurity:
    """The security of this node's connections to the controllers (Raft between voters,
    registration and heartbeats, AlterPartition, forwarding): the controller listener's
    protocol and settings, SASL with ``sasl.mechanism.controller.protocol``."""
    return listener_client_security(cfg, dynamic, controller_listener(cfg),
                                    "sasl.mechanism.controller.protocol")


def listener_client_security(cfg: BrokerConfig, dynamic: Mapping[str, str],
                             listener: str | None, mechanism_key: str) -> ClientSecurity:
    """The client side of ``listener``: TLS with its truststore and keystore, SASL with the
    mechanism ``mechanism_key`` names and that mechanism's JAAS credentials on the listener."""
    if listener is None:
        return PLAINTEXT
    protocol = listener_protocol(cfg, listener)
    ctx = None
    if protocol in ("SSL", "SASL_SSL"):
        settings = ssl_settings(cfg, dynamic, listener)
        settings["ssl.endpoint.identification.algorithm"] = lookup(
            cfg, dynamic, listener, "ssl.endpoint.identification.algorithm")
        ctx = client_context(settings)
    if protocol not in ("SASL_PLAINTEXT", "SASL_SSL"):
        return ClientSecurity(protocol, ctx)
    mechanism = (lookup(cfg, dynamic, listener, mechanism_key) or "GSSAPI").strip().upper()
    if mechanism not in CLIENT_MECHANISMS:
        raise ConfigError(f"{mechanism_key}={mechanism} is not supported for connections to "
                          f"listener {listener} (one of {', '.join(CLIENT_MECHANISMS)})")
    options = jaas_options(jaas_config(cfg, dynamic, listener, mechanism) or "")
    user, password = options.get("username"), options.get("password")
    if not user or password is None:
        raise ConfigError(f"listener {listener}: the {mechanism} JAAS config has no username/"
                          f"password for this node's own connections ({mechanism_key})")
    return ClientSecurity(protocol, ctx, mechanism, user, password)


def _scram_escape(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


class SaslClient:
    """The client side of one SASL exchange: ``first()``, then ``next(challenge)`` until it
    returns None (done; a bad server answer raises ConfigError-free ``ValueError``)."""

    def __init__(self, sec: ClientSecurity, nonce: str | None = None) -> None:
        assert sec.mechanism is not None
        self.sec = sec
        self.mechanism = sec.mechanism
        self._digest = "sha512" if self.mechanism.endswith("512") else "sha256"
        self._nonce = nonce or secrets.token_urlsafe(24)
        self._first_bare = ""
        self._server_signature = b""
        self._step = 0

    def first(self) -> bytes:
        if self.mechanism == "PLAIN":
            return f"\0{self.sec.username}\0{self.sec.password}".encode()
        self._first_bare = f"n={_scram_escape(self.sec.username)},r={self._nonce}"
        return ("n,," + self._first_bare).encode()

    def next(self, challenge: bytes) -> bytes | None:
        """The answer to the server's message, or None when the exchange is complete."""
        self._step += 1
        if self.mechanism == "PLAIN" or self._step > 2:
            return None
        text = challenge.decode("utf-8")
        attrs = dict(a.split("=", 1) for a in text.split(",") if "=" in a)
        if self._step == 2:
            if "e" in attrs:
                raise ValueError(f"SCRAM server error: {attrs['e']}")
            if base64.b64decode(attrs.get("v", "")) != self._server_signature:
                raise ValueError("SCRAM server signature does not match")
            return None
        nonce, salt, iterations = attrs["r"], base64.b64decode(attrs["s"]), int(attrs["i"])
        if not nonce.startswith(self._nonce):
            raise ValueError("SCRAM server nonce does not extend ours")
        salted = hashlib.pbkdf2_hmac(self._digest, self.sec.password.encode(), salt, iterations)
        client_key = hmac.new(salted, b"Client Key", self._digest).digest()
        stored = hashlib.new(self._digest, client_key).digest()
        final_bare = f"c=biws,r={nonce}"
        auth = f"{self._first_bare},{text},{final_bare}".encode()
        signature = hmac.new(stored, auth, self._digest).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = hmac.new(salted, b"Server Key", self._digest).digest()
        self._server_signature = hmac.new(server_key, auth, self._digest).digest()
        return f"{final_bare},p={base64.b64encode(proof).decode()}".encode()
