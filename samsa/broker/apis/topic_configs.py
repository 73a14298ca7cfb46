"""Topic-level configs this broker knows: type, broker-level synonym and default.

Used by CreateTopics (reject unknown names with INVALID_CONFIG, check value types) and by
DescribeConfigs (report every topic config with its value and where it came from).  The names,
types and defaults are Kafka's (``TopicConfig`` / ``ServerLogConfigs``); settings this broker
does not act on (compaction, min.insync.replicas, ...) are accepted and reported, as a
single-node Kafka would, so that admin tools and clients that set them keep working.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from samsa.broker.log.config import validate_topic_configs
from samsa.errors import InvalidConfigError

LONG_MAX = (1 << 63) - 1


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


_T = ConfigType
TOPIC_CONFIGS: dict[str, TopicConfigDef] = {d.name: d for d in [
    TopicConfigDef("cleanup.policy", _T.LIST, "log.cleanup.policy", "delete",
                   "delete (retention) and/or compact; compaction is not implemented"),
    TopicConfigDef("compression.type", _T.STRING, "compression.type", "producer",
                   "final compression of the topic's batches; only 'producer' is applied"),
    TopicConfigDef("compression.gzip.level", _T.INT, "compression.gzip.level", "-1", ""),
    TopicConfigDef("compression.lz4.level", _T.INT, "compression.lz4.level", "9", ""),
    TopicConfigDef("compression.zstd.level", _T.INT, "compression.zstd.level", "3", ""),
    TopicConfigDef("delete.retention.ms", _T.LONG, "log.cleaner.delete.retention.ms",
                   "86400000", "how long delete tombstones are kept on compacted topics"),
    TopicConfigDef("file.delete.delay.ms", _T.LONG, "log.segment.delete.delay.ms", "60000",
                   "delay before a deleted segment's files are removed"),
    TopicConfigDef("flush.messages", _T.LONG, "log.flush.interval.messages", str(LONG_MAX),
                   "fsync after this many messages"),
    TopicConfigDef("flush.ms", _T.LONG, "log.flush.interval.ms", str(LONG_MAX),
                   "fsync after this many milliseconds"),
    TopicConfigDef("index.interval.bytes", _T.INT, "log.index.interval.bytes", "4096",
                   "bytes between offset index entries"),
    TopicConfigDef("max.compaction.lag.ms", _T.LONG, "log.cleaner.max.compaction.lag.ms",
                   str(LONG_MAX), ""),
    TopicConfigDef("max.message.bytes", _T.INT, "message.max.bytes", "1048588",
                   "largest record batch the topic accepts"),
    TopicConfigDef("message.downconversion.enable", _T.BOOLEAN,
                   "log.message.downconversion.enable", "true",
                   "convert records for Fetch v0-3 (magic 0/1); if false they get "
                   "UNSUPPORTED_VERSION (KIP-283)"),
    TopicConfigDef("message.timestamp.after.max.ms", _T.LONG,
                   "log.message.timestamp.after.max.ms", "3600000", ""),
    TopicConfigDef("message.timestamp.before.max.ms", _T.LONG,
                   "log.message.timestamp.before.max.ms", str(LONG_MAX), ""),
    TopicConfigDef("message.timestamp.type", _T.STRING, "log.message.timestamp.type",
                   "CreateTime", "CreateTime or LogAppendTime"),
    TopicConfigDef("min.cleanable.dirty.ratio", _T.DOUBLE, "log.cleaner.min.cleanable.ratio",
                   "0.5", ""),
    TopicConfigDef("min.compaction.lag.ms", _T.LONG, "log.cleaner.min.compaction.lag.ms", "0",
                   ""),
    TopicConfigDef("min.insync.replicas", _T.INT, "min.insync.replicas", "1",
                   "always satisfied on a single node"),
    TopicConfigDef("preallocate", _T.BOOLEAN, "log.preallocate", "false", ""),
    TopicConfigDef("retention.bytes", _T.LONG, "log.retention.bytes", "-1",
                   "delete old segments beyond this size (-1: no limit)"),
    TopicConfigDef("retention.ms", _T.LONG, "log.retention.ms", "604800000",
                   "delete segments older than this (-1: keep forever)"),
    TopicConfigDef("segment.bytes", _T.INT, "log.segment.bytes", "1073741824",
                   "segment file size at which a new segment is rolled"),
    TopicConfigDef("segment.index.bytes", _T.INT, "log.index.size.max.bytes", "10485760", ""),
    TopicConfigDef("segment.jitter.ms", _T.LONG, "log.roll.jitter.ms", "0", ""),
    TopicConfigDef("segment.ms", _T.LONG, "log.roll.ms", "604800000",
                   "segment age at which a new segment is rolled"),
    TopicConfigDef("unclean.leader.election.enable", _T.BOOLEAN,
                   "unclean.leader.election.enable", "false", ""),
]}

_INT_RANGES = {_T.INT: (-(2**31), 2**31 - 1), _T.SHORT: (-(2**15), 2**15 - 1),
               _T.LONG: (-(2**63), 2**63 - 1)}


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
    elif d.type == _T.DOUBLE:
        try:
            float(value)
        except ValueError:
            raise InvalidConfigError(
                f"Invalid value {value!r} for topic config {d.name!r}: expected a number"
            ) from None
    elif d.type == _T.BOOLEAN and value.strip().lower() not in ("true", "false"):
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
    if "compression.type" in result and result["compression.type"] not in (
            "producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"):
        raise InvalidConfigError(
            f"Invalid value {result['compression.type']!r} for topic config 'compression.type':"
            " use producer, uncompressed, gzip, snappy, lz4 or zstd"
        )
    # The log layer checks the settings it interprets (ranges, timestamp types, policies).
    validate_topic_configs(result)
    return result
