"""``samsa configs``: kafka-configs.sh's options and output over IncrementalAlterConfigs."""

from __future__ import annotations

from collections.abc import Callable

import click
import pytest
from click.testing import CliRunner, Result

from samsa.admin import AdminClient, ConfigResource, NewTopic
from samsa.broker import Broker
from samsa.cli import main
from samsa.cli.configs_cmd import parse_add_config


@pytest.fixture
def broker(make_broker: Callable[..., Broker]) -> Broker:
    """A broker of each test's own (tests alter broker configs) with topic "orders"."""
    b = make_broker()
    with AdminClient(bootstrap_servers=b.bootstrap_servers) as admin:
        admin.create_topics([NewTopic("orders", 2)])
    return b


def configs(broker: Broker, *args: str) -> Result:
    return CliRunner().invoke(main, ["configs", "--bootstrap-server", broker.bootstrap_servers,
                                     *args])


def test_parse_add_config() -> None:
    assert parse_add_config("a=1,b=[x,y],c=") == {"a": "1", "b": "x,y", "c": ""}
    assert parse_add_config("cleanup.policy=[delete,compact]") == {
        "cleanup.policy": "delete,compact"}
    for bad in ("novalue", "a=[1,2", "a=[1]b"):
        with pytest.raises(click.BadParameter):
            parse_add_config(bad)


def test_alter_and_describe_a_topic(broker: Broker) -> None:
    result = configs(broker, "--entity-type", "topics", "--entity-name", "orders", "--alter",
                     "--add-config", "retention.ms=60000,cleanup.policy=[delete,compact]")
    assert result.exit_code == 0, result.output
    assert result.output == "Completed updating config for topic orders.\n"
    # Effective on the open logs at once.
    log = broker.log_manager.get_log("orders", 1)
    assert (log.config.retention_ms, log.config.cleanup_policy) == (60000, "delete,compact")

    result = configs(broker, "--entity-type", "topics", "--entity-name", "orders", "--describe")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "Dynamic configs for topic orders are:",
        ("  cleanup.policy=delete,compact sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
        "cleanup.policy=delete,compact, DEFAULT_CONFIG:log.cleanup.policy=delete}"),
        ("  retention.ms=60000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=60000,"
        " DEFAULT_CONFIG:log.retention.ms=604800000}"),
    ]

    result = configs(broker, "--entity-type", "topics", "--entity-name", "orders", "--alter",
                     "--delete-config", "retention.ms")
    assert result.exit_code == 0, result.output
    assert broker.log_manager.topic("orders").configs == {"cleanup.policy": "delete,compact"}
    assert log.config.retention_ms == 604800000

    result = configs(broker, "--entity-type", "topics", "--entity-name", "orders", "--describe",
                     "--all")
    lines = result.output.splitlines()
    assert lines[0] == "All configs for topic orders are:"
    assert any(line.startswith("  segment.bytes=1073741824 ") for line in lines)


def test_broker_dynamic_configs(broker: Broker) -> None:
    node = str(broker.node.node_id)
    result = configs(broker, "--entity-type", "brokers", "--entity-default", "--alter",
                     "--add-config", "log.retention.ms=3600000")
    assert result.exit_code == 0, result.output
    assert result.output == "Completed updating default config for brokers in the cluster.\n"
    result = configs(broker, "--entity-type", "brokers", "--entity-name", node, "--alter",
                     "--add-config", "log.segment.bytes=1048576")
    assert result.output == f"Completed updating config for broker {node}.\n"
    assert broker.log_manager.get_log("orders", 0).config.segment_bytes == 1048576
    assert broker.log_manager.get_log("orders", 0).config.retention_ms == 3600000

    result = configs(broker, "--entity-type", "brokers", "--entity-default", "--describe")
    assert result.output.splitlines() == [
        "Default configs for brokers in the cluster are:",
        ("  log.retention.ms=3600000 sensitive=false "
        "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000}"),
    ]
    result = configs(broker, "--entity-type", "brokers", "--describe")  # every broker
    assert result.output.splitlines()[0] == f"Dynamic configs for broker {node} are:"
    assert result.output.splitlines()[1].startswith("  log.segment.bytes=1048576 ")
    assert len(result.output.splitlines()) == 2

    with AdminClient(bootstrap_servers=broker.bootstrap_servers) as admin:
        entry = admin.describe_configs(broker=int(node))[ConfigResource.broker(int(node))]
        assert entry["log.retention.ms"].value == "3600000"  # type: ignore[index]


def test_errors_exit_1(broker: Broker) -> None:
    result = configs(broker, "--entity-type", "brokers", "--entity-default", "--alter",
                     "--add-config", "num.partitions=3")
    assert result.exit_code == 1
    assert "Cannot update these configs dynamically" in result.output
    result = configs(broker, "--entity-type", "topics", "--entity-name", "ghost", "--alter",
                     "--add-config", "retention.ms=1")
    assert result.exit_code == 1 and "ghost" in result.output
    result = configs(broker, "--entity-type", "topics", "--entity-name", "orders", "--alter",
                     "--add-config", "retention.ms=soon")
    assert result.exit_code == 1 and "retention.ms" in result.output
    result = configs(broker, "--entity-type", "topics", "--entity-name", "orders")
    assert result.exit_code == 2 and "--describe" in result.output
    result = configs(broker, "--entity-type", "topics", "--entity-default", "--describe")
    assert result.exit_code == 2
