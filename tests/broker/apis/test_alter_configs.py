"""AlterConfigs (33) and IncrementalAlterConfigs (44) against KafkaApis: topic overrides and
dynamic broker configs, per-resource errors as Kafka answers them, persistence."""

from __future__ import annotations

from typing import Any

import pytest

from samsa.broker.apis import BrokerNode, KafkaApis
from samsa.broker.log import LogManager
from samsa.protocol import (
    AlterConfigsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)

from .conftest import Client

INVALID_CONFIG, INVALID_REQUEST, UNKNOWN_TOPIC = 40, 42, 3
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
TOPIC, BROKER = 2, 4

IResource = IncrementalAlterConfigsRequest.AlterConfigsResource
IConfig = IncrementalAlterConfigsRequest.AlterableConfig
LResource = AlterConfigsRequest.AlterConfigsResource
LConfig = AlterConfigsRequest.AlterableConfig


def incremental(client: Any, rtype: int, name: str, *ops: tuple[str, int, str | None],
                version: int = 1, validate_only: bool = False) -> tuple[int, str | None]:
    request = IncrementalAlterConfigsRequest(resources=[IResource(
        resource_type=rtype, resource_name=name,
        configs=[IConfig(name=n, config_operation=op, value=v) for n, op, v in ops])],
        validate_only=validate_only)
    [r] = client.call(request, version).responses
    assert (r.resource_type, r.resource_name) == (rtype, name)
    return r.error_code, r.error_message


def legacy(client: Any, rtype: int, name: str, configs: dict[str, str], version: int = 2,
           validate_only: bool = False) -> tuple[int, str | None]:
    request = AlterConfigsRequest(resources=[LResource(
        resource_type=rtype, resource_name=name,
        configs=[LConfig(name=k, value=v) for k, v in configs.items()])],
        validate_only=validate_only)
    [r] = client.call(request, version).responses
    return r.error_code, r.error_message


def described(client: Any, rtype: int, name: str) -> dict[str, tuple[str | None, int]]:
    request = DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=rtype, resource_name=name, configuration_keys=None)],
        include_synonyms=True)
    [result] = client.call(request, 4).results
    assert result.error_code == 0, result.error_message
    return {c.name: (c.value, c.config_source) for c in result.configs}


@pytest.mark.parametrize("version", [0, 1])
def test_incremental_set_delete_append_subtract(client: Any, log_manager: Any,
                                                version: int) -> None:
    log_manager.create_topic("t", 2, {"retention.ms": "5000"})
    assert incremental(client, TOPIC, "t", ("segment.bytes", SET, "100000"),
                       ("retention.ms", DELETE, None), ("cleanup.policy", APPEND, "compact"),
                       version=version) == (0, None)
    assert log_manager.topic("t").configs == {"segment.bytes": "100000",
                                              "cleanup.policy": "delete,compact"}
    # Effective on the open logs at once.
    assert log_manager.get_log("t", 1).config.segment_bytes == 100000
    assert log_manager.get_log("t", 0).config.cleanup_policy == "delete,compact"
    assert incremental(client, TOPIC, "t", ("cleanup.policy", SUBTRACT, "delete"),
                       version=version)[0] == 0
    assert described(client, TOPIC, "t")["cleanup.policy"] == ("compact", 1)


def test_incremental_errors_per_resource(client: Any, log_manager: Any) -> None:
    log_manager.create_topic("t", 1)
    code, message = incremental(client, TOPIC, "t", ("retention.ms", APPEND, "1"))
    assert code == INVALID_CONFIG and "not LIST" in (message or "")
    assert incremental(client, TOPIC, "t", ("retention.ms", SET, "soon"))[0] == INVALID_CONFIG
    assert incremental(client, TOPIC, "t", ("no.such.config", SET, "1"))[0] == INVALID_CONFIG
    assert incremental(client, TOPIC, "t", ("retention.ms", SET, None))[0] == INVALID_REQUEST
    assert incremental(client, TOPIC, "t", ("retention.ms", SET, "1"),
                       ("retention.ms", SET, "2"))[0] == INVALID_REQUEST
    assert incremental(client, TOPIC, "ghost", ("retention.ms", SET, "1"))[0] == UNKNOWN_TOPIC
    assert incremental(client, 32, "g", ("consumer.session.timeout.ms", SET, "50000"))[0] \
        == INVALID_REQUEST
    assert log_manager.topic("t").configs == {}
    # Several resources: each answered on its own; a duplicate fails both copies.
    log_manager.create_topic("u", 1)
    request = IncrementalAlterConfigsRequest(resources=[
        IResource(resource_type=TOPIC, resource_name=n,
                  configs=[IConfig(name="retention.ms", config_operation=SET, value="7")])
        for n in ("t", "u", "t")], validate_only=False)
    codes = [(r.resource_name, r.error_code) for r in client.call(request, 1).responses]
    assert codes == [("t", INVALID_REQUEST), ("u", 0), ("t", INVALID_REQUEST)]
    assert log_manager.topic("u").configs == {"retention.ms": "7"}


