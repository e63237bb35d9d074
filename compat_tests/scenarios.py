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

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from compat_tests.wire import Connection, Rec, build_batch, parse_batches, plain
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
    -1: "UNKNOWN", 0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG", 7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG",
}
CONFIG_TYPES = {
    0: "UNKNOWN", 1: "BOOLEAN", 2: "STRING", 3: "INT", 4: "SHORT", 5: "LONG", 6: "DOUBLE",
    7: "LIST", 8: "CLASS", 9: "PASSWORD",
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
        if log_append_time and b.get("attributes", 0) & 0x08:
            b["max_timestamp"] = "<broker time>"
    return out


def fetch_partition_outcome(p: Any, *, log_append_time: bool = False) -> dict[str, Any]:
    d = norm(p, frozenset({"records"}))
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
    c = Connection(bootstrap)
    try:
        yield c
    finally:
        c.close()


def metadata(c: Connection, topics: list[str] | None, *, auto_create: bool = False,
             version: int = 12) -> Any:
    req = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics or []],
        allow_auto_topic_creation=auto_create,
    )
    if topics is None:
        req.topics = None  # type: ignore[assignment]  # null = every topic
    return c.request(req, version)


def wait_for_leaders(c: Connection, topic: str, partitions: int | None = None,
                     timeout: float = 15.0) -> Any:
    """Poll Metadata until ``topic`` has ``partitions`` (default: any) partitions, all led."""
    deadline = time.monotonic() + timeout
    while True:
        md = metadata(c, [topic])
        t = md.topics[0]
        if (t.error_code == 0 and t.partitions
                and (partitions is None or len(t.partitions) == partitions)
                and all(p.leader_id >= 0 for p in t.partitions)):
            # Metadata can show a leader a moment before the replica serves requests; wait
            # until every partition answers ListOffsets.
            ready = True
            for p in t.partitions:
                req = ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(
                    name=topic, partitions=[ListOffsetsRequest.ListOffsetsPartition(
                        partition_index=p.partition_index, timestamp=-1)])])
                if c.request(req, 7).topics[0].partitions[0].error_code != 0:
                    ready = False
                    break
            if ready:
                return t
        if time.monotonic() > deadline:
            raise AssertionError(f"topic {topic} has no leaders: {plain(t)}")
        time.sleep(0.05)


def create_topic(
    c: Connection, name: str, partitions: int = 1, configs: dict[str, str] | None = None,
    *, wait: bool = True,
) -> Any:
    req = CreateTopicsRequest(
        topics=[
            CreateTopicsRequest.CreatableTopic(
                name=name, num_partitions=partitions, replication_factor=1,
                configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                         for k, v in (configs or {}).items()],
            )
        ],
        timeout_ms=30000,
    )
    res = c.request(req, 7).topics[0]
    if res.error_code != 0:
        raise AssertionError(f"create {name}: {err(res.error_code)} {res.error_message}")
    if wait:
        wait_for_leaders(c, name, partitions)
    return res


def produce(
    c: Connection, topic: str, batch: bytes | None, *, partition: int = 0, acks: int = -1,
    version: int = 9, transactional_id: str | None = None,
) -> Any:
    req = ProduceRequest(
        transactional_id=transactional_id, acks=acks, timeout_ms=30000,
        topic_data=[ProduceRequest.TopicProduceData(
            name=topic,
            partition_data=[ProduceRequest.PartitionProduceData(index=partition, records=batch)],
        )],
    )
    return c.request(req, version)


def produce_partition(c: Connection, topic: str, batch: bytes, **kw: Any) -> dict[str, Any]:
    r = produce(c, topic, batch, **kw)
    return norm(r.responses[0].partition_responses[0], frozenset({"current_leader"}))


def fetch(
    c: Connection, topic: str, offset: int, *, partition: int = 0, partition_max_bytes: int = 1 << 20,
    max_bytes: int = 50 << 20, version: int = 12, max_wait_ms: int = 50, min_bytes: int = 1,
    isolation_level: int = 0, topic_id: uuid.UUID | None = None,
) -> Any:
    ft = FetchRequest.FetchTopic(
        topic=topic,
        partitions=[FetchRequest.FetchPartition(
            partition=partition, fetch_offset=offset, partition_max_bytes=partition_max_bytes,
        )],
    )
    if topic_id is not None:
        ft.topic_id = topic_id
    req = FetchRequest(
        max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
        isolation_level=isolation_level, session_id=0, session_epoch=-1, topics=[ft],
    )
    return c.request(req, version)


def fetch_one(c: Connection, topic: str, offset: int, **kw: Any) -> dict[str, Any]:
    lat = kw.pop("lat", False)
    r = fetch(c, topic, offset, **kw)
    out = {"top_error_code": err(r.error_code), "session_id": r.session_id}
    out.update(fetch_partition_outcome(r.responses[0].partitions[0], log_append_time=lat))
    return out


