"""docker-compose.yml for real: a Docker engine from Debian's packages, a base image built with
debootstrap + ``docker import`` (no registry), our image built on it with ``BASE_IMAGE``, then
the compose cluster: stock clients (confluent-kafka) on the host and in a container produce at
acks=all and consume; healthchecks turn unhealthy (node frozen) and healthy again; a node whose
process dies is restarted by the restart policy; ``docker kill`` of the leader's container and
nothing acknowledged is lost.

Where no engine can run (no dockerd and none installable, not root, a sandbox refusing
containers) or no compose command exists, the tests skip saying why. Marked ``docker`` (and
``slow``); they run with ``KAFKAWIRE_DOCKER_TESTS=1``, which ``make docker-test`` sets (and
``make test``, in the background after the compat stage: docs/CLUSTER.md). ``make
docker-test`` also removes what a run leaves (``python -m tests.docker_env cleanup``).

One cluster of ``docker-compose.yml`` as shipped (three voters) serves the first four tests,
in order: clients on the host and in a container; healthcheck and restart policy; ``docker
kill`` of the quorum leader; ``docker kill`` of an RF=3 partition's leader with nothing
acknowledged lost. ``test_split_compose_file`` runs ``docker-compose.split.yml``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import docker_env

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(1200)]
ROOT = docker_env.ROOT
HEALTH_TIMEOUT_S = 180.0

CLIENT_SCRIPT = r"""
import sys, uuid
from confluent_kafka import Consumer, Producer
bootstrap, topic, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
acked = []
p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
for i in range(n):
    p.produce(topic, f"container-{i}".encode(),
              on_delivery=lambda e, m: e is None and acked.append(m.value()))
    p.poll(0)
p.flush(60)
c = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
              "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
c.subscribe([topic])
seen = set()
for _ in range(120):
    for m in c.consume(1000, 1.0):
        if not m.error() and m.value().startswith(b"container-"):
            seen.add(m.value())
    if len(seen) >= n:
        break
