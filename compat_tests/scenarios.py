"""Differential scenarios: the same interactions against Apache Kafka and kafkawire.

A scenario is a function ``(bootstrap) -> JSON-able outcome``, registered with ``@scenario``.
Outcomes are normalized so that only legitimate differences disappear: cluster ids, topic ids,
producer ids, ports, LogAppendTime stamps, throttle times and error *messages* (the error *codes*
stay). Everything else (error codes per partition, offsets, client-set timestamps, high
watermarks, log start offsets, leader epochs, config values and sources, version ranges, group
states) is compared.

Every scenario uses topic names starting with its own name, so scenarios do not see each other's
topics and can run in any order against a fresh broker. Run one by hand with
``python -m compat_tests.scenarios BOOTSTRAP [NAME...]``.
"""

# Steps.step() calls its lambda at once, so loop variables in them are bound correctly.
# ruff: noqa: B023
from __future__ import annotations

import contextlib
import json
import re
import struct
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from compat_tests.cluster_wire import open_connection
from compat_tests.wire import (
    Connection,
    ConnectionClosed,
    Rec,
    build_batch,
    parse_batches,
    plain,
)
from protocol._generated import API_INFO
from protocol._generated.api_versions_request import ApiVersionsRequest
from protocol._generated.create_partitions_request import CreatePartitionsRequest
from protocol._generated.create_topics_request import CreateTopicsRequest
from protocol._generated.delete_records_request import DeleteRecordsRequest
from protocol._generated.delete_topics_request import DeleteTopicsRequest
from protocol._generated.describe_configs_request import DescribeConfigsRequest
from protocol._generated.fetch_request import FetchRequest
from protocol._generated.init_producer_id_request import InitProducerIdRequest
from protocol._generated.list_offsets_request import ListOffsetsRequest
from protocol._generated.metadata_request import MetadataRequest
from protocol._generated.produce_request import ProduceRequest
from protocol.errors import ErrorCode

Outcome = Any
ScenarioFn = Callable[[str], Outcome]

SCENARIOS: dict[str, ScenarioFn] = {}


def scenario(fn: ScenarioFn) -> ScenarioFn:
    SCENARIOS[fn.__name__] = fn
    return fn


_started: list[Steps] = []  # outcomes created by the running scenario (kept if it raises)


class Steps(dict[str, Any]):
    """A scenario's outcome, filled step by step.

    ``out.step(key, fn)`` stores ``fn()``, or ``{"raised": "<exception>"}`` when it raises, so one
    unsupported request (a broker still missing an API closes the connection) does not hide the
    outcome of the steps after it.
    """

    def __init__(self) -> None:
        super().__init__()
        _started.append(self)

    def step(self, key: str, fn: Callable[[], Any]) -> Any:
        try:
            value = fn()
        except Exception as e:  # recorded in the outcome, compared like any value
            value = {"raised": f"{type(e).__name__}: {e}".splitlines()[0][:200]}
        self[key] = value
        return value


# --- normalization helpers ----------------------------------------------------------------------

# Keys that legitimately differ between two brokers (or two runs of one broker).
VOLATILE_KEYS = frozenset(
    {
        "throttle_time_ms",
        "cluster_id",
        "topic_id",
        "error_message",
        "batch_index_error_message",
        "documentation",
        "_unknown_tags",
    }
)


def err(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"UNKNOWN_ERROR_CODE_{code}"


def norm(obj: Any, drop: frozenset[str] = frozenset()) -> Any:
    """Plain data with volatile keys removed and ``*error_code`` fields named."""
    obj = plain(obj)
    return _norm(obj, VOLATILE_KEYS | drop)


def _norm(obj: Any, drop: frozenset[str]) -> Any:
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if k in drop:
                continue
            if k.endswith("error_code") and isinstance(v, int):
                out[k] = err(v)
            else:
                out[k] = _norm(v, drop)
        return out
    if isinstance(obj, list):
        return [_norm(x, drop) for x in obj]
    if isinstance(obj, bytes):
        return {"bytes": len(obj)}
    return obj


CONFIG_SOURCES = {
    -1: "UNKNOWN",
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "CLIENT_METRICS_CONFIG",
    8: "GROUP_CONFIG",
}
CONFIG_TYPES = {
    0: "UNKNOWN",
    1: "BOOLEAN",
    2: "STRING",
    3: "INT",
    4: "SHORT",
    5: "LONG",
    6: "DOUBLE",
    7: "LIST",
    8: "CLASS",
    9: "PASSWORD",
}


def name_config_entry(d: dict[str, Any]) -> dict[str, Any]:
    for key in ("config_source", "source"):
        if key in d:
            d[key] = CONFIG_SOURCES.get(d[key], d[key])
    if "config_type" in d:
        d["config_type"] = CONFIG_TYPES.get(d["config_type"], d["config_type"])
    for syn in d.get("synonyms") or []:
        name_config_entry(syn)
    return d


def batches_summary(records: Any, *, log_append_time: bool = False) -> list[dict[str, Any]]:
    """Decoded batches; with ``log_append_time`` the broker-set stamps become ``"<broker time>"``."""
    out = parse_batches(records)
    for b in out:
        if isinstance(b.get("producer_id"), int) and b["producer_id"] >= 0:
            b["producer_id"] = "<pid>"
        if log_append_time and b.get("attributes", 0) & 0x08:
            b["max_timestamp"] = "<broker time>"
    return out


def fetch_partition_outcome(p: Any, *, log_append_time: bool = False) -> dict[str, Any]:
    d: dict[str, Any] = norm(p, frozenset({"records"}))
    for a in d.get("aborted_transactions") or []:
        a["producer_id"] = "<pid>"
    d["batches"] = batches_summary(p.records, log_append_time=log_append_time)
    return d


# --- small protocol helpers ---------------------------------------------------------------------

# Client-set CreateTime of the records the scenarios produce: ten minutes ago, so that the
# default retention (7 days) and message.timestamp.after.max.ms (1 hour) accept them. Outcomes
# show timestamps relative to it ("T0+2000"), see relativize().
T0 = (int(time.time()) - 600) * 1000
_T_WINDOW = 2 * 86_400_000


@contextmanager
def connect(bootstrap: str) -> Iterator[Connection]:
    c = open_connection(bootstrap)
    try:
        yield c
    finally:
        c.close()


def metadata(
    c: Connection, topics: list[str] | None, *, auto_create: bool = False, version: int = 12
) -> Any:
    req = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics or []],
        allow_auto_topic_creation=auto_create,
    )
    if topics is None:
        req.topics = None  # null = every topic
    return c.request(req, version)


def eventually(fn: Callable[[], Any], ok: Callable[[Any], bool], timeout: float = 15.0) -> Any:
    """Call ``fn`` until ``ok(result)`` (metadata propagates asynchronously in KRaft)."""
    deadline = time.monotonic() + timeout
    while True:
        r = fn()
        if ok(r) or time.monotonic() > deadline:
            return r
        time.sleep(0.05)


def wait_for_leaders(
    c: Connection, topic: str, partitions: int | None = None, timeout: float = 15.0
) -> Any:
    """Poll Metadata until ``topic`` has ``partitions`` (default: any) partitions, all led."""
    deadline = time.monotonic() + timeout
    while True:
        md = metadata(c, [topic])
        t = md.topics[0]
        if (
            t.error_code == 0
            and t.partitions
            and (partitions is None or len(t.partitions) == partitions)
            and all(p.leader_id >= 0 for p in t.partitions)
        ):
            # Metadata can show a leader a moment before the replica serves requests; wait
            # until every partition answers ListOffsets.
            ready = True
            for p in t.partitions:
                req = ListOffsetsRequest(
                    replica_id=-1,
                    topics=[
                        ListOffsetsRequest.ListOffsetsTopic(
                            name=topic,
                            partitions=[
                                ListOffsetsRequest.ListOffsetsPartition(
                                    partition_index=p.partition_index, timestamp=-1
                                )
                            ],
                        )
                    ],
                )
                if c.request(req, 7).topics[0].partitions[0].error_code != 0:
                    ready = False
                    break
            if ready:
                return t
        if time.monotonic() > deadline:
            raise AssertionError(f"topic {topic} has no leaders: {plain(t)}")
        time.sleep(0.05)


def create_topic(
    c: Connection,
    name: str,
    partitions: int = 1,
    configs: dict[str, str] | None = None,
    *,
    wait: bool = True,
) -> Any:
    req = CreateTopicsRequest(
        topics=[
            CreateTopicsRequest.CreatableTopic(
                name=name,
                num_partitions=partitions,
                replication_factor=-1,  # the broker default (1 on one node, 3 on three)
                configs=[
                    CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                    for k, v in (configs or {}).items()
                ],
            )
        ],
        timeout_ms=30000,
    )
    try:
        res = c.request(req, 7).topics[0]
    except ConnectionClosed:
        # A broker without CreateTopics (closes the connection): fall back to auto-creation
        # through Metadata so the produce/fetch steps still run. Partitions and configs are
        # then the broker's defaults, which shows up in the outcome.
        metadata(c, [name], auto_create=True)
        if wait:
            wait_for_leaders(c, name)
        return None
    if res.error_code != 0:
        raise AssertionError(f"create {name}: {err(res.error_code)} {res.error_message}")
    if wait:
        wait_for_leaders(c, name, partitions)
    return res


def produce(
    c: Connection,
    topic: str,
    batch: bytes | None,
    *,
    partition: int = 0,
    acks: int = -1,
    version: int = 9,
    transactional_id: str | None = None,
) -> Any:
    req = ProduceRequest(
        transactional_id=transactional_id,
        acks=acks,
        timeout_ms=30000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=topic,
                partition_data=[
                    ProduceRequest.PartitionProduceData(index=partition, records=batch)
                ],
            )
        ],
    )
    return c.request(req, version)


def produce_partition(c: Connection, topic: str, batch: bytes, **kw: Any) -> dict[str, Any]:
    r = produce(c, topic, batch, **kw)
    out: dict[str, Any] = norm(r.responses[0].partition_responses[0], frozenset({"current_leader"}))
    return out


def fetch(
    c: Connection,
    topic: str,
    offset: int,
    *,
    partition: int = 0,
    partition_max_bytes: int = 1 << 20,
    max_bytes: int = 50 << 20,
    version: int = 12,
    max_wait_ms: int = 50,
    min_bytes: int = 1,
    isolation_level: int = 0,
    topic_id: uuid.UUID | None = None,
) -> Any:
    ft = FetchRequest.FetchTopic(
        topic=topic,
        partitions=[
            FetchRequest.FetchPartition(
                partition=partition,
                fetch_offset=offset,
                partition_max_bytes=partition_max_bytes,
            )
        ],
    )
    if topic_id is not None:
        ft.topic_id = topic_id
    req = FetchRequest(
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=isolation_level,
        session_id=0,
        session_epoch=-1,
        topics=[ft],
    )
    return c.request(req, version)


def fetch_one(c: Connection, topic: str, offset: int, **kw: Any) -> dict[str, Any]:
    lat = kw.pop("lat", False)
    r = fetch(c, topic, offset, **kw)
    out = {"top_error_code": err(r.error_code), "session_id": r.session_id}
    out.update(fetch_partition_outcome(r.responses[0].partitions[0], log_append_time=lat))
    return out


