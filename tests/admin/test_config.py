"""AdminConfig: Kafka's names and defaults, and Java's cross-checks."""

from __future__ import annotations

import pytest

from samsa.admin import AdminClient, AdminConfig
from samsa.errors import ConfigError


def test_defaults_are_kafkas() -> None:
    cfg = AdminConfig({"bootstrap.servers": "127.0.0.1:9092"})
    assert cfg["bootstrap.servers"] == ["127.0.0.1:9092"]
    assert cfg["request.timeout.ms"] == 30000
    assert cfg["default.api.timeout.ms"] == 60000
    assert cfg["retry.backoff.ms"] == 100 and cfg["retry.backoff.max.ms"] == 1000
    assert cfg["client.id"].startswith("adminclient-")


def test_keyword_arguments_override_the_dict() -> None:
    cfg = AdminConfig({"bootstrap.servers": "a:1", "request.timeout.ms": "5000"},
                      request_timeout_ms=7000)
    assert cfg.request_timeout_ms == 7000


def test_bootstrap_servers_is_required() -> None:
    with pytest.raises(ConfigError, match="'bootstrap.servers': is required"):
        AdminConfig()


def test_unknown_setting_suggests_the_right_one() -> None:
    with pytest.raises(ConfigError, match="did you mean 'request.timeout.ms'"):
        AdminConfig(bootstrap_servers="a:1", request_timeout="5")


def test_default_api_timeout_must_outlast_a_request() -> None:
    with pytest.raises(ConfigError, match="must be at least request.timeout.ms"):
        AdminConfig(bootstrap_servers="a:1", request_timeout_ms=40000,
                    default_api_timeout_ms=30000)
    # Left at its default, it is raised instead, as in Java.
    cfg = AdminConfig(bootstrap_servers="a:1", request_timeout_ms=90000)
    assert cfg["default.api.timeout.ms"] == 90000


def test_reconnect_backoff_max_follows_reconnect_backoff() -> None:
    cfg = AdminConfig(bootstrap_servers="a:1", reconnect_backoff_ms=5)
    assert cfg["reconnect.backoff.max.ms"] == 5


def test_client_rejects_bad_settings_at_construction() -> None:
    with pytest.raises(ConfigError, match="retries"):
        AdminClient(bootstrap_servers="a:1", retries=-1)
    with pytest.raises(ConfigError, match="bootstrap.servers"):
        AdminClient(bootstrap_servers="no-port")
