"""Parsing and validation of the source's and sink's options, named as in Spark's Kafka source.

Spark hands options over case-insensitively (keys lower-cased), so every lookup here uses the
lower-cased name and every error message uses Spark's spelling.  ``kafka.*`` options go to
Samsa's clients with the prefix removed; the ones Spark's Kafka source refuses are refused
here too, because the source manages offsets and (de)serialization itself.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from samsa.errors import ConfigError

if TYPE_CHECKING:
    # Imported where used: samsa.net's package import (client, protocol) costs ~120 ms in
    # every planner process Spark starts (create_data_source needs only the schema).
    from samsa.net.cluster import TopicPartition

__all__ = [
    "DEFAULT_MAX_TRIGGER_DELAY_MS",
    "DEFAULT_TRANSACTIONAL_ID_PREFIX",
    "EARLIEST",
    "LATEST",
    "OffsetSpec",
    "SinkOptions",
    "SourceOptions",
    "Subscription",
    "client_config",
    "parse_sink_options",
    "parse_source_options",
    "source_group_ids",
]

log = logging.getLogger(__name__)

EARLIEST = -2  # in startingOffsets/endingOffsets JSON, as in Spark
LATEST = -1

# kafka.<name> settings Spark's Kafka source refuses, and what to use instead.
_REJECTED_SOURCE = {
    "auto.offset.reset": "set the source option 'startingOffsets' instead",
    "key.deserializer": "keys are always read as bytes; cast or deserialize them with DataFrame operations",
    "value.deserializer": "values are always read as bytes; cast or deserialize them with DataFrame "
                          "operations",
    "enable.auto.commit": "the source never commits offsets to Kafka; progress lives in the checkpoint",
    "interceptor.classes": "interceptors are not supported by the source",
}
_REJECTED_SINK = {
    "key.serializer": "keys are written as bytes; give a string or binary 'key' column",
    "value.serializer": "values are written as bytes; give a string or binary 'value' column",
}
# Spark warns about and ignores these on the sink side; the source passes them through.
_SOURCE_ONLY_CLIENT = ("group.id",)
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000  # Spark's maxTriggerDelay default, 15m
DEFAULT_TRANSACTIONAL_ID_PREFIX = "spark-samsa-sink"
# Spark's default groupIdPrefix per query kind (KafkaSourceProvider).
_GROUP_ID_PREFIX = {True: "spark-kafka-source", False: "spark-kafka-relation"}
_ISOLATION_LEVELS = ("read_uncommitted", "read_committed")


def _lower(options: Mapping[str, Any]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def client_config(options: Mapping[str, Any], rejected: Mapping[str, str]) -> dict[str, str]:
    """The ``kafka.*`` options with the prefix removed; refuses the ones Spark refuses."""
    opts = _lower(options)
    servers = opts.get("kafka.bootstrap.servers", "").strip()
    if not servers:
        raise ConfigError("kafka.bootstrap.servers",
                          "option 'kafka.bootstrap.servers' must be specified (host:port[,host:port])")
    conf: dict[str, str] = {}
    for key, value in opts.items():
        if not key.startswith("kafka."):
            continue
        name = key[len("kafka."):]
        if name in rejected:
            raise ConfigError(f"kafka.{name}",
                              f"Kafka option '{name}' is not supported: {rejected[name]}")
        conf[name] = value
    return conf


@dataclass(frozen=True)
class Subscription:
    """Which partitions to read: exactly one of subscribe, subscribePattern, assign."""

    kind: Literal["subscribe", "subscribePattern", "assign"]
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    partitions: tuple[TopicPartition, ...] = ()

    def matches(self, topic: str) -> bool:
        if self.kind == "subscribe":
            return topic in self.topics
        if self.kind == "subscribePattern":
            assert self.pattern is not None
            return re.fullmatch(self.pattern, topic) is not None
        return any(tp.topic == topic for tp in self.partitions)


@dataclass(frozen=True)
class OffsetSpec:
    """Where a range starts or ends.

    kind: earliest | latest | offsets (``per_partition`` values are offsets, -2 earliest,
    -1 latest) | timestamp (``timestamp`` ms for every partition) | timestamps (per partition).
    """

    kind: Literal["earliest", "latest", "offsets", "timestamp", "timestamps"]
    per_partition: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamp: int | None = None
    option: str = ""  # the option it came from, for error messages


@dataclass(frozen=True)
class SourceOptions:
    client: Mapping[str, str]
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec | None
    starting_by_timestamp_strategy: Literal["error", "latest"] = "error"
    fail_on_data_loss: bool = True
    include_headers: bool = False
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    poll_timeout_ms: int = 120_000
    # kafka.group.id (used as is) or groupIdPrefix (unique ids made per query).
    group_id: str | None = None
    group_id_prefix: str = "spark-kafka-source"

    @property
    def read_committed(self) -> bool:
        """kafka.isolation.level=read_committed: ranges end at the last stable offset."""
        return self.client.get("isolation.level") == "read_committed"


@dataclass(frozen=True)
class SinkOptions:
    client: Mapping[str, str]
    topic: str | None
    include_headers: bool = False
    # The exactly-once mode (docs/spark-exactly-once.md): one transaction per task, with the
    # micro-batch id committed as the sink group's offset on (progress_topic, 0).
    transactional: bool = False
    transactional_id_prefix: str = DEFAULT_TRANSACTIONAL_ID_PREFIX
    progress_topic: str | None = None


def _bool(opts: Mapping[str, str], key: str, name: str, default: bool) -> bool:
    raw = opts.get(key)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise ConfigError(name, f"must be true or false, got {raw!r}")
    return value == "true"


def _positive_int(opts: Mapping[str, str], key: str, name: str) -> int | None:
    raw = opts.get(key)
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise ConfigError(name, f"must be a positive integer, got {raw!r}") from None
    if value <= 0:
        raise ConfigError(name, f"must be a positive integer, got {raw!r}")
    return value


# Spark's Utils.timeStringAsMs: a number with an optional unit, milliseconds without one.
_TIME_UNITS_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000,
                  "d": 86_400_000}
_TIME = re.compile(r"(-?[0-9]+)([a-z]+)?")


def _time_ms(opts: Mapping[str, str], key: str, name: str, default: int) -> int:
    raw = opts.get(key)
    if raw is None:
        return default
    match = _TIME.fullmatch(raw.strip().lower())
    if match is None or (match.group(2) is not None and match.group(2) not in _TIME_UNITS_MS):
        raise ConfigError(name, f"{raw!r} is not a time: give it as seconds (s), milliseconds (ms), "
                                "microseconds (us), minutes (m or min), hours (h) or days (d), "
                                "e.g. 50s, 100ms or 15m")
    value = int(match.group(1)) * _TIME_UNITS_MS[match.group(2) or "ms"]
    if value < 0:
        raise ConfigError(name, f"must not be negative, got {raw!r}")
    return int(value)


def _json(raw: str, name: str, example: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError as e:
        raise ConfigError(name, f"is not valid JSON ({e.msg}); expected e.g. {example}") from None


def _partition_map(raw: str, name: str) -> dict[TopicPartition, int]:
    from samsa.net.cluster import TopicPartition

    example = '{"topicA":{"0":23,"1":-1}}'
    data = _json(raw, name, example)
    if not isinstance(data, dict):
        raise ConfigError(name, f"expected a JSON object like {example}, got {raw!r}")
    out: dict[TopicPartition, int] = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            raise ConfigError(name, f"topic {topic!r} needs an object of partition: value, like {example}")
        for p, value in parts.items():
            try:
                out[TopicPartition(topic, int(p))] = int(value)
            except (TypeError, ValueError):
                raise ConfigError(name, f"{topic}/{p}: expected an integer partition and value, "
                                        f"like {example}") from None
    return out


def _subscription(opts: Mapping[str, str]) -> Subscription:
    given = [name for name in ("assign", "subscribe", "subscribePattern") if name.lower() in opts]
    if len(given) != 1:
        found = f"got {', '.join(given)}" if given else "none was given"
        raise ConfigError("subscribe/subscribePattern/assign",
                          f"exactly one of the options 'assign', 'subscribe' or 'subscribePattern' "
                          f"must be specified; {found}")
    kind = given[0]
    raw = opts[kind.lower()]
    if kind == "subscribe":
        topics = tuple(t.strip() for t in raw.split(",") if t.strip())
        if not topics:
            raise ConfigError("subscribe", f"no topics to subscribe to in {raw!r}; give a comma list")
        return Subscription("subscribe", topics=topics)
    if kind == "subscribePattern":
        if not raw.strip():
            raise ConfigError("subscribePattern", "pattern to subscribe is empty")
        try:
            re.compile(raw.strip())
        except re.error as e:
            raise ConfigError("subscribePattern", f"{raw!r} is not a valid regular expression: {e}") from None
        return Subscription("subscribePattern", pattern=raw.strip())
    from samsa.net.cluster import TopicPartition

    example = '{"topicA":[0,1],"topicB":[2,4]}'
    data = _json(raw, "assign", example)
    if not isinstance(data, dict) or not data:
        raise ConfigError("assign", f"expected a JSON object like {example}, got {raw!r}")
    parts: list[TopicPartition] = []
    for topic, plist in data.items():
        if not isinstance(plist, list) or not all(isinstance(p, int) for p in plist):
            raise ConfigError("assign", f"topic {topic!r} needs a list of partition numbers, like {example}")
        parts += [TopicPartition(topic, p) for p in plist]
    return Subscription("assign", partitions=tuple(dict.fromkeys(parts)))


def _offsets(opts: Mapping[str, str], prefix: str, streaming: bool, default: OffsetSpec | None
             ) -> OffsetSpec | None:
    """startingX / endingX options; the timestamp options take precedence, as in Spark."""
    ts_name, by_ts_name, off_name = f"{prefix}Timestamp", f"{prefix}OffsetsByTimestamp", f"{prefix}Offsets"
    if ts_name.lower() in opts:
        raw = opts[ts_name.lower()]
        try:
            ts = int(raw.strip())
        except ValueError:
            raise ConfigError(ts_name, f"must be a timestamp in ms since the epoch, got {raw!r}") from None
        if ts < 0:
            raise ConfigError(ts_name, f"must be >= 0, got {ts}")
        return OffsetSpec("timestamp", timestamp=ts, option=ts_name)
    if by_ts_name.lower() in opts:
        return OffsetSpec("timestamps", per_partition=_partition_map(opts[by_ts_name.lower()], by_ts_name),
                          option=by_ts_name)
    if off_name.lower() not in opts:
        return default
    raw = opts[off_name.lower()].strip()
    if raw.lower() in ("earliest", "latest"):
        return OffsetSpec(raw.lower(), option=off_name)  # type: ignore[arg-type]
    if not raw.startswith("{"):
        raise ConfigError(off_name, f"must be 'earliest', 'latest' or JSON like "
                                    f'{{"topicA":{{"0":23,"1":-1}}}}, got {raw!r}')
    return OffsetSpec("offsets", per_partition=_partition_map(raw, off_name), option=off_name)


def parse_source_options(options: Mapping[str, Any], streaming: bool) -> SourceOptions:
    """Validate the reader's options; raises ConfigError naming the offending option."""
    opts = _lower(options)
    client = client_config(opts, _REJECTED_SOURCE)
    subscription = _subscription(opts)
    default_start = OffsetSpec("latest" if streaming else "earliest", option="startingOffsets")
    starting = _offsets(opts, "starting", streaming, default_start)
    assert starting is not None
    ending = _offsets(opts, "ending", streaming, None)
    if streaming:
        for name in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"):
            if name.lower() in opts:
                raise ConfigError(name, f"option '{name}' is for batch queries only; a streaming query "
                                        "has no end")
    else:
        if starting.kind == "latest" or (starting.kind == "offsets" and LATEST in starting.per_partition.values()):
            raise ConfigError("startingOffsets", "starting offset can't be latest (or -1) for batch queries "
                                                 "on Kafka; use earliest or specific offsets")
        if ending is not None and (ending.kind == "earliest" or (
                ending.kind == "offsets" and EARLIEST in ending.per_partition.values())):
            raise ConfigError("endingOffsets", "ending offset can't be earliest (or -2) for batch queries "
                                               "on Kafka; use latest or specific offsets")
        if ending is None:
            ending = OffsetSpec("latest", option="endingOffsets")
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise ConfigError("startingOffsetsByTimestampStrategy", f"must be 'error' or 'latest', got {strategy!r}")
    isolation = client.get("isolation.level")
    if isolation is not None:
        client["isolation.level"] = isolation = isolation.strip().lower()
        if isolation not in _ISOLATION_LEVELS:
            raise ConfigError("kafka.isolation.level", f"must be read_committed or read_uncommitted, "
                                                       f"got {isolation!r}")
    max_offsets = _positive_int(opts, "maxoffsetspertrigger", "maxOffsetsPerTrigger")
    min_offsets = _positive_int(opts, "minoffsetspertrigger", "minOffsetsPerTrigger")
    if min_offsets is not None and max_offsets is not None and min_offsets > max_offsets:
        raise ConfigError("minOffsetsPerTrigger", f"the value of minOffsetsPerTrigger ({min_offsets}) "
                                                  f"is higher than the maxOffsetsPerTrigger ({max_offsets})")
    max_delay = _time_ms(opts, "maxtriggerdelay", "maxTriggerDelay", DEFAULT_MAX_TRIGGER_DELAY_MS)
    if not streaming:
        for name in ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay"):
            if name.lower() in opts:
                log.warning("%s option ignored in batch queries", name)
    group_id = client.get("group.id")
    prefix = opts.get("groupidprefix", _GROUP_ID_PREFIX[streaming])
    if not prefix.strip():
        raise ConfigError("groupIdPrefix", "is empty; give a prefix for the source's consumer group "
                                           "ids or drop the option")
    if group_id is not None:
        # KafkaSourceProvider's warning: readers sharing a group id can disturb each other.
        log.warning("option kafka.group.id=%r is set: every query and source using it shares one "
                    "consumer group id%s", group_id,
                    "; groupIdPrefix is ignored" if "groupidprefix" in opts else "")
    if "kafkaconsumer.polltimeoutms" in opts:
        poll_timeout = _positive_int(opts, "kafkaconsumer.polltimeoutms", "kafkaConsumer.pollTimeoutMs")
    else:
        poll_timeout = None
    if subscription.kind == "assign":
        # Specific offsets must cover exactly the assigned partitions (Spark checks the same).
        for spec in (starting, ending):
            if spec is not None and spec.kind in ("offsets", "timestamps") and \
                    set(spec.per_partition) != set(subscription.partitions):
                raise ConfigError(spec.option, "the partitions in it must be exactly the assigned "
                                               f"partitions {sorted(map(str, subscription.partitions))}")
    return SourceOptions(
        client=client,
        subscription=subscription,
        starting=starting,
        ending=ending,
        starting_by_timestamp_strategy=strategy,  # type: ignore[arg-type]
        fail_on_data_loss=_bool(opts, "failondataloss", "failOnDataLoss", True),
        include_headers=_bool(opts, "includeheaders", "includeHeaders", False),
        max_offsets_per_trigger=max_offsets,
        min_offsets_per_trigger=min_offsets,
        max_trigger_delay_ms=max_delay,
        min_partitions=_positive_int(opts, "minpartitions", "minPartitions"),
        max_records_per_partition=_positive_int(opts, "maxrecordsperpartition", "maxRecordsPerPartition"),
        poll_timeout_ms=poll_timeout or 120_000,
        group_id=group_id,
        group_id_prefix=prefix.strip(),
    )