def list_offsets(
    c: Connection, topic: str, timestamps: list[int], *, partition: int = 0, version: int = 9,
    isolation_level: int = 0,
) -> list[dict[str, Any]]:
    out = []
    for ts in timestamps:
        req = ListOffsetsRequest(
            replica_id=-1, isolation_level=isolation_level,
            topics=[ListOffsetsRequest.ListOffsetsTopic(
                name=topic,
                partitions=[ListOffsetsRequest.ListOffsetsPartition(
                    partition_index=partition, timestamp=ts)],
            )],
        )
        p = c.request(req, version).topics[0].partitions[0]
        out.append({"query": ts, **norm(p)})
    return out


RETRIABLE = {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
             ErrorCode.NOT_COORDINATOR, ErrorCode.REQUEST_TIMED_OUT}


def init_producer_id(c: Connection, transactional_id: str | None = None, timeout: float = 30.0,
                     version: int = 4) -> Any:
    """InitProducerId, retried while the broker is still loading (as clients do)."""
    deadline = time.monotonic() + timeout
    while True:
        r = c.request(InitProducerIdRequest(transactional_id=transactional_id,
                                            transaction_timeout_ms=60000), version)
        if r.error_code not in RETRIABLE or time.monotonic() > deadline:
            return r
        time.sleep(0.1)


def simple_records(n: int, prefix: str = "v", ts_step: int = 1) -> list[Rec]:
    return [Rec(value=f"{prefix}{i}".encode(), key=f"k{i}".encode(), timestamp=T0 + i * ts_step)
            for i in range(n)]


# --- scenarios: versions and metadata -----------------------------------------------------------


@scenario
def api_versions(bootstrap: str) -> Outcome:
    """ApiVersions at every version: advertised ranges, features, and the KIP-511 fallback."""
    out: dict[str, Any] = {}
    with connect(bootstrap) as c:
        for v in (0, 1, 2, 3, 4):
            req = ApiVersionsRequest(client_software_name="compat", client_software_version="1.0")
            r = c.request(req, v)
            d = norm(r, frozenset({"finalized_features_epoch"}))
            d["api_keys"] = sorted(
                [k["api_key"], k["min_version"], k["max_version"]] for k in d["api_keys"]
            )
            for feats in ("supported_features", "finalized_features"):
                d[feats] = sorted(d.get(feats) or [], key=lambda f: f["name"])
            if v >= 3:
                d["finalized_features_epoch_set"] = r.finalized_features_epoch >= 0
            out[f"v{v}"] = d
    # An unsupported ApiVersions version is answered with a v0 body: error 35 + key 18's range.
    with connect(bootstrap) as c:
        # Versions >= 3 use request header v2; a newer client sends its own newest body.
        req = ApiVersionsRequest(client_software_name="compat", client_software_version="9")
        frame = c.raw_request(18, 127, req.encode(3), header_version=2)
        from protocol._generated.api_versions_response import ApiVersionsResponse
        from protocol.primitives import Reader

        rd = Reader(frame)
        rd.int32()  # correlation id (response header v0)
        r0 = ApiVersionsResponse.read(rd, 0)
        out["v127"] = {
            "error_code": err(r0.error_code),
            "api_keys": [[k.api_key, k.min_version, k.max_version] for k in r0.api_keys],
        }
    return out


@scenario
def unsupported_versions_close(bootstrap: str) -> Outcome:
    """A request below a 4.x broker's minimum (Produce v2, Fetch v3, ListOffsets v0...) closes
    the connection without an answer; a supported one on a fresh connection still works."""
    cases = {"Produce v2": (0, 2), "Fetch v3": (1, 3), "ListOffsets v0": (2, 0),
             "CreateTopics v1": (19, 1), "Metadata v14": (3, 14), "unknown key 999": (999, 0)}
    out: dict[str, Any] = {}
    for label, (key, version) in cases.items():
        with connect(bootstrap) as c:
            from protocol._generated.request_header import RequestHeader

            hdr = RequestHeader(request_api_key=key, request_api_version=version,
                                correlation_id=7, client_id="compat").encode(1)
            out[label] = "closed" if c.closes_after(hdr + b"\x00" * 16) else "answered"
    with connect(bootstrap) as c:
        md = metadata(c, ["unsupported_versions_close-none"], version=0)
        out["Metadata v0 afterwards"] = norm(md, frozenset({"brokers"}))
    return out


