"""Spark's ``kafka`` source and sink for the installed pyspark: the Maven coordinates that
resolve from Maven Central.

pyspark does not ship the connector: ``spark.jars.packages`` (or ``spark-submit --packages``)
names ``org.apache.spark:spark-sql-kafka-0-10_<scala>:<version>``, and Spark's resolver then
also fetches the same version of ``spark-token-provider-kafka-0-10``. Maven Central does not
hold every pair: for the 4.1 line it has the connector 4.1.0-4.1.3 but the token provider only
for 4.1.1, so ``...:4.1.3`` (the newest connector) fails with ``spark-token-provider-kafka-0-10
_2.13;4.1.3: not found``. ``kafka_package()`` picks the installed pyspark's own version when
both artifacts exist and otherwise the newest release of the same ``major.minor`` that has both
(a connector of the same minor works with any patch release of Spark).

Command line (from an installed kafkawire, no clone needed): ``kafkawire spark-package``
prints the coordinates; ``--offline`` prints pyspark's own version without asking Maven
Central.
"""

from __future__ import annotations

import re
import urllib.request
from xml.etree import ElementTree

MAVEN_CENTRAL = "https://repo.maven.apache.org/maven2"
GROUP = "org.apache.spark"
CONNECTOR = "spark-sql-kafka-0-10"
TOKEN_PROVIDER = "spark-token-provider-kafka-0-10"


def pyspark_version() -> str:
    import pyspark

    return str(pyspark.__version__)


def scala_version() -> str:
    """The Scala binary version of pyspark's jars (2.13 for Spark 4)."""
    from pathlib import Path

    import pyspark

    for p in (Path(pyspark.__file__).resolve().parent / "jars").glob("scala-library-*.jar"):
        m = re.match(r"scala-library-(\d+\.\d+)\.", p.name)
        if m:
            return m.group(1)
    return "2.13"


def _key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def releases(artifact: str, repo: str = MAVEN_CENTRAL, timeout_s: float = 30) -> list[str]:
    """The x.y.z releases of ``org.apache.spark:<artifact>`` in the repository's
    maven-metadata.xml, oldest first."""
    url = f"{repo.rstrip('/')}/{GROUP.replace('.', '/')}/{artifact}/maven-metadata.xml"
    with urllib.request.urlopen(url, timeout=timeout_s) as resp:  # noqa: S310
        root = ElementTree.fromstring(resp.read())
    found = {v.text or "" for v in root.iter("version")}
    return sorted((v for v in found if re.fullmatch(r"\d+\.\d+\.\d+", v)), key=_key)


def choose(spark: str, connectors: list[str], token_providers: list[str]) -> str:
    """The connector version to use with pyspark ``spark``: its own when the token provider
    of that version exists too, else the newest such release of the same major.minor."""
    both = set(connectors) & set(token_providers)
    if spark in both:
        return spark
    minor = spark.split(".")[:2]
    same = sorted((v for v in both if v.split(".")[:2] == minor), key=_key)
    if not same:
        raise LookupError(f"no {CONNECTOR} release of Spark {'.'.join(minor)} whose "
                          f"{TOKEN_PROVIDER} is published")
    return same[-1]


def kafka_package(spark: str | None = None, scala: str | None = None,
                  repo: str = MAVEN_CENTRAL, offline: bool = False) -> str:
    """``org.apache.spark:spark-sql-kafka-0-10_<scala>:<version>`` for ``spark.jars.packages``
    (default: the installed pyspark)."""
    spark = spark or pyspark_version()
    scala = scala or scala_version()
    version = spark if offline else choose(
        spark, releases(f"{CONNECTOR}_{scala}", repo), releases(f"{TOKEN_PROVIDER}_{scala}", repo))
    return f"{GROUP}:{CONNECTOR}_{scala}:{version}"


def main(args: object) -> int:
    import sys

    try:
        print(kafka_package(offline=bool(getattr(args, "offline", False))))
    except ImportError:
        print("kafkawire: pyspark is not installed (pip install 'kafkawire[spark]')",
              file=sys.stderr)
        return 2
    except (OSError, LookupError) as e:
        print(f"kafkawire: {e}", file=sys.stderr)
        return 1
    return 0
