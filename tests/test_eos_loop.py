"""Issue 11's loop with every stock client, bounded: "begin, produce one record, commit; begin,
produce one record, abort" with no pause between EndTxn and the next produce, against a real
broker process. No EndTxn error, and read_committed holds exactly the committed records, in
order (tests/eos_loop.py; ``make eos-soak`` runs 1,000 rounds per client).

Java's 4.x producer runs transaction version 2 (every EndTxn bumps the epoch, so the next
transaction's first Produce races the previous transaction's markers: the bug of issue 11);
librdkafka, kafka-python and aiokafka run version 1.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafkawire.tools.testing import BrokerProcess
from tests.eos_loop import CLIENTS, run_loop
from tests.javatools import require_line

ROUNDS = 150


@pytest.fixture(scope="module")
def loop_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    bp = BrokerProcess(tmp_path_factory.mktemp("kweos") / "data").start()
    try:
        yield bp
    finally:
        bp.close()


@pytest.mark.parametrize("client", CLIENTS)
def test_commit_abort_loop(loop_broker: BrokerProcess, client: str) -> None:
    if client == "java":
        require_line("4.x")
    res = run_loop(client, loop_broker.bootstrap, ROUNDS)
    assert res.errors == [], res.line()
    assert res.aborted_visible == [], res.line()
    assert res.committed_seen == [f"c{i}" for i in range(ROUNDS)], res.line()
    assert res.uncommitted_seen == 2 * ROUNDS, res.line()