def test_validate_only_changes_nothing(client: Any, log_manager: Any) -> None:
    log_manager.create_topic("t", 1)
    assert incremental(client, TOPIC, "t", ("retention.ms", SET, "1000"),
                       validate_only=True) == (0, None)
    assert legacy(client, TOPIC, "t", {"retention.ms": "1000"}, validate_only=True)[0] == 0
    assert incremental(client, BROKER, "1", ("log.retention.ms", SET, "1000"),
                       validate_only=True)[0] == 0
    assert log_manager.topic("t").configs == {}
    assert log_manager.get_log("t", 0).config.retention_ms == 7 * 24 * 3_600_000
    assert described(client, BROKER, "1")["log.retention.ms"][1] == 5


@pytest.mark.parametrize("version", [0, 1, 2])
def test_alter_configs_replaces_the_whole_set(client: Any, log_manager: Any,
                                              version: int) -> None:
    log_manager.create_topic("t", 1, {"retention.ms": "5000", "segment.bytes": "100000"})
    assert legacy(client, TOPIC, "t", {"retention.bytes": "2048"}, version=version) == (0, None)
    assert log_manager.topic("t").configs == {"retention.bytes": "2048"}
    log = log_manager.get_log("t", 0)
    assert (log.config.retention_bytes, log.config.segment_bytes) == (2048, 1073741824)
    assert legacy(client, TOPIC, "t", {"retention.bytes": "x"}, version=version)[0] \
        == INVALID_CONFIG
    assert legacy(client, TOPIC, "ghost", {}, version=version)[0] == UNKNOWN_TOPIC


def test_dynamic_broker_configs(client: Any, log_manager: Any) -> None:
    log_manager.create_topic("plain", 1)
    log_manager.create_topic("own", 1, {"retention.ms": "5000"})
    # Cluster default, then this broker's own value on top (it wins).
    assert incremental(client, BROKER, "", ("log.retention.ms", SET, "60000")) == (0, None)
    assert log_manager.get_log("plain", 0).config.retention_ms == 60000
    assert incremental(client, BROKER, "1", ("log.retention.ms", SET, "120000"),
                       ("log.cleanup.policy", APPEND, "compact")) == (0, None)
    assert log_manager.get_log("plain", 0).config.retention_ms == 120000
    assert log_manager.get_log("plain", 0).config.cleanup_policy == "delete,compact"
    assert log_manager.get_log("own", 0).config.retention_ms == 5000  # the topic override wins
    broker = described(client, BROKER, "1")
    assert broker["log.retention.ms"] == ("120000", 2)  # DYNAMIC_BROKER_CONFIG
    assert described(client, BROKER, "") == {"log.retention.ms": ("60000", 3)}
    assert described(client, TOPIC, "plain")["retention.ms"] == ("120000", 2)
    # Deleting the per-broker value falls back to the cluster default.
    assert incremental(client, BROKER, "1", ("log.retention.ms", DELETE, None))[0] == 0
    assert log_manager.get_log("plain", 0).config.retention_ms == 60000
    # Refused as Kafka refuses them: static settings, another broker, bad values.
    code, message = incremental(client, BROKER, "1", ("num.partitions", SET, "3"))
    assert code == INVALID_REQUEST and "Cannot update these configs dynamically" in (message or "")
    assert incremental(client, BROKER, "7", ("log.retention.ms", SET, "1"))[0] == INVALID_REQUEST
    assert incremental(client, BROKER, "1", ("log.retention.ms", SET, "x"))[0] == INVALID_REQUEST
    assert incremental(client, BROKER, "1", ("log.retention.ms", APPEND, "1"))[0] \
        == INVALID_CONFIG
    # AlterConfigs replaces the layer: the default layer is emptied.
    assert legacy(client, BROKER, "", {}) == (0, None)
    assert described(client, BROKER, "") == {}
    assert log_manager.get_log("plain", 0).config.retention_ms == 7 * 24 * 3_600_000


def test_dynamic_broker_configs_survive_a_restart(tmp_path: Any) -> None:
    node = BrokerNode(node_id=1, port=19092)
    with LogManager(tmp_path / "d") as logs:
        first = KafkaApis(logs, node=node, config={})
        logs.create_topic("t", 1)
        assert incremental(Client(first), BROKER, "1", ("log.segment.bytes", SET, "65536"))[0] == 0
        assert incremental(Client(first), TOPIC, "t", ("retention.ms", SET, "1234"))[0] == 0
        first.close()
    with LogManager(tmp_path / "d") as logs:  # a new broker process on the same directory
        second = KafkaApis(logs, node=node, config={})
        try:
            logs.create_topic("later", 1)
            assert described(Client(second), BROKER, "1")["log.segment.bytes"] == ("65536", 2)
            assert logs.get_log("later", 0).config.segment_bytes == 65536
            assert described(Client(second), TOPIC, "t")["retention.ms"] == ("1234", 1)
            assert logs.get_log("t", 0).config.retention_ms == 1234
            assert incremental(Client(second), BROKER, "1",
                               ("log.segment.bytes", DELETE, None))[0] == 0
            assert logs.get_log("later", 0).config.segment_bytes == 1073741824
        finally:
            second.close()
