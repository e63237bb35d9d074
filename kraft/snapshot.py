"""Metadata snapshots as Kafka writes them (KIP-630): pure bytes, no I/O.

A snapshot of ``__cluster_metadata`` is a file ``<end offset, 20 digits>-<epoch, 10
digits>.checkpoint`` in the partition directory; the id (end offset, epoch) names the first
offset *not* contained and the epoch of the last record contained. Its contents are ordinary v2
record batches whose offsets start at 0 and whose partitionLeaderEpoch is the snapshot's epoch:

1. a control batch with a SnapshotHeader record (control type 3: version 0 and the append time
   of the last record contained); with ``kraft.version`` >= 1 (a dynamic quorum, KIP-853) the
   same batch also holds a KRaftVersion record (type 5) and the VotersRecord (type 6);
2. data batches of framed metadata records (``kraft.records``) that rebuild the image;
3. a control batch with a SnapshotFooter record (type 4), the last thing in the file.

A control record's key is (int16 version 0, int16 type); its value the record in its (flexible)
version 0 encoding. Kafka's ``kafka-dump-log --cluster-metadata-decoder`` and
``kafka-metadata-shell --snapshot`` read these files. ``decode_snapshot`` refuses a file that is
truncated, fails a CRC, or lacks the header or the footer (``SnapshotError``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from kraft.records import decode_record, encode_record
from protocol._generated.k_raft_version_record import KRaftVersionRecord
from protocol._generated.snapshot_footer_record import SnapshotFooterRecord
from protocol._generated.snapshot_header_record import SnapshotHeaderRecord
from protocol._generated.voters_record import VotersRecord
from protocol.primitives import Reader, RemoteProtocolError
from protocol.records import (
    ControlType,
    RecordError,
    SimpleRecord,
    build_batch,
    decode_batch_records,
    encode_control_key,
    iter_headers,
)

SNAPSHOT_SUFFIX = ".checkpoint"
PARTIAL_SUFFIX = ".checkpoint.part"  # being written; removed on start (never loaded)
DELETED_SUFFIX = ".checkpoint.deleted"  # renamed before deletion, as Kafka does
#: Kafka's KafkaRaftClient.MAX_BATCH_SIZE_BYTES: the largest data batch in a snapshot
MAX_SNAPSHOT_BATCH_BYTES = 8 * 1024 * 1024
_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")


class SnapshotError(Exception):
    """A snapshot file that cannot be used (truncated, corrupt, not a snapshot)."""


@dataclass(frozen=True, order=True)
class SnapshotId:
    """(end offset, epoch): the first offset not contained and the last contained epoch."""

    offset: int
    epoch: int

    @property
    def file_name(self) -> str:
        return f"{self.offset:020d}-{self.epoch:010d}{SNAPSHOT_SUFFIX}"

    @staticmethod
    def parse(name: str) -> SnapshotId | None:
        m = _NAME.match(name)
        return None if m is None else SnapshotId(int(m.group(1)), int(m.group(2)))


@dataclass
class SnapshotContents:
    snapshot_id: SnapshotId
    last_contained_log_timestamp: int
    records: list[Any] = field(default_factory=list)
    kraft_version: int = 0
    voters: VotersRecord | None = None


def _control(ctype: int, record: Any, now_ms: int) -> SimpleRecord:
    return SimpleRecord(encode_control_key(ctype), record.encode(0), (), now_ms)


def encode_snapshot(
    records: list[Any],
    snapshot_id: SnapshotId,
    *,
    last_contained_log_timestamp: int,
    now_ms: int,
    kraft_version: int = 0,
    voters: VotersRecord | None = None,
    max_batch_bytes: int = MAX_SNAPSHOT_BATCH_BYTES,
) -> bytes:
    """The bytes of a snapshot file holding ``records`` (metadata record objects)."""
    epoch = snapshot_id.epoch
    head = [_control(ControlType.SNAPSHOT_HEADER, SnapshotHeaderRecord(
        version_=0, last_contained_log_timestamp=last_contained_log_timestamp), now_ms)]
    if kraft_version >= 1:
        head.append(_control(ControlType.KRAFT_VERSION, KRaftVersionRecord(
            version_=0, k_raft_version=kraft_version), now_ms))
        if voters is not None:
            head.append(_control(ControlType.KRAFT_VOTERS, voters, now_ms))
    out = bytearray(build_batch(head, base_offset=0, is_control=True,
                                partition_leader_epoch=epoch))
    offset = len(head)
    pending: list[SimpleRecord] = []
    size = 0

    def flush() -> None:
        nonlocal offset, size
        if pending:
            out.extend(build_batch(pending, base_offset=offset, partition_leader_epoch=epoch))
            offset += len(pending)
            pending.clear()
            size = 0

    for rec in records:
        value = encode_record(rec)
        if pending and size + len(value) + 16 > max_batch_bytes:
            flush()
        pending.append(SimpleRecord(None, value, (), now_ms))
        size += len(value) + 16
    flush()
    footer = _control(ControlType.SNAPSHOT_FOOTER, SnapshotFooterRecord(version_=0), now_ms)
    out += build_batch([footer], base_offset=offset, is_control=True,
                       partition_leader_epoch=epoch)
    return bytes(out)


def _control_value(rec: Any) -> tuple[int, Reader]:
    key = rec.key
    if key is None or len(key) < 4:
        raise SnapshotError("control record without a 4-byte key")
    ctype = int.from_bytes(key[2:4], "big", signed=True)
    return ctype, Reader(rec.value or b"")


def decode_snapshot(data: bytes | bytearray | memoryview, snapshot_id: SnapshotId) -> SnapshotContents:
    """The contents of a snapshot file; ``SnapshotError`` if it is not a complete snapshot."""
    view = memoryview(data)
    headers = iter_headers(view)
    used = headers[-1][0] + headers[-1][1].size if headers else 0
    if used != len(view):
        raise SnapshotError(
            f"truncated: {len(view) - used} trailing bytes after the last complete batch "
            f"(file of {len(view)} bytes)")
    if not headers:
        raise SnapshotError("empty: no record batch")
    out = SnapshotContents(snapshot_id, -1)
    seen_header = seen_footer = False
    for pos, h in headers:
        if seen_footer:
            raise SnapshotError(f"a batch at position {pos} after the SnapshotFooter")
        try:
            _hdr, recs = decode_batch_records(view, pos)
        except RecordError as e:
            raise SnapshotError(f"corrupt batch at position {pos}: {e}") from None
        if not h.is_control:
            if not seen_header:
                raise SnapshotError("the first batch is not the SnapshotHeader control batch")
            try:
                out.records.extend(decode_record(r.value or b"")[0] for r in recs)
            except RemoteProtocolError as e:
                raise SnapshotError(f"bad metadata record in batch at {pos}: {e}") from None
            continue
        for rec in recs:
            ctype, reader = _control_value(rec)
            try:
                if ctype == ControlType.SNAPSHOT_HEADER:
                    if seen_header:
                        raise SnapshotError("a second SnapshotHeader")
                    seen_header = True
                    hdr = SnapshotHeaderRecord.read(reader, 0)
                    out.last_contained_log_timestamp = hdr.last_contained_log_timestamp
                elif not seen_header:
                    raise SnapshotError("the first record is not a SnapshotHeader")
                elif ctype == ControlType.SNAPSHOT_FOOTER:
                    seen_footer = True
                elif ctype == ControlType.KRAFT_VERSION:
                    out.kraft_version = KRaftVersionRecord.read(reader, 0).k_raft_version
                elif ctype == ControlType.KRAFT_VOTERS:
                    out.voters = VotersRecord.read(reader, 0)
            except RemoteProtocolError as e:
                raise SnapshotError(f"bad control record type {ctype}: {e}") from None
    if not seen_footer:
        raise SnapshotError("incomplete: no SnapshotFooter (the file was cut short)")
    return out
