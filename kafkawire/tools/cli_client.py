"""Client commands for any Kafka-compatible cluster, on confluent-kafka (librdkafka).

``topic create|list|describe|delete|alter``, ``produce``, ``consume``, ``group
list|describe|reset`` and ``cluster info``; Redpanda's ``rpk`` is the model (plain aligned
tables, one command per noun). Every command takes ``--bootstrap-server HOST:PORT`` (default
127.0.0.1:9092, or ``$KAFKAWIRE_BOOTSTRAP``) and ``-X key=value`` for any librdkafka property.
``cluster`` is a command group so that local-cluster commands (``cluster up|down|kill``) can
join ``cluster info`` later.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
#: how long an admin call may take before the command gives up, in seconds (--timeout)
DEFAULT_TIMEOUT_S = 15.0


def ck(module: str) -> Any:
    """confluent-kafka, imported when a command runs (``kafkawire serve`` does not need it)."""
    return importlib.import_module(module)


class CliError(Exception):
    """A failure to report in one line (exit code 1)."""


# ---- output -------------------------------------------------------------------------------
def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], out: Any = None) -> None:
    """rpk-style table: upper-case headers, columns padded to the widest cell."""
    out = out or sys.stdout
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for r in cells:
        out.write("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n")


def section(title: str) -> None:
    print(title)
    print("=" * len(title))


# ---- connection ---------------------------------------------------------------------------
def client_config(args: argparse.Namespace, **defaults: Any) -> dict[str, Any]:
    """librdkafka settings: ``defaults`` (keys with ``_`` for ``.``), then ``-X`` overrides."""
    # librdkafka logs every failed connect at level 3; the command reports failures itself
    # (-X log_level=7 brings them back)
    conf: dict[str, Any] = {"bootstrap.servers": args.bootstrap_server, "log_level": 2}
    conf.update({k.replace("_", "."): v for k, v in defaults.items()})
    for item in args.X or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise CliError(f"-X expects key=value, got {item!r}")
        conf[key.strip()] = value
    return conf


def admin(args: argparse.Namespace) -> Any:
    """One admin client per command (it must outlive the futures it hands out)."""
    cli = getattr(args, "admin_client", None)
    if cli is None:
        # Looking must not create: librdkafka's admin handle is a producer, whose Metadata
        # requests ask for auto-creation by default (kafkawire, like Kafka, would then create
        # every topic a typo names); rpk, kafka-topics and kcat report an unknown topic instead.
        cli = args.admin_client = ck("confluent_kafka.admin").AdminClient(
            client_config(args, allow_auto_create_topics=False))
    return cli


def wait(fut: Future[Any], args: argparse.Namespace, what: str) -> Any:
    K = ck("confluent_kafka")

    try:
        return fut.result(timeout=args.timeout)
    except TimeoutError:
        raise CliError(f"{what}: no answer from {args.bootstrap_server} within "
                       f"{args.timeout:g}s") from None
    except K.KafkaException as e:
        err = e.args[0] if e.args else e
        raise CliError(f"{what}: {getattr(err, 'str', lambda: str(err))()}") from None


def metadata(args: argparse.Namespace, topic: str | None = None) -> Any:
    K = ck("confluent_kafka")

    try:
        return admin(args).list_topics(topic=topic, timeout=args.timeout)
    except K.KafkaException as e:
        raise CliError(f"cannot reach {args.bootstrap_server}: {e.args[0].str()}") from None


def existing_topic(args: argparse.Namespace, name: str) -> Any:
    """The metadata of topic ``name``; CliError (exit 1) when the cluster does not know it.
    Never creates it (see ``admin``)."""
    t = metadata(args, name).topics.get(name)
    if t is None:
        raise CliError(f"topic {name} does not exist")
    if t.error is not None:
        if t.error.code() == ck("confluent_kafka").KafkaError.UNKNOWN_TOPIC_OR_PART:
            raise CliError(f"topic {name} does not exist ({t.error.str()})")
        raise CliError(f"topic {name}: {t.error.str()}")
    return t


def parse_kv(items: Sequence[str] | None, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise CliError(f"{what} expects key=value, got {item!r}")
        out[key.strip()] = value
    return out


# ---- topic --------------------------------------------------------------------------------
def topic_create(args: argparse.Namespace) -> int:
    A = ck("confluent_kafka.admin")

    configs = parse_kv(args.config, "--config")
    new = [A.NewTopic(name, num_partitions=args.partitions, replication_factor=args.replicas,
                    config=configs) for name in args.topics]
    futures = admin(args).create_topics(new, request_timeout=args.timeout)
    return _topic_status(args, futures, "create")


def _topic_status(args: argparse.Namespace, futures: dict[str, Any], verb: str) -> int:
    """Wait for one future per topic of ``args.topics``; a TOPIC/STATUS table, exit 1 if any
    failed."""
    rows, failed = [], 0
    for name in args.topics:
        try:
            wait(futures[name], args, f"{verb} {name}")
            rows.append((name, "OK"))
        except CliError as e:
            failed += 1
            rows.append((name, str(e).split(": ", 1)[-1]))
    table(("TOPIC", "STATUS"), rows)
    return 1 if failed else 0


def topic_list(args: argparse.Namespace) -> int:
    md = metadata(args)
    rows = []
    for name, t in sorted(md.topics.items()):
        if name.startswith("__") and not args.internal:
            continue
        replicas = max((len(p.replicas) for p in t.partitions.values()), default=0)
        rows.append((name, len(t.partitions), replicas))
    table(("NAME", "PARTITIONS", "REPLICAS"), rows)
    return 0


def _offsets(args: argparse.Namespace, tps: list[Any], spec: Any,
             problems: list[str]) -> dict[tuple[str, int], int]:
    """Offsets by ``spec``, best effort: a partition whose leader does not answer within the
    time left of ``--timeout`` is left out and named in ``problems``."""
    if not tps:
        return {}
    futures = admin(args).list_offsets({tp: spec for tp in tps}, request_timeout=args.timeout)
    out: dict[tuple[str, int], int] = {}
    for tp, f in futures.items():
        try:
            out[(tp.topic, tp.partition)] = wait(f, args, "list offsets").offset
        except CliError as e:
            problems.append(f"{tp.topic}/{tp.partition}: {e}")
    return out


def topic_describe(args: argparse.Namespace) -> int:
    """Everything is gathered before anything is printed: a topic that is unknown (or a
    cluster that does not answer) fails the command without half a description. Offsets of a
    partition without a leader (or whose leader is gone but not yet noticed) show as ``-``,
    with a warning on stderr, as kafka-topics describes a topic during an outage."""
    K = ck("confluent_kafka")
    A = ck("confluent_kafka.admin")

    topics = [existing_topic(args, name) for name in args.topics]
    problems: list[str] = []
    reports = []
    for name, t in zip(args.topics, topics, strict=True):
        res = A.ConfigResource(A.ResourceType.TOPIC, name)
        configs = wait(admin(args).describe_configs([res])[res], args, f"configs of {name}")
        led = [K.TopicPartition(name, p.id) for p in sorted(t.partitions.values(),
                                                             key=lambda p: p.id)
               if p.leader >= 0]
        start = _offsets(args, led, A.OffsetSpec.earliest(), problems)
        end = _offsets(args, led, A.OffsetSpec.latest(), problems)
        reports.append((name, t, configs, start, end))
    for i, (name, t, configs, start, end) in enumerate(reports):
        if i:
            print()
        section("SUMMARY")
        replicas = max((len(p.replicas) for p in t.partitions.values()), default=0)
        table(("NAME", "PARTITIONS", "REPLICAS"), [(name, len(t.partitions), replicas)])
        print()
        section("CONFIGS")
        table(("KEY", "VALUE", "SOURCE"), [
            (c.name, "(sensitive)" if c.is_sensitive else c.value, _source_name(c.source))
            for c in sorted(configs.values(), key=lambda c: c.name)
            if args.all_configs or not c.is_default])
        print()
        section("PARTITIONS")
        table(("PARTITION", "LEADER", "REPLICAS", "ISR", "LOG-START-OFFSET", "HIGH-WATERMARK"), [
            (p.id, p.leader, ",".join(map(str, p.replicas)), ",".join(map(str, p.isrs)),
             start.get((name, p.id), "-"), end.get((name, p.id), "-"))
            for p in sorted(t.partitions.values(), key=lambda p: p.id)])
    sys.stdout.flush()
    for problem in problems:
        print(f"kafkawire: offsets unavailable for {problem}", file=sys.stderr)
    return 0


def _source_name(source: Any) -> str:
    try:
        return str(ck("confluent_kafka.admin").ConfigSource(source).name)
    except ValueError:
        return str(source)


def topic_delete(args: argparse.Namespace) -> int:
    futures = admin(args).delete_topics(list(args.topics), request_timeout=args.timeout)
    return _topic_status(args, futures, "delete")


def topic_alter(args: argparse.Namespace) -> int:
    A = ck("confluent_kafka.admin")

    cli = admin(args)
    if not (args.set or args.delete or args.partitions):
        raise CliError("nothing to alter: give --set KEY=VALUE, --delete KEY or --partitions N")
    entries = [A.ConfigEntry(k, v, incremental_operation=A.AlterConfigOpType.SET)
               for k, v in parse_kv(args.set, "--set").items()]
    entries += [A.ConfigEntry(k, None, incremental_operation=A.AlterConfigOpType.DELETE)
                for k in args.delete or []]
    if entries:
        res = A.ConfigResource(A.ResourceType.TOPIC, args.topic, incremental_configs=entries)
        wait(cli.incremental_alter_configs([res])[res], args, f"alter configs of {args.topic}")
        for e in entries:
            op = "set" if e.incremental_operation == A.AlterConfigOpType.SET else "deleted"
            print(f"{args.topic}: {e.name} {op}" + (f" to {e.value}" if e.value else ""))
    if args.partitions:
        fut = cli.create_partitions([A.NewPartitions(args.topic, args.partitions)])[args.topic]
        wait(fut, args, f"add partitions to {args.topic}")
        print(f"{args.topic}: now {args.partitions} partitions")
    return 0


# ---- cluster ------------------------------------------------------------------------------
def cluster_info(args: argparse.Namespace) -> int:
    cli = admin(args)
    desc = wait(cli.describe_cluster(request_timeout=args.timeout), args, "describe cluster")
    md = metadata(args)
    section("CLUSTER")
    controller = desc.controller.id if desc.controller is not None else "-"
    topics = sum(1 for n in md.topics if not n.startswith("__"))
    table(("CLUSTER-ID", "CONTROLLER", "BROKERS", "TOPICS"),
          [(desc.cluster_id, controller, len(desc.nodes), topics)])
    print()
    section("BROKERS")
    table(("ID", "HOST", "PORT", "RACK"),
          [(f"{n.id}*" if n.id == controller else n.id, n.host, n.port, n.rack or "")
           for n in sorted(desc.nodes, key=lambda n: n.id)])
    return 0


# ---- wiring -------------------------------------------------------------------------------
def common(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("--bootstrap-server", "-b", metavar="HOST:PORT",
                   default=os.environ.get("KAFKAWIRE_BOOTSTRAP", DEFAULT_BOOTSTRAP),
                   help=f"a broker to start from (default {DEFAULT_BOOTSTRAP})")
    p.add_argument("-X", action="append", metavar="KEY=VALUE",
                   help="a librdkafka client property (repeatable)")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                   help=f"give up waiting for the cluster after this long ({DEFAULT_TIMEOUT_S:g})")
    return p


def _run(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def wrapped(args: argparse.Namespace) -> int:
        try:
            return func(args)
        except CliError as e:
            print(f"kafkawire: {e}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            return 130
        except ImportError as e:
            print(f"kafkawire: the client commands need confluent-kafka ({e}); install it with "
                  "`pip install 'kafkawire[cli]'` or `pip install confluent-kafka`",
                  file=sys.stderr)
            return 2
    return wrapped


def add_topic_commands(sub: Any) -> None:
    t = sub.add_parser("topic", help="create, list, describe, delete, alter topics")
    ts = t.add_subparsers(dest="action", required=True, metavar="ACTION")
    c = common(ts.add_parser("create", help="create topics"))
    c.add_argument("topics", nargs="+", metavar="TOPIC")
    c.add_argument("-p", "--partitions", type=int, default=-1,
                   help="partitions (default: the broker's num.partitions)")
    c.add_argument("-r", "--replicas", type=int, default=-1,
                   help="replication factor (default: the broker's default.replication.factor)")
    c.add_argument("-c", "--config", action="append", metavar="KEY=VALUE",
                   help="a topic config (repeatable), e.g. cleanup.policy=compact")
    c.set_defaults(func=_run(topic_create))
    lst = common(ts.add_parser("list", help="list topics"))
    lst.add_argument("-i", "--internal", action="store_true", help="include internal topics")
    lst.set_defaults(func=_run(topic_list))
    d = common(ts.add_parser("describe", help="configs, partitions and offsets of topics"))
    d.add_argument("topics", nargs="+", metavar="TOPIC")
    d.add_argument("-a", "--all-configs", action="store_true", help="defaults too")
    d.set_defaults(func=_run(topic_describe))
    x = common(ts.add_parser("delete", help="delete topics"))
    x.add_argument("topics", nargs="+", metavar="TOPIC")
    x.set_defaults(func=_run(topic_delete))
    a = common(ts.add_parser("alter", help="set or delete configs, add partitions"))
    a.add_argument("topic", metavar="TOPIC")
    a.add_argument("--set", action="append", metavar="KEY=VALUE", help="set a config")
    a.add_argument("--delete", action="append", metavar="KEY", help="back to the default")
    a.add_argument("--partitions", type=int, metavar="N", help="grow to N partitions")
    a.set_defaults(func=_run(topic_alter))


def add_commands(sub: Any) -> None:
    from kafkawire.tools import cli_cluster, cli_groups, cli_records

    add_topic_commands(sub)
    cli_records.add_commands(sub, common, _run)
    cli_groups.add_commands(sub, common, _run)
    cl = sub.add_parser("cluster", help="the cluster: info; a local cluster: up, status, down, "
                        "kill, restart, pause, partition, chaos...")
    cs = cl.add_subparsers(dest="action", required=True, metavar="ACTION")
    i = common(cs.add_parser("info", help="cluster id, controller, brokers"))
    i.set_defaults(func=_run(cluster_info))
    cli_cluster.add_commands(cs)
