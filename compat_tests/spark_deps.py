"""Spark's Kafka connector jars for the installed pyspark, fetched from Maven Central once.

pyspark's wheel carries Spark, Scala, Hadoop and the compression/logging libraries, but not the
``kafka`` data source. :func:`kafka_connector_jars` resolves
``org.apache.spark:spark-sql-kafka-0-10_<scala>:<pyspark version>`` with ``compat_tests/
spark-pom.xml`` and ``mvn dependency:copy-dependencies`` into
``$KAFKAWIRE_CACHE/spark-<version>/jars`` (default ``~/.cache/kafkawire``) and returns the jar
paths for ``spark.jars``: the connector, ``spark-token-provider-kafka-0-10``, ``kafka-clients``
(3.9.x for Spark 4) and ``commons-pool2``. Everything pyspark already ships is excluded in the pom,
and any copied jar whose artifactId is in pyspark's ``jars/`` directory is dropped as well.

A finished fetch writes ``.fetched.json`` next to the jars; later calls read it and run nothing.

If the repository lacks the exact version (mirrors lag behind PyPI), the newest connector release
of the same ``major.minor`` and the newest token-provider release of the same major are used
instead and the choice is recorded in ``.fetched.json`` and printed as a warning.

Command line: ``python -m compat_tests.spark_deps [--print] [--force]``.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from xml.etree import ElementTree

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

HERE = Path(__file__).resolve().parent
POM = HERE / "spark-pom.xml"
MAVEN_SETTINGS = HERE / "spark-maven-settings.xml"
MARKER = ".fetched.json"
CONNECTOR = "spark-sql-kafka-0-10"
TOKEN_PROVIDER = "spark-token-provider-kafka-0-10"
DEFAULT_REPO = "https://repo.maven.apache.org/maven2"

_JAR_NAME = re.compile(r"^(?P<artifact>.+?)-(?P<version>\d+(?:\.\d+)+[^/]*)\.jar$")


class SparkDepsError(RuntimeError):
    pass


@dataclass(frozen=True)
class Resolution:
    spark: str  # the installed pyspark
    scala: str  # Scala binary version of pyspark's jars
    connector: str  # version of spark-sql-kafka-0-10 used
    token_provider: str  # version of spark-token-provider-kafka-0-10 used


def cache_dir() -> Path:
    env = os.environ.get("KAFKAWIRE_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "kafkawire"


def pyspark_home() -> Path:
    try:
        import pyspark
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise SparkDepsError("pyspark is not installed (pip install 'kafkawire[spark]')") from e
    return Path(pyspark.__file__).resolve().parent


def pyspark_version() -> str:
    import pyspark

    return str(pyspark.__version__)


def artifact_of(jar_name: str) -> str | None:
    """``kafka-clients-3.9.1.jar`` -> ``kafka-clients``; None when the name has no version."""
    m = _JAR_NAME.match(jar_name)
    return m.group("artifact") if m else None


def pyspark_artifacts(home: Path | None = None) -> set[str]:
    jars = (home or pyspark_home()) / "jars"
    return {a for p in jars.glob("*.jar") if (a := artifact_of(p.name)) is not None}


def scala_binary_version(home: Path | None = None) -> str:
    for p in ((home or pyspark_home()) / "jars").glob("scala-library-*.jar"):
        m = re.match(r"scala-library-(\d+\.\d+)\.", p.name)
        if m:
            return m.group(1)
    return "2.13"


def java_major_version() -> int | None:
    """The major version of ``java`` on PATH (17 for "17.0.15"), None without one."""
    java = shutil.which("java")
    if java is None:
        return None
    proc = subprocess.run([java, "-version"], capture_output=True, text=True)
    m = re.search(r'version "(\d+)(?:\.(\d+))?', proc.stderr + proc.stdout)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major  # "1.8.0" is Java 8


def jars_dir(version: str | None = None) -> Path:
    return cache_dir() / f"spark-{version or pyspark_version()}" / "jars"


def _release_key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def _releases(group_path: str, artifact: str, repo: str) -> list[str]:
    """Released versions (x.y.z, no previews) listed in the repository's maven-metadata.xml."""
    url = f"{repo.rstrip('/')}/{group_path}/{artifact}/maven-metadata.xml"
    with urllib.request.urlopen(url, timeout=30) as resp:
        root = ElementTree.fromstring(resp.read())
    found = [v.text or "" for v in root.iter("version")]
    return sorted((v for v in found if re.fullmatch(r"\d+\.\d+\.\d+", v)), key=_release_key)


