"""Errors the consumer raises itself (broker error codes live in :mod:`samsa.errors`)."""

from __future__ import annotations

from samsa.errors import ClientError, IllegalStateError

__all__ = ["CommitFailedError", "ConsumerClosedError", "NoOffsetForPartitionError"]


class NoOffsetForPartitionError(ClientError):
    """A partition has no position and auto.offset.reset is none."""

    name = "NO_OFFSET_FOR_PARTITION"
    message = ("No committed or explicit position for a partition and auto.offset.reset=none; "
               "seek() first or set auto.offset.reset to earliest or latest.")


class CommitFailedError(ClientError):
    """A commit cannot complete because the group rebalanced (the partitions may have moved)."""

    name = "COMMIT_FAILED"
    message = ("Commit cannot be completed since the group has already rebalanced and assigned "
               "the partitions to another member; poll() more often or raise "
               "max.poll.interval.ms / lower max.poll.records.")


class ConsumerClosedError(IllegalStateError):
    name = "CONSUMER_CLOSED"
    message = "The consumer is closed; create a new consumer."
