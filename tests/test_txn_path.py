"""The transaction path end to end without the network: the coordinator shard (``txn``), two
real partition logs (``log``) and the broker's rule for a transactional write (Produce:
``has_ongoing_txn(pid, epoch)`` on the partition, else ask the coordinator), driven by a
Hypothesis state machine with the marker writer as a separate, arbitrarily delayed step.

It explores the interleavings of issue 11: EndTxn, then the next transaction's write with the
next epoch (transaction version 2) or the same epoch (version 1) before the markers; markers
written to one partition and not yet to the other; a coordinator abort (InitProducerId fencing
an open transaction) with its markers pending while the fenced client keeps writing.

The invariant reads the partition logs themselves: between two markers of a producer, the data
batches belong to ONE transaction, and the marker that closes them carries that transaction's
decision (COMMIT or ABORT). A write merged into the transaction a pending marker will close (the
bug) breaks it at once.
"""

from __future__ import annotations

import struct
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    rule,
    run_state_machine_as_test,
)

from log.config import LogConfig
from log.partition_log import PartitionLog
from protocol.errors import ErrorCode as E
from protocol.errors import KafkaError
from protocol.records import SimpleRecord, build_batch, decode_batch_records, iter_headers
from tests.batchutil import control_batch
from tests.test_txn_coordinator import Log
from txn.coordinator import NEED_PRODUCER_ID, InitResult, MarkerJob, TxnConfig, TxnShard

NOW = 1_700_000_000_000
TOPIC = "t"
PARTITIONS = (0, 1)
LOG_CFG = LogConfig(segment_bytes=1 << 20)


@dataclass
class Client:
    """One transactional producer as a stock client drives it."""

    tid: str
    version: int  # transaction version: 2 = Produce v12 adds partitions, EndTxn v5 bumps
    pid: int = -1
    epoch: int = -1
    txn: int = 0  # number of the client's current transaction
    in_txn: bool = False
    added: set[int] = field(default_factory=set)  # version 1: partitions added by the client
    seq: dict[int, int] = field(default_factory=dict)
    needs_init: bool = True


class TxnPathMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self._tmp = tempfile.TemporaryDirectory()
        self.logs = {p: PartitionLog.open(Path(self._tmp.name) / f"{TOPIC}-{p}", LOG_CFG, NOW)
                     for p in PARTITIONS}
        self.coord = Log(TxnShard(0, TxnConfig(transaction_version=2)))
        self.coord.shard.on_loaded(NOW)
        self.clients = {"v2": Client("v2", 2), "v1": Client("v1", 1)}
        self.next_pid = 1000
        #: (tid, txn number) -> committed? for every decided transaction
        self.decided: dict[tuple[str, int], bool] = {}
        #: record value -> (tid, txn number)
        self.owner: dict[str, tuple[str, int]] = {}
        self.jobs: list[tuple[MarkerJob, set[int]]] = []  # marker jobs and partitions left
        self.count = 0

    def teardown(self) -> None:
        for log in self.logs.values():
            log.close()
        self._tmp.cleanup()

    # -- clients -----------------------------------------------------------------------------
    def _decide(self, c: Client, commit: bool) -> None:
        if c.in_txn:
            self.decided[(c.tid, c.txn)] = commit
        c.txn += 1
        c.in_txn = False
        c.added.clear()

    @rule(tid=st.sampled_from(["v2", "v1"]))
    def init(self, tid: str) -> None:
        """InitProducerId: a fresh start, or a restart fencing an open transaction (the
        coordinator aborts it with a bumped epoch and answers CONCURRENT_TRANSACTIONS)."""
        c = self.clients[tid]
        was_ongoing = c.in_txn
        res = self.coord.run(self.coord.shard.init_producer_id(tid, 60_000, NOW))
        if res is NEED_PRODUCER_ID:
            self.next_pid += 1
            res = self.coord.run(self.coord.shard.init_producer_id(
                tid, 60_000, NOW, new_producer_id=self.next_pid))
        assert isinstance(res, InitResult)
        if was_ongoing:
            self._decide(c, False)  # the coordinator aborts it (or already did)
        c.added.clear()
        if res.error == E.NONE:
            c.pid, c.epoch, c.needs_init = res.producer_id, res.producer_epoch, False
            c.seq.clear()
            c.txn += 1
            c.in_txn = False
        else:
            assert res.error == E.CONCURRENT_TRANSACTIONS, res
            c.needs_init = True

    @rule(tid=st.sampled_from(["v2", "v1"]), partition=st.sampled_from(PARTITIONS))
    def produce(self, tid: str, partition: int) -> None:
        c = self.clients[tid]
        if c.needs_init:
            return
        if c.version == 1 and partition not in c.added:
            err = self.coord.run(self.coord.shard.add_partitions(
                tid, c.pid, c.epoch, [(TOPIC, partition)], NOW))
            if err != E.NONE:
                assert err == E.CONCURRENT_TRANSACTIONS, err  # the previous one completing
                return
            c.added.add(partition)
        if not self._broker_accepts(c, partition):
            return  # retriable: the client sends it again later
        self.count += 1
        value = f"{tid}/{c.txn}/{self.count}"
        seq = c.seq.get(partition, 0)
        buf = bytearray(build_batch(
            [SimpleRecord(value=value.encode(), timestamp=NOW)], producer_id=c.pid,
            producer_epoch=c.epoch, base_sequence=seq, is_transactional=True))
        log = self.logs[partition]
        log.append(buf, iter_headers(buf), leader_epoch=0, now_ms=NOW)
        log.update_high_watermark(log.log_end_offset)
        c.seq[partition] = seq + 1
        c.in_txn = True
        self.owner[value] = (tid, c.txn)

    def _broker_accepts(self, c: Client, partition: int) -> bool:
        """Produce's transaction check (kafkawire/apis/produce.py ``_verify_transaction``)."""
        if self.logs[partition].producer_state.has_ongoing_txn(c.pid, c.epoch):
            return True
        shard = self.coord.shard
        if c.version >= 2:
            err = self.coord.run(shard.add_partitions(
                c.tid, c.pid, c.epoch, [(TOPIC, partition)], NOW, client_version=2))
        else:
            err = shard.verify_partitions(c.tid, c.pid, c.epoch, [(TOPIC, partition)])[
                (TOPIC, partition)]
        assert err in (E.NONE, E.CONCURRENT_TRANSACTIONS), err
        return err == E.NONE

    @rule(tid=st.sampled_from(["v2", "v1"]), commit=st.booleans())
    def end(self, tid: str, commit: bool) -> None:
        c = self.clients[tid]
        if c.needs_init or not c.in_txn:
            return
        shard = self.coord.shard
        if c.version >= 2:
            res = self.coord.run(shard.end_txn_v2(tid, c.pid, c.epoch, commit, NOW))
            assert isinstance(res, InitResult) and res.error == E.NONE, res
            c.pid, c.epoch = res.producer_id, res.producer_epoch
            c.seq.clear()
        else:
            err = self.coord.run(shard.end_txn(tid, c.pid, c.epoch, commit, NOW))
            assert err == E.NONE, err
        self._decide(c, commit)

    # -- the marker writer, one partition at a time --------------------------------------------
    @rule(data=st.data())
    def marker(self, data: st.DataObject) -> None:
        self.jobs += [(job, {p for _t, p in job.partitions}) for job in self.coord.shard.marker_jobs()]
        if not self.jobs:
            return
        i = data.draw(st.integers(0, len(self.jobs) - 1))
        job, left = self.jobs[i]
        if left:
            p = sorted(left)[data.draw(st.integers(0, len(left) - 1))]
            buf = control_batch(producer_id=job.producer_id, producer_epoch=job.producer_epoch,
                                commit=job.commit, ts=NOW)
            log = self.logs[p]
            try:
                log.append(buf, iter_headers(buf), leader_epoch=0, now_ms=NOW,
                           marker_transaction_version=job.transaction_version)
            except KafkaError as e:
                raise AssertionError(f"marker refused on {p}: {e}") from None
            log.update_high_watermark(log.log_end_offset)
            left.discard(p)
        if not left:
            del self.jobs[i]
            records, ok = self.coord.shard.complete(job, NOW)
            assert ok
            self.coord.apply(records)

    # -- what the logs hold --------------------------------------------------------------------
    @invariant()
    def one_transaction_per_marker(self) -> None:
        for p, log in self.logs.items():
            open_values: dict[int, list[str]] = {}
            for seg in log.segments:
                data = seg.path.read_bytes()
                for pos, h in iter_headers(data):
                    _hdr, recs = decode_batch_records(data[pos:pos + h.size])
                    if h.is_control:
                        commit = struct.unpack(">hh", recs[0].key)[1] == 1
                        txns = {self.owner[v] for v in open_values.pop(h.producer_id, [])}
                        assert len(txns) <= 1, f"one marker closes {txns} on partition {p}"
                        for t in txns:
                            assert self.decided.get(t) is commit, (t, commit, p)
                    else:
                        open_values.setdefault(h.producer_id, []).extend(
                            r.value.decode() for r in recs)
            for vals in open_values.values():  # still open: one transaction each
                assert len({self.owner[v] for v in vals}) == 1, vals

    @invariant()
    def lso_never_passes_an_undecided_write(self) -> None:
        for log in self.logs.values():
            lso = log.last_stable_offset
            first_open = log.producer_state.first_undecided_offset()
            assert lso == (log.high_watermark if first_open is None else first_open)


TxnPathMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40,
                                            deadline=None)
test_txn_path_machine = TxnPathMachine.TestCase


def test_the_machine_finds_the_issue_11_merge() -> None:
    """With the check the broker made before the fix ("any open transaction of this producer
    id on the partition", no epoch), Hypothesis finds a failing run: the machine is not
    vacuous. (The symptom it finds first is often the issue's own: EndTxn answering
    PRODUCER_FENCED, or one marker closing two transactions.)"""

    class Broken(TxnPathMachine):
        def _broker_accepts(self, c: Client, partition: int) -> bool:
            if c.pid in self.logs[partition].producer_state.ongoing:
                return True
            return super()._broker_accepts(c, partition)

    with pytest.raises(AssertionError):
        run_state_machine_as_test(Broken, settings=settings(
            max_examples=300, derandomize=True, stateful_step_count=40, deadline=None, database=None,
            suppress_health_check=list(HealthCheck), print_blob=False))
