"""Metadata record framing inside ``__cluster_metadata`` record values.

Each record value is: uvarint frame version (1), uvarint record type (the metadata JSON's
``apiKey``), uvarint record version, then the record body in that version's (always flexible)
encoding. This is the framing Kafka's MetadataRecordSerde uses, so ``kafka-dump-log
--cluster-metadata-decoder`` can read our metadata log.
"""

from __future__ import annotations

import importlib
from typing import Any

from protocol._generated import METADATA_RECORDS
from protocol.primitives import Reader, RemoteProtocolError, Struct, Writer

FRAME_VERSION = 1


def record_class(record_type: int) -> Any:
    try:
        mod, cls = METADATA_RECORDS[record_type]
    except KeyError:
        raise RemoteProtocolError(f"unknown metadata record type {record_type}") from None
    return getattr(importlib.import_module(f"protocol._generated.{mod}"), cls)


def encode_record(record: Struct, version: int | None = None) -> bytes:
    cls: Any = type(record)
    v = cls.MAX_VERSION if version is None else version
    w = Writer()
    w.uvarint(FRAME_VERSION)
    w.uvarint(cls.API_KEY)
    w.uvarint(v)
    record.write(w, v)  # type: ignore[attr-defined]
    return bytes(w)


def decode_record(buf: bytes | bytearray | memoryview) -> tuple[Any, int]:
    """(record, version) from one framed metadata record value."""
    r = Reader(buf)
    frame = r.uvarint()
    if frame != FRAME_VERSION:
        raise RemoteProtocolError(f"unsupported metadata frame version {frame}")
    rtype = r.uvarint()
    version = r.uvarint()
    cls = record_class(rtype)
    if not cls.MIN_VERSION <= version <= cls.MAX_VERSION:
        raise RemoteProtocolError(f"unsupported version {version} of metadata record {rtype}")
    rec = cls.read(r, version)
    if r.remaining():
        raise RemoteProtocolError("trailing bytes after a metadata record")
    return rec, version
