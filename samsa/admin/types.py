"""What the admin client takes and returns: plain, immutable values.

Names follow Java's admin API where it helps (NewTopic, NewPartitions, TopicDescription,
ConfigResource, ConfigEntry); broker ids are plain ints, brokers themselves samsa.net.Node.
"""

from __future__ import annotations

import base64
import enum
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from samsa.net import Node
from samsa.protocol.config_types import ConfigResourceType

__all__ = [
    "ClusterDescription", "ConfigEntry", "ConfigResource", "ConfigResourceType", "ConfigSource",
    "CreatedTopic", "NewPartitions", "NewTopic", "PartitionDescription", "TopicDescription",
    "format_topic_id",
]

_ZERO_UUID = uuid.UUID(int=0)


def format_topic_id(topic_id: uuid.UUID | None) -> str:
    """A topic id as Kafka prints it (URL-safe base64 of the 16 bytes, no padding);
    ``AAAAAAAAAAAAAAAAAAAAAA`` (Kafka's ZERO_UUID) when unknown."""
    raw = (topic_id or _ZERO_UUID).bytes
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


@dataclass(frozen=True, slots=True)
class NewTopic:
    """A topic to create.  -1 partitions or replication factor: the broker's default
    (num.partitions, default.replication.factor).  ``replica_assignment`` (partition ->
    broker ids) replaces both counts."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str | None] = field(default_factory=dict)
    replica_assignment: Mapping[int, Sequence[int]] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"a topic name must be a non-empty string, got {self.name!r}")
        if self.replica_assignment is not None and (
                self.num_partitions != -1 or self.replication_factor != -1):
            raise ValueError(f"topic {self.name!r}: give either num_partitions/"
                             "replication_factor or replica_assignment, not both")


@dataclass(frozen=True, slots=True)
class NewPartitions:
    """Grow a topic to ``total_count`` partitions; ``assignments`` lists the broker ids of
    each new partition (None: the broker chooses)."""

    total_count: int
    assignments: Sequence[Sequence[int]] | None = None


class ConfigSource(enum.IntEnum):
    """Where a config value comes from (DescribeConfigs v1+ ``config_source``)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8

    @classmethod
    def of(cls, value: int) -> ConfigSource:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    """One link of the chain a setting's value is chosen from (highest priority first)."""

    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One setting of a topic or broker.  ``value`` is None for sensitive settings;
    ``synonyms`` only when asked for (``describe_configs(include_synonyms=True)``)."""

    name: str
    value: str | None
    source: ConfigSource = ConfigSource.UNKNOWN
    is_default: bool = False
    read_only: bool = False
    sensitive: bool = False
    synonyms: tuple[ConfigSynonym, ...] = ()


class ConfigResource(NamedTuple):
    """A thing that has configs: a topic (by name) or a broker (by id, as a string)."""

    type: ConfigResourceType
    name: str

    @classmethod
    def topic(cls, name: str) -> ConfigResource:
        return cls(ConfigResourceType.TOPIC, name)

    @classmethod
    def broker(cls, node_id: int) -> ConfigResource:
        return cls(ConfigResourceType.BROKER, str(node_id))

    @classmethod
    def broker_default(cls) -> ConfigResource:
        """The cluster-wide default of dynamic broker configs (kafka-configs.sh
        --entity-default)."""
        return cls(ConfigResourceType.BROKER, "")

    @classmethod
    def group(cls, group_id: str) -> ConfigResource:
        return cls(ConfigResourceType.GROUP, group_id)

    def __str__(self) -> str:
        return f"{self.type.name.lower()} {self.name!r}"


@dataclass(frozen=True, slots=True)
class CreatedTopic:
    """The broker's answer for a created (or validated) topic.  Counts are -1 and
    ``configs`` None when the broker's CreateTopics version (< 5) does not report them."""

    name: str
    topic_id: uuid.UUID | None = None
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, ConfigEntry] | None = None


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    """One partition: ``leader`` is a broker id, None when there is none."""

    partition: int
    leader: int | None
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    offline_replicas: tuple[int, ...] = ()
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    topic_id: uuid.UUID | None
    internal: bool
    partitions: tuple[PartitionDescription, ...]

    @property
    def replication_factor(self) -> int:
        """Replicas of the first partition (kafka-topics.sh reports the same)."""
        return len(self.partitions[0].replicas) if self.partitions else 0

    @property
    def topic_id_str(self) -> str:
        return format_topic_id(self.topic_id)


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str | None
    controller: Node | None
    nodes: tuple[Node, ...]
