"""Dynamic broker configs: the broker settings an admin may change while the broker runs.

Kafka keeps two layers above the static (server.properties) settings: a cluster-wide default
(resource name "") and a per-broker layer (resource name = the node id); the per-broker value
wins (DynamicBrokerConfig).  Only the settings Kafka marks dynamic *and* this single node acts
on are accepted: the broker synonyms of topic configs (Kafka's DynamicLogConfig, the first
synonym of each topic config in ServerTopicConfigSynonyms) and ``producer.id.expiration.ms``
(DynamicProducerStateManagerConfig).  A change applies at once to every open log that does
not override the setting.

Kafka stores these in its metadata log; samsa keeps them in
``<data_dir>/dynamic-broker-configs.json`` (written atomically), reloaded on start.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any

from samsa.broker.apis.topic_configs import validate_topic_config_values
from samsa.broker.config import BROKER_CONFIG
from samsa.broker.log import LogManager
from samsa.broker.log.config import TOPIC_SETTINGS
from samsa.broker.log.files import atomic_write
from samsa.errors import ConfigError, InvalidConfigError, InvalidRequestError

DYNAMIC_CONFIG_FILE = "dynamic-broker-configs.json"
DEFAULT_LAYER = ""  # the cluster-wide default (kafka-configs.sh --entity-default)

# Broker setting -> the topic config it supplies (its type and checks are the topic config's).
_LOG_SYNONYMS: dict[str, str] = {s.synonym: s.name for s in TOPIC_SETTINGS.values()}
# Kafka lists log.roll.ms/log.retention.ms (not the .hours forms) as dynamic; same here.
DYNAMIC_BROKER_CONFIGS: frozenset[str] = frozenset({*_LOG_SYNONYMS, "producer.id.expiration.ms"})
# Broker settings Kafka can change dynamically that this node has no use for (listeners, SSL,
# thread pools, quotas ...) are refused like static ones: nothing here would apply them.


def check_broker_config(name: str, value: str) -> None:
    """Raise InvalidRequestError (Kafka's answer for broker configs, KAFKA-13609) unless
    ``name`` may be set dynamically to ``value``."""
    if name not in DYNAMIC_BROKER_CONFIGS:
        raise InvalidRequestError(f"Cannot update these configs dynamically: Set({name})")
    topic_name = _LOG_SYNONYMS.get(name)
    try:
        if topic_name is not None:
            validate_topic_config_values({topic_name: value})
        else:
            BROKER_CONFIG[name].convert(value)  # its static type and range
    except (InvalidConfigError, ConfigError) as exc:
        raise InvalidRequestError(f"Invalid value {value} for configuration {name}: "
                                  f"{exc}") from None


class DynamicBrokerConfig:
    """The two dynamic layers over the static broker config; applies them to the logs and to
    the handlers' view of the config (``config``, updated in place)."""

    def __init__(self, logs: LogManager, config: dict[str, Any]) -> None:
        self._logs = logs
        self._path = logs.data_dir / DYNAMIC_CONFIG_FILE
        self._config = config
        self._static_config = dict(config)
        self._static_logs = dict(logs.config)
        self._lock = threading.Lock()
        self.layers: dict[str, dict[str, str]] = {DEFAULT_LAYER: {}, "broker": {}}
        if self._path.exists():
            stored = json.loads(self._path.read_text())
            self.layers = {DEFAULT_LAYER: dict(stored.get("default", {})),
                           "broker": dict(stored.get("broker", {}))}
            self._apply()

    def layer(self, per_broker: bool) -> dict[str, str]:
        with self._lock:
            return dict(self.layers["broker" if per_broker else DEFAULT_LAYER])

    def replace(self, per_broker: bool, values: Mapping[str, str]) -> None:
        """Make ``values`` the whole layer (checked with check_broker_config first), persist it
        and apply it."""
        with self._lock:
            key = "broker" if per_broker else DEFAULT_LAYER
            previous = self.layers[key]
            self.layers[key] = dict(values)
            try:
                self._apply()
            except ConfigError as exc:  # a combination the log layer rejects
                self.layers[key] = previous
                self._apply()
                raise InvalidRequestError(str(exc)) from None
            atomic_write(self._path, json.dumps({
                "default": self.layers[DEFAULT_LAYER], "broker": self.layers["broker"],
            }, sort_keys=True).encode())

    def _effective(self, base: Mapping[str, Any]) -> dict[str, Any]:
        return {**base, **self.layers[DEFAULT_LAYER], **self.layers["broker"]}

    def static_value(self, name: str) -> Any:
        """The setting's value without the dynamic layers (static config, else default)."""
        return self._static_config.get(name)

    def _apply(self) -> None:
        self._logs.reconfigure(self._effective(self._static_logs))
        # The handlers' view: the same values, resolved (ints) by the log manager.  Updated
        # key by key: handler threads read it concurrently and must never miss a key.
        new = self._effective(self._static_config)
        new.update({k: v for k, v in self._logs.config.items() if k in new})
        for key in [k for k in self._config if k not in new]:
            self._config.pop(key, None)
        self._config.update(new)
