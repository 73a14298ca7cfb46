"""BrokerConfig (Kafka's broker names and defaults), listeners, and properties files."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from samsa.broker.config import BrokerConfig, load_properties, parse_properties
from samsa.broker.listeners import (
    Listener,
    advertised_listeners,
    parse_listeners,
    parse_protocol_map,
    served_listeners,
)
from samsa.errors import ConfigError


def test_kafka_defaults() -> None:
    cfg = BrokerConfig()
    assert cfg["node.id"] == 1
    assert cfg["num.network.threads"] == 3
    assert cfg["num.io.threads"] == 8
    assert cfg["socket.request.max.bytes"] == 104_857_600
    assert cfg["queued.max.requests"] == 500
    assert cfg["connections.max.idle.ms"] == 600_000
    assert cfg["num.partitions"] == 1
    assert cfg["auto.create.topics.enable"] is True
    assert cfg["log.segment.bytes"] == 1 << 30
    assert cfg["message.max.bytes"] == 1_048_588
    assert cfg["group.initial.rebalance.delay.ms"] == 3000
    assert cfg["offsets.topic.num.partitions"] == 50
    assert cfg["log.retention.ms"] is None and cfg["log.retention.hours"] == 168
    assert cfg.num_io_threads == 8


def test_strings_are_converted_as_from_a_properties_file() -> None:
    cfg = BrokerConfig({"num.partitions": "3", "auto.create.topics.enable": "false",
                        "log.retention.ms": "60000"})
    assert cfg["num.partitions"] == 3
    assert cfg["auto.create.topics.enable"] is False
    assert cfg["log.retention.ms"] == 60_000
    assert cfg.explicit == {"num.partitions": 3, "auto.create.topics.enable": False,
                            "log.retention.ms": 60_000}


def test_unknown_setting_is_named() -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig({"num.partition": 3})
    assert info.value.setting == "num.partition"
    assert "num.partitions" in str(info.value)  # suggested


@pytest.mark.parametrize("name, value", [
    ("num.io.threads", 0),
    ("num.network.threads", "many"),
    ("socket.request.max.bytes", -1),
    ("log.message.timestamp.type", "WallClock"),
    ("compression.type", "brotli"),
    ("auto.create.topics.enable", "yes"),
])
def test_invalid_value_names_the_setting(name: str, value: object) -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig({name: value})
    assert info.value.setting == name


def test_kafka_sample_server_properties_load() -> None:
    text = """
