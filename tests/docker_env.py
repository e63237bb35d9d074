"""A Docker engine, a base image and kafkawire's image, made here without any image registry.

- Packages: as root with apt, Debian's ``docker.io``, ``docker-compose`` and ``debootstrap``
  are installed where missing (``--no-install-recommends``; their init scripts start nothing).
- Engine: the one answering ``docker info``; else, as root, one started as ``dockerd
  --iptables=false --bridge=none`` (no NAT and no default bridge: compose's own network and
  published ports still work through docker-proxy), its pid kept in
  ``$KAFKAWIRE_CACHE/dockerd.started.pid``. ``engine()`` returns None or why it cannot be had;
  ``container_runs()`` then checks that the engine may run a container at all.
- Base image ``kafkawire-base:bookworm``: ``debootstrap --variant=minbase
  --include=python3,python3-venv bookworm`` from the mirror apt already uses, plus the host's
  CA bundle, packed as a tar and ``docker import``-ed (no build step). The tar is cached in
  ``$KAFKAWIRE_CACHE`` (default ``~/.cache/kafkawire``) as ``docker-base-bookworm-ca.tar``: made
  once (a few minutes), imported in seconds afterwards.
- Project image ``kafkawire:dev``: ``docker build --network host --build-arg
  BASE_IMAGE=kafkawire-base:bookworm`` (host network: with ``--bridge=none`` a build step has
  no other way to reach the package index that pip installs the dependencies from).
- ``cleanup()``: removes the tests' compose projects (names starting ``kw``: containers,
  networks, volumes) and stops the dockerd ``engine()`` started (SIGTERM, then SIGKILL of its
  process group); images stay, a layer cache for the next run.

Every step is bounded (``_run``'s timeouts). ``python -m tests.docker_env`` does the first
four (``make docker-image``; the engine stays up for ``docker compose``); ``python -m
tests.docker_env cleanup`` the last (``make docker-test`` runs it after the tests).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASE_IMAGE = "kafkawire-base:bookworm"
IMAGE = "kafkawire:dev"
#: the host's trusted CAs (Debian's ca-certificates), copied into the base image
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
#: how long a started dockerd has to answer, in seconds
ENGINE_START_S = 60.0
#: how long a stopped dockerd has to exit before its process group is killed, in seconds
ENGINE_STOP_S = 30.0
#: bounds on the slow steps, in seconds: debootstrap, the project image's build
DEBOOTSTRAP_S = 900.0
BUILD_S = 900.0
#: the tests' compose project names start with this (``cleanup()`` removes only those)
TEST_PROJECT_PREFIX = "kw"


def cache_dir() -> Path:
    d = Path(os.environ.get("KAFKAWIRE_CACHE", Path.home() / ".cache" / "kafkawire"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def _run(*cmd: str, timeout_s: float = 1800.0, check: bool = True
         ) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return r


def engine_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return _run("docker", "info", timeout_s=30, check=False).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def _dockerd() -> str | None:
    return shutil.which("dockerd") or ("/usr/sbin/dockerd" if Path("/usr/sbin/dockerd")
                                       .exists() else None)


def install_packages() -> str | None:
    """Debian's docker.io, docker-compose and debootstrap where missing (root, apt); None once
    they are there, else why not. The packages' init scripts do not start the engine here."""
    missing = [pkg for pkg, ok in (
        ("docker.io", shutil.which("docker") is not None and _dockerd() is not None),
        ("docker-compose", compose_command() is not None),
        ("debootstrap", shutil.which("debootstrap") is not None)) if not ok]
    if not missing:
        return None
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return f"{' '.join(missing)} missing and installing them needs root and apt-get"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing]
    for attempt in (1, 2):
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
        if r.returncode == 0:
            return None
        if attempt == 1:  # stale package lists: refresh once
            subprocess.run(["apt-get", "update", "-qq"], capture_output=True, timeout=600)
    return f"apt-get install {' '.join(missing)} failed:\n{r.stderr[-1500:]}"


