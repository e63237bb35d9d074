"""``server.properties`` is read as Java's ``Properties.load(InputStream)`` reads it (how Kafka
reads it): each case below is read by kafkawire and by Java itself (tests/java/
LoadProperties.java, run with the JDK's source launcher) and the two maps must be equal."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kafkawire.config.broker_config import BrokerConfig, read_properties

JAVA_READER = Path(__file__).parent / "java" / "LoadProperties.java"

CASES: dict[str, bytes] = {
    "separators": b"a=1\nb:2\nc 3\nd\t4\ne\x0c5\nf  =  6\ng : 7\nh   8\n",
    "separator kept in value": b"k==v\nk2:v:w\nk3 = a=b c\nk4 :=x\n",
    "escaped separators in keys": b"a\\=b=c\na\\:b:c\na\\ b c\nx\\ y\\ z = 1\n",
    "unicode escapes": b"\\u00e9t\\u00e9=caf\\u00e9\nk=\\u0041\\u20ac\n",
    "other escapes": b"k=a\\tb\\nc\\rd\\fe\nq=\\q\\z\nb=back\\\\slash\n",
    "continuations": b"k=abc\\\n    def\\\n\t ghi\nn=1\n",
    "even backslashes end no continuation": b"k=abc\\\\\nm=2\n",
    "comments": b"# c\n! c\n   # indented\n\t! tab\nk=v # not a comment\n",
    "comment lines do not continue": b"# comment \\\nk=v\n",
    "keys alone": b"lonely\nlonely2   \nlonely3=\n",
    "trailing whitespace of values kept": b"k=v   \nk2 = v2\t\n",
    "latin-1 bytes": b"k=caf\xe9\nm\xfc=1\n",
    "duplicates: the last wins": b"k=1\nk=2\nk:3\n",
    "crlf and cr line ends": b"a=1\r\nb=2\rc=3\r\nd=4\\\r\n  5\r\n",
    "blank and whitespace lines": b"\n   \n\t\na=1\n  b = 2  \n",
    "continuation at the end of the file": b"k=v\\",
    "empty key": b"=v\n:w\n",
    "leading whitespace before key": b"   spaced=1\n\tt=2\n",
}


def escape(s: str) -> str:
    """As LoadProperties.java prints a string."""
    return "".join(c if 0x20 <= ord(c) < 0x7f and c != "\\" else f"\\u{ord(c):04x}"
                   for c in s)


def render(props: dict[str, str]) -> str:
    return "\x01".join(f"{escape(k)}\t{escape(v)}" for k, v in sorted(props.items()))


@pytest.mark.skipif(shutil.which("java") is None, reason="needs Java 11+ (make deps-java)")
def test_read_like_javas_properties_load(tmp_path: Path) -> None:
    files = []
    for i, data in enumerate(CASES.values()):
        f = tmp_path / f"case{i}.properties"
        f.write_bytes(data)
        files.append(f)
    java = subprocess.run(["java", str(JAVA_READER), *map(str, files)], capture_output=True,
                          timeout=300, check=True)
    expected = java.stdout.decode("ascii").split("\n")[: len(files)]
    for (name, _data), f, want in zip(CASES.items(), files, expected, strict=True):
        assert render(read_properties(f)) == want, name


def test_a_server_properties_with_kafkas_spellings(tmp_path: Path) -> None:
    f = tmp_path / "server.properties"
    f.write_bytes(b"num.partitions 3\nlog.dirs=/tmp/k\\\n  afka-logs\n"
                  b"advertised.listeners PLAINTEXT://h\\u0061st:9092\n")
    cfg = BrokerConfig.load(f)
    assert cfg.num_partitions == 3 and str(cfg.log_dirs[0]) == "/tmp/kafka-logs"
    assert cfg.advertised_listeners[0].host == "hast"