@scenario
def metadata_auto_create(bootstrap: str) -> Outcome:
    out: dict[str, Any] = {}
    with connect(bootstrap) as c:
        t = metadata(c, ["metadata_auto_create-off"], auto_create=False).topics[0]
        out["auto_create_false"] = err(t.error_code)
        first = metadata(c, ["metadata_auto_create-on"], auto_create=True).topics[0]
        out["first_answer"] = {"error_code": err(first.error_code),
                               "partitions": len(first.partitions)}
        t = wait_for_leaders(c, "metadata_auto_create-on")
        out["after_creation"] = norm(t)
        bad = metadata(c, ["metadata auto create bad"], auto_create=True).topics[0]
        out["invalid_name"] = err(bad.error_code)
        dots = metadata(c, [".."], auto_create=True).topics[0]
        out["dotdot"] = err(dots.error_code)
        # Metadata v3 (older clients) for the same topic; topic name list in the same order.
        old = metadata(c, ["metadata_auto_create-on", "metadata_auto_create-off"], version=3)
        out["v3"] = norm(old, frozenset({"brokers"}))
    return out


@scenario
def metadata_shape(bootstrap: str) -> Outcome:
    """Brokers, controller, partition leaders/epochs/replicas at several Metadata versions."""
    out: dict[str, Any] = {}
    with connect(bootstrap) as c:
        create_topic(c, "metadata_shape-3p", 3)
        for v in (0, 1, 4, 7, 9, 10, 12, 13):
            md = metadata(c, ["metadata_shape-3p"], version=v)
            d = norm(md)
            for b in d["brokers"]:
                b["port"] = "<port>"
            out[f"v{v}"] = d
        every = metadata(c, None, version=12)
        out["all_topics_contains_it"] = "metadata_shape-3p" in [t.name for t in every.topics]
    return out


# --- scenarios: produce and fetch ---------------------------------------------------------------


@scenario
def produce_basics(bootstrap: str) -> Outcome:
    out: dict[str, Any] = {}
    topic = "produce_basics"
    with connect(bootstrap) as c:
        create_topic(c, topic, 2)
        batch = build_batch(simple_records(3), base_timestamp=T0)
        for v in (3, 5, 7, 8, 9, 10, 11, 12):
            out[f"v{v}"] = produce_partition(c, topic, batch, version=v)
        out["partition_1"] = produce_partition(c, topic, batch, partition=1)
        out["unknown_partition"] = produce_partition(c, topic, batch, partition=7)
        out["unknown_topic"] = produce_partition(c, "produce_basics-nope", batch)
        out["corrupt_crc"] = produce_partition(
            c, topic, build_batch(simple_records(2), corrupt_crc=True))
        out["acks_2"] = produce_partition(c, topic, batch, acks=2)
        out["acks_1"] = produce_partition(c, topic, batch, acks=1)
        # acks=0: no answer; the next request on the connection is answered normally.
        req = ProduceRequest(acks=0, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
            name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)])])
        c.send_only(req, 9)
        out["after_acks_0"] = produce_partition(c, topic, batch)
        big = build_batch([Rec(value=b"x" * (1024 * 1024 + 100))])
        out["too_large"] = produce_partition(c, topic, big)
        gz = build_batch(simple_records(4, "gz"), compression=1)
        out["gzip"] = produce_partition(c, topic, gz)
        f = fetch(c, topic, 0).responses[0].partitions[0]
        out["log"] = [[b["base_offset"], b["records_count"], b["attributes"],
                       [r["value"] for r in b.get("records", [])]] for b in parse_batches(f.records)]
        out["high_watermark"] = f.high_watermark
    return out


@scenario
def fetch_edges(bootstrap: str) -> Outcome:
    out: dict[str, Any] = {}
    topic = "fetch_edges"
    with connect(bootstrap) as c:
        create_topic(c, topic)
        create_topic(c, "fetch_edges-empty")
        out["empty_topic_at_0"] = fetch_one(c, "fetch_edges-empty", 0)
        out["empty_topic_at_1"] = fetch_one(c, "fetch_edges-empty", 1)
        out["produce_a"] = produce_partition(c, topic, build_batch(simple_records(3, "a")))
        out["produce_b"] = produce_partition(c, topic, build_batch(simple_records(2, "b")))
        out["at_0"] = fetch_one(c, topic, 0)
        out["mid_first_batch"] = fetch_one(c, topic, 1)
        out["mid_second_batch"] = fetch_one(c, topic, 4)
        out["at_high_watermark"] = fetch_one(c, topic, 5)
        out["past_high_watermark"] = fetch_one(c, topic, 6)
        out["negative_offset"] = fetch_one(c, topic, -1)
        out["partition_max_bytes_10"] = fetch_one(c, topic, 0, partition_max_bytes=10)
        out["max_bytes_1"] = fetch_one(c, topic, 0, max_bytes=1)
        out["partition_max_bytes_0"] = fetch_one(c, topic, 0, partition_max_bytes=0)
        out["unknown_partition"] = fetch_one(c, topic, 0, partition=3)
        out["unknown_topic"] = fetch_one(c, "fetch_edges-nope", 0)
    return out


