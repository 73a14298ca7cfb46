"""The producer's settings: Kafka's names and defaults (4.x), with Java's cross-checks.

``ProducerConfig(config_dict, **kwargs)`` parses and validates (see :mod:`samsa.config` for
names, string conversion and errors); read values as ``cfg["linger.ms"]`` or
``cfg.linger_ms``.  After parsing, as Java's ``ProducerConfig`` and ``KafkaProducer`` do:

* ``acks`` becomes an int: ``"all"`` -> -1, ``"1"`` -> 1, ``"0"`` -> 0.
* Idempotence (on by default) needs ``acks=all``, ``retries > 0`` and at most 5 in-flight
  requests per connection.  If ``enable.idempotence=true`` was set explicitly, a conflict is a
  ConfigError; if it was left at its default, idempotence is silently turned off.
* ``delivery.timeout.ms`` must be >= ``linger.ms + request.timeout.ms``: a ConfigError if it
  was set explicitly, otherwise it is raised to that sum.
* the checks every client runs (:class:`samsa.net.client_config.ClientConfig`).
* ``client.id`` defaults to ``producer-N``.
* ``transactional.id`` makes the producer transactional and implies idempotence: with
  ``enable.idempotence=false``, or a setting idempotence cannot work with, it is a ConfigError.
* key/value serializers, ``partitioner.class`` and ``interceptor.classes`` accept objects,
  classes or names (``"str"``, ``"json"``, Java class names, ``"package.module:Name"``).
"""

from __future__ import annotations

import itertools
import logging
from typing import Any

from samsa.config import (
    ConfigEntry,
    NonEmptyString,
    Range,
    Type,
    ValidChoice,
    at_least,
)
from samsa.errors import ConfigError
from samsa.net.client_config import RETRIES, ClientConfig, client_config_def
from samsa.producer.partitioner import RoundRobinPartitioner
from samsa.producer.serializers import SERIALIZER_ALIASES
from samsa.records.compression import LEVEL_RANGES, default_level

__all__ = ["COMPRESSION_LEVELS", "PRODUCER_CONFIG", "ProducerConfig"]

log = logging.getLogger(__name__)

_INT_MAX = 2**31 - 1
MAX_IN_FLIGHT_REQUESTS_FOR_IDEMPOTENCE = 5

# codec -> (min, max, default) for compression.<codec>.level (gzip's default -1 is zlib's 6).
COMPRESSION_LEVELS: dict[str, tuple[int, int, int]] = {
    codec.name.lower(): (low, high, default_level(codec) or 0)
    for codec, (low, high) in LEVEL_RANGES.items()
}

PARTITIONER_ALIASES: dict[str, Any] = {
    "round_robin": RoundRobinPartitioner,
    "roundrobin": RoundRobinPartitioner,
    "RoundRobinPartitioner": RoundRobinPartitioner,
    "org.apache.kafka.clients.producer.RoundRobinPartitioner": RoundRobinPartitioner,
}

_client_ids = itertools.count(1)


def _entries() -> list[ConfigEntry]:
    E = ConfigEntry
    return [
        E(
            "acks",
            Type.STRING,
            "all",
            ValidChoice(("all", "-1", "0", "1"), case_insensitive=True),
            "Replicas that must acknowledge a write: all (-1), 1 (leader only) or 0 (no response).",
        ),
        E(
            "enable.idempotence",
            Type.BOOLEAN,
            True,
            None,
            "Exactly one copy of each record per partition, in order (needs acks=all, retries>0, in-flight<=5).",
        ),
        E(
            "linger.ms",
            Type.LONG,
            5,
            at_least(0),
            "How long to wait for more records before sending a batch.",
        ),
        E(
            "batch.size",
            Type.INT,
            16384,
            at_least(0),
            "Target size in bytes of one partition's batch.",
        ),
        E(
            "buffer.memory",
            Type.LONG,
            33554432,
            at_least(0),
            "Bytes of memory for records waiting to be sent.",
        ),
        E(
            "max.block.ms",
            Type.LONG,
            60000,
            at_least(0),
            "How long send() may block for metadata or buffer memory.",
        ),
        E(
            "max.request.size",
            Type.INT,
            1048576,
            at_least(0),
            "Largest produce request (and record) in bytes.",
        ),
        E(
            "compression.type",
            Type.STRING,
            "none",
            ValidChoice(
                ("none", "gzip", "snappy", "lz4", "zstd"), case_insensitive=True
            ),
            "Codec for batches.",
        ),
        *(
            E(
                f"compression.{codec}.level",
                Type.INT,
                default,
                Range(low, high, (default,) if default < low else ()),
                f"Compression level for {codec}.",
            )
            for codec, (low, high, default) in COMPRESSION_LEVELS.items()
        ),
        RETRIES,
        E(
            "delivery.timeout.ms",
            Type.INT,
            120000,
            at_least(0),
            "Upper bound on the time to report success or failure after send() returns.",
        ),
        E(
            "max.in.flight.requests.per.connection",
            Type.INT,
            5,
            at_least(1),
            "Unacknowledged requests per broker connection.",
        ),
        E(
            "metadata.max.idle.ms",
            Type.LONG,
            300000,
            at_least(5000),
            "Forget metadata of topics not produced to for this long.",
        ),
        E(
            "partitioner.class",
            Type.CLASS,
            None,
            None,
            "Custom partitioner (partition(topic, key_bytes, value_bytes, cluster)); default: built-in.",
            aliases=PARTITIONER_ALIASES,
        ),
        E(
            "partitioner.ignore.keys",
            Type.BOOLEAN,
            False,
            None,
            "Place keyed records like keyless ones (sticky) instead of by key hash.",
        ),
        E(
            "partitioner.adaptive.partitioning.enable",
            Type.BOOLEAN,
            True,
            None,
            "Send more keyless records to partitions on faster brokers.",
        ),
        E(
            "partitioner.availability.timeout.ms",
            Type.LONG,
            0,
            at_least(0),
            "Skip partitions whose broker could not take data for this long (0: off).",
        ),
        E(
            "interceptor.classes",
            Type.LIST,
            [],
            None,
            "Producer interceptors, in order.",
            item_type=Type.CLASS,
        ),
        E(
            "key.serializer",
            Type.CLASS,
            None,
            None,
            "Turns keys into bytes (default: bytes as they are).",
            aliases=SERIALIZER_ALIASES,
        ),
        E(
            "value.serializer",
            Type.CLASS,
            None,
            None,
            "Turns values into bytes (default: bytes as they are).",
            aliases=SERIALIZER_ALIASES,
        ),
        E(
            "transactional.id",
            Type.STRING,
            None,
            NonEmptyString(),
            "Makes the producer transactional (init_transactions, begin/commit/abort_transaction); "
            "unique per producer instance, kept across restarts to fence a zombie.",
        ),
        E(
            "transaction.timeout.ms",
            Type.INT,
            60000,
            at_least(1),
            "How long the coordinator lets a transaction stay open before aborting it "
            "(at most the broker's transaction.max.timeout.ms).",
        ),
    ]


