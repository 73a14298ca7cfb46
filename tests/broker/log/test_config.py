from __future__ import annotations

import pytest

from samsa.broker.log.config import (
    LONG_MAX,
    LogConfig,
    broker_default,
    resolve_broker_config,
    validate_topic_configs,
)
from samsa.errors import ConfigError, InvalidConfigError


def test_kafka_defaults() -> None:
    config = LogConfig.from_configs()
    assert config.segment_bytes == 1 << 30
    assert config.segment_ms == 7 * 24 * 3600 * 1000
    assert config.retention_ms == 7 * 24 * 3600 * 1000
    assert config.retention_bytes == -1
    assert config.index_interval_bytes == 4096
    assert config.flush_messages == LONG_MAX
    assert config.max_message_bytes == 1048588
    assert not config.log_append_time
    assert config.timestamp_after_max_ms == 3_600_000
    assert config.timestamp_before_max_ms == LONG_MAX


def test_broker_default_resolves_ms_settings_from_their_coarser_units() -> None:
    # What DescribeConfigs reports as a topic setting's broker default (its synonym's value).
    assert broker_default("log.roll.ms") == 168 * 3_600_000  # log.roll.hours
    assert broker_default("log.retention.ms") == 168 * 3_600_000  # log.retention.hours
    assert broker_default("log.roll.jitter.ms") == 0  # log.roll.jitter.hours, outside the log settings
    assert broker_default("log.segment.bytes") == 1 << 30
    assert broker_default("node.id") == 1  # a broker setting with a plain default


def test_topic_overrides_win_over_broker_settings() -> None:
    config = LogConfig.from_configs(
        {"log.segment.bytes": 5000, "log.retention.hours": 1, "message.max.bytes": 100},
        {"segment.bytes": "7000", "message.timestamp.type": "LogAppendTime"},
    )
    assert config.segment_bytes == 7000
    assert config.retention_ms == 3_600_000
    assert config.max_message_bytes == 100
    assert config.log_append_time


def test_timestamp_bounds_from_topic_then_broker() -> None:
    config = LogConfig.from_configs({"log.message.timestamp.after.max.ms": 5000,
                                     "log.message.timestamp.before.max.ms": 9000},
                                    {"message.timestamp.before.max.ms": "100"})
    assert config.timestamp_after_max_ms == 5000
    assert config.timestamp_before_max_ms == 100
    with pytest.raises(InvalidConfigError, match="message.timestamp.after.max.ms"):
        validate_topic_configs({"message.timestamp.after.max.ms": "-1"})


def test_derived_millisecond_settings() -> None:
    resolved = resolve_broker_config({"log.roll.hours": 2, "log.retention.minutes": 5})
    assert resolved["log.roll.ms"] == 7_200_000
    assert resolved["log.retention.ms"] == 300_000
    assert resolve_broker_config({"log.retention.ms": 10, "log.retention.minutes": 5})["log.retention.ms"] == 10


def test_bad_settings_name_the_setting() -> None:
    with pytest.raises(ConfigError, match="log.segment.bytes"):
        resolve_broker_config({"log.segment.bytes": "lots"})
    with pytest.raises(InvalidConfigError, match="retention.ms"):
        validate_topic_configs({"retention.ms": "-5"})
    with pytest.raises(InvalidConfigError, match="message.timestamp.type"):
        validate_topic_configs({"message.timestamp.type": "WallClock"})
    assert validate_topic_configs({"cleanup.policy": "compact, delete", "min.insync.replicas": 1}) == {
        "cleanup.policy": "compact,delete",
        "min.insync.replicas": "1",
    }


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        ({"retention.ms": "-2"}, "'retention.ms': must be -1 (unlimited) or >= 0"),
        ({"retention.bytes": "-2"}, "'retention.bytes': must be -1 (unlimited) or >= 0"),
        ({"segment.bytes": "13"}, "'segment.bytes': must be at least 14"),
        ({"segment.ms": "0"}, "'segment.ms': 0 is out of range"),
        ({"flush.messages": "0"}, "'flush.messages': 0 is out of range"),
        ({"index.interval.bytes": "-1"}, "'index.interval.bytes': -1 is out of range"),
        ({"message.timestamp.type": "x"}, "'message.timestamp.type': 'x' is not one of CreateTime, LogAppendTime"),
        ({"flush.ms": "abc"}, "'flush.ms': expected an integer, got 'abc'"),
        ({"flush.ms": True}, "'flush.ms': expected an integer, got True"),
        ({"cleanup.policy": "delete,shred"}, "'cleanup.policy': 'delete,shred': use delete, compact or both"),
        ({"cleanup.policy": " , "}, "'cleanup.policy': ' , ': use delete, compact or both"),
    ],
    ids=["retention-ms", "retention-bytes", "segment-bytes", "segment-ms", "flush-messages",
         "index-interval", "timestamp-type", "not-an-integer", "boolean", "unknown-policy", "no-policy"],
)
def test_topic_config_errors_say_what_is_wrong(configs: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidConfigError) as raised:
        validate_topic_configs(configs)
    assert str(raised.value).endswith(f"Invalid value for topic config {message}")


