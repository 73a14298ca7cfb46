"""Bad options fail at planning time with a message naming the option."""

from __future__ import annotations

import re
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


def test_trigger_and_partition_options() -> None:
    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "a"}
    opts = parse_source_options({**base, "MINOFFSETSPERTRIGGER": "5", "maxOffsetsPerTrigger": "9",
                                 "maxTriggerDelay": "2min", "maxRecordsPerPartition": "1000"},
                                streaming=True)
    assert (opts.min_offsets_per_trigger, opts.max_offsets_per_trigger) == (5, 9)
    assert opts.max_trigger_delay_ms == 120_000 and opts.max_records_per_partition == 1000
    assert parse_source_options(base, streaming=True).max_trigger_delay_ms == 15 * 60_000
    for raw, ms in (("250", 250), ("100ms", 100), ("3s", 3000), ("1h", 3_600_000), ("1d", 86_400_000),
                    (" 15M ", 900_000)):
        assert parse_source_options({**base, "maxTriggerDelay": raw}, streaming=True).max_trigger_delay_ms == ms


@pytest.mark.parametrize(("extra", "message"), [
    ({"minOffsetsPerTrigger": "0"}, "minOffsetsPerTrigger.*positive"),
    ({"minOffsetsPerTrigger": "ten"}, "minOffsetsPerTrigger.*positive"),
    ({"minOffsetsPerTrigger": "11", "maxOffsetsPerTrigger": "10"},
     r"minOffsetsPerTrigger \(11\) is higher than the maxOffsetsPerTrigger \(10\)"),
    ({"maxTriggerDelay": "soon"}, "maxTriggerDelay.*seconds \\(s\\)"),
    ({"maxTriggerDelay": "5weeks"}, "maxTriggerDelay.*minutes \\(m or min\\)"),
    ({"maxTriggerDelay": "-5s"}, "maxTriggerDelay.*negative"),
    ({"maxRecordsPerPartition": "0"}, "maxRecordsPerPartition.*positive"),
    ({"groupIdPrefix": " "}, "groupIdPrefix.*empty"),
    ({"kafka.isolation.level": "serializable"}, "kafka.isolation.level.*read_committed"),
])
def test_trigger_and_partition_option_errors(extra: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_source_options({"kafka.bootstrap.servers": "h:1", "subscribe": "a", **extra}, streaming=True)


def test_group_ids_as_spark_names_them() -> None:
    from samsa.spark.offsets import consumer_config
    from samsa.spark.options import source_group_ids

    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "a"}
    driver, executor = source_group_ids(parse_source_options(base, streaming=True))
    assert re.fullmatch(r"spark-kafka-source-[0-9a-f-]{36}-driver", driver)
    assert executor == driver.removesuffix("-driver") + "-executor"
    batch_driver, _ = source_group_ids(parse_source_options(base, streaming=False))
    assert batch_driver.startswith("spark-kafka-relation-") and batch_driver != driver
    prefixed, _ = source_group_ids(parse_source_options({**base, "groupIdPrefix": "etl"}, streaming=True))
    assert re.fullmatch(r"etl-[0-9a-f-]{36}-driver", prefixed)
    # kafka.group.id is used exactly, by the driver and every executor; groupIdPrefix is ignored.
    fixed = parse_source_options({**base, "kafka.group.id": "authorized", "groupIdPrefix": "etl"},
                                 streaming=True)
    assert source_group_ids(fixed) == ("authorized", "authorized")
    assert consumer_config(fixed.client, "x", "authorized")["group.id"] == "authorized"
    assert "group.id" not in consumer_config(fixed.client, "x")


def test_readers_give_their_consumers_the_group_ids() -> None:
    from samsa.spark.batch import SamsaBatchReader
    from samsa.spark.offsets import OffsetResolver
    from samsa.spark.stream import SamsaStreamReader

    opts = parse_source_options({"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "a",
                                 "groupIdPrefix": "etl"}, streaming=True)
    stream = SamsaStreamReader(opts)
    assert stream.resolver._consumer.group_id == stream.driver_group_id
    assert stream.executor_group_id.startswith("etl-")
    stream.stop()
    batch = SamsaBatchReader(parse_source_options({"kafka.bootstrap.servers": "127.0.0.1:9",
                                                   "subscribe": "a", "kafka.group.id": "g"},
                                                  streaming=False))
    assert (batch.driver_group_id, batch.executor_group_id) == ("g", "g")
    resolver = OffsetResolver({"bootstrap.servers": "127.0.0.1:9"}, "g")
    assert resolver._consumer.group_id == "g"
    resolver.close()
