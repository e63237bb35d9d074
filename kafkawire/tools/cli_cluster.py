"""``kafkawire cluster up|status|down|kill|stop|start|restart|pause|resume|partition|heal|chaos``:
a local cluster of real processes (``kafkawire.tools.cluster``), next to ``cluster info``.

``up --nodes 3 [--controllers 3] [--dir DIR] [--netns] [--override KEY=VALUE]`` prints exactly
one line on stdout, ``bootstrap: host:port,...``, once the cluster serves; progress and errors
go to stderr. Every other command takes ``--dir`` (default ``./data/cluster``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from kafkawire.tools.cluster import DEFAULT_DIR, READY_TIMEOUT_S, ClusterError, LocalCluster


def _overrides(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise ClusterError(f"--override wants KEY=VALUE, not {item!r}")
        out[key.strip()] = value.strip()
    return out


def cluster_up(args: argparse.Namespace) -> int:
    cluster = LocalCluster(args.dir)
    network = "netns" if args.netns else "loopback"
    if cluster.state_path.exists():
        st = cluster.state
        print(f"kafkawire: starting the existing cluster {st.cluster_id} in {cluster.dir} "
              f"({len(st.nodes)} nodes, {st.network}; --nodes/--controllers/--netns apply to "
              "a new cluster only)", file=sys.stderr)
    else:
        print(f"kafkawire: starting {args.nodes} broker node(s)"
              + (f" and {args.controllers} controller(s)" if args.controllers else "")
              + f" in {cluster.dir} ({network})", file=sys.stderr)
    bootstrap = cluster.up(args.nodes, args.controllers, network, _overrides(args.override),
                           timeout_s=args.timeout)
    print(f"bootstrap: {bootstrap}", flush=True)
    return 0


def cluster_status(args: argparse.Namespace) -> int:
    from kafkawire.tools.cli_client import table

    cluster = LocalCluster(args.dir)
    rows = cluster.status_rows()
    print(f"CLUSTER {cluster.state.cluster_id} in {cluster.dir} ({cluster.state.network})")
    print(f"bootstrap: {cluster.bootstrap}")
    try:
        print(f"quorum leader: {cluster.quorum_leader(timeout_s=2.0)}")
    except ClusterError:
        print("quorum leader: none")
    cols = ["node", "roles", "address", "controller", "metrics", "pid", "state", "ready"]
    table([c.upper() for c in cols], [[r[c] for c in cols] for r in rows])
    return 0


def cluster_down(args: argparse.Namespace) -> int:
    LocalCluster(args.dir).down(purge=args.purge)
    return 0


def _per_node(method: str) -> Any:
    def run(args: argparse.Namespace) -> int:
        cluster = LocalCluster(args.dir)
        for node_id in args.node:
            if method == "restart":
                cluster.restart(node_id, hard=args.hard, timeout_s=args.timeout)
            elif method == "start":
                cluster.start_node(node_id)
                cluster.wait_ready([node_id], args.timeout)
            else:
                getattr(cluster, method)(node_id)
        return 0
    return run


def cluster_partition(args: argparse.Namespace) -> int:
    LocalCluster(args.dir).partition(args.node)
    return 0


def cluster_heal(args: argparse.Namespace) -> int:
    LocalCluster(args.dir).heal()
    return 0


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``10m``, ``1h``: seconds."""
    units = {"s": 1.0, "m": 60.0, "h": 3600.0}
    text = text.strip()
    scale = units.get(text[-1:], None)
    try:
        return float(text[:-1]) * scale if scale else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 90s, 10m)") from None


def cluster_chaos(args: argparse.Namespace) -> int:
    import time

    from kafkawire.tools import chaos

    cluster = LocalCluster(args.dir)
    started_here = not cluster.state_path.exists()
    if started_here:
        print(f"kafkawire: no cluster in {cluster.dir}: starting {args.nodes} nodes",
              file=sys.stderr)
        cluster.up(args.nodes, 0, "netns" if args.netns else "loopback")
    out = args.out or cluster.dir / f"chaos-{time.strftime('%Y%m%d-%H%M%S')}"
    print(f"kafkawire: chaos for {args.duration:g}s against {cluster.bootstrap}, "
          f"results in {out}", file=sys.stderr)
    try:
        rep = chaos.run(cluster, args.duration, Path(out), seed=args.seed,
                        interval_s=args.interval, hold_s=args.hold, rate=args.rate,
                        replication_factor=args.replication_factor)
    finally:
        if started_here and not args.keep:
            cluster.down()
    print((Path(out) / "summary.txt").read_text(), end="")
    return 0 if rep.ok else 1