c.close()
seen = len(seen)
print(f"acked={len(acked)} seen={seen}")
"""


class Compose:
    def __init__(self, files: list[Path], project: str) -> None:
        cmd = docker_env.compose_command()
        assert cmd is not None
        self.cmd = cmd + ["-p", project] + [a for f in files for a in ("-f", str(f))]
        self.project = project
        self.env = dict(os.environ, BASE_IMAGE=docker_env.BASE_IMAGE,
                        KAFKAWIRE_CLUSTER_ID=_cluster_id())

    def __call__(self, *args: str, check: bool = True, timeout_s: float = 600.0
                 ) -> subprocess.CompletedProcess[str]:
        r = subprocess.run([*self.cmd, *args], capture_output=True, text=True, cwd=ROOT,
                           env=self.env, timeout=timeout_s)
        if check and r.returncode != 0:
            raise AssertionError(f"{' '.join(args)}: {r.stderr[-3000:]}")
        return r

    def container(self, service: str) -> str:
        return self("ps", "-q", service).stdout.strip()

    def inspect(self, service: str) -> dict[str, Any]:
        out = subprocess.run(["docker", "inspect", self.container(service)],
                             capture_output=True, text=True, check=True, timeout=60).stdout
        return dict(json.loads(out)[0])

    def health(self, service: str) -> str:
        state = self.inspect(service)["State"]
        return str(state.get("Health", {}).get("Status", state.get("Status")))

    def wait_health(self, services: list[str], want: str, timeout_s: float = HEALTH_TIMEOUT_S,
                    skip_on: tuple[str, str] | None = None) -> float:
        """Seconds until every service is ``want``; skips the test with ``skip_on[1]`` once
        the logs show ``skip_on[0]``."""
        t0 = time.monotonic()
        while True:
            states = {s: self.health(s) for s in services}
            if all(v == want for v in states.values()):
                return time.monotonic() - t0
            if time.monotonic() - t0 > timeout_s:
                logs = self("logs", "--tail", "20", check=False).stdout
                raise AssertionError(f"not {want} after {timeout_s:g}s: {states}\n{logs}")
            if skip_on and skip_on[0] in self.logs():
                pytest.skip(skip_on[1])
            time.sleep(1)

    def logs(self) -> str:
        return self("logs", "--tail", "40", check=False).stdout


def _cluster_id() -> str:
    from kafkawire.storage.format import random_uuid

    return random_uuid()


def _ports_free(ports: list[int]) -> list[int]:
    busy = []
    for port in ports:
        with socket.socket() as s:
            try:
                s.bind(("0.0.0.0", port))
            except OSError:
                busy.append(port)
    return busy


@pytest.fixture(scope="module")
def image() -> str:
    if os.environ.get("KAFKAWIRE_DOCKER_TESTS") != "1":
        pytest.skip("the Docker cluster tests take minutes (base image, build, two compose "
                    "clusters): `make docker-test` runs them (KAFKAWIRE_DOCKER_TESTS=1), and "
                    "`make test` in its docker stage")
    why = docker_env.engine()
    if why is not None:
        pytest.skip(f"no Docker engine: {why}")
    if docker_env.compose_command() is None:
        pytest.skip("no compose command (docker compose plugin or Debian's docker-compose)")
    docker_env.remove_test_projects()  # what an interrupted run left (ports, containers)
    t0 = time.monotonic()
    base = docker_env.base_image()
    why = docker_env.container_runs(base)
    if why is not None:
        pytest.skip(f"the Docker engine cannot run a container here: {why}")
    t1 = time.monotonic()
    name = docker_env.project_image()
    print(f"\nbase image {base} in {t1 - t0:.0f}s, {name} built in {time.monotonic() - t1:.0f}s"
          f" ({docker_env.image_size_mb(name):.0f} MB)")
    return name


@pytest.fixture
def compose_project(image: str, tmp_path: Path) -> Iterator[list[Compose]]:
    made: list[Compose] = []
    yield made
    for c in made:
        c("down", "-v", "--remove-orphans", check=False)


def host_produce(bootstrap: str, topic: str, values: list[str]) -> list[str]:
    from confluent_kafka import Producer

    acked: list[str] = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "message.timeout.ms": 60000})
    for v in values:
        p.produce(topic, v.encode(), on_delivery=lambda e, m: e is None and acked.append(
            (m.value() or b"").decode()))
        p.poll(0)
    p.flush(90)
    return acked


def host_consume(bootstrap: str, topic: str, expect: int) -> list[str]:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    c.subscribe([topic])
    out: list[str] = []
    deadline = time.monotonic() + 90
    while len(out) < expect and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is not None and m.error() is None:
            out.append((m.value() or b"").decode())
    c.close()
    return out


def create_topic(bootstrap: str, topic: str, partitions: int, rf: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, rf)])[topic].result(60)


def container_client(compose: Compose, image: str, bootstrap: str, topic: str, n: int) -> str:
    network = f"{compose.project}_default"
    r = subprocess.run(["docker", "run", "--rm", "--network", network, "--entrypoint",
                        "python3", image, "-c", CLIENT_SCRIPT, bootstrap, topic, str(n)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout.strip()


def freeze_and_thaw(compose: Compose, service: str) -> None:
    """SIGSTOP the node's process: the healthcheck must go unhealthy; SIGCONT: healthy."""
    pid = int(compose.inspect(service)["State"]["Pid"])
    os.kill(pid, 19)  # SIGSTOP
    try:
        compose.wait_health([service], "unhealthy", timeout_s=90)
    finally:
        os.kill(pid, 18)  # SIGCONT
    compose.wait_health([service], "healthy", timeout_s=90)


HOST_BOOTSTRAP = "localhost:19091,localhost:19092,localhost:19093"
NODES = ["kafkawire-1", "kafkawire-2", "kafkawire-3"]


