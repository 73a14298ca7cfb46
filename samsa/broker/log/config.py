"""Log settings: Kafka's broker-level names and defaults, and the per-topic overrides.

The broker is configured with Kafka's broker names (``log.segment.bytes``, ``log.retention.ms``,
...); a topic may override the matching topic-level names (``segment.bytes``, ``retention.ms``,
...), exactly as in Kafka.  ``LogConfig`` is the resolved, typed view one ``Log`` uses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from samsa.errors import ConfigError, InvalidConfigError

__all__ = [
    "BROKER_DEFAULTS",
    "LONG_MAX",
    "TOPIC_TO_BROKER",
    "LogConfig",
    "resolve_broker_config",
    "validate_topic_configs",
]

LONG_MAX = (1 << 63) - 1
_DAY_MS = 24 * 60 * 60 * 1000

# Kafka broker settings this package reads, with Kafka's defaults.  ``None`` means "unset"
# (for log.flush.interval.ms Kafka falls back to log.flush.scheduler.interval.ms = Long.MAX).
BROKER_DEFAULTS: dict[str, Any] = {
    "log.segment.bytes": 1024 * 1024 * 1024,
    "log.roll.ms": None,  # falls back to log.roll.hours
    "log.roll.hours": 168,
    "log.retention.ms": None,  # falls back to log.retention.minutes, then .hours
    "log.retention.minutes": None,
    "log.retention.hours": 168,
    "log.retention.bytes": -1,
    "log.retention.check.interval.ms": 300_000,
    "log.index.interval.bytes": 4096,
    "log.index.size.max.bytes": 10 * 1024 * 1024,
    "log.flush.interval.messages": LONG_MAX,
    "log.flush.interval.ms": None,
    "log.flush.scheduler.interval.ms": LONG_MAX,
    "log.flush.offset.checkpoint.interval.ms": 60_000,
    "log.flush.start.offset.checkpoint.interval.ms": 60_000,
    "log.segment.delete.delay.ms": 60_000,
    "log.message.timestamp.type": "CreateTime",
    "log.message.timestamp.after.max.ms": 3_600_000,
    "log.message.timestamp.before.max.ms": LONG_MAX,
    "log.cleanup.policy": "delete",
    "message.max.bytes": 1_048_588,
    "num.partitions": 1,
    "producer.id.expiration.ms": _DAY_MS,
    "producer.id.expiration.check.interval.ms": 600_000,
}

# Topic-level name -> the broker setting that supplies its default.
TOPIC_TO_BROKER: dict[str, str] = {
    "segment.bytes": "log.segment.bytes",
    "segment.ms": "log.roll.ms",
    "retention.ms": "log.retention.ms",
    "retention.bytes": "log.retention.bytes",
    "index.interval.bytes": "log.index.interval.bytes",
    "segment.index.bytes": "log.index.size.max.bytes",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "max.message.bytes": "message.max.bytes",
    "message.timestamp.type": "log.message.timestamp.type",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "cleanup.policy": "log.cleanup.policy",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
}

_INT_SETTINGS = [n for n, v in BROKER_DEFAULTS.items() if v is None or isinstance(v, int)]
_TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
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
        if name in TOPIC_TO_BROKER and name not in ("message.timestamp.type", "cleanup.policy"):
            number = _as_int(name, value, InvalidConfigError)
            if name in ("retention.ms", "retention.bytes"):
                if number < -1:
                    raise _error(InvalidConfigError, name, "must be -1 (unlimited) or >= 0")
            elif name == "segment.bytes" and number < _MIN_SEGMENT_BYTES:
                raise _error(InvalidConfigError, name, f"must be at least {_MIN_SEGMENT_BYTES}")
            elif number < (1 if name in ("segment.ms", "flush.messages") else 0):
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
        else:
            result[name] = str(value)
    return result


@dataclass(frozen=True, slots=True)
class LogConfig:
    """The settings one partition's log runs with (topic overrides applied)."""

    segment_bytes: int = BROKER_DEFAULTS["log.segment.bytes"]
    segment_ms: int = 168 * 3_600_000
    retention_ms: int = 168 * 3_600_000
    retention_bytes: int = -1
    index_interval_bytes: int = 4096
    segment_index_bytes: int = 10 * 1024 * 1024
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    max_message_bytes: int = 1_048_588
    log_append_time: bool = False
    # CreateTime bounds (KIP-937): how far a batch's timestamps may lead / trail the clock.
    timestamp_after_max_ms: int = 3_600_000
    timestamp_before_max_ms: int = LONG_MAX
    cleanup_policy: str = "delete"
    file_delete_delay_ms: int = 60_000
    producer_id_expiration_ms: int = _DAY_MS

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
            producer_id_expiration_ms=int(resolved["producer.id.expiration.ms"]),
        )