def _guard(fn: Any) -> Any:
    def run(args: argparse.Namespace) -> int:
        from kafkawire.tools.cluster_net import NetnsError

        try:
            return int(fn(args))
        except (ClusterError, NetnsError, OSError) as e:
            print(f"kafkawire: {e}", file=sys.stderr)
            return 1
    return run


def add_commands(cs: Any) -> None:
    """Add the local-cluster actions to the ``cluster`` command group ``cs``."""
    def with_dir(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--dir", type=Path, default=DEFAULT_DIR,
                       help=f"the cluster directory (default {DEFAULT_DIR})")
        return p

    u = with_dir(cs.add_parser("up", help="start a local cluster of kafkawire processes"))
    u.add_argument("--nodes", type=int, default=3, help="broker nodes (default 3)")
    u.add_argument("--controllers", type=int, default=0,
                   help="dedicated controllers (default 0: the first 3 nodes are combined "
                        "broker+controller nodes)")
    u.add_argument("--netns", action="store_true",
                   help="each node in its own network namespace (root; needed for partition)")
    u.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="a property for every node (repeatable)")
    u.add_argument("--timeout", type=float, default=READY_TIMEOUT_S,
                   help=f"seconds to wait for the cluster to serve ({READY_TIMEOUT_S:g})")
    u.set_defaults(func=_guard(cluster_up))
    with_dir(cs.add_parser("status", help="the local cluster's nodes")).set_defaults(
        func=_guard(cluster_status))
    d = with_dir(cs.add_parser("down", help="stop every node (SIGTERM, then SIGKILL)"))
    d.add_argument("--purge", action="store_true", help="also delete the cluster directory")
    d.set_defaults(func=_guard(cluster_down))
    helps = {"kill": "kill -9 a node", "stop": "stop a node (SIGTERM: controlled shutdown)",
             "start": "start a stopped node", "restart": "stop and start a node",
             "pause": "freeze a node (SIGSTOP)", "resume": "unfreeze a paused node (SIGCONT)"}
    for name, text in helps.items():
        p = with_dir(cs.add_parser(name, help=text))
        p.add_argument("node", type=int, nargs="+", metavar="NODE", help="node id")
        if name in ("restart", "start"):
            p.add_argument("--timeout", type=float, default=READY_TIMEOUT_S,
                           help="seconds to wait until it serves again")
        if name == "restart":
            p.add_argument("--hard", action="store_true", help="kill -9 instead of SIGTERM")
        p.set_defaults(func=_guard(_per_node(name)))
    p = with_dir(cs.add_parser(
        "partition", help="cut nodes off from the rest and from clients (--netns clusters)"))
    p.add_argument("node", type=int, nargs="+", metavar="NODE", help="node id")
    p.set_defaults(func=_guard(cluster_partition))
    with_dir(cs.add_parser("heal", help="undo every partition")).set_defaults(
        func=_guard(cluster_heal))
    c = with_dir(cs.add_parser(
        "chaos", help="a client workload under injected faults, then a history check and plot"))
    c.add_argument("--duration", type=parse_duration, default=600.0,
                   help="how long to inject faults: 90s, 10m... (default 10m)")
    c.add_argument("--interval", type=parse_duration, default=10.0,
                   help="time between faults (default 10s)")
    c.add_argument("--hold", type=parse_duration, default=5.0,
                   help="how long each fault lasts (default 5s)")
    c.add_argument("--rate", type=float, default=200.0,
                   help="idempotent producer records per second (default 200)")
    c.add_argument("--seed", type=int, default=1, help="the fault schedule's random seed")
    c.add_argument("--replication-factor", type=int,
                   help="of the workload's topic (default: min(3, brokers))")
    c.add_argument("--out", type=Path, help="result directory (default DIR/chaos-<time>)")
    c.add_argument("--nodes", type=int, default=3,
                   help="nodes of the cluster started when DIR has none (default 3)")
    c.add_argument("--netns", action="store_true",
                   help="start that cluster in network namespaces (adds partition faults)")
    c.add_argument("--keep", action="store_true", help="leave the cluster it started running")
    c.set_defaults(func=_guard(cluster_chaos))