def list_offsets(
    c: Connection,
    topic: str,
    timestamps: list[int],
    *,
    partition: int = 0,
    version: int = 9,
    isolation_level: int = 0,
) -> list[dict[str, Any]]:
    out = []
    for ts in timestamps:
        req = ListOffsetsRequest(
            replica_id=-1,
            isolation_level=isolation_level,
            topics=[
                ListOffsetsRequest.ListOffsetsTopic(
                    name=topic,
                    partitions=[
                        ListOffsetsRequest.ListOffsetsPartition(
                            partition_index=partition, timestamp=ts
                        )
                    ],
                )
            ],
        )
        p = c.request(req, version).topics[0].partitions[0]
        out.append({"query": ts, **norm(p)})
    return out


RETRIABLE = {
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.REQUEST_TIMED_OUT,
}


def init_producer_id(
    c: Connection, transactional_id: str | None = None, timeout: float = 30.0, version: int = 4
) -> Any:
    """InitProducerId, retried while the broker is still loading (as clients do)."""
    deadline = time.monotonic() + timeout
    while True:
        r = c.request(
            InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout_ms=60000),
            version,
        )
        if r.error_code not in RETRIABLE or time.monotonic() > deadline:
            return r
        time.sleep(0.1)


def simple_records(n: int, prefix: str = "v", ts_step: int = 1) -> list[Rec]:
    return [
        Rec(value=f"{prefix}{i}".encode(), key=f"k{i}".encode(), timestamp=T0 + i * ts_step)
        for i in range(n)
    ]


# --- scenarios: versions and metadata -----------------------------------------------------------


@scenario
def api_versions(bootstrap: str) -> Outcome:
    """ApiVersions at every version: advertised ranges, features, and the KIP-511 fallback.

    The key ranges are listed once (``api_keys``, from v4); each version says whether it
    advertised the same (Kafka does) or lists its own.
    """
    out = Steps()

    def one(c: Connection, v: int) -> dict[str, Any]:
        req = ApiVersionsRequest(client_software_name="compat", client_software_version="1.0")
        r = c.request(req, v)
        d: dict[str, Any] = norm(r, frozenset({"finalized_features_epoch"}))
        d["api_keys"] = {
            f"{k['api_key']} {API_INFO.get(k['api_key'], ('?',))[0]}": [
                k["min_version"],
                k["max_version"],
            ]
            for k in d["api_keys"]
        }
        # Keyed by feature name, so that a difference names its feature (accepted.py globs).
        d["supported_features"] = {
            f["name"]: [f["min_version"], f["max_version"]]
            for f in d.get("supported_features") or []
        }
        d["finalized_features"] = {
            f["name"]: [f["min_version_level"], f["max_version_level"]]
            for f in d.get("finalized_features") or []
        }
        if v >= 3:
            d["finalized_features_epoch_set"] = r.finalized_features_epoch >= 0
        return d

    with connect(bootstrap) as c:
        per_version = {v: out.step(f"v{v}", lambda: one(c, v)) for v in (4, 3, 2, 1, 0)}
        keys = per_version[4].get("api_keys") if isinstance(per_version[4], dict) else None
        out["api_keys"] = keys
        for d in per_version.values():
            if isinstance(d, dict) and "api_keys" in d and d["api_keys"] == keys:
                d["api_keys"] = "same as api_keys"
    # An unsupported ApiVersions version is answered with a v0 body: error 35 + key 18's range.
    # Versions >= 3 use request header v2; a newer client sends its own newest body.

    def unsupported() -> dict[str, Any]:
        from protocol._generated.api_versions_response import ApiVersionsResponse
        from protocol.primitives import Reader

        with connect(bootstrap) as c:
            req = ApiVersionsRequest(client_software_name="compat", client_software_version="9")
            frame = c.raw_request(18, 127, req.encode(3), header_version=2)
        rd = Reader(frame)
        rd.int32()  # correlation id (response header v0)
        r0 = ApiVersionsResponse.read(rd, 0)
        return {
            "error_code": err(r0.error_code),
            "api_keys": [[k.api_key, k.min_version, k.max_version] for k in r0.api_keys],
        }

    out.step("v127", unsupported)
    return out


@scenario
def unsupported_versions_close(bootstrap: str) -> Outcome:
    """A request below a 4.x broker's minimum (Produce v2, Fetch v3, ListOffsets v0...) closes
    the connection without an answer; a supported one on a fresh connection still works."""
    cases = {
        "Produce v2": (0, 2),
        "Fetch v3": (1, 3),
        "ListOffsets v0": (2, 0),
        "CreateTopics v1": (19, 1),
        "Metadata v14": (3, 14),
        "unknown key 999": (999, 0),
    }
    out = Steps()
    for label, (key, version) in cases.items():
        with connect(bootstrap) as c:
            from protocol._generated.request_header import RequestHeader

            hdr = RequestHeader(
                request_api_key=key,
                request_api_version=version,
                correlation_id=7,
                client_id="compat",
            ).encode(1)
            out.step(label, lambda: "closed" if c.closes_after(hdr + b"\x00" * 16) else "answered")
    with connect(bootstrap) as c:
        md = metadata(c, ["unsupported_versions_close-none"], version=0)
        out.step("Metadata v0 afterwards", lambda: norm(md, frozenset({"brokers"})))
    return out


@scenario
def metadata_auto_create(bootstrap: str) -> Outcome:
    out = Steps()
    with connect(bootstrap) as c:
        t = metadata(c, ["metadata_auto_create-off"], auto_create=False).topics[0]
        out.step("auto_create_false", lambda: err(t.error_code))
        first = metadata(c, ["metadata_auto_create-on"], auto_create=True).topics[0]
        out.step(
            "first_answer",
            lambda: (
                {
                    "error_code": err(first.error_code),
                    "partitions": len(first.partitions),
                }
            ),
        )
        t = wait_for_leaders(c, "metadata_auto_create-on")
        out.step("after_creation", lambda: norm(t))
        bad = metadata(c, ["metadata auto create bad"], auto_create=True).topics[0]
        out.step("invalid_name", lambda: err(bad.error_code))
        dots = metadata(c, [".."], auto_create=True).topics[0]
        out.step("dotdot", lambda: err(dots.error_code))
        # Metadata v3 (older clients) for the same topic; topic name list in the same order.
        old = metadata(c, ["metadata_auto_create-on", "metadata_auto_create-off"], version=3)
        out.step("v3", lambda: norm(old, frozenset({"brokers"})))
    return out


@scenario
def metadata_shape(bootstrap: str) -> Outcome:
    """Brokers, controller, partition leaders/epochs/replicas at several Metadata versions."""
    out = Steps()
    with connect(bootstrap) as c:
        create_topic(c, "metadata_shape-3p", 3)

        def shape(v: int) -> Any:
            d = norm(metadata(c, ["metadata_shape-3p"], version=v))
            for b in d["brokers"]:
                b["port"] = "<port>"
            return d

        for v in (0, 1, 4, 7, 9, 10, 12, 13):
            out.step(f"v{v}", lambda: shape(v))
        every = metadata(c, None, version=12)
        out.step(
            "all_topics_contains_it", lambda: "metadata_shape-3p" in [t.name for t in every.topics]
        )
    return out


# --- scenarios: produce and fetch ---------------------------------------------------------------


@scenario
def produce_basics(bootstrap: str) -> Outcome:
    out = Steps()
    topic = "produce_basics"
    with connect(bootstrap) as c:
        create_topic(c, topic, 2)
        batch = build_batch(simple_records(3), base_timestamp=T0)
        for v in (3, 5, 7, 8, 9, 10, 11, 12):
            out.step(f"v{v}", lambda: produce_partition(c, topic, batch, version=v))
        out.step("partition_1", lambda: produce_partition(c, topic, batch, partition=1))
        out.step("unknown_partition", lambda: produce_partition(c, topic, batch, partition=7))
        out.step("unknown_topic", lambda: produce_partition(c, "produce_basics-nope", batch))
        out.step(
            "corrupt_crc",
            lambda: produce_partition(c, topic, build_batch(simple_records(2), corrupt_crc=True)),
        )
        out.step("acks_2", lambda: produce_partition(c, topic, batch, acks=2))
        out.step("acks_1", lambda: produce_partition(c, topic, batch, acks=1))
        # acks=0: no answer; the next request on the connection is answered normally.
        req = ProduceRequest(
            acks=0,
            timeout_ms=1000,
            topic_data=[
                ProduceRequest.TopicProduceData(
                    name=topic,
                    partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)],
                )
            ],
        )
        c.send_only(req, 9)
        out.step("after_acks_0", lambda: produce_partition(c, topic, batch))
        big = build_batch([Rec(value=b"x" * (1024 * 1024 + 100))])
        out.step("too_large", lambda: produce_partition(c, topic, big))
        gz = build_batch(simple_records(4, "gz"), compression=1)
        out.step("gzip", lambda: produce_partition(c, topic, gz))
        f = fetch(c, topic, 0).responses[0].partitions[0]
        out.step(
            "log",
            lambda: (
                [
                    [
                        b["base_offset"],
                        b["records_count"],
                        b["attributes"],
                        [r["value"] for r in b.get("records", [])],
                    ]
                    for b in parse_batches(f.records)
                ]
            ),
        )
        out.step("high_watermark", lambda: f.high_watermark)
    return out


@scenario
def fetch_edges(bootstrap: str) -> Outcome:
    out = Steps()
    topic = "fetch_edges"
    with connect(bootstrap) as c:
        create_topic(c, topic)
        create_topic(c, "fetch_edges-empty")
        out.step("empty_topic_at_0", lambda: fetch_one(c, "fetch_edges-empty", 0))
        out.step("empty_topic_at_1", lambda: fetch_one(c, "fetch_edges-empty", 1))
        out.step(
            "produce_a", lambda: produce_partition(c, topic, build_batch(simple_records(3, "a")))
        )
        out.step(
            "produce_b", lambda: produce_partition(c, topic, build_batch(simple_records(2, "b")))
        )
        out.step("at_0", lambda: fetch_one(c, topic, 0))
        out.step("mid_first_batch", lambda: fetch_one(c, topic, 1))
        out.step("mid_second_batch", lambda: fetch_one(c, topic, 4))
        out.step("at_high_watermark", lambda: fetch_one(c, topic, 5))
        out.step("past_high_watermark", lambda: fetch_one(c, topic, 6))
        out.step("negative_offset", lambda: fetch_one(c, topic, -1))
        out.step("partition_max_bytes_10", lambda: fetch_one(c, topic, 0, partition_max_bytes=10))
        out.step("max_bytes_1", lambda: fetch_one(c, topic, 0, max_bytes=1))
        out.step("partition_max_bytes_0", lambda: fetch_one(c, topic, 0, partition_max_bytes=0))
        out.step("unknown_partition", lambda: fetch_one(c, topic, 0, partition=3))
        out.step("unknown_topic", lambda: fetch_one(c, "fetch_edges-nope", 0))
    return out


