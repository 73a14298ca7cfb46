"""Bad options fail at planning time with a message naming the option."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from samsa.errors import ConfigError
from samsa.spark.options import parse_sink_options, parse_source_options


def test_exactly_one_subscription(spark: Any, kafka_options: dict[str, str]) -> None:
    with pytest.raises(Exception, match="exactly one of the options 'assign', 'subscribe' or "
                                        "'subscribePattern'.*got assign, subscribe"):
        (spark.read.format("samsa").options(**kafka_options)
         .option("subscribe", "a").option("assign", '{"a":[0]}').load().collect())
    with pytest.raises(Exception, match="none was given"):
        spark.read.format("samsa").options(**kafka_options).load().collect()


def test_missing_bootstrap_servers(spark: Any) -> None:
    with pytest.raises(Exception, match="kafka.bootstrap.servers"):
        spark.read.format("samsa").option("subscribe", "a").load().collect()


def test_user_schema_rejected(spark: Any, kafka_options: dict[str, str]) -> None:
    with pytest.raises(Exception, match="user-specified schema"):
        (spark.read.format("samsa").schema("value binary").options(**kafka_options)
         .option("subscribe", "a").load().collect())


def test_overwrite_rejected(spark: Any, kafka_options: dict[str, str], new_topic: Callable[..., str]) -> None:
    df = spark.createDataFrame([("x",)], "value string")
    with pytest.raises(Exception, match="overwrite.*append"):
        df.write.format("samsa").options(**kafka_options).option("topic", new_topic()).mode("overwrite").save()


def test_sink_needs_value_and_topic(spark: Any, kafka_options: dict[str, str]) -> None:
    with pytest.raises(Exception, match="'value' not found"):
        spark.createDataFrame([("x",)], "v string").write.format("samsa").options(**kafka_options) \
            .option("topic", "t").mode("append").save()
    with pytest.raises(Exception, match="topic option required"):
        spark.createDataFrame([("x",)], "value string").write.format("samsa").options(**kafka_options) \
            .mode("append").save()


def test_options_are_case_insensitive_and_typed() -> None:
    opts = parse_source_options({"KAFKA.BOOTSTRAP.SERVERS": "h:1", "SubScribe": "a, b",
                                 "FAILONDATALOSS": "False", "maxOffsetsPerTrigger": "10",
                                 "kafka.fetch.max.wait.ms": "100"}, streaming=True)
    assert opts.subscription.topics == ("a", "b")
    assert not opts.fail_on_data_loss and opts.max_offsets_per_trigger == 10
    assert opts.starting.kind == "latest" and opts.ending is None
    assert opts.client == {"bootstrap.servers": "h:1", "fetch.max.wait.ms": "100"}
    batch = parse_source_options({"kafka.bootstrap.servers": "h:1", "subscribe": "a"}, streaming=False)
    assert batch.starting.kind == "earliest" and batch.ending is not None and batch.ending.kind == "latest"


@pytest.mark.parametrize(("extra", "named"), [
    ({"kafka.auto.offset.reset": "earliest"}, "startingOffsets"),
    ({"kafka.key.deserializer": "x"}, "kafka.key.deserializer"),
    ({"kafka.value.deserializer": "x"}, "kafka.value.deserializer"),
    ({"kafka.enable.auto.commit": "true"}, "kafka.enable.auto.commit"),
    ({"kafka.interceptor.classes": "x"}, "kafka.interceptor.classes"),
    ({"startingOffsets": "latest"}, "startingOffsets"),
    ({"startingOffsets": '{"a":{"0":-1}}'}, "startingOffsets"),
    ({"endingOffsets": "earliest"}, "endingOffsets"),
    ({"endingOffsets": '{"a":{"0":-2}}'}, "endingOffsets"),
    ({"endingOffsets": "{bad"}, "endingOffsets"),
    ({"failOnDataLoss": "maybe"}, "failOnDataLoss"),
    ({"minPartitions": "0"}, "minPartitions"),
    ({"startingTimestamp": "soon"}, "startingTimestamp"),
])
def test_batch_source_option_errors_name_the_option(extra: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        parse_source_options({"kafka.bootstrap.servers": "h:1", "subscribe": "a", **extra}, streaming=False)


def test_streaming_rejects_ending_offsets() -> None:
    with pytest.raises(ConfigError, match="endingOffsets.*batch queries only"):
        parse_source_options({"kafka.bootstrap.servers": "h:1", "subscribe": "a", "endingOffsets": "latest"},
                             streaming=True)


def test_sink_options() -> None:
    with pytest.raises(ConfigError, match="kafka.value.serializer"):
        parse_sink_options({"kafka.bootstrap.servers": "h:1", "kafka.value.serializer": "x"})
    sink = parse_sink_options({"kafka.bootstrap.servers": "h:1", "TOPIC": "t", "kafka.linger.ms": "5"})
    assert sink.topic == "t" and sink.client == {"bootstrap.servers": "h:1", "linger.ms": "5"}
