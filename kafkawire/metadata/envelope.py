"""Envelope (API key 58): what a broker forwards to the active controller, as Kafka 4.x does it.

A broker-only node does not decide admin writes; it wraps the client's request (its request
header and body, as the client sent them at the client's version) in an EnvelopeRequest with
the client's principal and address, sends it to the active controller over the controller
listener, and unwraps the answer (kafkawire/metadata/forwarding.py). The controller handles the inner
request as if the client had sent it, with the client's principal and address
(kafkawire/apis/envelope.py).

The wire forms, as Kafka's:

- ``request_data``: the inner request header (v1, or v2 for a flexible version) and body, no
  size prefix; ``response_data``: the inner response header and body, no size prefix.
- ``request_principal``: the principal serialized by Kafka's default principal serde: an int16
  version (0) then ``DefaultPrincipalData`` (type, name, token_authenticated) at that version.
- ``client_host_address``: the client's IP address as raw bytes (4 for IPv4, 16 for IPv6).

``FORWARDABLE_KEYS`` are the APIs Kafka marks forwardable; only those are accepted inside an
envelope. ``error_response`` builds the answer Kafka's ``getErrorResponse`` gives for a request
that failed as a whole (every item of the request carries the error).
"""

from __future__ import annotations

import ipaddress
import struct
from typing import Any

from protocol._generated.default_principal_data import DefaultPrincipalData
from protocol._generated.request_header import RequestHeader
from protocol.errors import ErrorCode
from protocol.primitives import Reader, RemoteProtocolError, Writer

ENVELOPE_KEY = 58
#: Kafka's ``DefaultPrincipalData`` version written by its default principal serde
PRINCIPAL_DATA_VERSION = 0
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

#: APIs Kafka marks forwardable (ApiKeys.forwardable): a broker sends them to the active
#: controller and a controller accepts them inside an Envelope
FORWARDABLE_KEYS: frozenset[int] = frozenset({
    19,  # CreateTopics
    20,  # DeleteTopics
    30,  # CreateAcls
    31,  # DeleteAcls
    33,  # AlterConfigs
    37,  # CreatePartitions
    38,  # CreateDelegationToken
    39,  # RenewDelegationToken
    40,  # ExpireDelegationToken
    43,  # ElectLeaders
    44,  # IncrementalAlterConfigs
    45,  # AlterPartitionReassignments
    46,  # ListPartitionReassignments
    49,  # AlterClientQuotas
    51,  # AlterUserScramCredentials
    55,  # DescribeQuorum
    57,  # UpdateFeatures
    64,  # UnregisterBroker
    67,  # AllocateProducerIds
    80,  # AddRaftVoter
    81,  # RemoveRaftVoter
})


class EnvelopeError(Exception):
    """An envelope Kafka refuses as a whole: its top-level error code."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


# ---- principal and address ----------------------------------------------------------------
def serialize_principal(principal: str, token_authenticated: bool = False) -> bytes:
    """``User:alice`` -> Kafka's default principal serde bytes."""
    ptype, _, name = principal.partition(":")
    data = DefaultPrincipalData(type=ptype, name=name, token_authenticated=token_authenticated)
    return _I16.pack(PRINCIPAL_DATA_VERSION) + data.encode(PRINCIPAL_DATA_VERSION)


def deserialize_principal(raw: bytes) -> tuple[str, bool]:
    """(``Type:name``, token_authenticated); EnvelopeError PRINCIPAL_DESERIALIZATION_FAILURE."""
    try:
        r = Reader(memoryview(raw))
        version = r.int16()
        if version != PRINCIPAL_DATA_VERSION:
            raise ValueError(f"Invalid principal data version {version}")
        data = DefaultPrincipalData.read(r, version)
    except (ValueError, RemoteProtocolError, struct.error, IndexError, UnicodeDecodeError) as e:
        raise EnvelopeError(
            ErrorCode.PRINCIPAL_DESERIALIZATION_FAILURE,
            f"Failed to deserialize client principal from envelope request: {e}") from None
    return f"{data.type}:{data.name}", bool(data.token_authenticated)


def address_bytes(host: str) -> bytes:
    """The client's address as Kafka puts it in the envelope (``InetAddress.getAddress``)."""
    try:
        return ipaddress.ip_address(host.strip("[]")).packed
    except ValueError:
        return ipaddress.ip_address("127.0.0.1").packed if host == "localhost" else b""


def parse_address(raw: bytes) -> str:
    if len(raw) not in (4, 16):
        raise EnvelopeError(ErrorCode.INVALID_REQUEST,
                            f"Failed to parse client address from envelope: {len(raw)} bytes")
    return str(ipaddress.ip_address(bytes(raw)))


# ---- inner request and response -----------------------------------------------------------
def flexible(api_key: int, version: int) -> bool:
    from protocol._generated import API_INFO
    return 0 <= API_INFO[api_key][3] <= version


def encode_inner_request(header: RequestHeader, request: Any) -> bytes:
    key, version = header.request_api_key, header.request_api_version
    w = Writer()
    header.write(w, 2 if flexible(key, version) else 1)
    request.write(w, version)
    return bytes(w)


