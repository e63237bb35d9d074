"""TLS for SSL and SASL_SSL listeners, from Kafka's ``ssl.*`` keys.

Keystore (the broker's certificate and key):
- ``ssl.keystore.type=PEM`` with ``ssl.keystore.location`` (a file holding the private key and
  the certificate chain) or inline ``ssl.keystore.certificate.chain`` + ``ssl.keystore.key``;
  an encrypted key is opened with ``ssl.key.password``;
- ``ssl.keystore.type=PKCS12`` with ``ssl.keystore.location`` and ``ssl.keystore.password``.
Truststore (the CAs client certificates are checked against): ``ssl.truststore.type=PEM`` with a
file or inline ``ssl.truststore.certificates``, or PKCS12 with ``ssl.truststore.password``.
JKS (Java's own format, Kafka's default type) cannot be read outside a JVM: a configuration that
names a JKS file is refused at start with a message saying to convert it (``keytool
-importkeystore -deststoretype PKCS12``).

``ssl.client.auth``: ``required`` (a client without a trusted certificate fails the
handshake), ``requested`` (a certificate is checked when given), ``none``.
``ssl.enabled.protocols`` bounds the TLS versions (TLSv1.2, TLSv1.3; Kafka's default is both).
``ssl.cipher.suites`` takes the IANA names Java uses for TLS 1.2 suites (translated to
OpenSSL's); Python's ``ssl`` cannot restrict TLS 1.3 suites, so TLS 1.3 names are accepted and
TLS 1.3 keeps OpenSSL's default suites.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from collections.abc import Mapping

from kafkawire.config.broker_config import ConfigError

_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                "required": ssl.CERT_REQUIRED}
#: IANA (Java) TLS 1.2 suite names -> OpenSSL names
_CIPHERS = {
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384": "ECDHE-RSA-AES256-SHA384",
}
_TLS13_SUITES = {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
                 "TLS_CHACHA20_POLY1305_SHA256", "TLS_AES_128_CCM_SHA256"}


_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.S)


def normalize_pem(text: str) -> bytes:
    """PEM blocks as OpenSSL reads them. Kafka accepts inline PEM whose lines are joined by
    spaces (a properties value continued with ``\\``) or written as ``\\n``: the base64 body
    is re-wrapped."""
    out = []
    for m in _PEM_BLOCK.finditer(text):
        body = re.sub(r"\\n|\s", "", m.group(2))
        lines = "\n".join(body[i:i + 64] for i in range(0, len(body), 64))
        out.append(f"-----BEGIN {m.group(1)}-----\n{lines}\n-----END {m.group(1)}-----\n")
    if not out:
        raise ConfigError("no PEM block in an inline ssl.* value")
    return "".join(out).encode()


def _read(path: str, key: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise ConfigError(f"cannot read {key} {path}: {e.strerror}") from None


def _pkcs12(data: bytes, password: str | None, key: str) -> tuple[bytes | None, bytes]:
    """(private key PEM or None, certificates PEM) of a PKCS12 store."""
    from cryptography.hazmat.primitives.serialization import (
        Encoding,
        NoEncryption,
        PrivateFormat,
        pkcs12,
    )
    try:
        pkey, cert, extra = pkcs12.load_key_and_certificates(
            data, password.encode() if password else None)
    except ValueError as e:
        raise ConfigError(f"cannot open the PKCS12 {key}: {e}") from None
    certs = ([cert] if cert is not None else []) + list(extra or [])
    chain = b"".join(c.public_bytes(Encoding.PEM) for c in certs)
    key_pem = None if pkey is None else pkey.private_bytes(
        Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    return key_pem, chain


def _store(settings: Mapping[str, str | None], prefix: str) -> tuple[bytes | None, bytes]:
    """(key PEM, certificates PEM) of the keystore or truststore settings."""
    kind = (settings.get(f"ssl.{prefix}.type") or "JKS").upper()
    location = settings.get(f"ssl.{prefix}.location")
    inline_certs = settings.get("ssl.keystore.certificate.chain" if prefix == "keystore"
                                else "ssl.truststore.certificates")
    if inline_certs:
        key = settings.get("ssl.keystore.key") if prefix == "keystore" else None
        return (normalize_pem(key) if key else None), normalize_pem(inline_certs)
    if not location:
        return None, b""
    data = _read(location, f"ssl.{prefix}.location")
    if kind == "PKCS12":
        return _pkcs12(data, settings.get(f"ssl.{prefix}.password"), f"ssl.{prefix}.location")
    if kind == "PEM" or data.lstrip().startswith(b"-----BEGIN"):
        return data, data
    raise ConfigError(
        f"ssl.{prefix}.type {kind} cannot be read by kafkawire ({location}); convert it to "
        "PKCS12 (keytool -importkeystore -deststoretype PKCS12) or PEM")


def _load_keystore(ctx: ssl.SSLContext, key_pem: bytes, chain_pem: bytes,
                   password: str | None) -> None:
    # load_cert_chain reads files only: a private temporary directory, removed at once
    with tempfile.TemporaryDirectory(prefix="kafkawire-tls-") as tmp:
        cert_path = os.path.join(tmp, "chain.pem")
        key_path = os.path.join(tmp, "key.pem")
        fd = os.open(cert_path, os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, chain_pem)
        os.close(fd)
        fd = os.open(key_path, os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, key_pem)
        os.close(fd)
        try:
            ctx.load_cert_chain(cert_path, key_path, password=password)
        except ssl.SSLError as e:
            raise ConfigError(f"cannot use the keystore: {e}") from None


def server_context(settings: Mapping[str, str | None]) -> ssl.SSLContext:
    """An SSLContext for a listener's ``ssl.*`` settings (ConfigError when unusable)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    protocols = [p.strip() for p in (settings.get("ssl.enabled.protocols") or "").split(",")
                 if p.strip()]
    versions = [_PROTOCOLS[p] for p in protocols if p in _PROTOCOLS]
    if not versions:
        raise ConfigError(f"ssl.enabled.protocols {protocols} names no TLSv1.2/TLSv1.3")
    ctx.minimum_version = min(versions)
    ctx.maximum_version = max(versions)
    suites = [s.strip() for s in (settings.get("ssl.cipher.suites") or "").split(",")
              if s.strip()]
    if suites:
        unknown = [s for s in suites if s not in _CIPHERS and s not in _TLS13_SUITES]
        if unknown:
            raise ConfigError(f"ssl.cipher.suites: unsupported suites {unknown}")
        names = [_CIPHERS[s] for s in suites if s in _CIPHERS]
        if names:
            ctx.set_ciphers(":".join(names))
    key_pem, chain_pem = _store(settings, "keystore")
    if not key_pem or not chain_pem:
        raise ConfigError("an SSL listener needs a keystore (ssl.keystore.location or "
                          "ssl.keystore.certificate.chain + ssl.keystore.key)")
    _load_keystore(ctx, key_pem, chain_pem, settings.get("ssl.key.password"))
    auth = (settings.get("ssl.client.auth") or "none").lower()
    if auth not in _CLIENT_AUTH:
        raise ConfigError(f"invalid ssl.client.auth {auth!r}")
    _key, trusted = _store(settings, "truststore")
    if trusted:
        try:
            ctx.load_verify_locations(cadata=trusted.decode("ascii", "replace"))
        except ssl.SSLError as e:
            raise ConfigError(f"cannot use the truststore: {e}") from None
    elif auth != "none":
        raise ConfigError(f"ssl.client.auth={auth} needs a truststore")
    ctx.verify_mode = _CLIENT_AUTH[auth]
    return ctx


