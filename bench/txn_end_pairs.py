"""EndTxn(commit) then at once EndTxn(abort) at the epoch the commit returned (transaction
version 2, EndTxn v5), N times, against any cluster: what franz-go's GroupTransactSession does
when a rebalance revokes it right after a commit. Counts the answers the abort got first
(Kafka: CONCURRENT_TRANSACTIONS while the commit's markers are written, then NONE; never
PRODUCER_FENCED) and times each transaction (produce to every partition, commit, abort) and the wait for the
commit's markers (EndTxn(commit) answered until the abort is accepted).

    .venv/bin/python bench/txn_end_pairs.py --bootstrap 127.0.0.1:9092 [--pairs 50] [--partitions 3]

Only the raw protocol (this repo's codecs), so the same run works against Apache Kafka."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from protocol._generated.create_topics_request import CreateTopicsRequest  # noqa: E402
from protocol._generated.describe_transactions_request import (  # noqa: E402
    DescribeTransactionsRequest,
)
from protocol._generated.end_txn_request import EndTxnRequest  # noqa: E402
from protocol._generated.find_coordinator_request import FindCoordinatorRequest  # noqa: E402
from protocol._generated.init_producer_id_request import InitProducerIdRequest  # noqa: E402
from protocol._generated.metadata_request import MetadataRequest  # noqa: E402
from protocol._generated.produce_request import ProduceRequest  # noqa: E402
from protocol.errors import ErrorCode  # noqa: E402
from protocol.records import SimpleRecord, build_batch  # noqa: E402
from tests.conftest import RawClient  # noqa: E402

RETRIABLE = {
    ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
    ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.REQUEST_TIMED_OUT,
}


class Pairs:
    def __init__(self, bootstrap: str, partitions: int) -> None:
        self.seed = bootstrap.split(",")[0]
        self.conns: dict[str, RawClient] = {}
        self.partitions = partitions
        self.topic = f"pairs-{uuid.uuid4().hex[:8]}"
        self.tid = f"pairs-{uuid.uuid4().hex[:8]}"

    def conn(self, address: str) -> RawClient:
        if address not in self.conns:
            self.conns[address] = RawClient(address, "txn-end-pairs")
        return self.conns[address]

    def close(self) -> None:
        for c in self.conns.values():
            c.close()

    def brokers(self) -> dict[int, str]:
        md = self.conn(self.seed).request(MetadataRequest(topics=[]), 12)
        return {b.node_id: f"{b.host}:{b.port}" for b in md.brokers}

    def setup(self) -> None:
        n = len(self.brokers())
        rf = min(3, n)
        req = CreateTopicsRequest(timeout_ms=30000, topics=[CreateTopicsRequest.CreatableTopic(
            name=self.topic, num_partitions=self.partitions, replication_factor=rf)])
        deadline = time.monotonic() + 60
        while True:
            code = self.controller_request(req).topics[0].error_code
            if code in (0, ErrorCode.TOPIC_ALREADY_EXISTS):
                break
            assert time.monotonic() < deadline, f"CreateTopics: {ErrorCode(code).name}"
            time.sleep(0.2)
        self.leaders = self.wait_leaders()
        self.coordinator = self.find_coordinator()

    def controller_request(self, req: Any) -> Any:
        return self.conn(self.seed).request(req, 7)

    def wait_leaders(self) -> dict[int, str]:
        deadline = time.monotonic() + 60
        while True:
            brokers = self.brokers()
            md = self.conn(self.seed).request(MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name=self.topic)]), 12)
            t = md.topics[0]
            leaders = {p.partition_index: brokers.get(p.leader_id) for p in t.partitions}
            if t.error_code == 0 and len(leaders) == self.partitions and all(leaders.values()):
                return {p: a for p, a in leaders.items() if a is not None}
            assert time.monotonic() < deadline, "topic leaders"
            time.sleep(0.2)

    def find_coordinator(self) -> str:
        deadline = time.monotonic() + 60
        while True:
            r = self.conn(self.seed).request(
                FindCoordinatorRequest(key_type=1, coordinator_keys=[self.tid]), 4)
            c = r.coordinators[0]
            if c.error_code == 0:
                return f"{c.host}:{c.port}"
            assert time.monotonic() < deadline, f"FindCoordinator: {c.error_code}"
            time.sleep(0.2)

    def init(self, pid: int = -1, epoch: int = -1) -> tuple[int, int]:
        deadline = time.monotonic() + 60
        while True:
            r = self.conn(self.coordinator).request(InitProducerIdRequest(
                transactional_id=self.tid, transaction_timeout_ms=60000,
                producer_id=pid, producer_epoch=epoch), 5)
            if r.error_code == 0:
                return int(r.producer_id), int(r.producer_epoch)
            assert r.error_code in RETRIABLE and time.monotonic() < deadline, r.error_code
            time.sleep(0.02)

    def produce(self, pid: int, epoch: int) -> int:
        """One transactional record to every partition (Produce v12 adds the partition to the
        transaction); retried as a client does. The number of retries."""
        retries = 0
        for p, leader in self.leaders.items():
            batch = build_batch([SimpleRecord(value=b"v", key=b"k")], producer_id=pid,
                                producer_epoch=epoch, base_sequence=0, is_transactional=True)
            req = ProduceRequest(transactional_id=self.tid, acks=-1, timeout_ms=30000,
                                 topic_data=[ProduceRequest.TopicProduceData(
                                     name=self.topic, partition_data=[
                                         ProduceRequest.PartitionProduceData(
                                             index=p, records=batch)])])
            deadline = time.monotonic() + 60
            while True:
                r = self.conn(leader).request(req, 12).responses[0].partition_responses[0]
                if r.error_code == 0:
                    break
                assert r.error_code in RETRIABLE and time.monotonic() < deadline, (
                    f"produce p{p}: {ErrorCode(r.error_code).name}")
                retries += 1
                time.sleep(0.05)
        return retries

    def state(self) -> str:
        r = self.conn(self.coordinator).request(
            DescribeTransactionsRequest(transactional_ids=[self.tid]), 0)
        return str(r.transaction_states[0].transaction_state)

    def end(self, pid: int, epoch: int, commit: bool) -> Any:
        return self.conn(self.coordinator).request(EndTxnRequest(
            transactional_id=self.tid, producer_id=pid, producer_epoch=epoch,
            committed=commit), 5)


def run(bootstrap: str, pairs: int, partitions: int, watch_markers: bool = False
        ) -> dict[str, Any]:
    """The answers the immediate aborts got first and the time of each round. With
    ``watch_markers`` the abort waits until DescribeTransactions shows CompleteCommit, and the
    marker times are that wait (comparable on a coordinator that fences the abort)."""
    w = Pairs(bootstrap, partitions)
    try:
        w.setup()
        pid, epoch = w.init()
        first: Counter[str] = Counter()
        produce_retries = 0
        rounds = []
        #: EndTxn(commit) answered -> the abort accepted: the commit's markers written and
        #: its CompleteCommit recorded (polled every 5 ms)
        markers: list[float] = []
        for _ in range(pairs):
            t0 = time.monotonic()
            produce_retries += w.produce(pid, epoch)
            deadline = time.monotonic() + 60
            while (c := w.end(pid, epoch, True)).error_code in RETRIABLE:
                assert time.monotonic() < deadline
                time.sleep(0.02)
            assert c.error_code == 0, ErrorCode(c.error_code).name
            pid, epoch = int(c.producer_id), int(c.producer_epoch)
            committed = time.monotonic()
            if watch_markers:  # the coordinator's own view, before the abort
                while w.state() != "CompleteCommit":
                    assert time.monotonic() < deadline
                    time.sleep(0.005)
                markers.append(time.monotonic() - committed)
            a = w.end(pid, epoch, False)
            first[ErrorCode(a.error_code).name] += 1
            while a.error_code in RETRIABLE:
                assert time.monotonic() < deadline
                time.sleep(0.005)
                a = w.end(pid, epoch, False)
            if not watch_markers:
                markers.append(time.monotonic() - committed)
            if a.error_code == ErrorCode.PRODUCER_FENCED:
                pid, epoch = w.init()  # fatal for a client; start over to keep counting
            else:
                assert a.error_code == 0, ErrorCode(a.error_code).name
                pid, epoch = int(a.producer_id), int(a.producer_epoch)
            rounds.append(time.monotonic() - t0)
        return {
            "pairs": pairs, "partitions": partitions, "first_abort_answer": dict(first),
            "fenced": first.get("PRODUCER_FENCED", 0), "produce_retries": produce_retries,
            "round_ms_median": round(statistics.median(rounds) * 1000, 1),
            "round_ms_max": round(max(rounds) * 1000, 1),
            "markers_ms_median": round(statistics.median(markers) * 1000, 1),
            "markers_ms_p90": round(sorted(markers)[int(len(markers) * 0.9)] * 1000, 1),
            "markers_ms_max": round(max(markers) * 1000, 1),
        }
    finally:
        w.close()


def run_commit_produce(bootstrap: str, rounds: int, partitions: int) -> dict[str, Any]:
    """EndTxn(commit) and at once the next transaction's first write to every partition, all
    partitions at once (what a transactional client does between two transactions): the first
    answer of each write and the time until every partition took it. The broker retries
    CONCURRENT_TRANSACTIONS for up to add.partitions.to.txn.retry.backoff.max.ms (100 ms)
    before the client sees it (KAFKA-18654)."""
    from concurrent.futures import ThreadPoolExecutor

    w = Pairs(bootstrap, partitions)
    own: dict[int, RawClient] = {}
    try:
        w.setup()
        own = {p: RawClient(a, "txn-end-pairs-produce") for p, a in w.leaders.items()}
        pid, epoch = w.init()
        w.produce(pid, epoch)
        first: Counter[str] = Counter()
        waits: list[float] = []

        def write(p: int, pid: int, epoch: int) -> tuple[int, int]:
            batch = build_batch([SimpleRecord(value=b"v", key=b"k")], producer_id=pid,
                                producer_epoch=epoch, base_sequence=0, is_transactional=True)
            req = ProduceRequest(transactional_id=w.tid, acks=-1, timeout_ms=30000,
                                 topic_data=[ProduceRequest.TopicProduceData(
                                     name=w.topic, partition_data=[
                                         ProduceRequest.PartitionProduceData(
                                             index=p, records=batch)])])
            codes = []
            deadline = time.monotonic() + 60
            while True:
                r = own[p].request(req, 12).responses[0].partition_responses[0]
                codes.append(r.error_code)
                if r.error_code == 0:
                    return codes[0], len(codes) - 1
                assert r.error_code in RETRIABLE and time.monotonic() < deadline, (
                    ErrorCode(r.error_code).name)
                time.sleep(0.1)  # a client's retry.backoff.ms

        with ThreadPoolExecutor(partitions) as pool:
            for _ in range(rounds):
                deadline = time.monotonic() + 60
                while (c := w.end(pid, epoch, True)).error_code in RETRIABLE:
                    assert time.monotonic() < deadline
                    time.sleep(0.02)
                assert c.error_code == 0, ErrorCode(c.error_code).name
                pid, epoch = int(c.producer_id), int(c.producer_epoch)
                t0 = time.monotonic()
                for code, _retries in pool.map(write, list(own), [pid] * len(own),
                                               [epoch] * len(own)):
                    first[ErrorCode(code).name] += 1
                waits.append(time.monotonic() - t0)
        return {
            "rounds": rounds, "partitions": partitions, "first_write_answer": dict(first),
            "write_ms_median": round(statistics.median(waits) * 1000, 1),
            "write_ms_p90": round(sorted(waits)[int(len(waits) * 0.9)] * 1000, 1),
            "write_ms_max": round(max(waits) * 1000, 1),
        }
    finally:
        for c in own.values():
            c.close()
        w.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--pairs", type=int, default=50)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--watch-markers", action="store_true",
                    help="wait for CompleteCommit (DescribeTransactions) before each abort")
    ap.add_argument("--commit-produce", action="store_true",
                    help="commit, then the next transaction's first write at once (no aborts)")
    args = ap.parse_args()
    if args.commit_produce:
        print(json.dumps(run_commit_produce(args.bootstrap, args.pairs, args.partitions)))
    else:
        print(json.dumps(run(args.bootstrap, args.pairs, args.partitions, args.watch_markers)))


if __name__ == "__main__":
    main()
