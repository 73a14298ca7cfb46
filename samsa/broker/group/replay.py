"""Rebuild the groups' durable state from ``__consumer_offsets`` at start-up (Kafka's
GroupMetadataManager / OffsetMetadataManager ``replay``).

The last record per key wins and tombstones delete.  A record a transaction wrote is pending
for its producer until that producer's marker in the same partition: COMMIT applies it (if its
record is later than the committed one), ABORT drops it; one with no marker yet stays pending
(the transaction coordinator completes it later).
"""

from __future__ import annotations

import logging
import struct

from samsa.broker.group.group import ClassicGroup
from samsa.broker.group.offsets import OffsetAndMetadata
from samsa.broker.group.records import (
    GroupKey,
    GroupValue,
    OffsetKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
)
from samsa.broker.group.store import StoredMarker, StoredRecord
from samsa.broker.group.txn_offsets import PendingOffset, PendingTxnOffsets
from samsa.protocol import ProtocolDecodeError

log = logging.getLogger(__name__)


class Replay:
    """Apply the stored records and markers in log order (per partition)."""

    def __init__(self, num_partitions: int) -> None:
        # Groups holding only their committed offsets; metadata is restored afterwards.
        self.offsets: dict[str, ClassicGroup] = {}
        self.metadata: dict[str, GroupValue] = {}
        self.pending = PendingTxnOffsets()

    def apply(self, item: StoredRecord | StoredMarker) -> None:
        if isinstance(item, StoredMarker):
            self._marker(item)
            return
        try:
            key = decode_key(item.key)
            if isinstance(key, OffsetKey):
                self._offset(item, key)
            elif isinstance(key, GroupKey):
                if item.value is None:
                    self.metadata.pop(key.group, None)
                    self.offsets.pop(key.group, None)
                    self.pending.discard(key.group)
                else:
                    self.metadata[key.group] = decode_group_value(item.value)
        except (ProtocolDecodeError, struct.error) as exc:  # skip it, keep the rest
            log.warning("skipping an unreadable record in __consumer_offsets-%d: %s",
                        item.partition, exc)

    def _offset(self, item: StoredRecord, key: OffsetKey) -> None:
        tp = (key.topic, key.partition)
        if item.value is None:
            committed = self.offsets.get(key.group)
            if committed is not None:
                committed.remove_offset(tp)
            self.pending.discard(key.group, [tp])
            return
        v = decode_offset_value(item.value)
        offset = OffsetAndMetadata(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp,
                                   v.expire_timestamp)
        if item.producer_id >= 0:
            self.pending.add(item.partition, item.producer_id, key.group, tp,
                             PendingOffset(offset, item.offset))
        else:
            self._group(key.group).put_offset(tp, offset, item.offset)

    def _marker(self, marker: StoredMarker) -> None:
        taken = self.pending.take(marker.partition, marker.producer_id)
        if not marker.commit:
            return
        for (group_id, topic, partition), pending in taken.items():
            self._group(group_id).commit_pending((topic, partition), pending)

    def _group(self, group_id: str) -> ClassicGroup:
        group = self.offsets.get(group_id)
        if group is None:
            group = self.offsets[group_id] = ClassicGroup(group_id)
        return group

    def group_ids(self) -> list[str]:
        return sorted(set(self.offsets) | set(self.metadata) | self.pending.groups())