def _started_pidfile() -> Path:
    """The pid of a dockerd this module started (``cleanup()`` stops it)."""
    return cache_dir() / "dockerd.started.pid"


def engine() -> str | None:
    """None once a Docker engine answers (installing Debian's docker.io and starting dockerd
    if needed), else why not."""
    why = install_packages()
    if why is not None and shutil.which("docker") is None:
        return why
    if engine_answers():
        return None
    dockerd = _dockerd()
    if dockerd is None:
        return why or "no Docker engine answers and dockerd is not installed (docker.io)"
    if os.geteuid() != 0:
        return "no Docker engine answers and starting dockerd needs root"
    log_path = cache_dir() / "dockerd.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen([dockerd, "--iptables=false", "--bridge=none"], stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    _started_pidfile().write_text(str(proc.pid))
    deadline = time.monotonic() + ENGINE_START_S
    while time.monotonic() < deadline and proc.poll() is None:
        if engine_answers():
            return None
        time.sleep(0.5)
    rc = proc.poll()
    stop_started_engine()
    tail = log_path.read_text(errors="replace")[-1500:]
    what = f"exited with {rc}" if rc is not None else \
        f"did not answer within {ENGINE_START_S:g}s"
    return f"dockerd {what} (this kernel or sandbox may not allow containers):\n{tail}"


def stop_started_engine() -> None:
    """SIGTERM to the dockerd ``engine()`` started (its containerd and shims go with it), then
    SIGKILL to its process group after ``ENGINE_STOP_S``."""
    pidfile = _started_pidfile()
    try:
        pid = int(pidfile.read_text())
    except (OSError, ValueError):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pidfile.unlink(missing_ok=True)
        return
    deadline = time.monotonic() + ENGINE_STOP_S
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.2)
    if _alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    pidfile.unlink(missing_ok=True)
    netns = Path("/run/docker/netns/default")  # dockerd leaves this bind mount behind
    if netns.exists():
        subprocess.run(["umount", str(netns)], capture_output=True, timeout=30)


def _alive(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
        if waited == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").exists() and \
        Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def remove_test_projects() -> list[str]:
    """``docker compose down -v`` equivalent for every compose project the tests made (name
    prefix ``kw``): containers, networks and volumes. Returns what it removed."""
    if not engine_answers():
        return []
    gone: list[str] = []
    ids = _run("docker", "ps", "-a", "--filter", "label=com.docker.compose.project",
               "--format", "{{.ID}} {{.Label \"com.docker.compose.project\"}}",
               check=False, timeout_s=60).stdout.split("\n")
    cids = [line.split()[0] for line in ids if line.split()[1:2] and
            line.split()[1].startswith(TEST_PROJECT_PREFIX)]
    if cids:
        _run("docker", "rm", "-f", "-v", *cids, check=False, timeout_s=120)
        gone += cids
    for kind in ("network", "volume"):
        names = _run("docker", kind, "ls", "--format", "{{.Name}}", "--filter",
                     "label=com.docker.compose.project", check=False, timeout_s=60).stdout.split()
        ours = [n for n in names if n.startswith(TEST_PROJECT_PREFIX)]
        if ours:
            _run("docker", kind, "rm", *ours, check=False, timeout_s=120)
            gone += ours
    return gone


def cleanup() -> None:
    """What a test run leaves: its compose projects, and the engine if this module started it."""
    gone = remove_test_projects()
    if gone:
        print(f"removed {len(gone)} leftover containers, networks and volumes")
    stop_started_engine()


def compose_command() -> list[str] | None:
    """``docker compose`` (v2 plugin) or ``docker-compose`` (v1, Debian's package)."""
    if _run("docker", "compose", "version", check=False, timeout_s=30).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


def _apt_mirror() -> str:
    """The Debian mirror apt is configured with (deb822 or one-line sources)."""
    texts = []
    for p in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]:
        if p.is_file() and not p.name.endswith(("disabled-by-farm",)):
            texts.append(p.read_text(errors="replace"))
    for text in texts:
        for m in re.finditer(r"(?m)^(?:URIs:\s*|deb\s+(?:\[[^\]]*\]\s*)?)(\S+/debian)/?\s", text):
            return m.group(1)
    raise RuntimeError("no Debian mirror in /etc/apt/sources.list(.d)")


