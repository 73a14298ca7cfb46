"""Log settings: Kafka's broker-level names and defaults, and the per-topic overrides.

The broker is configured with Kafka's broker names (``log.segment.bytes``, ``log.retention.ms``,
...); a topic may override the matching topic-level names (``segment.bytes``, ``retention.ms``,
...), exactly as in Kafka.  ``LogConfig`` is the resolved, typed view one ``Log`` uses.

One source: the broker settings and their defaults are declared once, in
:data:`samsa.broker.config.BROKER_CONFIG`; :data:`TOPIC_SETTINGS` declares each topic config
once with the broker setting that supplies its default.  ``BROKER_DEFAULTS``,
``TOPIC_TO_BROKER``, the ``LogConfig`` defaults, DescribeConfigs' topic table
(``samsa.broker.apis.topic_configs``) and the dynamic broker configs derive from these two.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from samsa.broker.config import BROKER_CONFIG
from samsa.config import Type
from samsa.errors import ConfigError, InvalidConfigError
from samsa.records import Compression
from samsa.records.compression import validate_level

__all__ = [
    "BROKER_DEFAULTS",
    "LONG_MAX",
    "TOPIC_SETTINGS",
    "TOPIC_TO_BROKER",
    "LogConfig",
    "TopicSetting",
    "broker_default",
    "resolve_broker_config",
    "validate_topic_configs",
]

LONG_MAX = (1 << 63) - 1
# compression.type -> the codec stored batches must have; ``producer`` (absent) keeps the
# producer's (BrokerCompressionType.targetCompression).
_TARGET_CODECS = {"uncompressed": Compression.NONE, "gzip": Compression.GZIP,
                  "snappy": Compression.SNAPPY, "lz4": Compression.LZ4, "zstd": Compression.ZSTD}
_LEVEL_CODECS = {"compression.gzip.level": Compression.GZIP,
                 "compression.lz4.level": Compression.LZ4,
                 "compression.zstd.level": Compression.ZSTD}


@dataclass(frozen=True, slots=True)
class TopicSetting:
    """A topic-level config: its type (as DescribeConfigs reports it) and the broker setting
    that supplies its default (Kafka's ServerTopicConfigSynonyms); the default itself is that
    broker setting's, declared once in :data:`samsa.broker.config.BROKER_CONFIG`."""

    name: str
    type: Type
    synonym: str
    doc: str = ""


# Every topic config Kafka's TopicConfig defines that this broker accepts.  Each is honoured
# as a single-node Kafka would: min.insync.replicas and unclean.leader.election.enable
# trivially (the one replica is always in sync, and Kafka caps min.insync.replicas at the
# replication factor), preallocate only as false (refused otherwise); docs/broker-settings.md
# has the table.
TOPIC_SETTINGS: dict[str, TopicSetting] = {s.name: s for s in [
    TopicSetting("cleanup.policy", Type.LIST, "log.cleanup.policy",
                 "delete (retention) and/or compact (the log cleaner keeps the latest record "
                 "of each key)"),
    TopicSetting("compression.type", Type.STRING, "compression.type",
                 "final compression of the topic's batches: batches of another codec are "
                 "recompressed on append; 'producer' keeps the producer's"),
    TopicSetting("compression.gzip.level", Type.INT, "compression.gzip.level"),
    TopicSetting("compression.lz4.level", Type.INT, "compression.lz4.level"),
    TopicSetting("compression.zstd.level", Type.INT, "compression.zstd.level"),
    TopicSetting("delete.retention.ms", Type.LONG, "log.cleaner.delete.retention.ms",
                 "how long delete tombstones are kept on compacted topics"),
    TopicSetting("file.delete.delay.ms", Type.LONG, "log.segment.delete.delay.ms",
                 "delay before a deleted segment's files (renamed *.deleted) are removed"),
    TopicSetting("flush.messages", Type.LONG, "log.flush.interval.messages",
                 "fsync after this many messages"),
    TopicSetting("flush.ms", Type.LONG, "log.flush.interval.ms",
                 "fsync after this many milliseconds"),
    TopicSetting("index.interval.bytes", Type.INT, "log.index.interval.bytes",
                 "bytes between offset index entries"),
    TopicSetting("max.compaction.lag.ms", Type.LONG, "log.cleaner.max.compaction.lag.ms",
                 "longest a record stays uncompacted (also caps the roll age)"),
    TopicSetting("max.message.bytes", Type.INT, "message.max.bytes",
                 "largest record batch the topic accepts"),
    TopicSetting("message.downconversion.enable", Type.BOOLEAN,
                 "log.message.downconversion.enable",
                 "convert records for Fetch v0-3 (magic 0/1); if false they get "
                 "UNSUPPORTED_VERSION (KIP-283)"),
    TopicSetting("message.timestamp.after.max.ms", Type.LONG,
                 "log.message.timestamp.after.max.ms"),
    TopicSetting("message.timestamp.before.max.ms", Type.LONG,
                 "log.message.timestamp.before.max.ms"),
    TopicSetting("message.timestamp.type", Type.STRING, "log.message.timestamp.type",
                 "CreateTime or LogAppendTime"),
    TopicSetting("min.cleanable.dirty.ratio", Type.DOUBLE, "log.cleaner.min.cleanable.ratio",
                 "dirty share of the log above which it is compacted"),
    TopicSetting("min.compaction.lag.ms", Type.LONG, "log.cleaner.min.compaction.lag.ms",
                 "shortest time a record stays uncompacted"),
    TopicSetting("min.insync.replicas", Type.INT, "min.insync.replicas",
                 "no effect possible: capped at the replication factor (1), as Kafka does"),
    TopicSetting("preallocate", Type.BOOLEAN, "log.preallocate",
                 "must be false: segment files are not preallocated"),
    TopicSetting("retention.bytes", Type.LONG, "log.retention.bytes",
                 "delete old segments beyond this size (-1: no limit)"),
    TopicSetting("retention.ms", Type.LONG, "log.retention.ms",
                 "delete segments older than this (-1: keep forever)"),
    TopicSetting("segment.bytes", Type.INT, "log.segment.bytes",
                 "segment file size at which a new segment is rolled"),
    TopicSetting("segment.index.bytes", Type.INT, "log.index.size.max.bytes"),
    TopicSetting("segment.jitter.ms", Type.LONG, "log.roll.jitter.ms",
                 "most random jitter subtracted from a new segment's segment.ms"),
    TopicSetting("segment.ms", Type.LONG, "log.roll.ms",
                 "segment age at which a new segment is rolled"),
    # No effect possible on one node: the only replica is always in sync (no election).
    TopicSetting("unclean.leader.election.enable", Type.BOOLEAN,
                 "unclean.leader.election.enable",
                 "no effect possible: the only replica is always in sync"),
]}

# The topic configs LogConfig acts on -> the broker setting that supplies each default.
TOPIC_TO_BROKER: dict[str, str] = {name: TOPIC_SETTINGS[name].synonym for name in (
    "segment.bytes", "segment.ms", "retention.ms", "retention.bytes", "index.interval.bytes",
    "segment.index.bytes", "flush.messages", "flush.ms", "max.message.bytes",
    "message.timestamp.type", "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms", "cleanup.policy", "file.delete.delay.ms",
    "delete.retention.ms", "min.compaction.lag.ms", "max.compaction.lag.ms",
    "min.cleanable.dirty.ratio", "segment.jitter.ms", "compression.type",
    "compression.gzip.level", "compression.lz4.level", "compression.zstd.level",
)}

# The broker settings this package reads (the synonyms above and their coarser-unit
# fallbacks, housekeeping intervals), with BROKER_CONFIG's (Kafka's) defaults.  ``None`` means
# "unset": log.roll.ms falls back to log.roll.hours, log.retention.ms to .minutes then
# .hours, log.flush.interval.ms to log.flush.scheduler.interval.ms (Long.MAX).
BROKER_DEFAULTS: dict[str, Any] = {name: BROKER_CONFIG[name].default for name in (
    *TOPIC_TO_BROKER.values(),
    "log.roll.hours", "log.roll.jitter.hours", "log.retention.minutes", "log.retention.hours",
    "log.retention.check.interval.ms", "log.flush.scheduler.interval.ms",
    "log.flush.offset.checkpoint.interval.ms", "log.flush.start.offset.checkpoint.interval.ms",
    "num.partitions", "producer.id.expiration.ms", "producer.id.expiration.check.interval.ms",
    "samsa.decompressed.batch.max.bytes",
    # The log cleaner's (LogCleaner, CleanerConfig).
    "log.cleaner.enable", "log.cleaner.threads", "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.size", "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.max.bytes.per.second", "log.cleaner.backoff.ms",
)}

_INT_SETTINGS = [n for n in BROKER_DEFAULTS if BROKER_CONFIG[n].type in (Type.INT, Type.LONG)]
_DOUBLE_SETTINGS = [n for n in BROKER_DEFAULTS if BROKER_CONFIG[n].type == Type.DOUBLE]
_TIMESTAMP_TYPES = BROKER_CONFIG["log.message.timestamp.type"].choices  # CreateTime, LogAppendTime
_MIN_SEGMENT_BYTES = 14  # Kafka's hard floor (one empty batch header fits); it warns below 1 MiB


def _as_int(name: str, value: Any, error: type[Exception]) -> int:
    if isinstance(value, bool):
        raise _error(error, name, f"expected an integer, got {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise _error(error, name, f"expected an integer, got {value!r}") from None


def _error(error: type[Exception], name: str, problem: str) -> Exception:
    if error is ConfigError:
        return ConfigError(name, problem)
    return error(f"Invalid value for topic config {name!r}: {problem}")


def resolve_broker_config(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """Kafka's defaults overlaid with ``config``; the derived ``*.ms`` settings filled in.

    Unknown keys are kept (the broker config holds much more than log settings).
    """
    merged = dict(BROKER_DEFAULTS)
    if config:
        merged.update({k: v for k, v in config.items() if v is not None})
    if merged["log.roll.jitter.ms"] is None:
        merged["log.roll.jitter.ms"] = _as_int("log.roll.jitter.hours",
                                               merged["log.roll.jitter.hours"],
                                               ConfigError) * 3_600_000
    if merged["log.roll.ms"] is None:
        merged["log.roll.ms"] = _as_int("log.roll.hours", merged["log.roll.hours"], ConfigError) * 3_600_000
    if merged["log.retention.ms"] is None:
        if merged["log.retention.minutes"] is not None:
            minutes = _as_int("log.retention.minutes", merged["log.retention.minutes"], ConfigError)
            merged["log.retention.ms"] = minutes * 60_000
        else:
            hours = _as_int("log.retention.hours", merged["log.retention.hours"], ConfigError)
            merged["log.retention.ms"] = hours * 3_600_000
    if merged["log.flush.interval.ms"] is None:
        merged["log.flush.interval.ms"] = merged["log.flush.scheduler.interval.ms"]
    for name in _INT_SETTINGS:
        if merged.get(name) is not None:
            merged[name] = _as_int(name, merged[name], ConfigError)
    if merged["log.message.timestamp.type"] not in _TIMESTAMP_TYPES:
        raise ConfigError(
            "log.message.timestamp.type",
            f"{merged['log.message.timestamp.type']!r} is not one of {', '.join(_TIMESTAMP_TYPES)}",
        )
    for name in _DOUBLE_SETTINGS:
        try:
            merged[name] = float(merged[name])
        except (TypeError, ValueError):
            raise ConfigError(name, f"expected a number, got {merged[name]!r}") from None
    if merged["log.segment.bytes"] < _MIN_SEGMENT_BYTES:
        raise ConfigError("log.segment.bytes", f"must be at least {_MIN_SEGMENT_BYTES}")
    return merged


def validate_topic_configs(configs: Mapping[str, Any] | None) -> dict[str, str]:
    """Check topic-level overrides; returns them as strings (how Kafka stores and describes them).

    Raises InvalidConfigError naming the bad key.  Keys this log layer does not interpret but
    Kafka knows (e.g. ``min.insync.replicas``) are accepted and kept as-is.
    """
    result: dict[str, str] = {}
    for name, value in (configs or {}).items():
        if value is None:
            continue
        if name == "min.cleanable.dirty.ratio":
            try:
                ratio = float(value)
            except (TypeError, ValueError):
                raise _error(InvalidConfigError, name, f"expected a number, got {value!r}") from None
            if not 0 <= ratio <= 1:
                raise _error(InvalidConfigError, name, f"{ratio} is not between 0 and 1")
            result[name] = str(value)
        elif name in _LEVEL_CODECS:
            number = _as_int(name, value, InvalidConfigError)
            try:  # KIP-390's ranges (GzipCompression, Lz4Compression, ZstdCompression)
                validate_level(_LEVEL_CODECS[name], number)
            except ValueError as exc:
                raise _error(InvalidConfigError, name, str(exc)) from None
            result[name] = str(number)
        elif name in TOPIC_TO_BROKER and name not in ("message.timestamp.type", "cleanup.policy",
                                                      "compression.type"):
            number = _as_int(name, value, InvalidConfigError)
            if name in ("retention.ms", "retention.bytes"):
                if number < -1:
                    raise _error(InvalidConfigError, name, "must be -1 (unlimited) or >= 0")
            elif name == "segment.bytes" and number < _MIN_SEGMENT_BYTES:
                raise _error(InvalidConfigError, name, f"must be at least {_MIN_SEGMENT_BYTES}")
            elif number < (1 if name in ("segment.ms", "flush.messages",
                                         "max.compaction.lag.ms") else 0):
                raise _error(InvalidConfigError, name, f"{number} is out of range")
            result[name] = str(number)
        elif name == "message.timestamp.type":
            if value not in _TIMESTAMP_TYPES:
                raise _error(
                    InvalidConfigError, name, f"{value!r} is not one of {', '.join(_TIMESTAMP_TYPES)}"
                )
            result[name] = str(value)
        elif name == "cleanup.policy":
            policies = [p.strip() for p in str(value).split(",") if p.strip()]
            if not policies or any(p not in ("delete", "compact") for p in policies):
                raise _error(InvalidConfigError, name, f"{value!r}: use delete, compact or both")
            result[name] = ",".join(policies)
        elif name == "min.insync.replicas":
            number = _as_int(name, value, InvalidConfigError)
            if number < 1:
                raise _error(InvalidConfigError, name, f"{number} is out of range: at least 1")
            result[name] = str(number)
        elif name == "preallocate" and str(value).strip().lower() == "true":
            # Kafka preallocates segment.bytes and trims on roll/close (FileRecords); the
            # segments here grow with their appends.
            raise _error(InvalidConfigError, name, "true is not supported: this broker does "
                         "not preallocate segment files; use false or leave it unset")
        else:
            result[name] = str(value)
    low, high = result.get("min.compaction.lag.ms"), result.get("max.compaction.lag.ms")
    if low is not None and high is not None and int(low) > int(high):
        # LogConfig.validateValues
        raise InvalidConfigError(
            f"conflict topic config setting min.compaction.lag.ms ({low}) > "
            f"max.compaction.lag.ms ({high}); make the minimum lag at most the maximum")
    return result


def broker_default(name: str) -> Any:
    """Kafka's default of broker setting ``name``, with an unset ``.ms`` setting resolved from
    its coarser-unit fallback (log.roll.ms from log.roll.hours, ...)."""
    if name in _RESOLVED_DEFAULTS:
        return _RESOLVED_DEFAULTS[name]
    default = BROKER_CONFIG[name].default
    hours = name.removesuffix(".ms") + ".hours"  # log.roll.jitter.ms <- log.roll.jitter.hours
    if default is None and name.endswith(".ms") and hours in BROKER_CONFIG:
        return BROKER_CONFIG[hours].default * 3_600_000
    return default


_RESOLVED_DEFAULTS = resolve_broker_config(None)
_D = _RESOLVED_DEFAULTS


@dataclass(frozen=True, slots=True)
class LogConfig:
    """The settings one partition's log runs with (topic overrides applied); the defaults are
    the broker's (BROKER_DEFAULTS resolved)."""

    segment_bytes: int = _D["log.segment.bytes"]
    segment_ms: int = _D["log.roll.ms"]
    retention_ms: int = _D["log.retention.ms"]
    retention_bytes: int = _D["log.retention.bytes"]
    index_interval_bytes: int = _D["log.index.interval.bytes"]
    segment_index_bytes: int = _D["log.index.size.max.bytes"]
    flush_messages: int = _D["log.flush.interval.messages"]
    flush_ms: int = _D["log.flush.interval.ms"]
    max_message_bytes: int = _D["message.max.bytes"]
    log_append_time: bool = _D["log.message.timestamp.type"] == "LogAppendTime"
    # CreateTime bounds (KIP-937): how far a batch's timestamps may lead / trail the clock.
    timestamp_after_max_ms: int = _D["log.message.timestamp.after.max.ms"]
    timestamp_before_max_ms: int = _D["log.message.timestamp.before.max.ms"]
    cleanup_policy: str = _D["log.cleanup.policy"]
    file_delete_delay_ms: int = _D["log.segment.delete.delay.ms"]
    segment_jitter_ms: int = _D["log.roll.jitter.ms"]
    producer_id_expiration_ms: int = _D["producer.id.expiration.ms"]
    # Compaction (the log cleaner): tombstone / marker horizon, lags, dirty ratio.
    delete_retention_ms: int = _D["log.cleaner.delete.retention.ms"]
    min_compaction_lag_ms: int = _D["log.cleaner.min.compaction.lag.ms"]
    max_compaction_lag_ms: int = _D["log.cleaner.max.compaction.lag.ms"]
    min_cleanable_ratio: float = _D["log.cleaner.min.cleanable.ratio"]
    # What a produced batch may decompress to: the broker's setting, never below the batch
    # size the topic accepts (an uncompressed batch may be that large).
    max_decompressed_bytes: int = max(_D["samsa.decompressed.batch.max.bytes"],
                                      _D["message.max.bytes"])
    # compression.type as a codec: produced batches of another codec are recompressed to it
    # (LogValidator); None for ``producer`` (Kafka's default), which stores batches as produced.
    target_codec: Compression | None = None
    # compression.<codec>.level (KIP-390), used when the broker compresses.
    gzip_level: int = _D["compression.gzip.level"]
    lz4_level: int = _D["compression.lz4.level"]
    zstd_level: int = _D["compression.zstd.level"]

    def compression_level(self, codec: Compression) -> int | None:
        """The level the broker compresses ``codec`` with (None: the codec has no level)."""
        if codec == Compression.GZIP:
            return self.gzip_level
        if codec == Compression.LZ4:
            return self.lz4_level
        if codec == Compression.ZSTD:
            return self.zstd_level
        return None

    def random_segment_jitter(self) -> int:
        """A new segment's roll jitter, subtracted from segment.ms when it is checked for a
        roll: uniform below min(segment.jitter.ms, segment.ms), 0 without jitter
        (LogConfig.randomSegmentJitter)."""
        bound = min(self.segment_jitter_ms, self.segment_ms)
        return random.randrange(bound) if bound > 0 else 0

    @classmethod
    def from_configs(
        cls, broker: Mapping[str, Any] | None = None, topic: Mapping[str, Any] | None = None
    ) -> LogConfig:
        """Resolve topic overrides (topic-level names) over broker settings (broker names)."""
        resolved = resolve_broker_config(broker)
        overrides = validate_topic_configs(topic)

        def get(topic_name: str) -> Any:
            if topic_name in overrides:
                return overrides[topic_name]
            return resolved[TOPIC_TO_BROKER[topic_name]]

        return cls(
            segment_bytes=int(get("segment.bytes")),
            segment_ms=int(get("segment.ms")),
            retention_ms=int(get("retention.ms")),
            retention_bytes=int(get("retention.bytes")),
            index_interval_bytes=int(get("index.interval.bytes")),
            segment_index_bytes=int(get("segment.index.bytes")),
            flush_messages=int(get("flush.messages")),
            flush_ms=int(get("flush.ms")),
            max_message_bytes=int(get("max.message.bytes")),
            log_append_time=get("message.timestamp.type") == "LogAppendTime",
            timestamp_after_max_ms=int(get("message.timestamp.after.max.ms")),
            timestamp_before_max_ms=int(get("message.timestamp.before.max.ms")),
            cleanup_policy=str(get("cleanup.policy")),
            file_delete_delay_ms=int(get("file.delete.delay.ms")),
            segment_jitter_ms=int(get("segment.jitter.ms")),
            producer_id_expiration_ms=int(resolved["producer.id.expiration.ms"]),
            delete_retention_ms=int(get("delete.retention.ms")),
            min_compaction_lag_ms=int(get("min.compaction.lag.ms")),
            max_compaction_lag_ms=int(get("max.compaction.lag.ms")),
            min_cleanable_ratio=float(get("min.cleanable.dirty.ratio")),
            max_decompressed_bytes=max(int(resolved["samsa.decompressed.batch.max.bytes"]),
                                       int(get("max.message.bytes"))),
            target_codec=_TARGET_CODECS.get(str(get("compression.type")).lower()),
            gzip_level=int(get("compression.gzip.level")),
            lz4_level=int(get("compression.lz4.level")),
            zstd_level=int(get("compression.zstd.level")),
        )
