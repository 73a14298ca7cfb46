"""Which API versions this broker advertises in ApiVersions, and which it actually serves.

The minimum versions are Kafka 3.9's (the last release before KIP-896 removed the old ones),
so that old clients keep working: kafka-python pinned to api_version (0, 9) / (0, 10, 1),
sarama 1.22 (OffsetCommit v1, DescribeConfigs v0), kafka-go 0.2 (Produce v2, Fetch v2,
CreateTopics v0).  Produce v0-2 may carry magic 0/1 message sets (converted to v2 on append)
and Fetch v0-3 gets magic 0/1 (converted while sent).  OffsetCommit/OffsetFetch v0 mean offsets
in ZooKeeper: served as a KRaft 3.9 broker serves them, with UNSUPPORTED_VERSION per partition.
The table in SERVED may differ from ADVERTISED where a client only needs a range to *contain*
a version (none do at the moment).

Fetch stops at 12 and Produce at 12: from Fetch 13 / Produce 13 on, clients address topics
by id only, which this broker does not serve yet.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

# API key -> (min, max) advertised.  Only APIs that are implemented are listed.
ADVERTISED: Mapping[int, tuple[int, int]] = MappingProxyType({
    0: (0, 12),    # Produce (v0-2: magic 0/1 up-converted)
    1: (0, 12),    # Fetch (v0-3: down-converted to magic 0/1)
    2: (0, 9),     # ListOffsets (v0: OldStyleOffsets)
    3: (0, 12),    # Metadata
    8: (0, 9),     # OffsetCommit (v0: ZooKeeper offsets, UNSUPPORTED_VERSION as KRaft)
    9: (0, 9),     # OffsetFetch (v0: ZooKeeper offsets, UNSUPPORTED_VERSION as KRaft)
    10: (0, 6),    # FindCoordinator (this node)
    11: (0, 9),    # JoinGroup (librdkafka <= 2.11.0 needs v0 for balanced consumers)
    12: (0, 4),    # Heartbeat
    13: (0, 5),    # LeaveGroup
    14: (0, 5),    # SyncGroup
    15: (0, 5),    # DescribeGroups
    16: (0, 5),    # ListGroups
    18: (0, 4),    # ApiVersions
    19: (0, 7),    # CreateTopics
    20: (0, 6),    # DeleteTopics
    21: (0, 2),    # DeleteRecords
    22: (0, 5),    # InitProducerId
    23: (0, 4),    # OffsetForLeaderEpoch
    32: (0, 4),    # DescribeConfigs
    37: (0, 3),    # CreatePartitions
    42: (0, 2),    # DeleteGroups
    60: (0, 1),    # DescribeCluster
    # Admin calls of issue 11 (Kafka 3.9's ranges).
    33: (0, 2),    # AlterConfigs
    35: (0, 4),    # DescribeLogDirs
    44: (0, 1),    # IncrementalAlterConfigs
    47: (0, 0),    # OffsetDelete
    61: (0, 0),    # DescribeProducers
    75: (0, 0),    # DescribeTopicPartitions (KIP-966)
})

# Versions a request may actually carry; anything else closes the connection.
SERVED: Mapping[int, tuple[int, int]] = MappingProxyType({
    **ADVERTISED,
})

API_VERSIONS_KEY = 18
