"""Broker settings: Kafka's broker names and defaults, validated; Java properties files.

``BrokerConfig(config)`` parses a dict (values may be strings, as from ``server.properties`` or
``--config key=value``) into a read-only mapping keyed by Kafka's dotted names.  An unknown name
raises :class:`~samsa.errors.ConfigError` naming it; so does an invalid value.

Listeners.  One PLAINTEXT listener is served.  ``listeners`` (``PLAINTEXT://host:port``) says
where to bind; ``Broker(host=..., port=...)`` and ``samsa broker --host/--port`` override it.
``advertised.listeners`` is what Metadata tells clients; unset, it is the bound host and the
*bound* port (so port 0 advertises the ephemeral port).  A wildcard bind (``0.0.0.0``, ``::``
or an empty host) is advertised as this machine's host name, as Kafka advertises an empty host;
set ``advertised.listeners`` when clients must use another name.

Settings Kafka needs for a multi-node KRaft cluster (``process.roles``, ``controller.*``,
replication factors ...) are accepted so that a Kafka ``server.properties`` loads, and ignored:
this is one node that is broker and controller at once.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from samsa.config import Config, ConfigDef, Range, Type, ValidChoice, at_least
from samsa.errors import ConfigError
from samsa.records.compression import LEVEL_RANGES, default_level

__all__ = [
    "BROKER_CONFIG",
    "BrokerConfig",
    "Listener",
    "advertised_listener",
    "load_properties",
    "parse_listener",
    "parse_properties",
]

_INT_MAX = 2**31 - 1
_LONG_MAX = 2**63 - 1
_WILDCARD_HOSTS = ("", "0.0.0.0", "::", "[::]")


def _network_settings(d: ConfigDef) -> None:
    d.define("node.id", Type.INT, 1, at_least(0), "This node's id (Kafka's node.id / broker.id).")
    d.define("listeners", Type.STRING, None, None,
             "Where to listen: PLAINTEXT://host:port (one listener); host/port arguments win.")
    d.define("advertised.listeners", Type.STRING, None, None,
             "The address clients are told (PLAINTEXT://host:port); default: the bound address.")
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
    d.define("max.connections", Type.INT, _INT_MAX, at_least(0), "Accepted; not enforced.")
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
    d.define("min.insync.replicas", Type.INT, 1, at_least(1), "Accepted; one node is always in sync.")
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
             "Delay before deleted segment files are removed.")
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
    d.define("log.cleaner.enable", Type.BOOLEAN, True, None, "Accepted; compaction is not run.")
    # Broker synonyms of topic configs this node accepts and reports but does not act on
    # (Kafka's ServerLogConfigs/CleanerConfig names and defaults).
    d.define("log.cleaner.delete.retention.ms", Type.LONG, 86_400_000, at_least(0),
             "How long delete tombstones are kept on compacted topics.")
    d.define("log.cleaner.min.compaction.lag.ms", Type.LONG, 0, at_least(0),
             "Least age of a record before it may be compacted.")
    d.define("log.cleaner.max.compaction.lag.ms", Type.LONG, _LONG_MAX, at_least(1),
             "Greatest age of a record before it must be compacted.")
    d.define("log.cleaner.min.cleanable.ratio", Type.DOUBLE, 0.5, Range(0, 1),
             "Dirty ratio at which a log is compacted.")
    d.define("log.preallocate", Type.BOOLEAN, False, None, "Preallocate segment files.")
    d.define("log.roll.jitter.ms", Type.LONG, None, None, "Random jitter of segment rolls.")
    d.define("log.roll.jitter.hours", Type.INT, 0, at_least(0),
             "Roll jitter in hours, when log.roll.jitter.ms is unset.")
    d.define("unclean.leader.election.enable", Type.BOOLEAN, False, None,
             "Accepted; one node never elects another leader.")
    for codec, (low, high) in LEVEL_RANGES.items():
        default = default_level(codec)
        d.define(f"compression.{codec.name.lower()}.level", Type.INT, default,
                 Range(low, high, (default,) if default is not None and default < low else ()),
                 f"Level of {codec.name.lower()} when compression.type recompresses.")
    d.define("num.recovery.threads.per.data.dir", Type.INT, 2, at_least(1),
             "Accepted; recovery runs on one thread.")
    d.define("message.max.bytes", Type.INT, 1_048_588, at_least(0), "Largest record batch.")
    d.define("producer.id.expiration.ms", Type.INT, 86_400_000, at_least(1),
             "Forget idempotent producers idle this long.")
    d.define("producer.id.expiration.check.interval.ms", Type.INT, 600_000, at_least(1),
             "How often idle producer ids are expired.")
    d.define("fetch.max.bytes", Type.INT, 57_671_680, at_least(1024),
             "Largest fetch response the broker builds.")


def _coordinator_settings(d: ConfigDef) -> None:
    d.define("offsets.topic.num.partitions", Type.INT, 50, at_least(1),
             "Partitions of __consumer_offsets.")
    d.define("offsets.topic.replication.factor", Type.INT, 1, at_least(1),
             "Accepted (Kafka's default is 3; one node stores 1).")
    d.define("offsets.topic.segment.bytes", Type.INT, 104_857_600, at_least(1),
             "Segment size of __consumer_offsets.")
    d.define("offsets.retention.minutes", Type.INT, 10_080, at_least(1),
             "Keep committed offsets of empty groups this long.")
    d.define("offsets.retention.check.interval.ms", Type.LONG, 600_000, at_least(1),
             "How often expired offsets are removed.")
    d.define("offsets.commit.timeout.ms", Type.INT, 5000, at_least(1), "Accepted.")
    d.define("offset.metadata.max.bytes", Type.INT, 4096, at_least(0),
             "Largest commit metadata string.")
    d.define("group.initial.rebalance.delay.ms", Type.INT, 3000, at_least(0),
             "Wait for more members before the first rebalance of an empty group.")
    d.define("group.min.session.timeout.ms", Type.INT, 6000, at_least(0),
             "Smallest session timeout a member may ask for.")
    d.define("group.max.session.timeout.ms", Type.INT, 1_800_000, at_least(0),
             "Largest session timeout a member may ask for.")
    d.define("group.max.size", Type.INT, _INT_MAX, at_least(1), "Members per group.")
    d.define("group.coordinator.rebalance.protocols", Type.STRING, "classic", None,
             "Accepted; the classic protocol is served.")
    d.define("transaction.state.log.num.partitions", Type.INT, 50, at_least(1),
             "Partitions of __transaction_state.")
    d.define("transaction.state.log.replication.factor", Type.INT, 1, at_least(1), "Accepted.")
    d.define("transaction.state.log.min.isr", Type.INT, 1, at_least(1), "Accepted.")
    d.define("transaction.max.timeout.ms", Type.INT, 900_000, at_least(1),
             "Largest transaction timeout a producer may ask for.")
    d.define("transactional.id.expiration.ms", Type.INT, 604_800_000, at_least(1),
             "Forget transactional ids idle this long.")
    d.define("share.coordinator.state.topic.replication.factor", Type.INT, 1, at_least(1),
             "Accepted.")
    d.define("share.coordinator.state.topic.min.isr", Type.INT, 1, at_least(1), "Accepted.")


def _kraft_compat_settings(d: ConfigDef) -> None:
    # Present in Kafka's sample server.properties; meaningless for one combined node.
    for name in ("process.roles", "controller.quorum.voters", "controller.quorum.bootstrap.servers",
                 "controller.listener.names", "inter.broker.listener.name",
                 "listener.security.protocol.map", "metadata.log.dir"):
        d.define(name, Type.STRING, None, None, "Accepted for Kafka compatibility; ignored.")


BROKER_CONFIG = ConfigDef("broker")
_network_settings(BROKER_CONFIG)
_log_settings(BROKER_CONFIG)
_coordinator_settings(BROKER_CONFIG)
_kraft_compat_settings(BROKER_CONFIG)


class BrokerConfig(Config):
    """Validated broker settings; ``cfg["num.io.threads"]``, ``cfg.num_io_threads``."""

    DEFINITION = BROKER_CONFIG

    def _post_process(self) -> None:
        for name in ("listeners", "advertised.listeners"):
            if self[name] is not None:
                parse_listener(name, self[name])
        dirs = [self[n] for n in ("log.dirs", "log.dir") if self[n] is not None]
        for value in dirs:
            if len([d for d in value.split(",") if d.strip()]) > 1:
                raise ConfigError("log.dirs", f"{value!r} names several directories; "
                                  "this broker stores everything in one")

    @property
    def data_dir(self) -> str | None:
        """The directory named by log.dirs (or log.dir), if any."""
        value = self["log.dirs"] or self["log.dir"]
        return value.strip() if value else None

    @property
    def explicit(self) -> dict[str, Any]:
        """Only the settings the operator gave (for DescribeConfigs' STATIC_BROKER_CONFIG)."""
        return {name: self[name] for name in self.originals}


@dataclass(frozen=True, slots=True)
class Listener:
    name: str  # listener (security protocol) name, always PLAINTEXT here
    host: str  # "" = all interfaces
    port: int


_LISTENER_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)://(\[[^\]]*\]|[^:/\[\]]*):(\d+)$")