@scenario
def fetch_versions(bootstrap: str) -> Outcome:
    """The same fetch at the versions clients use; v13+ addresses the topic by id."""
    out: dict[str, Any] = {}
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
            out[f"v{v}"] = fetch_one(c, topic, 1, **kw)
        out["v13_unknown_topic_id"] = fetch_one(c, "", 0, version=13, topic_id=uuid.uuid4())
    return out


@scenario
def log_append_time(bootstrap: str) -> Outcome:
    out: dict[str, Any] = {}
    topic = "log_append_time"
    with connect(bootstrap) as c:
        create_topic(c, topic, configs={"message.timestamp.type": "LogAppendTime"})
        before = int(time.time() * 1000)
        p = produce_partition(c, topic, build_batch(simple_records(3)))
        after = int(time.time() * 1000)
        lat = p.pop("log_append_time_ms")
        out["produce"] = p
        out["log_append_time_in_window"] = before - 1000 <= lat <= after + 1000
        f = fetch(c, topic, 0)
        part = f.responses[0].partitions[0]
        batches = parse_batches(part.records)
        out["fetched_max_timestamp_equals_append_time"] = [b["max_timestamp"] == lat
                                                           for b in batches]
        out["fetch"] = fetch_partition_outcome(part, log_append_time=True)
        lo = list_offsets(c, topic, [-1, -2, -3, 0])
        for e in lo:
            if e["timestamp"] == lat:
                e["timestamp"] = "<log append time>"
        out["list_offsets"] = lo
    return out


@scenario
def list_offsets_by_time(bootstrap: str) -> Outcome:
    out: dict[str, Any] = {}
    topic = "list_offsets_by_time"
    with connect(bootstrap) as c:
        create_topic(c, topic)
        create_topic(c, "list_offsets_by_time-empty")
        # batch 1: offsets 0-2 at T0+1000, +2000, +3000; batch 2: offsets 3-4 at +5000, +4000.
        b1 = build_batch([Rec(value=b"a", timestamp=T0 + 1000), Rec(value=b"b", timestamp=T0 + 2000),
                          Rec(value=b"c", timestamp=T0 + 3000)], base_timestamp=T0 + 1000)
        b2 = build_batch([Rec(value=b"d", timestamp=T0 + 5000), Rec(value=b"e", timestamp=T0 + 4000)],
                         base_timestamp=T0 + 5000)
        produce_partition(c, topic, b1)
        produce_partition(c, topic, b2)
        queries = [T0, T0 + 1000, T0 + 1500, T0 + 3000, T0 + 3500, T0 + 4000, T0 + 4500,
                   T0 + 5000, T0 + 5001, 0, -1, -2, -3, -4, -5]
        for v in (1, 4, 6, 7, 8, 9, 10, 11):
            qs = [q for q in queries if (q != -3 or v >= 7) and (q not in (-4, -5) or v >= 8)]
            out[f"v{v}"] = list_offsets(c, topic, qs, version=v)
        out["empty_topic"] = list_offsets(c, "list_offsets_by_time-empty", [-1, -2, -3, 0, T0])
        out["read_committed"] = list_offsets(c, topic, [-1, -2, T0 + 1500], isolation_level=1)
        out["unknown_partition"] = list_offsets(c, topic, [-1], partition=5)
        out["unknown_topic"] = list_offsets(c, "list_offsets_by_time-nope", [-1])
        out["unsupported_spec_-6"] = list_offsets(c, topic, [-6], version=11)
    return out


@scenario
def idempotent_duplicate(bootstrap: str) -> Outcome:
    """Raw idempotent produce: a resent batch is acknowledged with the original base offset."""
    out: dict[str, Any] = {}
    topic = "idempotent_duplicate"
    with connect(bootstrap) as c:
        create_topic(c, topic)
        ipid = init_producer_id(c)
        out["init_producer_id"] = norm(ipid, frozenset({"producer_id"}))
        pid, epoch = ipid.producer_id, ipid.producer_epoch
        out["producer_id_assigned"] = pid >= 0

        def batch(seq: int, n: int, prefix: str, ep: int = epoch) -> bytes:
            return build_batch(simple_records(n, prefix), producer_id=pid, producer_epoch=ep,
                               base_sequence=seq)

        b0 = batch(0, 3, "a")
        out["seq0"] = produce_partition(c, topic, b0)
        out["seq0_again"] = produce_partition(c, topic, b0)
        b3 = batch(3, 2, "b")
        out["seq3"] = produce_partition(c, topic, b3)
        out["seq0_again_after_seq3"] = produce_partition(c, topic, b0)
        out["seq3_again"] = produce_partition(c, topic, b3)
        out["gap_seq9"] = produce_partition(c, topic, batch(9, 1, "c"))
        out["seq5"] = produce_partition(c, topic, batch(5, 1, "d"))
        out["new_epoch_seq0"] = produce_partition(c, topic, batch(0, 1, "f", ep=epoch + 1))
        out["old_epoch_after_bump"] = produce_partition(c, topic, batch(6, 1, "e", ep=epoch))
        out["newer_epoch_seq5"] = produce_partition(c, topic, batch(5, 1, "g", ep=epoch + 2))
        out["new_epoch_seq1"] = produce_partition(c, topic, batch(1, 1, "h", ep=epoch + 1))
        unknown = build_batch(simple_records(1, "u"), producer_id=pid + 1000,
                              producer_epoch=0, base_sequence=7)
        out["unknown_pid_seq7"] = produce_partition(c, topic, unknown)
        f = fetch(c, topic, 0).responses[0].partitions[0]
        out["log"] = [
            {"base_offset": b["base_offset"], "count": b["records_count"],
             "producer_epoch": b["producer_epoch"], "base_sequence": b["base_sequence"],
             "pid_is_ours": b["producer_id"] == pid}
            for b in parse_batches(f.records)
        ]
        out["high_watermark"] = f.high_watermark
    return out


