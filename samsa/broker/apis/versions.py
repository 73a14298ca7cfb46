"""Which API versions this broker advertises in ApiVersions, and which it actually serves.

The two differ only where old clients need a range that merely *contains* an old version
(reference notes §1.4-§1.6): librdkafka <= 2.11.0 (kcat 1.7.1 on librdkafka 2.0.2 here) turns
compression off unless Produce's range includes v0, so Produce is advertised from 0 while
v0-2 requests close the connection, as Kafka 4.x does.

Fetch stops at 12 and Produce at 12: from Fetch 13 / Produce 13 on, clients address topics
by id only, which this broker does not serve yet.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

# API key -> (min, max) advertised.  Only APIs that are implemented are listed.
ADVERTISED: Mapping[int, tuple[int, int]] = MappingProxyType({
    0: (0, 12),    # Produce (served 3-12)
    1: (4, 12),    # Fetch
    2: (1, 9),     # ListOffsets
    3: (0, 12),    # Metadata
    8: (2, 9),     # OffsetCommit (librdkafka <= 2.11.0 needs 1..2 to overlap)
    9: (1, 9),     # OffsetFetch (librdkafka <= 2.11.0 needs v1)
    10: (0, 6),    # FindCoordinator (this node)
    11: (0, 9),    # JoinGroup (librdkafka <= 2.11.0 needs v0 for balanced consumers)
    12: (0, 4),    # Heartbeat
    13: (0, 5),    # LeaveGroup
    14: (0, 5),    # SyncGroup
    15: (0, 5),    # DescribeGroups
    16: (0, 5),    # ListGroups
    18: (0, 4),    # ApiVersions
    19: (2, 7),    # CreateTopics
    20: (1, 6),    # DeleteTopics
    21: (0, 2),    # DeleteRecords
    22: (0, 5),    # InitProducerId
    23: (2, 4),    # OffsetForLeaderEpoch
    32: (1, 4),    # DescribeConfigs
    37: (0, 3),    # CreatePartitions
    42: (0, 2),    # DeleteGroups
    60: (0, 1),    # DescribeCluster
})

# Versions a request may actually carry; anything else closes the connection.
SERVED: Mapping[int, tuple[int, int]] = MappingProxyType({
    **ADVERTISED,
    0: (3, 12),
})

API_VERSIONS_KEY = 18