def _fallback(spark: str, scala: str, repo: str) -> tuple[str, str]:
    """Versions to use when ``spark`` itself is missing from the repository."""
    major, minor = spark.split(".")[:2]
    conn = _releases("org/apache/spark", f"{CONNECTOR}_{scala}", repo)
    same_minor = [v for v in conn if v.split(".")[:2] == [major, minor]]
    if not same_minor:
        raise SparkDepsError(f"no {CONNECTOR}_{scala} {major}.{minor}.x in {repo}")
    connector = spark if spark in same_minor else same_minor[-1]
    tok = _releases("org/apache/spark", f"{TOKEN_PROVIDER}_{scala}", repo)
    usable = [v for v in tok if v.split(".")[0] == major and _release_key(v) <= _release_key(connector)]
    if not usable:
        raise SparkDepsError(f"no {TOKEN_PROVIDER}_{scala} {major}.x in {repo}")
    token = connector if connector in usable else usable[-1]
    return connector, token


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _read_marker(target: Path) -> list[Path] | None:
    marker = target / MARKER
    try:
        info = json.loads(marker.read_text())
    except (OSError, ValueError):
        return None
    jars = [target / name for name in info.get("jars", [])]
    if not jars or not all(p.is_file() for p in jars):
        return None
    return jars


def _mvn(args: list[str], quiet: bool) -> subprocess.CompletedProcess[str]:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise SparkDepsError("Maven (mvn) is needed to fetch Spark's Kafka connector")
    cmd = [mvn, "-B", *(["-q"] if quiet else []), *args]
    return subprocess.run(cmd, capture_output=quiet, text=True)


def _copy(res: Resolution, out: Path, quiet: bool) -> subprocess.CompletedProcess[str]:
    args = [
        "-f", str(POM),
        f"-Dmaven.repo.local={cache_dir() / 'm2'}",
        f"-Dspark.version={res.connector}",
        f"-Dscala.binary.version={res.scala}",
        f"-Dtoken.provider.version={res.token_provider}",
        "dependency:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={out}",
    ]
    user_settings = os.environ.get("KAFKAWIRE_MAVEN_SETTINGS")
    if user_settings:
        args[:0] = ["-s", user_settings]
    elif not (Path.home() / ".m2" / "settings.xml").is_file():
        args[:0] = ["-s", str(MAVEN_SETTINGS)]
    return _mvn(args, quiet)