def parse_inner_header(data: bytes) -> tuple[RequestHeader, Reader]:
    """The forwarded request's header, and a reader at its body (INVALID_REQUEST if short or
    not forwardable)."""
    if len(data) < 8:
        raise EnvelopeError(ErrorCode.INVALID_REQUEST,
                            "Error parsing request header of the forwarded request")
    key, version = _I16.unpack_from(data, 0)[0], _I16.unpack_from(data, 2)[0]
    if key not in FORWARDABLE_KEYS:
        raise EnvelopeError(ErrorCode.INVALID_REQUEST,
                            f"API {key} is not enabled or is not eligible for forwarding")
    r = Reader(memoryview(data))
    try:
        header = RequestHeader.read(r, 2 if flexible(key, version) else 1)
    except (RemoteProtocolError, struct.error, IndexError, UnicodeDecodeError) as e:
        raise EnvelopeError(ErrorCode.INVALID_REQUEST,
                            f"Error parsing request header of the forwarded request: {e}") from None
    return header, r


def encode_inner_response(correlation_id: int, api_key: int, version: int, body: Any) -> bytes:
    w = Writer()
    w += _I32.pack(correlation_id)
    if flexible(api_key, version):
        w.append(0)  # response header v1: no tagged fields
    body.write(w, version)
    return bytes(w)


def decode_inner_response(data: bytes, api_key: int, version: int, correlation_id: int,
                          response_cls: Any) -> Any:
    if len(data) < 4 or _I32.unpack_from(data, 0)[0] != correlation_id:
        raise RemoteProtocolError("forwarded response does not answer the forwarded request")
    pos = 5 if flexible(api_key, version) else 4
    return response_cls.decode(memoryview(data)[pos:], version)


def error_codes(obj: Any, out: set[int] | None = None) -> set[int]:
    """Every ``error_code`` in a response, nested items included (Kafka's errorCounts)."""
    found: set[int] = set() if out is None else out
    code = getattr(obj, "error_code", None)
    if isinstance(code, int):
        found.add(code)
    for name in getattr(obj, "__slots__", ()):
        value = getattr(obj, name, None)
        if isinstance(value, list):
            for item in value:
                if hasattr(item, "__slots__"):
                    error_codes(item, found)
    return found


# ---- a failed request as a whole ----------------------------------------------------------
def _set_error(obj: Any, code: int, message: str | None) -> Any:
    obj.error_code = code
    if hasattr(obj, "error_message"):
        obj.error_message = message
    return obj


def _topics_error(req: Any, resp: Any, code: int, msg: str | None) -> None:
    R = type(resp)
    if hasattr(R, "CreatableTopicResult"):
        resp.topics = [_set_error(R.CreatableTopicResult(name=t.name), code, msg)
                       for t in req.topics]
    elif hasattr(R, "DeletableTopicResult"):
        items = [(t.name, t.topic_id) for t in req.topics] or [
            (n, None) for n in req.topic_names]
        resp.responses = []
        for name, tid in items:
            res = R.DeletableTopicResult(name=name)
            if tid is not None:
                res.topic_id = tid
            resp.responses.append(_set_error(res, code, msg))
    elif hasattr(R, "CreatePartitionsTopicResult"):
        resp.results = [_set_error(R.CreatePartitionsTopicResult(name=t.name), code, msg)
                        for t in req.topics]


def _items_error(req: Any, resp: Any, code: int, msg: str | None) -> None:
    R = type(resp)
    if hasattr(R, "AlterConfigsResourceResponse"):
        resp.responses = [_set_error(R.AlterConfigsResourceResponse(
            resource_type=r.resource_type, resource_name=r.resource_name), code, msg)
            for r in req.resources]
    elif hasattr(R, "AclCreationResult"):
        resp.results = [_set_error(R.AclCreationResult(), code, msg) for _ in req.creations]
    elif hasattr(R, "DeleteAclsFilterResult"):
        resp.filter_results = [_set_error(R.DeleteAclsFilterResult(), code, msg)
                               for _ in req.filters]
    elif hasattr(R, "AlterUserScramCredentialsResult"):
        users = dict.fromkeys([d.name for d in req.deletions] + [u.name for u in req.upsertions])
        resp.results = [_set_error(R.AlterUserScramCredentialsResult(user=u), code, msg)
                        for u in users]
    elif hasattr(R, "EntryData") and hasattr(req, "entries"):
        resp.entries = [_set_error(R.EntryData(entity=[
            R.EntityData(entity_type=e.entity_type, entity_name=e.entity_name)
            for e in entry.entity]), code, msg) for entry in req.entries]


def error_response(response_cls: Any, request: Any, code: ErrorCode,
                   message: str | None = None) -> Any:
    """The response Kafka gives when ``request`` failed as a whole with ``code``."""
    resp = response_cls()
    if "error_code" in getattr(resp, "__slots__", ()):
        _set_error(resp, int(code), message)
    _topics_error(request, resp, int(code), message)
    _items_error(request, resp, int(code), message)
    if hasattr(type(resp), "ReplicaElectionResult") and request.topic_partitions:
        R = type(resp)
        resp.replica_election_results = [R.ReplicaElectionResult(topic=t.topic, partition_result=[
            _set_error(R.PartitionResult(partition_id=p), int(code), message)
            for p in t.partitions]) for t in request.topic_partitions]
    return resp