def source_group_ids(opts: SourceOptions) -> tuple[str, str]:
    """The consumer group ids of one query's driver and executors, as Spark's
    KafkaSourceProvider names them: exactly kafka.group.id when it is set, else
    ``<groupIdPrefix>-<random UUID>-driver`` / ``-executor``.  The source's consumers read by
    assignment and never commit, so the ids only name the reader (logs, broker-side tooling)."""
    if opts.group_id is not None:
        return opts.group_id, opts.group_id
    unique = f"{opts.group_id_prefix}-{uuid.uuid4()}"
    return f"{unique}-driver", f"{unique}-executor"


def parse_sink_options(options: Mapping[str, Any]) -> SinkOptions:
    opts = _lower(options)
    client = client_config(opts, _REJECTED_SINK)
    for name in _SOURCE_ONLY_CLIENT:
        client.pop(name, None)
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise ConfigError("topic", "the topic option is empty; give a topic name or drop the option "
                                   "and give a 'topic' column")
    topic = topic.strip() if topic else None
    if "transactional.id" in client:
        raise ConfigError("kafka.transactional.id", "Kafka option 'transactional.id' is not supported: "
                                                    "the sink derives one per task; set the option "
                                                    "'transactional' to true (and optionally "
                                                    "'transactionalIdPrefix') instead")
    transactional = _bool(opts, "transactional", "transactional", False)
    prefix = opts.get("transactionalidprefix", DEFAULT_TRANSACTIONAL_ID_PREFIX).strip()
    if not prefix:
        raise ConfigError("transactionalIdPrefix", "is empty; give a prefix for the sink's transactional "
                                                   "ids or drop the option")
    progress = (opts.get("transactionalprogresstopic") or "").strip() or topic
    if transactional and progress is None:
        raise ConfigError("transactionalProgressTopic",
                          "is required with transactional=true when the rows name their topic "
                          "(no 'topic' option): give an existing topic on whose partition 0 the "
                          "sink commits the batch ids it wrote")
    return SinkOptions(client=client, topic=topic,
                       include_headers=_bool(opts, "includeheaders", "includeHeaders", False),
                       transactional=transactional, transactional_id_prefix=prefix,
                       progress_topic=progress if transactional else None)
