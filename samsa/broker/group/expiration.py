"""Which committed offsets have expired (KIP-211), as Kafka 2.1+'s group coordinator decides.

Kafka's ``ClassicGroup.offsetExpirationCondition`` gives, per group, the time an offset's
retention (``offsets.retention.minutes``) counts from, or says nothing expires:

* a group that never had members (protocol type unset: a standalone consumer using assign and
  commit): each offset ``retention`` after its commit timestamp;
* an Empty group that had members: ``retention`` after the group became Empty (its current
  state timestamp; the commit timestamp when the stored group predates that field);
* a Stable consumer group whose subscriptions are known: offsets of topics it is not
  subscribed to, ``retention`` after their commit;
* any other group (rebalancing, or Stable with unknown subscriptions): nothing.

An offset with an explicit expire timestamp (OffsetCommit v2-4's retention_time_ms, or one
stored by an older broker) expires at that time instead (``OffsetExpirationConditionImpl``).
Offsets of topics the group is subscribed to, and partitions with a transactional offset
pending, never expire (``OffsetMetadataManager.cleanupExpiredOffsets``).  When every offset has
expired and no transaction of the group is open, an Empty group is deleted
(``GroupMetadataManager.maybeDeleteGroup``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from samsa.broker.group.group import ClassicGroup, GroupState
from samsa.broker.group.offsets import OffsetAndMetadata
from samsa.broker.group.subscriptions import CONSUMER_PROTOCOL_TYPE, subscribed_topics

__all__ = ["Expiry", "expired_offsets"]

Base = Callable[[OffsetAndMetadata], int]


@dataclass(frozen=True, slots=True)
class Expiry:
    """What a cleanup pass found for one group: the partitions whose offsets expired, and
    whether every offset did (the group may then be deleted)."""

    expired: list[tuple[str, int]]
    all_expired: bool


def _base_timestamp(group: ClassicGroup) -> Base | None:
    """ClassicGroup.offsetExpirationCondition: where retention counts from, or None."""
    if group.protocol_type is None:
        return lambda o: o.commit_timestamp_ms
    if group.state == GroupState.EMPTY:
        since = group.state_timestamp_ms
        if since >= 0:
            return lambda o: since
        return lambda o: o.commit_timestamp_ms
    if group.protocol_type == CONSUMER_PROTOCOL_TYPE and group.state == GroupState.STABLE \
            and subscribed_topics(group) is not None:
        return lambda o: o.commit_timestamp_ms
    return None


def _subscribed(group: ClassicGroup) -> Callable[[str], bool]:
    """ClassicGroup.isSubscribedToTopic: a consumer group without members is subscribed to
    nothing; unknown subscriptions count as every topic for consumer groups, none otherwise."""
    if group.protocol_type == CONSUMER_PROTOCOL_TYPE and not group.members:
        return lambda topic: False
    topics = subscribed_topics(group)
    if topics is None:
        every = group.protocol_type == CONSUMER_PROTOCOL_TYPE
        return lambda topic: every
    return topics.__contains__


def is_expired(offset: OffsetAndMetadata, base: Base, now_ms: int, retention_ms: int) -> bool:
    """OffsetExpirationConditionImpl.isOffsetExpired."""
    if offset.expire_timestamp_ms >= 0:
        return now_ms >= offset.expire_timestamp_ms
    return now_ms - base(offset) >= retention_ms


def expired_offsets(group: ClassicGroup, now_ms: int, retention_ms: int,
                    pending: frozenset[tuple[str, int]]) -> Expiry:
    """The group's expired offsets (``pending``: partitions with a transactional offset not
    yet committed or aborted, which are kept)."""
    base = _base_timestamp(group)
    if base is None:
        return Expiry([], not group.offsets)
    subscribed = _subscribed(group)
    expired: list[tuple[str, int]] = []
    all_expired = True
    for tp, offset in group.offsets.items():
        if not subscribed(tp[0]) and is_expired(offset, base, now_ms, retention_ms) \
                and tp not in pending:
            expired.append(tp)
        else:
            all_expired = False
    return Expiry(expired, all_expired)
