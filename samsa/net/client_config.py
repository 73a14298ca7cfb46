"""The settings every client shares, declared once (Java's ``CommonClientConfigs``).

The producer, consumer and admin client build their :class:`~samsa.config.ConfigDef` with
:func:`client_config_def`: :data:`COMMON_CLIENT_SETTINGS` first, then the client's own
settings.  Where Kafka's clients give a common setting different defaults (Java's
``ProducerConfig`` takes a 32 KiB receive buffer, ``AdminClientConfig`` closes idle
connections after 5 minutes), the client says so in its ``defaults`` argument, so each
difference is written in one visible place.  :data:`RETRIES` and :data:`DEFAULT_API_TIMEOUT_MS`
are common to two of the three clients, as in Java.

:class:`ClientConfig` runs the cross-checks Java runs for every client
(``CommonClientConfigs.postProcessReconnectBackoffConfigs`` and
``warnDisablingExponentialBackoff``).  The security settings (``security.protocol`` today;
SSL and SASL next) belong here too, since every client connects the same way.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from samsa.config import (
    Config,
    ConfigDef,
    ConfigEntry,
    Type,
    ValidChoice,
    at_least,
    between,
)

__all__ = [
    "BOOTSTRAP_SERVERS",
    "CLIENT_DNS_LOOKUP",
    "CLIENT_ID",
    "COMMON_CLIENT_SETTINGS",
    "CONNECTIONS_MAX_IDLE_MS",
    "DEFAULT_API_TIMEOUT_MS",
    "METADATA_MAX_AGE_MS",
    "RECEIVE_BUFFER_BYTES",
    "RECONNECT_BACKOFF_MAX_MS",
    "RECONNECT_BACKOFF_MS",
    "REQUEST_TIMEOUT_MS",
    "RETRIES",
    "RETRY_BACKOFF_MAX_MS",
    "RETRY_BACKOFF_MS",
    "SECURITY_PROTOCOL",
    "SEND_BUFFER_BYTES",
    "SOCKET_CONNECTION_SETUP_TIMEOUT_MAX_MS",
    "SOCKET_CONNECTION_SETUP_TIMEOUT_MS",
    "ClientConfig",
    "client_config_def",
]

log = logging.getLogger(__name__)

_INT_MAX = 2**31 - 1
E = ConfigEntry

# -- connecting ---------------------------------------------------------------------------------
BOOTSTRAP_SERVERS = E("bootstrap.servers", Type.LIST, [], None,
                      "host:port pairs used to discover the cluster.")
CLIENT_ID = E("client.id", Type.STRING, "", None,
              "Name sent to brokers with every request (default producer-N, "
              "consumer-<group>-N or adminclient-N).")
CLIENT_DNS_LOOKUP = E("client.dns.lookup", Type.STRING, "use_all_dns_ips",
                      ValidChoice(("use_all_dns_ips", "resolve_canonical_bootstrap_servers_only")),
                      "How to use the addresses a host name resolves to.")
SOCKET_CONNECTION_SETUP_TIMEOUT_MS = E(
    "socket.connection.setup.timeout.ms", Type.LONG, 10_000, None,
    "First timeout for establishing a connection.")
SOCKET_CONNECTION_SETUP_TIMEOUT_MAX_MS = E(
    "socket.connection.setup.timeout.max.ms", Type.LONG, 30_000, None,
    "Upper bound of the connection setup timeout as it grows after failures.")
RECONNECT_BACKOFF_MS = E("reconnect.backoff.ms", Type.LONG, 50, at_least(0),
                         "First wait before reconnecting to a broker; doubles per failure "
                         "up to reconnect.backoff.max.ms.")
RECONNECT_BACKOFF_MAX_MS = E("reconnect.backoff.max.ms", Type.LONG, 1000, at_least(0),
                             "Upper bound of the reconnect backoff.")
CONNECTIONS_MAX_IDLE_MS = E("connections.max.idle.ms", Type.LONG, 9 * 60_000, None,
                            "Close connections idle for this long.")
SEND_BUFFER_BYTES = E("send.buffer.bytes", Type.INT, 128 * 1024, at_least(-1),
                      "Socket SO_SNDBUF (-1: the OS default).")
RECEIVE_BUFFER_BYTES = E("receive.buffer.bytes", Type.INT, 64 * 1024, at_least(-1),
                         "Socket SO_RCVBUF (-1: the OS default).")

# -- requests and metadata ----------------------------------------------------------------------
REQUEST_TIMEOUT_MS = E("request.timeout.ms", Type.INT, 30_000, at_least(0),
                       "How long to wait for a response to a request.")
RETRY_BACKOFF_MS = E("retry.backoff.ms", Type.LONG, 100, at_least(0),
                     "First wait before retrying a failed request; doubles per attempt up to "
                     "retry.backoff.max.ms.")
RETRY_BACKOFF_MAX_MS = E("retry.backoff.max.ms", Type.LONG, 1000, at_least(0),
                         "Upper bound of the exponential retry backoff.")
METADATA_MAX_AGE_MS = E("metadata.max.age.ms", Type.LONG, 5 * 60_000, at_least(0),
                        "Refresh metadata at least this often.")

# -- security (the SSL and SASL settings join these) ---------------------------------------------
SECURITY_PROTOCOL = E("security.protocol", Type.STRING, "PLAINTEXT",
                      ValidChoice(("PLAINTEXT",), case_insensitive=True),
                      "Only PLAINTEXT is supported.")

COMMON_CLIENT_SETTINGS: tuple[ConfigEntry, ...] = (
    BOOTSTRAP_SERVERS,
    CLIENT_ID,
    CLIENT_DNS_LOOKUP,
    SOCKET_CONNECTION_SETUP_TIMEOUT_MS,
    SOCKET_CONNECTION_SETUP_TIMEOUT_MAX_MS,
    RECONNECT_BACKOFF_MS,
    RECONNECT_BACKOFF_MAX_MS,
    CONNECTIONS_MAX_IDLE_MS,
    SEND_BUFFER_BYTES,
    RECEIVE_BUFFER_BYTES,
    REQUEST_TIMEOUT_MS,
    RETRY_BACKOFF_MS,
    RETRY_BACKOFF_MAX_MS,
    METADATA_MAX_AGE_MS,
    SECURITY_PROTOCOL,
)
"""Settings of every client: each client's ConfigDef holds these (defaults possibly changed)."""