def test_topic_config_boundaries_are_accepted() -> None:
    edges = {"retention.ms": "-1", "retention.bytes": "-1", "segment.bytes": "14", "segment.ms": "1",
             "flush.messages": "1", "index.interval.bytes": "0", "flush.ms": "0"}
    assert validate_topic_configs({"cleanup.policy": None, **edges, "file.delete.delay.ms": "0"}) == {
        **edges, "file.delete.delay.ms": "0"}
    assert validate_topic_configs({"retention.ms": "0", "retention.bytes": "0"}) == {
        "retention.ms": "0", "retention.bytes": "0"}


def test_broker_setting_errors_say_what_is_wrong() -> None:
    with pytest.raises(ConfigError) as raised:
        resolve_broker_config({"log.segment.bytes": "lots"})
    assert "log.segment.bytes" in str(raised.value) and "expected an integer, got 'lots'" in str(raised.value)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"log.roll.hours": "x"}, "'log.roll.hours': expected an integer, got 'x'"),
        ({"log.retention.minutes": "x"}, "'log.retention.minutes': expected an integer, got 'x'"),
        ({"log.retention.hours": "x"}, "'log.retention.hours': expected an integer, got 'x'"),
        ({"log.message.timestamp.type": "WallClock"},
         "'log.message.timestamp.type': 'WallClock' is not one of CreateTime, LogAppendTime"),
        ({"log.segment.bytes": 13}, "'log.segment.bytes': must be at least 14"),
    ],
    ids=["roll-hours", "retention-minutes", "retention-hours", "timestamp-type", "segment-bytes"],
)
def test_broker_fallback_and_choice_errors_name_the_setting(config: dict[str, object],
                                                            message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        resolve_broker_config(config)
    assert str(raised.value) == f"Invalid setting {message}"


def test_broker_segment_bytes_floor_is_accepted() -> None:
    assert resolve_broker_config({"log.segment.bytes": 14})["log.segment.bytes"] == 14


def test_every_log_setting_is_taken_from_the_configs() -> None:
    config = LogConfig.from_configs(
        {"log.index.interval.bytes": 100, "log.index.size.max.bytes": 2000,
         "producer.id.expiration.ms": 5000, "log.segment.delete.delay.ms": 70},
        {"cleanup.policy": "compact", "file.delete.delay.ms": "30"},
    )
    assert config.index_interval_bytes == 100
    assert config.segment_index_bytes == 2000
    assert config.producer_id_expiration_ms == 5000
    assert config.cleanup_policy == "compact"
    assert config.file_delete_delay_ms == 30
    assert LogConfig.from_configs({"log.segment.delete.delay.ms": 70}).file_delete_delay_ms == 70


def test_decompressed_batch_limit_is_the_broker_setting_never_below_max_message_bytes() -> None:
    MiB = 1024 * 1024
    assert LogConfig().max_decompressed_bytes == 32 * MiB
    assert LogConfig.from_configs().max_decompressed_bytes == 32 * MiB
    config = LogConfig.from_configs({"samsa.decompressed.batch.max.bytes": 5 * MiB})
    assert config.max_decompressed_bytes == 5 * MiB
    # An uncompressed batch may be as large as max.message.bytes: so may a decompressed one.
    config = LogConfig.from_configs({"samsa.decompressed.batch.max.bytes": 5 * MiB},
                                    {"max.message.bytes": str(8 * MiB)})
    assert config.max_decompressed_bytes == 8 * MiB
