"""The admin client's settings: Kafka's names and defaults (Java's AdminClientConfig).

``AdminConfig(config_dict, **kwargs)`` parses and validates them (see :mod:`samsa.config`).
The admin client has only the settings every client shares
(:mod:`samsa.net.client_config`) plus ``retries`` and ``default.api.timeout.ms``.  After
parsing, as Java's ``KafkaAdminClient`` does:

* ``bootstrap.servers`` is required.
* ``default.api.timeout.ms`` must be >= ``request.timeout.ms``: a ConfigError if it was set
  explicitly, otherwise it is raised to ``request.timeout.ms``.
* the checks every client runs (:class:`samsa.net.client_config.ClientConfig`), among them
  ``reconnect.backoff.max.ms`` following ``reconnect.backoff.ms`` when only the latter is set.
* ``client.id`` defaults to ``adminclient-N``.
"""

from __future__ import annotations

import itertools
from typing import Any

from samsa.errors import ConfigError
from samsa.net.client_config import (
    DEFAULT_API_TIMEOUT_MS,
    RETRIES,
    ClientConfig,
    client_config_def,
)

__all__ = ["ADMIN_CONFIG", "AdminConfig"]

_client_ids = itertools.count(1)

# Java's AdminClientConfig closes idle connections sooner than the producer and consumer.
ADMIN_COMMON_DEFAULTS: dict[str, Any] = {"connections.max.idle.ms": 5 * 60_000}
ADMIN_CONFIG = client_config_def("admin client", [RETRIES, DEFAULT_API_TIMEOUT_MS],
                                 defaults=ADMIN_COMMON_DEFAULTS)


class AdminConfig(ClientConfig):
    """Parsed admin client settings; read them as ``cfg["request.timeout.ms"]``."""

    DEFINITION = ADMIN_CONFIG

    def _post_process_client(self) -> None:
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
        if not self["client.id"]:
            self._set("client.id", f"adminclient-{next(_client_ids)}")