@scenario
def fetch_versions(bootstrap: str) -> Outcome:
    """The same fetch at the versions clients use; v13+ addresses the topic by id."""
    out = Steps()
    topic = "fetch_versions"
    with connect(bootstrap) as c:
        create_topic(c, topic)
        produce_partition(c, topic, build_batch(simple_records(2)))
        produce_partition(c, topic, build_batch(simple_records(1, "z")))
        tid = metadata(c, [topic]).topics[0].topic_id
        for v in (4, 7, 11, 12, 13, 15, 16, 17, 18):
            kw: dict[str, Any] = {"version": v}
            if v >= 13:
                kw["topic_id"] = tid
            out.step(f"v{v}", lambda: fetch_one(c, topic, 1, **kw))
        out.step(
            "v13_unknown_topic_id", lambda: fetch_one(c, "", 0, version=13, topic_id=uuid.uuid4())
        )
    return out


@scenario
def log_append_time(bootstrap: str) -> Outcome:
    out = Steps()
    topic = "log_append_time"
    with connect(bootstrap) as c:
        create_topic(c, topic, configs={"message.timestamp.type": "LogAppendTime"})
        before = int(time.time() * 1000)
        p = produce_partition(c, topic, build_batch(simple_records(3)))
        after = int(time.time() * 1000)
        lat = p.pop("log_append_time_ms")
        out.step("produce", lambda: p)
        out.step("log_append_time_in_window", lambda: before - 1000 <= lat <= after + 1000)
        f = fetch(c, topic, 0)
        part = f.responses[0].partitions[0]
        batches = parse_batches(part.records)
        out.step(
            "fetched_max_timestamp_equals_append_time",
            lambda: ([b["max_timestamp"] == lat for b in batches]),
        )
        out.step("fetch", lambda: fetch_partition_outcome(part, log_append_time=True))
        lo = list_offsets(c, topic, [-1, -2, -3, 0])
        for e in lo:
            if e["timestamp"] == lat:
                e["timestamp"] = "<log append time>"
        out.step("list_offsets", lambda: lo)
    return out


@scenario
def list_offsets_by_time(bootstrap: str) -> Outcome:
    out = Steps()
    topic = "list_offsets_by_time"
    with connect(bootstrap) as c:
        create_topic(c, topic)
        create_topic(c, "list_offsets_by_time-empty")
        # batch 1: offsets 0-2 at T0+1000, +2000, +3000; batch 2: offsets 3-4 at +5000, +4000.
        b1 = build_batch(
            [
                Rec(value=b"a", timestamp=T0 + 1000),
                Rec(value=b"b", timestamp=T0 + 2000),
                Rec(value=b"c", timestamp=T0 + 3000),
            ],
            base_timestamp=T0 + 1000,
        )
        b2 = build_batch(
            [Rec(value=b"d", timestamp=T0 + 5000), Rec(value=b"e", timestamp=T0 + 4000)],
            base_timestamp=T0 + 5000,
        )
        produce_partition(c, topic, b1)
        produce_partition(c, topic, b2)
        queries = [
            T0,
            T0 + 1000,
            T0 + 1500,
            T0 + 3000,
            T0 + 3500,
            T0 + 4000,
            T0 + 4500,
            T0 + 5000,
            T0 + 5001,
            0,
            -1,
            -2,
            -3,
            -4,
            -5,
        ]
        for v in (1, 4, 6, 7, 8, 9, 10, 11):
            qs = [q for q in queries if (q != -3 or v >= 7) and (q not in (-4, -5) or v >= 8)]
            out.step(f"v{v}", lambda: list_offsets(c, topic, qs, version=v))
        out.step(
            "empty_topic",
            lambda: list_offsets(c, "list_offsets_by_time-empty", [-1, -2, -3, 0, T0]),
        )
        out.step(
            "read_committed", lambda: list_offsets(c, topic, [-1, -2, T0 + 1500], isolation_level=1)
        )
        out.step("unknown_partition", lambda: list_offsets(c, topic, [-1], partition=5))
        out.step("unknown_topic", lambda: list_offsets(c, "list_offsets_by_time-nope", [-1]))
        out.step("unsupported_spec_-6", lambda: list_offsets(c, topic, [-6], version=11))
    return out


@scenario
def idempotent_duplicate(bootstrap: str) -> Outcome:
    """Raw idempotent produce: a resent batch is acknowledged with the original base offset."""
    out = Steps()
    topic = "idempotent_duplicate"
    with connect(bootstrap) as c:
        create_topic(c, topic)
        ipid = init_producer_id(c)
        out.step("init_producer_id", lambda: norm(ipid, frozenset({"producer_id"})))
        pid, epoch = ipid.producer_id, ipid.producer_epoch
        out.step("producer_id_assigned", lambda: pid >= 0)

        def batch(seq: int, n: int, prefix: str, ep: int = epoch) -> bytes:
            return build_batch(
                simple_records(n, prefix), producer_id=pid, producer_epoch=ep, base_sequence=seq
            )

        b0 = batch(0, 3, "a")
        out.step("seq0", lambda: produce_partition(c, topic, b0))
        out.step("seq0_again", lambda: produce_partition(c, topic, b0))
        b3 = batch(3, 2, "b")
        out.step("seq3", lambda: produce_partition(c, topic, b3))
        out.step("seq0_again_after_seq3", lambda: produce_partition(c, topic, b0))
        out.step("seq3_again", lambda: produce_partition(c, topic, b3))
        out.step("gap_seq9", lambda: produce_partition(c, topic, batch(9, 1, "c")))
        out.step("seq5", lambda: produce_partition(c, topic, batch(5, 1, "d")))
        out.step(
            "new_epoch_seq0", lambda: produce_partition(c, topic, batch(0, 1, "f", ep=epoch + 1))
        )
        out.step(
            "old_epoch_after_bump", lambda: produce_partition(c, topic, batch(6, 1, "e", ep=epoch))
        )
        out.step(
            "newer_epoch_seq5", lambda: produce_partition(c, topic, batch(5, 1, "g", ep=epoch + 2))
        )
        out.step(
            "new_epoch_seq1", lambda: produce_partition(c, topic, batch(1, 1, "h", ep=epoch + 1))
        )
        unknown = build_batch(
            simple_records(1, "u"), producer_id=pid + 1000, producer_epoch=0, base_sequence=7
        )
        out.step("unknown_pid_seq7", lambda: produce_partition(c, topic, unknown))
        f = fetch(c, topic, 0).responses[0].partitions[0]
        out.step(
            "log",
            lambda: (
                [
                    {
                        "base_offset": b["base_offset"],
                        "count": b["records_count"],
                        "producer_epoch": b["producer_epoch"],
                        "base_sequence": b["base_sequence"],
                        "pid_is_ours": b["producer_id"] == pid,
                    }
                    for b in parse_batches(f.records)
                ]
            ),
        )
        out.step("high_watermark", lambda: f.high_watermark)
    return out


@scenario
def delete_records(bootstrap: str) -> Outcome:
    out = Steps()
    topic = "delete_records"
    with connect(bootstrap) as c:
        create_topic(c, topic)
        produce_partition(c, topic, build_batch(simple_records(3)))
        produce_partition(c, topic, build_batch(simple_records(3, "w")))

        def dr(offset: int, partition: int = 0, name: str = topic) -> Any:
            req = DeleteRecordsRequest(
                topics=[
                    DeleteRecordsRequest.DeleteRecordsTopic(
                        name=name,
                        partitions=[
                            DeleteRecordsRequest.DeleteRecordsPartition(
                                partition_index=partition, offset=offset
                            )
                        ],
                    )
                ],
                timeout_ms=30000,
            )
            return norm(c.request(req, 2).topics[0].partitions[0])

        out.step("to_1", lambda: dr(1))
        out.step("fetch_0", lambda: fetch_one(c, topic, 0))
        out.step("fetch_1", lambda: fetch_one(c, topic, 1))
        out.step("list_offsets", lambda: list_offsets(c, topic, [-2, -1, 0, -4]))
        out.step("to_4_mid_second_batch", lambda: dr(4))
        out.step("fetch_4", lambda: fetch_one(c, topic, 4))
        out.step("fetch_3", lambda: fetch_one(c, topic, 3))
        out.step("to_hw_-1", lambda: dr(-1))
        out.step("beyond_hw", lambda: dr(100))
        out.step("backwards", lambda: dr(2))
        out.step("unknown_partition", lambda: dr(0, partition=4))
        out.step("unknown_topic", lambda: dr(0, name="delete_records-nope"))
    return out


# --- scenarios: topic administration ------------------------------------------------------------


def _create_raw(
    c: Connection,
    topics: list[CreateTopicsRequest.CreatableTopic],
    validate_only: bool = False,
    version: int = 7,
) -> list[dict[str, Any]]:
    req = CreateTopicsRequest(topics=topics, timeout_ms=30000, validate_only=validate_only)
    res = c.request(req, version)
    out = []
    for t in res.topics:
        d = norm(t)
        if d.get("configs") is not None:
            d["configs"] = {
                x.pop("name"): name_config_entry(x)
                for x in sorted(d["configs"], key=lambda x: x["name"])
            }
        out.append(d)
    return out


def _ct(
    name: str,
    partitions: int = 1,
    rf: int = 1,
    configs: dict[str, str | None] | None = None,
    assignments: dict[int, list[int]] | None = None,
) -> CreateTopicsRequest.CreatableTopic:
    return CreateTopicsRequest.CreatableTopic(
        name=name,
        num_partitions=partitions,
        replication_factor=rf,
        configs=[
            CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
            for k, v in (configs or {}).items()
        ],
        assignments=[
            CreateTopicsRequest.CreatableReplicaAssignment(partition_index=p, broker_ids=ids)
            for p, ids in (assignments or {}).items()
        ],
    )


