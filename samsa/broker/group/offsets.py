"""Committed offsets: what one partition's commit holds, and the commit checks (Kafka's OffsetMetadataManager)."""

from __future__ import annotations

from dataclasses import dataclass

NO_OFFSET = -1
NO_LEADER_EPOCH = -1


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed position: the next offset to consume, the leader epoch of the record
    before it (-1 unknown), the client's metadata string, and when it was committed."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int


@dataclass(frozen=True, slots=True)
class PartitionCommit:
    """One partition of an OffsetCommit request."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None
    # OffsetCommit v1's explicit commit time; -1 (the default) means "now".
    commit_timestamp_ms: int = -1


def metadata_too_large(metadata: str | None, limit: int) -> bool:
    """Kafka compares the string's length (UTF-16 units) with offset.metadata.max.bytes."""
    if metadata is None:
        return False
    return len(metadata.encode("utf-16-le")) // 2 > limit