@scenario
def delete_records(bootstrap: str) -> Outcome:
    out: dict[str, Any] = {}
    topic = "delete_records"
    with connect(bootstrap) as c:
        create_topic(c, topic)
        produce_partition(c, topic, build_batch(simple_records(3)))
        produce_partition(c, topic, build_batch(simple_records(3, "w")))

        def dr(offset: int, partition: int = 0, name: str = topic) -> Any:
            req = DeleteRecordsRequest(topics=[DeleteRecordsRequest.DeleteRecordsTopic(
                name=name, partitions=[DeleteRecordsRequest.DeleteRecordsPartition(
                    partition_index=partition, offset=offset)])], timeout_ms=30000)
            return norm(c.request(req, 2).topics[0].partitions[0])

        out["to_1"] = dr(1)
        out["fetch_0"] = fetch_one(c, topic, 0)
        out["fetch_1"] = fetch_one(c, topic, 1)
        out["list_offsets"] = list_offsets(c, topic, [-2, -1, 0, -4])
        out["to_4_mid_second_batch"] = dr(4)
        out["fetch_4"] = fetch_one(c, topic, 4)
        out["fetch_3"] = fetch_one(c, topic, 3)
        out["to_hw_-1"] = dr(-1)
        out["beyond_hw"] = dr(100)
        out["backwards"] = dr(2)
        out["unknown_partition"] = dr(0, partition=4)
        out["unknown_topic"] = dr(0, name="delete_records-nope")
    return out


# --- scenarios: topic administration ------------------------------------------------------------


def _create_raw(c: Connection, topics: list[CreateTopicsRequest.CreatableTopic],
                validate_only: bool = False, version: int = 7) -> list[dict[str, Any]]:
    req = CreateTopicsRequest(topics=topics, timeout_ms=30000, validate_only=validate_only)
    res = c.request(req, version)
    out = []
    for t in res.topics:
        d = norm(t)
        if d.get("configs") is not None:
            d["configs"] = {x.pop("name"): name_config_entry(x)
                            for x in sorted(d["configs"], key=lambda x: x["name"])}
        out.append(d)
    return out


def _ct(name: str, partitions: int = 1, rf: int = 1, configs: dict[str, str | None] | None = None,
        assignments: dict[int, list[int]] | None = None) -> CreateTopicsRequest.CreatableTopic:
    return CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=rf,
        configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                 for k, v in (configs or {}).items()],
        assignments=[CreateTopicsRequest.CreatableReplicaAssignment(partition_index=p,
                                                                    broker_ids=ids)
                     for p, ids in (assignments or {}).items()],
    )