@scenario
def create_topics_raw(bootstrap: str) -> Outcome:
    """CreateTopics v7 answers: errors per topic, and the full config list of a new topic."""
    out = Steps()
    with connect(bootstrap) as c:
        out.step(
            "with_configs",
            lambda: _create_raw(
                c,
                [
                    _ct(
                        "create_topics_raw-a",
                        3,
                        configs={
                            "cleanup.policy": "compact",
                            "retention.ms": "12345",
                            "max.message.bytes": "2000000",
                        },
                    )
                ],
            ),
        )
        out.step(
            "validate_only",
            lambda: _create_raw(c, [_ct("create_topics_raw-v", 2)], validate_only=True),
        )
        out.step(
            "validate_only_left_nothing",
            lambda: err(metadata(c, ["create_topics_raw-v"]).topics[0].error_code),
        )
        out.step("duplicate", lambda: _create_raw(c, [_ct("create_topics_raw-a")]))
        out.step(
            "duplicate_validate_only",
            lambda: _create_raw(c, [_ct("create_topics_raw-a")], validate_only=True),
        )
        out.step("defaults_-1", lambda: _create_raw(c, [_ct("create_topics_raw-d", -1, -1)]))
        for label, name in {
            "space": "create_topics_raw bad",
            "dot": ".",
            "dotdot": "..",
            "too_long": "create_topics_raw-" + "x" * 240,
            "empty": "",
            "slash": "create_topics_raw/x",
        }.items():
            out.step(
                f"name_{label}",
                lambda: (
                    [
                        {"name_ok": t["name"] == name, "error_code": t["error_code"]}
                        for t in _create_raw(c, [_ct(name)])
                    ]
                ),
            )
        out.step("zero_partitions", lambda: _create_raw(c, [_ct("create_topics_raw-z", 0)]))
        out.step("rf_2", lambda: _create_raw(c, [_ct("create_topics_raw-rf", 1, 2)]))
        out.step("rf_0", lambda: _create_raw(c, [_ct("create_topics_raw-rf0", 1, 0)]))
        out.step(
            "unknown_config",
            lambda: _create_raw(c, [_ct("create_topics_raw-uc", configs={"nope": "1"})]),
        )
        out.step(
            "bad_config_value",
            lambda: _create_raw(c, [_ct("create_topics_raw-bv", configs={"retention.ms": "abc"})]),
        )
        out.step(
            "null_config_value",
            lambda: _create_raw(c, [_ct("create_topics_raw-nv", configs={"retention.ms": None})]),
        )
        out.step(
            "assignment",
            lambda: _create_raw(
                c, [_ct("create_topics_raw-as", -1, -1, assignments={0: [1], 1: [1]})]
            ),
        )
        out.step(
            "assignment_bad_broker",
            lambda: _create_raw(c, [_ct("create_topics_raw-ab", -1, -1, assignments={0: [42]})]),
        )
        out.step(
            "same_name_twice_in_request",
            lambda: _create_raw(c, [_ct("create_topics_raw-tw"), _ct("create_topics_raw-tw")]),
        )
        out.step("v2", lambda: _create_raw(c, [_ct("create_topics_raw-old")], version=2))
        out.step("v4_duplicate", lambda: _create_raw(c, [_ct("create_topics_raw-old")], version=4))
    return out


@scenario
def partitions_and_delete(bootstrap: str) -> Outcome:
    out = Steps()
    with connect(bootstrap) as c:
        create_topic(c, "partitions_and_delete", 2)

        def cp(name: str, count: int, validate_only: bool = False) -> Any:
            t = CreatePartitionsRequest.CreatePartitionsTopic(name=name, count=count)
            t.assignments = None  # null = let the broker place them
            req = CreatePartitionsRequest(topics=[t], timeout_ms=30000, validate_only=validate_only)
            return norm(c.request(req, 3).results)

        out.step("to_5_validate_only", lambda: cp("partitions_and_delete", 5, validate_only=True))
        out.step("to_5", lambda: cp("partitions_and_delete", 5))
        out.step(
            "partitions_after",
            lambda: len(wait_for_leaders(c, "partitions_and_delete", 5).partitions),
        )
        out.step("to_3_decrease", lambda: cp("partitions_and_delete", 3))
        out.step("to_5_same", lambda: cp("partitions_and_delete", 5))
        out.step("unknown_topic", lambda: cp("partitions_and_delete-nope", 3))

        def dt(names: list[str], version: int = 6) -> Any:
            if version >= 6:
                req = DeleteTopicsRequest(
                    topics=[DeleteTopicsRequest.DeleteTopicState(name=n) for n in names],
                    timeout_ms=30000,
                )
            else:
                req = DeleteTopicsRequest(topic_names=names, timeout_ms=30000)
            return norm(c.request(req, version).responses)

        out.step("delete", lambda: dt(["partitions_and_delete"]))
        out.step("delete_again", lambda: dt(["partitions_and_delete"]))
        out.step("delete_unknown_v4", lambda: dt(["partitions_and_delete-nope"], version=4))
        create_topic(c, "partitions_and_delete-b")
        out.step("delete_v1", lambda: dt(["partitions_and_delete-b"], version=1))
        deadline = time.monotonic() + 10
        while True:
            gone = metadata(c, ["partitions_and_delete", "partitions_and_delete-b"])
            codes = [err(t.error_code) for t in gone.topics]
            if all(x == "UNKNOWN_TOPIC_OR_PARTITION" for x in codes) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        out.step("metadata_after_delete", lambda: codes)
    return out


@scenario
def admin_confluent(bootstrap: str) -> Outcome:
    """Topic administration through librdkafka's AdminClient (what error codes surface)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        NewPartitions,
        NewTopic,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    out = Steps()

    def result(futs: dict[str, Any]) -> dict[str, str]:
        res = {}
        for k, f in futs.items():
            try:
                f.result(30)
                res[k] = "OK"
            except KafkaException as e:
                res[k] = e.args[0].name()
        return res

    out.step(
        "create",
        lambda: result(
            admin.create_topics(
                [
                    NewTopic("admin_confluent-a", 2, 1, config={"retention.ms": "60000"}),
                    NewTopic("admin_confluent-b", 1, 1),
                ],
                operation_timeout=30,
            )
        ),
    )
    out.step(
        "duplicate", lambda: result(admin.create_topics([NewTopic("admin_confluent-a", 2, 1)]))
    )
    out.step(
        "validate_only",
        lambda: result(
            admin.create_topics([NewTopic("admin_confluent-v", 1, 1)], validate_only=True)
        ),
    )
    out.step(
        "invalid_name", lambda: result(admin.create_topics([NewTopic("admin confluent", 1, 1)]))
    )
    out.step("bad_rf", lambda: result(admin.create_topics([NewTopic("admin_confluent-rf", 1, 3)])))
    out.step(
        "bad_config",
        lambda: result(
            admin.create_topics(
                [NewTopic("admin_confluent-c", 1, 1, config={"cleanup.policy": "sideways"})]
            )
        ),
    )
    md = eventually(
        lambda: admin.list_topics(timeout=10),
        lambda m: "admin_confluent-a" in m.topics and "admin_confluent-b" in m.topics,
    )
    out.step("listed", lambda: sorted(t for t in md.topics if t.startswith("admin_confluent")))
    out.step("partitions", lambda: {t: len(md.topics[t].partitions) for t in out["listed"]})
    out.step(
        "create_partitions",
        lambda: result(admin.create_partitions([NewPartitions("admin_confluent-a", 4)])),
    )
    out.step(
        "shrink_partitions",
        lambda: result(admin.create_partitions([NewPartitions("admin_confluent-a", 1)])),
    )
    out.step(
        "delete",
        lambda: result(
            admin.delete_topics(["admin_confluent-a", "admin_confluent-b"], operation_timeout=30)
        ),
    )
    out.step("delete_unknown", lambda: result(admin.delete_topics(["admin_confluent-nope"])))
    return out


# --- scenarios: configs -------------------------------------------------------------------------

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4


def _describe(
    c: Connection,
    resources: list[tuple[int, str, list[str] | None]],
    *,
    synonyms: bool = False,
    version: int = 4,
) -> list[dict[str, Any]]:
    req = DescribeConfigsRequest(
        resources=[
            DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=t, resource_name=n, configuration_keys=keys
            )
            for t, n, keys in resources
        ],
        include_synonyms=synonyms,
        include_documentation=False,
    )
    for r, (_, _, keys) in zip(req.resources, resources, strict=True):
        if keys is None:
            r.configuration_keys = None  # null = all
    res = c.request(req, version)
    out = []
    for r in res.results:
        d = norm(r)
        d["configs"] = {
            x.pop("name"): name_config_entry(x)
            for x in sorted(d["configs"], key=lambda x: x["name"])
        }
        out.append(d)
    return out


@scenario
def describe_configs_topic(bootstrap: str) -> Outcome:
    out = Steps()
    topic = "describe_configs_topic"
    with connect(bootstrap) as c:
        create_topic(
            c,
            topic,
            configs={
                "retention.ms": "86400000",
                "cleanup.policy": "compact",
                "min.insync.replicas": "1",
            },
        )
        out.step(
            "all_v4_synonyms", lambda: _describe(c, [(TOPIC_RESOURCE, topic, None)], synonyms=True)
        )
        out.step("all_v1", lambda: _describe(c, [(TOPIC_RESOURCE, topic, None)], version=1))
        out.step(
            "all_v3_no_synonyms", lambda: _describe(c, [(TOPIC_RESOURCE, topic, None)], version=3)
        )
        out.step(
            "some_keys",
            lambda: _describe(
                c,
                [(TOPIC_RESOURCE, topic, ["retention.ms", "segment.bytes", "no.such.key"])],
                synonyms=True,
            ),
        )
        out.step(
            "unknown_topic",
            lambda: _describe(c, [(TOPIC_RESOURCE, "describe_configs_topic-nope", None)]),
        )
        out.step("empty_name", lambda: _describe(c, [(TOPIC_RESOURCE, "", None)]))
    return out


# Broker configs whose values do not depend on ports, paths or the host.
BROKER_KEYS = [
    "num.partitions",
    "default.replication.factor",
    "auto.create.topics.enable",
    "log.retention.hours",
    "log.retention.ms",
    "log.segment.bytes",
    "message.max.bytes",
    "log.cleanup.policy",
    "compression.type",
    "log.message.timestamp.type",
    "offsets.topic.replication.factor",
    "offsets.retention.minutes",
    "group.initial.rebalance.delay.ms",
    "transaction.state.log.replication.factor",
    "min.insync.replicas",
    "delete.topic.enable",
    "node.id",
    "broker.id",
    "process.roles",
    "log.retention.check.interval.ms",
    "socket.request.max.bytes",
    "replica.fetch.max.bytes",
    "fetch.max.bytes",
    "group.min.session.timeout.ms",
    "group.max.session.timeout.ms",
    "sasl.jaas.config",
]


@scenario
def describe_configs_broker(bootstrap: str) -> Outcome:
    out = Steps()
    with connect(bootstrap) as c:
        out.step(
            "selected", lambda: _describe(c, [(BROKER_RESOURCE, "1", BROKER_KEYS)], synonyms=True)
        )
        every = _describe(c, [(BROKER_RESOURCE, "1", None)])[0]
        out.step("all_error", lambda: every["error_code"])
        out.step("all_has_keys", lambda: {k: k in every["configs"] for k in BROKER_KEYS})
        # every key the broker defines (issue 27: kafkawire listed 203 of Kafka's 340); keys of
        # the properties file Kafka does not define, and listener overrides, depend on the
        # harness's file and are left out
        out.step("all_defined_keys", lambda: sorted(
            k for k, e in every["configs"].items()
            if e["config_type"] != 0 and not k.startswith("listener.name.")))
        out.step(
            "unknown_broker",
            lambda: (
                [
                    {k: v for k, v in r.items() if k != "configs"}
                    for r in _describe(c, [(BROKER_RESOURCE, "42", None)])
                ]
            ),
        )
        out.step(
            "broker_logger", lambda: [r["error_code"] for r in _describe(c, [(8, "1", ["root"])])]
        )
    return out


# --- scenarios: real clients --------------------------------------------------------------------


@scenario
def client_kafka_python(bootstrap: str) -> Outcome:
    """kafka-python producer (idempotent by default) + group consumer + admin describe."""
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

    topic = "client_kafka_python"
    out = Steps()
    with connect(bootstrap) as c:  # topic administration is compared elsewhere
        create_topic(c, topic, 2)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="compat-admin")
    try:
        producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
        metas = [
            producer.send(
                topic,
                key=f"k{i}".encode(),
                value=f"v{i}".encode(),
                partition=i % 2,
                timestamp_ms=T0 + i,
            ).get(30)
            for i in range(6)
        ]
        producer.close()
        out.step("produced", lambda: [[m.partition, m.offset, m.timestamp] for m in metas])
        consumer = KafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id="client_kafka_python-g",
            client_id="compat-consumer",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            consumer_timeout_ms=15000,
        )
        got = []
        for msg in consumer:
            got.append(
                [
                    msg.partition,
                    msg.offset,
                    msg.key.decode(),
                    msg.value.decode(),
                    msg.timestamp,
                    msg.timestamp_type,
                ]
            )
            if len(got) == 6:
                break
        out.step("consumed", lambda: sorted(got))
        consumer.commit()
        out.step(
            "committed", lambda: {p: consumer.committed(TopicPartition(topic, p)) for p in (0, 1)}
        )
        out.step(
            "end_offsets",
            lambda: (
                {
                    tp.partition: o
                    for tp, o in consumer.end_offsets(
                        [TopicPartition(topic, 0), TopicPartition(topic, 1)]
                    ).items()
                }
            ),
        )
        out.step(
            "offsets_for_times",
            lambda: (
                {
                    tp.partition: (None if o is None else [o.offset, o.timestamp])
                    for tp, o in consumer.offsets_for_times(
                        {TopicPartition(topic, 0): T0 + 1, TopicPartition(topic, 1): T0 + 100}
                    ).items()
                }
            ),
        )
        g = "client_kafka_python-g"

        def describe() -> dict[str, Any]:
            d = admin.describe_groups([g])[g]
            members = [
                {k: m.get(k) for k in ("client_id", "group_instance_id")} for m in d["members"]
            ]
            return {
                "state": d["group_state"],
                "protocol_type": d["protocol_type"],
                "protocol": d["protocol_data"],
                "members": members,
                "error": d["error"],
            }

        out.step("group_while_member", lambda: describe())
        consumer.close()
        out.step("group_after_close", lambda: describe())
        out.step(
            "listed",
            lambda: sorted(
                [x["group_id"], x["protocol_type"], x["group_state"], x.get("group_type")]
                for x in admin.list_groups()
                if x["group_id"].startswith("client_kafka_python")
            ),
        )
        offs = admin.list_group_offsets(g)[g]
        out.step(
            "group_offsets",
            lambda: sorted(
                [tp.partition, om.offset, om.metadata, om.leader_epoch] for tp, om in offs.items()
            ),
        )
        unknown = admin.describe_groups(["client_kafka_python-nope"])["client_kafka_python-nope"]
        out.step(
            "unknown_group",
            lambda: (
                {
                    "state": unknown["group_state"],
                    "error": (unknown["error"] or "").split(":")[0],
                }
            ),
        )
    finally:
        admin.close()
    return out


@scenario
def client_confluent(bootstrap: str) -> Outcome:
    """librdkafka idempotent producer + group consumer, offsets and watermarks."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic = "client_confluent"
    out = Steps()
    with connect(bootstrap) as c:  # topic administration is compared elsewhere
        create_topic(c, topic, 2)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 5,
            "compression.type": "lz4",
        }
    )
    delivered: list[list[Any]] = []

    def cb(e: Any, m: Any) -> None:
        delivered.append(
            [None if e is None else e.name(), m.partition(), m.offset(), m.timestamp()[1]]
        )

    for i in range(6):
        producer.produce(
            topic, key=f"k{i}", value=f"v{i}", partition=i % 2, timestamp=T0 + i, on_delivery=cb
        )
    producer.flush(30)
    out.step("delivered", lambda: sorted(delivered, key=lambda d: (d[1], d[2])))
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "client_confluent-g",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    got: list[list[Any]] = []
    deadline = time.monotonic() + 30
    while len(got) < 6 and time.monotonic() < deadline:
        m = consumer.poll(1.0)
        if m is None or m.error():
            continue
        got.append(
            [
                m.partition(),
                m.offset(),
                (m.key() or b"").decode(),
                (m.value() or b"").decode(),
                list(m.timestamp()),
            ]
        )
    out.step("consumed", lambda: sorted(got))
    consumer.commit(asynchronous=False)
    out.step(
        "committed",
        lambda: sorted(
            [tp.partition, tp.offset]
            for tp in consumer.committed(
                [TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10
            )
        ),
    )
    out.step(
        "watermarks",
        lambda: (
            [
                list(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10))
                for p in (0, 1)
            ]
        ),
    )
    out.step(
        "offsets_for_times",
        lambda: sorted(
            [tp.partition, tp.offset]
            for tp in consumer.offsets_for_times(
                [TopicPartition(topic, 0, T0 + 1), TopicPartition(topic, 1, T0 + 100)], timeout=10
            )
        ),
    )
    consumer.close()
    return out


