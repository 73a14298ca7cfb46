"""AdminClient.incremental_alter_configs / alter_configs / describe_configs of groups and the
brokers' dynamic defaults, against the samsa broker."""

from __future__ import annotations

import pytest

from samsa.admin import (
    AdminClient,
    AlterConfigOp,
    AlterConfigOpType,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from samsa.broker import Broker
from samsa.errors import (
    InvalidConfigError,
    InvalidRequestError,
    UnknownTopicOrPartitionError,
)


def test_incremental_and_legacy_alter(admin: AdminClient, broker: Broker) -> None:
    admin.create_topics([NewTopic("c", 1, configs={"retention.ms": "5000"})])
    topic = ConfigResource.topic("c")
    assert admin.incremental_alter_configs({topic: [
        AlterConfigOp.set("segment.bytes", "65536"), AlterConfigOp.delete("retention.ms"),
        AlterConfigOp("cleanup.policy", "compact", AlterConfigOpType.APPEND)]}) == {topic: None}
    entries = admin.describe_configs(["c"], include_synonyms=True)[topic]
    assert isinstance(entries, dict)
    assert entries["segment.bytes"].value == "65536"
    assert entries["cleanup.policy"].value == "delete,compact"
    assert entries["retention.ms"].source == ConfigSource.DEFAULT_CONFIG
    assert [s.source for s in entries["segment.bytes"].synonyms] == [
        ConfigSource.DYNAMIC_TOPIC_CONFIG, ConfigSource.DEFAULT_CONFIG]
    assert broker.log_manager.get_log("c", 0).config.segment_bytes == 65536

    # AlterConfigs: the given set replaces everything else.
    assert admin.alter_configs({topic: {"retention.bytes": "1000000"}}) == {topic: None}
    assert broker.log_manager.topic("c").configs == {"retention.bytes": "1000000"}
    # validate_only checks without changing.
    admin.alter_configs({topic: {"retention.ms": "1"}}, validate_only=True)
    assert broker.log_manager.topic("c").configs == {"retention.bytes": "1000000"}


def test_alter_errors(admin: AdminClient, broker: Broker) -> None:
    admin.create_topics([NewTopic("e", 1)])
    with pytest.raises(InvalidConfigError, match="not LIST"):
        admin.incremental_alter_configs({ConfigResource.topic("e"): [
            AlterConfigOp("retention.ms", "1", AlterConfigOpType.APPEND)]})
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.alter_configs({ConfigResource.topic("ghost"): {"retention.ms": "1"}})
    outcome = admin.incremental_alter_configs(
        {ConfigResource.broker_default(): [AlterConfigOp.set("auto.create.topics.enable",
                                                             "false")]}, raise_errors=False)
    assert isinstance(outcome[ConfigResource.broker_default()], InvalidRequestError)


def test_broker_default_and_group_configs(admin: AdminClient, broker: Broker) -> None:
    default = ConfigResource.broker_default()
    admin.incremental_alter_configs({default: [AlterConfigOp.set("log.retention.bytes", "9")]})
    group = ConfigResource.group("g")
    described = admin.describe_configs(resources=[default, group])
    assert {k: (e.value, e.source) for k, e in described[default].items()} == {  # type: ignore[union-attr]
        "log.retention.bytes": ("9", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)}
    assert described[group]["consumer.session.timeout.ms"].value == "45000"  # type: ignore[index]
