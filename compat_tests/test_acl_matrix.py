"""The authorization matrix (``compat_tests/acl_matrix.py``) against Apache Kafka 4.3.1 with
the StandardAuthorizer and against kafkawire: a principal without ACLs, then with some, must get
the same answers from both. Kafka's outcome is recorded in ``expected/acl_matrix.json`` so that
kafkawire is checked without a JVM (``KAFKAWIRE_COMPAT_TARGETS=kafkawire``)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

from compat_tests.acl_matrix import Session, broker_props, grant, matrix, setup
from compat_tests.conftest import selected_targets
from compat_tests.kafka_dist import DEFAULT_BROKER_PROPS, free_port
from compat_tests.test_compat import differences
from compat_tests.wire import Connection

EXPECTED = Path(__file__).parent / "expected" / "acl_matrix.json"
RECORD = os.environ.get("KAFKAWIRE_COMPAT_RECORD") == "1"
pytestmark = pytest.mark.compat

#: differences kafkawire makes on purpose: path prefix -> reason
ACCEPTED: dict[str, str] = {}


def run(plain: str, sasl: str) -> dict[str, Any]:
    admin = Connection(plain)
    try:
        setup(admin)
        alice = Session(sasl)
        before = matrix(alice)
        alice.conn.close()
        grant(admin)
    finally:
        admin.close()
    alice = Session(sasl)
    try:
        after = matrix(alice)
    finally:
        alice.conn.close()
    out = json.loads(json.dumps({"without_acls": before, "with_acls": after}, default=str))
    assert isinstance(out, dict)
    return out


def kafka_outcome() -> dict[str, Any]:
    from compat_tests.kafka_dist import KafkaBroker

    kb = KafkaBroker(version="4.x")
    sasl_port = free_port()
    kb.props.update(broker_props())
    kb.props["listeners"] += f",SASL://127.0.0.1:{sasl_port}"
    kb.props["advertised.listeners"] += f",SASL://127.0.0.1:{sasl_port}"
    kb.props["listener.security.protocol.map"] += ",SASL:SASL_PLAINTEXT"
    kb.start()
    try:
        return run(kb.bootstrap, f"127.0.0.1:{sasl_port}")
    finally:
        kb.stop()


def kafkawire_outcome() -> dict[str, Any]:
    from kafkawire.tools.testing import BrokerProcess

    plain_port, sasl_port = free_port(), free_port()
    with tempfile.TemporaryDirectory(prefix="kafkawire-acl-") as tmp:
        props = {"node.id": "1", "process.roles": "broker,controller", **DEFAULT_BROKER_PROPS,
                 **broker_props(),
                 "listeners": f"PLAINTEXT://127.0.0.1:{plain_port},SASL://127.0.0.1:{sasl_port}",
                 "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT"}
        with BrokerProcess(Path(tmp) / "data", port=plain_port, overrides=props) as bp:
            return run(bp.bootstrap, f"127.0.0.1:{sasl_port}")


def test_acl_matrix() -> None:
    targets = selected_targets()
    if "kafka" in targets:
        ref = kafka_outcome()
        if RECORD or not EXPECTED.exists():
            EXPECTED.write_text(json.dumps(ref, indent=1, sort_keys=True) + "\n")
    elif EXPECTED.exists():
        ref = json.loads(EXPECTED.read_text())
    else:
        pytest.skip("no recorded Kafka outcome (run with KAFKAWIRE_COMPAT_TARGETS=kafka)")
    if "kafkawire" not in targets:
        return
    got = kafkawire_outcome()
    diffs = [(p, d) for p, d in differences(ref, got)
             if not any(p.startswith(a) for a in ACCEPTED)]
    assert not diffs, "\n".join(f"{p}: {d}" for p, d in diffs)