@scenario
def create_topics_raw(bootstrap: str) -> Outcome:
    """CreateTopics v7 answers: errors per topic, and the full config list of a new topic."""
    out: dict[str, Any] = {}
    with connect(bootstrap) as c:
        out["with_configs"] = _create_raw(c, [_ct(
            "create_topics_raw-a", 3,
            configs={"cleanup.policy": "compact", "retention.ms": "12345",
                     "max.message.bytes": "2000000"})])
        out["validate_only"] = _create_raw(c, [_ct("create_topics_raw-v", 2)], validate_only=True)
        out["validate_only_left_nothing"] = err(
            metadata(c, ["create_topics_raw-v"]).topics[0].error_code)
        out["duplicate"] = _create_raw(c, [_ct("create_topics_raw-a")])
        out["duplicate_validate_only"] = _create_raw(c, [_ct("create_topics_raw-a")],
                                                     validate_only=True)
        out["defaults_-1"] = _create_raw(c, [_ct("create_topics_raw-d", -1, -1)])
        for label, name in {"space": "create_topics_raw bad", "dot": ".", "dotdot": "..",
                            "too_long": "create_topics_raw-" + "x" * 240, "empty": "",
                            "slash": "create_topics_raw/x"}.items():
            out[f"name_{label}"] = [
                {"name_ok": t["name"] == name, "error_code": t["error_code"]}
                for t in _create_raw(c, [_ct(name)])
            ]
        out["zero_partitions"] = _create_raw(c, [_ct("create_topics_raw-z", 0)])
        out["rf_2"] = _create_raw(c, [_ct("create_topics_raw-rf", 1, 2)])
        out["rf_0"] = _create_raw(c, [_ct("create_topics_raw-rf0", 1, 0)])
        out["unknown_config"] = _create_raw(c, [_ct("create_topics_raw-uc", configs={"nope": "1"})])
        out["bad_config_value"] = _create_raw(
            c, [_ct("create_topics_raw-bv", configs={"retention.ms": "abc"})])
        out["null_config_value"] = _create_raw(
            c, [_ct("create_topics_raw-nv", configs={"retention.ms": None})])
        out["assignment"] = _create_raw(
            c, [_ct("create_topics_raw-as", -1, -1, assignments={0: [1], 1: [1]})])
        out["assignment_bad_broker"] = _create_raw(
            c, [_ct("create_topics_raw-ab", -1, -1, assignments={0: [42]})])
        out["same_name_twice_in_request"] = _create_raw(
            c, [_ct("create_topics_raw-tw"), _ct("create_topics_raw-tw")])
        out["v2"] = _create_raw(c, [_ct("create_topics_raw-old")], version=2)
        out["v4_duplicate"] = _create_raw(c, [_ct("create_topics_raw-old")], version=4)
    return out


@scenario
def partitions_and_delete(bootstrap: str) -> Outcome:
    out: dict[str, Any] = {}
    with connect(bootstrap) as c:
        create_topic(c, "partitions_and_delete", 2)

        def cp(name: str, count: int, validate_only: bool = False) -> Any:
            t = CreatePartitionsRequest.CreatePartitionsTopic(name=name, count=count)
            t.assignments = None  # type: ignore[assignment]  # null = let the broker place them
            req = CreatePartitionsRequest(topics=[t], timeout_ms=30000, validate_only=validate_only)
            return norm(c.request(req, 3).results)

        out["to_5_validate_only"] = cp("partitions_and_delete", 5, validate_only=True)
        out["to_5"] = cp("partitions_and_delete", 5)
        out["partitions_after"] = len(wait_for_leaders(c, "partitions_and_delete", 5).partitions)
        out["to_3_decrease"] = cp("partitions_and_delete", 3)
        out["to_5_same"] = cp("partitions_and_delete", 5)
        out["unknown_topic"] = cp("partitions_and_delete-nope", 3)

        def dt(names: list[str], version: int = 6) -> Any:
            if version >= 6:
                req = DeleteTopicsRequest(
                    topics=[DeleteTopicsRequest.DeleteTopicState(name=n) for n in names],
                    timeout_ms=30000)
            else:
                req = DeleteTopicsRequest(topic_names=names, timeout_ms=30000)
            return norm(c.request(req, version).responses)

        out["delete"] = dt(["partitions_and_delete"])
        out["delete_again"] = dt(["partitions_and_delete"])
        out["delete_unknown_v4"] = dt(["partitions_and_delete-nope"], version=4)
        create_topic(c, "partitions_and_delete-b")
        out["delete_v1"] = dt(["partitions_and_delete-b"], version=1)
        deadline = time.monotonic() + 10
        while True:
            gone = metadata(c, ["partitions_and_delete", "partitions_and_delete-b"])
            codes = [err(t.error_code) for t in gone.topics]
            if all(x == "UNKNOWN_TOPIC_OR_PARTITION" for x in codes) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        out["metadata_after_delete"] = codes
    return out