# --- scenarios: fetch sessions, epochs, cluster -------------------------------------------------


def _session_fetch(c: Connection, topic: str, topic_id: Any, session_id: int, epoch: int,
                   parts: dict[int, int], version: int = 12,
                   forget: list[int] | None = None, max_bytes: int = 50 << 20) -> Any:
    topics = [FetchRequest.FetchTopic(topic=topic, topic_id=topic_id, partitions=[
        FetchRequest.FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=1 << 20)
        for p, o in parts.items()])] if parts else []
    forgotten = [FetchRequest.ForgottenTopic(topic=topic, topic_id=topic_id, partitions=forget)
                 ] if forget else []
    return c.request(FetchRequest(
        max_wait_ms=100, min_bytes=1, max_bytes=max_bytes, session_id=session_id,
        session_epoch=epoch, topics=topics, forgotten_topics_data=forgotten), version)


def _session_summary(r: Any) -> dict[str, Any]:
    return {
        "error_code": err(r.error_code),
        "session_id_set": r.session_id != 0,
        "partitions": sorted(
            [p.partition_index, err(p.error_code), p.high_watermark,
             [b["base_offset"] for b in parse_batches(p.records)]]
            for t in r.responses for p in t.partitions),
    }


@scenario
def fetch_sessions(bootstrap: str) -> Outcome:
    """KIP-227 sessions: creation (epoch 0), incremental answers with only the partitions that
    have news, wrong epoch / unknown id / topic-id mismatch errors, FINAL (-1) and full
    fetches closing a session, forgotten partitions (by name v12, by topic id v16)."""
    out = Steps()
    topic = "fetch_sessions"
    with connect(bootstrap) as c:
        created = create_topic(c, topic, 2)
        tid = created.topic_id if created is not None else None
        produce_partition(c, topic, build_batch(simple_records(2)))

        def req(session_id: int, epoch: int, parts: dict[int, int], version: int = 12,
                forget: list[int] | None = None) -> Any:
            return _session_fetch(c, topic, tid, session_id, epoch, parts, version, forget)

        full = req(0, 0, {0: 0, 1: 0})
        out.step("new_session", lambda: _session_summary(full))
        sid = full.session_id
        if sid:
            out.step("incremental_nothing_new", lambda: _session_summary(req(sid, 1, {0: 2})))
            produce_partition(c, topic, build_batch(simple_records(1, "p1")), partition=1)
            out.step("incremental_new_data_p1", lambda: _session_summary(req(sid, 2, {})))
            out.step("wrong_epoch", lambda: _session_summary(req(sid, 7, {})))
            out.step("unknown_session",
                     lambda: _session_summary(req(sid ^ 0x5A5A5A5A or 1, 1, {})))
            out.step("topic_ids_on_a_name_session",
                     lambda: _session_summary(req(sid, 3, {}, version=16)))
            out.step("forget_p0", lambda: _session_summary(req(sid, 3, {}, forget=[0])))
            out.step("close_session", lambda: _session_summary(req(sid, -1, {0: 0})))
            out.step("closed_session", lambda: _session_summary(req(sid, 4, {})))
        else:  # a broker declining sessions: the same data, so that "sessionless" compares
            produce_partition(c, topic, build_batch(simple_records(1, "p1")), partition=1)
        out.step("never_issued_session_id", lambda: _session_summary(req(42424242, 1, {})))
        out.step("sessionless", lambda: _session_summary(req(0, -1, {0: 0, 1: 0})))
        _topic_id_session(out, req, produce=lambda p: produce_partition(
            c, topic, build_batch(simple_records(1, f"x{p}")), partition=p))
        _round_robin(out, c)
    return out


def _round_robin(out: Steps, c: Connection) -> None:
    """Room for one batch per answer (max_bytes 1, KIP-74): which partition each incremental
    fetch serves when no offset moves (Kafka sends partitions that returned data to the back)."""
    topic = "fetch_sessions_rr"
    created = create_topic(c, topic, 3)
    tid = created.topic_id if created is not None else None
    for p in range(3):
        produce_partition(c, topic, build_batch(simple_records(2, f"r{p}")), partition=p)

    def served(session_id: int, epoch: int, parts: dict[int, int]) -> Any:
        r = _session_fetch(c, topic, tid, session_id, epoch, parts, 16, max_bytes=1)
        return r, sorted(p.partition_index for t in r.responses for p in t.partitions
                         if parse_batches(p.records))

    full, first = served(0, 0, {0: 0, 1: 0, 2: 0})
    order = [first]
    if full.session_id:
        order += [served(full.session_id, e, {})[1] for e in (1, 2, 3, 4)]
    out.step("round_robin_served", lambda: order)


def _topic_id_session(out: Steps, req: Any, produce: Any) -> None:
    """The v16 part of ``fetch_sessions``: a session keyed by topic id."""
    full = req(0, 0, {0: 2, 1: 1}, version=16)
    out.step("v16_new_session", lambda: _session_summary(full))
    sid = full.session_id
    if not sid:
        return
    out.step("v16_forget_p0", lambda: _session_summary(req(sid, 1, {}, 16, forget=[0])))
    produce(0)
    produce(1)
    out.step("v16_only_p1_answered", lambda: _session_summary(req(sid, 2, {}, 16)))
    out.step("v16_add_p0_back", lambda: _session_summary(req(sid, 3, {0: 2}, 16)))
    out.step("v12_on_a_topic_id_session", lambda: _session_summary(req(sid, 4, {}, 12)))
    again = req(sid, 0, {1: 2}, version=16)  # a full fetch naming it: closed, a new one made
    out.step("v16_full_names_old_session", lambda: {
        **_session_summary(again), "new_id": again.session_id not in (0, sid)})
    out.step("v16_old_session_gone", lambda: _session_summary(req(sid, 4, {}, 16)))
    new = again.session_id
    if new:
        out.step("v16_forget_everything",
                 lambda: _session_summary(req(new, 1, {}, 16, forget=[1])))
        out.step("v16_after_forget_everything", lambda: _session_summary(req(new, 2, {}, 16)))


