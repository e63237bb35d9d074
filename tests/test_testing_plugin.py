"""The pytest plugin that kafkawire offers to other projects."""

from __future__ import annotations

from pathlib import Path

from kafkawire.tools.testing import BrokerProcess, InProcessBroker, api_versions_ok


def test_session_fixture_gives_a_live_broker(kafkawire_bootstrap: str) -> None:
    host, port = kafkawire_bootstrap.rsplit(":", 1)
    assert api_versions_ok(host, int(port))


def test_in_process_broker(tmp_path: Path) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    b = InProcessBroker(tmp_path / "d").start()
    try:
        p = KafkaProducer(bootstrap_servers=b.bootstrap)
        p.send("inproc", b"hi").get(10)
        p.close()
        c = KafkaConsumer(bootstrap_servers=b.bootstrap, consumer_timeout_ms=5000)
        c.assign([TopicPartition("inproc", 0)])
        c.seek_to_beginning()
        assert [m.value for m in c] == [b"hi"]
        c.close()
    finally:
        b.stop()


def test_start_while_running_does_not_start_a_second_process(tmp_path: Path) -> None:
    """``with BrokerProcess(...).start() as bp`` starts once and leaves nothing behind."""
    bp = BrokerProcess(tmp_path / "data")
    with bp.start() as again:
        assert again is bp
        first = bp.proc
        assert first is not None and first.poll() is None
        assert bp.start() is bp and bp.proc is first  # still the one process
    assert first.poll() is not None  # stopped on exit, not leaked