# Java's ProducerConfig reads replies with a smaller socket buffer than the other clients.
PRODUCER_COMMON_DEFAULTS: dict[str, Any] = {"receive.buffer.bytes": 32 * 1024}
PRODUCER_CONFIG = client_config_def("producer", _entries(), defaults=PRODUCER_COMMON_DEFAULTS)


class ProducerConfig(ClientConfig):
    """Parsed producer settings; see the module docstring for the cross-checks."""

    DEFINITION = PRODUCER_CONFIG

    def _post_process_client(self) -> None:
        if self["transactional.id"] is not None and self.is_set("enable.idempotence") and not self[
                "enable.idempotence"]:
            raise ConfigError(
                "enable.idempotence",
                "a transactional producer (transactional.id is set) needs idempotence; remove "
                "enable.idempotence=false or the transactional.id",
            )
        self._set("acks", -1 if self["acks"] == "all" else int(self["acks"]))
        self._idempotence()
        if not self.is_set("client.id"):
            self._set("client.id", f"producer-{next(_client_ids)}")
        self._delivery_timeout()

    def _idempotence(self) -> None:
        # transactional.id asks for idempotence as explicitly as enable.idempotence=true (Java's
        # ProducerConfig: "Cannot set a transactional.id without also enabling idempotence").
        explicit = self.is_set("enable.idempotence") or self["transactional.id"] is not None
        if self["enable.idempotence"]:
            conflicts = []
            if self["retries"] == 0:
                conflicts.append(("retries", "retries must be greater than 0"))
            if self["acks"] != -1:
                conflicts.append(("acks", f"acks must be all (-1), not {self['acks']}"))
            in_flight = self["max.in.flight.requests.per.connection"]
            if in_flight > MAX_IN_FLIGHT_REQUESTS_FOR_IDEMPOTENCE:
                conflicts.append(
                    (
                        "max.in.flight.requests.per.connection",
                        (
                            f"max.in.flight.requests.per.connection must be at most "
                            f"{MAX_IN_FLIGHT_REQUESTS_FOR_IDEMPOTENCE}, not {in_flight}"
                        ),
                    )
                )
            if conflicts:
                if explicit:
                    setting, problem = conflicts[0]
                    why = ("transactional.id was set (transactions need idempotence)"
                           if self["transactional.id"] is not None else "enable.idempotence=true was set")
                    raise ConfigError(
                        setting,
                        f"{why}, and the idempotent producer needs: {problem}; "
                        "change it or set enable.idempotence=false",
                    )
                log.info(
                    "Idempotence disabled because %s",
                    "; ".join(problem for _, problem in conflicts),
                )
                self._set("enable.idempotence", False)

    def _delivery_timeout(self) -> None:
        linger_and_request = min(
            self["linger.ms"] + self["request.timeout.ms"], _INT_MAX
        )
        if self["delivery.timeout.ms"] < linger_and_request:
            if self.is_set("delivery.timeout.ms"):
                raise ConfigError(
                    "delivery.timeout.ms",
                    f"value {self['delivery.timeout.ms']} must be at least linger.ms + request.timeout.ms "
                    f"= {self['linger.ms']} + {self['request.timeout.ms']} = {linger_and_request}",
                )
            log.warning(
                "delivery.timeout.ms should be >= linger.ms + request.timeout.ms; setting it to %d",
                linger_and_request,
            )
            self._set("delivery.timeout.ms", linger_and_request)

    @property
    def effective_batch_size(self) -> int:
        """batch.size, but at least 1 (batch.size=0 means one record per batch, as Java)."""
        return max(1, self["batch.size"])

    def compression_level(self) -> int | None:
        """The level for the configured codec (None for none/snappy)."""
        codec = self["compression.type"]
        if codec in COMPRESSION_LEVELS:
            return int(self[f"compression.{codec}.level"])
        return None
