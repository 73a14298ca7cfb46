"""Topic-level configs this broker knows, as DescribeConfigs reports them: type, broker-level
synonym and default.

Used by CreateTopics (reject unknown names with INVALID_CONFIG, check value types) and by
DescribeConfigs (report every topic config with its value and where it came from).  The table
is derived from the log layer's ``TOPIC_SETTINGS`` (names, types, synonyms: Kafka's
``TopicConfig`` / ``ServerTopicConfigSynonyms``) and the broker's ``BROKER_CONFIG`` (defaults).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from samsa.broker.config import BROKER_CONFIG
from samsa.broker.log.config import TOPIC_SETTINGS, broker_default, validate_topic_configs
from samsa.errors import InvalidConfigError


class ConfigType(enum.IntEnum):
    """DescribeConfigs v3+ ``ConfigType``."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(enum.IntEnum):
    """DescribeConfigs v1+ ``ConfigSource``."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


@dataclass(frozen=True, slots=True)
class TopicConfigDef:
    name: str
    type: ConfigType
    synonym: str | None  # the broker setting supplying the default, if any
    default: str
    doc: str


def _config_text(value: Any) -> str:
    """A default as Kafka's DescribeConfigs shows it (booleans in lower case)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# Derived from the log layer's one table (TOPIC_SETTINGS): the default is the broker
# synonym's (BROKER_CONFIG), in the form DescribeConfigs reports.
TOPIC_CONFIGS: dict[str, TopicConfigDef] = {
    name: TopicConfigDef(name, ConfigType[s.type.name], s.synonym,
                         _config_text(broker_default(s.synonym)), s.doc)
    for name, s in TOPIC_SETTINGS.items()
}
_COMPRESSION_TYPES = BROKER_CONFIG["compression.type"].choices  # producer, uncompressed, ...

_INT_RANGES = {ConfigType.INT: (-(2**31), 2**31 - 1), ConfigType.SHORT: (-(2**15), 2**15 - 1),
               ConfigType.LONG: (-(2**63), 2**63 - 1)}


def _check_type(d: TopicConfigDef, value: str) -> None:
    if d.type in _INT_RANGES:
        try:
            number = int(value.strip())
        except ValueError:
            raise InvalidConfigError(
                f"Invalid value {value!r} for topic config {d.name!r}: expected an integer"
            ) from None
        low, high = _INT_RANGES[d.type]
        if not low <= number <= high:
            raise InvalidConfigError(f"Invalid value {value} for topic config {d.name!r}: "
                                     f"out of range [{low}, {high}]")
    elif d.type == ConfigType.DOUBLE:
        try:
            float(value)
        except ValueError:
            raise InvalidConfigError(
                f"Invalid value {value!r} for topic config {d.name!r}: expected a number"
            ) from None
    elif d.type == ConfigType.BOOLEAN and value.strip().lower() not in ("true", "false"):
        raise InvalidConfigError(
            f"Invalid value {value!r} for topic config {d.name!r}: expected true or false"
        )


def validate_topic_config_values(configs: Mapping[str, str | None]) -> dict[str, str]:
    """Check names and values of topic overrides (CreateTopics); null values are dropped.

    Raises InvalidConfigError naming the first bad setting.
    """
    result: dict[str, str] = {}
    for name, value in configs.items():
        d = TOPIC_CONFIGS.get(name)
        if d is None:
            raise InvalidConfigError(f"Unknown topic config name: {name}")
        if value is None:
            continue
        _check_type(d, value)
        result[name] = value
    if "compression.type" in result and result["compression.type"] not in _COMPRESSION_TYPES:
        raise InvalidConfigError(
            f"Invalid value {result['compression.type']!r} for topic config 'compression.type':"
            f" use {', '.join(_COMPRESSION_TYPES[:-1])} or {_COMPRESSION_TYPES[-1]}"
        )
    # The log layer checks the settings it interprets (ranges, timestamp types, policies).
    validate_topic_configs(result)
    return result