def parse_listener(setting: str, value: str) -> Listener:
    """``PLAINTEXT://host:port`` -> Listener; ConfigError for anything else."""
    parts = [p.strip() for p in value.split(",") if p.strip()]
    if len(parts) != 1:
        raise ConfigError(setting, f"{value!r}: give exactly one listener, PLAINTEXT://host:port")
    match = _LISTENER_RE.match(parts[0])
    if match is None:
        raise ConfigError(setting, f"{value!r} is not of the form PLAINTEXT://host:port")
    name, host, port_text = match.groups()
    if name.upper() != "PLAINTEXT":
        raise ConfigError(setting, f"listener {name!r} is not supported: only PLAINTEXT is served")
    port = int(port_text)
    if port > 65535:
        raise ConfigError(setting, f"port {port} is out of range (0-65535)")
    if host.startswith("["):
        host = host[1:-1]
    return Listener("PLAINTEXT", host, port)


def bind_listener(config: Mapping[str, Any], host: str | None, port: int | None,
                  default_host: str = "127.0.0.1") -> Listener:
    """Where to listen: ``listeners`` (else ``default_host`` on an ephemeral port), with
    ``host``/``port`` given to the Broker taking precedence."""
    if config["listeners"] is not None:
        listener = parse_listener("listeners", config["listeners"])
    else:
        listener = Listener("PLAINTEXT", default_host, 0)
    if port is not None and not 0 <= port <= 65535:
        raise ConfigError("port", f"{port} is out of range (0-65535)")
    return Listener("PLAINTEXT", listener.host if host is None else host,
                    listener.port if port is None else port)


