"""The admin client's settings: Kafka's names and defaults (Java's AdminClientConfig).

``AdminConfig(config_dict, **kwargs)`` parses and validates them (see :mod:`samsa.config`).
After parsing, as Java's ``KafkaAdminClient`` does:

* ``default.api.timeout.ms`` must be >= ``request.timeout.ms``: a ConfigError if it was set
  explicitly, otherwise it is raised to ``request.timeout.ms``.
* ``reconnect.backoff.max.ms`` follows ``reconnect.backoff.ms`` when only the latter is set.
* ``client.id`` defaults to ``adminclient-N``.
"""

from __future__ import annotations

import itertools

from samsa.config import (
    Config,
    ConfigDef,
    ConfigEntry,
    Type,
    ValidChoice,
    at_least,
    between,
)

__all__ = ["ADMIN_CONFIG", "AdminConfig"]

_INT_MAX = 2**31 - 1
_client_ids = itertools.count(1)


def _entries() -> list[ConfigEntry]:
    E = ConfigEntry
    return [
        E("bootstrap.servers", Type.LIST, [], None,
          "host:port pairs used to discover the cluster (required)."),
        E("client.id", Type.STRING, "", None,
          "Name sent to brokers with every request (default adminclient-N)."),
        E("request.timeout.ms", Type.INT, 30000, at_least(0),
          "How long to wait for one response before retrying or failing."),
        E("default.api.timeout.ms", Type.INT, 60000, at_least(0),
          "Time limit of an admin operation (retries included) when the call gives none."),
        E("retries", Type.INT, _INT_MAX, between(0, _INT_MAX),
          "How many times a call is retried after a retriable error, within its time limit."),
        E("retry.backoff.ms", Type.LONG, 100, at_least(0),
          "Wait before the first retry; doubles per attempt up to retry.backoff.max.ms."),
        E("retry.backoff.max.ms", Type.LONG, 1000, at_least(0),
          "Longest wait between retries."),
        E("reconnect.backoff.ms", Type.LONG, 50, at_least(0),
          "Wait before reconnecting to a broker; doubles up to reconnect.backoff.max.ms."),
        E("reconnect.backoff.max.ms", Type.LONG, 1000, at_least(0),
          "Longest wait before reconnecting."),
        E("socket.connection.setup.timeout.ms", Type.LONG, 10000, at_least(0),
          "How long a connect may take before it is abandoned."),
        E("socket.connection.setup.timeout.max.ms", Type.LONG, 30000, at_least(0),
          "Upper bound of the connect timeout as it grows after failures."),
        E("connections.max.idle.ms", Type.LONG, 300000, None,
          "Close connections idle this long."),
        E("metadata.max.age.ms", Type.LONG, 300000, at_least(0),
          "Refresh cluster metadata at least this often."),
        E("send.buffer.bytes", Type.INT, 131072, at_least(-1),
          "SO_SNDBUF (-1: the OS default)."),
        E("receive.buffer.bytes", Type.INT, 65536, at_least(-1),
          "SO_RCVBUF (-1: the OS default)."),
        E("client.dns.lookup", Type.STRING, "use_all_dns_ips",
          ValidChoice(("use_all_dns_ips", "resolve_canonical_bootstrap_servers_only")),
          "How to use the addresses a host name resolves to."),
        E("security.protocol", Type.STRING, "PLAINTEXT", ValidChoice(("PLAINTEXT",), True),
          "Only PLAINTEXT is supported."),
    ]


ADMIN_CONFIG = ConfigDef("admin client", _entries())


class AdminConfig(Config):
    """Parsed admin client settings; read them as ``cfg["request.timeout.ms"]``."""

    DEFINITION = ADMIN_CONFIG

    def _post_process(self) -> None:
        from samsa.errors import ConfigError

        if not self["bootstrap.servers"]:
            raise ConfigError("bootstrap.servers",
                              "is required: give 'host:port[,host:port...]' of a broker")
        request_timeout = self["request.timeout.ms"]
        if self["default.api.timeout.ms"] < request_timeout:
            if self.is_set("default.api.timeout.ms"):
                raise ConfigError(
                    "default.api.timeout.ms",
                    f"{self['default.api.timeout.ms']} must be at least request.timeout.ms "
                    f"({request_timeout}): an operation must outlast one request")
            self._set("default.api.timeout.ms", request_timeout)
        if self.is_set("reconnect.backoff.ms") and not self.is_set("reconnect.backoff.max.ms"):
            self._set("reconnect.backoff.max.ms", self["reconnect.backoff.ms"])
        if not self["client.id"]:
            self._set("client.id", f"adminclient-{next(_client_ids)}")