@pytest.fixture(scope="module")
def three(image: str) -> Iterator[Compose]:
    """docker-compose.yml as shipped, up and healthy, shared by the tests below (each leaves
    every node healthy again, except the last, which kills one); ``down -v`` after them."""
    busy = _ports_free([19091, 19092, 19093, 19401, 19402, 19403])
    assert not busy, f"host ports {busy} are taken (docker-compose.yml publishes them)"
    compose = Compose([ROOT / "docker-compose.yml"], f"kwthree{os.getpid()}")
    try:
        compose("up", "-d", "--no-build")
        took = compose.wait_health(NODES, "healthy", skip_on=(
            "single-voter quorum", "this build runs a single-voter quorum only (multi-node "
            "quorum not merged): the 3-node compose cluster cannot form"))
        print(f"three nodes healthy in {took:.0f}s")
        yield compose
    finally:
        compose("down", "-v", "--remove-orphans", check=False)


def test_three_nodes_serve_clients_on_the_host_and_in_containers(three: Compose,
                                                                 image: str) -> None:
    """Non-root nodes; the brokers as the host sees them (localhost:1909N) and as a container
    sees them (kafkawire-N:9092); a host client and a client in a container produce at
    acks=all to an RF=3 topic and read everything back."""
    from confluent_kafka.admin import AdminClient

    assert {three.inspect(n)["Config"]["User"] for n in NODES} == {"kafkawire"}
    md = AdminClient({"bootstrap.servers": HOST_BOOTSTRAP}).list_topics(timeout=30)
    assert sorted(md.brokers) == [1, 2, 3]
    assert {b.host for b in md.brokers.values()} == {"localhost"}
    seen = container_brokers(three, image, "kafkawire-2:9092")
    assert seen == "1 kafkawire-1:9092,2 kafkawire-2:9092,3 kafkawire-3:9092", seen
    create_topic(HOST_BOOTSTRAP, "shared", 3, 3)  # any broker forwards it to the controller
    acked = host_produce(HOST_BOOTSTRAP, "shared", [f"host-{i}" for i in range(500)])
    assert len(acked) == 500
    out = container_client(three, image, "kafkawire-1:9092,kafkawire-3:9092", "shared", 300)
    assert out == "acked=300 seen=300", out
    got = host_consume(HOST_BOOTSTRAP, "shared", 800)
    assert sorted(g for g in got if g.startswith("host-")) == sorted(acked)
    assert len(got) == 800


def test_healthcheck_and_restart_policy(three: Compose) -> None:
    """SIGSTOP of a node's process turns its healthcheck unhealthy and SIGCONT healthy again;
    a node whose process dies (not a `docker kill`) is restarted by the restart policy."""
    freeze_and_thaw(three, "kafkawire-3")
    before = three.inspect("kafkawire-3")["RestartCount"]
    os.kill(int(three.inspect("kafkawire-3")["State"]["Pid"]), 9)
    deadline = time.monotonic() + 60
    while three.inspect("kafkawire-3")["RestartCount"] <= before:
        assert time.monotonic() < deadline, "not restarted"
        time.sleep(0.5)
    three.wait_health(NODES, "healthy")


def test_docker_kill_of_the_quorum_leader(three: Compose) -> None:
    """`docker kill` of the quorum leader's container: a new leader with a higher epoch, the
    other two stay healthy, the killed one stays exited (a kill by hand is not restarted);
    `start` brings it back healthy."""
    from kafkawire.tools.cluster import describe_quorum_leader

    leader, epoch = describe_quorum_leader(HOST_BOOTSTRAP.split(","))
    assert leader in (1, 2, 3)
    subprocess.run(["docker", "kill", three.container(f"kafkawire-{leader}")], check=True,
                   capture_output=True, timeout=60)
    rest = [f"localhost:1909{n}" for n in (1, 2, 3) if n != leader]
    deadline = time.monotonic() + 60
    while True:
        new, new_epoch = describe_quorum_leader(rest)
        if new not in (-1, leader):
            break
        assert time.monotonic() < deadline, "no new quorum leader"
        time.sleep(0.5)
    assert new_epoch > epoch
    assert three.inspect(f"kafkawire-{leader}")["State"]["Status"] == "exited"
    three.wait_health([n for n in NODES if n != f"kafkawire-{leader}"], "healthy")
    three("start", f"kafkawire-{leader}")
    three.wait_health(NODES, "healthy")


