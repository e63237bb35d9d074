"""Spark's Kafka source and sink (kafka-clients 3.9) over SASL_SSL with SCRAM-SHA-512, configured
with ``kafka.security.protocol`` and friends exactly as for a secured Apache Kafka, against the
StandardAuthorizer. Skips without pyspark/Java/the connector jars (see tests/conftest.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kafkawire.testing import BrokerProcess
from tests.security_helpers import Pki, listeners, make_pki

pytestmark = pytest.mark.spark

JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required " \
       'username="spark" password="spark-secret";'


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Pki]]:
    base = tmp_path_factory.mktemp("spark-sec")
    pki = make_pki(base / "pki")
    ov, ports = listeners(PLAIN="PLAINTEXT", SECURE="SASL_SSL")
    ov.update({
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS;User:spark",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.server_pem),
    })
    bp = BrokerProcess(base / "data", port=ports["PLAIN"], overrides=ov).start()
    try:
        from confluent_kafka.admin import (
            AdminClient,
            ScramCredentialInfo,
            ScramMechanism,
            UserScramCredentialUpsertion,
        )
        admin = AdminClient({"bootstrap.servers": bp.bootstrap})
        for f in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
                "spark", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                b"spark-secret")]).values():
            f.result(30)
        yield f"127.0.0.1:{ports['SECURE']}", pki
    finally:
        bp.close()


def _options(bootstrap: str, pki: Pki) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": bootstrap,
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": JAAS,
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": str(pki.ca_pem),
    }


def test_spark_batch_over_sasl_ssl(spark: Any, secured: tuple[str, Pki]) -> None:
    bootstrap, pki = secured
    topic = f"spark-sec-{uuid.uuid4().hex[:8]}"
    opts = _options(bootstrap, pki)
    rows = [(f"k{i}", f"v{i}") for i in range(20)]
    df = spark.createDataFrame(rows, ["key", "value"])
    writer = df.write.format("kafka").option("topic", topic)
    for k, v in opts.items():
        writer = writer.option(k, v)
    writer.save()
    reader = spark.read.format("kafka").option("subscribe", topic)
    for k, v in opts.items():
        reader = reader.option(k, v)
    got = sorted(r.value.decode() for r in reader.load().collect())
    assert got == sorted(v for _k, v in rows)
