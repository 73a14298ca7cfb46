"""The Spark source and sink over SASL_SSL: kafka.security.protocol, kafka.sasl.* and kafka.ssl.*
pass through to samsa's clients as Spark's Kafka connector passes them to Kafka's, in batch and
streaming."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from samsa.broker import Broker
from tests.support.broker import start_broker
from tests.support.certs import make_tls_files
from tests.support.secure_broker import add_scram_users, sasl_config, tls_config

ROWS = 500


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Broker, dict[str, str]]]:
    files = make_tls_files(tmp_path_factory.mktemp("certs"))
    data = tmp_path_factory.mktemp("spark-sasl")
    add_scram_users(data)
    config = {"listeners": "SASL_SSL://127.0.0.1:0", "num.partitions": 2,
              **tls_config(files), **sasl_config("SASL_SSL")}
    with start_broker(data, config) as broker:
        options = {
            "kafka.bootstrap.servers": broker.bootstrap_servers,
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
                                      'required username="bob" password="bob-secret";',
            "kafka.ssl.truststore.type": "PEM",
            "kafka.ssl.truststore.location": str(files.ca),
        }
        yield broker, options


def test_batch_write_and_read_over_sasl_ssl(spark: Any, secure: tuple[Broker, dict[str, str]]) -> None:
    _, options = secure
    df = spark.createDataFrame([(f"k{i}", f"v{i}") for i in range(ROWS)], "key string, value string")
    df.write.format("samsa").options(**options).option("topic", "spark-secure").mode("append").save()
    rows = (spark.read.format("samsa").options(**options).option("subscribe", "spark-secure")
            .load().collect())
    assert sorted(r.value for r in rows) == sorted(f"v{i}".encode() for i in range(ROWS))


def test_streaming_copy_over_sasl_ssl(spark: Any, secure: tuple[Broker, dict[str, str]],
                                      tmp_path: Path) -> None:
    _, options = secure
    df = spark.createDataFrame([(f"s{i}",) for i in range(ROWS)], "value string")
    df.write.format("samsa").options(**options).option("topic", "spark-secure-in").mode("append").save()
    query = (spark.readStream.format("samsa").options(**options)
             .option("subscribe", "spark-secure-in").option("startingOffsets", "earliest").load()
             .selectExpr("value").writeStream.format("samsa").options(**options)
             .option("topic", "spark-secure-out")
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    rows = (spark.read.format("samsa").options(**options).option("subscribe", "spark-secure-out")
            .load().collect())
    assert sorted(r.value for r in rows) == sorted(f"s{i}".encode() for i in range(ROWS))


def test_a_wrong_password_fails_the_read_naming_the_user(
        spark: Any, secure: tuple[Broker, dict[str, str]]) -> None:
    _, options = secure
    wrong = {**options, "kafka.sasl.jaas.config":
             "org.apache.kafka.common.security.scram.ScramLoginModule required "
             'username="bob" password="not-bobs";'}
    with pytest.raises(Exception) as info:
        spark.read.format("samsa").options(**wrong).option("subscribe", "spark-secure").load().collect()
    text = str(info.value)
    assert "bob" in text and "SCRAM-SHA-512" in text and "not-bobs" not in text