# Kafka's KRaft sample, abridged
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
"""
    props = parse_properties(text)
    # Kafka's sample as it is: its CONTROLLER listener (controller.listener.names) is not served.
    cfg = BrokerConfig(props)
    assert cfg.data_dir == "/tmp/kraft-combined-logs"
    assert served_listeners(cfg) == [Listener("PLAINTEXT", "", 9092, "PLAINTEXT")]
    props["controller.listener.names"] = "CONTROLLER,PLAINTEXT"
    with pytest.raises(ConfigError) as info:
        BrokerConfig(props)
    assert info.value.setting == "listeners"


def test_listeners() -> None:
    assert parse_listeners("listeners", "PLAINTEXT://127.0.0.1:9092") == \
        [Listener("PLAINTEXT", "127.0.0.1", 9092)]
    assert parse_listeners("listeners", "PLAINTEXT://:0") == [Listener("PLAINTEXT", "", 0)]
    assert parse_listeners("listeners", "plaintext://[::1]:9093") == [Listener("PLAINTEXT", "::1", 9093)]
    assert parse_listeners("listeners", "PLAINTEXT://h:1, sasl_ssl://h:2,SSL://:3") == [
        Listener("PLAINTEXT", "h", 1), Listener("SASL_SSL", "h", 2, "SASL_SSL"),
        Listener("SSL", "", 3, "SSL")]
    for bad in ("127.0.0.1:9092", "PLAINTEXT://h:99999", "PLAINTEXT://h:1,PLAINTEXT://h:2",
                "INTERNAL://h:1", ""):
        with pytest.raises(ConfigError) as info:
            parse_listeners("listeners", bad)
        assert info.value.setting == "listeners"


def test_listener_names_map_to_security_protocols() -> None:
    protocols = parse_protocol_map("INTERNAL:SASL_PLAINTEXT, external:ssl")
    assert parse_listeners("listeners", "INTERNAL://:1,EXTERNAL://:2", protocols) == [
        Listener("INTERNAL", "", 1, "SASL_PLAINTEXT"), Listener("EXTERNAL", "", 2, "SSL")]
    for bad in ("INTERNAL", "INTERNAL:KERBEROS", ":SSL"):
        with pytest.raises(ConfigError) as info:
            parse_protocol_map(bad)
        assert info.value.setting == "listener.security.protocol.map"
    cfg = BrokerConfig({"listeners": "INTERNAL://127.0.0.1:0",
                        "listener.security.protocol.map": "INTERNAL:SASL_SSL"})
    assert served_listeners(cfg)[0].uses_sasl and served_listeners(cfg)[0].uses_tls


def test_host_and_port_arguments_replace_the_first_listener_only() -> None:
    cfg = BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093"})
    assert served_listeners(cfg, "0.0.0.0", 0) == [
        Listener("PLAINTEXT", "0.0.0.0", 0), Listener("SASL_PLAINTEXT", "127.0.0.1", 9093, "SASL_PLAINTEXT")]
    assert served_listeners(BrokerConfig(), None, None, "127.0.0.1") == [Listener("PLAINTEXT", "127.0.0.1", 0)]
    with pytest.raises(ConfigError):
        served_listeners(cfg, None, 70000)


def test_advertised_listeners() -> None:
    bound = [Listener("PLAINTEXT", "127.0.0.1", 5555), Listener("SSL", "0.0.0.0", 5556, "SSL")]
    cfg = BrokerConfig()
    assert advertised_listeners(cfg, bound) == {
        "PLAINTEXT": Listener("PLAINTEXT", "127.0.0.1", 5555),
        "SSL": Listener("SSL", socket.gethostname(), 5556, "SSL")}
    assert advertised_listeners(cfg, [Listener("PLAINTEXT", "", 1)])["PLAINTEXT"].host == socket.gethostname()
    given = BrokerConfig({"advertised.listeners": "SSL://broker.example:0"})
    assert advertised_listeners(given, bound)["SSL"] == Listener("SSL", "broker.example", 5556, "SSL")
    assert advertised_listeners(given, bound)["PLAINTEXT"].port == 5555
    fixed = BrokerConfig({"advertised.listeners": "PLAINTEXT://broker.example:19092"})
    assert advertised_listeners(fixed, bound)["PLAINTEXT"].port == 19092


def test_per_listener_settings_use_kafkas_prefix() -> None:
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="pw";'
    cfg = BrokerConfig({
        "listeners": "SASL_SSL://:0,SSL://:0",
        "ssl.keystore.location": "/broker.pem",
        "listener.name.sasl_ssl.ssl.keystore.location": "/sasl.pem",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
        "listener.name.sasl_ssl.scram-sha-512.connections.max.reauth.ms": "60000",
        "listener.name.SSL.ssl.client.auth": "required",
    })
    assert cfg.listener_value("SASL_SSL", "ssl.keystore.location") == "/sasl.pem"
    assert cfg.listener_value("SSL", "ssl.keystore.location") == "/broker.pem"
    assert cfg.listener_value("SSL", "ssl.client.auth") == "required"
    assert cfg.jaas_config("SASL_SSL", "PLAIN") == jaas
    assert cfg.jaas_config("SSL", "PLAIN") is None
    assert cfg.mechanism_value("SASL_SSL", "SCRAM-SHA-512", "connections.max.reauth.ms") == 60000
    assert cfg.mechanism_value("SASL_SSL", "PLAIN", "connections.max.reauth.ms") == 0
    assert "user_a" not in repr(cfg)
    for key, value in (("listener.name.sasl_ssl.num.io.threads", "3"),
                       ("listener.name.sasl_ssl.ssl.client.auth", "sometimes"),
                       ("listener.name.sasl_ssl", "x")):
        with pytest.raises(ConfigError) as info:
            BrokerConfig({key: value})
        assert info.value.setting == key or info.value.setting == "ssl.client.auth"


def test_one_data_directory_only() -> None:
    assert BrokerConfig({"log.dir": "/a"}).data_dir == "/a"
    with pytest.raises(ConfigError) as info:
        BrokerConfig({"log.dirs": "/a,/b"})
    assert info.value.setting == "log.dirs"


def test_every_setting_the_log_and_handlers_read_is_known() -> None:
    from samsa.broker.apis.services import HANDLER_DEFAULTS
    from samsa.broker.log.config import BROKER_DEFAULTS

    cfg = BrokerConfig()
    for name, default in {**BROKER_DEFAULTS, **HANDLER_DEFAULTS}.items():
        assert name in cfg, name
        assert cfg[name] == default, name


# Kafka's topic config defaults (TopicConfig / LogConfig), as DescribeConfigs shows them.
KAFKA_TOPIC_DEFAULTS = {
    "cleanup.policy": "delete", "compression.type": "producer", "compression.gzip.level": "-1",
    "compression.lz4.level": "9", "compression.zstd.level": "3",
    "delete.retention.ms": "86400000", "file.delete.delay.ms": "60000",
    "flush.messages": str(2**63 - 1), "flush.ms": str(2**63 - 1), "index.interval.bytes": "4096",
    "max.compaction.lag.ms": str(2**63 - 1), "max.message.bytes": "1048588",
    "message.downconversion.enable": "true", "message.timestamp.after.max.ms": "3600000",
    "message.timestamp.before.max.ms": str(2**63 - 1), "message.timestamp.type": "CreateTime",
    "min.cleanable.dirty.ratio": "0.5", "min.compaction.lag.ms": "0", "min.insync.replicas": "1",
    "preallocate": "false", "retention.bytes": "-1", "retention.ms": "604800000",
    "segment.bytes": "1073741824", "segment.index.bytes": "10485760", "segment.jitter.ms": "0",
    "segment.ms": "604800000", "unclean.leader.election.enable": "false",
}


def test_topic_config_defaults_are_their_broker_settings_defaults() -> None:
    from samsa.broker.apis.topic_configs import TOPIC_CONFIGS
    from samsa.broker.config import BROKER_CONFIG

    assert {name: d.default for name, d in TOPIC_CONFIGS.items()} == KAFKA_TOPIC_DEFAULTS
    for d in TOPIC_CONFIGS.values():
        # One declaration: every synonym is a broker setting with a matching value type.
        assert d.synonym in BROKER_CONFIG, d.synonym
        if d.name != "cleanup.policy":  # a LIST topic config, a comma-separated broker string
            assert d.type.name == BROKER_CONFIG[d.synonym].type.name, d.name


def test_dynamic_broker_configs_are_static_settings_too() -> None:
    from samsa.broker.apis.topic_configs import TOPIC_CONFIGS
    from samsa.broker.dynamic_config import DYNAMIC_BROKER_CONFIGS

    defaults = {d.synonym: d.default for d in TOPIC_CONFIGS.values()}
    for name in DYNAMIC_BROKER_CONFIGS:
        # Settable in server.properties with the value DescribeConfigs reports as default.
        BrokerConfig({name: defaults.get(name, "86400000")})


def test_log_config_defaults_are_the_broker_defaults() -> None:
    from samsa.broker.log.config import LogConfig

    assert LogConfig() == LogConfig.from_configs(BrokerConfig())
    assert LogConfig() == LogConfig.from_configs(None)


def test_properties_format() -> None:
    text = (
        "# comment\n"
        "! also a comment\n"
        "\n"
        "a=1\n"
        "b = two words \n"
        "c: colon\n"
        "d space separated\n"
        "e=first \\\n"
        "   second\n"
        "f=tab\\tand\\u0041\n"
        "g=\n"
        "path\\=with\\:escapes=x\n"
    )
    assert parse_properties(text) == {
        "a": "1", "b": "two words ", "c": "colon", "d": "space separated",
        "e": "first second", "f": "tab\tandA", "g": "", "path=with:escapes": "x",
    }


def test_load_properties(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("num.partitions=4\n", encoding="utf-8")
    assert load_properties(path) == {"num.partitions": "4"}
    with pytest.raises(ConfigError) as info:
        load_properties(tmp_path / "missing.properties")
    assert info.value.setting == "--config-file"


def test_tls_listener_settings_are_checked_at_construction(tmp_path: Path) -> None:
    from samsa.broker import Broker
    from tests.support.certs import make_tls_files

    files = make_tls_files(tmp_path / "certs")
    cases = [
        ({"listeners": "SSL://127.0.0.1:0"}, "ssl.keystore.location"),
        ({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": str(files.broker_keystore)},
         "ssl.keystore.type"),  # Java's default JKS with a file given
        ({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PEM",
          "ssl.keystore.location": str(files.ca)}, "ssl.keystore.location"),  # no key in it
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0"}, "sasl.enabled.mechanisms"),  # GSSAPI
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN"},
         "listener.name.sasl_plaintext.plain.sasl.jaas.config"),
    ]
    for config, setting in cases:
        with pytest.raises(ConfigError) as info:
            Broker(tmp_path / "data", config=config)
        assert info.value.setting == setting, (config, info.value)


# -- settings a single node cannot honour are refused at start (issue 16) -------------------------

@pytest.mark.parametrize(("name", "value", "says"), [
    ("offsets.topic.replication.factor", "3", "Kafka would never create the internal topic"),
    ("transaction.state.log.replication.factor", "3", "single node"),
    ("share.coordinator.state.topic.replication.factor", "2", "single node"),
    ("log.preallocate", "true", "not preallocated"),
    ("process.roles", "broker", "broker and controller at once"),
    ("process.roles", "controller", "broker and controller at once"),
    ("group.coordinator.rebalance.protocols", "classic,consumer", "only the classic group"),
    ("principal.builder.class", "com.example.MyBuilder", "custom Java builder"),
    ("log.roll.jitter.ms", "-1", "out of range"),
])
def test_settings_one_node_cannot_honour_are_refused(name: str, value: str, says: str) -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig({name: value})
    assert info.value.setting == name
    assert says in str(info.value)
    assert "set " in str(info.value) or "must be" in str(info.value)  # says what to do


def test_one_node_values_of_those_settings_are_accepted() -> None:
    cfg = BrokerConfig({
        "offsets.topic.replication.factor": "1", "transaction.state.log.replication.factor": 1,
        "log.preallocate": "false", "process.roles": "controller,broker",
        "group.coordinator.rebalance.protocols": "classic",
        "principal.builder.class":
            "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
        # Capped at the replication factor (1) by Kafka itself (Partition.effectiveMinIsr):
        "min.insync.replicas": 2, "transaction.state.log.min.isr": 2,
        "share.coordinator.state.topic.min.isr": 2,
        "unclean.leader.election.enable": "true", "offsets.commit.timeout.ms": 100,
    })
    assert cfg["min.insync.replicas"] == 2
    # Kafka's defaults of 3 are adapted to one node.
    assert BrokerConfig()["offsets.topic.replication.factor"] == 1
    assert BrokerConfig()["transaction.state.log.replication.factor"] == 1
