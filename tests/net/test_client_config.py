"""The settings every client shares are declared once (samsa.net.client_config), as Java's
CommonClientConfigs, with each client's Kafka defaults where they differ."""

from __future__ import annotations

import dataclasses

import pytest

from samsa.admin.config import ADMIN_CONFIG, AdminConfig
from samsa.config import ConfigDef
from samsa.consumer.config import CONSUMER_CONFIG, ConsumerConfig
from samsa.errors import ConfigError
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


# -- security settings ---------------------------------------------------------------------------

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="alice" password="alice-secret";')
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              'username="bob" password="bob-secret";')


def test_security_defaults_are_javas() -> None:
    cfg = ProducerConfig()
    assert cfg["security.protocol"] == "PLAINTEXT"
    assert cfg["sasl.mechanism"] == "GSSAPI"
    assert cfg["ssl.protocol"] == "TLSv1.3"
    assert cfg["ssl.enabled.protocols"] == ["TLSv1.2", "TLSv1.3"]
    assert cfg["ssl.endpoint.identification.algorithm"] == "https"
    assert cfg["ssl.truststore.type"] == cfg["ssl.keystore.type"] == "JKS"
    assert cfg["ssl.cipher.suites"] is None


@pytest.mark.parametrize("config_class", [ProducerConfig, ConsumerConfig, AdminConfig])
@pytest.mark.parametrize("spelling", ["SASL_SSL", "sasl_ssl", "Sasl_Ssl"])
def test_security_protocol_is_case_insensitive(config_class: type[ClientConfig], spelling: str) -> None:
    cfg = config_class(bootstrap_servers="a:1", security_protocol=spelling, sasl_mechanism="PLAIN",
                       sasl_jaas_config=PLAIN_JAAS)
    assert cfg["security.protocol"] == "SASL_SSL"


def test_jaas_credentials_land_in_sasl_username_and_password() -> None:
    cfg = ProducerConfig({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
                          "sasl.jaas.config": SCRAM_JAAS})
    assert (cfg["sasl.username"], cfg["sasl.password"]) == ("bob", "bob-secret")
    assert "bob-secret" not in repr(cfg) and "[hidden]" in repr(cfg)


def test_librdkafka_names_are_aliases() -> None:
    cfg = ConsumerConfig({"security.protocol": "sasl_ssl", "sasl.mechanisms": "SCRAM-SHA-256",
                          "sasl.username": "u", "sasl.password": "p", "ssl.ca.location": "/ca.pem",
                          "ssl.certificate.location": "/c.pem", "ssl.key.location": "/k.pem",
                          "ssl.key.password": "kp"})
    assert cfg["sasl.mechanism"] == "SCRAM-SHA-256"
    assert cfg["ssl.truststore.location"] == "/ca.pem" and cfg["ssl.truststore.type"] == "PEM"
    with pytest.raises(ConfigError, match="'ssl.ca.location': is another name of ssl.truststore.location"):
        ConsumerConfig({"ssl.ca.location": "/a.pem", "ssl.truststore.location": "/b.pem"})


@pytest.mark.parametrize(("settings", "setting", "fragment"), [
    ({"security.protocol": "SASL_SSL"}, "sasl.mechanism", "GSSAPI (Kerberos, Kafka's default) is not supported"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "sasl.jaas.config",
     "needs credentials: set sasl.jaas.config"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "plain", "sasl.jaas.config": PLAIN_JAAS},
     "sasl.mechanism", "case-sensitive"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER"},
     "sasl.oauthbearer.token.callback", "is required with sasl.mechanism=OAUTHBEARER"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.jaas.config": SCRAM_JAAS},
     "sasl.jaas.config", "takes org.apache.kafka.common.security.plain.PlainLoginModule"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
      "sasl.jaas.config": PLAIN_JAAS.replace(' password="alice-secret"', "")}, "sasl.jaas.config",
     "needs the option(s) password"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.jaas.config": "nonsense"},
     "sasl.jaas.config", "must end with ';'"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.jaas.config": PLAIN_JAAS,
      "sasl.username": "x"}, "sasl.jaas.config", "not both"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "x"},
     "sasl.password", "is required with sasl.username"),
    ({"ssl.truststore.location": "/ts.jks"}, "ssl.truststore.type", "only PEM"),
    ({"ssl.keystore.location": "/ks.p12", "ssl.keystore.type": "PKCS12"}, "ssl.keystore.type", "only PEM"),
    ({"ssl.keystore.key": "k", "ssl.keystore.certificate.chain": "c", "ssl.keystore.type": "JKS"},
     "ssl.keystore.type", "only PEM"),
    ({"ssl.truststore.password": "x"}, "ssl.truststore.password", "PEM stores have no password"),
    ({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "ldaps"},
     "ssl.endpoint.identification.algorithm", "not supported"),
    ({"security.protocol": "SSL", "ssl.enabled.protocols": "TLSv1.2,SSLv3"}, "ssl.enabled.protocols",
     "unknown protocol 'SSLv3'"),
], ids=["gssapi", "no-credentials", "lower-case-mechanism", "oauthbearer", "wrong-module", "no-password",
        "bad-jaas", "jaas-and-username", "username-alone", "jks-truststore", "pkcs12-keystore",
        "inline-with-jks", "store-password", "endpoint-algorithm", "enabled-protocols"])
def test_security_mistakes_name_the_setting(settings: dict[str, object], setting: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        ProducerConfig(settings)
    assert info.value.setting == setting
    assert fragment in str(info.value)
    assert "alice-secret" not in str(info.value)


def test_inline_pem_with_the_default_store_type_is_accepted() -> None:
    cfg = ProducerConfig({"ssl.keystore.key": "k", "ssl.keystore.certificate.chain": "c",
                          "ssl.truststore.certificates": "t"})
    assert cfg["ssl.keystore.type"] == "JKS"  # left as given; the stores are PEM text anyway


def test_sasl_settings_are_ignored_without_a_sasl_protocol() -> None:
    cfg = ProducerConfig({"sasl.jaas.config": "not even JAAS"})
    assert cfg["security.protocol"] == "PLAINTEXT"
