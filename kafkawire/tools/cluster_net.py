"""Network namespaces for a local cluster (``kafkawire cluster up --netns``, root only).

Each node runs in its own namespace ``kw<tag>n<id>`` with one interface, ``eth0``, at
``10.213.<s>.<id>/24``, the other end of a veth pair whose host end ``kw<tag>v<id>`` is a port
of the bridge ``kw<tag>a``; the bridge holds ``10.213.<s>.254`` so that clients on the host
reach every node at its own address (no routing, no NAT, nothing outside this machine). A
partition moves the host ends of the partitioned nodes to a second bridge ``kw<tag>b`` that
has no address: the partitioned nodes still reach each other, but neither the other nodes nor
the host, and their open TCP connections stall as they would behind a real network failure;
``heal`` moves them back. ``<tag>`` comes from the cluster directory's path, ``<s>`` from the
tag, so two clusters on one machine get different names and subnets.

What it runs, by hand::

    ip link add kwTAGa type bridge && ip addr add 10.213.S.254/24 dev kwTAGa && ip link set kwTAGa up
    ip netns add kwTAGn1
    ip link add kwTAGv1 type veth peer name kwTAGp1 && ip link set kwTAGp1 netns kwTAGn1
    ip -n kwTAGn1 link set kwTAGp1 name eth0 && ip -n kwTAGn1 addr add 10.213.S.1/24 dev eth0
    ip -n kwTAGn1 link set eth0 up && ip -n kwTAGn1 link set lo up
    ip link set kwTAGv1 master kwTAGa && ip link set kwTAGv1 up
    ip netns exec kwTAGn1 kafkawire serve node-1/server.properties   # the node
    ip link set kwTAGv1 master kwTAGb                                # partition node 1
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

SUBNET_PREFIX = "10.213"


class NetnsError(Exception):
    pass


def available() -> str | None:
    """None when namespaces can be made here, else why not (one line)."""
    if os.geteuid() != 0:
        return "network namespaces need root (ip netns add)"
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is not installed"
    probe = f"kwprobe{os.getpid() % 100000}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"`ip netns add` failed: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def plan(directory: Path) -> dict[str, Any]:
    digest = hashlib.sha1(str(directory.resolve()).encode()).digest()
    tag = digest[:2].hex()
    return {"tag": tag, "subnet": f"{SUBNET_PREFIX}.{20 + digest[2] % 200}", "partitioned": []}


def node_address(net: dict[str, Any], node_id: int) -> str:
    if not 1 <= node_id <= 253:
        raise NetnsError(f"node id {node_id} does not fit a /24 (1..253)")
    return f"{net['subnet']}.{node_id}"


def netns_name(net: dict[str, Any], node_id: int) -> str:
    return f"kw{net['tag']}n{node_id}"


def _bridge(net: dict[str, Any], side: str) -> str:
    return f"kw{net['tag']}{side}"


def _host_end(net: dict[str, Any], node_id: int) -> str:
    return f"kw{net['tag']}v{node_id}"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise NetnsError(f"ip {' '.join(args)}: {r.stderr.strip()}")
    return r


def _link_exists(name: str) -> bool:
    return _ip("link", "show", name, check=False).returncode == 0


def _netns_exists(name: str) -> bool:
    return name in _ip("netns", "list").stdout.split()


def create(net: dict[str, Any], node_ids: list[int]) -> None:
    """Make (or complete) the bridges and one namespace per node; idempotent."""
    why = available()
    if why is not None:
        raise NetnsError(why)
    main, side = _bridge(net, "a"), _bridge(net, "b")
    for br in (main, side):
        if not _link_exists(br):
            _ip("link", "add", br, "type", "bridge")
        _ip("link", "set", br, "up")
    if f"{net['subnet']}.254/24" not in _ip("-o", "addr", "show", "dev", main).stdout:
        _ip("addr", "add", f"{net['subnet']}.254/24", "dev", main)
    for node_id in node_ids:
        ns, host_end = netns_name(net, node_id), _host_end(net, node_id)
        if not _netns_exists(ns):
            _ip("netns", "add", ns)
        if not _link_exists(host_end):
            peer = f"kw{net['tag']}p{node_id}"
            _ip("link", "add", host_end, "type", "veth", "peer", "name", peer)
            _ip("link", "set", peer, "netns", ns)
            _ip("-n", ns, "link", "set", peer, "name", "eth0")
            _ip("-n", ns, "addr", "add", f"{node_address(net, node_id)}/24", "dev", "eth0")
        _ip("-n", ns, "link", "set", "eth0", "up")
        _ip("-n", ns, "link", "set", "lo", "up")
        partitioned = node_id in net.get("partitioned", [])
        _ip("link", "set", host_end, "master", side if partitioned else main)
        _ip("link", "set", host_end, "up")


def partition(net: dict[str, Any], node_ids: list[int]) -> None:
    for node_id in node_ids:
        _ip("link", "set", _host_end(net, node_id), "master", _bridge(net, "b"))


def heal(net: dict[str, Any], node_ids: list[int]) -> None:
    for node_id in node_ids:
        if _link_exists(_host_end(net, node_id)):
            _ip("link", "set", _host_end(net, node_id), "master", _bridge(net, "a"))


def destroy(net: dict[str, Any], node_ids: list[int]) -> None:
    """Remove the namespaces (their veth pairs go with them) and the bridges."""
    for node_id in node_ids:
        ns = netns_name(net, node_id)
        if _netns_exists(ns):
            _ip("netns", "del", ns, check=False)
        if _link_exists(_host_end(net, node_id)):
            _ip("link", "del", _host_end(net, node_id), check=False)
    for side in ("a", "b"):
        if _link_exists(_bridge(net, side)):
            _ip("link", "del", _bridge(net, side), check=False)