def client_context(settings: Mapping[str, str | None]) -> ssl.SSLContext:
    """An SSLContext for this broker's connections to other brokers on a TLS listener, from
    that listener's ``ssl.*`` settings as Kafka's inter-broker client takes them: the
    truststore checks the peer (the system CAs without one), the keystore (when given) is
    this broker's certificate for ``ssl.client.auth``, ``ssl.endpoint.identification
    .algorithm`` (``https`` by default, empty: off) checks the peer's host name."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    protocols = [p.strip() for p in (settings.get("ssl.enabled.protocols") or "").split(",")
                 if p.strip()]
    versions = [_PROTOCOLS[p] for p in protocols if p in _PROTOCOLS]
    if versions:
        ctx.minimum_version, ctx.maximum_version = min(versions), max(versions)
    _key, trusted = _store(settings, "truststore")
    try:
        if trusted:
            ctx.load_verify_locations(cadata=trusted.decode("ascii", "replace"))
        else:
            ctx.load_default_certs()
    except ssl.SSLError as e:
        raise ConfigError(f"cannot use the truststore: {e}") from None
    key_pem, chain_pem = _store(settings, "keystore")
    if key_pem and chain_pem:
        _load_keystore(ctx, key_pem, chain_pem, settings.get("ssl.key.password"))
    ctx.check_hostname = bool((settings.get("ssl.endpoint.identification.algorithm")
                               or "").strip())
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def subject_dn(der: bytes) -> str:
    """The subject of a DER certificate as RFC 2253 text (Java's X500Principal.getName())."""
    from cryptography import x509

    return x509.load_der_x509_certificate(der).subject.rfc4514_string()
