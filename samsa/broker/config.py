"""Broker settings: Kafka's broker names and defaults, validated; Java properties files.

``BrokerConfig(config)`` parses a dict (values may be strings, as from ``server.properties`` or
``--config key=value``) into a read-only mapping keyed by Kafka's dotted names.  An unknown name
raises :class:`~samsa.errors.ConfigError` naming it; so does an invalid value.

Listeners (samsa/broker/listeners.py).  ``listeners`` names each listener and where it binds
(``PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9093``); ``Broker(host=..., port=...)``
replace the first one's address.  ``advertised.listeners`` is what Metadata tells clients of
each listener; unset, the bound host and the *bound* port (so port 0 advertises the ephemeral
port).  A wildcard bind (``0.0.0.0``, ``::`` or an empty host) is advertised as this machine's
host name, as Kafka advertises an empty host.

Per-listener settings.  As in Kafka, ``listener.name.<listener>.<setting>`` overrides a security
setting for one listener (``listener.name.sasl_ssl.ssl.keystore.location``), and the SASL
login settings are given per listener and mechanism
(``listener.name.sasl_plaintext.plain.sasl.jaas.config``); :meth:`BrokerConfig.listener_value`
and :meth:`BrokerConfig.jaas_config` read them.

Settings Kafka needs for a multi-node KRaft cluster (``controller.*``, inter-broker
listeners ...) are accepted so that a Kafka ``server.properties`` loads, and ignored: this is
one node that is broker and controller at once.  A setting that would ask for more than one
node can give is refused at start rather than ignored: a replication factor or ISR minimum of
an internal topic above 1, ``process.roles`` without both roles, ``log.preallocate=true``,
a rebalance protocol other than classic.  docs/broker-settings.md lists every setting and what
it does here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from samsa.broker.listeners import parse_listeners, parse_protocol_map, served_listeners
from samsa.config import Config, ConfigDef, Range, Type, ValidChoice, at_least
from samsa.errors import ConfigError
from samsa.properties import load_properties, parse_properties
from samsa.records.compression import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    LEVEL_RANGES,
    default_level,
)

__all__ = [
    "BROKER_CONFIG",
    "SASL_MECHANISMS",
    "BrokerConfig",
    "load_properties",
    "parse_properties",
]

_INT_MAX = 2**31 - 1
_LONG_MAX = 2**63 - 1
_LISTENER_PREFIX = "listener.name."
# Mechanisms Kafka ships; GSSAPI (Kerberos) is known but not served here.
SASL_MECHANISMS = ("GSSAPI", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
# Settings Kafka reads per listener *and mechanism* (listener.name.<l>.<mechanism>.<setting>).
_PER_MECHANISM = ("sasl.jaas.config", "sasl.server.callback.handler.class",
                  "sasl.login.callback.handler.class", "sasl.login.class",
                  "connections.max.reauth.ms")
# Other settings Kafka takes per listener (listener.name.<l>.<setting>).
_PER_LISTENER = ("connection.failed.authentication.delay.ms", "max.connections")
# Characters of a host in max.connections.per.ip.overrides (Kafka's Utils.validHostPattern).
_HOST_PATTERN = re.compile(r"[0-9a-zA-Z\-%._:]*")


@dataclass(frozen=True, slots=True)
class _OneNode:
    """A replication setting of an internal topic: 1 is all one node can give.  Kafka would
    refuse to create the topic until enough brokers joined (the setting's doc: "Internal topic
    creation will fail until the cluster size meets this replication factor requirement"),
    leaving its coordinator unavailable; here the broker refuses to start instead."""

    what: str

    def __call__(self, name: str, value: Any) -> Any:
        if value is not None and value != 1:
            raise ConfigError(name, f"{value} {self.what}, but this broker is a single node: "
                              "Kafka would never create the internal topic; set "
                              f"{name}=1 (or leave it unset)")
        return value

    def describe(self) -> str:
        return "1 (a single node)"


@dataclass(frozen=True, slots=True)
class _Only:
    """A setting whose other values this broker cannot honour: refused, saying why."""

    allowed: Any
    why: str

    def __call__(self, name: str, value: Any) -> Any:
        if value is not None and value != self.allowed:
            raise ConfigError(name, f"{_text(value)} is not supported: {self.why}; "
                              f"set {name}={_text(self.allowed)} or leave it unset")
        return value

    def describe(self) -> str:
        return repr(self.allowed)


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


@dataclass(frozen=True, slots=True)
class _Roles:
    """process.roles: this node is broker and controller at once (Kafka's combined mode)."""

    def __call__(self, name: str, value: Any) -> Any:
        if value is None:
            return value
        roles = sorted(r.strip() for r in str(value).split(",") if r.strip())
        if roles != ["broker", "controller"]:
            raise ConfigError(name, f"{value!r}: this node is always broker and controller at "
                              "once (Kafka's combined mode); a broker-only or controller-only "
                              "node of a larger cluster is not supported: set "
                              "process.roles=broker,controller or leave it unset")
        return value

    def describe(self) -> str:
        return "broker,controller"


def _network_settings(d: ConfigDef) -> None:
    d.define("node.id", Type.INT, 1, at_least(0), "This node's id (Kafka's node.id / broker.id).")
    d.define("listeners", Type.STRING, None, None,
             "Where to listen: NAME://host:port,... (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL or "
             "a name mapped in listener.security.protocol.map); host/port arguments replace "
             "the first one's address.")
    d.define("advertised.listeners", Type.STRING, None, None,
             "The addresses clients are told, per listener (NAME://host:port,...); default: "
             "the bound address.")
    d.define("controller.listener.names", Type.STRING, None, None,
             "Listeners of a separate KRaft controller; listeners named here are not served "
             "(this one node has no controller endpoint).")
    d.define("listener.security.protocol.map", Type.STRING,
             "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", None,
             "Security protocol of each listener name (NAME:PROTOCOL,...).")
    d.define("num.network.threads", Type.INT, 3, at_least(1),
             "Network (processor) threads that read requests and write responses.")
    d.define("num.io.threads", Type.INT, 8, at_least(1), "Request handler threads.")
    d.define("socket.request.max.bytes", Type.INT, 104_857_600, at_least(1),
             "Largest request accepted; a bigger size prefix closes the connection.")
    d.define("socket.send.buffer.bytes", Type.INT, 102_400, Range(min=1, also=(-1,)),
             "SO_SNDBUF of client connections (-1: the OS default).")
    d.define("socket.receive.buffer.bytes", Type.INT, 102_400, Range(min=1, also=(-1,)),
             "SO_RCVBUF of client connections (-1: the OS default).")
    d.define("socket.listen.backlog.size", Type.INT, 50, at_least(1), "listen() backlog.")
    d.define("samsa.inline.dispatch.enable", Type.BOOLEAN, True, None,
             "Let network threads handle requests that never block (Produce without a per-append "
             "fsync, Fetch, Metadata ...) themselves while the handler queue is empty, saving two "
             "thread handoffs per request; false sends every request to the handler threads.")
    d.define("queued.max.requests", Type.INT, 500, at_least(1),
             "Requests waiting for a handler thread before the network threads block.")
    d.define("connections.max.idle.ms", Type.LONG, 600_000, at_least(1),
             "Close connections idle this long.")
    d.define("max.connections", Type.INT, _INT_MAX, at_least(0),
             "Connections the broker holds at once (KIP-402); listener.name.<listener>."
             "max.connections limits one listener.  At the limit the broker stops accepting: "
             "new connections wait in the listen backlog until others close.")
    d.define("max.connections.per.ip", Type.INT, _INT_MAX, at_least(0),
             "Connections from one client address; past it a new connection is closed at once. "
             "0 is allowed only with max.connections.per.ip.overrides.")
    d.define("max.connections.per.ip.overrides", Type.STRING, "", None,
             "Per-address exceptions to max.connections.per.ip: host:count,... "
             "(\"hostName:100,127.0.0.1:200\"); host names are resolved at start.")
    d.define("broker.rack", Type.STRING, None, None, "Rack reported in Metadata.")


def _log_settings(d: ConfigDef) -> None:
    # Defaults as Kafka's; None = unset, falling back to the coarser setting (as Kafka does).
    d.define("log.dirs", Type.STRING, None, None,
             "The data directory (one), when no data dir is given on the command line.")
    d.define("log.dir", Type.STRING, None, None, "Same as log.dirs (older name).")
    d.define("num.partitions", Type.INT, 1, at_least(1), "Partitions of auto-created topics.")
    d.define("auto.create.topics.enable", Type.BOOLEAN, True, None,
             "Create unknown topics on Metadata/Produce requests that allow it.")
    d.define("delete.topic.enable", Type.BOOLEAN, True, None, "Allow DeleteTopics.")
    d.define("default.replication.factor", Type.INT, 1, Range(min=-1, max=1),
             "Replication factor of auto-created topics (one node: 1).")
    # Trivially honoured: Kafka (3.7+, KAFKA-15583) checks an acks=all write against
    # min(min.insync.replicas, replication factor) (Partition.effectiveMinIsr), so with the
    # one replica here any value is met -- a one-broker Kafka accepts such writes too.
    d.define("min.insync.replicas", Type.INT, 1, at_least(1),
             "Has no effect possible on one node: Kafka caps it at the replication factor (1 "
             "here) when it checks an acks=all write, and the one replica is in sync.")
    d.define("compression.type", Type.STRING, "producer",
             ValidChoice(("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")),
             "Compression of stored batches; 'producer' keeps the producer's.")
    d.define("log.segment.bytes", Type.INT, 1024 * 1024 * 1024, at_least(14), "Segment size.")
    d.define("log.roll.ms", Type.LONG, None, at_least(1), "Roll a segment this old.")
    d.define("log.roll.hours", Type.INT, 168, at_least(1), "Roll age, when log.roll.ms is unset.")
    d.define("log.retention.ms", Type.LONG, None, Range(min=-1), "Delete segments older than this.")
    d.define("log.retention.minutes", Type.INT, None, Range(min=-1), "Retention in minutes.")
    d.define("log.retention.hours", Type.INT, 168, Range(min=-1), "Retention in hours.")
    d.define("log.retention.bytes", Type.LONG, -1, Range(min=-1), "Per-partition size limit.")
    d.define("log.retention.check.interval.ms", Type.LONG, 300_000, at_least(1),
             "How often retention runs.")
    d.define("log.index.interval.bytes", Type.INT, 4096, at_least(0), "Bytes between index entries.")
    d.define("log.index.size.max.bytes", Type.INT, 10 * 1024 * 1024, at_least(4),
             "Largest offset index file.")
    d.define("log.flush.interval.messages", Type.LONG, _LONG_MAX, at_least(1),
             "fsync after this many messages.")
    d.define("log.flush.interval.ms", Type.LONG, None, at_least(0), "fsync data this old.")
    d.define("log.flush.scheduler.interval.ms", Type.LONG, _LONG_MAX, at_least(0),
             "How often the flusher checks.")
    d.define("log.flush.offset.checkpoint.interval.ms", Type.INT, 60_000, at_least(0),
             "How often recovery points are checkpointed.")
    d.define("log.flush.start.offset.checkpoint.interval.ms", Type.INT, 60_000, at_least(0),
             "How often log start offsets are checkpointed.")
    d.define("log.segment.delete.delay.ms", Type.LONG, 60_000, at_least(0),
             "Delay before deleted segment files are removed: they are renamed *.deleted at "
             "once and unlinked this much later (files left by a crash go at start-up).")
    d.define("log.message.timestamp.type", Type.STRING, "CreateTime",
             ValidChoice(("CreateTime", "LogAppendTime")), "Timestamps stored in batches.")
    d.define("log.message.timestamp.before.max.ms", Type.LONG, _LONG_MAX, at_least(0),
             "Reject record timestamps further in the past.")
    d.define("log.message.timestamp.after.max.ms", Type.LONG, 3_600_000, at_least(0),
             "Reject record timestamps further in the future.")
    d.define("log.message.downconversion.enable", Type.BOOLEAN, True, None,
             "Convert stored v2 batches to magic 0/1 for Fetch v0-3 (KIP-283); false answers "
             "those fetches UNSUPPORTED_VERSION.")
    d.define("log.cleanup.policy", Type.STRING, "delete", None, "delete, compact or both.")
    # The log cleaner (Kafka's CleanerConfig names and defaults).
    d.define("log.cleaner.enable", Type.BOOLEAN, True, None,
             "Run the log cleaner (compaction of cleanup.policy=compact topics).")
    d.define("log.cleaner.threads", Type.INT, 1, at_least(0), "Log cleaner threads.")
    d.define("log.cleaner.dedupe.buffer.size", Type.LONG, 134_217_728, at_least(0),
             "Memory of the cleaners' key -> offset maps, over all threads (24 bytes a key).")
    d.define("log.cleaner.io.buffer.load.factor", Type.DOUBLE, 0.9, Range(0.01, 1),
             "Share of the key map filled before a round stops adding keys.")
    d.define("log.cleaner.io.buffer.size", Type.INT, 524_288, at_least(0),
             "The cleaners' read/write buffers, over all threads.")
    d.define("log.cleaner.io.max.bytes.per.second", Type.DOUBLE, 1.7976931348623157e308,
             None, "Bytes per second all cleaners may read and write together.")
    d.define("log.cleaner.backoff.ms", Type.LONG, 15_000, at_least(0),
             "Sleep of a cleaner thread that found nothing to clean.")
    d.define("log.cleaner.delete.retention.ms", Type.LONG, 86_400_000, at_least(0),
             "How long delete tombstones are kept on compacted topics.")
    d.define("log.cleaner.min.compaction.lag.ms", Type.LONG, 0, at_least(0),
             "Least age of a record before it may be compacted.")
    d.define("log.cleaner.max.compaction.lag.ms", Type.LONG, _LONG_MAX, at_least(1),
             "Greatest age of a record before it must be compacted.")
    d.define("log.cleaner.min.cleanable.ratio", Type.DOUBLE, 0.5, Range(0, 1),
             "Dirty ratio at which a log is compacted.")
    # Kafka preallocates segment.bytes and trims the tail on roll/close (LogSegment,
    # FileRecords.trim); the segments here are sized by their appends, so true is refused.
    d.define("log.preallocate", Type.BOOLEAN, False,
             _Only(False, "segment files are not preallocated by this broker"),
             "Must be false: segment files grow with their appends.")
    d.define("log.roll.jitter.ms", Type.LONG, None, at_least(0),
             "Most random jitter subtracted from each new segment's roll age (log.roll.ms), so "
             "that partitions do not all roll at once (LogConfig.randomSegmentJitter).")
    d.define("log.roll.jitter.hours", Type.INT, 0, at_least(0),
             "Roll jitter in hours, when log.roll.jitter.ms is unset.")
    # Trivially honoured: the only replica is the leader and is always in sync, so no election
    # (clean or unclean) ever happens and no data can be lost to one.
    d.define("unclean.leader.election.enable", Type.BOOLEAN, False, None,
             "Has no effect possible on one node: the only replica is always in sync, so no "
             "leader election ever happens.")
    for codec, (low, high) in LEVEL_RANGES.items():
        default = default_level(codec)
        d.define(f"compression.{codec.name.lower()}.level", Type.INT, default,
                 Range(low, high, (default,) if default is not None and default < low else ()),
                 f"Level of {codec.name.lower()} when compression.type recompresses.")
    d.define("num.recovery.threads.per.data.dir", Type.INT, 2, at_least(1),
             "Threads that load the partitions' logs at start-up after an unclean shutdown "
             "(recovery); after a clean one the logs are loaded on one thread.")
    d.define("message.max.bytes", Type.INT, 1_048_588, at_least(0), "Largest record batch.")
    # Kafka has none: it streams records through the decompressor (LogValidator); the check
    # here holds a batch's records at once, so their size is bounded (records.compression).
    d.define("samsa.decompressed.batch.max.bytes", Type.INT, DEFAULT_MAX_DECOMPRESSED_BYTES,
             at_least(1),
             "Largest size a produced compressed batch may decompress to (never below the "
             "topic's max.message.bytes); a batch past it gets MESSAGE_TOO_LARGE, on which Java "
             "and samsa producers split it.  Bounds the memory one produce check takes.")
    d.define("producer.id.expiration.ms", Type.INT, 86_400_000, at_least(1),
             "Forget idempotent producers idle this long.")
    d.define("producer.id.expiration.check.interval.ms", Type.INT, 600_000, at_least(1),
             "How often idle producer ids are expired.")
    d.define("fetch.max.bytes", Type.INT, 57_671_680, at_least(1024),
             "Largest fetch response the broker builds.")
    d.define("samsa.log.open.files.max", Type.INT, 0, at_least(0),
             "Segment files kept open at once (an LRU; others are reopened on use); 0 = a "
             "quarter of the soft RLIMIT_NOFILE.")
    # KIP-578's name (the KIP was never adopted by Kafka).  A partition at rest holds no
    # descriptor (segment files go through the cache above), so the limit comes from what
    # each partition costs in memory and in start and stop time: docs/architecture.md, Storage.
    d.define("max.broker.partitions", Type.INT, 20_000, at_least(1),
             "Most partitions this broker holds (internal topics included); CreateTopics, "
             "CreatePartitions and auto-creation that would pass it get POLICY_VIOLATION.")
    d.define("samsa.open.files.limit.raise.enable", Type.BOOLEAN, True, None,
             "At start, raise the soft RLIMIT_NOFILE to the hard limit, as Kafka's docs advise "
             "for production; false keeps the inherited limit.")


def _coordinator_settings(d: ConfigDef) -> None:
    d.define("offsets.topic.num.partitions", Type.INT, 50, at_least(1),
             "Partitions of __consumer_offsets.")
    # Kafka's default is 3; adapted to one node.  An explicit 3 is refused at start (_OneNode).
    d.define("offsets.topic.replication.factor", Type.INT, 1,
             _OneNode("replicas of __consumer_offsets asked for"),
             "Replicas of __consumer_offsets: 1 on a single node (Kafka's default is 3).")
    d.define("offsets.topic.segment.bytes", Type.INT, 104_857_600, at_least(1),
             "Segment size of __consumer_offsets.")
    d.define("offsets.retention.minutes", Type.INT, 10_080, at_least(1),
             "Keep committed offsets of empty groups this long.")
    d.define("offsets.retention.check.interval.ms", Type.LONG, 600_000, at_least(1),
             "How often expired offsets are removed.")
    # Trivially honoured: Kafka waits up to this for the offsets topic's replicas; the one
    # replica here is written synchronously before the commit is answered, never waiting.
    d.define("offsets.commit.timeout.ms", Type.INT, 5000, at_least(1),
             "Has no effect possible on one node: a commit is written to the only replica "
             "before it is answered, never waiting for others.")
    d.define("offset.metadata.max.bytes", Type.INT, 4096, at_least(0),
             "Largest commit metadata string.")
    d.define("group.initial.rebalance.delay.ms", Type.INT, 3000, at_least(0),
             "Wait for more members before the first rebalance of an empty group.")
    d.define("group.min.session.timeout.ms", Type.INT, 6000, at_least(0),
             "Smallest session timeout a member may ask for.")
    d.define("group.max.session.timeout.ms", Type.INT, 1_800_000, at_least(0),
             "Largest session timeout a member may ask for.")
    d.define("group.max.size", Type.INT, _INT_MAX, at_least(1), "Members per group.")
    d.define("group.coordinator.rebalance.protocols", Type.STRING, "classic",
             _Only("classic", "only the classic group protocol (JoinGroup/SyncGroup) is "
                   "served, not KIP-848's consumer, streams or share groups"),
             "Must be classic: the classic group protocol is served (Kafka's default also "
             "enables KIP-848's consumer and streams groups).")
    d.define("transaction.state.log.num.partitions", Type.INT, 50, at_least(1),
             "Partitions of __transaction_state.")
    d.define("transaction.state.log.replication.factor", Type.INT, 1,
             _OneNode("replicas of __transaction_state asked for"),
             "Replicas of __transaction_state: 1 on a single node (Kafka's default is 3).")
    # Trivially honoured, as min.insync.replicas: capped at the replication factor (1).
    d.define("transaction.state.log.min.isr", Type.INT, 1, at_least(1),
             "Has no effect possible on one node: min.insync.replicas of __transaction_state, "
             "capped at its replication factor (1) as Kafka does.")
    d.define("transaction.max.timeout.ms", Type.INT, 900_000, at_least(1),
             "Largest transaction timeout a producer may ask for.")
    d.define("transactional.id.expiration.ms", Type.INT, 604_800_000, at_least(1),
             "Forget transactional ids idle this long.")
    d.define("transaction.state.log.segment.bytes", Type.INT, 104_857_600, at_least(1),
             "Segment size of __transaction_state.")
    d.define("transaction.abort.timed.out.transaction.cleanup.interval.ms", Type.INT, 10_000,
             at_least(1), "How often transactions older than their timeout are aborted.")
    d.define("transaction.remove.expired.transaction.cleanup.interval.ms", Type.INT, 3_600_000,
             at_least(1), "How often transactional ids idle past "
             "transactional.id.expiration.ms are removed.")
    # Share groups (KIP-932) are not served, so __share_group_state is never created; its
    # replication factor is checked as the other internal topics' so a 3 is not ignored.
    d.define("share.coordinator.state.topic.replication.factor", Type.INT, 1,
             _OneNode("replicas of __share_group_state asked for"),
             "Replicas of __share_group_state (share groups are not served): 1.")
    d.define("share.coordinator.state.topic.min.isr", Type.INT, 1, at_least(1),
             "Has no effect possible: share groups are not served (and the value would be "
             "capped at the replication factor, 1).")


def _kraft_compat_settings(d: ConfigDef) -> None:
    # Present in Kafka's sample server.properties; meaningless for one combined node.
    d.define("process.roles", Type.STRING, None, _Roles(),
             "broker,controller (Kafka's combined mode), the only roles this node has.")
    for name in ("controller.quorum.voters", "controller.quorum.bootstrap.servers",
                 "inter.broker.listener.name",
                 "security.inter.broker.protocol", "sasl.mechanism.inter.broker.protocol",
                 "sasl.mechanism.controller.protocol", "metadata.log.dir"):
        d.define(name, Type.STRING, None, None, "Accepted for Kafka compatibility; ignored.")


def _security_settings(d: ConfigDef) -> None:
    # Kafka's BrokerSecurityConfigs and SslConfigs names and defaults.
    d.define("sasl.enabled.mechanisms", Type.LIST, ["GSSAPI"], None,
             "SASL mechanisms served on SASL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 "
             "(Kafka's default, GSSAPI, is not served: set this on a SASL listener).")
    d.define("sasl.jaas.config", Type.STRING, None, None,
             "JAAS login settings; a broker reads them per listener and mechanism: "
             "listener.name.<listener>.<mechanism>.sasl.jaas.config (PLAIN users as "
             'user_<name>="<password>").')
    d.define("sasl.server.max.receive.size", Type.INT, 524_288, at_least(1),
             "Largest request accepted before a SASL client has authenticated.")
    d.define("connections.max.reauth.ms", Type.LONG, 0, at_least(0),
             "SASL session lifetime (KIP-368): a client must re-authenticate within it or its "
             "connection is closed; 0 = sessions never expire.")
    d.define("connection.failed.authentication.delay.ms", Type.INT, 100, at_least(0),
             "Delay before a connection whose authentication failed is closed, to slow down "
             "clients that keep trying.")
    d.define("authorizer.class.name", Type.STRING, "", None,
             "ACL authorizer: org.apache.kafka.metadata.authorizer.StandardAuthorizer (Kafka's); "
             "empty = every client may do everything.")
    d.define("super.users", Type.STRING, None, None,
             "Principals every ACL check allows, ';'-separated (User:admin;User:CN=ops,O=x).")
    d.define("allow.everyone.if.no.acl.found", Type.BOOLEAN, False, None,
             "Allow access to resources no ACL mentions (false: only what ACLs grant).")
    # A custom (Java) builder cannot be loaded here: only Kafka's own is accepted by name.
    d.define("principal.builder.class", Type.STRING, None,
             _Only("org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
                   "principals are built as Kafka's DefaultKafkaPrincipalBuilder does (User:"
                   "<SASL name> or User:<certificate subject>); a custom Java builder cannot "
                   "be loaded"),
             "Kafka's DefaultKafkaPrincipalBuilder (the only one): principals are built as it "
             "does.")
    d.define("ssl.keystore.type", Type.STRING, "JKS", None,
             "Keystore file format; PEM is served (key and certificate chain in one file).")
    d.define("ssl.keystore.location", Type.STRING, None, None,
             "The broker's PEM key and certificate chain (TLS listeners).")
    d.define("ssl.keystore.password", Type.STRING, None, None, "Accepted (PEM keystores have none).")
    d.define("ssl.keystore.key", Type.STRING, None, None,
             "The broker's private key as PEM text (instead of ssl.keystore.location).")
    d.define("ssl.keystore.certificate.chain", Type.STRING, None, None,
             "The broker's certificate chain as PEM text (with ssl.keystore.key).")
    d.define("ssl.key.password", Type.STRING, None, None, "Password of an encrypted private key.")
    d.define("ssl.truststore.type", Type.STRING, "JKS", None, "Truststore file format; PEM is served.")
    d.define("ssl.truststore.location", Type.STRING, None, None,
             "PEM CA certificates that client certificates must chain to.")
    d.define("ssl.truststore.password", Type.STRING, None, None, "Accepted (PEM has none).")
    d.define("ssl.truststore.certificates", Type.STRING, None, None,
             "Trusted CA certificates as PEM text (instead of ssl.truststore.location).")
    d.define("ssl.client.auth", Type.STRING, "none", ValidChoice(("required", "requested", "none")),
             "Client certificates: required, requested (checked when sent) or none.")
    d.define("ssl.protocol", Type.STRING, "TLSv1.3", None, "TLS protocol (as Java's SSLContext).")
    d.define("ssl.enabled.protocols", Type.LIST, ["TLSv1.2", "TLSv1.3"], None,
             "TLS versions accepted.")
    d.define("ssl.cipher.suites", Type.LIST, [], None,
             "TLS 1.2 cipher suites (OpenSSL names); empty = the library's defaults.")
    d.define("ssl.endpoint.identification.algorithm", Type.STRING, "https", None,
             "Accepted (the broker does not check client host names).")
    d.define("ssl.principal.mapping.rules", Type.STRING, "DEFAULT", ValidChoice(("DEFAULT",)),
             "How certificate subjects become principal names; DEFAULT (the full subject).")


BROKER_CONFIG = ConfigDef("broker")
_network_settings(BROKER_CONFIG)
_security_settings(BROKER_CONFIG)
_log_settings(BROKER_CONFIG)
_coordinator_settings(BROKER_CONFIG)
_kraft_compat_settings(BROKER_CONFIG)


class BrokerConfig(Config):
    """Validated broker settings; ``cfg["num.io.threads"]``, ``cfg.num_io_threads``."""

    DEFINITION = BROKER_CONFIG

    def __init__(self, config: Mapping[str, Any] | None = None, /, **kwargs: Any) -> None:
        # listener.name.<listener>.* settings have open-ended names: set them aside, parse the
        # rest as usual, then check each one against the setting it overrides.
        plain: dict[str, Any] = {}
        self._prefixed: dict[str, Any] = {}
        for key, value in (config or {}).items():
            if isinstance(key, str) and key.startswith(_LISTENER_PREFIX):
                self._prefixed[key] = value
            else:
                plain[key] = value
        super().__init__(plain, **kwargs)

    def _post_process(self) -> None:
        protocols = parse_protocol_map(self["listener.security.protocol.map"])
        for name in ("listeners", "advertised.listeners"):
            if self[name] is not None:
                parse_listeners(name, self[name], protocols)
        if self["listeners"] is not None:
            served_listeners(self)
        self.listener_overrides: dict[str, dict[str, Any]] = {}
        for key, value in getattr(self, "_prefixed", {}).items():
            listener, _, setting = key[len(_LISTENER_PREFIX):].partition(".")
            if not listener or not setting:
                raise ConfigError(key, "expected listener.name.<listener>.<setting>")
            self.listener_overrides.setdefault(listener.upper(), {})[setting] = \
                self._listener_setting(key, setting, value)
        self.max_connections_per_ip_overrides = _ip_overrides(
            self["max.connections.per.ip.overrides"])
        if self["max.connections.per.ip"] == 0 and not self.max_connections_per_ip_overrides:
            raise ConfigError("max.connections.per.ip", "can be 0 only if "
                              "max.connections.per.ip.overrides is set (0 would refuse "
                              "every client)")
        dirs = [self[n] for n in ("log.dirs", "log.dir") if self[n] is not None]
        for value in dirs:
            if len([d for d in value.split(",") if d.strip()]) > 1:
                raise ConfigError("log.dirs", f"{value!r} names several directories; "
                                  "this broker stores everything in one")

    def _listener_setting(self, key: str, setting: str, value: Any) -> Any:
        definition = self.definition
        mechanism, _, rest = setting.partition(".")
        if mechanism.upper() in SASL_MECHANISMS and rest in _PER_MECHANISM:
            return definition[rest].convert(value)
        if setting in definition and (setting.startswith(("ssl.", "sasl."))
                                      or setting in _PER_MECHANISM
                                      or setting in _PER_LISTENER):
            return definition[setting].convert(value)
        raise ConfigError(key, "unknown per-listener setting: Kafka's listener.name.<listener>. "
                          "prefix takes ssl.* and sasl.* settings, "
                          "<mechanism>.sasl.jaas.config, and " + ", ".join(_PER_LISTENER))

    def listener_value(self, listener: str, setting: str) -> Any:
        """``setting`` for one listener: its listener.name.<listener>. override, else the
        broker-wide value."""
        overrides = self.listener_overrides.get(listener.upper(), {})
        return overrides[setting] if setting in overrides else self[setting]

    def mechanism_value(self, listener: str, mechanism: str, setting: str) -> Any:
        """A per-mechanism setting (listener.name.<listener>.<mechanism>.<setting>), else the
        listener's value."""
        overrides = self.listener_overrides.get(listener.upper(), {})
        key = f"{mechanism.lower()}.{setting}"
        if key in overrides:
            return overrides[key]
        return self.listener_value(listener, setting)

    def jaas_config(self, listener: str, mechanism: str) -> str | None:
        """The JAAS settings of ``mechanism`` on ``listener``, as Kafka's
        JaasContext.loadServerContext reads them (only the listener-and-mechanism prefix)."""
        value = self.listener_overrides.get(listener.upper(), {}).get(
            f"{mechanism.lower()}.sasl.jaas.config")
        return value if isinstance(value, str) else None

    def __repr__(self) -> str:  # never print passwords or JAAS secrets
        shown = {name: ("[hidden]" if _is_secret(name) else self[name])
                 for name in sorted(self.originals)}
        return f"BrokerConfig({shown!r})"

    @property
    def data_dir(self) -> str | None:
        """The directory named by log.dirs (or log.dir), if any."""
        value = self["log.dirs"] or self["log.dir"]
        return value.strip() if value else None

    @property
    def explicit(self) -> dict[str, Any]:
        """Only the settings the operator gave (for DescribeConfigs' STATIC_BROKER_CONFIG)."""
        return {name: self[name] for name in self.originals}


def _ip_overrides(value: str) -> dict[str, int]:
    """max.connections.per.ip.overrides: ``host:count,...`` (the last ':' splits, so IPv6
    addresses need no brackets), as Kafka's Csv.parseCsvMap reads it."""
    setting = "max.connections.per.ip.overrides"
    overrides: dict[str, int] = {}
    for item in (value or "").split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        host = host.strip()
        if not sep or not host:
            raise ConfigError(setting, f"{item!r} is not host:count (e.g. 127.0.0.1:200)")
        if not _HOST_PATTERN.fullmatch(host):
            raise ConfigError(setting, f"contains an invalid address: {host!r}")
        try:
            overrides[host] = int(count.strip())
        except ValueError:
            raise ConfigError(setting, f"the count of {host!r} is {count.strip()!r}, "
                              "not a whole number") from None
        if overrides[host] < 0:
            raise ConfigError(setting, f"the count of {host!r} is negative")
    return overrides


def _is_secret(name: str) -> bool:
    return any(marker in name for marker in ("password", "secret", "sasl.jaas.config",
                                             "ssl.keystore.key"))
