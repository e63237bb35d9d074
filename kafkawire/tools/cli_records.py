"""``kafkawire produce`` and ``kafkawire consume`` (confluent-kafka underneath).

produce: one record per line of standard input; ``-k KEY`` or ``--key-separator SEP`` for
keys, ``-H key=value`` headers, ``-f json`` for lines like ``{"key": .., "value": ..,
"headers": {..}, "partition": ..}``. A summary (and a live count on a terminal) goes to stderr.

consume: ``-o`` picks the start: ``start`` (default), ``end``, an offset ``N``, ``-N`` (the last
N records of each partition), ``@TIME`` (epoch milliseconds or ISO 8601, e.g.
``@2026-11-25T12:00:00Z``) or ``@-DURATION`` (``@-10m``: ten minutes ago). Output is the value
per line (``text``), ``json`` per record, or a template (``-f '%t/%p@%o %k=%v\\n'``: topic,
partition, offset, key, value, ``%h`` headers, ``%T`` timestamp ms). Without ``-g`` it reads
every partition (or ``-p``) with no consumer group; with ``-g`` it joins the group and commits.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from kafkawire.tools.cli_client import CliError, ck, client_config, existing_topic

#: the live progress line on a terminal is refreshed at most this often (seconds)
PROGRESS_INTERVAL_S = 0.5
_DURATION = re.compile(r"^(\d+)(ms|s|m|h|d)$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


# ---- produce ------------------------------------------------------------------------------
def _record_from_line(line: str, args: argparse.Namespace) -> dict[str, Any]:
    if args.format == "json":
        try:
            rec = json.loads(line)
        except ValueError as e:
            raise CliError(f"not a JSON record: {line[:80]!r} ({e})") from None
        if not isinstance(rec, dict):
            raise CliError(f"a JSON record must be an object: {line[:80]!r}")
        return dict(rec)
    rec = {"value": line, "key": args.key}
    if args.key_separator and args.key_separator in line:
        rec["key"], rec["value"] = line.split(args.key_separator, 1)
    return rec


def produce(args: argparse.Namespace) -> int:
    K = ck("confluent_kafka")

    conf = client_config(args)
    conf.setdefault("acks", args.acks)
    conf.setdefault("compression.type", args.compression)
    producer = K.Producer(conf)
    headers = list(_headers(args.header).items())
    state: dict[str, Any] = {"ok": 0, "failed": 0, "last_error": ""}

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            state["failed"] += 1
            state["last_error"] = err.str()
        else:
            state["ok"] += 1
            if args.verbose:
                print(f"{msg.topic()}/{msg.partition()}@{msg.offset()}")

    progress = _Progress("produced", sys.stderr.isatty() and not args.verbose)
    started = time.monotonic()
    for raw in sys.stdin:
        rec = _record_from_line(raw.rstrip("\n"), args)
        kwargs: dict[str, Any] = {"value": _bytes(rec.get("value")), "key": _bytes(rec.get("key")),
                                  "headers": headers + list(_headers(rec.get("headers")).items()),
                                  "on_delivery": delivered}
        partition = rec.get("partition", args.partition)
        if partition is not None and partition >= 0:
            kwargs["partition"] = int(partition)
        while True:
            try:
                producer.produce(args.topic, **kwargs)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
        progress.show(state["ok"])
    remaining = producer.flush(args.timeout)
    progress.done()
    took = time.monotonic() - started
    print(f"produced {state['ok']} records to {args.topic} in {took:.2f}s"
          + (f", {state['failed']} failed ({state['last_error']})" if state["failed"] else "")
          + (f", {remaining} undelivered after {args.timeout:g}s" if remaining else ""),
          file=sys.stderr)
    return 1 if state["failed"] or remaining else 0


def _bytes(v: Any) -> bytes | None:
    if v is None:
        return None
    return v.encode() if isinstance(v, str) else (json.dumps(v).encode()
                                                  if not isinstance(v, bytes) else v)


def _headers(items: Any) -> dict[str, str]:
    if items is None:
        return {}
    if isinstance(items, dict):
        return {str(k): str(v) for k, v in items.items()}
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = str(item).partition("=")
        if not sep:
            raise CliError(f"-H expects key=value, got {item!r}")
        out[key] = value
    return out


class _Progress:
    def __init__(self, verb: str, enabled: bool) -> None:
        self.verb, self.enabled, self.last, self.shown = verb, enabled, 0.0, False

    def show(self, n: int) -> None:
        now = time.monotonic()
        if self.enabled and now - self.last >= PROGRESS_INTERVAL_S:
            self.last, self.shown = now, True
            sys.stderr.write(f"\r{self.verb} {n} records")
            sys.stderr.flush()

    def done(self) -> None:
        if self.shown:
            sys.stderr.write("\r\033[K")


# ---- consume ------------------------------------------------------------------------------
def parse_start(spec: str, now_ms: int) -> tuple[str, int]:
    """``-o`` as (kind, value): ('start'|'end', 0), ('offset', N), ('last', N), ('time', ms)."""
    s = spec.strip()
    if s in ("start", "beginning", "oldest", "earliest"):
        return "start", 0
    if s in ("end", "newest", "latest"):
        return "end", 0
    if re.fullmatch(r"\d+", s):
        return "offset", int(s)
    if re.fullmatch(r"-\d+", s):
        return "last", -int(s)
    if s.startswith("@"):
        t = s[1:]
        if re.fullmatch(r"\d+", t):
            return "time", int(t)
        m = _DURATION.match(t[1:]) if t.startswith("-") else None
        if m:
            return "time", now_ms - int(m.group(1)) * _UNIT_MS[m.group(2)]
        try:
            return "time", int(datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp() * 1000)
        except ValueError:
            pass
    raise CliError(f"bad --offset {spec!r}: use start, end, N, -N, @EPOCH_MS, @ISO-TIME or "
                   "@-DURATION (e.g. @-10m)")


def _start_offsets(consumer: Any, tps: list[Any], kind: str, value: int,
                   timeout: float) -> list[Any]:
    K = ck("confluent_kafka")

    if kind == "time":
        asked = [K.TopicPartition(tp.topic, tp.partition, value) for tp in tps]
        return list(consumer.offsets_for_times(asked, timeout=timeout))
    out = []
    for tp in tps:
        if kind == "start":
            off = K.OFFSET_BEGINNING
        elif kind == "end":
            off = K.OFFSET_END
        elif kind == "offset":
            off = value
        else:  # the last N records
            lo, hi = consumer.get_watermark_offsets(tp, timeout=timeout)
            off = max(lo, hi - value)
        out.append(K.TopicPartition(tp.topic, tp.partition, off))
    return out


def render(msg: Any, fmt: str) -> str:
    key, value = msg.key(), msg.value()
    headers = {k: (v.decode(errors="replace") if v is not None else None)
               for k, v in (msg.headers() or [])}
    if fmt == "json":
        return json.dumps({
            "topic": msg.topic(), "partition": msg.partition(), "offset": msg.offset(),
            "timestamp": msg.timestamp()[1],
            "key": key.decode(errors="replace") if key is not None else None,
            "value": value.decode(errors="replace") if value is not None else None,
            "headers": headers}, ensure_ascii=False) + "\n"
    fields = {
        "t": msg.topic(), "p": str(msg.partition()), "o": str(msg.offset()),
        "k": key.decode(errors="replace") if key is not None else "",
        "v": value.decode(errors="replace") if value is not None else "",
        "h": ",".join(f"{k}={v}" for k, v in headers.items()), "T": str(msg.timestamp()[1]),
        "n": "\n", "%": "%",
    }
    template = "%v\n" if fmt == "text" else fmt.replace("\\n", "\n").replace("\\t", "\t")
    return re.sub(r"%(.)", lambda m: fields.get(m.group(1), m.group(0)), template)


def consume(args: argparse.Namespace) -> int:
    K = ck("confluent_kafka")

    conf = client_config(args, allow_auto_create_topics=False)
    conf.update({"group.id": args.group or "kafkawire-cli", "enable.partition.eof": True,
                 "enable.auto.commit": bool(args.group), "auto.offset.reset": "earliest",
                 "isolation.level": args.isolation})
    kind, value = parse_start(args.offset, int(time.time() * 1000))
    fmt = "%k\t%v\n" if args.format == "text" and args.print_keys else args.format
    # reading a topic never creates it (kcat and rpk report an unknown topic); a regex
    # subscription (^...) names no topic to check
    known = {topic: existing_topic(args, topic) for topic in args.topics
             if not topic.startswith("^")}
    consumer = K.Consumer(conf)
    try:
        if args.group:
            def on_assign(c: Any, tps: list[Any]) -> None:
                if args.offset_given:
                    c.assign(_start_offsets(c, tps, kind, value, args.timeout))
            consumer.subscribe(list(args.topics), on_assign=on_assign)
        else:
            tps = []
            for topic in args.topics:
                if topic not in known:
                    raise CliError(f"{topic}: a pattern needs a group (-g)")
                parts = args.partition or sorted(known[topic].partitions)
                tps += [K.TopicPartition(topic, p) for p in parts]
            consumer.assign(_start_offsets(consumer, tps, kind, value, args.timeout))
        return _consume_loop(consumer, args, fmt)
    finally:
        consumer.close()


def _consume_loop(consumer: Any, args: argparse.Namespace, fmt: str) -> int:
    K = ck("confluent_kafka")

    seen = 0
    at_end: set[tuple[str, int]] = set()
    idle_since = time.monotonic()
    while args.num is None or seen < args.num:
        msg = consumer.poll(0.5)
        if msg is None:
            if args.idle_timeout and time.monotonic() - idle_since > args.idle_timeout:
                break
            continue
        idle_since = time.monotonic()
        err = msg.error()
        if err is not None:
            if err.code() == K.KafkaError._PARTITION_EOF:
                at_end.add((msg.topic(), msg.partition()))
                if args.exit_at_end and at_end >= {
                        (tp.topic, tp.partition) for tp in consumer.assignment()}:
                    break
                continue
            raise CliError(f"consume: {err.str()}")
        at_end.discard((msg.topic(), msg.partition()))
        sys.stdout.write(render(msg, fmt))
        seen += 1
    sys.stdout.flush()
    return 0


def add_commands(sub: Any, common: Callable[[argparse.ArgumentParser], argparse.ArgumentParser],
                 run: Callable[[Any], Any]) -> None:
    p = common(sub.add_parser("produce", help="produce lines of stdin as records"))
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("-k", "--key", help="the key of every record")
    p.add_argument("--key-separator", metavar="SEP", help="split each line into KEY SEP VALUE")
    p.add_argument("-H", "--header", action="append", metavar="KEY=VALUE", help="a header")
    p.add_argument("-p", "--partition", type=int, help="the partition (default: partitioner)")
    p.add_argument("-f", "--format", choices=("text", "json"), default="text")
    p.add_argument("--acks", choices=("all", "1", "0"), default="all")
    p.add_argument("-z", "--compression", default="none",
                   choices=("none", "gzip", "snappy", "lz4", "zstd"))
    p.add_argument("-v", "--verbose", action="store_true", help="print topic/partition@offset")
    p.set_defaults(func=run(produce))
    c = common(sub.add_parser("consume", help="print records of topics"))
    c.add_argument("topics", nargs="+", metavar="TOPIC")
    c.add_argument("-g", "--group", help="join this consumer group (and commit)")
    c.add_argument("-o", "--offset", default=None,
                   help="start, end, N, -N, @EPOCH_MS, @ISO-TIME, @-DURATION (default start)")
    c.add_argument("-p", "--partition", type=int, action="append", help="only these partitions")
    c.add_argument("-n", "--num", type=int, help="stop after this many records")
    c.add_argument("-e", "--exit-at-end", action="store_true",
                   help="stop once every partition is read to its end")
    c.add_argument("--idle-timeout", type=float, metavar="SECONDS",
                   help="stop after this long without a record")
    c.add_argument("-f", "--format", default="text",
                   help="text (value per line), json, or a template like '%%k=%%v\\n'")
    c.add_argument("--print-keys", action="store_true", help="text format: KEY<TAB>VALUE")
    c.add_argument("--isolation", choices=("read_uncommitted", "read_committed"),
                   default="read_uncommitted")

    def consume_with_default(args: argparse.Namespace) -> int:
        args.offset_given = args.offset is not None
        args.offset = args.offset or "start"
        return consume(args)
    c.set_defaults(func=run(consume_with_default))
