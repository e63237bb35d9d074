"""Command line: ``kafkawire serve [server.properties] [--override key=value]...``,
``kafkawire format --cluster-id ID [server.properties] [--override key=value]...
[--standalone | --initial-controllers ... | --no-initial-controllers] [--ignore-formatted]``
(Kafka's ``kafka-storage format``) and ``kafkawire random-uuid``.

Reads Kafka's property names; unknown keys are reported on start. With no arguments it serves a
single node on 127.0.0.1:9092 with data in ./data. SIGINT/SIGTERM shut it down cleanly (logs
closed, clean-shutdown marker written).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from pathlib import Path

import trio

from kafkawire.config import BrokerConfig, ConfigError


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="kafkawire", description="A Kafka-compatible broker")
    sub = ap.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="run a broker")
    s.add_argument("properties", nargs="?", type=Path, help="a Kafka server.properties file")
    s.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE",
        help="override a property (repeatable), like Kafka's kafka-server-start --override",
    )
    s.add_argument("--log-level", default="INFO")
    f = sub.add_parser(
        "format", help="format the log directories (as kafka-storage format -t ID -c FILE)")
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
    sub.add_parser("random-uuid", help="print a new random id (for --cluster-id)")
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
    from kafkawire.broker import Broker

    broker = Broker(cfg)
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


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "random-uuid":
        from kafkawire.storage import random_uuid

        print(random_uuid())
        return 0
    if args.command == "format":
        return _format(args)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
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
    except BaseException as e:  # one clear line for a node that must not start
        err = startup_error(e)
        if err is None:
            raise
        print(f"kafkawire: {err}", file=sys.stderr)
        return 1
    logger.info("kafkawire stopped")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
