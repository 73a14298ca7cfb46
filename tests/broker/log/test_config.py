from __future__ import annotations

import pytest

from samsa.broker.log.config import (
    LONG_MAX,
    LogConfig,
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