@scenario
def epochs_and_cluster(bootstrap: str) -> Outcome:
    """OffsetForLeaderEpoch (KIP-320), DescribeCluster, DescribeTopicPartitions."""
    from protocol._generated.describe_cluster_request import DescribeClusterRequest
    from protocol._generated.describe_topic_partitions_request import (
        DescribeTopicPartitionsRequest,
    )
    from protocol._generated.offset_for_leader_epoch_request import OffsetForLeaderEpochRequest

    out = Steps()
    topic = "epochs_and_cluster"
    with connect(bootstrap) as c:
        create_topic(c, topic, 2)
        produce_partition(c, topic, build_batch(simple_records(3)))

        def ofle(epochs: list[tuple[int, int, int]], version: int = 4) -> Any:
            req = OffsetForLeaderEpochRequest(
                replica_id=-1,
                topics=[
                    OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
                        topic=topic,
                        partitions=[
                            OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                                partition=p, current_leader_epoch=cur, leader_epoch=ep
                            )
                            for p, cur, ep in epochs
                        ],
                    )
                ],
            )
            return norm(c.request(req, version).topics)

        out.step("ofle_epoch0", lambda: ofle([(0, 0, 0), (1, -1, 0)]))
        out.step("ofle_future_epoch", lambda: ofle([(0, -1, 5)]))
        out.step("ofle_fenced_current", lambda: ofle([(0, 3, 0)]))
        out.step("ofle_stale_current", lambda: ofle([(0, -2, 0)]))
        out.step("ofle_unknown_partition", lambda: ofle([(9, -1, 0)]))
        out.step("ofle_v2", lambda: ofle([(0, -1, 0)], version=2))

        def describe_cluster(v: int) -> Any:
            d = norm(c.request(DescribeClusterRequest(), v))
            for b in d.get("brokers", []):
                b["port"] = "<port>"
            return d

        for v in (0, 1, 2):
            out.step(f"describe_cluster_v{v}", lambda: describe_cluster(v))
        dtp = DescribeTopicPartitionsRequest(
            topics=[
                DescribeTopicPartitionsRequest.TopicRequest(name=topic),
                DescribeTopicPartitionsRequest.TopicRequest(name="epochs_and_cluster-nope"),
            ],
            response_partition_limit=1,
        )
        out.step("describe_topic_partitions", lambda: norm(c.request(dtp, 0)))
    return out


# --- scenarios: groups and offsets (raw classic protocol) ---------------------------------------


def consumer_subscription(topics: list[str]) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics, null user data."""
    b = struct.pack(">hi", 0, len(topics))
    for t in topics:
        b += struct.pack(">h", len(t)) + t.encode()
    return b + struct.pack(">i", -1)


def consumer_assignment(topic: str, partitions: list[int]) -> bytes:
    b = struct.pack(">hi", 0, 1) + struct.pack(">h", len(topic)) + topic.encode()
    b += struct.pack(">i", len(partitions)) + b"".join(struct.pack(">i", p) for p in partitions)
    return b + struct.pack(">i", -1)


class MemberIds:
    """Names broker-generated member ids by order of appearance (``<member-1>``)."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def __call__(self, mid: str) -> str:
        if not mid:
            return mid
        if mid not in self.names:
            self.names[mid] = f"<member-{len(self.names) + 1}>"
        return self.names[mid]

    def scrub(self, obj: Any) -> Any:
        if isinstance(obj, dict):
            return {
                k: (
                    self(v)
                    if k in ("member_id", "leader") and isinstance(v, str)
                    else self.scrub(v)
                )
                for k, v in obj.items()
            }
        if isinstance(obj, list):
            return [self.scrub(x) for x in obj]
        return obj


@scenario
def classic_group_protocol(bootstrap: str) -> Outcome:
    from protocol._generated.delete_groups_request import DeleteGroupsRequest
    from protocol._generated.describe_groups_request import DescribeGroupsRequest
    from protocol._generated.find_coordinator_request import FindCoordinatorRequest
    from protocol._generated.heartbeat_request import HeartbeatRequest
    from protocol._generated.join_group_request import JoinGroupRequest
    from protocol._generated.leave_group_request import LeaveGroupRequest
    from protocol._generated.list_groups_request import ListGroupsRequest
    from protocol._generated.offset_commit_request import OffsetCommitRequest
    from protocol._generated.offset_fetch_request import OffsetFetchRequest
    from protocol._generated.sync_group_request import SyncGroupRequest

    out = Steps()
    topic = "classic_group_protocol"
    g = "classic_group_protocol-g"
    ids = MemberIds()

    def n(obj: Any) -> Any:
        d = ids.scrub(norm(obj, frozenset({"host", "port", "client_host"})))
        return d

    with connect(bootstrap) as c:
        create_topic(c, topic, 2)
        deadline = time.monotonic() + 30
        while True:
            fc = c.request(FindCoordinatorRequest(key=g, key_type=0), 3)
            if fc.error_code == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        out.step("find_coordinator_v3", lambda: n(fc))
        out.step(
            "find_coordinator_v4",
            lambda: n(
                c.request(
                    FindCoordinatorRequest(
                        key_type=0, coordinator_keys=[g, "classic_group_protocol-h"]
                    ),
                    4,
                )
            ),
        )
        out.step(
            "find_coordinator_bad_type",
            lambda: n(c.request(FindCoordinatorRequest(key=g, key_type=5), 3)),
        )

        def join(
            member_id: str = "", version: int = 9, session: int = 10000, ptype: str = "consumer"
        ) -> Any:
            return c.request(
                JoinGroupRequest(
                    group_id=g,
                    session_timeout_ms=session,
                    rebalance_timeout_ms=10000,
                    member_id=member_id,
                    protocol_type=ptype,
                    protocols=[
                        JoinGroupRequest.JoinGroupRequestProtocol(
                            name="range", metadata=consumer_subscription([topic])
                        )
                    ],
                    reason="compat",
                ),
                version,
            )

        # FindCoordinator may answer before the coordinator has loaded its partition: the first
        # JoinGroup is retried while it is retriable, as clients do (Kafka answered
        # COORDINATOR_LOAD_IN_PROGRESS here in some runs, a fresh broker being slow to load)
        deadline = time.monotonic() + 30
        while (first := join()).error_code in RETRIABLE and time.monotonic() < deadline:
            time.sleep(0.1)
        out.step("join_without_member_id", lambda: n(first))
        mid = first.member_id
        out.step("member_id_has_client_id_prefix", lambda: mid.startswith("kafkawire-compat-"))
        joined = join(mid)
        out.step("join", lambda: n(joined))
        gen = joined.generation_id
        out.step("join_bad_session_timeout", lambda: n(join("", session=1)))
        sync = c.request(
            SyncGroupRequest(
                group_id=g,
                generation_id=gen,
                member_id=mid,
                protocol_type="consumer",
                protocol_name="range",
                assignments=[
                    SyncGroupRequest.SyncGroupRequestAssignment(
                        member_id=mid, assignment=consumer_assignment(topic, [0, 1])
                    )
                ],
            ),
            5,
        )
        out.step("sync", lambda: n(sync))
        out.step(
            "sync_assignment_roundtrip",
            lambda: sync.assignment == consumer_assignment(topic, [0, 1]),
        )
        out.step(
            "sync_bad_protocol",
            lambda: n(
                c.request(
                    SyncGroupRequest(
                        group_id=g,
                        generation_id=gen,
                        member_id=mid,
                        protocol_type="consumer",
                        protocol_name="roundrobin",
                        assignments=[],
                    ),
                    5,
                )
            ),
        )
        hb = {"ok": (gen, mid), "bad_generation": (gen + 5, mid), "unknown_member": (gen, "nobody")}
        for label, (gen_, mid_) in hb.items():
            out.step(
                f"heartbeat_{label}",
                lambda: n(
                    c.request(HeartbeatRequest(group_id=g, generation_id=gen_, member_id=mid_), 4)
                ),
            )
        out.step(
            "heartbeat_unknown_group",
            lambda: n(
                c.request(
                    HeartbeatRequest(
                        group_id="classic_group_protocol-none", generation_id=1, member_id="x"
                    ),
                    4,
                )
            ),
        )

        def commit(
            generation: int, member: str, offsets: dict[int, int], group: str = g, version: int = 9
        ) -> Any:
            return n(
                c.request(
                    OffsetCommitRequest(
                        group_id=group,
                        generation_id_or_member_epoch=generation,
                        member_id=member,
                        topics=[
                            OffsetCommitRequest.OffsetCommitRequestTopic(
                                name=topic,
                                partitions=[
                                    OffsetCommitRequest.OffsetCommitRequestPartition(
                                        partition_index=p,
                                        committed_offset=o,
                                        committed_leader_epoch=0,
                                        committed_metadata=f"m{p}",
                                    )
                                    for p, o in offsets.items()
                                ],
                            )
                        ],
                    ),
                    version,
                )
            )

        out.step("commit", lambda: commit(gen, mid, {0: 5, 1: 7}))
        out.step("commit_bad_generation", lambda: commit(gen + 1, mid, {0: 6}))
        out.step("commit_unknown_member", lambda: commit(gen, "nobody", {0: 6}))
        out.step("commit_unknown_partition", lambda: commit(gen, mid, {9: 1}))
        out.step("commit_simple_to_active_group", lambda: commit(-1, "", {0: 6}))

        def fetch_offsets(group: str, parts: list[int] | None, version: int = 8) -> Any:
            if version >= 8:
                grp = OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group)
                grp.topics = None  # null = every partition
                if parts is not None:
                    grp.topics = [
                        OffsetFetchRequest.OffsetFetchRequestTopics(
                            name=topic, partition_indexes=parts
                        )
                    ]
                return n(c.request(OffsetFetchRequest(groups=[grp]), version))
            req = OffsetFetchRequest(
                group_id=group,
                topics=[
                    OffsetFetchRequest.OffsetFetchRequestTopic(
                        name=topic, partition_indexes=parts or []
                    )
                ],
            )
            return n(c.request(req, version))

        out.step("offset_fetch_v8", lambda: fetch_offsets(g, [0, 1, 5]))
        out.step("offset_fetch_v8_all", lambda: fetch_offsets(g, None))
        out.step("offset_fetch_v5", lambda: fetch_offsets(g, [0, 1], version=5))
        out.step("offset_fetch_v1", lambda: fetch_offsets(g, [0, 1], version=1))
        out.step(
            "offset_fetch_unknown_group", lambda: fetch_offsets("classic_group_protocol-none", [0])
        )

        def describe(version: int = 5) -> Any:
            d = n(
                c.request(DescribeGroupsRequest(groups=[g, "classic_group_protocol-none"]), version)
            )
            for grp in d["groups"]:
                for m in grp["members"]:
                    m["member_metadata_ok"] = m.pop("member_metadata") == {
                        "bytes": len(consumer_subscription([topic]))
                    }
                    m["member_assignment_ok"] = m.pop("member_assignment") == {
                        "bytes": len(consumer_assignment(topic, [0, 1]))
                    }
            return d

        out.step("describe_stable", lambda: describe())
        out.step("describe_v0", lambda: describe(0))

        def list_groups(states: list[str] | None = None, version: int = 5) -> Any:
            r = c.request(ListGroupsRequest(states_filter=states or []), version)
            return {
                "error_code": err(r.error_code),
                "groups": sorted(
                    [x.group_id, x.protocol_type, x.group_state, x.group_type]
                    for x in r.groups
                    if x.group_id.startswith("classic_group_protocol")
                ),
            }

        out.step("list_groups", lambda: list_groups())
        out.step("list_groups_stable", lambda: list_groups(["Stable"]))
        out.step("list_groups_empty_filter", lambda: list_groups(["Empty"]))
        out.step("list_groups_v0", lambda: list_groups(version=0))
        out.step("delete_non_empty", lambda: n(c.request(DeleteGroupsRequest(groups_names=[g]), 2)))
        out.step(
            "leave",
            lambda: n(
                c.request(
                    LeaveGroupRequest(
                        group_id=g,
                        members=[LeaveGroupRequest.MemberIdentity(member_id=mid, reason="bye")],
                    ),
                    5,
                )
            ),
        )
        out.step(
            "leave_again",
            lambda: n(
                c.request(
                    LeaveGroupRequest(
                        group_id=g, members=[LeaveGroupRequest.MemberIdentity(member_id=mid)]
                    ),
                    5,
                )
            ),
        )
        out.step("describe_after_leave", lambda: describe())
        out.step("commit_simple_to_empty_group", lambda: commit(-1, "", {0: 8}))
        out.step("offset_fetch_after_leave", lambda: fetch_offsets(g, [0, 1]))
        out.step("join_other_protocol_type", lambda: n(join("", ptype="connect")))
        out.step(
            "delete",
            lambda: n(
                c.request(DeleteGroupsRequest(groups_names=[g, "classic_group_protocol-none"]), 2)
            ),
        )
        out.step("describe_after_delete", lambda: describe())
        out.step("offset_fetch_after_delete", lambda: fetch_offsets(g, [0, 1]))
        s = "classic_group_protocol-simple"
        out.step("simple_commit_new_group", lambda: commit(-1, "", {0: 3}, group=s))
        out.step("simple_commit_v2", lambda: commit(-1, "", {1: 4}, group=s, version=2))
        out.step("simple_fetch", lambda: fetch_offsets(s, None))
        out.step("simple_describe", lambda: n(c.request(DescribeGroupsRequest(groups=[s]), 5)))
    return out


