"""The operations endpoint on ``metrics.port``: Prometheus metrics and health probes.

- ``GET /metrics``: every series of ``kafkawire.ops.metrics`` in Prometheus' text format.
- ``GET /health/live``: 200 while the broker's event loop answers (it serves this endpoint, so
  an answer is the proof); a wedged loop answers nothing and the probe times out.
- ``GET /health/ready``: 200 once the broker serves clients: storage open, this node registered
  in the metadata log and unfenced, the metadata quorum has a leader; 503 before (during start
  and log recovery). The JSON body lists each check. A controller-only node (``process.roles=
  controller``) registers nothing: ready once started with a quorum leader.

A minimal HTTP/1.1 server on the broker's trio loop (no thread), so the collectors read the
broker's state between requests, never concurrently with it. One request per connection
(``Connection: close``); request heads are bounded by ``HTTP_HEAD_MAX_BYTES`` and must arrive
within ``HTTP_READ_TIMEOUT_S``.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

import trio
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)

from kafkawire.ops.metrics import BrokerCollector

if TYPE_CHECKING:
    from kafkawire.broker import Broker

log = logging.getLogger("kafkawire.http")

#: largest request head (request line + headers) accepted, in bytes
HTTP_HEAD_MAX_BYTES = 8192
#: time a client has to send its request head, in seconds
HTTP_READ_TIMEOUT_S = 10.0

_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            503: "Service Unavailable"}


def readiness(broker: Broker) -> tuple[bool, dict[str, bool]]:
    checks = {"started": broker.started.is_set(), "registered": False, "unfenced": False,
              "quorum_leader": False}
    if "broker" not in broker.config.process_roles:  # a controller-only node registers nothing
        del checks["registered"], checks["unfenced"]
    if broker.quorum is not None and broker.quorum.log is not None:
        reg = broker.image.brokers.get(broker.node_id)
        if "registered" in checks:
            checks["registered"] = reg is not None
            checks["unfenced"] = reg is not None and not reg.fenced
        # a one-voter quorum: this node leads it once its metadata log is open
        checks["quorum_leader"] = broker.quorum.epoch > 0
    return all(checks.values()), checks


class OpsEndpoint:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(BrokerCollector(broker))
        # the resource series every Prometheus client library exports (process_cpu_seconds_
        # total, process_resident_memory_bytes, process_open_fds, ...; python_gc_*,
        # python_info), read from /proc when scraped: dashboards' CPU/memory/fd panels
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)

    async def serve(
        self, listeners: list[trio.SocketListener],
        task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        host, bound = listeners[0].socket.getsockname()[:2]
        log.info("metrics and health on http://%s:%d/metrics, /health/ready, /health/live",
                 host, bound)
        task_status.started(int(bound))
        await trio.serve_listeners(self.handle, listeners)

    def route(self, method: str, path: str) -> tuple[int, str, bytes]:
        path = path.split("?", 1)[0]
        if method not in ("GET", "HEAD"):
            return 405, "text/plain", b"only GET\n"
        if path == "/metrics":
            return 200, CONTENT_TYPE_LATEST, generate_latest(self.registry)
        if path == "/health/live":
            return 200, "application/json", b'{"status": "alive"}\n'
        if path == "/health/ready":
            ok, checks = readiness(self.broker)
            body: dict[str, Any] = {"status": "ready" if ok else "not ready", "checks": checks}
            return (200 if ok else 503), "application/json", json.dumps(body).encode() + b"\n"
        return 404, "text/plain", b"not found: try /metrics, /health/ready, /health/live\n"

    async def handle(self, stream: trio.SocketStream) -> None:
        try:
            head = await self._read_head(stream)
            if head is None:
                return
            parts = head.split(b"\r\n", 1)[0].decode("latin-1").split()
            if len(parts) != 3 or not parts[2].startswith("HTTP/"):
                status, ctype, body = 400, "text/plain", b"bad request\n"
                method = "GET"
            else:
                method = parts[0]
                status, ctype, body = self.route(method, parts[1])
            header = (f"HTTP/1.1 {status} {_REASONS.get(status, '')}\r\n"
                      f"Content-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                      "Connection: close\r\n\r\n").encode("latin-1")
            await stream.send_all(header if method == "HEAD" else header + body)
        except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
            pass
        except Exception:
            log.exception("error answering an HTTP request on the metrics port")
        finally:
            with trio.move_on_after(1) as cs:
                cs.shield = True
                await stream.aclose()

    async def _read_head(self, stream: trio.SocketStream) -> bytes | None:
        buf = bytearray()
        with trio.move_on_after(HTTP_READ_TIMEOUT_S):
            while b"\r\n\r\n" not in buf and b"\n\n" not in buf:
                if len(buf) > HTTP_HEAD_MAX_BYTES:
                    return None
                data = await stream.receive_some(4096)
                if not data:
                    return None
                buf += data
            return bytes(buf)
        return None
