"""An immutable snapshot of cluster metadata: nodes, partitions, leaders, topic ids; and
:class:`ClusterView`, the producer's per-snapshot cached questions to it.

``Metadata`` (samsa/net/metadata.py) swaps in a new ``Cluster`` on every update, so readers on
other threads (the producer's ``send()``, the partitioner) take one reference and see a
consistent view without locks.  Names follow Java's ``Cluster``/``PartitionInfo``/``Node``.

A partition whose leader id is not among the response's brokers has ``leader=None``: the
librdkafka mock cluster keeps naming a downed broker as leader while omitting it from the broker
list, and Kafka itself can name a leader that is not yet registered.  Callers treat it as
"leader unknown" and ask for a metadata refresh.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class Node(NamedTuple):
    """A broker.  Bootstrap nodes (from bootstrap.servers) have negative ids -1, -2, ..."""

    id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def is_bootstrap(self) -> bool:
        return self.id < 0

    def __str__(self) -> str:
        rack = f" rack {self.rack}" if self.rack else ""
        return f"{self.host}:{self.port} (id: {self.id}{rack})"


class PartitionInfo(NamedTuple):
    """One partition: ``leader`` is None when unknown; replica lists hold broker ids."""

    topic: str
    partition: int
    leader: Node | None
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    offline: tuple[int, ...] = ()
    leader_epoch: int = -1  # -1: unknown (Metadata < v7)
    error_code: int = 0

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


_EMPTY: tuple[PartitionInfo, ...] = ()


class Cluster:
    """Immutable view of the cluster.  Build with the constructor, ``bootstrap()`` or ``empty()``."""

    __slots__ = (
        "_available_by_topic",
        "_by_node",
        "_by_topic",
        "_nodes_by_id",
        "_partitions",
        "cluster_id",
        "controller",
        "internal_topics",
        "invalid_topics",
        "is_bootstrap",
        "nodes",
        "topic_ids",
        "unauthorized_topics",
    )

    def __init__(
        self,
        nodes: Iterable[Node],
        partitions: Iterable[PartitionInfo] = (),
        *,
        topic_ids: Mapping[str, object] | None = None,
        unauthorized_topics: Iterable[str] = (),
        invalid_topics: Iterable[str] = (),
        internal_topics: Iterable[str] = (),
        controller: Node | None = None,
        cluster_id: str | None = None,
        is_bootstrap: bool = False,
    ) -> None:
        self.nodes: tuple[Node, ...] = tuple(nodes)
        self._nodes_by_id: dict[int, Node] = {n.id: n for n in self.nodes}
        by_tp: dict[TopicPartition, PartitionInfo] = {}
        by_topic: dict[str, list[PartitionInfo]] = {}
        by_node: dict[int, list[PartitionInfo]] = {}
        for p in partitions:
            by_tp[TopicPartition(p.topic, p.partition)] = p
            by_topic.setdefault(p.topic, []).append(p)
            if p.leader is not None:
                by_node.setdefault(p.leader.id, []).append(p)
        self._partitions = by_tp
        self._by_topic: dict[str, tuple[PartitionInfo, ...]] = {
            t: tuple(sorted(ps, key=lambda p: p.partition)) for t, ps in by_topic.items()}
        self._available_by_topic: dict[str, tuple[PartitionInfo, ...]] = {
            t: tuple(p for p in ps if p.leader is not None) for t, ps in self._by_topic.items()}
        self._by_node: dict[int, tuple[PartitionInfo, ...]] = {
            n: tuple(ps) for n, ps in by_node.items()}
        self.topic_ids: dict[str, object] = dict(topic_ids or {})
        self.unauthorized_topics: frozenset[str] = frozenset(unauthorized_topics)
        self.invalid_topics: frozenset[str] = frozenset(invalid_topics)
        self.internal_topics: frozenset[str] = frozenset(internal_topics)
        self.controller = controller
        self.cluster_id = cluster_id
        self.is_bootstrap = is_bootstrap

    @classmethod
    def empty(cls) -> Cluster:
        return cls(())

    @classmethod
    def bootstrap(cls, addresses: Iterable[tuple[str, int]]) -> Cluster:
        """Nodes -1, -2, ... for the bootstrap addresses, no partitions."""
        nodes = [Node(-(i + 1), host, port) for i, (host, port) in enumerate(addresses)]
        return cls(nodes, is_bootstrap=True)

    # -- nodes ---------------------------------------------------------------------------

    def node_by_id(self, node_id: int) -> Node | None:
        return self._nodes_by_id.get(node_id)

    # -- partitions ----------------------------------------------------------------------

    def partition(self, tp: TopicPartition) -> PartitionInfo | None:
        return self._partitions.get(tp)

    def leader_for(self, tp: TopicPartition) -> Node | None:
        info = self._partitions.get(tp)
        return info.leader if info is not None else None

    def partitions_for_topic(self, topic: str) -> tuple[PartitionInfo, ...]:
        """All partitions of a topic, by partition number; empty if the topic is unknown."""
        return self._by_topic.get(topic, _EMPTY)

    def available_partitions_for_topic(self, topic: str) -> tuple[PartitionInfo, ...]:
        """Partitions with a known leader."""
        return self._available_by_topic.get(topic, _EMPTY)

    def partitions_for_node(self, node_id: int) -> tuple[PartitionInfo, ...]:
        """Partitions this node leads."""
        return self._by_node.get(node_id, _EMPTY)

    def partition_count_for_topic(self, topic: str) -> int | None:
        ps = self._by_topic.get(topic)
        return len(ps) if ps is not None else None

    def has_topic(self, topic: str) -> bool:
        return topic in self._by_topic

    @property
    def topics(self) -> frozenset[str]:
        return frozenset(self._by_topic)

    def topic_id(self, topic: str) -> object | None:
        return self.topic_ids.get(topic)

    def __repr__(self) -> str:
        kind = "bootstrap " if self.is_bootstrap else ""
        return (f"Cluster({kind}id={self.cluster_id!r}, nodes={list(self.nodes)}, "
                f"topics={sorted(self._by_topic)}, controller={self.controller})")


class ClusterView:
    """The producer's view of one immutable :class:`Cluster` snapshot, answers cached per
    snapshot: the partitioner's ``ClusterView`` protocol and the accumulator's
    ``AccumulatorCluster`` (samsa.producer), by (topic, partition) and node id."""

    __slots__ = ("_available", "_by_node", "_counts", "_leaders", "_partitions", "cluster")

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        # A plain (topic, partition) tuple finds a TopicPartition key (equal hash and ==):
        # the Sender asks for every partition with data on every loop.
        self._partitions: Mapping[Any, PartitionInfo] = cluster._partitions
        self._by_node: dict[int, list[tuple[str, int]]] = {}
        self._available: dict[str, list[int]] = {}
        self._counts: dict[str, int | None] = {}
        self._leaders: dict[str, dict[int, tuple[int | None, int | None]]] = {}

    def partition_count(self, topic: str) -> int | None:
        try:
            return self._counts[topic]
        except KeyError:
            count = self._counts[topic] = self.cluster.partition_count_for_topic(topic)
            return count

    def available_partitions(self, topic: str) -> list[int]:
        available = self._available.get(topic)
        if available is None:
            available = self._available[topic] = [
                p.partition for p in self.cluster.available_partitions_for_topic(topic)
            ]
        return available

    def leader_for(self, topic: str, partition: int) -> int | None:
        info = self._partitions.get((topic, partition))
        if info is None:
            return None
        leader = info.leader
        return None if leader is None else leader.id

    def leader_epoch_for(self, topic: str, partition: int) -> int | None:
        info = self._partitions.get((topic, partition))
        if info is None:
            return None
        epoch = info.leader_epoch
        return None if epoch < 0 else epoch

    def partition_leaders(self, topic: str) -> dict[int, tuple[int | None, int | None]]:
        """Partition -> (leader id, leader epoch) as leader_for and leader_epoch_for answer
        them, for the topic's known partitions."""
        leaders = self._leaders.get(topic)
        if leaders is None:
            leaders = self._leaders[topic] = {
                p.partition: (None if p.leader is None else p.leader.id,
                              None if p.leader_epoch < 0 else p.leader_epoch)
                for p in self.cluster.partitions_for_topic(topic)
            }
        return leaders

    def partitions_for_node(self, node_id: int) -> list[tuple[str, int]]:
        parts = self._by_node.get(node_id)
        if parts is None:
            parts = self._by_node[node_id] = sorted(
                (p.topic, p.partition) for p in self.cluster.partitions_for_node(node_id)
            )
        return parts
