"""SubscriptionState: what the consumer reads and where it is in each partition.

Three exclusive modes, as Java's: topics (``subscribe(list)``), a pattern
(``subscribe(pattern=...)``) or user assignment (``assign``).  Every assigned partition has a
``PartitionState`` holding its position (next offset to return; None until known), the pending
offset reset, pause flag and the last watermarks a fetch reported.  The consumer's owner thread
mutates it; the heartbeat thread only reads ``assigned_partitions``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from samsa.errors import IllegalStateError
from samsa.net.cluster import TopicPartition

__all__ = ["PartitionState", "SubscriptionState"]

NONE, AUTO_TOPICS, AUTO_PATTERN, USER_ASSIGNED = "none", "topics", "pattern", "assigned"


class PartitionState:
    __slots__ = ("high_watermark", "last_stable_offset", "leader_epoch", "log_start_offset",
                 "paused", "position", "reset_strategy")

    def __init__(self) -> None:
        self.position: int | None = None
        self.leader_epoch: int | None = None
        self.reset_strategy: str | None = None  # "earliest" / "latest" while a reset is pending
        self.paused = False
        self.high_watermark = -1
        self.last_stable_offset = -1
        self.log_start_offset = -1

    @property
    def has_valid_position(self) -> bool:
        return self.position is not None and self.reset_strategy is None

    def seek(self, offset: int, leader_epoch: int | None = None) -> None:
        self.position = offset
        self.leader_epoch = leader_epoch
        self.reset_strategy = None


class SubscriptionState:
    def __init__(self, default_reset: str = "latest") -> None:
        self.default_reset = default_reset
        self.mode = NONE
        self.subscription: set[str] = set()
        self.pattern: re.Pattern[str] | None = None
        self.listener: Any = None
        self.assignment: dict[TopicPartition, PartitionState] = {}
        # Bumped whenever the assignment changes, so in-flight fetches for old ones are dropped.
        self.assignment_id = 0

    def _set_mode(self, mode: str) -> None:
        if self.mode != NONE and self.mode != mode:
            raise IllegalStateError(
                "subscribe(topics), subscribe(pattern) and assign() are exclusive; call "
                "unsubscribe() before switching")
        self.mode = mode

    # -- modes ------------------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str], listener: Any = None) -> bool:
        self._set_mode(AUTO_TOPICS)
        self.listener = listener
        return self.change_subscription(topics)

    def subscribe_pattern(self, pattern: re.Pattern[str], listener: Any = None) -> None:
        self._set_mode(AUTO_PATTERN)
        self.listener = listener
        self.pattern = pattern

    def change_subscription(self, topics: Iterable[str]) -> bool:
        new = set(topics)
        changed = new != self.subscription
        self.subscription = new
        return changed

    def assign_from_user(self, partitions: Iterable[TopicPartition]) -> None:
        parts = list(dict.fromkeys(partitions))
        self._set_mode(USER_ASSIGNED)
        self._set_assignment(parts)
        self.subscription = {tp.topic for tp in parts}

    def assign_from_subscribed(self, partitions: Iterable[TopicPartition]) -> None:
        if self.mode not in (AUTO_TOPICS, AUTO_PATTERN):
            raise IllegalStateError("group assignment arrived but the consumer is not subscribed")
        self._set_assignment(list(partitions))

    def _set_assignment(self, parts: list[TopicPartition]) -> None:
        old = self.assignment
        self.assignment = {tp: old.get(tp) or PartitionState() for tp in parts}
        if set(old) != set(parts):
            self.assignment_id += 1

    def unsubscribe(self) -> None:
        self.subscription = set()
        self.pattern = None
        self.listener = None
        self.assignment = {}
        self.assignment_id += 1
        self.mode = NONE

    @property
    def has_auto_assigned(self) -> bool:
        return self.mode in (AUTO_TOPICS, AUTO_PATTERN)

    def matches(self, topic: str) -> bool:
        if self.mode == AUTO_PATTERN and self.pattern is not None:
            return self.pattern.fullmatch(topic) is not None
        return topic in self.subscription

    # -- per partition ----------------------------------------------------------------------

    def assigned_partitions(self) -> list[TopicPartition]:
        return list(self.assignment)

    def state(self, tp: TopicPartition) -> PartitionState:
        st = self.assignment.get(tp)
        if st is None:
            raise IllegalStateError(f"partition {tp} is not assigned to this consumer")
        return st

    def is_assigned(self, tp: TopicPartition) -> bool:
        return tp in self.assignment

    def seek(self, tp: TopicPartition, offset: int, leader_epoch: int | None = None) -> None:
        self.state(tp).seek(offset, leader_epoch)

    def request_reset(self, tp: TopicPartition, strategy: str | None = None) -> None:
        self.state(tp).reset_strategy = strategy or self.default_reset

    def fetchable_partitions(self) -> list[TopicPartition]:
        return [tp for tp, st in self.assignment.items()
                if not st.paused and st.position is not None and st.reset_strategy is None]

    def partitions_needing_reset(self) -> list[TopicPartition]:
        return [tp for tp, st in self.assignment.items() if st.reset_strategy is not None]

    def missing_positions(self) -> list[TopicPartition]:
        """Partitions with neither a position nor a pending reset (committed offsets first)."""
        return [tp for tp, st in self.assignment.items()
                if st.position is None and st.reset_strategy is None]

    def pause(self, tp: TopicPartition) -> None:
        self.state(tp).paused = True

    def resume(self, tp: TopicPartition) -> None:
        self.state(tp).paused = False

    def paused_partitions(self) -> set[TopicPartition]:
        return {tp for tp, st in self.assignment.items() if st.paused}

    def all_consumed(self) -> dict[TopicPartition, tuple[int, int | None]]:
        return {tp: (st.position, st.leader_epoch) for tp, st in self.assignment.items()
                if st.position is not None and st.reset_strategy is None}
