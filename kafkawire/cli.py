"""Command line.

``kafkawire serve [server.properties] [--override key=value]...`` runs a broker: Kafka's
property names, unknown keys reported on start; with no arguments a single node on
127.0.0.1:9092 with data in ./data, metrics and health on 127.0.0.1:9404 (``metrics.port``).
SIGINT/SIGTERM shut it down cleanly (logs closed, clean-shutdown marker written).

``kafkawire format --cluster-id ID [server.properties] [--override key=value]...
[--standalone | --initial-controllers ... | --no-initial-controllers] [--ignore-formatted]``
formats the log directories (Kafka's ``kafka-storage format``); ``kafkawire random-uuid``
prints a new cluster id.

Client commands (any Kafka broker, through confluent-kafka/librdkafka; see
``kafkawire.cli_client``): ``topic``, ``produce``, ``consume``, ``group``, ``cluster info``.
Kafka's own tools by their usual names: ``kafkawire kafka-topics ...`` runs the Apache Kafka
jars (``kafkawire.cli_kafka``).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import trio

from kafkawire.config import BrokerConfig, ConfigError
from kafkawire.logs import LOG_FORMATS, log_level, setup_logging


def package_version() -> str:
    try:
        return version("kafkawire")
    except PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"


def build_parser() -> argparse.ArgumentParser:
    from kafkawire import cli_client, cli_kafka

    ap = argparse.ArgumentParser(
        prog="kafkawire", description="A Kafka-compatible broker, and a client CLI for any Kafka",
        epilog="Kafka's tools: kafkawire kafka-topics|kafka-console-producer|... [ARGS] "
               f"({', '.join(cli_kafka.TOOLS[:4])}, ...; `kafkawire kafka-tools` lists them)")
    ap.add_argument("--version", action="version", version=f"kafkawire {package_version()}")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")
    s = sub.add_parser("serve", help="run a broker")
    s.add_argument("properties", nargs="?", type=Path, help="a Kafka server.properties file")
    s.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE",
        help="override a property (repeatable), like Kafka's kafka-server-start --override",
    )
    s.add_argument("--log-level", type=log_level, default="INFO",
                   help="CRITICAL, ERROR, WARNING, INFO (default) or DEBUG")
    s.add_argument("--log-format", choices=LOG_FORMATS, default="text",
                   help="text (default) or json: one JSON object per line")
    s.set_defaults(func=run_serve)
    f = sub.add_parser(
        "format", help="format the log directories (as kafka-storage format -t ID -c FILE)")
    f.set_defaults(func=_format)
    f.add_argument("properties", nargs="?", type=Path, help="a Kafka server.properties file")
    f.add_argument("--config", "-c", type=Path, dest="config_file",
                   help="the properties file (kafka-storage's spelling)")
    f.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="override a property (repeatable), as for serve")
    f.add_argument("--cluster-id", "-t", required=True, help="the cluster id (random-uuid)")
    f.add_argument("--ignore-formatted", "-g", action="store_true",
                   help="skip directories that are already formatted instead of failing")
    quorum = f.add_mutually_exclusive_group()
    quorum.add_argument("--standalone", "-s", action="store_true",
                        help="start a dynamic quorum with this controller as its only voter")
    quorum.add_argument("--initial-controllers", "-I", metavar="ID@HOST:PORT:DIR,...",
                        help="the initial voters of a dynamic quorum (same on every node)")
    quorum.add_argument("--no-initial-controllers", "-N", action="store_true",
                        help="a controller that will join an existing dynamic quorum")
    f.add_argument("--release-version", "-r", help="the metadata.version to start with")
    f.add_argument("--feature", "-f", action="append", default=[], metavar="NAME=LEVEL",
                   help="a feature level to start with (repeatable), e.g. group.version=0")
    f.add_argument("--add-scram", "-S", action="append", default=[], metavar="CREDENTIAL",
                   help="a SCRAM credential, e.g. 'SCRAM-SHA-256=[name=alice,password=x]'")
    u = sub.add_parser("random-uuid", help="print a new random id (for --cluster-id)")
    u.set_defaults(func=_random_uuid)
    cli_client.add_commands(sub)
    k = sub.add_parser("kafka-tools", help="list Kafka's tools runnable as `kafkawire kafka-...`")
    k.set_defaults(func=cli_kafka.list_tools)
    return ap


def _format(args: argparse.Namespace) -> int:
    import time

    from kafkawire.storage import FormatOptions, StorageError, format_storage

    if args.properties is not None and args.config_file is not None:
        print("kafkawire: give the properties file once (positional or --config)", file=sys.stderr)
        return 2
    try:
        cfg = BrokerConfig.load(args.properties or args.config_file, args.override)
        opts = FormatOptions(
            cluster_id=args.cluster_id, standalone=args.standalone,
            initial_controllers=args.initial_controllers,
            no_initial_controllers=args.no_initial_controllers,
            ignore_formatted=args.ignore_formatted, release_version=args.release_version,
            features=tuple(args.feature), add_scram=tuple(args.add_scram),
        )
        format_storage(cfg, opts, print, int(time.time() * 1000))
    except (ConfigError, StorageError, OSError) as e:
        print(f"kafkawire: {e}", file=sys.stderr)
        return 1
    return 0


async def _serve(cfg: BrokerConfig) -> None:
    from kafkawire.broker import Broker, StartupError
    from kafkawire.ops_http import OpsEndpoint

    broker = Broker(cfg)
    endpoint = OpsEndpoint(broker)
    ops_listeners = []
    if cfg.metrics_port:
        try:
            ops_listeners = await trio.open_tcp_listeners(cfg.metrics_port, host=cfg.metrics_host)
        except OSError as e:  # a listener that cannot be had, as a busy broker port
            raise StartupError(
                f"cannot serve metrics on {cfg.metrics_host}:{cfg.metrics_port}: "
                f"{e.strerror or e} (set metrics.port to a free port, or 0 to turn it off)"
            ) from None
    async with trio.open_nursery() as nursery:
        async def on_signals() -> None:
            with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as sigs:
                async for signum in sigs:
                    logging.getLogger("kafkawire").info(
                        "received %s, shutting down", signal.Signals(signum).name
                    )
                    if signum == signal.SIGTERM:
                        # Kafka's controlled shutdown: leadership moves away first (bounded;
                        # a second signal stops at once)
                        async with trio.open_nursery() as inner:
                            async def shut_down_then_stop() -> None:
                                await broker.controlled_shutdown()
                                inner.cancel_scope.cancel()

                            inner.start_soon(shut_down_then_stop)
                            async for _again in sigs:
                                break
                            inner.cancel_scope.cancel()
                    nursery.cancel_scope.cancel()
                    return

        nursery.start_soon(on_signals)
        if ops_listeners:
            await nursery.start(endpoint.serve, ops_listeners)
        await nursery.start(broker.run)


def startup_error(exc: BaseException) -> Exception | None:
    """The refusal to start (storage not formatted or of another cluster, metadata that cannot
    be loaded) inside what ``trio.run`` raised, if that is what stopped the node."""
    from kafkawire.bootstrap import BootstrapError
    from kafkawire.metadata_snapshots import MetadataLoadError
    from kafkawire.storage import StorageError

    if isinstance(exc, (StorageError, MetadataLoadError, ConfigError, BootstrapError)):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for sub in exc.exceptions:
            found = startup_error(sub)
            if found is not None:
                return found
    return None


def _random_uuid(args: argparse.Namespace) -> int:
    from kafkawire.storage import random_uuid

    print(random_uuid())
    return 0


def run_serve(args: argparse.Namespace) -> int:
    setup_logging(args.log_level, args.log_format)
    try:
        cfg = BrokerConfig.load(args.properties, args.override)
    except (ConfigError, OSError) as e:
        print(f"kafkawire: {e}", file=sys.stderr)
        return 2
    logger = logging.getLogger("kafkawire")
    for key in cfg.unknown:
        logger.warning("unknown configuration key %r (ignored)", key)
    for key in cfg.ignored:
        logger.warning("configuration key %r is accepted but has no effect in kafkawire", key)
    try:  # listeners, keystores, SASL and authorizer settings: refused before starting
        from kafkawire.authorizer import Authorizer
        from kafkawire.listener_security import ListenerSecurity

        ListenerSecurity(cfg, dict).check([lst.name for lst in cfg.listeners])
        Authorizer(cfg, lambda: None)  # type: ignore[arg-type,return-value]
        if cfg.broker_listeners:  # this broker's own connections to the others
            from kafkawire.inter_broker import inter_broker_listener, inter_broker_security

            inter_broker_security(cfg, {}, inter_broker_listener(cfg))
        if cfg.names_a_quorum:  # its connections to the controllers (Raft, registration)
            from kafkawire.inter_broker import controller_security

            controller_security(cfg, {})
    except ConfigError as e:
        print(f"kafkawire: {e}", file=sys.stderr)
        return 2
    from kafkawire.broker import StartupError
    from kafkawire.loop_monitor import instruments_from_env

    try:
        trio.run(_serve, cfg, instruments=instruments_from_env())
    except KeyboardInterrupt:
        pass
    except BaseException as e:  # one clear line for a node that must not start
        bound = _find(e, StartupError)  # a listener or a log directory that cannot be had
        if bound is not None:
            logger.error("kafkawire cannot start: %s", bound)
            return 1
        err = startup_error(e)  # storage or metadata that must not be served
        if err is None:
            raise
        print(f"kafkawire: {err}", file=sys.stderr)
        return 1
    logger.info("kafkawire stopped")
    return 0


def main(argv: list[str] | None = None) -> int:
    from kafkawire import cli_kafka

    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0].startswith("kafka-") and argv[0] != "kafka-tools":
        return cli_kafka.run_tool(argv[0], argv[1:])
    args = build_parser().parse_args(argv)
    return int(args.func(args))


def _find(exc: BaseException, kind: type[Exception]) -> BaseException | None:
    """``exc`` itself or the first ``kind`` inside (nested) exception groups."""
    if isinstance(exc, kind):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for sub in exc.exceptions:
            found = _find(sub, kind)
            if found is not None:
                return found
    return None


if __name__ == "__main__":
    raise SystemExit(main())
