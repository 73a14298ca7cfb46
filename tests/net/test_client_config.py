"""The settings every client shares are declared once (samsa.net.client_config), as Java's
CommonClientConfigs, with each client's Kafka defaults where they differ."""

from __future__ import annotations

import dataclasses

import pytest

from samsa.admin.config import ADMIN_CONFIG, AdminConfig
from samsa.config import ConfigDef
from samsa.consumer.config import CONSUMER_CONFIG, ConsumerConfig
from samsa.net.client_config import (
    COMMON_CLIENT_SETTINGS,
    DEFAULT_API_TIMEOUT_MS,
    RETRIES,
    ClientConfig,
    client_config_def,
)
from samsa.producer.config import PRODUCER_CONFIG, ProducerConfig

CLIENTS: dict[str, ConfigDef] = {
    "producer": PRODUCER_CONFIG, "consumer": CONSUMER_CONFIG, "admin": ADMIN_CONFIG}

# Java's defaults where the clients differ (ProducerConfig, ConsumerConfig, AdminClientConfig).
JAVA_DEFAULTS = {
    "receive.buffer.bytes": {"producer": 32 * 1024, "consumer": 64 * 1024, "admin": 64 * 1024},
    "connections.max.idle.ms": {"producer": 540_000, "consumer": 540_000, "admin": 300_000},
}


@pytest.mark.parametrize("client", CLIENTS)
def test_every_client_holds_the_common_entries(client: str) -> None:
    definition = CLIENTS[client]
    for common in COMMON_CLIENT_SETTINGS:
        entry = definition[common.name]
        if common.name in JAVA_DEFAULTS:
            # Only the default differs; type, checks and doc are the common entry's.
            assert entry == dataclasses.replace(common, default=entry.default), common.name
            assert entry.default == JAVA_DEFAULTS[common.name][client], common.name
        else:
            assert entry is common, f"{client} redeclares {common.name}"


def test_settings_of_two_clients_are_shared_objects() -> None:
    assert PRODUCER_CONFIG["retries"] is RETRIES and ADMIN_CONFIG["retries"] is RETRIES
    assert "retries" not in CONSUMER_CONFIG
    assert CONSUMER_CONFIG["default.api.timeout.ms"] is DEFAULT_API_TIMEOUT_MS
    assert ADMIN_CONFIG["default.api.timeout.ms"] is DEFAULT_API_TIMEOUT_MS
    assert "default.api.timeout.ms" not in PRODUCER_CONFIG


def test_common_defaults_are_kafkas() -> None:
    for cfg in (ProducerConfig(), ConsumerConfig(), AdminConfig(bootstrap_servers="a:1")):
        assert cfg["request.timeout.ms"] == 30_000
        assert (cfg["retry.backoff.ms"], cfg["retry.backoff.max.ms"]) == (100, 1000)
        assert (cfg["reconnect.backoff.ms"], cfg["reconnect.backoff.max.ms"]) == (50, 1000)
        assert cfg["socket.connection.setup.timeout.ms"] == 10_000
        assert cfg["socket.connection.setup.timeout.max.ms"] == 30_000
        assert cfg["metadata.max.age.ms"] == 300_000
        assert cfg["send.buffer.bytes"] == 131_072
        assert cfg["client.dns.lookup"] == "use_all_dns_ips"
        assert cfg["security.protocol"] == "PLAINTEXT"


@pytest.mark.parametrize("config_class", [ProducerConfig, ConsumerConfig, AdminConfig])
def test_every_client_runs_the_common_checks(config_class: type[ClientConfig]) -> None:
    # CommonClientConfigs.postProcessReconnectBackoffConfigs, for all three clients.
    cfg = config_class(bootstrap_servers="a:1", reconnect_backoff_ms=7)
    assert cfg["reconnect.backoff.max.ms"] == 7
    cfg = config_class(bootstrap_servers="a:1", reconnect_backoff_ms=7,
                       reconnect_backoff_max_ms=70)
    assert cfg["reconnect.backoff.max.ms"] == 70


def test_only_common_settings_take_client_defaults() -> None:
    with pytest.raises(ValueError, match="linger.ms"):
        client_config_def("x", [], defaults={"linger.ms": 1})
    with pytest.raises(ValueError, match="defined twice"):
        client_config_def("x", [COMMON_CLIENT_SETTINGS[0]])
