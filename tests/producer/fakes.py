"""A small in-memory cluster view for producer unit tests (the real Metadata comes later)."""

from __future__ import annotations

from collections.abc import Sequence


class FakeCluster:
    """Topics with partition counts and leaders; ``None`` leader = unavailable partition."""

    def __init__(self, topics: dict[str, Sequence[int | None]] | None = None) -> None:
        # topic -> leader node id per partition
        self.leaders: dict[str, list[int | None]] = {
            t: list(ls) for t, ls in (topics or {}).items()
        }
        self.epochs: dict[tuple[str, int], int] = {}

    def partition_count(self, topic: str) -> int | None:
        leaders = self.leaders.get(topic)
        return None if leaders is None else len(leaders)

    def available_partitions(self, topic: str) -> list[int]:
        return [
            p
            for p, leader in enumerate(self.leaders.get(topic, []))
            if leader is not None
        ]

    def leader_for(self, topic: str, partition: int) -> int | None:
        leaders = self.leaders.get(topic)
        if leaders is None or partition >= len(leaders):
            return None
        return leaders[partition]

    def leader_epoch_for(self, topic: str, partition: int) -> int | None:
        return self.epochs.get((topic, partition))

    def partition_leaders(self, topic: str) -> dict[int, tuple[int | None, int | None]]:
        return {p: (leader, self.epochs.get((topic, p)))
                for p, leader in enumerate(self.leaders.get(topic, []))}

    def partitions_for_node(self, node_id: int) -> list[tuple[str, int]]:
        return [
            (topic, p)
            for topic, leaders in sorted(self.leaders.items())
            for p, leader in enumerate(leaders)
            if leader == node_id
        ]
