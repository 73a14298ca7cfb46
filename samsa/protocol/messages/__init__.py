"""Declarations of every API samsa speaks, one module per API key."""

from samsa.protocol.messages import (
    add_offsets_to_txn, add_partitions_to_txn, alter_configs, api_versions, create_partitions,
    create_topics, delete_groups, delete_records, delete_topics, describe_cluster,
    describe_configs, describe_groups, describe_log_dirs, describe_producers,
    describe_topic_partitions, end_txn, fetch, find_coordinator, heartbeat,
    incremental_alter_configs, init_producer_id, join_group, leave_group, list_groups,
    list_offsets, metadata, offset_commit, offset_delete, offset_fetch, offset_for_leader_epoch,
    produce, sasl_authenticate, sasl_handshake, sync_group, txn_offset_commit, write_txn_markers,
)

DECLARED = [
    produce.API, fetch.API, list_offsets.API, metadata.API, offset_commit.API, offset_fetch.API,
    find_coordinator.API, join_group.API, heartbeat.API, leave_group.API, sync_group.API,
    describe_groups.API, list_groups.API, sasl_handshake.API, api_versions.API,
    create_topics.API, delete_topics.API, delete_records.API, init_producer_id.API,
    offset_for_leader_epoch.API, add_partitions_to_txn.API, add_offsets_to_txn.API, end_txn.API,
    write_txn_markers.API, txn_offset_commit.API, describe_configs.API, sasl_authenticate.API,
    create_partitions.API, delete_groups.API, describe_cluster.API,
    alter_configs.API, describe_log_dirs.API, incremental_alter_configs.API, offset_delete.API,
    describe_producers.API, describe_topic_partitions.API,
]
