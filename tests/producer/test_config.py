"""ProducerConfig: Kafka's names and defaults, Java's idempotence and delivery-timeout rules."""

from __future__ import annotations

import pytest

from samsa.errors import ConfigError
from samsa.producer.config import PRODUCER_CONFIG, ProducerConfig
from samsa.producer.partitioner import RoundRobinPartitioner
from samsa.producer.serializers import (
    IntegerSerializer,
    JsonSerializer,
    StringSerializer,
)

KAFKA_DEFAULTS = {
    "bootstrap.servers": [],
    "acks": -1,
    "enable.idempotence": True,
    "linger.ms": 5,
    "batch.size": 16384,
    "buffer.memory": 33554432,
    "max.block.ms": 60000,
    "max.request.size": 1048576,
    "compression.type": "none",
    "compression.gzip.level": -1,
    "compression.lz4.level": 9,
    "compression.zstd.level": 3,
    "retries": 2147483647,
    "retry.backoff.ms": 100,
    "retry.backoff.max.ms": 1000,
    "delivery.timeout.ms": 120000,
    "request.timeout.ms": 30000,
    "max.in.flight.requests.per.connection": 5,
    "metadata.max.age.ms": 300000,
    "metadata.max.idle.ms": 300000,
    "connections.max.idle.ms": 540000,
    "reconnect.backoff.ms": 50,
    "reconnect.backoff.max.ms": 1000,
    "send.buffer.bytes": 131072,
    "receive.buffer.bytes": 32768,
    "partitioner.class": None,
    "partitioner.ignore.keys": False,
    "partitioner.adaptive.partitioning.enable": True,
    "partitioner.availability.timeout.ms": 0,
    "interceptor.classes": [],
    "key.serializer": None,
    "value.serializer": None,
    "transactional.id": None,
    "socket.connection.setup.timeout.ms": 10000,
    "socket.connection.setup.timeout.max.ms": 30000,
}


def test_kafka_defaults() -> None:
    cfg = ProducerConfig()
    for name, expected in KAFKA_DEFAULTS.items():
        assert cfg[name] == expected, name
    assert cfg["client.id"].startswith("producer-")


def test_client_ids_are_numbered_unless_given() -> None:
    a, b = ProducerConfig(), ProducerConfig()
    assert a.client_id != b.client_id
    assert ProducerConfig(client_id="mine").client_id == "mine"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("all", -1), ("ALL", -1), ("-1", -1), (-1, -1), ("1", 1), (1, 1), (0, 0)],
)
def test_acks_normalised_to_int(raw: object, expected: int) -> None:
    assert ProducerConfig(acks=raw, enable_idempotence=False).acks == expected


def test_cli_style_strings() -> None:
    cfg = ProducerConfig(
        {
            "bootstrap.servers": "127.0.0.1:9092,127.0.0.1:9093",
            "linger.ms": "20",
            "enable.idempotence": "false",
            "compression.type": "ZSTD",
            "compression.zstd.level": "-5",
            "key.serializer": "org.apache.kafka.common.serialization.StringSerializer",
            "value.serializer": "json",
            "partitioner.class": "org.apache.kafka.clients.producer.RoundRobinPartitioner",
        }
    )
    assert cfg.bootstrap_servers == ["127.0.0.1:9092", "127.0.0.1:9093"]
    assert cfg.linger_ms == 20
    assert cfg.enable_idempotence is False
    assert cfg.compression_type == "zstd"
    assert cfg.compression_level() == -5
    assert cfg.key_serializer is StringSerializer
    assert cfg.value_serializer is JsonSerializer
    assert cfg.partitioner_class is RoundRobinPartitioner


def test_serializer_instances_pass_through() -> None:
    ser = IntegerSerializer()
    assert ProducerConfig(key_serializer=ser).key_serializer is ser


