"""Topic config overrides checked by type as CreateTopics receives them (Kafka's
LogConfig.validate through ConfigDef.parse): INVALID_CONFIG naming the setting."""

from __future__ import annotations

from typing import Any

import pytest

from samsa.protocol import CreateTopicsRequest

INVALID_CONFIG = 40


def _create(client: Any, configs: dict[str, str | None]) -> Any:
    request = CreateTopicsRequest(timeout_ms=1000, validate_only=False, topics=[
        CreateTopicsRequest.CreatableTopic(
            name="t", num_partitions=1, replication_factor=1, assignments=[],
            configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                     for k, v in configs.items()])])
    return client.call(request, 7).topics[0]


@pytest.mark.parametrize(("name", "value", "problem"), [
    ("max.message.bytes", "2147483648", "out of range"),  # INT
    ("retention.ms", "forever", "expected an integer"),  # LONG
    ("min.cleanable.dirty.ratio", "half", "expected a number"),  # DOUBLE
    ("preallocate", "yes", "expected true or false"),  # BOOLEAN
    ("compression.type", "brotli", "use "),
])
def test_a_value_of_the_wrong_type_is_invalid_config(client: Any, log_manager: Any, name: str,
                                                     value: str, problem: str) -> None:
    result = _create(client, {name: value})
    assert result.error_code == INVALID_CONFIG
    assert name in result.error_message and problem in result.error_message
    assert log_manager.topic("t") is None


def test_a_null_override_is_ignored(client: Any, log_manager: Any) -> None:
    result = _create(client, {"retention.ms": None, "segment.ms": "3600000"})
    assert result.error_code == 0
    assert log_manager.topic("t").configs == {"segment.ms": "3600000"}
