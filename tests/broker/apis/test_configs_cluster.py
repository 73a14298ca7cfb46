"""DescribeConfigs, DescribeCluster, FindCoordinator, InitProducerId."""

from __future__ import annotations

from typing import Any

import pytest

from samsa.protocol import (
    DescribeClusterRequest,
    DescribeConfigsRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
)

Resource = DescribeConfigsRequest.DescribeConfigsResource


def describe(client: Any, *resources: tuple[int, str, list[str] | None], version: int = 4,
             synonyms: bool = False, docs: bool = False) -> Any:
    request = DescribeConfigsRequest(
        resources=[Resource(resource_type=t, resource_name=n, configuration_keys=k)
                   for t, n, k in resources],
        include_synonyms=synonyms, include_documentation=docs)
    return client.call(request, version).results


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_describe_topic_configs(client: Any, log_manager: Any, version: int) -> None:
    log_manager.create_topic("t", 1, {"retention.ms": "5000"})
    [result] = describe(client, (2, "t", None), version=version, synonyms=True,
                        docs=version >= 3)
    assert result.error_code == 0 and result.resource_name == "t"
    configs = {c.name: c for c in result.configs}
    retention = configs["retention.ms"]
    assert (retention.value, retention.config_source, retention.read_only) == ("5000", 1, False)
    assert [s.source for s in retention.synonyms] == [1, 5]
    segment = configs["segment.bytes"]
    assert (segment.value, segment.config_source) == ("1073741824", 5)
    assert configs["cleanup.policy"].value == "delete"
    assert configs["max.message.bytes"].value == "1048588"
    if version >= 3:
        assert retention.config_type == 5  # LONG
        assert retention.documentation


def test_describe_selected_keys_and_broker_overrides(make_client: Any,
                                                     log_manager: Any) -> None:
    client = make_client({"log.retention.ms": 60000})
    log_manager.create_topic("t", 1)
    [result] = describe(client, (2, "t", ["retention.ms", "nonexistent"]), synonyms=True)
    [retention] = result.configs
    assert (retention.value, retention.config_source) == ("60000", 4)  # STATIC_BROKER_CONFIG
    assert retention.synonyms[0].name == "log.retention.ms"


def test_describe_broker(client: Any) -> None:
    [result] = describe(client, (4, "1", None))
    configs = {c.name: c for c in result.configs}
    assert result.error_code == 0
    assert configs["num.partitions"].value == "2"
    assert configs["num.partitions"].config_source == 4
    assert configs["log.segment.bytes"].config_source == 5
    assert configs["auto.create.topics.enable"].value == "true"
    assert configs["node.id"].value == "1"


def test_describe_errors(client: Any) -> None:
    results = describe(client, (2, "missing", None), (4, "7", None), (8, "1", None),
                       (3, "group", None))
    assert [r.error_code for r in results] == [3, 42, 42, 42]
    assert all(r.error_message for r in results)


@pytest.mark.parametrize("version", [0, 1])
def test_describe_cluster(client: Any, apis: Any, version: int) -> None:
    response = client.call(DescribeClusterRequest(include_cluster_authorized_operations=True),
                           version)
    assert response.error_code == 0
    assert response.cluster_id == apis.services.cluster_id
    assert response.controller_id == 1
    [broker] = response.brokers
    assert (broker.broker_id, broker.host, broker.port, broker.rack) == (1, "127.0.0.1", 19092,
                                                                          None)
    assert response.cluster_authorized_operations == 8096
    if version >= 1:
        wrong = client.call(DescribeClusterRequest(endpoint_type=2), 1)
        assert wrong.error_code == 114


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_find_coordinator_single_key(client: Any, version: int) -> None:
    response = client.call(FindCoordinatorRequest(key="group-a", key_type=0), version)
    assert (response.error_code, response.node_id, response.host, response.port) == (
        0, 1, "127.0.0.1", 19092)


@pytest.mark.parametrize("version", [4, 5, 6])
def test_find_coordinator_batched(client: Any, version: int) -> None:
    response = client.call(FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "b"]),
                           version)
    assert [(c.key, c.node_id, c.port, c.error_code) for c in response.coordinators] == [
        ("a", 1, 19092, 0), ("b", 1, 19092, 0)]
    share = client.call(FindCoordinatorRequest(key_type=2, coordinator_keys=["s"]), version)
    assert share.coordinators[0].error_code == 42


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4, 5])
def test_init_producer_id_allocates_unique_ids(client: Any, version: int) -> None:
    ids = set()
    for _ in range(5):
        response = client.call(InitProducerIdRequest(transactional_id=None,
                                                     transaction_timeout_ms=60000), version)
        assert response.error_code == 0 and response.producer_epoch == 0
        ids.add(response.producer_id)
    assert len(ids) == 5


def test_producer_ids_survive_a_restart(log_manager: Any) -> None:
    from samsa.broker.apis import KafkaApis

    first = KafkaApis(log_manager)
    issued = {first.services.producer_ids.generate() for _ in range(3)}
    first.close()
    second = KafkaApis(log_manager)
    try:
        assert second.services.producer_ids.generate() > max(issued)
    finally:
        second.close()


def test_a_transactional_id_gets_its_producer_id_and_the_next_epoch(client: Any) -> None:
    first = client.call(InitProducerIdRequest(transactional_id="tx",
                                              transaction_timeout_ms=60000), 3)
    again = client.call(InitProducerIdRequest(transactional_id="tx",
                                              transaction_timeout_ms=60000), 3)
    assert (first.error_code, first.producer_epoch) == (0, 0)
    assert (again.error_code, again.producer_id, again.producer_epoch) == (
        0, first.producer_id, 1)
