"""The group coordinator: classic consumer groups and committed offsets, stored durably in
the internal ``__consumer_offsets`` topic.

* ``coordinator.py`` -- GroupCoordinator: the state machine, parking of joins/syncs, timers,
  offset commits, admin operations.
* ``group.py`` -- one group's state and members; ``offsets.py`` -- committed offsets.
* ``store.py`` -- the ``__consumer_offsets`` log; ``records.py`` -- its record layouts.
* ``timer.py`` -- the keyed timer behind session, join and sync deadlines.
"""

from samsa.broker.group.coordinator import (
    GroupCoordinator,
    GroupDescription,
    GroupOverview,
    JoinRequest,
    SyncRequest,
)
from samsa.broker.group.group import (
    ClassicGroup,
    GroupState,
    JoinResult,
    Member,
    SyncResult,
)
from samsa.broker.group.offsets import OffsetAndMetadata, PartitionCommit
from samsa.broker.group.store import GROUP_METADATA_TOPIC, GroupStore, partition_for

__all__ = [
    "GROUP_METADATA_TOPIC",
    "ClassicGroup",
    "GroupCoordinator",
    "GroupDescription",
    "GroupOverview",
    "GroupState",
    "GroupStore",
    "JoinRequest",
    "JoinResult",
    "Member",
    "OffsetAndMetadata",
    "PartitionCommit",
    "SyncRequest",
    "SyncResult",
    "partition_for",
]
