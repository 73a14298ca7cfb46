"""ConsumerGroupMetadata: who a consumer is in its group (Java's ``ConsumerGroupMetadata``).

A transactional producer hands it to ``send_offsets_to_transaction`` so the group coordinator
can fence a zombie member's TxnOffsetCommit by generation and member id (KIP-447).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ConsumerGroupMetadata"]


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadata:
    """The group id plus, for a member that joined, its generation, member id and static
    instance id; the defaults (generation -1, empty member id) describe a consumer that reads
    with assign() and commits without membership."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.group_id, str):
            raise TypeError(f"ConsumerGroupMetadata's group_id must be a str, got {self.group_id!r}")