CONTAINER_BROKERS = r"""
import sys
from confluent_kafka.admin import AdminClient
md = AdminClient({"bootstrap.servers": sys.argv[1]}).list_topics(timeout=30)
print(",".join(f"{b.id} {b.host}:{b.port}" for b in sorted(md.brokers.values(), key=lambda b: b.id)))
"""


def container_brokers(compose: Compose, image: str, bootstrap: str) -> str:
    r = subprocess.run(["docker", "run", "--rm", "--network", f"{compose.project}_default",
                        "--entrypoint", "python3", image, "-c", CONTAINER_BROKERS, bootstrap],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout.strip()


def test_docker_kill_of_the_partition_leader_loses_nothing_acknowledged(
        three: Compose, image: str) -> None:
    """Host and container clients at acks=all on RF=3, `docker kill` of the partition
    leader's container, nothing acknowledged lost, no duplicates. (Last: it leaves a node
    killed.)"""
    from kafkawire.tools.cluster import partition_leaders

    create_topic(HOST_BOOTSTRAP, "orders", 1, 3)
    acked = host_produce(HOST_BOOTSTRAP, "orders", [f"host-{i}" for i in range(1000)])
    assert len(acked) == 1000
    out = container_client(three, image, "kafkawire-1:9092,kafkawire-2:9092", "orders", 300)
    assert out.startswith("acked=300 "), out
    leader = partition_leaders(HOST_BOOTSTRAP, "orders")[0]
    subprocess.run(["docker", "kill", three.container(f"kafkawire-{leader}")], check=True,
                   capture_output=True, timeout=60)
    rest = ",".join(f"localhost:1909{n}" for n in (1, 2, 3) if n != leader)
    more = host_produce(rest, "orders", [f"after-{i}" for i in range(500)])
    assert len(more) == 500
    got = host_consume(rest, "orders", 1800)
    assert set(acked + more) <= set(got), "acknowledged records lost"
    assert len(got) == len(set(got)), "duplicates"


def test_split_compose_file(image: str, compose_project: list[Compose]) -> None:
    """docker-compose.split.yml: 3 controllers + 3 brokers, all healthy (a controller: started
    with a quorum leader), the brokers seen from the host and from a container."""
    from confluent_kafka.admin import AdminClient

    busy = _ports_free([19094, 19095, 19096, 19404, 19405, 19406])
    assert not busy, f"host ports {busy} are taken (docker-compose.split.yml publishes them)"
    compose = Compose([ROOT / "docker-compose.split.yml"], f"kwsplit{os.getpid()}")
    compose_project.append(compose)
    compose("up", "-d", "--no-build")
    services = [f"controller-{n}" for n in (1, 2, 3)] + [f"kafkawire-{n}" for n in (4, 5, 6)]
    took = compose.wait_health(services, "healthy")
    print(f"3 controllers + 3 brokers healthy in {took:.0f}s")
    md = AdminClient({"bootstrap.servers": "localhost:19094,localhost:19095"}).list_topics(
        timeout=30)
    assert sorted(md.brokers) == [4, 5, 6]
    seen = container_brokers(compose, image, "kafkawire-6:9092")
    assert seen == "4 kafkawire-4:9092,5 kafkawire-5:9092,6 kafkawire-6:9092", seen
