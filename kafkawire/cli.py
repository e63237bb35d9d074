"""Command line: ``kafkawire serve [server.properties] [--override key=value]...``.

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
    return ap


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
                    nursery.cancel_scope.cancel()
                    return

        nursery.start_soon(on_signals)
        await nursery.start(broker.run)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
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
    try:  # listeners, keystores, SASL and authorizer settings: refused before starting
        from kafkawire.authorizer import Authorizer
        from kafkawire.listener_security import ListenerSecurity

        ListenerSecurity(cfg, dict).check([lst.name for lst in cfg.broker_listeners])
        Authorizer(cfg, lambda: None)  # type: ignore[arg-type,return-value]
    except ConfigError as e:
        print(f"kafkawire: {e}", file=sys.stderr)
        return 2
    try:
        trio.run(_serve, cfg)
    except KeyboardInterrupt:
        pass
    logger.info("kafkawire stopped")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
