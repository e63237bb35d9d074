"""Test certificates (a CA, a broker certificate for 127.0.0.1/localhost, client certificates),
SCRAM users and broker overrides for secured listeners. Generated fresh per test module with
the ``cryptography`` package; nothing is checked in."""

from __future__ import annotations

import datetime
import ipaddress
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

from kafkawire.tools.testing import free_port

PASSWORD = "changeit"


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kafkawire tests"),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


@dataclass
class Pki:
    dir: Path
    ca_pem: Path
    server_pem: Path  # key + chain
    server_key_pem: Path
    server_cert_pem: Path
    server_p12: Path
    truststore_p12: Path

    def client(self, cn: str) -> tuple[Path, Path]:
        """(certificate PEM, key PEM) of a client certificate signed by the CA."""
        cert, key = _issue(self, cn, server=False)
        cert_path, key_path = self.dir / f"{cn}.crt", self.dir / f"{cn}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(_key_pem(key))
        return cert_path, key_path


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


_CA: dict[Path, tuple[x509.Certificate, ec.EllipticCurvePrivateKey]] = {}


def _issue(pki: Pki, cn: str, server: bool) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    ca_cert, ca_key = _CA[pki.dir]
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(ca_cert.subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(hours=1))
               .not_valid_after(now + datetime.timedelta(days=2)))
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName([
            x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def make_pki(directory: Path, server_cn: str = "localhost") -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    ca_name = _name(f"test CA {directory.name}")
    ca_cert = (x509.CertificateBuilder().subject_name(ca_name)
               .issuer_name(ca_name).public_key(ca_key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(hours=1))
               .not_valid_after(now + datetime.timedelta(days=2))
               .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
               .sign(ca_key, hashes.SHA256()))
    pki = Pki(directory, directory / "ca.pem", directory / "server.pem",
              directory / "server.key", directory / "server.crt", directory / "server.p12",
              directory / "truststore.p12")
    _CA[directory] = (ca_cert, ca_key)
    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
    pki.ca_pem.write_bytes(ca_pem)
    cert, key = _issue(pki, server_cn, server=True)
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    pki.server_key_pem.write_bytes(_key_pem(key))
    pki.server_cert_pem.write_bytes(cert_pem + ca_pem)
    pki.server_pem.write_bytes(_key_pem(key) + cert_pem + ca_pem)
    enc = serialization.BestAvailableEncryption(PASSWORD.encode())
    pki.server_p12.write_bytes(pkcs12.serialize_key_and_certificates(
        b"broker", key, cert, [ca_cert], enc))
    pki.truststore_p12.write_bytes(pkcs12.serialize_key_and_certificates(
        None, None, None, [ca_cert], enc))
    return pki


def listeners(**names: str) -> tuple[dict[str, str], dict[str, int]]:
    """Overrides binding each NAME=PROTOCOL listener to a free port, and the ports.

    The first listener is the one ``BrokerProcess`` checks readiness on, so make it PLAINTEXT.
    """
    ports = {name: free_port() for name in names}
    specs = ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items())
    proto_map = ",".join(f"{n}:{proto}" for n, proto in names.items())
    return {"listeners": specs, "listener.security.protocol.map": f"CONTROLLER:PLAINTEXT,"
            f"{proto_map}"}, ports


def wait_until(cond: Callable[[], Any], timeout_s: float, what: str, every_s: float = 0.3) -> Any:
    """``cond()``'s first true answer within ``timeout_s``; an exception counts as no answer
    (a node of a secured cluster still starting, or just killed)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            got = cond()
        except Exception:
            got = None
        if got:
            return got
        time.sleep(every_s)
    raise TimeoutError(f"{what} within {timeout_s}s")
