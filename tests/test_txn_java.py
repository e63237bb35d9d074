"""Kafka's own Java tools on transactions against kafkawire.

``kafka-transactions`` (TransactionsCommand: ListTransactions, DescribeTransactions,
DescribeProducers, find-hanging, and ``abort``, which closes a hanging transaction with
WriteTxnMarkers) and ``kafka-dump-log`` (DumpLogSegments) reading our ``.txnindex`` and the
``__transaction_state`` records with Kafka's decoder. Jars from the compat harness cache
(``tests/javatools.py``); skipped without them or without java, failing instead under
``make test`` (KAFKAWIRE_REQUIRE_KAFKA=1).
"""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkawire.coordinators.runtime import partition_for
from kafkawire.tools.testing import BrokerProcess
from protocol._generated.init_producer_id_request import InitProducerIdRequest
from protocol._generated.produce_request import ProduceRequest
from protocol.records import SimpleRecord, build_batch
from tests.conftest import RawClient
from tests.javatools import JavaTools, require_line
from tests.test_txn_wire import READ_COMMITTED, fetch

pytestmark = pytest.mark.slow

TXN = "transactions"
DUMP = "dump-log"


def tool(line: str, name: str, *args: str, check: bool = True) -> str:
    return JavaTools(line).run(name, *args, check=check).output


def table(out: str) -> list[dict[str, str]]:
    """The tab-separated table the tool prints, as dicts."""
    rows = [[c.strip() for c in line.split("\t")] for line in out.splitlines() if "\t" in line]
    head, *body = rows
    return [dict(zip(head, r, strict=False)) for r in body]


def test_kafka_transactions_tool(broker: BrokerProcess, java_line: str) -> None:
    line = java_line
    b = broker.bootstrap
    topic = f"jtx-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": b})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    tid = f"jtx-{uuid.uuid4().hex[:6]}"
    p = Producer({"bootstrap.servers": b, "transactional.id": tid})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"x", partition=0)
    p.flush(30)
    bs = ["--bootstrap-server", b]

    listed = table(tool(line, TXN, *bs, "list"))
    mine = [r for r in listed if r["TransactionalId"] == tid]
    assert mine and mine[0]["TransactionState"] == "Ongoing" and mine[0]["Coordinator"] == "1"
    (d,) = table(tool(line, TXN, *bs, "describe", "--transactional-id", tid))
    assert (d["TransactionState"], d["ProducerEpoch"], d["TopicPartitions"]) == (
        "Ongoing", "0", f"{topic}-0")
    assert d["TransactionTimeoutMs"] == "60000" and int(d["CurrentTransactionStartTimeMs"]) > 0
    (pr,) = table(tool(line, TXN, *bs, "describe-producers", "--topic", topic, "--partition", "0"))
    assert (pr["ProducerId"], pr["CurrentTransactionStartOffset"]) == (d["ProducerId"], "0")
    assert "could not be found" in tool(
        line, TXN, *bs, "describe", "--transactional-id", "nope", check=False)
    # nothing has been open for longer than transaction.max.timeout.ms
    assert table(tool(line, TXN, *bs, "find-hanging", "--broker-id", "1")) == []
    p.commit_transaction(30)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        (d,) = table(tool(line, TXN, *bs, "describe", "--transactional-id", tid))
        if d["TransactionState"] == "CompleteCommit":
            break
    assert d["TransactionState"] == "CompleteCommit"


def test_abort_a_hanging_transaction(broker: BrokerProcess, java_line: str) -> None:
    """Transactional data written without a coordinator (a "hanging" transaction) holds the
    LSO back until ``kafka-transactions abort`` writes the ABORT marker (WriteTxnMarkers)."""
    raw = RawClient(broker.bootstrap)
    try:
        topic = f"jth-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        pid = raw.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1), 4).producer_id
        now = int(time.time() * 1000)
        batch = build_batch([SimpleRecord(value=b"h", timestamp=now)], producer_id=pid,
                            producer_epoch=0, base_sequence=0, is_transactional=True)
        req = ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
            name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)])])
        assert raw.request(req, 9).responses[0].partition_responses[0].error_code == 0
        assert fetch(raw, topic, 0, READ_COMMITTED).last_stable_offset == 0
        tool(java_line, TXN, "--bootstrap-server", broker.bootstrap, "abort", "--topic", topic,
             "--partition", "0", "--start-offset", "0")
        p = fetch(raw, topic, 0, READ_COMMITTED)
        assert (p.last_stable_offset, p.high_watermark) == (2, 2)
        assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(pid, 0)]
    finally:
        raw.close()


def test_dump_log_reads_txnindex_and_transaction_log(tmp_path: Path) -> None:
    require_line("4.x")
    bp = BrokerProcess(tmp_path / "data").start()
    try:
        b = bp.bootstrap
        topic = "dumped"
        admin = AdminClient({"bootstrap.servers": b})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        p = Producer({"bootstrap.servers": b, "transactional.id": "dump-tx"})
        p.init_transactions(30)
        for commit in (False, True, False):
            p.begin_transaction()
            p.produce(topic, b"v", partition=0)
            p.flush(30)
            (p.commit_transaction if commit else p.abort_transaction)(30)
        time.sleep(1.0)  # markers and CompleteAbort are written after the answer
    finally:
        bp.stop()
    data = tmp_path / "data"
    out = tool("4.x", DUMP, "--files", str(data / f"{topic}-0" / "00000000000000000000.txnindex"))
    entries = [ln for ln in out.splitlines() if "producerId" in ln]
    assert len(entries) == 2, out
    assert "firstOffset: 0 lastOffset: 1 lastStableOffset: 2" in entries[0], out
    assert "firstOffset: 4 lastOffset: 5 lastStableOffset: 6" in entries[1], out
    log = data / f"{topic}-0" / "00000000000000000000.log"
    out = tool("4.x", DUMP, "--files", str(log), "--print-data-log")
    assert out.count("endTxnMarker: ABORT") == 2 and out.count("endTxnMarker: COMMIT") == 1, out
    part = partition_for("dump-tx", 50)
    state = data / f"__transaction_state-{part}" / "00000000000000000000.log"
    out = tool("4.x", DUMP, "--files", str(state), "--transaction-log-decoder")
    assert '"transactionalId":"dump-tx"' in out, out
    # Empty, then Ongoing -> PrepareAbort -> CompleteAbort, Ongoing -> PrepareCommit ->
    # CompleteCommit, Ongoing -> PrepareAbort -> CompleteAbort, as value version 0
    statuses = re.findall(r'"version":"0","data":\{[^}]*"transactionStatus":(\d)', out)
    assert statuses == list("0135124135"), out
    assert '"transactionPartitions":null' in out and '"partitionIds":[0]' in out
