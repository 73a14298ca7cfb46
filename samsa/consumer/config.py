"""The consumer's settings: Kafka's names and defaults (4.x Java consumer).

``ConsumerConfig(config_dict, **kwargs)`` parses and validates (see :mod:`samsa.config`);
read values as ``cfg["fetch.min.bytes"]`` or ``cfg.fetch_min_bytes``.  Cross-checks, as Java's
``ConsumerConfig``/``KafkaConsumer``:

* ``client.id`` defaults to ``consumer-<group>-N`` (``consumer-N`` without a group).
* ``enable.auto.commit`` is forced off without a ``group.id`` (an explicit ``true`` is an error).
* ``heartbeat.interval.ms`` must be below ``session.timeout.ms``.
* the checks every client runs (:class:`samsa.net.client_config.ClientConfig`), among them
  ``reconnect.backoff.max.ms`` following ``reconnect.backoff.ms`` when only the latter is set.
* ``partition.assignment.strategy`` names: ``range``, ``roundrobin``, ``cooperative-sticky``
  (Java class names are accepted too).
"""

from __future__ import annotations

import itertools

from samsa.config import ConfigEntry, Type, ValidChoice, at_least
from samsa.consumer.deserializers import DESERIALIZER_ALIASES
from samsa.errors import ConfigError
from samsa.net.client_config import (
    DEFAULT_API_TIMEOUT_MS,
    ClientConfig,
    client_config_def,
)
from samsa.records.compression import DEFAULT_MAX_DECOMPRESSED_BYTES

__all__ = ["ASSIGNOR_NAMES", "CONSUMER_CONFIG", "ConsumerConfig"]

_client_ids = itertools.count(1)

ASSIGNOR_NAMES: dict[str, str] = {
    "range": "range",
    "roundrobin": "roundrobin",
    "cooperative-sticky": "cooperative-sticky",
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}


def _entries() -> list[ConfigEntry]:
    E = ConfigEntry
    pos = at_least(0)
    return [
        E("client.rack", Type.STRING, "", None, "Rack of this consumer (sent in subscriptions)."),
        E("group.id", Type.STRING, None, None, "Consumer group; needed for subscribe() and commits."),
        E("group.instance.id", Type.STRING, None, None, "Static membership id (KIP-345)."),
        E("group.protocol", Type.STRING, "classic", ValidChoice(("classic",), case_insensitive=True),
          "Only the classic group protocol is implemented."),
        E("auto.offset.reset", Type.STRING, "latest",
          ValidChoice(("latest", "earliest", "none"), case_insensitive=True),
          "Where to start without a valid position: latest, earliest, or none (raise)."),
        E("enable.auto.commit", Type.BOOLEAN, True, None, "Commit positions in the background."),
        E("auto.commit.interval.ms", Type.INT, 5000, pos, "How often to auto-commit."),
        E("fetch.min.bytes", Type.INT, 1, pos, "Least data the broker should return for a fetch."),
        E("fetch.max.bytes", Type.INT, 52428800, pos, "Most data returned by one fetch."),
        E("fetch.max.wait.ms", Type.INT, 500, pos, "How long the broker may wait for fetch.min.bytes."),
        E("max.partition.fetch.bytes", Type.INT, 1048576, pos, "Most data per partition in one fetch."),
        E("max.poll.records", Type.INT, 500, at_least(1), "Most records one poll() returns."),
        E("max.poll.interval.ms", Type.INT, 300000, at_least(1),
          "Longest allowed gap between poll() calls before the consumer leaves its group."),
        E("session.timeout.ms", Type.INT, 45000, pos, "Group session timeout."),
        E("heartbeat.interval.ms", Type.INT, 3000, pos, "Time between group heartbeats."),
        E("isolation.level", Type.STRING, "read_uncommitted",
          ValidChoice(("read_uncommitted", "read_committed"), case_insensitive=True),
          "read_committed hides aborted transactional records."),
        E("check.crcs", Type.BOOLEAN, True, None, "Verify the CRC of every fetched batch."),
        # Not Java's (its consumer streams records out of the decompressor); samsa decompresses
        # a batch at once, so its size is bounded (samsa.records.compression).  Four times the
        # samsa broker's default: a Kafka broker has no such limit on what it stores.
        E("samsa.decompressed.batch.max.bytes", Type.INT, 4 * DEFAULT_MAX_DECOMPRESSED_BYTES,
          at_least(1),
          "Largest size a fetched compressed batch may decompress to; a bigger one raises "
          "CorruptRecordError from poll() (seek past it to go on)."),
        E("partition.assignment.strategy", Type.LIST, ["range", "cooperative-sticky"], None,
          "Assignors in preference order: range, roundrobin, cooperative-sticky."),
        E("key.deserializer", Type.CLASS, None, None, "Turns key bytes into objects (default: bytes).",
          aliases=DESERIALIZER_ALIASES),
        E("value.deserializer", Type.CLASS, None, None,
          "Turns value bytes into objects (default: bytes).", aliases=DESERIALIZER_ALIASES),
        E("exclude.internal.topics", Type.BOOLEAN, True, None,
          "Pattern subscriptions skip internal topics."),
        E("allow.auto.create.topics", Type.BOOLEAN, True, None,
          "Ask the broker to create subscribed topics that do not exist."),
        DEFAULT_API_TIMEOUT_MS,
        E("interceptor.classes", Type.LIST, [], None, "Consumer interceptors (not implemented).",
          item_type=Type.CLASS),
    ]


CONSUMER_CONFIG = client_config_def("consumer", _entries())  # Kafka's common defaults


class ConsumerConfig(ClientConfig):
    DEFINITION = CONSUMER_CONFIG

    def _post_process_client(self) -> None:
        group = self["group.id"]
        if group == "":
            self._set("group.id", None)
            group = None
        if not self["client.id"]:
            n = next(_client_ids)
            self._set("client.id", f"consumer-{group}-{n}" if group else f"consumer-{n}")
        if group is None and self["enable.auto.commit"]:
            if self.is_set("enable.auto.commit"):
                raise ConfigError("enable.auto.commit",
                                  "true needs a group.id; set group.id or turn auto commit off")
            self._set("enable.auto.commit", False)
        if self["heartbeat.interval.ms"] >= self["session.timeout.ms"]:
            raise ConfigError("heartbeat.interval.ms",
                              f"{self['heartbeat.interval.ms']} must be below session.timeout.ms "
                              f"({self['session.timeout.ms']})")
        strategies: list[str] = []
        for item in self["partition.assignment.strategy"]:
            name = item if isinstance(item, str) else getattr(item, "name", None)
            canonical = ASSIGNOR_NAMES.get(str(name).strip()) if name else None
            if canonical is None:
                raise ConfigError("partition.assignment.strategy",
                                  f"{item!r} is not one of range, roundrobin, cooperative-sticky")
            strategies.append(canonical)
        if not strategies:
            raise ConfigError("partition.assignment.strategy", "needs at least one assignor")
        self._set("partition.assignment.strategy", strategies)
        self._set("auto.offset.reset", self["auto.offset.reset"].lower())
        self._set("isolation.level", self["isolation.level"].lower())


