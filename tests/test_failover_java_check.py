"""bench/failover_java.py's checker on made-up JSON events (the loop itself runs with
``make failover-java``): a re-delivered offset is no duplicate, a value at two offsets is,
and the time to the first acknowledgement is taken on the killed partition only."""

from __future__ import annotations

from bench.failover_java import distinct, recovery
from tests.javatools import Acked, consumed_records, validate_delivery


def _records(*recs: tuple[int, int, str]) -> list[dict[str, object]]:
    return [{"name": "record_data", "partition": p, "offset": o, "key": None, "value": v}
            for p, o, v in recs]


def test_offset_read_twice_after_a_rebalance_is_not_a_duplicate() -> None:
    got = distinct(consumed_records(_records((0, 0, "0"), (0, 1, "1"), (0, 0, "0"), (0, 1, "1"),
                                             (0, 2, "2"))))
    acked = [Acked(0, i, None, str(i)) for i in range(3)]
    assert got == {0: [(0, None, "0"), (1, None, "1"), (2, None, "2")]}
    assert validate_delivery(acked, got, idempotent=True) == []


def test_value_at_two_offsets_is_a_duplicate_and_a_missing_ack_is_lost() -> None:
    got = distinct(consumed_records(_records((0, 0, "0"), (0, 1, "1"), (0, 2, "1"))))
    acked = [Acked(0, 0, None, "0"), Acked(0, 1, None, "1"), Acked(1, 0, None, "2")]
    problems = validate_delivery(acked, got, idempotent=True)
    assert any(p.startswith("duplicated: '1'") for p in problems), problems
    assert any(p.startswith("lost: acked '2'") for p in problems), problems


def test_recovery_counts_acks_on_the_killed_partition_only() -> None:
    events = [{"name": "producer_send_success", "timestamp": t, "partition": p}
              for t, p in ((1000, 0), (1500, 1), (4000, 1), (9000, 0))]
    assert recovery([(1200.0, 0), (1200.0, 1)], events) == [7800.0, 300.0]
