"""Exactly-once between topics, bounded: three consume-transform-produce stages, each a consumer
group of transactional members (librdkafka with transaction version 1, Kafka's Java 4.x clients
with version 2) that join, leave and get killed while it runs, and abort some transactions on
purpose. At the end every stage's output, read at read_committed, holds every input exactly
once and in order per partition (tests/eos_chain.py; ``make eos-chain`` runs 100,000 records
on kafkawire and on Apache Kafka 4.3.1).

Before the fix of issue 11 this failed with duplicates (a Java member's next transaction merged
into the previous one, then aborted: its records were visible and processed again).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkawire.tools.testing import BrokerProcess
from tests.eos_chain import run_chain
from tests.javatools import require_line

pytestmark = pytest.mark.slow


def test_three_stage_chain_with_churn(tmp_path: Path) -> None:
    require_line("4.x")
    overrides = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000"}
    with BrokerProcess(tmp_path / "data", overrides=overrides).start() as bp:
        res = run_chain(bp.bootstrap, records=6000, partitions=3, members=2, churn_s=2.0,
                        kill=True, abort_ratio=0.2, timeout_s=600)
    assert res.exact, res.line()
    assert res.counts == {"s1": 6000, "s2": 6000, "s3": 6000}, res.line()
    assert res.joins + res.leaves + res.kills >= 1, res.line()
