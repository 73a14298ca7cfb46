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

from samsa.protocol import ApiKey

# API key -> (min, max) advertised.  Only APIs that are implemented are listed.
ADVERTISED: Mapping[ApiKey, tuple[int, int]] = MappingProxyType({
    ApiKey.PRODUCE: (0, 12),  # v0-2: magic 0/1 up-converted
    ApiKey.FETCH: (0, 12),  # v0-3: down-converted to magic 0/1
    ApiKey.LIST_OFFSETS: (0, 9),  # v0: OldStyleOffsets
    ApiKey.METADATA: (0, 12),
    ApiKey.OFFSET_COMMIT: (0, 9),  # v0: ZooKeeper offsets, UNSUPPORTED_VERSION as KRaft
    ApiKey.OFFSET_FETCH: (0, 9),  # v0: ZooKeeper offsets, UNSUPPORTED_VERSION as KRaft
    ApiKey.FIND_COORDINATOR: (0, 6),  # this node
    ApiKey.JOIN_GROUP: (0, 9),  # librdkafka <= 2.11.0 needs v0 for balanced consumers
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.CREATE_TOPICS: (0, 7),
    ApiKey.DELETE_TOPICS: (0, 6),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.INIT_PRODUCER_ID: (0, 5),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (0, 4),
    # Transactions (KIP-98): v4-5 of AddPartitionsToTxn are the brokers' verification (KIP-890
    # part 1), EndTxn v5 the epoch bump per transaction (part 2).  No transaction.version
    # feature is advertised, so Java clients stay on the classic flow (AddPartitionsToTxn).
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    ApiKey.END_TXN: (0, 5),
    ApiKey.DESCRIBE_CONFIGS: (0, 4),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.TXN_OFFSET_COMMIT: (0, 5),  # v5: the group's partition joins the transaction
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
    # Admin calls (Kafka 3.9's ranges).
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.DESCRIBE_LOG_DIRS: (0, 4),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),  # KIP-664
    ApiKey.LIST_TRANSACTIONS: (0, 1),  # v1: duration filter (KIP-994)
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (0, 0),  # KIP-966
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),  # KIP-554
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    # Served by the network layer on SASL listeners (authenticator.py); v0 handshakes are
    # followed by raw tokens (pre-KIP-152 clients).
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.DESCRIBE_ACLS: (0, 3),  # Kafka 3.9's range (4.0 dropped v0)
    ApiKey.CREATE_ACLS: (0, 3),
    ApiKey.DELETE_ACLS: (0, 3),
})

# Versions a request may actually carry; anything else closes the connection.
SERVED: Mapping[ApiKey, tuple[int, int]] = MappingProxyType({
    **ADVERTISED,
})