def advertised_listener(config: Mapping[str, Any], bound_host: str, bound_port: int) -> Listener:
    """The address Metadata advertises: advertised.listeners, else the bound address.

    A wildcard host becomes this machine's host name; port 0 becomes the bound port."""
    value = config.get("advertised.listeners")
    if value:
        listener = parse_listener("advertised.listeners", value)
        host, port = listener.host, listener.port or bound_port
    else:
        host, port = bound_host, bound_port
    if host in _WILDCARD_HOSTS:
        host = socket.gethostname()
    return Listener("PLAINTEXT", host, port)


# --- Java properties files ----------------------------------------------------------------

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 == len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2:i + 6]):
            out.append(chr(int(text[i + 2:i + 6], 16)))
            i += 6
        else:
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
    return "".join(out)


def _split_key_value(line: str) -> tuple[str, str]:
    # The key ends at the first unescaped '=', ':' or whitespace (java.util.Properties.load).
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=: \t\f":
            break
        i += 1
    key = line[:i]
    rest = line[i:].lstrip(" \t\f")
    if rest[:1] in ("=", ":") and (i == len(line) or line[i] in " \t\f=:"):
        rest = rest[1:].lstrip(" \t\f")
    return _unescape(key), _unescape(rest)


def parse_properties(text: str) -> dict[str, str]:
    """Java ``.properties`` text -> dict: ``key=value``, ``key: value`` or ``key value``;
    ``#``/``!`` comments; a trailing backslash continues the line; ``\\uXXXX`` escapes."""
    props: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(" \t\f")
        i += 1
        if not line or line[0] in "#!":
            continue
        # An odd number of trailing backslashes continues onto the next line.
        while (len(line) - len(line.rstrip("\\"))) % 2 == 1 and i <= len(lines):
            line = line[:-1] + (lines[i].lstrip(" \t\f") if i < len(lines) else "")
            i += 1
        key, value = _split_key_value(line)
        props[key] = value
    return props


def load_properties(path: str | Path) -> dict[str, str]:
    """Read a Java properties file (``server.properties``); ConfigError if it cannot be read."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError("--config-file", f"cannot read {str(path)!r}: {exc.strerror}") from None
    return parse_properties(text)