def base_tar() -> Path:
    """The debootstrap base as a tar, made once and cached, with the host's CA bundle (so that
    pip in a build step trusts what the host trusts: a proxy's CA where the network has one)."""
    # "-ca": this tar holds the CA bundle (the older docker-base-bookworm.tar does not)
    tar = cache_dir() / "docker-base-bookworm-ca.tar"
    if tar.exists():
        return tar
    if shutil.which("debootstrap") is None:
        raise RuntimeError("debootstrap is not installed (Debian package debootstrap)")
    with tempfile.TemporaryDirectory(prefix="kw-base-") as tmp:
        root = Path(tmp) / "root"
        _run("debootstrap", "--variant=minbase", "--include=python3,python3-venv",
             "bookworm", str(root), _apt_mirror(), timeout_s=DEBOOTSTRAP_S)
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc",
                     "usr/share/man", "usr/share/locale"):
            shutil.rmtree(root / junk, ignore_errors=True)
            (root / junk).mkdir(parents=True, exist_ok=True)
        if HOST_CA_BUNDLE.exists():
            (root / "etc/ssl/certs").mkdir(parents=True, exist_ok=True)
            shutil.copy(HOST_CA_BUNDLE, root / "etc/ssl/certs/ca-certificates.crt")
        part = tar.with_suffix(".part")
        _run("tar", "-C", str(root), "-cf", str(part), ".", timeout_s=300)
        part.replace(tar)
    return tar


def image_exists(name: str) -> bool:
    return _run("docker", "image", "inspect", name, check=False, timeout_s=60).returncode == 0


def base_image() -> str:
    """The cached debootstrap tar, ``docker import``-ed (no build step)."""
    if image_exists(BASE_IMAGE):
        return BASE_IMAGE
    env = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]
    if HOST_CA_BUNDLE.exists():
        env += [f"{k}=/etc/ssl/certs/ca-certificates.crt" for k in ("PIP_CERT", "SSL_CERT_FILE")]
    _run("docker", "import", *(a for e in env for a in ("--change", f"ENV {e}")),
         str(base_tar()), BASE_IMAGE, timeout_s=300)
    return BASE_IMAGE


def container_runs(image: str) -> str | None:
    """None once a container of ``image`` runs (``true``, no network), else the engine's
    answer: an engine that starts may still be refused containers (no overlay filesystem,
    cgroups, namespaces in a sandbox)."""
    try:
        r = _run("docker", "run", "--rm", "--network", "none", image, "true", check=False,
                 timeout_s=120)
    except subprocess.TimeoutExpired:
        return "`docker run ... true` did not finish within 120s"
    return None if r.returncode == 0 else (r.stderr.strip()[-1500:] or f"exit {r.returncode}")


def project_image() -> str:
    """``docker build`` of this tree on the local base (the layer cache makes a rebuild of an
    unchanged tree take seconds)."""
    _run("docker", "build", "--network", "host", "--build-arg", f"BASE_IMAGE={base_image()}",
         "-t", IMAGE, str(ROOT), timeout_s=BUILD_S)
    return IMAGE


def image_size_mb(name: str) -> float:
    out = _run("docker", "image", "inspect", "-f", "{{.Size}}", name).stdout.strip()
    return int(out) / 1e6


def main(argv: list[str]) -> None:
    if argv[1:] == ["cleanup"]:
        cleanup()
        return
    why = engine()
    if why is not None:
        raise SystemExit(f"no Docker engine: {why}")
    t0 = time.monotonic()
    print(f"base {base_image()} ({time.monotonic() - t0:.0f}s)")
    t0 = time.monotonic()
    name = project_image()
    print(f"image {name}: {image_size_mb(name):.0f} MB ({time.monotonic() - t0:.0f}s)")


if __name__ == "__main__":
    import sys

    main(sys.argv)
