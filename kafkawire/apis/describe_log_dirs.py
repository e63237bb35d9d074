"""DescribeLogDirs (key 35), versions 1-5.

- One result per directory of ``log.dirs`` (absolute path, configuration order), listing
  every partition log it holds (``topics`` null) or only the requested partitions held there
  (others are simply absent, as in Kafka). ``__cluster_metadata`` is the quorum's log, not a
  replica, and is not listed (Kafka keeps it out of LogManager too).
- Per partition: ``partition_size`` = bytes of all its segments, ``offset_lag`` 0 (Kafka's
  high watermark minus log end offset, never above 0 here), ``is_future_key`` false. A replica
  moving to another directory (``kafkawire.storage.mover``) is listed there too, with
  ``is_future_key`` true, the future log's size and its lag behind the current log's end
  offset, as Kafka lists a future replica.
- An offline directory (an I/O error in it, or it could not be opened at start) is listed as
  Kafka lists a failed log dir: KAFKA_STORAGE_ERROR, no topics, sizes -1.
- v3+: top-level error NONE. v4+: ``total_bytes`` / ``usable_bytes`` of the file system holding
  the directory (``os.statvfs``; -1 when it cannot be read). v5: ``is_cordoned`` false.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from kafkawire.metadata.quorum import METADATA_TOPIC
from protocol._generated.describe_log_dirs_request import DescribeLogDirsRequest
from protocol._generated.describe_log_dirs_response import DescribeLogDirsResponse
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkawire.broker import Broker
    from kafkawire.net.server import RequestContext

API_KEY = 35
VERSIONS = (1, 5)

Result = DescribeLogDirsResponse.DescribeLogDirsResult
TopicResult = DescribeLogDirsResponse.DescribeLogDirsTopic
PartitionResult = DescribeLogDirsResponse.DescribeLogDirsPartition


def disk_space(path: Path) -> tuple[int, int]:
    """(total bytes, usable bytes) of the file system holding ``path``; -1 when unknown."""
    try:
        st = os.statvfs(path)
    except OSError:
        return -1, -1
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


#: per partition: (size in bytes, offset lag, is a future replica)
Entry = tuple[int, int, bool]


def select(
    entries: list[tuple[tuple[str, int], Entry]],
    topics: list[DescribeLogDirsRequest.DescribableLogDirTopic] | None,
) -> list[TopicResult]:
    """Topic results (sorted) for the local logs' ``entries``, filtered by the request."""
    if topics is not None:
        asked = {(t.topic, p) for t in topics for p in t.partitions}
        entries = [e for e in entries if e[0] in asked]
    by_topic: dict[str, list[PartitionResult]] = {}
    for (topic, index), (size, lag, future) in sorted(entries):
        by_topic.setdefault(topic, []).append(PartitionResult(
            partition_index=index, partition_size=size, offset_lag=lag,
            is_future_key=future,
        ))
    return [TopicResult(name=name, partitions=parts) for name, parts in by_topic.items()]


async def handle(
    broker: Broker, ctx: RequestContext, req: DescribeLogDirsRequest
) -> DescribeLogDirsResponse:
    assert broker.logs is not None
    results = []
    for m in broker.logs.managers:
        log_dir = m.log_dir.resolve()
        if m.offline:  # failed (full disk, I/O error): as Kafka
            results.append(Result(
                error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=str(log_dir), topics=[],
                total_bytes=-1, usable_bytes=-1, is_cordoned=False,
            ))
            continue
        entries: list[tuple[tuple[str, int], Entry]] = [
            (tp, (log.size_bytes, 0, False)) for tp, log in m if tp[0] != METADATA_TOPIC]
        for tp, (dest, future) in broker.logs.futures.items():
            current = broker.logs.get(*tp)
            if dest is m and current is not None:
                lag = max(0, current.log_end_offset - future.log_end_offset)
                entries.append((tp, (future.size_bytes, lag, True)))
        total, usable = disk_space(log_dir)
        results.append(Result(
            error_code=ErrorCode.NONE, log_dir=str(log_dir), topics=select(entries, req.topics),
            total_bytes=total, usable_bytes=usable, is_cordoned=False,
        ))
    return DescribeLogDirsResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, results=results,
    )
