"""A Docker engine, a base image and kafkawire's image, made here without any image registry.

- Engine: the one answering ``docker info``; else, as root with Debian's ``dockerd``
  (package docker.io), one started as ``dockerd --iptables=false --bridge=none`` (no NAT and
  no default bridge: compose's own network and published ports still work through
  docker-proxy). ``engine()`` returns None or why it cannot be had.
- Base image ``kafkawire-base:bookworm``: ``debootstrap --variant=minbase
  --include=python3,python3-venv bookworm`` from the mirror apt already uses, packed as a tar
  and ``docker import``-ed. The tar is cached in ``$KAFKAWIRE_CACHE`` (default
  ``~/.cache/kafkawire``) as ``docker-base-bookworm.tar``: made once (a few minutes), imported
  in seconds afterwards.
- Project image ``kafkawire:dev``: ``docker build --network host --build-arg
  BASE_IMAGE=kafkawire-base:bookworm`` (host network: with ``--bridge=none`` a build step has
  no other way to reach the package index that pip installs the dependencies from).

``python -m tests.docker_env`` does all three (``make docker-image``).
"""

from __future__ import annotations

import os
import re
import shutil
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
    return _run("docker", "info", timeout_s=30, check=False).returncode == 0


def engine() -> str | None:
    """None once a Docker engine answers (starting Debian's dockerd if needed), else why not."""
    if shutil.which("docker") is None:
        return "no docker client (Debian package docker.io)"
    if engine_answers():
        return None
    dockerd = shutil.which("dockerd") or ("/usr/sbin/dockerd" if Path("/usr/sbin/dockerd")
                                          .exists() else None)
    if dockerd is None:
        return "no Docker engine answers and dockerd is not installed (Debian package docker.io)"
    if os.geteuid() != 0:
        return "no Docker engine answers and starting dockerd needs root"
    log = open(cache_dir() / "dockerd.log", "ab")
    subprocess.Popen([dockerd, "--iptables=false", "--bridge=none"], stdout=log,
                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    log.close()
    deadline = time.monotonic() + ENGINE_START_S
    while time.monotonic() < deadline:
        if engine_answers():
            return None
        time.sleep(0.5)
    tail = (cache_dir() / "dockerd.log").read_text(errors="replace")[-1500:]
    return f"dockerd did not answer within {ENGINE_START_S:g}s (this kernel or sandbox may " \
           f"not allow containers):\n{tail}"


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
    """The debootstrap base as a tar, made once and cached."""
    tar = cache_dir() / "docker-base-bookworm.tar"
    if tar.exists():
        return tar
    if shutil.which("debootstrap") is None:
        _run("apt-get", "install", "-y", "-qq", "debootstrap")
    with tempfile.TemporaryDirectory(prefix="kw-base-") as tmp:
        root = Path(tmp) / "root"
        _run("debootstrap", "--variant=minbase", "--include=python3,python3-venv",
             "bookworm", str(root), _apt_mirror(), timeout_s=3600)
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc",
                     "usr/share/man", "usr/share/locale"):
            shutil.rmtree(root / junk, ignore_errors=True)
            (root / junk).mkdir(parents=True, exist_ok=True)
        part = tar.with_suffix(".part")
        _run("tar", "-C", str(root), "-cf", str(part), ".")
        part.replace(tar)
    return tar


def image_exists(name: str) -> bool:
    return _run("docker", "image", "inspect", name, check=False, timeout_s=60).returncode == 0


def base_image() -> str:
    """The debootstrap tar imported, plus the host's CA bundle (so that pip in a build step
    trusts what the host trusts: a proxy's CA where the network has one)."""
    if image_exists(BASE_IMAGE):
        return BASE_IMAGE
    raw = BASE_IMAGE.replace(":", "-raw:")
    if not image_exists(raw):
        _run("docker", "import", "--change", "ENV PATH=/usr/local/sbin:/usr/local/bin:"
             "/usr/sbin:/usr/bin:/sbin:/bin", str(base_tar()), raw)
    with tempfile.TemporaryDirectory(prefix="kw-base-ctx-") as ctx:
        lines = [f"FROM {raw}"]
        if HOST_CA_BUNDLE.exists():
            shutil.copy(HOST_CA_BUNDLE, Path(ctx) / "ca-certificates.crt")
            lines += ["COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt",
                      "ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt "
                      "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"]
        (Path(ctx) / "Dockerfile").write_text("\n".join(lines) + "\n")
        _run("docker", "build", "-t", BASE_IMAGE, ctx, timeout_s=600)
    return BASE_IMAGE


def project_image() -> str:
    """``docker build`` of this tree on the local base (the layer cache makes a rebuild of an
    unchanged tree take seconds)."""
    _run("docker", "build", "--network", "host", "--build-arg", f"BASE_IMAGE={base_image()}",
         "-t", IMAGE, str(ROOT), timeout_s=1800)
    return IMAGE


def image_size_mb(name: str) -> float:
    out = _run("docker", "image", "inspect", "-f", "{{.Size}}", name).stdout.strip()
    return int(out) / 1e6


if __name__ == "__main__":
    why = engine()
    if why is not None:
        raise SystemExit(f"no Docker engine: {why}")
    t0 = time.monotonic()
    print(f"base {base_image()} ({time.monotonic() - t0:.0f}s)")
    t0 = time.monotonic()
    name = project_image()
    print(f"image {name}: {image_size_mb(name):.0f} MB ({time.monotonic() - t0:.0f}s)")