# --- scenarios: configs changes -----------------------------------------------------------------


@scenario
def alter_configs(bootstrap: str) -> Outcome:
    from protocol._generated.alter_configs_request import AlterConfigsRequest
    from protocol._generated.incremental_alter_configs_request import (
        IncrementalAlterConfigsRequest as IAC,
    )

    out = Steps()
    topic = "alter_configs"
    keys = ["retention.ms", "segment.ms", "cleanup.policy", "max.message.bytes", "retention.bytes"]
    with connect(bootstrap) as c:
        create_topic(c, topic, configs={"retention.ms": "1000", "retention.bytes": "99999"})

        def incremental(
            ops: list[tuple[str, int, str | None]],
            validate_only: bool = False,
            name: str = topic,
            rtype: int = TOPIC_RESOURCE,
        ) -> Any:
            req = IAC(
                resources=[
                    IAC.AlterConfigsResource(
                        resource_type=rtype,
                        resource_name=name,
                        configs=[
                            IAC.AlterableConfig(name=k, config_operation=op, value=v)
                            for k, op, v in ops
                        ],
                    )
                ],
                validate_only=validate_only,
            )
            return norm(c.request(req, 1).responses)

        SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
        out.step(
            "validate_only",
            lambda: incremental([("segment.ms", SET, "3600000")], validate_only=True),
        )
        out.step("after_validate_only", lambda: _describe(c, [(TOPIC_RESOURCE, topic, keys)]))
        out.step(
            "set_delete_append",
            lambda: incremental(
                [
                    ("segment.ms", SET, "3600000"),
                    ("retention.ms", DELETE, None),
                    ("cleanup.policy", APPEND, "compact"),
                ]
            ),
        )

        def value(key: str) -> Callable[[Any], Any]:
            return lambda r: r[0]["configs"][key]["value"]

        out.step(
            "after",
            lambda: eventually(
                lambda: _describe(c, [(TOPIC_RESOURCE, topic, keys)], synonyms=True),
                lambda r: value("segment.ms")(r) == "3600000",
            ),
        )
        out.step("subtract", lambda: incremental([("cleanup.policy", SUBTRACT, "delete")]))
        out.step("invalid_value", lambda: incremental([("retention.ms", SET, "soon")]))
        out.step("unknown_key", lambda: incremental([("no.such.config", SET, "1")]))
        out.step("append_to_non_list", lambda: incremental([("retention.ms", APPEND, "5")]))
        out.step(
            "unknown_topic",
            lambda: incremental([("retention.ms", SET, "5")], name="alter_configs-nope"),
        )
        out.step(
            "same_key_twice",
            lambda: incremental([("segment.ms", SET, "1"), ("segment.ms", SET, "2")]),
        )
        out.step(
            "after_errors",
            lambda: eventually(
                lambda: _describe(c, [(TOPIC_RESOURCE, topic, keys)]),
                lambda r: value("cleanup.policy")(r) == "compact",
            ),
        )
        # Legacy AlterConfigs replaces the whole set of overrides.
        req = AlterConfigsRequest(
            resources=[
                AlterConfigsRequest.AlterConfigsResource(
                    resource_type=TOPIC_RESOURCE,
                    resource_name=topic,
                    configs=[
                        AlterConfigsRequest.AlterableConfig(
                            name="max.message.bytes", value="500000"
                        )
                    ],
                )
            ]
        )
        out.step("legacy_alter", lambda: norm(c.request(req, 2).responses))
        out.step(
            "after_legacy",
            lambda: eventually(
                lambda: _describe(c, [(TOPIC_RESOURCE, topic, keys)]),
                lambda r: value("max.message.bytes")(r) == "500000",
            ),
        )
    return out


# --- scenarios: transactions --------------------------------------------------------------------


@scenario
def transactions_confluent(bootstrap: str) -> Outcome:
    """Commit, abort and an open transaction: LSO, aborted list, control batches, consumers."""
    from confluent_kafka import Consumer, Producer

    out = Steps()
    topic = "transactions_confluent"
    with connect(bootstrap) as c:
        create_topic(c, topic)
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": "transactions_confluent-tx",
            "linger.ms": 0,
        }
    )
    p.init_transactions(60)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=f"c{i}", timestamp=T0 + i)
    p.commit_transaction(60)
    p.begin_transaction()
    for i in range(2):
        p.produce(topic, value=f"a{i}", timestamp=T0 + 10 + i)
    p.flush(30)
    p.abort_transaction(60)
    p.begin_transaction()
    p.produce(topic, value="o0", timestamp=T0 + 20)
    p.flush(30)

    def batches(isolation: int) -> dict[str, Any]:
        with connect(bootstrap) as c:
            part = fetch(c, topic, 0, isolation_level=isolation).responses[0].partitions[0]
            d = fetch_partition_outcome(part)
            d["batches"] = [
                {
                    "base_offset": b["base_offset"],
                    "count": b["records_count"],
                    "attributes": b["attributes"],
                    "producer_id": b["producer_id"],
                    "values": [r.get("control_type") or r["value"] for r in b.get("records", [])],
                }
                for b in d["batches"]
            ]
            return d

    with connect(bootstrap) as c:
        out.step(
            "open_read_uncommitted",
            lambda: eventually(lambda: batches(0), lambda d: d["high_watermark"] == 8),
        )
        out.step("open_read_committed", lambda: batches(1))
        out.step(
            "open_list_offsets_committed",
            lambda: list_offsets(c, topic, [-1, -2], isolation_level=1),
        )
        out.step(
            "open_list_offsets_uncommitted", lambda: list_offsets(c, topic, [-1], isolation_level=0)
        )
    p.commit_transaction(60)
    with connect(bootstrap) as c:
        # The coordinator writes the markers after EndTxn is answered: wait for the last one.
        out.step(
            "closed_read_committed",
            lambda: eventually(lambda: batches(1), lambda d: d["last_stable_offset"] == 9),
        )
        out.step(
            "closed_list_offsets_committed", lambda: list_offsets(c, topic, [-1], isolation_level=1)
        )
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "transactions_confluent-g",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([topic])
    got: list[str] = []
    deadline = time.monotonic() + 30
    while len(got) < 4 and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and not m.error():
            got.append((m.value() or b"").decode())
    consumer.close()
    out.step("read_committed_consumer", lambda: got)
    return out


# --- scenarios: aiokafka ------------------------------------------------------------------------


@scenario
def client_aiokafka(bootstrap: str) -> Outcome:
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    topic = "client_aiokafka"
    with connect(bootstrap) as c:  # topic administration is compared elsewhere
        create_topic(c, topic, 2)

    async def main() -> dict[str, Any]:
        out: dict[str, Any] = {}
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, enable_idempotence=True, compression_type="gzip"
        )
        await producer.start()
        try:
            sent = []
            for i in range(4):
                md = await producer.send_and_wait(
                    topic,
                    f"v{i}".encode(),
                    key=f"k{i}".encode(),
                    partition=i % 2,
                    timestamp_ms=T0 + i,
                )
                sent.append([md.partition, md.offset, md.timestamp])
            out["sent"] = sent
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id="client_aiokafka-g",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        try:
            # Bounded: against a broker with only part of the group protocol, aiokafka retries
            # its coordinator forever; the outcome then records the timeout.
            async with asyncio.timeout(60):
                await consumer.start()
                got: list[list[Any]] = []
                async with asyncio.timeout(30):
                    while len(got) < 4:
                        batch = await consumer.getmany(timeout_ms=500)
                        for tp, msgs in batch.items():
                            got += [
                                [tp.partition, m.offset, m.value.decode(), m.timestamp]
                                for m in msgs
                            ]
                out["consumed"] = sorted(got)
                await consumer.commit()
                tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
                out["committed"] = [await consumer.committed(tp) for tp in tps]
                out["end_offsets"] = sorted((await consumer.end_offsets(tps)).values())
                out["beginning_offsets"] = sorted(
                    (await consumer.beginning_offsets(tps)).values()
                )
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(consumer.stop(), 15)
        return out

    return asyncio.run(main())


# --- scenarios: Kafka's Java tools ---------------------------------------------------------------


def _java(
    main_class: str, args: list[str], version: str = "4.x", stdin: str | None = None
) -> tuple[int, str, str]:
    from compat_tests.kafka_dist import run_java_tool

    p = run_java_tool(main_class, args, version, check=False, input=stdin, timeout=180)
    return p.returncode, p.stdout, p.stderr


def _last_error_line(stderr: str) -> str | None:
    lines = [ln for ln in stderr.splitlines() if "ERROR" in ln or "Exception" in ln]
    return lines[-1][:300] if lines else None


@scenario
def java_topic_command(bootstrap: str) -> Outcome:
    """kafka-topics (TopicCommand) from 4.x and 3.9."""
    out = Steps()
    tc = "org.apache.kafka.tools.TopicCommand"
    for version in ("4.x", "3.9"):
        t = f"java_topic_command-{version.replace('.', '')}"
        base = ["--bootstrap-server", bootstrap]
        res: dict[str, Any] = {}
        rc, so, se = _java(
            tc,
            base
            + ["--create", "--topic", t, "--partitions", "2", "--config", "retention.ms=123456"],
            version,
        )
        res["create"] = [rc, so.strip()]
        rc, so, se = _java(tc, base + ["--create", "--topic", t, "--partitions", "2"], version)
        res["create_again"] = [rc, "already exists" in (so + se)]
        rc, so, se = _java(tc, base + ["--list", "--topic", "java_topic_command.*"], version)
        res["list"] = [rc, sorted(so.split())]
        rc, so, se = _java(tc, base + ["--describe", "--topic", t], version)
        res["describe"] = [
            rc,
            [
                re.sub(r"TopicId: \S+", "TopicId: <id>", ln).split()
                for ln in so.strip().splitlines()
            ],
        ]
        rc, so, se = _java(tc, base + ["--alter", "--topic", t, "--partitions", "3"], version)
        res["alter"] = [rc, _last_error_line(se)]
        rc, so, se = _java(tc, base + ["--delete", "--topic", t], version)
        res["delete"] = [rc, _last_error_line(se)]
        out.step(version, lambda: res)
    return out


