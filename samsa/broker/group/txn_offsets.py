"""Offsets committed inside a transaction (TxnOffsetCommit), pending until the transaction's
marker lands in the group's ``__consumer_offsets`` partition (Kafka's OffsetMetadataManager:
``pendingTransactionalOffsets`` and ``openTransactions``).

A pending offset is invisible to OffsetFetch; ``require_stable`` fetches of its partition get
UNSTABLE_OFFSET_COMMIT until the marker.  A COMMIT marker makes the producer's pending offsets
committed -- each only if its record is later in the log than the committed one, so a plain
commit written after the transactional one wins -- and an ABORT drops them.  A tombstone of the
partition (OffsetDelete, DeleteGroups) drops them too.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from samsa.broker.group.offsets import OffsetAndMetadata

TopicPartition = tuple[str, int]
# (group id, topic, partition)
GroupPartition = tuple[str, str, int]
# (__consumer_offsets partition, producer id): markers are written per partition.
ProducerKey = tuple[int, int]


@dataclass(frozen=True, slots=True)
class PendingOffset:
    """An offset written by an open transaction, and its record's offset in the log."""

    offset: OffsetAndMetadata
    record_offset: int


class PendingTxnOffsets:
    """The pending offsets of every open transaction.  Not thread-safe: the coordinator's lock
    (or the single-threaded replay at start-up) guards it."""

    def __init__(self) -> None:
        self._by_producer: dict[ProducerKey, dict[GroupPartition, PendingOffset]] = {}
        # group -> partition -> producers with a pending offset for it
        self._open: dict[str, dict[TopicPartition, set[ProducerKey]]] = {}

    def add(self, partition: int, producer_id: int, group_id: str, tp: TopicPartition,
            pending: PendingOffset) -> None:
        """A later offset of the same transaction for the same partition replaces the earlier."""
        key = (partition, producer_id)
        self._by_producer.setdefault(key, {})[(group_id, *tp)] = pending
        self._open.setdefault(group_id, {}).setdefault(tp, set()).add(key)

    def take(self, partition: int, producer_id: int) -> dict[GroupPartition, PendingOffset]:
        """Remove and return the producer's pending offsets in that partition (its marker)."""
        key = (partition, producer_id)
        taken = self._by_producer.pop(key, {})
        for group_id, topic, part in taken:
            self._unmark(group_id, (topic, part), key)
        return taken

    def _unmark(self, group_id: str, tp: TopicPartition, key: ProducerKey) -> None:
        partitions = self._open.get(group_id)
        if partitions is None:
            return
        producers = partitions.get(tp)
        if producers is not None:
            producers.discard(key)
            if not producers:
                del partitions[tp]
        if not partitions:
            del self._open[group_id]

    def discard(self, group_id: str, tps: Iterable[TopicPartition] | None = None) -> None:
        """Drop the pending offsets of the group's partitions ``tps`` (all when None): their
        tombstones were written."""
        partitions = self._open.get(group_id)
        if partitions is None:
            return
        for tp in list(partitions) if tps is None else list(tps):
            for key in partitions.get(tp, set()).copy():
                pending = self._by_producer.get(key)
                if pending is not None:
                    pending.pop((group_id, *tp), None)
                    if not pending:
                        del self._by_producer[key]
                self._unmark(group_id, tp, key)

    def pending_partitions(self, group_id: str) -> frozenset[TopicPartition]:
        """The group's partitions with an offset pending in some open transaction."""
        return frozenset(self._open.get(group_id, ()))

    def groups(self) -> set[str]:
        return set(self._open)

    def has_open(self, partition: int) -> bool:
        """True if some transaction has pending offsets in that ``__consumer_offsets``
        partition."""
        return any(p == partition for p, _ in self._by_producer)

    def __len__(self) -> int:
        return sum(len(offsets) for offsets in self._by_producer.values())