@pytest.mark.parametrize(
    ("settings", "setting", "fragment"),
    [
        ({"linger_mss": 1}, "linger_mss", "'linger.ms'"),
        ({"acks": "2"}, "acks", "all, -1, 0, 1"),
        (
            {"compression.type": "brotli"},
            "compression.type",
            "none, gzip, snappy, lz4, zstd",
        ),
        (
            {"compression.gzip.level": 10},
            "compression.gzip.level",
            "between 1 and 9 or -1",
        ),
        ({"compression.lz4.level": 0}, "compression.lz4.level", "between 1 and 17"),
        (
            {"compression.zstd.level": 23},
            "compression.zstd.level",
            "between -131072 and 22",
        ),
        ({"batch.size": -1}, "batch.size", "at least 0"),
        (
            {"max.in.flight.requests.per.connection": 0},
            "max.in.flight.requests.per.connection",
            "at least 1",
        ),
        ({"metadata.max.idle.ms": 10}, "metadata.max.idle.ms", "at least 5000"),
        ({"retries": -1}, "retries", "between 0"),
        ({"security.protocol": "TLS"}, "security.protocol", "PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
        ({"transactional.id": "tx-1", "enable.idempotence": False}, "enable.idempotence", "needs idempotence"),
        ({"transactional.id": "tx-1", "acks": 1}, "acks", "transactional.id was set"),
        ({"transactional.id": "tx-1", "transaction.timeout.ms": 0}, "transaction.timeout.ms", "at least 1"),
        ({"transactional.id": ""}, "transactional.id", "empty"),
        ({"key.serializer": "nope"}, "key.serializer", "known names"),
    ],
)
def test_invalid_settings(
    settings: dict[str, object], setting: str, fragment: str
) -> None:
    with pytest.raises(ConfigError) as info:
        ProducerConfig(settings)
    assert info.value.setting == setting
    assert fragment in str(info.value)


# -- idempotence (ProducerConfig.postProcessAndValidateIdempotenceConfigs) ------------------


@pytest.mark.parametrize(
    ("settings", "setting"),
    [
        ({"acks": "1"}, "acks"),
        ({"acks": 0}, "acks"),
        (
            {"max.in.flight.requests.per.connection": 6},
            "max.in.flight.requests.per.connection",
        ),
        ({"retries": 0}, "retries"),
    ],
)
def test_explicit_idempotence_conflicts_raise(
    settings: dict[str, object], setting: str
) -> None:
    with pytest.raises(ConfigError) as info:
        ProducerConfig(settings, enable_idempotence=True)
    assert info.value.setting == setting
    assert "enable.idempotence" in str(info.value)


@pytest.mark.parametrize(
    "settings",
    [
        {"acks": "1"},
        {"acks": 0},
        {"max.in.flight.requests.per.connection": 6},
        {"retries": 0},
    ],
)
def test_default_idempotence_is_disabled_silently_on_conflict(
    settings: dict[str, object],
) -> None:
    assert ProducerConfig(settings).enable_idempotence is False


def test_idempotence_stays_on_with_compatible_settings() -> None:
    cfg = ProducerConfig(acks="all", max_in_flight_requests_per_connection=5, retries=3)
    assert cfg.enable_idempotence is True
    assert ProducerConfig(enable_idempotence=False).enable_idempotence is False


# -- delivery.timeout.ms (KafkaProducer.configureDeliveryTimeout) ----------------------------


def test_explicit_delivery_timeout_below_linger_plus_request_timeout_raises() -> None:
    with pytest.raises(ConfigError) as info:
        ProducerConfig(delivery_timeout_ms=30000, linger_ms=5, request_timeout_ms=30000)
    assert info.value.setting == "delivery.timeout.ms"
    assert "30005" in str(info.value)


def test_default_delivery_timeout_is_raised_to_linger_plus_request_timeout() -> None:
    cfg = ProducerConfig(linger_ms=1000, request_timeout_ms=200000)
    assert cfg.delivery_timeout_ms == 201000


def test_delivery_timeout_equal_to_sum_is_fine() -> None:
    assert ProducerConfig(delivery_timeout_ms=30005).delivery_timeout_ms == 30005


def test_reconnect_backoff_max_follows_backoff_when_only_backoff_set() -> None:
    assert ProducerConfig(reconnect_backoff_ms=2000).reconnect_backoff_max_ms == 2000
    assert (
        ProducerConfig(
            reconnect_backoff_ms=20, reconnect_backoff_max_ms=500
        ).reconnect_backoff_max_ms
        == 500
    )


def test_effective_batch_size_and_levels() -> None:
    assert ProducerConfig(batch_size=0).effective_batch_size == 1
    assert ProducerConfig().compression_level() is None
    assert ProducerConfig(compression_type="gzip").compression_level() == -1


def test_every_entry_has_a_doc() -> None:
    for entry in PRODUCER_CONFIG:
        assert entry.doc, entry.name


def test_transactional_id_implies_idempotence() -> None:
    cfg = ProducerConfig({"transactional.id": "tx-1"})
    assert cfg["transactional.id"] == "tx-1"
    assert cfg["enable.idempotence"] is True
    assert cfg["transaction.timeout.ms"] == 60000
