"""The Kafka Improvement Proposals samsa implements, partly implements or deliberately leaves out.

Data only, read by ``scripts/gen_compatibility.py`` for docs/compatibility.md (the shape of
franz-go's and kafka-python's KIP lists).  ``where`` names the modules that carry the KIP;
tests/test_compatibility_doc.py checks that each exists and that every ``KIP-<n>`` the code
cites is listed here, so a new citation means a new row.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

__all__ = ["KIPS", "Kip", "Support"]


class Support(enum.Enum):
    FULL = "yes"
    PARTIAL = "partly"
    NONE = "no"


class Kip(NamedTuple):
    number: int
    title: str
    support: Support
    where: tuple[str, ...]  # repository paths
    note: str = ""


_Y, _P, _N = Support.FULL, Support.PARTIAL, Support.NONE

KIPS: tuple[Kip, ...] = (
    Kip(4, "Command line and centralized administrative operations", _Y,
        ("samsa/admin/client.py", "samsa/broker/apis/create_topics.py",
         "samsa/broker/apis/delete_topics.py"),
        "CreateTopics, DeleteTopics, Metadata v1+"),
    Kip(32, "Add timestamps to Kafka message", _Y,
        ("samsa/records/builder.py", "samsa/broker/log/log.py"),
        "CreateTime and LogAppendTime (message.timestamp.type)"),
    Kip(35, "Retrieving protocol version", _Y,
        ("samsa/net/api_versions.py", "samsa/broker/apis/api_versions.py"),
        "clients pick the highest version both sides support"),
    Kip(42, "Add Producer and Consumer Interceptors", _P,
        ("samsa/producer/interceptors.py",),
        "producer interceptors; the consumer accepts interceptor.classes but does not run them"),
    Kip(12, "Kafka Sasl/Kerberos and SSL implementation", _P,
        ("samsa/security/tls.py", "samsa/broker/network/endpoint.py",
         "samsa/broker/listeners.py"),
        "SSL and SASL listeners and clients, client certificates as principals; no Kerberos"),
    Kip(43, "Kafka SASL enhancements", _P,
        ("samsa/net/sasl.py", "samsa/broker/network/authenticator.py", "samsa/security/__init__.py"),
        "SASL_PLAINTEXT/SASL_SSL in the clients and the broker with PLAIN, SCRAM-SHA-256/512 and "
        "OAUTHBEARER, several mechanisms per listener; no GSSAPI"),
    Kip(62, "Allow consumer to send heartbeats from a background thread", _Y,
        ("samsa/consumer/coordinator.py",), "max.poll.interval.ms leaves the group"),
    Kip(74, "Add Fetch Response Size Limit in Bytes", _Y,
        ("samsa/broker/apis/fetch.py", "samsa/consumer/fetcher.py"),
        "the first non-empty partition's first batch is returned whole"),
    Kip(79, "ListOffsets v1 and timestamp search in the consumer", _Y,
        ("samsa/consumer/fetcher.py", "samsa/broker/apis/list_offsets.py"),
        "offsets_for_times"),
    Kip(82, "Add Record Headers", _Y, ("samsa/records/builder.py", "samsa/records/batch.py")),
    Kip(91, "Provide Intuitive User Timeouts in The Producer", _Y,
        ("samsa/producer/accumulator.py",), "delivery.timeout.ms"),
    Kip(98, "Exactly Once Delivery and Transactional Messaging", _P,
        ("samsa/producer/transaction_manager.py", "samsa/broker/log/producer_state.py",
         "samsa/broker/txn/coordinator.py"),
        "the idempotent producer; the broker's transaction coordinator (__transaction_state, "
        "markers, timeouts, recovery); no WriteTxnMarkers"),
    Kip(107, "Add deleteRecordsBefore() API in AdminClient", _Y,
        ("samsa/admin/client.py", "samsa/broker/apis/delete_records.py")),
    Kip(110, "Add Codec for ZStandard Compression", _Y,
        ("samsa/records/compression.py", "samsa/broker/apis/produce.py",
         "samsa/broker/apis/fetch_zstd.py"),
        "zstd refused below Produce v7 and withheld from Fetch below v10, as Kafka 3.9"),
    Kip(140, "Add administrative RPCs for adding, deleting, and listing ACLs", _Y,
        ("samsa/admin/acls.py", "samsa/broker/apis/acls.py", "samsa/cli/acls_cmd.py"),
        "CreateAcls, DescribeAcls, DeleteAcls; samsa acls"),
    Kip(144, "Exponential backoff for broker reconnect attempts", _Y,
        ("samsa/net/backoff.py",), "reconnect.backoff.max.ms"),
    Kip(195, "AdminClient.createPartitions", _Y,
        ("samsa/admin/client.py", "samsa/broker/apis/create_partitions.py")),
    Kip(211, "Revise Expiration Semantics of Consumer Group Offsets", _Y,
        ("samsa/broker/group/expiration.py",),
        "offsets.retention.minutes counted from when the group became Empty (from each commit "
        "for standalone consumers)"),
    Kip(226, "Dynamic Broker Configuration", _P, ("samsa/broker/dynamic_config.py",),
        "the log settings Kafka's DynamicLogConfig covers"),
    Kip(227, "Incremental FetchRequests to Increase Partition Scalability", _N,
        ("samsa/broker/apis/fetch.py",), "fetch sessions: every Fetch is a full one"),
    Kip(255, "OAuth Authentication via SASL/OAUTHBEARER", _P,
        ("samsa/net/sasl.py", "samsa/security/oauthbearer.py",
         "samsa/broker/network/authenticator.py"),
        "clients with a token callback (sasl.oauthbearer.token.callback); the broker with Kafka's "
        "unsecured token validator (for tests); no OIDC token endpoint"),
    Kip(283, "Efficient Memory Usage for Down-Conversion", _Y,
        ("samsa/broker/log/down_conversion.py",),
        "Fetch v0-3 converted chunk by chunk; message.downconversion.enable"),
    Kip(84, "Support SASL SCRAM mechanisms", _Y,
        ("samsa/security/scram.py", "samsa/net/sasl.py", "samsa/broker/scram_credentials.py"),
        "SCRAM-SHA-256/512 authenticate client connections to the broker"),
    Kip(152, "Improve diagnostics for SASL authentication failures", _Y,
        ("samsa/net/sasl.py", "samsa/broker/network/authenticator.py"),
        "SaslAuthenticate after SaslHandshake v1; the clients send v1 only"),
    Kip(290, "Support for Prefixed ACLs", _Y,
        ("samsa/security/acl.py", "samsa/broker/authorizer.py"),
        "LITERAL, PREFIXED and MATCH patterns"),
    Kip(294, "Enable TLS hostname verification by default", _Y, ("samsa/security/tls.py",),
        "ssl.endpoint.identification.algorithm=https by default in the clients"),
    Kip(339, "Create a new IncrementalAlterConfigs API", _Y,
        ("samsa/admin/configs.py", "samsa/broker/apis/incremental_alter_configs.py")),
    Kip(345, "Introduce static membership protocol to reduce consumer rebalances", _Y,
        ("samsa/consumer/config.py", "samsa/broker/group/coordinator.py"), "group.instance.id"),
    Kip(354, "Add a Maximum Log Compaction Lag", _Y,
        ("samsa/broker/log/cleaner_manager.py", "samsa/broker/log/log.py"),
        "max.compaction.lag.ms makes a log eligible and caps the roll age of compacted logs"),
    Kip(360, "Improve reliability of idempotent/transactional producer", _Y,
        ("samsa/producer/transaction_manager.py", "samsa/broker/apis/init_producer_id.py",
         "samsa/broker/log/producer_state.py"), "epoch bumps, UNKNOWN_PRODUCER_ID"),
    Kip(368, "Allow SASL Connections to Periodically Re-Authenticate", _Y,
        ("samsa/net/client.py", "samsa/broker/network/authenticator.py"),
        "connections.max.reauth.ms on the broker; clients re-authenticate at 85-95% of the "
        "session lifetime"),
    Kip(390, "Support Compression Level", _Y,
        ("samsa/producer/config.py", "samsa/broker/apis/topic_configs.py"),
        "compression.<codec>.level"),
    Kip(392, "Allow consumers to fetch from closest replica", _N, (),
        "a single broker names no preferred read replica, and the consumer ignores one"),
    Kip(402, "Improve fairness in SocketServer processors", _P,
        ("samsa/broker/network/connection_quotas.py", "samsa/broker/network/socket_server.py"),
        "max.connections, broker-wide and per listener: the acceptor stops accepting at the "
        "limit; no protected inter-broker listener (one node)"),
    Kip(429, "Kafka Consumer Incremental Rebalance Protocol", _Y,
        ("samsa/consumer/assignors.py", "samsa/consumer/coordinator.py"), "cooperative-sticky"),
    Kip(447, "Producer scalability for exactly once semantics", _Y,
        ("samsa/consumer/group_metadata.py", "samsa/producer/producer.py",
         "samsa/broker/apis/txn_offset_commit.py"),
        "send_offsets_to_transaction takes the consumer's group metadata; TxnOffsetCommit v3+ "
        "checks generation, member and instance id"),
    Kip(467, "Augment ProduceResponse error messaging for specific culprit records", _Y,
        ("samsa/broker/log/log.py",), "RecordErrors in Produce v8+"),
    Kip(482, "The Kafka Protocol should Support Optional Tagged Fields", _Y,
        ("samsa/protocol/codec.py",), "flexible versions"),
    Kip(496, "Administrative API to delete consumer offsets", _P,
        ("samsa/broker/apis/offset_delete.py",), "broker side"),
    Kip(511, "Collect and Expose Client's Name and Version in the Brokers", _Y,
        ("samsa/net/client.py", "samsa/broker/apis/api_versions.py",
         "samsa/protocol/frames.py"),
        "ApiVersions v3+; unknown versions answered in the v0 layout"),
    Kip(534, "Retain tombstones and transaction markers for approximately delete.retention.ms", _Y,
        ("samsa/broker/log/cleaner_filter.py",),
        "the batch delete horizon (attribute bit 6, BaseTimestamp) set by the log cleaner"),
    Kip(554, "Add Broker-side SCRAM Config API", _P,
        ("samsa/broker/apis/user_scram_credentials.py", "samsa/broker/scram_credentials.py",
         "samsa/security/scram.py"),
        "Describe/AlterUserScramCredentials and the durable credential store, which SASL/SCRAM "
        "listeners authenticate with"),
    Kip(578, "Add configuration to limit number of partitions", _P,
        ("samsa/broker/log/manager.py", "samsa/broker/config.py"),
        "max.broker.partitions (default 20000) on CreateTopics, CreatePartitions and "
        "auto-creation, refused with POLICY_VIOLATION (the KIP's new error code never reached "
        "Kafka); no cluster-wide max.partitions on one node"),
    Kip(580, "Exponential Backoff for Kafka Clients", _Y, ("samsa/net/backoff.py",),
        "retry.backoff.max.ms"),
    Kip(651, "Support PEM format for SSL certificates and private key", _P, ("samsa/security/tls.py",),
        "PEM stores only (files or inline); JKS and PKCS12 are refused"),
    Kip(664, "Provide tooling to detect and abort hanging transactions", _P,
        ("samsa/broker/apis/describe_producers.py", "samsa/broker/apis/describe_transactions.py",
         "samsa/broker/apis/list_transactions.py"),
        "DescribeProducers, DescribeTransactions, ListTransactions; no WriteTxnMarkers to abort"),
    Kip(679, "Producer will enable the strongest delivery guarantee by default", _P,
        ("samsa/producer/config.py", "samsa/producer/sender.py"),
        "acks=all and enable.idempotence=true by default; InitProducerId needs IDEMPOTENT_WRITE "
        "on the cluster or WRITE on some topic"),
    Kip(700, "Add Describe Cluster API", _Y,
        ("samsa/admin/client.py", "samsa/broker/apis/cluster.py")),
    Kip(724, "Drop support for message formats v0 and v1", _Y,
        ("samsa/broker/log/up_conversion.py",),
        "the log holds v2 only; older sets are converted on the way in and out"),
    Kip(734, "Improve AdminClient.listOffsets to return timestamp and offset for the record "
        "with the largest timestamp", _Y, ("samsa/broker/log/log.py",), "MAX_TIMESTAMP"),
    Kip(794, "Strictly Uniform Sticky Partitioner", _Y, ("samsa/producer/partitioner.py",),
        "with partitioner.adaptive.partitioning.enable"),
    Kip(848, "The Next Generation of the Consumer Rebalance Protocol", _N,
        ("samsa/broker/apis/describe_configs.py", "samsa/admin/types.py"),
        "only the group configs DescribeConfigs reports; groups use the classic protocol"),
    Kip(890, "Transactions Server-Side Defense", _P,
        ("samsa/producer/sender.py", "samsa/broker/apis/produce.py",
         "samsa/broker/txn/coordinator.py"),
        "the broker verifies a producer's first transactional batch per partition (part 1) and "
        "serves EndTxn v5 / Produce v12 (part 2) but advertises no transaction.version; the "
        "producer stays below the versions that add TRANSACTION_ABORTABLE"),
    Kip(893, "The Kafka protocol should support nullable structs", _Y,
        ("samsa/protocol/codec.py",)),
    Kip(896, "Remove old client protocol API versions in Kafka 4.0", _N,
        ("samsa/broker/apis/versions.py",),
        "deliberately not applied: the broker keeps Kafka 3.9's minimum versions"),
    Kip(932, "Queues for Kafka", _N, ("samsa/broker/apis/describe_configs.py",),
        "share-group configs reported only"),
    Kip(937, "Improve Message Timestamp Validation", _Y, ("samsa/broker/log/config.py",),
        "message.timestamp.before.max.ms / after.max.ms"),
    Kip(939, "Support Participation in 2PC", _N, ("samsa/producer/txn_state.py",),
        "no PREPARED_TRANSACTION state nor InitProducerId v6 keep_prepared_txn"),
    Kip(951, "Leader discovery optimisations for the client", _P,
        ("samsa/producer/batch.py",), "a retry to a new leader skips the backoff"),
    Kip(966, "Eligible Leader Replicas", _P,
        ("samsa/broker/apis/describe_topic_partitions.py",), "DescribeTopicPartitions v0 paging"),
    Kip(994, "Minor Enhancements to ListTransactions and DescribeTransactions APIs", _P,
        ("samsa/broker/apis/list_transactions.py",), "ListTransactions v1's duration filter"),
)
