"""Capture the record batches librdkafka writes into Produce requests (regenerates goldens).

Not a test: run by hand, ``python tests/golden/records/capture_librdkafka.py <out dir>``.
A throwaway fake broker on localhost answers ApiVersions (v3), Metadata (v1) and Produce (v7)
just well enough for confluent-kafka's librdkafka to send one batch per codec, and keeps the
``records`` field of the first Produce request. Produce 0-7 and Fetch are advertised because
librdkafka enables message format v2 and zstd only from those versions.
"""

from __future__ import annotations

import socket
import struct
import sys
import threading
from pathlib import Path

import confluent_kafka

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
APIS = {0: (0, 7), 1: (0, 11), 2: (0, 5), 3: (0, 1), 8: (0, 7), 9: (0, 7), 10: (0, 2),
        11: (0, 5), 12: (0, 3), 13: (0, 3), 14: (0, 3), 15: (0, 4), 16: (0, 3), 17: (0, 1),
        18: (0, 3), 19: (0, 4), 20: (0, 4), 22: (0, 1), 23: (0, 2), 24: (0, 1), 25: (0, 1),
        26: (0, 1), 28: (0, 2)}  # fmt: skip


def pattern(i: int) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]:
    """Record i of the 20 in every golden batch: (key, value, headers, timestamp)."""
    headers: list[tuple[str, bytes | None]] = (
        [("h", b"hv%d" % i), ("nullh", None)] if i % 3 == 0 else []
    )
    key = None if i % 4 == 1 else b"key-%d" % i
    value = None if i == 7 else b"value %d " % i * (i + 3)
    return key, value, headers, 1700000000000 + 7 * i


def _frame(conn: socket.socket) -> bytes | None:
    data = b""
    need = 4
    while len(data) < need:
        chunk = conn.recv(need - len(data))
        if not chunk:
            return None
        data += chunk
        if need == 4 and len(data) == 4:
            need = 4 + struct.unpack(">i", data)[0]
    return data[4:]


def _s16(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


def _handle(conn: socket.socket, port: int, out: dict[str, bytes], codec: str) -> None:
    while (f := _frame(conn)) is not None:
        api, ver, corr = struct.unpack_from(">hhi", f)
        pos = 10 + max(struct.unpack_from(">h", f, 8)[0], 0)  # skip client id
        if api == 18 and ver >= 3:
            body = b"\x00\x00" + bytes([len(APIS) + 1])
            for k, (lo, hi) in APIS.items():
                body += struct.pack(">hhh", k, lo, hi) + b"\x00"
            body += struct.pack(">i", 0) + b"\x00"
        elif api == 18:
            body = struct.pack(">hi", 0, len(APIS))
            body += b"".join(struct.pack(">hhh", k, lo, hi) for k, (lo, hi) in APIS.items())
            body += struct.pack(">i", 0) if ver >= 1 else b""
        elif api == 3:  # v1: one broker (us), topic "t" with partition 0 led by it
            body = struct.pack(">ii", 1, 1) + _s16("127.0.0.1") + struct.pack(">ih", port, -1)
            body += struct.pack(">ii", 1, 1) + struct.pack(">h", 0) + _s16("t") + b"\x00"
            body += struct.pack(">ihiiiiiii", 1, 0, 0, 1, 1, 1, 1, 1, 1)
        elif api == 0:
            pos += 2 + max(struct.unpack_from(">h", f, pos)[0], 0) + 6  # txn id, acks, timeout
            pos += 4 + 2 + struct.unpack_from(">h", f, pos + 4)[0] + 4  # 1 topic, 1 partition
            _, size = struct.unpack_from(">ii", f, pos)
            out.setdefault(codec, f[pos + 8 : pos + 8 + size])
            body = struct.pack(">i", 1) + _s16("t") + struct.pack(">iihqqq", 1, 0, 0, 0, -1, 0)
            body += struct.pack(">i", 0)
        else:
            return
        resp = struct.pack(">i", corr) + body
        conn.sendall(struct.pack(">i", len(resp)) + resp)


def capture(codec: str) -> bytes:
    out: dict[str, bytes] = {}
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    port = sock.getsockname()[1]

    def serve() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            threading.Thread(target=_handle, args=(conn, port, out, codec), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": f"127.0.0.1:{port}", "compression.codec": codec,
         "linger.ms": 50, "enable.idempotence": False, "acks": 1}
    )  # fmt: skip
    for i in range(20):
        key, value, headers, ts = pattern(i)
        producer.produce(
            "t", value=value, key=key, headers=headers or None, timestamp=ts, partition=0
        )
    producer.flush(10)
    sock.close()
    return out[codec]


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    print("librdkafka", confluent_kafka.libversion()[0])
    for c in CODECS:
        (target / f"librdkafka_{c}.bin").write_bytes(capture(c))