@scenario
def admin_confluent(bootstrap: str) -> Outcome:
    """Topic administration through librdkafka's AdminClient (what error codes surface)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    out: dict[str, Any] = {}

    def result(futs: dict[str, Any]) -> dict[str, str]:
        res = {}
        for k, f in futs.items():
            try:
                f.result(30)
                res[k] = "OK"
            except KafkaException as e:
                res[k] = e.args[0].name()
        return res

    out["create"] = result(admin.create_topics([
        NewTopic("admin_confluent-a", 2, 1, config={"retention.ms": "60000"}),
        NewTopic("admin_confluent-b", 1, 1),
    ], operation_timeout=30))
    out["duplicate"] = result(admin.create_topics([NewTopic("admin_confluent-a", 2, 1)]))
    out["validate_only"] = result(admin.create_topics([NewTopic("admin_confluent-v", 1, 1)],
                                                      validate_only=True))
    out["invalid_name"] = result(admin.create_topics([NewTopic("admin confluent", 1, 1)]))
    out["bad_rf"] = result(admin.create_topics([NewTopic("admin_confluent-rf", 1, 3)]))
    out["bad_config"] = result(admin.create_topics(
        [NewTopic("admin_confluent-c", 1, 1, config={"cleanup.policy": "sideways"})]))
    time.sleep(0.5)
    md = admin.list_topics(timeout=10)
    out["listed"] = sorted(t for t in md.topics if t.startswith("admin_confluent"))
    out["partitions"] = {t: len(md.topics[t].partitions) for t in out["listed"]}
    out["create_partitions"] = result(admin.create_partitions(
        [NewPartitions("admin_confluent-a", 4)]))
    out["shrink_partitions"] = result(admin.create_partitions(
        [NewPartitions("admin_confluent-a", 1)]))
    out["delete"] = result(admin.delete_topics(["admin_confluent-a", "admin_confluent-b"],
                                               operation_timeout=30))
    out["delete_unknown"] = result(admin.delete_topics(["admin_confluent-nope"]))
    return out


# --- scenarios: configs -------------------------------------------------------------------------

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4


def _describe(c: Connection, resources: list[tuple[int, str, list[str] | None]], *,
              synonyms: bool = False, version: int = 4) -> list[dict[str, Any]]:
    req = DescribeConfigsRequest(
        resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=t, resource_name=n, configuration_keys=keys) for t, n, keys in resources],
        include_synonyms=synonyms, include_documentation=False)
    for r, (_, _, keys) in zip(req.resources, resources, strict=True):
        if keys is None:
            r.configuration_keys = None  # type: ignore[assignment]  # null = all
    res = c.request(req, version)
    out = []
    for r in res.results:
        d = norm(r)
        d["configs"] = {x.pop("name"): name_config_entry(x)
                        for x in sorted(d["configs"], key=lambda x: x["name"])}
        out.append(d)
    return out


@scenario
def describe_configs_topic(bootstrap: str) -> Outcome:
    out: dict[str, Any] = {}
    topic = "describe_configs_topic"
    with connect(bootstrap) as c:
        create_topic(c, topic, configs={"retention.ms": "86400000", "cleanup.policy": "compact",
                                        "min.insync.replicas": "1"})
        out["all_v4_synonyms"] = _describe(c, [(TOPIC_RESOURCE, topic, None)], synonyms=True)
        out["all_v1"] = _describe(c, [(TOPIC_RESOURCE, topic, None)], version=1)
        out["all_v3_no_synonyms"] = _describe(c, [(TOPIC_RESOURCE, topic, None)], version=3)
        out["some_keys"] = _describe(
            c, [(TOPIC_RESOURCE, topic, ["retention.ms", "segment.bytes", "no.such.key"])],
            synonyms=True)
        out["unknown_topic"] = _describe(c, [(TOPIC_RESOURCE, "describe_configs_topic-nope", None)])
        out["empty_name"] = _describe(c, [(TOPIC_RESOURCE, "", None)])
    return out


# Broker configs whose values do not depend on ports, paths or the host.
BROKER_KEYS = [
    "num.partitions", "default.replication.factor", "auto.create.topics.enable",
    "log.retention.hours", "log.retention.ms", "log.segment.bytes", "message.max.bytes",
    "log.cleanup.policy", "compression.type", "log.message.timestamp.type",
    "offsets.topic.replication.factor", "offsets.retention.minutes", "group.initial.rebalance.delay.ms",
    "transaction.state.log.replication.factor", "min.insync.replicas", "delete.topic.enable",
    "node.id", "broker.id", "process.roles", "log.retention.check.interval.ms",
    "socket.request.max.bytes", "replica.fetch.max.bytes", "fetch.max.bytes",
    "group.min.session.timeout.ms", "group.max.session.timeout.ms", "sasl.jaas.config",
]


@scenario
def describe_configs_broker(bootstrap: str) -> Outcome:
    out: dict[str, Any] = {}
    with connect(bootstrap) as c:
        out["selected"] = _describe(c, [(BROKER_RESOURCE, "1", BROKER_KEYS)], synonyms=True)
        every = _describe(c, [(BROKER_RESOURCE, "1", None)])[0]
        out["all_error"] = every["error_code"]
        out["all_has_keys"] = {k: k in every["configs"] for k in BROKER_KEYS}
        out["unknown_broker"] = [
            {k: v for k, v in r.items() if k != "configs"}
            for r in _describe(c, [(BROKER_RESOURCE, "42", None)])
        ]
        out["broker_logger"] = [r["error_code"] for r in _describe(c, [(8, "1", ["root"])])]
    return out


# --- scenarios: real clients --------------------------------------------------------------------


@scenario
def client_kafka_python(bootstrap: str) -> Outcome:
    """kafka-python producer (idempotent by default) + group consumer + admin describe."""
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

    topic = "client_kafka_python"
    out: dict[str, Any] = {}
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="compat-admin")
    try:
        from kafka.admin import NewTopic

        admin.create_topics([NewTopic(topic, 2, 1)])
        producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
        metas = [producer.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 2,
                               timestamp_ms=T0 + i).get(30) for i in range(6)]
        producer.close()
        out["produced"] = [[m.partition, m.offset, m.timestamp] for m in metas]
        consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id="client_kafka_python-g",
                                 client_id="compat-consumer",
                                 auto_offset_reset="earliest", enable_auto_commit=False,
                                 consumer_timeout_ms=15000)
        got = []
        for msg in consumer:
            got.append([msg.partition, msg.offset, msg.key.decode(), msg.value.decode(),
                        msg.timestamp, msg.timestamp_type])
            if len(got) == 6:
                break
        out["consumed"] = sorted(got)
        consumer.commit()
        out["committed"] = {p: consumer.committed(TopicPartition(topic, p)) for p in (0, 1)}
        out["end_offsets"] = {tp.partition: o for tp, o in consumer.end_offsets(
            [TopicPartition(topic, 0), TopicPartition(topic, 1)]).items()}
        out["offsets_for_times"] = {
            tp.partition: (None if o is None else [o.offset, o.timestamp])
            for tp, o in consumer.offsets_for_times(
                {TopicPartition(topic, 0): T0 + 1, TopicPartition(topic, 1): T0 + 100}).items()}
        g = "client_kafka_python-g"

        def describe() -> dict[str, Any]:
            d = admin.describe_groups([g])[g]
            members = [{k: m.get(k) for k in ("client_id", "group_instance_id")}
                       for m in d["members"]]
            return {"state": d["group_state"], "protocol_type": d["protocol_type"],
                    "protocol": d["protocol_data"], "members": members, "error": d["error"]}

        out["group_while_member"] = describe()
        consumer.close()
        out["group_after_close"] = describe()
        out["listed"] = sorted([x["group_id"], x["protocol_type"], x["group_state"],
                                x.get("group_type")] for x in admin.list_groups()
                               if x["group_id"].startswith("client_kafka_python"))
        offs = admin.list_group_offsets(g)[g]
        out["group_offsets"] = sorted([tp.partition, om.offset, om.metadata, om.leader_epoch]
                                      for tp, om in offs.items())
        unknown = admin.describe_groups(["client_kafka_python-nope"])["client_kafka_python-nope"]
        out["unknown_group"] = {"state": unknown["group_state"],
                                "error": (unknown["error"] or "").split(":")[0]}
    finally:
        admin.close()
    return out


@scenario
def client_confluent(bootstrap: str) -> Outcome:
    """librdkafka idempotent producer + group consumer, offsets and watermarks."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = "client_confluent"
    out: dict[str, Any] = {}
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    time.sleep(0.5)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "linger.ms": 5, "compression.type": "lz4"})
    delivered: list[list[Any]] = []

    def cb(e: Any, m: Any) -> None:
        delivered.append([None if e is None else e.name(), m.partition(), m.offset(),
                          m.timestamp()[1]])

    for i in range(6):
        producer.produce(topic, key=f"k{i}", value=f"v{i}", partition=i % 2, timestamp=T0 + i,
                         on_delivery=cb)
    producer.flush(30)
    out["delivered"] = sorted(delivered)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "client_confluent-g",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    got: list[list[Any]] = []
    deadline = time.monotonic() + 30
    while len(got) < 6 and time.monotonic() < deadline:
        m = consumer.poll(1.0)
        if m is None or m.error():
            continue
        got.append([m.partition(), m.offset(), m.key().decode(), m.value().decode(),
                    list(m.timestamp())])
    out["consumed"] = sorted(got)
    consumer.commit(asynchronous=False)
    out["committed"] = sorted([tp.partition, tp.offset] for tp in consumer.committed(
        [TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10))
    out["watermarks"] = [list(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10))
                         for p in (0, 1)]
    out["offsets_for_times"] = sorted([tp.partition, tp.offset] for tp in consumer.offsets_for_times(
        [TopicPartition(topic, 0, T0 + 1), TopicPartition(topic, 1, T0 + 100)], timeout=10))
    consumer.close()
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
    out = relativize(SCENARIOS[name](bootstrap))
    return json.loads(json.dumps(out, sort_keys=True, default=str))


# --- command line -------------------------------------------------------------------------------


def run(bootstrap: str, names: list[str] | None = None) -> dict[str, Outcome]:
    return {n: run_scenario(n, bootstrap) for n in (names or list(SCENARIOS))}


if __name__ == "__main__":
    result = run(sys.argv[1], sys.argv[2:] or None)
    print(json.dumps(result, indent=1, sort_keys=True, default=str))