# Common to two clients, as in Java: the producer and admin client retry (the consumer does
# not), the consumer and admin client bound blocking calls (the producer has max.block.ms).
RETRIES = E("retries", Type.INT, _INT_MAX, between(0, _INT_MAX),
            "How often a request failing with a retriable error is retried (the producer's "
            "delivery.timeout.ms or the call's time limit bounds the total time).")
DEFAULT_API_TIMEOUT_MS = E("default.api.timeout.ms", Type.INT, 60_000, at_least(0),
                           "Time limit of a blocking call (retries included) that gives none.")


def client_config_def(owner: str, own: Iterable[ConfigEntry], *,
                      defaults: Mapping[str, Any] | None = None) -> ConfigDef:
    """``owner``'s settings: the common ones, with ``defaults`` (name -> this client's Kafka
    default where it differs from the common one), then ``own``."""
    changed = dict(defaults or {})
    unknown = set(changed) - {entry.name for entry in COMMON_CLIENT_SETTINGS}
    if unknown:
        raise ValueError(f"not common client settings: {sorted(unknown)}")
    definition = ConfigDef(owner)
    for entry in COMMON_CLIENT_SETTINGS:
        if entry.name in changed:
            entry = dataclasses.replace(entry, default=changed[entry.name])
        definition.add(entry)
    for entry in own:
        definition.add(entry)
    return definition


class ClientConfig(Config):
    """Parsed client settings with the cross-checks every Kafka client runs; each client's
    own checks go in :meth:`_post_process_client`."""

    def _post_process(self) -> None:
        # CommonClientConfigs.postProcessReconnectBackoffConfigs: reconnect.backoff.max.ms
        # follows reconnect.backoff.ms when only the latter is set.
        if self.is_set("reconnect.backoff.ms") and not self.is_set("reconnect.backoff.max.ms"):
            self._set("reconnect.backoff.max.ms", self["reconnect.backoff.ms"])
        # CommonClientConfigs.warnDisablingExponentialBackoff.
        for first, bound, what in (("retry.backoff.ms", "retry.backoff.max.ms", "backoff"),
                                   ("socket.connection.setup.timeout.ms",
                                    "socket.connection.setup.timeout.max.ms",
                                    "connection setup timeout")):
            if self[first] > self[bound]:
                log.warning("%s=%d is greater than %s=%d; a static %s of %d ms applies",
                            first, self[first], bound, self[bound], what, self[bound])
        self._post_process_client()

    def _post_process_client(self) -> None:
        """The client's own cross-checks (Java's ``postProcessParsedConfig``)."""
