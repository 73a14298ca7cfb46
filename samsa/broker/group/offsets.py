"""Committed offsets: what one partition's commit holds, and the commit checks (Kafka's OffsetMetadataManager)."""

from __future__ import annotations

from dataclasses import dataclass

NO_OFFSET = -1
NO_LEADER_EPOCH = -1


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed position: the next offset to consume, the leader epoch of the record
    before it (-1 unknown), the client's metadata string, when it was committed, and when it
    expires if the committer said (OffsetCommit v2-4's retention time; -1: per
    offsets.retention.minutes, expiration.py)."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int = -1


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
    # OffsetCommit v2-4's retention_time_ms; -1 (the default): offsets.retention.minutes.
    retention_time_ms: int = -1


def metadata_too_large(metadata: str | None, limit: int) -> bool:
    """Kafka compares the string's length (UTF-16 units) with offset.metadata.max.bytes."""
    if metadata is None:
        return False
    return len(metadata.encode("utf-16-le")) // 2 > limit
