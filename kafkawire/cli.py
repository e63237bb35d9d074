"""Command line.

``kafkawire serve [server.properties] [--override key=value]...`` runs a broker: Kafka's
property names, unknown keys reported on start; with no arguments a single node on
127.0.0.1:9092 with data in ./data, metrics and health on 127.0.0.1:9404 (``metrics.port``).
SIGINT/SIGTERM shut it down cleanly (logs closed, clean-shutdown marker written).

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
    cli_client.add_commands(sub)
    k = sub.add_parser("kafka-tools", help="list Kafka's tools runnable as `kafkawire kafka-...`")
    k.set_defaults(func=cli_kafka.list_tools)
    return ap


async def _serve(cfg: BrokerConfig) -> None:
    from kafkawire.broker import Broker
    from kafkawire.ops_http import OpsEndpoint

    broker = Broker(cfg)
    endpoint = OpsEndpoint(broker)
    ops_listeners = []
    if cfg.metrics_port:
        try:
            ops_listeners = await trio.open_tcp_listeners(cfg.metrics_port, host=cfg.metrics_host)
        except OSError as e:
            raise ConfigError(
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
                    nursery.cancel_scope.cancel()
                    return

        nursery.start_soon(on_signals)
        if ops_listeners:
            await nursery.start(endpoint.serve, ops_listeners)
        await nursery.start(broker.run)


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
    try:
        trio.run(_serve, cfg)
    except KeyboardInterrupt:
        pass
    except ConfigError as e:
        logger.error("%s", e)
        return 2
    logger.info("kafkawire stopped")
    return 0


def main(argv: list[str] | None = None) -> int:
    from kafkawire import cli_kafka

    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0].startswith("kafka-") and argv[0] != "kafka-tools":
        return cli_kafka.run_tool(argv[0], argv[1:])
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