def kafka_connector_jars(
    version: str | None = None, *, force: bool = False, quiet: bool = True
) -> list[Path]:
    """Jar paths for ``spark.jars`` (fetched once into the cache; later calls only read it)."""
    home = pyspark_home()
    spark = version or pyspark_version()
    target = jars_dir(spark)
    if not force and (jars := _read_marker(target)) is not None:
        return jars
    # the same lock as compat_tests/kafka_dist.py: both fill the Maven repository in the cache
    with _locked(cache_dir() / ".fetch.lock"):
        if not force and (jars := _read_marker(target)) is not None:
            return jars
        started = time.monotonic()
        scala = scala_binary_version(home)
        res = Resolution(spark, scala, spark, spark)
        staging = Path(tempfile.mkdtemp(prefix=f".spark-{spark}-", dir=cache_dir()))
        try:
            proc = _copy(res, staging, quiet)
            if proc.returncode != 0:
                repo = os.environ.get("KAFKAWIRE_MAVEN_REPO", DEFAULT_REPO)
                try:
                    connector, token = _fallback(spark, scala, repo)
                except (OSError, ElementTree.ParseError) as e:
                    raise SparkDepsError(f"{_failure(proc)}\n(and {repo}: {e})") from e
                if (connector, token) == (spark, spark):
                    raise SparkDepsError(_failure(proc))
                res = Resolution(spark, scala, connector, token)
                warnings.warn(
                    f"pyspark {spark}: {CONNECTOR} {spark} is not fully available; using "
                    f"{CONNECTOR} {connector} with {TOKEN_PROVIDER} {token}",
                    stacklevel=2,
                )
                shutil.rmtree(staging)
                staging.mkdir()
                proc = _copy(res, staging, quiet)
                if proc.returncode != 0:
                    raise SparkDepsError(_failure(proc))
            shipped = pyspark_artifacts(home)
            dropped = []
            for jar in staging.glob("*.jar"):
                if artifact_of(jar.name) in shipped:
                    dropped.append(jar.name)
                    jar.unlink()
            names = sorted(p.name for p in staging.glob("*.jar"))
            (staging / MARKER).write_text(
                json.dumps(
                    {
                        "pyspark": res.spark,
                        "scala": res.scala,
                        "connector": res.connector,
                        "token_provider": res.token_provider,
                        "jars": names,
                        "dropped_as_shipped_by_pyspark": sorted(dropped),
                        "bytes": sum((staging / n).stat().st_size for n in names),
                        "seconds": round(time.monotonic() - started, 1),
                        "fetched_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                    },
                    indent=1,
                )
            )
            if target.exists():
                shutil.rmtree(target)
            target.parent.mkdir(parents=True, exist_ok=True)
            staging.rename(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    jars = _read_marker(target)
    if jars is None:  # pragma: no cover - the marker was just written
        raise SparkDepsError(f"fetch into {target} left no usable marker")
    return jars


def fetch_info(version: str | None = None) -> dict[str, object]:
    """The contents of ``.fetched.json`` (what was resolved, sizes, time taken)."""
    data: dict[str, object] = json.loads((jars_dir(version) / MARKER).read_text())
    return data


def _failure(proc: subprocess.CompletedProcess[str]) -> str:
    out = (proc.stdout or "")[-4000:] + (proc.stderr or "")[-2000:]
    return f"mvn failed with exit code {proc.returncode}:\n{out}"


def spark_jars_conf(version: str | None = None) -> str:
    """The comma-separated value for ``spark.jars``."""
    return ",".join(str(p) for p in kafka_connector_jars(version))


# Loopback only: without these Spark binds its driver to the first non-loopback address.
LOCAL_CONF: dict[str, str] = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "1g",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.adaptive.enabled": "false",
    "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -Djava.net.preferIPv4Stack=true",
}


def local_spark_session(
    app_name: str = "kafkawire",
    *,
    workdir: Path | None = None,
    conf: dict[str, str] | None = None,
) -> SparkSession:
    """A ``local[2]`` SparkSession with the Kafka connector on ``spark.jars`` (loopback only).

    ``workdir`` holds Spark's scratch space and warehouse (a temporary directory by default).
    """
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    work = workdir or Path(tempfile.mkdtemp(prefix="kafkawire-spark-"))
    settings = {
        **LOCAL_CONF,
        "spark.jars": spark_jars_conf(),
        "spark.local.dir": str(work / "local"),
        "spark.sql.warehouse.dir": str(work / "warehouse"),
        **(conf or {}),
    }
    builder = SparkSession.builder.master("local[2]").appName(app_name)
    for k, v in settings.items():
        builder = builder.config(k, v)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(os.environ.get("KAFKAWIRE_SPARK_LOG_LEVEL", "WARN"))
    return session


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m compat_tests.spark_deps", description=__doc__)
    ap.add_argument("--version", help="Spark version (default: the installed pyspark)")
    ap.add_argument("--force", action="store_true", help="fetch again even if cached")
    ap.add_argument("--print", action="store_true", help="print the spark.jars value only")
    ap.add_argument("-v", "--verbose", action="store_true", help="show Maven's output")
    args = ap.parse_args(argv)
    try:
        jars = kafka_connector_jars(args.version, force=args.force, quiet=not args.verbose)
    except SparkDepsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if args.print:
        print(",".join(str(p) for p in jars))
    else:
        print(json.dumps(fetch_info(args.version), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