@scenario
def java_console_roundtrip(bootstrap: str) -> Outcome:
    """ConsoleProducer (4.x) then ConsoleConsumer (4.x and 3.9), keys and headers parsed."""
    from compat_tests.kafka_dist import run_java_tool

    topic = "java_console_roundtrip"
    with connect(bootstrap) as c:
        create_topic(c, topic)
    out = Steps()
    lines = "".join(f"k{i}:v{i}\n" for i in range(5))
    rc, so, se = _java(
        "org.apache.kafka.tools.ConsoleProducer",
        [
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--reader-property",
            "parse.key=true",
            "--reader-property",
            "key.separator=:",
        ],
        stdin=lines,
    )
    out.step("produce", lambda: [rc, _last_error_line(se)])
    rc, so, se = _java(
        "kafka.tools.ConsoleProducer",
        [
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--property",
            "parse.key=true",
            "--property",
            "key.separator=:",
        ],
        version="3.9",
        stdin="k5:v5\n",
    )
    out.step("produce_39", lambda: [rc, _last_error_line(se)])
    for version in ("4.x", "3.9"):
        prop = "--formatter-property" if version == "4.x" else "--property"
        p = run_java_tool(
            "org.apache.kafka.tools.consumer.ConsoleConsumer",
            [
                "--bootstrap-server",
                bootstrap,
                "--topic",
                topic,
                "--from-beginning",
                "--max-messages",
                "6",
                "--timeout-ms",
                "30000",
                prop,
                "print.key=true",
                prop,
                "print.offset=true",
                prop,
                "print.partition=true",
                "--group",
                f"java_console_roundtrip-{version}",
            ],
            version,
            check=False,
            timeout=180,
        )
        out.step(f"consume_{version}", lambda: [p.returncode, p.stdout.strip().splitlines()])
    rc, so, se = _java(
        "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
        ["--bootstrap-server", bootstrap, "--describe", "--group", "java_console_roundtrip-4.x"],
    )
    rows = [ln.split() for ln in so.strip().splitlines() if ln.strip()]
    out.step("group_describe", lambda: [rc, [r[:6] for r in rows]])
    rc, so, se = _java(
        "org.apache.kafka.tools.GetOffsetShell",
        ["--bootstrap-server", bootstrap, "--topic", topic, "--time", "-1"],
    )
    out.step("get_offset_shell_latest", lambda: [rc, so.split()])
    rc, so, se = _java(
        "org.apache.kafka.tools.GetOffsetShell",
        ["--bootstrap-server", bootstrap, "--topic", topic, "--time", "-3"],
    )
    out.step("get_offset_shell_max_timestamp", lambda: [rc, so.split()])
    return out


def _delete_and_wait(topic: str, bootstrap: str, timeout: float = 15.0) -> None:
    with contextlib.suppress(ConnectionClosed), connect(bootstrap) as c:
        c.request(
            DeleteTopicsRequest(
                topics=[DeleteTopicsRequest.DeleteTopicState(name=topic)], timeout_ms=30000
            ),
            6,
        )
        deadline = time.monotonic() + timeout
        while metadata(c, [topic]).topics[0].error_code == 0 and time.monotonic() < deadline:
            time.sleep(0.1)


@scenario
def java_client_compatibility(bootstrap: str) -> Outcome:
    """Kafka's ClientCompatibilityTest (the system tests' client/broker check), 4.x and 3.9."""
    out = Steps()
    for version in ("4.x", "3.9"):
        args = [
            "--bootstrap-server",
            bootstrap,
            "--topic",
            f"java_client_compatibility-{version}",
            "--offsets-for-times-supported",
            "true",
            "--cluster-id-supported",
            "true",
            "--expect-record-too-large-exception",
            "false",
            "--num-cluster-nodes",
            "1",
            "--create-topics-supported",
            "true",
            "--describe-acls-supported",
            "true",
            "--describe-configs-supported",
            "true",
            "--idempotent-producer-supported",
            "true",
        ]
        _delete_and_wait("newtopic", bootstrap)  # the tool always creates "newtopic"
        rc, so, se = _java("org.apache.kafka.tools.ClientCompatibilityTest", args, version)
        _delete_and_wait("newtopic", bootstrap)
        failed = [ln.strip() for ln in (so + se).splitlines() if "FAILED" in ln or "error:" in ln]
        out.step(version, lambda: {"exit_code": rc, "failed": failed[:3]})
    return out


@scenario
def java_producer_performance(bootstrap: str) -> Outcome:
    """ProducerPerformance (acks=all, idempotent), then VerifiableProducer from 3.9."""
    out = Steps()
    topic = "java_producer_performance"
    with connect(bootstrap) as c:
        create_topic(c, topic)
    rc, so, se = _java(
        "org.apache.kafka.tools.ProducerPerformance",
        [
            "--topic",
            topic,
            "--num-records",
            "2000",
            "--record-size",
            "100",
            "--throughput",
            "-1",
            "--producer-props",
            f"bootstrap.servers={bootstrap}",
            "acks=all",
            "linger.ms=5",
            "compression.type=lz4",
        ],
    )
    last = [ln for ln in so.splitlines() if "records sent" in ln]
    out.step(
        "producer_performance",
        lambda: (
            [
                rc,
                last[-1].split(" records sent")[0] if last else None,
                _last_error_line(se),
            ]
        ),
    )
    rc, so, se = _java(
        "org.apache.kafka.tools.VerifiableProducer",
        ["--bootstrap-server", bootstrap, "--topic", topic, "--max-messages", "50", "--acks", "-1"],
        version="3.9",
    )
    events = [json.loads(ln) for ln in so.splitlines() if ln.startswith("{")]
    acked = [e for e in events if e.get("name") == "producer_send_success"]
    out.step(
        "verifiable_producer_39",
        lambda: (
            {
                "exit_code": rc,
                "acked": len(acked),
                "errors": sorted(
                    {
                        e.get("exception", "")
                        for e in events
                        if e.get("name") == "producer_send_error"
                    }
                ),
                "offsets": [acked[0]["offset"], acked[-1]["offset"]] if acked else None,
            }
        ),
    )
    with connect(bootstrap) as c:
        out.step("end_offset", lambda: list_offsets(c, topic, [-1])[0]["offset"])
    return out


# --- storage: compaction -----------------------------------------------------------------------

# Kafka's cleaner threads look for work every log.cleaner.backoff.ms (15 s); the scenario waits
# up to STORAGE_WAIT_S. (Retention is not compared here: Kafka checks it every
# log.retention.check.interval.ms, 5 minutes, so a long-running harness broker may not reach it
# in a bounded wait. tests/test_storage_clients.py covers it against kafkawire.)
STORAGE_WAIT_S = 120.0


def _all_records(c: Connection, topic: str, start: int) -> list[list[Any]]:
    """[offset, key, value] of every record from ``start`` (control batches skipped)."""
    out: list[list[Any]] = []
    offset = start
    for _ in range(1000):
        p = fetch(c, topic, offset).responses[0].partitions[0]
        batches = parse_batches(p.records)
        if not batches:
            break
        for b in batches:
            if not b.get("attributes", 0) & 0x20:
                out += [[r["offset"], r["key"], r["value"]] for r in b.get("records", [])]
            offset = b["base_offset"] + b["last_offset_delta"] + 1
    return out


@scenario
def storage_compaction(bootstrap: str) -> Outcome:
    """The log cleaner keeps the last record of each key (a tombstone too, within
    delete.retention.ms) at its offset; a compacted topic refuses keyless records."""
    out = Steps()
    topic = "storage_compaction"
    with connect(bootstrap) as c:
        create_topic(c, topic, configs={
            "cleanup.policy": "compact", "internal.segment.bytes": "1000",
            "min.cleanable.dirty.ratio": "0.01",
        })
        for rnd in range(4):
            for k in range(5):
                produce_partition(c, topic, build_batch(
                    [Rec(f"r{rnd}-{k}".encode() + b"-" * 200, key=f"k{k}".encode())]))
        out.step("tombstone", lambda: produce_partition(
            c, topic, build_batch([Rec(None, key=b"k1")])))
        out.step("keyless", lambda: produce_partition(c, topic, build_batch([Rec(b"no key")])))
        out.step("after_keyless", lambda: produce_partition(
            c, topic, build_batch([Rec(b"tail" + b"-" * 400, key=b"tail")])))

        def compacted() -> list[list[Any]]:
            recs = _all_records(c, topic, 0)
            below = [r for r in recs if r[1] in {f"k{k}" for k in range(5)}]
            return recs if len({r[1] for r in below}) == len(below) else []

        out.step("compacted", lambda: eventually(compacted, bool, STORAGE_WAIT_S))
        out.step("list_offsets", lambda: list_offsets(c, topic, [-2, -1]))
    return out


# --- running ---


def relativize(obj: Any) -> Any:
    """Replace absolute timestamps near T0 by ``"T0+delta"`` strings (runs differ in T0)."""
    if isinstance(obj, dict):
        return {k: relativize(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [relativize(x) for x in obj]
    if isinstance(obj, int) and not isinstance(obj, bool) and abs(obj - T0) < _T_WINDOW:
        return f"T0{obj - T0:+d}"
    return obj


def run_scenario(name: str, bootstrap: str) -> Outcome:
    """Run one scenario; the outcome as JSON would store it (string keys, relative times)."""
    _started.clear()
    try:
        result = SCENARIOS[name](bootstrap)
    except Exception as e:
        # Keep what the steps before the failure recorded; the failure itself is part of it.
        result = dict(_started[0]) if _started else {}
        result["scenario_raised"] = f"{type(e).__name__}: {e}".splitlines()[0][:200]
    finally:
        _started.clear()
    return json.loads(json.dumps(relativize(result), sort_keys=True, default=str))


# --- command line -------------------------------------------------------------------------------


def run(bootstrap: str, names: list[str] | None = None) -> dict[str, Outcome]:
    return {n: run_scenario(n, bootstrap) for n in (names or list(SCENARIOS))}


# More scenarios, in their own modules (they register themselves with @scenario).
from compat_tests import (  # noqa: E402, F401
    scenarios_admin,
    scenarios_configs,
    scenarios_groups,
    scenarios_java,
    scenarios_quotas,
    scenarios_share,
)

if __name__ == "__main__":
    # Run through the imported module: the scenario modules register into its SCENARIOS.
    from compat_tests import scenarios as _registered

    result = _registered.run(sys.argv[1], sys.argv[2:] or None)
    print(json.dumps(result, indent=1, sort_keys=True, default=str))
